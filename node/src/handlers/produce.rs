//! Produce, in two halves (see `partition/append.rs`): [`append`] appends each partition's
//! record batch in request order and returns at once; [`complete`] waits until every appended
//! partition may be acknowledged and builds the response. A connection runs [`append`] for the
//! next request while earlier ones are still in [`complete`], so one write and one fsync
//! serve all of them. Records must be message format v2 (Produce v3+).

use crate::handlers::authorized::authorized;
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use iouring_log::BatchHeader;
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::limits::PRODUCE_ACK_TIMEOUT_MAX_MS;
use crate::partition::accept::accept;
use crate::partition::append::{batch_refused, Appended, Refused};
use crate::partition::txns::TxnStart;
use crate::partition::Partition;
use crate::shard::{now_ms, ShardCtx};
use crate::txn_coordinator::TxnCheck;
use transactions::coordinator::ProducerIdAndEpoch;

/// Who must have a produce's records before it is answered: the request's `acks`, parsed once
/// where the request comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: the producer wants no answer at all.
    None,
    /// `acks=1`: the leader wrote them (and flushed them, where the flush policy asks).
    Leader,
    /// `acks=-1` (all): every in-sync replica has them (the high watermark passed them).
    All,
}

impl Acks {
    /// The wire's `acks`: 0, 1 or -1; anything else is INVALID_REQUIRED_ACKS for every partition.
    pub fn from_wire(acks: i16) -> Result<Acks, Refused> {
        match acks {
            0 => Ok(Acks::None),
            1 => Ok(Acks::Leader),
            -1 => Ok(Acks::All),
            other => Err(Refused::new(
                ResponseError::InvalidRequiredAcks,
                format!("acks={other} (allowed -1, 0, 1)"),
            )),
        }
    }
}

/// A produce request whose batches are appended; [`complete`] answers it.
pub struct PendingProduce {
    version: i16,
    /// The client's `producer_byte_rate` / `request_percentage` throttle (ms) the answer carries.
    pub throttle_ms: u32,
    /// `false` for `acks=0`: the request gets no answer.
    answered: bool,
    timeout: Duration,
    topics: Vec<(TopicName, Vec<PendingPartition>)>,
}

struct PendingPartition {
    index: i32,
    outcome: Result<(Rc<Partition>, Appended), Refused>,
}

/// The ordered append of every partition of the request, in request order.
pub async fn append(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ProduceRequest,
    version: i16,
) -> PendingProduce {
    let timeout_ms = req.timeout_ms.clamp(0, PRODUCE_ACK_TIMEOUT_MAX_MS);
    let acks = Acks::from_wire(req.acks);
    let mut pending = PendingProduce {
        version,
        throttle_ms: 0,
        answered: acks != Ok(Acks::None),
        timeout: Duration::from_millis(timeout_ms as u64),
        topics: Vec::with_capacity(req.topic_data.len()),
    };
    let verdicts = verify_transaction_starts(ctx, &req, version).await;
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let allowed = authorized(ctx, client, Operation::Write, ResourceType::Topic, &name);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for pd in topic.partition_data {
            let index = pd.index;
            let outcome = if !allowed {
                Err(Refused::new(
                    ResponseError::TopicAuthorizationFailed,
                    format!("{} may not write to {name}", client.principal),
                ))
            } else {
                match &acks {
                    Err(invalid) => Err(invalid.clone()),
                    Ok(_) if version < 3 => Err(Refused::new(
                        ResponseError::UnsupportedForMessageFormat,
                        "Produce v0-v2 carry message format v0/v1; only v2 records are accepted",
                    )),
                    Ok(acks) => append_partition(ctx, &name, pd, *acks, &verdicts).await,
                }
            };
            partitions.push(PendingPartition { index, outcome });
        }
        pending.topics.push((topic.name, partitions));
    }
    pending
}

/// Waits until every appended partition may be acknowledged (bounded by the request's
/// timeout: REQUEST_TIMED_OUT) and answers. The partitions are waited for at once, not one
/// after the other: under a flush policy each wait may run its partition's fdatasync, and a
/// request for N partitions then takes about one fdatasync instead of N in a row.
pub async fn complete(ctx: &ShardCtx, pending: PendingProduce) -> ProduceResponse {
    let deadline = std::time::Instant::now() + pending.timeout;
    let version = pending.version;
    let pending_throttle = pending.throttle_ms;
    let mut names = Vec::with_capacity(pending.topics.len());
    let mut waits = Vec::new();
    for (name, partitions) in pending.topics {
        names.push((name, partitions.len()));
        for p in partitions {
            waits.push(async move {
                let result = match p.outcome {
                    Ok((part, appended)) => wait(ctx, &part, appended, deadline).await,
                    Err(refused) => Err(refused),
                };
                partition_response(p.index, result, version)
            });
        }
    }
    // In request order, as the waits were listed.
    let mut answers = futures_util::future::join_all(waits).await.into_iter();
    let mut resp = ProduceResponse::default();
    if version >= 1 {
        resp.throttle_time_ms = pending_throttle as i32;
    }
    for (name, count) in names {
        let mut tr = TopicProduceResponse::default();
        tr.name = name;
        tr.partition_responses = answers.by_ref().take(count).collect();
        resp.responses.push(tr);
    }
    resp
}

