//! The transactional producer's requests — AddPartitionsToTxn (v0-3, a client's), EndTxn —
//! answered by the transaction coordinator (`txn_coordinator/`), and WriteTxnMarkers, which a
//! coordinator sends to the leaders of a transaction's partitions over the inter-broker
//! listener. InitProducerId with a transactional id is in `init_producer_id.rs`.

use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::ResponseError;
use transactions::coordinator::ProducerIdAndEpoch;

use crate::handlers::authorized::{authorized, on_cluster};
use crate::handlers::groups::Client;
use crate::limits::TXN_STATE_WRITE_TIMEOUT;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::{now_ms, ShardCtx};
use crate::txn_coordinator::{self, txn_error};

/// AddPartitionsToTxn v0-3 (one transaction, a client's). Every partition gets the same answer:
/// the coordinator's, or — when some partition cannot be added at all (not authorized,
/// unknown) — those partitions their error and the others OPERATION_NOT_ATTEMPTED, as Kafka.
pub async fn add_partitions(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.0.to_string();
    let mut wanted: Vec<((String, i32), Option<ResponseError>)> = Vec::new();
    for t in &req.v3_and_below_topics {
        let name = t.name.0.to_string();
        let problem = if !authorized(ctx, client, Operation::Write, ResourceType::Topic, &name) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else if crate::metadata::is_internal(&name) {
            // Offsets join a transaction through AddOffsetsToTxn.
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            None
        };
        for &p in &t.partitions {
            let unknown = ctx.snapshot().partition(&name, p).is_none();
            let problem = problem.or(unknown.then_some(ResponseError::UnknownTopicOrPartition));
            wanted.push(((name.clone(), p), problem));
        }
    }
    let all = |e: Option<ResponseError>| -> Vec<((String, i32), Option<ResponseError>)> {
        wanted.iter().map(|(tp, _)| (tp.clone(), e)).collect()
    };
    let answers = if !authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &id,
    ) {
        all(Some(ResponseError::TransactionalIdAuthorizationFailed))
    } else if wanted.iter().any(|(_, p)| p.is_some()) {
        wanted
            .iter()
            .map(|(tp, p)| {
                (
                    tp.clone(),
                    Some(p.unwrap_or(ResponseError::OperationNotAttempted)),
                )
            })
            .collect()
    } else {
        let producer = ProducerIdAndEpoch {
            producer_id: req.v3_and_below_producer_id.0,
            epoch: req.v3_and_below_producer_epoch,
        };
        let partitions: Vec<(String, i32)> = wanted.iter().map(|(tp, _)| tp.clone()).collect();
        let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
        let added = txn_coordinator::add_partitions(host, &id, producer, &partitions, now_ms());
        all(added.await.err().map(|e| txn_error(e, version, 2)))
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    for (topic, results) in super::by_topic(answers.into_iter().map(|((t, p), e)| (t, (p, e)))) {
        let mut tr = AddPartitionsToTxnTopicResult::default();
        tr.name = kafka_protocol::messages::TopicName(topic.into());
        tr.results_by_partition = results
            .into_iter()
            .map(|(p, e)| {
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(p)
                    .with_partition_error_code(e.map_or(0, |e| e.code()))
            })
            .collect();
        resp.results_by_topic_v3_and_below.push(tr);
    }
    resp
}

/// EndTxn v0-4: the transaction prepared to commit or abort (its markers follow).
pub async fn end_txn(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if !authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &id,
    ) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return resp;
    }
    let producer = ProducerIdAndEpoch {
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
    };
    let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
    if let Err(e) = txn_coordinator::end_txn(host, &id, producer, req.committed, now_ms()).await {
        resp.error_code = txn_error(e, version, 2).code();
    }
    resp
}

/// WriteTxnMarkers v1 (from a transaction coordinator, CLUSTER_ACTION): each marker appended to
/// each of its partitions this shard leads, answered once every in-sync replica has it.
pub async fn write_txn_markers(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = on_cluster(ctx, client, Operation::ClusterAction);
    let now = now_ms();
    let mut resp = WriteTxnMarkersResponse::default();
    for m in req.markers {
        let mut result = WritableTxnMarkerResult::default().with_producer_id(m.producer_id);
        for t in &m.topics {
            let name = t.name.0.to_string();
            let m = &m;
            let writes = t.partition_indexes.iter().map(|&p| {
                let name = name.clone();
                async move {
                    let error = if !allowed {
                        Some(ResponseError::ClusterAuthorizationFailed)
                    } else {
                        write_marker(ctx, (&name, p), m, now).await.err()
                    };
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(error.map_or(0, |e| e.code()))
                }
            });
            let partitions = futures_util::future::join_all(writes).await;
            result.topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        resp.markers.push(result);
    }
    resp
}

/// Appends one marker to one partition this shard leads and waits for the high watermark.
async fn write_marker(
    ctx: &Rc<ShardCtx>,
    (topic, p): (&str, i32),
    m: &kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker,
    now: i64,
) -> Result<(), ResponseError> {
    let part = ctx.writable_partition(topic, p).map_err(|r| r.error)?;
    let epoch = ctx.leader_epoch(&part);
    let appended = part
        .append_marker(
            m.producer_id.0,
            m.producer_epoch,
            m.transaction_result,
            m.coordinator_epoch,
            epoch,
            now,
        )
        .await
        .map_err(|r| {
            tracing::debug!(topic, partition = p, error = %r.message, "marker refused");
            r.error
        })?;
    let done = async { Some(part.wait_acknowledgeable(&appended).await) };
    let expired = async {
        glommio::timer::sleep(TXN_STATE_WRITE_TIMEOUT).await;
        None
    };
    match futures_lite::future::or(done, expired).await {
        Some(r) => r.map_err(|r| r.error),
        None => Err(ResponseError::RequestTimedOut),
    }
}
