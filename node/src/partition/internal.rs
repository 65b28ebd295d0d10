//! Records the broker writes to its own internal topics (`__consumer_offsets`,
//! `__transaction_state`) and reads back when it takes over one of their partitions: keyed
//! records appended through the partition's produce path and acknowledged like `acks=all`,
//! and every record of a partition replayed in offset order.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use iouring_log::{LeaderEpoch, Offset, ReadOptions};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use super::append::Refused;
use super::txns::TxnStart;
use super::Partition;

/// Records to append: `(key, value)`, a `None` value being a tombstone.
pub type KeyValues = Vec<(Bytes, Option<Bytes>)>;

/// The transactional producer a coordinator writes records for (TxnOffsetCommit): its id and
/// epoch in the batch, which is transactional and carries no sequence (Kafka's coordinator
/// appends are not checked for duplicates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InTransaction {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Appends `records` in one batch (leader epoch `epoch`) and waits until every in-sync replica
/// has them (as Kafka's coordinators write, `acks=all`), at most `timeout`: REQUEST_TIMED_OUT
/// after it; the partition's own refusal otherwise.
pub async fn append_keyed(
    part: &Partition,
    epoch: LeaderEpoch,
    records: KeyValues,
    now: i64,
    timeout: Duration,
) -> Result<(), Refused> {
    append_keyed_in(part, epoch, records, None, now, timeout).await
}

/// [`append_keyed`], in `txn`'s transaction when given.
pub async fn append_keyed_in(
    part: &Partition,
    epoch: LeaderEpoch,
    records: KeyValues,
    txn: Option<InTransaction>,
    now: i64,
    timeout: Duration,
) -> Result<(), Refused> {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: txn.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: txn.map_or(-1, |t| t.producer_id),
            producer_epoch: txn.map_or(-1, |t| t.producer_epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: now,
            key: Some(key),
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let unencodable = |e: String| {
        tracing::error!(topic = %part.topic, error = %e, "encoding internal records");
        Refused::new(ResponseError::UnknownServerError, e)
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts)
        .map_err(|e| unencodable(e.to_string()))?;
    let header = iouring_log::BatchHeader::parse(&buf).map_err(|e| unencodable(e.to_string()))?;
    let mut appended = part
        .append_as_leader(&buf, &header, epoch, now, TxnStart::Unchecked)
        .await?;
    appended.replicated = Some(epoch);
    let done = async { Some(part.wait_acknowledgeable(&appended).await) };
    let expired = async {
        glommio::timer::sleep(timeout).await;
        None
    };
    match futures_lite::future::or(done, expired).await {
        Some(result) => result,
        None => Err(Refused::new(
            ResponseError::RequestTimedOut,
            format!(
                "{}-{}: not replicated within {timeout:?}",
                part.topic, part.index
            ),
        )),
    }
}

/// Calls `visit` with every record of `part` from its log start to its log end, in offset
/// order, control records included. A batch that cannot be decoded is logged and skipped; a
/// read that fails ends the replay early (logged). Returns the records visited.
pub async fn replay_records(part: &Partition, mut visit: impl FnMut(Record)) -> usize {
    let mut next = part.log.log_start_offset();
    let end = part.log.log_end_offset();
    let mut count = 0;
    while next < end {
        let opts = ReadOptions {
            max_bytes: 1 << 20,
            max_offset: None,
            min_one_batch: true,
        };
        let read = match part.log.read(next, opts).await {
            Ok(r) if r.is_empty() => break,
            Ok(r) => iouring_log::read_slices_to_vec(&r.slices)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let bytes = match read {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::error!(topic = %part.topic, partition = part.index, error = %e, "replaying an internal partition");
                break;
            }
        };
        let before = next;
        for range in iouring_log::whole_batches(&bytes) {
            let mut batch = bytes.slice(range);
            let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
                tracing::error!(topic = %part.topic, partition = part.index, offset = next.0, "undecodable batch; skipped");
                continue;
            };
            for r in set.records {
                if r.offset < next.0 {
                    continue;
                }
                next = Offset(r.offset + 1);
                count += 1;
                visit(r);
            }
        }
        if next == before {
            break;
        }
    }
    count
}