/// `(base offset, log start offset, log append time)` once acknowledgeable. An `acks=all` wait gives up when
/// the broker stops (its followers' fetches end, the high watermark cannot move; the
/// partition's leadership moves away): NOT_LEADER_OR_FOLLOWER, and the client retries on the
/// new leader.
async fn wait(
    ctx: &ShardCtx,
    part: &Partition,
    appended: Appended,
    deadline: std::time::Instant,
) -> Result<(i64, i64, Option<i64>), Refused> {
    let done = async { Some(part.wait_acknowledgeable(&appended).await) };
    let timeout = async {
        glommio::timer::sleep(deadline.saturating_duration_since(std::time::Instant::now())).await;
        None
    };
    let stopping = async {
        match appended.replicated {
            Some(_) => ctx.stop().stopped().await,
            None => futures_lite::future::pending::<()>().await,
        }
        Some(Err(Refused::new(
            ResponseError::NotLeaderOrFollower,
            "the broker is stopping; its partitions' leadership moves",
        )))
    };
    let done = futures_lite::future::or(done, stopping);
    match futures_lite::future::or(done, timeout).await {
        Some(Ok(())) => Ok((
            appended.base_offset.0,
            part.log.log_start_offset().0,
            appended.log_append_time,
        )),
        Some(Err(refused)) => Err(refused),
        None => Err(Refused::new(
            ResponseError::RequestTimedOut,
            format!(
                "offsets {}..{} not written (or, for acks=all, not replicated) within the request timeout",
                appended.base_offset, appended.end_offset
            ),
        )),
    }
}

impl PendingProduce {
    /// Whether the producer wants an answer (`acks` is not 0).
    pub fn answered(&self) -> bool {
        self.answered
    }
}

/// Appends and answers in one go (for callers that do not pipeline, like the fuzz target);
/// `None` for `acks=0`, whose records are appended and not answered.
pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let pending = append(ctx, client, req, version).await;
    if !pending.answered() {
        return None;
    }
    Some(complete(ctx, pending).await)
}

fn partition_response(
    index: i32,
    result: Result<(i64, i64, Option<i64>), Refused>,
    version: i16,
) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.log_append_time_ms = -1;
    match result {
        Ok((base, start, append_time)) => {
            p.base_offset = base;
            if version >= 2 {
                p.log_append_time_ms = append_time.unwrap_or(-1);
            }
            if version >= 5 {
                p.log_start_offset = start;
            }
        }
        Err(refused) => {
            p.error_code = refused.error.code();
            p.base_offset = -1;
            if version >= 8 {
                p.error_message = Some(StrBytes::from_string(refused.message));
                p.record_errors = refused
                    .record_errors
                    .into_iter()
                    .map(|r| {
                        let mut e = BatchIndexAndErrorMessage::default();
                        e.batch_index = r.batch_index;
                        e.batch_index_error_message = Some(StrBytes::from_string(r.message));
                        e
                    })
                    .collect();
            } else {
                tracing::debug!(partition = index, error = %refused.message, "produce refused");
            }
        }
    }
    p
}

/// KIP-890: the coordinator's verdicts on the partitions of a transactional producer's request
/// whose batch would start a transaction here (one call for all of them; none when
/// `transaction.partition.verification.enable` is off or the request names no transactional
/// id). Produce v12+ (transaction version 2) has the coordinator add the partitions; below,
/// it only confirms them (part 1).
async fn verify_transaction_starts(
    ctx: &Rc<ShardCtx>,
    req: &ProduceRequest,
    version: i16,
) -> Verdicts {
    let Some(id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) else {
        return HashMap::new();
    };
    if !ctx.config().transactions.partition_verification {
        return HashMap::new();
    }
    let mut producer = None;
    let mut partitions = Vec::new();
    for topic in &req.topic_data {
        let name = topic.name.0.as_str();
        for pd in &topic.partition_data {
            let Some(records) = &pd.records else { continue };
            let (Ok(part), Ok(h)) = (
                ctx.writable_partition(name, pd.index),
                BatchHeader::parse(records),
            ) else {
                continue;
            };
            if part.needs_verification(&h) {
                producer = Some(ProducerIdAndEpoch {
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                });
                partitions.push((name.to_owned(), pd.index));
            }
        }
    }
    let Some(producer) = producer else {
        return HashMap::new();
    };
    let check = if version >= 12 {
        TxnCheck::Add
    } else {
        TxnCheck::Verify
    };
    let verdicts = ctx
        .check_in_transaction(&id, producer, partitions, check)
        .await;
    verdicts
        .into_iter()
        .map(|(tp, e)| (tp, e.map_or(Ok(producer), |e| Err(unverified(e, version)))))
        .collect()
}

