//! `ringlog topic ...`: create, list, describe and delete topics of a running node over the
//! Kafka protocol (CreateTopics, Metadata, DescribeConfigs, DeleteTopics), like
//! `kafka-topics.sh`.

use super::admin_client::{check, AdminClient};
use super::CliError;

/// `ringlog topic create NAME --partitions N --replication-factor R [--config k=v]...`;
/// `shape` is (partitions, replication factor), -1 for the broker's defaults.
pub fn create(
    bootstrap: &str,
    name: &str,
    shape: (i32, i16),
    configs: &[(String, String)],
) -> Result<String, CliError> {
    AdminClient::connect(bootstrap)?.create_topic(name, shape, configs)?;
    Ok(format!("Created topic {name}."))
}

/// `ringlog topic delete NAME`.
pub fn delete(bootstrap: &str, name: &str) -> Result<String, CliError> {
    AdminClient::connect(bootstrap)?.delete_topic(name)?;
    Ok(format!("Deleted topic {name}."))
}

/// `ringlog topic list`.
pub fn list(bootstrap: &str) -> Result<String, CliError> {
    let md = AdminClient::connect(bootstrap)?.metadata(None)?;
    let mut names: Vec<String> = md
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    Ok(names.join("\n"))
}

/// `ringlog topic describe NAME`.
pub fn describe(bootstrap: &str, topic: &str) -> Result<String, CliError> {
    let mut c = AdminClient::connect(bootstrap)?;
    let md = c.metadata(Some(&[topic]))?;
    let t = md.topics.first().ok_or(CliError::Empty("Metadata"))?;
    check(t.error_code, None).map_err(|e| CliError::Refused(format!("topic '{topic}': {e}")))?;
    let mut out = format!("Topic: {topic}\tPartitionCount: {}\n", t.partitions.len());
    for p in &t.partitions {
        out.push_str(&format!(
            "\tPartition: {}\tLeader: {}\tReplicas: {:?}\tIsr: {:?}\n",
            p.partition_index,
            p.leader_id.0,
            p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>()
        ));
    }
    for (k, v) in c.topic_configs(topic)? {
        out.push_str(&format!("\t{k}={v}\n"));
    }
    Ok(out.trim_end().to_owned())
}
