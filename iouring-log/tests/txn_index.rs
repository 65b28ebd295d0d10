//! The aborted transaction index (`.txnindex`): entries go to the segment holding their
//! marker, in Kafka's 34-byte layout; a fetch gets the entries overlapping its range; they
//! survive a reopen, go with truncation and retention, and are merged into a cleaned segment.

mod common;

use common::*;
use iouring_log::{
    AbortedTxnEntry, CleanerLimits, Compaction, LeaderEpoch, Log, LogConfig, Offset,
};
use kafka_protocol::records::Compression;

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4 * 1024,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn aborted(pid: i64, first: i64, marker: i64) -> AbortedTxnEntry {
    AbortedTxnEntry {
        producer_id: pid,
        first_offset: Offset(first),
        last_offset: Offset(marker),
        last_stable_offset: Offset(marker + 1),
    }
}

/// Appends `n` one-record batches of 500-byte values (about 8 per segment).
async fn fill(log: &Log, n: i64) {
    for _ in 0..n {
        let at = log.log_end_offset().0;
        log.append_as_leader(&batch(at, 1, 500, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
    }
}

fn txnindex_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".txnindex"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn entries_live_with_the_segment_of_their_marker_across_reopen_truncation_and_retention() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 40).await;
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 4, "{bases:?}");
        let (a, b, c) = (
            aborted(7, 1, 3),
            aborted(8, 2, bases[2].0 + 1),
            aborted(9, 30, 35),
        );
        for e in [a, b, c] {
            log.append_aborted_txn(e).await.unwrap();
        }
        log.append_aborted_txn(b).await.unwrap();
        // A marker past the log end is not the log's: nothing recorded.
        log.append_aborted_txn(aborted(10, 40, 45)).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![a, b, c]);
        assert_eq!(log.aborted_txns(Offset(4), Offset(30)), vec![b]);
        assert_eq!(log.aborted_txns(Offset(4), Offset(31)), vec![b, c]);
        assert_eq!(log.aborted_txns(Offset(0), Offset(2)), vec![a]);
        let files = txnindex_files(dir.path());
        assert_eq!(files.len(), 3, "one file per segment with a marker");
        assert_eq!(files[0].0, format!("{:020}.txnindex", 0));
        assert_eq!(files[0].1, a.to_bytes().to_vec(), "Kafka's layout");

        log.close().await.unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![a, b, c]);

        // A follower truncating below c's marker loses c, and its file's content.
        log.truncate_to(Offset(34)).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![a, b]);
        log.close().await.unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![a, b]);

        // Entries rebuilt from a point on: those at or after it go.
        log.truncate_aborted_txns(Offset(3)).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![]);
        log.append_aborted_txn(a).await.unwrap();
        log.append_aborted_txn(b).await.unwrap();
        log.sync_aborted_txns().await.unwrap();

        // Retention past the first segments takes their entries and files with them.
        log.advance_log_start(bases[2], Offset(100), 0)
            .await
            .unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), vec![b]);
        let files = txnindex_files(dir.path());
        assert_eq!(
            files.len(),
            1,
            "{:?}",
            files.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        log.close().await.unwrap();
    });
}

#[test]
fn a_torn_file_keeps_its_whole_entries() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 5).await;
        log.append_aborted_txn(aborted(7, 0, 1)).await.unwrap();
        log.append_aborted_txn(aborted(8, 2, 3)).await.unwrap();
        log.close().await.unwrap();
        let path = dir.path().join(format!("{:020}.txnindex", 0));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(34 + 20);
        std::fs::write(&path, bytes).unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(
            log.aborted_txns(Offset(0), Offset(10)),
            vec![aborted(7, 0, 1)]
        );
        log.close().await.unwrap();
    });
}

/// Appends `n` records of keys `k0`..`k2`.
async fn append(log: &Log, n: i64) {
    for i in 0..n {
        let value = bytes::Bytes::from(vec![b'x'; 500]);
        let key = bytes::Bytes::from(format!("k{}", i % 3));
        let batch = encode_batch(&[record(0, Some(key), value, 0)], Compression::None);
        log.append_as_leader(&batch, LeaderEpoch(0), 0)
            .await
            .unwrap();
    }
}

