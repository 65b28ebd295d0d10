//! What the leader makes of a producer's batch before appending it, as Kafka's `LogValidator`:
//!
//! - **Each record checked**: a compacted topic refuses a record without a key
//!   (INVALID_RECORD); under `message.timestamp.type=CreateTime` a record whose timestamp is
//!   further than `message.timestamp.before.max.ms` behind or `…after.max.ms` ahead of the
//!   broker's clock is refused (INVALID_TIMESTAMP), and under LogAppendTime a batch that claims
//!   LogAppendTime itself is. Every bad record is named by its index in the batch (KIP-467's
//!   `record_errors`), so a client fails those records, not the whole batch blindly; the batch
//!   is refused whole, as in Kafka, and nothing of it is appended.
//! - **Recompressed** to the topic's `compression.type` when the producer used another codec
//!   (at the topic's `compression.*.level`; a batch already in the topic's codec stays as sent,
//!   whatever its level), every header field kept.
//! - **Stamped** with the append time under LogAppendTime (`timestamps.rs`).
//!
//! The common case — uncompressed or `producer`, CreateTime with the default bounds, a
//! non-compacted topic, timestamps within an hour ahead — reads no record: the batch header's
//! max timestamp bounds the future, and records are decoded only when a check needs them.

use bytes::Bytes;
use iouring_log::records::{batch_records, recompress, Codec, RawRecord};
use iouring_log::BatchHeader;
use kafka_protocol::ResponseError;

use crate::error::{RecordError, Refused};
use crate::partition::compression::TopicCompression;
use crate::partition::timestamps::{self, TimestampPolicy, TimestampType, LOG_APPEND_TIME_BIT};

/// A record without a timestamp (never checked, as in Kafka).
const NO_TIMESTAMP: i64 = -1;
/// How many record errors the partition's message quotes (Kafka's "first three").
const QUOTED_RECORD_ERRORS: usize = 3;

/// The topic settings a batch is checked and stored by.
#[derive(Debug, Clone, Copy)]
pub struct BatchPolicy<'a> {
    /// `topic-partition`, for messages.
    pub topic: &'a str,
    pub partition: i32,
    /// `compact` in the topic's `cleanup.policy`: every record needs a key.
    pub compacted: bool,
    pub timestamps: TimestampPolicy,
    pub compression: TopicCompression,
}

/// The batch to append: checked, recompressed and stamped as the topic says.
pub struct Accepted {
    pub records: Bytes,
    pub header: BatchHeader,
    /// `Some(now)` when stamped with LogAppendTime: the produce response's `log_append_time_ms`.
    pub log_append_time: Option<i64>,
}

/// Checks `batch` record by record where the topic asks for it, then recompresses and stamps it.
pub fn accept(
    batch: Bytes,
    header: BatchHeader,
    policy: &BatchPolicy<'_>,
    now_ms: i64,
) -> Result<Accepted, Refused> {
    let source = Codec::of(&header).map_err(undecodable)?;
    let target = policy.compression.target(source);
    let claims_append_time = header.attributes & LOG_APPEND_TIME_BIT != 0;
    let t = policy.timestamps;
    let create_time = t.kind == TimestampType::CreateTime;
    let future_bound_passed = create_time
        && t.after_max_ms.is_some_and(|a| {
            header.max_timestamp.0 != NO_TIMESTAMP
                && header.max_timestamp.0 > now_ms.saturating_add(a)
        });
    let check_records = policy.compacted
        || (create_time && t.before_max_ms.is_some())
        || future_bound_passed
        || (!create_time && claims_append_time);
    let mut batch = batch;
    let mut header = header;
    if check_records || target.is_some() {
        let records = batch_records(&batch, &header).map_err(undecodable)?;
        if check_records {
            let errors = record_errors(&records.records, &header, policy, now_ms);
            if !errors.is_empty() {
                return Err(refused(errors));
            }
        }
        if let Some(target) = target {
            let packed = recompress(&batch, &records, target).map_err(|e| {
                Refused::new(
                    ResponseError::CorruptMessage,
                    format!("recompressing to {}: {e}", target.codec.name()),
                )
            })?;
            header = BatchHeader::parse(&packed).map_err(undecodable)?;
            batch = Bytes::from(packed);
        }
    }
    let (records, header, log_append_time) = timestamps::apply(batch, header, t, now_ms)?;
    Ok(Accepted {
        records,
        header,
        log_append_time,
    })
}

