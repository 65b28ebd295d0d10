//! Request handlers, one file per API, and the table of versions advertised: exactly those
//! implemented. Errors are mapped to Kafka error codes in `errors.rs`.

pub mod acls;
pub mod alter_configs;
pub mod api_versions;
pub mod authorized;
pub mod client;
pub mod client_quotas;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod features;
pub mod fetch;
pub mod groups;
pub mod init_producer_id;
pub mod list_config_resources;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod reassignments;
pub mod scram_credentials;
pub mod topic_propagation;
pub mod topics;
pub mod transactions;

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
    // v10 leader hints (KIP-951, left empty), v11 TRANSACTION_ABORTABLE, v12 transaction
    // version 2 (a transactional produce adds its partition to the transaction).
    (ApiKey::Produce, 0, 12),
    // v13+ names topics by id; v15+ carries the fetcher's ReplicaState.
    (ApiKey::Fetch, 4, 17),
    // v7 MAX_TIMESTAMP, v8 EARLIEST_LOCAL, v9 LATEST_TIERED, v10 a timeout for tiered lookups.
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 5),
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
    // KIP-848: advertised only when `group.coordinator.rebalance.protocols` lists `consumer`
    // (`api_versions.rs`). v1: the member makes its id, regex subscriptions.
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
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
    // Served by the connection (`server/authenticate.rs`). v0 is listed because librdkafka
    // looks for it before it uses SASL at all, but a v0 handshake (raw SASL tokens after it,
    // no SaslAuthenticate) is refused with ILLEGAL_SASL_STATE: every client family tested
    // speaks v1.
    (ApiKey::SaslHandshake, 0, 1),
    // v1 carries the session lifetime (KIP-368), v2 flexible versions.
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    // Client quotas (KIP-546), enforced on produce and fetch bytes, request time and topic
    // mutations (`quotas/`).
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // Kafka 4.x serves 2-3 (KIP-896 removed 0-1).
    (ApiKey::DescribeAcls, 2, 3),
    (ApiKey::CreateAcls, 2, 3),
    (ApiKey::DeleteAcls, 2, 3),
    // v1 carries allow_replication_factor_change (KIP-860).
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    // v1 carries the election type (PREFERRED, UNCLEAN), v2 flexible versions.
    (ApiKey::ElectLeaders, 0, 2),
    // Transactions, transaction version 0/1 (explicit AddPartitionsToTxn by clients, v0-3; v4-5
    // are the partition leaders' verification of KIP-890 part 1).
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    // v5 of both: transaction version 2 (EndTxn answers the bumped epoch; TxnOffsetCommit adds
    // the group's offsets partition itself, no AddOffsetsToTxn).
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    // v2: the transaction version of each marker (KIP-1228, Kafka 4.2).
    (ApiKey::WriteTxnMarkers, 1, 2),
    (ApiKey::DescribeTransactions, 0, 0),
    // v2: a transactional id pattern (RE2 syntax).
    (ApiKey::ListTransactions, 0, 2),
    // The finalized `transaction.version`, cluster-wide (`kafka-features upgrade|downgrade`).
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
];

pub fn supported_versions(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|&(_, a, b)| (a, b))
}

