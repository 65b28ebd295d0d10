//! The null broker's answers, one function per API, each from the in-memory log alone.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, FetchRequest, FetchResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::memory_log::MemoryLog;
use super::{decode, encode, ConnectionError};

/// The one broker's id.
const NODE_ID: i32 = 0;
/// Kafka's `num.partitions` default, for a CreateTopics that leaves the count to the broker.
const DEFAULT_PARTITIONS: i32 = 1;
/// The most partitions one topic may have here (the bound on the in-memory table).
const TOPIC_PARTITIONS_MAX: i32 = 100_000;
/// The ApiVersions version answered when a client asks for one not served (Kafka answers v0).
const API_VERSIONS_FALLBACK: i16 = 0;

/// APIs served, `(key, min version, max version)`; advertised in ApiVersions as they are.
const SERVED: [(ApiKey, i16, i16); 6] = [
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
];

// Kafka's error codes used here, from the protocol crate's table.
const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();
const TOPIC_ALREADY_EXISTS: i16 = ResponseError::TopicAlreadyExists.code();
const INVALID_PARTITIONS: i16 = ResponseError::InvalidPartitions.code();
const INVALID_REPLICATION_FACTOR: i16 = ResponseError::InvalidReplicationFactor.code();
const INVALID_TOPIC: i16 = ResponseError::InvalidTopicException.code();
const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();

/// The broker's address and records.
pub struct Endpoint {
    pub host: String,
    pub port: i32,
    pub log: MemoryLog,
}

/// The API of `key` at `version` if it is served (ApiVersions at any version: a version not
/// served is answered with UNSUPPORTED_VERSION, as Kafka answers it).
pub fn served(key: i16, version: i16) -> Option<ApiKey> {
    let api = ApiKey::try_from(key).ok()?;
    SERVED
        .iter()
        .find(|(k, min, max)| {
            *k == api && (api == ApiKey::ApiVersions || (*min..=*max).contains(&version))
        })
        .map(|(k, _, _)| *k)
}

/// The response body to a request `body` of `api` v`version`; `None` for acks=0.
pub fn handle(
    endpoint: &Endpoint,
    api: ApiKey,
    version: i16,
    body: Bytes,
) -> Result<Option<Bytes>, ConnectionError> {
    let response = match api {
        ApiKey::ApiVersions => return api_versions(version).map(Some),
        ApiKey::Metadata => encode(
            api,
            version,
            &metadata(endpoint, decode(api, version, body)?),
        )?,
        ApiKey::CreateTopics => encode(
            api,
            version,
            &create_topics(&endpoint.log, decode(api, version, body)?),
        )?,
        ApiKey::DeleteTopics => encode(
            api,
            version,
            &delete_topics(&endpoint.log, decode(api, version, body)?),
        )?,
        ApiKey::Produce => {
            let request: ProduceRequest = decode(api, version, body)?;
            let acks = request.acks;
            let response = produce(&endpoint.log, request);
            if acks == 0 {
                return Ok(None);
            }
            encode(api, version, &response)?
        }
        ApiKey::Fetch => encode(
            api,
            version,
            &fetch(&endpoint.log, decode(api, version, body)?),
        )?,
        _ => unreachable!("served() lets through only the APIs above"),
    };
    Ok(Some(response))
}

fn api_versions(version: i16) -> Result<Bytes, ConnectionError> {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = SERVED
        .iter()
        .map(|(k, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = *k as i16;
            v.min_version = *min;
            v.max_version = *max;
            v
        })
        .collect();
    let (_, _, max) = SERVED
        .iter()
        .find(|(k, _, _)| *k == ApiKey::ApiVersions)
        .expect("ApiVersions is served");
    if version > *max {
        r.error_code = UNSUPPORTED_VERSION;
        return encode(ApiKey::ApiVersions, API_VERSIONS_FALLBACK, &r);
    }
    encode(ApiKey::ApiVersions, version, &r)
}

fn metadata(endpoint: &Endpoint, request: MetadataRequest) -> MetadataResponse {
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(NODE_ID);
    broker.host = StrBytes::from_string(endpoint.host.clone());
    broker.port = endpoint.port;
    let wanted: Vec<(String, Option<i32>)> = match request.topics {
        None => endpoint
            .log
            .topics()
            .into_iter()
            .map(|(n, p)| (n, Some(p)))
            .collect(),
        Some(topics) => topics
            .into_iter()
            .filter_map(|t| t.name)
            .map(|n| {
                let name = n.0.to_string();
                let count = endpoint.log.partition_count(&name);
                (name, count)
            })
            .collect(),
    };
    let mut r = MetadataResponse::default();
    r.brokers = vec![broker];
    r.controller_id = BrokerId(NODE_ID);
    r.cluster_id = Some(StrBytes::from_static_str("ringlog-null-broker"));
    r.topics = wanted
        .into_iter()
        .map(|(name, count)| {
            let mut t = MetadataResponseTopic::default();
            t.name = Some(TopicName(StrBytes::from_string(name)));
            match count {
                None => t.error_code = UNKNOWN_TOPIC_OR_PARTITION,
                Some(n) => {
                    t.partitions = (0..n)
                        .map(|p| {
                            let mut mp = MetadataResponsePartition::default();
                            mp.partition_index = p;
                            mp.leader_id = BrokerId(NODE_ID);
                            mp.leader_epoch = 0;
                            mp.replica_nodes = vec![BrokerId(NODE_ID)];
                            mp.isr_nodes = vec![BrokerId(NODE_ID)];
                            mp
                        })
                        .collect();
                }
            }
            t
        })
        .collect();
    r
}

