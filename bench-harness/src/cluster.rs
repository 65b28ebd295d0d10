//! Preparing a run: creating the workload's topics and finding each partition's leader.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{call, ClientError};

/// Where each partition of the run's topics is led.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub topics: Vec<String>,
    pub partitions: u32,
    /// `(topic, partition)` → leader `host:port`.
    pub leaders: HashMap<(String, u32), String>,
}

/// Creates `topics` with `partitions` partitions of `replication_factor` replicas and `configs`,
/// one request per topic (Kafka's controller refuses more than 10 000 partitions in one
/// request with POLICY_VIOLATION).
pub fn create_topics(
    bootstrap: &str,
    topics: &[String],
    (partitions, replication_factor): (u32, u32),
    configs: &std::collections::BTreeMap<String, String>,
) -> Result<(), ClientError> {
    for topic in topics {
        create_topic(bootstrap, topic, (partitions, replication_factor), configs)?;
    }
    Ok(())
}

fn create_topic(
    bootstrap: &str,
    topic: &str,
    (partitions, replication_factor): (u32, u32),
    configs: &std::collections::BTreeMap<String, String>,
) -> Result<(), ClientError> {
    let mut c = CreatableTopic::default();
    c.name = TopicName(StrBytes::from_string(topic.to_owned()));
    c.num_partitions = partitions as i32;
    c.replication_factor = replication_factor as i16;
    c.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut cc = CreatableTopicConfig::default();
            cc.name = StrBytes::from_string(k.clone());
            cc.value = Some(StrBytes::from_string(v.clone()));
            cc
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = vec![c];
    let resp: CreateTopicsResponse = call(bootstrap, ApiKey::CreateTopics, 4, &req)?;
    for t in resp.topics {
        if t.error_code != 0 {
            return Err(ClientError::Broker(format!(
                "creating topic {}: error {}",
                t.name.0, t.error_code
            )));
        }
    }
    Ok(())
}

/// Deletes `topics` (a search's trial topics: their data is not kept on the disk).
pub fn delete_topics(bootstrap: &str, topics: &[String]) -> Result<(), ClientError> {
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 30_000;
    req.topic_names = topics
        .iter()
        .map(|t| TopicName(StrBytes::from_string(t.clone())))
        .collect();
    let resp: DeleteTopicsResponse = call(bootstrap, ApiKey::DeleteTopics, 4, &req)?;
    for r in resp.responses {
        if r.error_code != 0 {
            return Err(ClientError::Broker(format!(
                "deleting topic {:?}: error {}",
                r.name.map(|n| n.0.to_string()),
                r.error_code
            )));
        }
    }
    Ok(())
}

/// Waits until every partition has a leader (up to 30 s, and 20 ms more per partition: Kafka
/// takes over 30 s to elect leaders for 10 000), and returns them.
pub fn discover(
    bootstrap: &str,
    topics: &[String],
    partitions: u32,
) -> Result<Cluster, ClientError> {
    let all = topics.len() as u64 * u64::from(partitions);
    let wait = Duration::from_secs(30) + Duration::from_millis(20 * all);
    let deadline = Instant::now() + wait;
    loop {
        let mut req = MetadataRequest::default();
        req.topics = Some(
            topics
                .iter()
                .map(|t| {
                    let mut mt = MetadataRequestTopic::default();
                    mt.name = Some(TopicName(StrBytes::from_string(t.clone())));
                    mt
                })
                .collect(),
        );
        let md: MetadataResponse = call(bootstrap, ApiKey::Metadata, 9, &req)?;
        let brokers: HashMap<i32, String> = md
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        let mut leaders = HashMap::new();
        for t in &md.topics {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            for p in &t.partitions {
                if let Some(addr) = brokers.get(&p.leader_id.0) {
                    leaders.insert((name.clone(), p.partition_index as u32), addr.clone());
                }
            }
        }
        if leaders.len() == topics.len() * partitions as usize {
            return Ok(Cluster {
                topics: topics.to_vec(),
                partitions,
                leaders,
            });
        }
        if Instant::now() > deadline {
            return Err(ClientError::Broker(format!(
                "only {} of {} partitions have a leader after {} s",
                leaders.len(),
                topics.len() * partitions as usize,
                wait.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
