//! Produce: appends each partition's record batch to the log of the shard that owns it, with
//! idempotent-producer deduplication. Records must be message format v2 (Produce v3+).

use std::rc::Rc;

use bytes::Bytes;
use iouring_log::{AppendError, BatchError, BatchHeader, LeaderEpoch};
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest};
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::partition::Partition;
use crate::producer_state::{BatchRecord, SequenceCheck};
use crate::shard::{now_ms, ShardCtx};

pub async fn handle(ctx: &Rc<ShardCtx>, req: ProduceRequest, version: i16) -> ProduceResponse {
    let mut resp = ProduceResponse::default();
    let acks_valid = matches!(req.acks, -1..=1);
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let mut tr = TopicProduceResponse::default();
        tr.name = topic.name.clone();
        for pd in topic.partition_data {
            let index = pd.index;
            let result = if !acks_valid {
                Err((
                    ResponseError::InvalidRequiredAcks,
                    format!("acks={} (allowed -1, 0, 1)", req.acks),
                ))
            } else if version < 3 {
                Err((
                    ResponseError::UnsupportedForMessageFormat,
                    "Produce v0-v2 carry message format v0/v1; only v2 records are accepted".into(),
                ))
            } else {
                produce_partition(ctx, &name, pd, version).await
            };
            tr.partition_responses
                .push(partition_response(index, result, version));
        }
        resp.responses.push(tr);
    }
    resp
}

type Outcome = Result<(i64, i64), (ResponseError, String)>;

fn partition_response(index: i32, result: Outcome, version: i16) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.log_append_time_ms = -1;
    match result {
        Ok((base, start)) => {
            p.base_offset = base;
            if version >= 5 {
                p.log_start_offset = start;
            }
        }
        Err((e, msg)) => {
            p.error_code = e.code();
            p.base_offset = -1;
            if version >= 8 {
                p.error_message = Some(StrBytes::from_string(msg));
            } else {
                tracing::debug!(partition = index, error = %msg, "produce refused");
            }
        }
    }
    p
}

async fn produce_partition(
    ctx: &Rc<ShardCtx>,
    topic: &str,
    pd: PartitionProduceData,
    version: i16,
) -> Outcome {
    let Some(part) = ctx.partition(topic, pd.index) else {
        let e = ctx.not_served(topic, pd.index);
        let why = if e == ResponseError::NotLeaderOrFollower {
            "is led by another shard"
        } else {
            "does not exist"
        };
        return Err((e, format!("{topic}-{} {why}", pd.index)));
    };
    if crate::metadata::is_internal(topic) {
        return Err((
            ResponseError::InvalidTopicException,
            format!("cannot produce to internal topic {topic}"),
        ));
    }
    let records = pd.records.unwrap_or_default();
    if records.len() > part.max_message_bytes {
        return Err((
            ResponseError::MessageTooLarge,
            format!(
                "{} bytes exceed max.message.bytes {}",
                records.len(),
                part.max_message_bytes
            ),
        ));
    }
    let header = first_batch(&records, version)?;
    if header.producer_id >= 0 && header.base_sequence >= 0 {
        let last_seq = header.base_sequence.wrapping_add(header.last_offset_delta);
        let check = part.producers.borrow().check(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            last_seq,
        );
        match check {
            SequenceCheck::Append => {}
            SequenceCheck::Duplicate { base_offset } => {
                return Ok((base_offset, part.log.log_start_offset().0))
            }
            SequenceCheck::OutOfOrder { expected, got } => {
                return Err((
                    ResponseError::OutOfOrderSequenceNumber,
                    format!("expected sequence {expected}, got {got}"),
                ))
            }
            SequenceCheck::StaleEpoch { current, got } => {
                return Err((
                    ResponseError::InvalidProducerEpoch,
                    format!("producer epoch {got} is older than {current}"),
                ))
            }
        }
        let base = append(ctx, &part, &records).await?;
        let batch = BatchRecord {
            first_seq: header.base_sequence,
            last_seq,
            base_offset: base,
        };
        part.producers
            .borrow_mut()
            .record(header.producer_id, header.producer_epoch, batch);
        return Ok((base, part.log.log_start_offset().0));
    }
    let base = append(ctx, &part, &records).await?;
    Ok((base, part.log.log_start_offset().0))
}

/// The header of the only batch (Produce v3+ carries exactly one batch, as Kafka requires).
fn first_batch(records: &Bytes, version: i16) -> Result<BatchHeader, (ResponseError, String)> {
    let header = BatchHeader::parse(records).map_err(batch_error)?;
    if version >= 3 && header.size_bytes as usize != records.len() {
        return Err((
            ResponseError::InvalidRecord,
            "a produce request must carry exactly one record batch per partition".into(),
        ));
    }
    Ok(header)
}

fn batch_error(e: BatchError) -> (ResponseError, String) {
    match e {
        BatchError::BadMagic { magic } => (
            ResponseError::UnsupportedForMessageFormat,
            format!("record batch magic {magic}; only v2 is accepted"),
        ),
        other => (ResponseError::CorruptMessage, other.to_string()),
    }
}

pub(crate) async fn append(
    ctx: &ShardCtx,
    part: &Partition,
    records: &[u8],
) -> Result<i64, (ResponseError, String)> {
    let epoch = ctx
        .snapshot
        .borrow()
        .partition(&part.topic, part.index)
        .map_or(0, |p| p.leader_epoch);
    match part
        .log
        .append_as_leader(records, LeaderEpoch(epoch), now_ms())
        .await
    {
        Ok(info) => {
            ctx.data_arrived.notify_all();
            Ok(info.first_offset.0)
        }
        Err(AppendError::CorruptBatch { source, .. }) => Err(batch_error(source)),
        Err(AppendError::BatchTooLarge {
            size,
            segment_bytes,
        }) => Err((
            ResponseError::RecordListTooLarge,
            format!("batch of {size} bytes exceeds segment.bytes {segment_bytes}"),
        )),
        Err(e) => {
            tracing::error!(topic = %part.topic, partition = part.index, error = %e, "append failed");
            Err((ResponseError::KafkaStorageError, e.to_string()))
        }
    }
}