/// A batch of one keyed record, transactional for producer `pid` (none when negative).
fn keyed(key: &str, value: &str, pid: i64) -> Vec<u8> {
    let mut r = record(
        0,
        Some(bytes::Bytes::from(key.to_owned())),
        bytes::Bytes::from(value.to_owned()),
        0,
    );
    if pid >= 0 {
        r.transactional = true;
        r.producer_id = pid;
        r.producer_epoch = 0;
        r.sequence = 0;
    }
    encode_batch(&[r], Compression::None)
}

/// Appends `bytes` as the leader; the offset of its first record.
async fn put(log: &Log, bytes: Vec<u8>) -> Offset {
    log.append_as_leader(&bytes, LeaderEpoch(0), 0)
        .await
        .unwrap()
        .first_offset
}

#[test]
fn a_cleaned_segment_holds_the_entries_of_the_segments_it_replaced() {
    run(|| async {
        let dir = tmpdir();
        let config = LogConfig {
            compaction: Compaction {
                delete: false,
                compact: true,
                min_cleanable_dirty_ratio: 0.0,
                ..Compaction::default()
            },
            ..small_segments()
        };
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        append(&log, 40).await;
        let bases = log.segment_base_offsets();
        let entries = [
            aborted(7, 1, 2),
            aborted(8, 3, bases[1].0 + 1),
            aborted(9, 4, bases[2].0),
        ];
        for e in entries {
            log.append_aborted_txn(e).await.unwrap();
        }
        let limits = CleanerLimits {
            map_bytes: 1 << 20,
            io_bytes_per_second: None,
        };
        // The first pass shrinks the segments, the second (more dirty records) merges them.
        for _ in 0..2 {
            let hw = log.log_end_offset();
            let stats = log.clean(1_800_000_000_000, hw, &limits, &|| false).await;
            assert!(stats.unwrap().is_some());
            append(&log, 20).await;
        }
        let now = log.segment_base_offsets();
        assert!(
            !now.contains(&bases[1]) && !now.contains(&bases[2]),
            "the markers' segments merged: {bases:?} -> {now:?}"
        );
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), entries.to_vec());
        log.close().await.unwrap();
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(100)), entries.to_vec());
        let files = txnindex_files(dir.path());
        assert_eq!(
            files.len(),
            1,
            "merged: {:?}",
            files.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        log.close().await.unwrap();
    });
}

/// A compacted log: an aborted transaction's newer value of a key neither stays nor removes the
/// key's committed value; a committed transaction's value supersedes as any record does; the
/// markers stay.
#[test]
fn the_cleaner_drops_aborted_transactions_and_keeps_what_they_would_have_superseded() {
    run(|| async {
        let dir = tmpdir();
        let config = LogConfig {
            compaction: Compaction {
                delete: false,
                compact: true,
                min_cleanable_dirty_ratio: 0.0,
                ..Compaction::default()
            },
            ..small_segments()
        };
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        let put = |bytes: Vec<u8>| put(&log, bytes);
        put(keyed("k", "committed-plain", -1)).await;
        let first = put(keyed("k", "aborted", 7)).await;
        let abort = put(iouring_log::encode_marker(7, 0, false, 0, 0)).await;
        log.append_aborted_txn(aborted(7, first.0, abort.0))
            .await
            .unwrap();
        put(keyed("j", "committed-txn", 8)).await;
        put(iouring_log::encode_marker(8, 0, true, 0, 0)).await;
        // Dirty records past the last segment so that all of the above is cleanable.
        append(&log, 20).await;
        let limits = CleanerLimits {
            map_bytes: 1 << 20,
            io_bytes_per_second: None,
        };
        let hw = log.log_end_offset();
        let stats = log
            .clean(1_800_000_000_000, hw, &limits, &|| false)
            .await
            .unwrap()
            .unwrap();
        assert!(stats.batches_removed >= 1, "{stats:?}");
        let values: Vec<(Option<bytes::Bytes>, Option<bytes::Bytes>, bool)> = read_all(&log)
            .await
            .into_iter()
            .map(|r| (r.key, r.value, r.control))
            .collect();
        let has = |v: &str| {
            values
                .iter()
                .any(|(_, val, _)| val.as_deref() == Some(v.as_bytes()))
        };
        assert!(
            has("committed-plain"),
            "the committed value of k was removed: {values:?}"
        );
        assert!(!has("aborted"), "the aborted value stayed");
        assert!(has("committed-txn"));
        assert_eq!(
            values.iter().filter(|v| v.2).count(),
            2,
            "both markers stay"
        );
        log.close().await.unwrap();
    });
}