fn create_topics(log: &MemoryLog, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut r = CreateTopicsResponse::default();
    r.topics = request
        .topics
        .into_iter()
        .map(|t| {
            let mut res = CreatableTopicResult::default();
            let partitions = if t.num_partitions == -1 {
                DEFAULT_PARTITIONS
            } else {
                t.num_partitions
            };
            let name = t.name.0.to_string();
            res.error_code = if name.is_empty() || name.len() > 249 {
                INVALID_TOPIC
            } else if !(1..=TOPIC_PARTITIONS_MAX).contains(&partitions) {
                INVALID_PARTITIONS
            } else if !matches!(t.replication_factor, -1 | 1) {
                INVALID_REPLICATION_FACTOR
            } else if request.validate_only {
                if log.partition_count(&name).is_some() {
                    TOPIC_ALREADY_EXISTS
                } else {
                    0
                }
            } else if log.create_topic(&name, partitions) {
                0
            } else {
                TOPIC_ALREADY_EXISTS
            };
            if res.error_code == INVALID_REPLICATION_FACTOR {
                res.error_message = Some(StrBytes::from_static_str(
                    "the null broker is one broker: replication factor 1",
                ));
            }
            res.num_partitions = partitions;
            res.replication_factor = 1;
            res.name = t.name;
            res
        })
        .collect();
    r
}

fn delete_topics(log: &MemoryLog, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names = request
        .topic_names
        .into_iter()
        .chain(request.topics.into_iter().filter_map(|t| t.name));
    let mut r = DeleteTopicsResponse::default();
    r.responses = names
        .map(|n| {
            let mut res = DeletableTopicResult::default();
            if !log.delete_topic(n.0.as_str()) {
                res.error_code = UNKNOWN_TOPIC_OR_PARTITION;
            }
            res.name = Some(n);
            res
        })
        .collect();
    r
}

fn produce(log: &MemoryLog, request: ProduceRequest) -> ProduceResponse {
    let mut r = ProduceResponse::default();
    r.responses = request
        .topic_data
        .into_iter()
        .map(|t| {
            let topic = t.name.0.to_string();
            let mut tr = TopicProduceResponse::default();
            tr.partition_responses = t
                .partition_data
                .into_iter()
                .map(|p| {
                    let mut pr = PartitionProduceResponse::default();
                    pr.index = p.index;
                    pr.log_append_time_ms = -1;
                    let records = p.records.unwrap_or_default();
                    match log.append(&(topic.clone(), p.index), &records) {
                        Ok(base) => pr.base_offset = base,
                        Err(e) => {
                            pr.error_code = e.code();
                            pr.base_offset = -1;
                        }
                    }
                    pr
                })
                .collect();
            tr.name = t.name;
            tr
        })
        .collect();
    r
}

fn fetch(log: &MemoryLog, request: FetchRequest) -> FetchResponse {
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut wanted = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let max = usize::try_from(p.partition_max_bytes)
                .unwrap_or(0)
                .min(max_bytes);
            wanted.push(((t.topic.0.to_string(), p.partition), p.fetch_offset, max));
        }
    }
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let mut answers = log.read(&wanted, min_bytes, deadline).into_iter();
    let mut r = FetchResponse::default();
    r.responses = request
        .topics
        .into_iter()
        .map(|t| {
            let mut tr = FetchableTopicResponse::default();
            tr.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pd = PartitionData::default();
                    pd.partition_index = p.partition;
                    match answers.next().expect("one answer per partition asked") {
                        Ok(read) => {
                            pd.high_watermark = read.high_watermark;
                            pd.last_stable_offset = read.high_watermark;
                            pd.log_start_offset = read.log_start_offset;
                            let mut records = BytesMut::new();
                            for b in read.batches {
                                records.extend_from_slice(&b);
                            }
                            pd.records = Some(records.freeze());
                        }
                        Err(e) => {
                            pd.error_code = e.code();
                            pd.high_watermark = -1;
                            pd.last_stable_offset = -1;
                            pd.log_start_offset = -1;
                            pd.records = Some(Bytes::new());
                        }
                    }
                    pd
                })
                .collect();
            tr.topic = t.topic;
            tr
        })
        .collect();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_versions_are_served() {
        assert_eq!(served(0, 7), Some(ApiKey::Produce));
        assert_eq!(served(0, 2), None);
        assert_eq!(served(1, 13), None);
        assert_eq!(served(18, 9), Some(ApiKey::ApiVersions));
        assert_eq!(served(11, 5), None); // JoinGroup
        assert_eq!(served(-3, 0), None);
    }

    #[test]
    fn api_versions_past_the_last_served_is_answered_at_v0_with_unsupported_version() {
        let mut body = api_versions(9).unwrap();
        let r: ApiVersionsResponse =
            kafka_protocol::protocol::Decodable::decode(&mut body, 0).unwrap();
        assert_eq!(r.error_code, UNSUPPORTED_VERSION);
        assert_eq!(r.api_keys.len(), SERVED.len());
    }
}
