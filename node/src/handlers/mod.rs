//! Request handlers, one file per API, and the table of versions advertised: exactly those
//! implemented. Errors are mapped to Kafka error codes in `errors.rs`.

pub mod alter_configs;
pub mod api_versions;
pub mod authorized;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_topic_partitions;
pub mod fetch;
pub mod groups;
pub mod init_producer_id;
pub mod list_config_resources;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod topics;

use std::rc::Rc;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::protocol::Encodable;

use crate::error::HandlerError;
use crate::server::response::Outgoing;
use crate::shard::ShardCtx;

/// `(min, max)` version of every API the broker implements.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    // Produce from v0 for old librdkafka's ApiVersions handling; records must be format v2,
    // which only v3+ carries, so v0–v2 requests are answered with an error.
    (ApiKey::Produce, 0, 9),
    // v13+ names topics by id; v15+ carries the fetcher's ReplicaState.
    (ApiKey::Fetch, 4, 17),
    // v7 MAX_TIMESTAMP, v8 EARLIEST_LOCAL, v9 LATEST_TIERED, v10 a timeout for tiered lookups.
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // Kafka 4.x serves 2-4 (KIP-896 removed 0-1).
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    // v0 was ListClientMetricsResources; v1 (Kafka 4.1) lists topics, brokers and groups.
    (ApiKey::ListConfigResources, 0, 1),
];

pub fn supported_versions(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|&(_, a, b)| (a, b))
}

/// Encodes a response body.
pub fn encode<T: Encodable>(body: &T, version: i16) -> Result<Outgoing, HandlerError> {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version)
        .map_err(|e| HandlerError::Encode(e.to_string()))?;
    Ok(Outgoing::from_bytes(buf.freeze()))
}

/// Runs the handler of a decoded request. `Ok(None)`: no response (produce with acks=0).
/// `Err`: the request cannot be answered; the connection is closed.
pub async fn dispatch(
    ctx: &Rc<ShardCtx>,
    client: &groups::Client,
    request: RequestKind,
    version: i16,
) -> Result<Option<Outgoing>, HandlerError> {
    let out = match request {
        RequestKind::ApiVersions(_) => encode(&api_versions::handle(), version)?,
        RequestKind::Metadata(r) => encode(&metadata::handle(ctx, r, version).await, version)?,
        RequestKind::Produce(r) => {
            let acks = r.acks;
            let resp = produce::handle(ctx, r, version).await;
            if acks == 0 {
                return Ok(None);
            }
            encode(&resp, version)?
        }
        RequestKind::Fetch(r) => fetch::handle(ctx, r, version).await?,
        RequestKind::ListOffsets(r) => {
            encode(&list_offsets::handle(ctx, r, version).await, version)?
        }
        RequestKind::CreateTopics(r) => encode(&topics::create(ctx, r, version).await, version)?,
        RequestKind::DeleteTopics(r) => encode(&topics::delete(ctx, r, version).await, version)?,
        RequestKind::CreatePartitions(r) => {
            encode(&topics::create_partitions(ctx, r).await, version)?
        }
        RequestKind::DescribeConfigs(r) => {
            encode(&describe_configs::handle(ctx, r, version), version)?
        }
        RequestKind::InitProducerId(r) => encode(&init_producer_id::handle(ctx, r), version)?,
        RequestKind::FindCoordinator(r) => {
            encode(&groups::find_coordinator(ctx, r, version).await, version)?
        }
        RequestKind::JoinGroup(r) => encode(&groups::join(ctx, client, r, version).await, version)?,
        RequestKind::SyncGroup(r) => encode(&groups::sync(ctx, r, version).await, version)?,
        RequestKind::Heartbeat(r) => encode(&groups::heartbeat(ctx, r), version)?,
        RequestKind::LeaveGroup(r) => encode(&groups::leave(ctx, r, version).await, version)?,
        RequestKind::OffsetCommit(r) => {
            encode(&groups::offset_commit(ctx, r, version).await, version)?
        }
        RequestKind::OffsetFetch(r) => encode(&groups::offset_fetch(ctx, r, version), version)?,
        RequestKind::ListGroups(r) => encode(&groups::list(ctx, r, version), version)?,
        RequestKind::DescribeGroups(r) => encode(&groups::describe(ctx, r, version), version)?,
        RequestKind::DeleteGroups(r) => encode(&groups::delete(ctx, r).await, version)?,
        RequestKind::OffsetDelete(r) => encode(&groups::offset_delete(ctx, r).await, version)?,
        RequestKind::DescribeCluster(r) => {
            encode(&describe_cluster::handle(ctx, r, version), version)?
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            encode(&alter_configs::incremental(ctx, r).await, version)?
        }
        RequestKind::AlterConfigs(r) => encode(&alter_configs::alter_all(ctx, r).await, version)?,
        RequestKind::DescribeTopicPartitions(r) => {
            encode(&describe_topic_partitions::handle(ctx, r), version)?
        }
        RequestKind::ListConfigResources(r) => {
            encode(&list_config_resources::handle(ctx, r, version), version)?
        }
        RequestKind::DescribeLogDirs(r) => encode(&describe_log_dirs::handle(ctx, r), version)?,
        RequestKind::DeleteRecords(r) => encode(&delete_records::handle(ctx, r).await, version)?,
        RequestKind::OffsetForLeaderEpoch(r) => {
            encode(&offset_for_leader_epoch::handle(ctx, r), version)?
        }
        other => return Err(HandlerError::Unhandled(format!("{other:?}"))),
    };
    Ok(Some(out))
}