/// Kafka's rules for markers: a transaction's marker stays while any of its data may be in the
/// log and until `delete.retention.ms` past its time once it is in the clean part; then it
/// goes, an ABORT marker with its `.txnindex` entry. A committed transaction whose data stays
/// keeps its marker.
#[test]
fn markers_go_once_their_transactions_data_is_gone_and_delete_retention_passed() {
    run(|| async {
        let dir = tmpdir();
        const RETENTION_MS: i64 = 60_000;
        const MARKER_MS: i64 = 1_700_000_000_000;
        let config = LogConfig {
            compaction: Compaction {
                delete: false,
                compact: true,
                min_cleanable_dirty_ratio: 0.0,
                delete_retention_ms: RETENTION_MS,
                ..Compaction::default()
            },
            ..small_segments()
        };
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        let put = |bytes: Vec<u8>| put(&log, bytes);
        // pid 8 commits a value of `a` that a later plain record supersedes; pid 7 aborts;
        // pid 9 commits the latest value of `b`, which stays.
        put(keyed("a", "committed-superseded", 8)).await;
        put(iouring_log::encode_marker(8, 0, true, 0, MARKER_MS)).await;
        let first = put(keyed("j", "aborted", 7)).await;
        let abort = put(iouring_log::encode_marker(7, 0, false, 0, MARKER_MS)).await;
        log.append_aborted_txn(aborted(7, first.0, abort.0))
            .await
            .unwrap();
        put(keyed("b", "committed-stays", 9)).await;
        put(iouring_log::encode_marker(9, 0, true, 0, MARKER_MS)).await;
        put(keyed("a", "plain", -1)).await;
        append(&log, 20).await;
        let limits = CleanerLimits {
            map_bytes: 1 << 20,
            io_bytes_per_second: None,
        };
        let markers = |log: Log| async move {
            read_all(&log)
                .await
                .into_iter()
                .filter(|r| r.control)
                .map(|r| r.producer_id)
                .collect::<Vec<i64>>()
        };
        let clean = |now: i64| {
            let log = log.clone();
            async move {
                append(&log, 10).await;
                let hw = log.log_end_offset();
                let stats = log.clean(now, hw, &limits, &|| false).await.unwrap();
                stats.expect("due")
            }
        };
        // 1: the data goes (superseded, aborted); the markers stay, their data walked.
        let stats = clean(MARKER_MS + 2 * RETENTION_MS).await;
        assert_eq!(stats.markers_removed, 0, "{stats:?}");
        assert_eq!(markers(log.clone()).await, vec![8, 7, 9]);
        // 2: no data left before two of them, but delete.retention.ms has not passed.
        let stats = clean(MARKER_MS + RETENTION_MS - 1).await;
        assert_eq!(stats.markers_removed, 0, "{stats:?}");
        assert_eq!(log.aborted_txns(Offset(0), Offset(1000)).len(), 1);
        // 3: it has: pid 8's and pid 7's markers go, pid 7's entry with its marker; pid 9's
        // marker stays before its data's committed value.
        let stats = clean(MARKER_MS + RETENTION_MS).await;
        assert_eq!(stats.markers_removed, 2, "{stats:?}");
        assert_eq!(markers(log.clone()).await, vec![9]);
        assert_eq!(log.aborted_txns(Offset(0), Offset(1000)), vec![]);
        let values: Vec<Option<bytes::Bytes>> =
            read_all(&log).await.into_iter().map(|r| r.value).collect();
        assert!(values.contains(&Some(bytes::Bytes::from("committed-stays"))));
        log.close().await.unwrap();
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        assert_eq!(log.aborted_txns(Offset(0), Offset(1000)), vec![]);
        assert_eq!(markers(log.clone()).await, vec![9]);
        log.close().await.unwrap();
    });
}