/// Per-partition answers grouped by topic, topics in name order and partitions in the order
/// given (responses that list results per topic).
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut topics: std::collections::BTreeMap<String, Vec<T>> = Default::default();
    for (topic, item) in items {
        topics.entry(topic).or_default().push(item);
    }
    topics.into_iter().collect()
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
        RequestKind::ApiVersions(_) => {
            let txn_version = crate::txn_coordinator::cluster_version(&**ctx);
            let epoch = ctx.snapshot().features_epoch();
            let consumer = crate::group_coordinator::Host::settings(&**ctx).consumer_protocol;
            encode(&api_versions::handle(txn_version, epoch, consumer), version)?
        }
        RequestKind::Metadata(r) => {
            encode(&metadata::handle(ctx, client, r, version).await, version)?
        }
        RequestKind::Produce(r) => match produce::handle(ctx, client, r, version).await {
            Some(resp) => encode(&resp, version)?,
            None => return Ok(None),
        },
        RequestKind::Fetch(r) => fetch::handle(ctx, client, r, version).await?,
        RequestKind::ListOffsets(r) => encode(
            &list_offsets::handle(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::CreateTopics(r) => {
            encode(&topics::create(ctx, client, r, version).await, version)?
        }
        RequestKind::DeleteTopics(r) => {
            encode(&topics::delete(ctx, client, r, version).await, version)?
        }
        RequestKind::CreatePartitions(r) => encode(
            &topics::create_partitions(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::DescribeConfigs(r) => {
            encode(&describe_configs::handle(ctx, client, r, version), version)?
        }
        RequestKind::InitProducerId(r) => encode(
            &init_producer_id::handle(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::AddPartitionsToTxn(r) => encode(
            &transactions::add_partitions(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::DescribeTransactions(r) => encode(
            &transactions::describe_transactions(ctx, client, r),
            version,
        )?,
        RequestKind::ListTransactions(r) => encode(
            &transactions::list_transactions(ctx, client, r, version),
            version,
        )?,
        RequestKind::DescribeProducers(r) => {
            encode(&transactions::describe_producers(ctx, client, r), version)?
        }
        RequestKind::AddOffsetsToTxn(r) => encode(
            &transactions::add_offsets(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::TxnOffsetCommit(r) => encode(
            &transactions::txn_offset_commit(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::EndTxn(r) => encode(
            &transactions::end_txn(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::WriteTxnMarkers(r) => encode(
            &transactions::write_txn_markers(ctx, client, r).await,
            version,
        )?,
        RequestKind::FindCoordinator(r) => encode(
            &groups::find_coordinator(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::JoinGroup(r) => encode(&groups::join(ctx, client, r, version).await, version)?,
        RequestKind::SyncGroup(r) => encode(&groups::sync(ctx, client, r, version).await, version)?,
        RequestKind::Heartbeat(r) => encode(&groups::heartbeat(ctx, client, r), version)?,
        RequestKind::LeaveGroup(r) => {
            encode(&groups::leave(ctx, client, r, version).await, version)?
        }
        RequestKind::OffsetCommit(r) => encode(
            &groups::offset_commit(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::OffsetFetch(r) => {
            encode(&groups::offset_fetch(ctx, client, r, version), version)?
        }
        RequestKind::ListGroups(r) => encode(&groups::list(ctx, client, r, version), version)?,
        RequestKind::DescribeGroups(r) => {
            encode(&groups::describe(ctx, client, r, version), version)?
        }
        RequestKind::ConsumerGroupHeartbeat(r) => encode(
            &groups::consumer_heartbeat(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::ConsumerGroupDescribe(r) => {
            encode(&groups::consumer_describe(ctx, client, r, version), version)?
        }
        RequestKind::DeleteGroups(r) => encode(&groups::delete(ctx, client, r).await, version)?,
        RequestKind::OffsetDelete(r) => {
            encode(&groups::offset_delete(ctx, client, r).await, version)?
        }
        RequestKind::DescribeCluster(r) => {
            encode(&describe_cluster::handle(ctx, client, r, version), version)?
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            encode(&alter_configs::incremental(ctx, client, r).await, version)?
        }
        RequestKind::AlterConfigs(r) => {
            encode(&alter_configs::alter_all(ctx, client, r).await, version)?
        }
        RequestKind::DescribeTopicPartitions(r) => {
            encode(&describe_topic_partitions::handle(ctx, client, r), version)?
        }
        RequestKind::AlterClientQuotas(r) => {
            encode(&client_quotas::alter(ctx, client, r).await, version)?
        }
        RequestKind::DescribeClientQuotas(r) => {
            encode(&client_quotas::describe(ctx, client, r), version)?
        }
        RequestKind::ListConfigResources(r) => encode(
            &list_config_resources::handle(ctx, client, r, version),
            version,
        )?,
        RequestKind::DescribeLogDirs(r) => {
            encode(&describe_log_dirs::handle(ctx, client, r), version)?
        }
        RequestKind::DeleteRecords(r) => {
            encode(&delete_records::handle(ctx, client, r).await, version)?
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            encode(&offset_for_leader_epoch::handle(ctx, client, r), version)?
        }
        RequestKind::AlterUserScramCredentials(r) => {
            encode(&scram_credentials::alter(ctx, client, r).await, version)?
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            encode(&scram_credentials::describe(ctx, client, r), version)?
        }
        RequestKind::CreateAcls(r) => encode(&acls::create(ctx, client, r).await, version)?,
        RequestKind::DescribeAcls(r) => encode(&acls::describe(ctx, client, r), version)?,
        RequestKind::DeleteAcls(r) => encode(&acls::delete(ctx, client, r).await, version)?,
        RequestKind::AlterPartitionReassignments(r) => {
            encode(&reassignments::alter(ctx, client, r).await, version)?
        }
        RequestKind::ElectLeaders(r) => encode(
            &elect_leaders::handle(ctx, client, r, version).await,
            version,
        )?,
        RequestKind::UpdateFeatures(r) => {
            encode(&features::handle(ctx, client, r, version).await, version)?
        }
        RequestKind::ListPartitionReassignments(r) => {
            encode(&reassignments::list(ctx, client, r), version)?
        }
        other => return Err(HandlerError::Unhandled(format!("{other:?}"))),
    };
    Ok(Some(out))
}