/// Every record that breaks a rule, with Kafka's messages (the key first, then the timestamp).
fn record_errors(
    records: &[RawRecord],
    header: &BatchHeader,
    policy: &BatchPolicy<'_>,
    now_ms: i64,
) -> Vec<(ResponseError, RecordError)> {
    let t = policy.timestamps;
    let claims_append_time = header.attributes & LOG_APPEND_TIME_BIT != 0;
    let mut errors = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let batch_index = i as i32;
        if policy.compacted && r.key.is_none() {
            errors.push((
                ResponseError::InvalidRecord,
                RecordError {
                    batch_index,
                    message: format!(
                        "Compacted topic cannot accept message without key in topic partition {}-{}.",
                        policy.topic, policy.partition
                    ),
                },
            ));
            continue;
        }
        // A batch that claims LogAppendTime gives every record its max timestamp (Kafka's
        // record iterator does the same).
        let timestamp = if claims_append_time {
            header.max_timestamp.0
        } else {
            header.base_timestamp.0.saturating_add(r.timestamp_delta)
        };
        if t.kind == TimestampType::CreateTime && timestamp != NO_TIMESTAMP {
            let too_old = t.before_max_ms.is_some_and(|b| now_ms - timestamp > b);
            let too_new = t.after_max_ms.is_some_and(|a| timestamp - now_ms > a);
            if too_old || too_new {
                let bound = |v: Option<i64>, f: fn(i64, i64) -> i64| {
                    v.map_or(if f(0, 1) > 0 { i64::MAX } else { i64::MIN }, |v| {
                        f(now_ms, v)
                    })
                };
                errors.push((
                    ResponseError::InvalidTimestamp,
                    RecordError {
                        batch_index,
                        message: format!(
                            "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{}, {}]",
                            r.offset,
                            bound(t.before_max_ms, i64::saturating_sub),
                            bound(t.after_max_ms, i64::saturating_add),
                        ),
                    },
                ));
            }
        } else if claims_append_time {
            errors.push((
                ResponseError::InvalidTimestamp,
                RecordError {
                    batch_index,
                    message: format!(
                        "Invalid timestamp type in message at index {i}. Producer should not set timestamp type to LogAppendTime."
                    ),
                },
            ));
        }
    }
    errors
}

/// The batch refused with its record errors: INVALID_TIMESTAMP if any record's timestamp is
/// wrong, else INVALID_RECORD, with Kafka's message.
fn refused(errors: Vec<(ResponseError, RecordError)>) -> Refused {
    let timestamp = errors
        .iter()
        .any(|(e, _)| *e == ResponseError::InvalidTimestamp);
    let record_errors: Vec<RecordError> = errors.into_iter().map(|(_, r)| r).collect();
    let (error, message) = if timestamp {
        (
            ResponseError::InvalidTimestamp,
            "One or more records have been rejected due to invalid timestamp".to_owned(),
        )
    } else {
        let quoted: Vec<String> = record_errors
            .iter()
            .take(QUOTED_RECORD_ERRORS)
            .map(|r| r.to_string())
            .collect();
        (
            ResponseError::InvalidRecord,
            format!(
                "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                record_errors.len(),
                quoted.join(", ")
            ),
        )
    };
    Refused {
        error,
        message,
        record_errors,
    }
}

