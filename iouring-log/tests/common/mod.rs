//! Helpers shared by the integration tests: an executor, batches encoded with the
//! `kafka-protocol` crate, and decoding of what a read returns.
#![allow(dead_code)]

use std::future::Future;

use bytes::{Bytes, BytesMut};
use iouring_log::{read_slices_to_vec, Log, Offset, ReadOptions};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Runs `f` on a fresh glommio executor.
pub fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            // glommio can miss the completion of an operation that an io_uring worker thread
            // finished while nothing else wakes the reactor (see `helper_thread.rs`): seen as
            // a test hanging in `io_cqring_wait` about one run in ten, at every commit since
            // the recovery tests exist. A broker's shards always have timers running; a test
            // gets this ticker.
            let ticker = async {
                loop {
                    glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                }
            };
            futures_lite::future::or(f(), ticker).await
        })
        .expect("start executor (is ulimit -l >= 512 KiB?)")
        .join()
        .expect("executor thread");
}

/// The record a test writes at a given offset: deterministic key, value, headers, timestamp.
pub fn expected_record(offset: i64, value_len: usize) -> (Bytes, Bytes, i64) {
    let key = Bytes::from(format!("key-{offset}"));
    let mut value = vec![0u8; value_len];
    for (i, b) in value.iter_mut().enumerate() {
        *b = (offset as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    (key, Bytes::from(value), 1_700_000_000_000 + offset * 10)
}

/// A record at `offset_delta` in its batch, without idempotence (the encoder keeps records in
/// one batch while offset - sequence is constant; this makes the batch's baseSequence -1).
pub fn record(offset_delta: i64, key: Option<Bytes>, value: Bytes, timestamp: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: offset_delta,
        sequence: (offset_delta - 1) as i32,
        timestamp,
        key,
        value: Some(value),
        headers: IndexMap::new(),
    }
}

/// One RecordBatch v2 holding `records`.
pub fn encode_batch(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records, &opts).expect("encode");
    buf.to_vec()
}

/// A batch of `count` records whose contents are those of offsets `first..first + count`.
pub fn batch(first: i64, count: i64, value_len: usize, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (first..first + count)
        .map(|o| {
            let (key, value, ts) = expected_record(o, value_len);
            let mut r = record(o - first, Some(key), value, ts);
            r.headers.insert(
                StrBytes::from_static_str("h"),
                Some(Bytes::from(format!("{o}"))),
            );
            r
        })
        .collect();
    encode_batch(&records, compression)
}

/// Decodes whole batches from `bytes` (ignoring a partial trailing batch, as clients do).
pub fn decode(bytes: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize + 12;
        if at + len > bytes.len() {
            break;
        }
        let mut b = Bytes::copy_from_slice(&bytes[at..at + len]);
        let set = RecordBatchDecoder::decode(&mut b).expect("served batch decodes");
        out.extend(set.records);
        at += len;
    }
    out
}

/// Checks a decoded record against what [`batch`] wrote for its offset.
pub fn check_record(r: &Record, value_len: usize) {
    let (key, value, ts) = expected_record(r.offset, value_len);
    assert_eq!(r.key.as_ref(), Some(&key), "key at offset {}", r.offset);
    assert_eq!(
        r.value.as_ref(),
        Some(&value),
        "value at offset {}",
        r.offset
    );
    assert_eq!(r.timestamp, ts, "timestamp at offset {}", r.offset);
    let h = r
        .headers
        .get(&StrBytes::from_static_str("h"))
        .cloned()
        .flatten();
    assert_eq!(
        h,
        Some(Bytes::from(format!("{}", r.offset))),
        "header at offset {}",
        r.offset
    );
}

/// Reads from `offset` and decodes the records returned.
pub async fn read_records(log: &Log, offset: i64, max_bytes: usize) -> Vec<Record> {
    let r = log
        .read(
            Offset(offset),
            ReadOptions {
                max_bytes,
                max_offset: None,
                min_one_batch: true,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("read at {offset}: {e}"));
    let bytes = read_slices_to_vec(&r.slices)
        .await
        .expect("slices readable");
    decode(&bytes)
}

/// Reads every record from the log start to the log end.
pub async fn read_all(log: &Log) -> Vec<Record> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset().0;
    let end = log.log_end_offset().0;
    while next < end {
        let recs = read_records(log, next, 1 << 20).await;
        let before = out.len();
        for r in recs {
            if r.offset >= next {
                next = r.offset + 1;
                out.push(r);
            }
        }
        assert!(
            out.len() > before,
            "no progress reading at {next} (end {end})"
        );
    }
    out
}

pub fn tmpdir() -> tempfile::TempDir {
    // Under the target directory: it is on the same filesystem as the repository (O_DIRECT
    // needs a real filesystem; /tmp may be tmpfs).
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(base).expect("temp dir")
}