/// What a producer is told when the coordinator did not confirm its partition (Kafka's
/// translation): retriable coordinator trouble as NOT_ENOUGH_REPLICAS (retried without a
/// metadata refresh), a fenced producer as INVALID_PRODUCER_EPOCH, a partition outside the
/// transaction as INVALID_TXN_STATE (Produce v11+ knows TRANSACTION_ABORTABLE).
fn unverified(e: ResponseError, version: i16) -> Refused {
    match e {
        ResponseError::ConcurrentTransactions
        | ResponseError::NetworkException
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator => Refused::new(
            ResponseError::NotEnoughReplicas,
            format!("Unable to verify the partition has been added to the transaction. Underlying error: {e:?}"),
        ),
        ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => Refused::new(
            ResponseError::InvalidProducerEpoch,
            "the transaction coordinator knows a newer producer epoch",
        ),
        ResponseError::TransactionAbortable if version >= 11 => Refused::new(
            ResponseError::TransactionAbortable,
            "Partition was not added to the transaction",
        ),
        ResponseError::TransactionAbortable | ResponseError::InvalidTxnState => Refused::new(
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction",
        ),
        e => Refused::new(e, "the transaction coordinator refused the partition"),
    }
}

/// The coordinator's verdict per partition: the producer it confirmed, or the refusal.
type Verdicts = HashMap<(String, i32), Result<ProducerIdAndEpoch, Refused>>;

async fn append_partition(
    ctx: &Rc<ShardCtx>,
    topic: &str,
    pd: PartitionProduceData,
    acks: Acks,
    verdicts: &Verdicts,
) -> Result<(Rc<Partition>, Appended), Refused> {
    let part = ctx.writable_partition(topic, pd.index)?;
    if crate::metadata::is_internal(topic) {
        return Err(Refused::new(
            ResponseError::InvalidTopicException,
            format!("cannot produce to internal topic {topic}"),
        ));
    }
    // Kafka checks before appending: acks=all needs min.insync.replicas in sync.
    if acks == Acks::All && part.in_sync_replicas() < part.min_insync_replicas() {
        return Err(Refused::new(
            ResponseError::NotEnoughReplicas,
            format!(
                "{topic}-{}: {} in-sync replica(s), min.insync.replicas is {}",
                pd.index,
                part.in_sync_replicas(),
                part.min_insync_replicas()
            ),
        ));
    }
    let records = pd.records.unwrap_or_default();
    if records.len() > part.max_message_bytes() {
        return Err(Refused::new(
            ResponseError::MessageTooLarge,
            format!(
                "{} bytes exceed max.message.bytes {}",
                records.len(),
                part.max_message_bytes()
            ),
        ));
    }
    let header = only_batch(&records)?;
    if header.is_control() {
        // Markers are the transaction coordinator's, written through WriteTxnMarkers.
        return Err(Refused::new(
            ResponseError::InvalidRecord,
            "clients are not allowed to write control records",
        ));
    }
    if header.is_transactional() && (header.producer_id < 0 || header.base_sequence < 0) {
        return Err(Refused::new(
            ResponseError::InvalidRecord,
            "a transactional batch needs a producer id and a sequence",
        ));
    }
    let start = if ctx.config().transactions.partition_verification {
        TxnStart::Verified
    } else {
        TxnStart::Unchecked
    };
    if start == TxnStart::Verified && part.needs_verification(&header) {
        match verdicts.get(&(topic.to_owned(), pd.index)) {
            Some(Ok(p)) if (p.producer_id, p.epoch) == (header.producer_id, header.producer_epoch) => {
                part.set_verified(p.producer_id, p.epoch);
            }
            Some(Err(refused)) => return Err(refused.clone()),
            // The request names no transactional id, or the batch's producer is not the one
            // verified: nothing confirms it.
            _ => {
                return Err(Refused::new(
                    ResponseError::InvalidTxnState,
                    "a transactional batch that starts a transaction needs the request's transactional id and the coordinator's confirmation",
                ))
            }
        }
    }
    let now = now_ms();
    let batch = accept(records, header, &part.batch_policy(), now)?;
    let epoch = ctx.leader_epoch(&part);
    let mut appended = part
        .append_as_leader(&batch.records, &batch.header, epoch, now, start)
        .await?;
    appended.replicated = (acks == Acks::All).then_some(epoch);
    appended.log_append_time = batch.log_append_time;
    Ok((part, appended))
}

/// The header of the only batch (Produce v3+ carries exactly one batch, as Kafka requires).
fn only_batch(records: &Bytes) -> Result<BatchHeader, Refused> {
    let header = BatchHeader::parse(records).map_err(batch_refused)?;
    if header.size_bytes as usize != records.len() {
        return Err(Refused::new(
            ResponseError::InvalidRecord,
            "a produce request must carry exactly one record batch per partition",
        ));
    }
    Ok(header)
}