fn undecodable(e: impl std::fmt::Display) -> Refused {
    Refused::new(
        ResponseError::CorruptMessage,
        format!("undecodable batch: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType as Ts,
    };

    const NOW: i64 = 1_700_000_000_000;

    /// A batch of records with these keys and timestamps.
    fn batch(records: &[(Option<&str>, i64)], compression: Compression) -> (Bytes, BatchHeader) {
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (key, ts))| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: 3,
                producer_epoch: 0,
                timestamp_type: Ts::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: *ts,
                key: key.map(|k| Bytes::from(k.to_owned())),
                value: Some(Bytes::from(vec![b'v'; 300])),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        let bytes = out.freeze();
        let header = BatchHeader::parse(&bytes).unwrap();
        (bytes, header)
    }

    fn policy(compacted: bool, before: Option<i64>, codec: Option<Codec>) -> BatchPolicy<'static> {
        BatchPolicy {
            topic: "t",
            partition: 4,
            compacted,
            timestamps: TimestampPolicy {
                kind: TimestampType::CreateTime,
                before_max_ms: before,
                after_max_ms: Some(3_600_000),
            },
            compression: TopicCompression {
                codec,
                ..TopicCompression::default()
            },
        }
    }

    #[test]
    fn each_bad_record_is_named_and_the_batch_refused_whole() {
        let (b, h) = batch(
            &[
                (Some("a"), NOW),
                (None, NOW),
                (Some("c"), NOW),
                (None, NOW),
                (None, NOW),
                (None, NOW),
            ],
            Compression::Lz4,
        );
        let e = accept(b, h, &policy(true, None, None), NOW).err().unwrap();
        assert_eq!(e.error, ResponseError::InvalidRecord);
        let idx: Vec<i32> = e.record_errors.iter().map(|r| r.batch_index).collect();
        assert_eq!(idx, [1, 3, 4, 5]);
        assert!(
            e.message.starts_with("One or more records have been rejected due to 4 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message without key in topic partition t-4.'), "),
            "{}",
            e.message
        );
        assert_eq!(e.message.matches("RecordError(").count(), 3);
    }

    #[test]
    fn timestamps_out_of_bounds_are_invalid_timestamp_per_record() {
        let (b, h) = batch(
            &[
                (Some("a"), NOW - 10_000),
                (Some("b"), NOW),
                (Some("c"), NOW + 7_200_000),
                (Some("d"), -1),
            ],
            Compression::None,
        );
        let e = accept(b, h, &policy(true, Some(5_000), None), NOW)
            .err()
            .unwrap();
        assert_eq!(e.error, ResponseError::InvalidTimestamp);
        let idx: Vec<i32> = e.record_errors.iter().map(|r| r.batch_index).collect();
        assert_eq!(idx, [0, 2]);
        assert_eq!(
            e.record_errors[0].message,
            format!(
                "Timestamp {} of message with offset 0 is out of range. The timestamp should be within [{}, {}]",
                NOW - 10_000,
                NOW - 5_000,
                NOW + 3_600_000
            )
        );
        // Only the future bound set: found by the header alone, then named per record.
        let (b, h) = batch(
            &[(Some("a"), NOW), (None, NOW + 7_200_000)],
            Compression::Gzip,
        );
        let e = accept(b, h, &policy(false, None, None), NOW).err().unwrap();
        assert_eq!(e.error, ResponseError::InvalidTimestamp);
        assert_eq!(e.record_errors.len(), 1);
        assert_eq!(e.record_errors[0].batch_index, 1);
        // Within both bounds: stored as sent.
        let (b, h) = batch(&[(None, NOW - 5), (None, NOW + 5)], Compression::Gzip);
        let mut p = policy(false, Some(10), None);
        p.timestamps.after_max_ms = Some(10);
        let a = accept(b.clone(), h, &p, NOW).unwrap();
        assert_eq!((a.records, a.log_append_time), (b, None));
    }

    #[test]
    fn a_batch_is_recompressed_to_the_topic_codec_and_kept_in_it() {
        let keys: Vec<(Option<&str>, i64)> = (0..40).map(|_| (Some("k"), NOW)).collect();
        for (sent, topic, stored) in [
            (Compression::None, Some(Codec::Zstd), Codec::Zstd),
            (Compression::Gzip, Some(Codec::Lz4), Codec::Lz4),
            (Compression::Snappy, Some(Codec::None), Codec::None),
            (Compression::Lz4, Some(Codec::Gzip), Codec::Gzip),
            (Compression::Zstd, None, Codec::Zstd),
            (Compression::None, None, Codec::None),
        ] {
            let (b, h) = batch(&keys, sent);
            let sent_bytes = b.clone();
            let a = accept(b, h, &policy(false, None, topic), NOW).unwrap();
            assert_eq!(
                Codec::of(&a.header).unwrap(),
                stored,
                "{sent:?} -> {topic:?}"
            );
            if topic.is_none() {
                assert_eq!(a.records, sent_bytes, "producer: stored as sent");
            }
            assert_eq!(a.header.records_count, 40);
            assert_eq!(a.header.producer_id, 3);
            let mut r = a.records.clone();
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut r).unwrap();
            assert_eq!(set.records.len(), 40);
            assert_eq!(set.records[39].timestamp, NOW);
        }
    }
}
