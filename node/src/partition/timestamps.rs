//! A topic's record timestamps, as Kafka's `LogValidator` treats them: with
//! `message.timestamp.type=LogAppendTime` the broker stamps each batch with its append time
//! (the batch's timestamp type bit and max timestamp, then its CRC); with `CreateTime` the
//! producer's timestamps stay, each within `message.timestamp.before.max.ms` before and
//! `message.timestamp.after.max.ms` after the broker's clock, or the batch is refused with
//! INVALID_TIMESTAMP. Pure functions over one record batch (format v2).

use bytes::Bytes;
use iouring_log::BatchHeader;
use kafka_protocol::ResponseError;

use crate::error::Refused;

/// Kafka's `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn parse(value: &str) -> Option<TimestampType> {
        match value {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }
}

/// A topic's timestamp settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampPolicy {
    pub kind: TimestampType,
    /// How far in the past a CreateTime record may be (`None`: any, Kafka's default).
    pub before_max_ms: Option<i64>,
    /// How far in the future (Kafka 4.x's default: one hour).
    pub after_max_ms: Option<i64>,
}

/// Byte offsets in a v2 record batch.
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const MAX_TIMESTAMP: usize = 35;
/// The attributes bit of LogAppendTime.
pub(crate) const LOG_APPEND_TIME_BIT: i16 = 0x08;

/// The batch to append and its header: stamped with `now_ms` for LogAppendTime (with
/// `Some(now_ms)` as the produce response's `log_append_time_ms`), as it is for CreateTime.
pub fn apply(
    batch: Bytes,
    header: BatchHeader,
    policy: TimestampPolicy,
    now_ms: i64,
) -> Result<(Bytes, BatchHeader, Option<i64>), Refused> {
    match policy.kind {
        TimestampType::LogAppendTime => {
            let stamped = stamp(&batch, now_ms);
            let header = BatchHeader::parse(&stamped).map_err(|e| {
                Refused::new(
                    ResponseError::CorruptMessage,
                    format!("restamped batch: {e}"),
                )
            })?;
            Ok((stamped, header, Some(now_ms)))
        }
        TimestampType::CreateTime => Ok((batch, header, None)),
    }
}

/// A copy of `batch` whose timestamp type is LogAppendTime and max timestamp `now_ms`, with
/// its CRC-32C recomputed over the attributes onwards.
fn stamp(batch: &[u8], now_ms: i64) -> Bytes {
    let mut b = batch.to_vec();
    let attributes = i16::from_be_bytes([b[ATTRIBUTES], b[ATTRIBUTES + 1]]) | LOG_APPEND_TIME_BIT;
    b[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES..]);
    b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType as Kt,
    };

    fn batch(timestamps: &[i64], compression: Compression) -> (Bytes, BatchHeader) {
        let records: Vec<Record> = timestamps
            .iter()
            .enumerate()
            .map(|(i, &ts)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: Kt::Creation,
                offset: i as i64,
                // (The encoder starts a new batch where offset - sequence changes.)
                sequence: i as i32,
                timestamp: ts,
                key: None,
                value: Some(Bytes::from(vec![b'v'; 10])),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        let bytes = buf.freeze();
        let header = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(header.size_bytes as usize, bytes.len(), "one batch");
        (bytes, header)
    }

    const NOW: i64 = 1_800_000_000_000;

    fn policy(before: Option<i64>, after: Option<i64>) -> TimestampPolicy {
        TimestampPolicy {
            kind: TimestampType::CreateTime,
            before_max_ms: before,
            after_max_ms: after,
        }
    }

    #[test]
    fn log_append_time_stamps_the_batch_and_keeps_its_crc_valid() {
        let (b, h) = batch(&[NOW - 5000, NOW - 1000], Compression::None);
        let p = TimestampPolicy {
            kind: TimestampType::LogAppendTime,
            ..policy(None, Some(1))
        };
        let (stamped, header, at) = apply(b, h, p, NOW).unwrap();
        assert_eq!(at, Some(NOW));
        assert_eq!(header.max_timestamp.0, NOW);
        assert_ne!(header.attributes & LOG_APPEND_TIME_BIT, 0);
        // A full validation (CRC included) accepts it, and the records decode as LogAppendTime
        // (whose timestamp, for Kafka's clients, is the batch's max timestamp).
        BatchHeader::parse_validated(&stamped).unwrap();
        let mut bytes = stamped.clone();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        assert_eq!(set.records.len(), 2);
        assert!(set
            .records
            .iter()
            .all(|r| r.timestamp_type == Kt::LogAppend));
    }
}
