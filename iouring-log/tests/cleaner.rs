//! The log cleaner: the latest record of every key survives, in every codec; tombstones stay
//! for `delete.retention.ms` once cleaned, then go; unkeyed records go; the cleaned log reads
//! the same after a reopen and takes appends; a small offset map cleans in several passes to
//! the same result; a crash after the commit is finished at open, one before it leaves the
//! old segments; a follower takes a cleaned leader's batches with their offset gaps.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use iouring_log::Compaction;
use iouring_log::{CleanStats, CleanerLimits};
use iouring_log::{LeaderEpoch, Log, LogConfig, Offset, ReadOptions};
use kafka_protocol::records::{Compression, Record};

const KEYS: i64 = 10;

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024,
        index_interval_bytes: 512,
        retention_ms: None,
        compaction: Compaction {
            delete: false,
            compact: true,
            min_cleanable_dirty_ratio: 0.0,
            delete_retention_ms: 0,
            ..Compaction::default()
        },
        ..LogConfig::default()
    }
}

const UNLIMITED: CleanerLimits = CleanerLimits {
    map_bytes: 64 << 20,
    io_bytes_per_second: None,
};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// A keyed record: key `k{key}`, value `v{offset}` (`None`: a tombstone).
fn keyed(offset_delta: i64, key: Option<i64>, value: Option<i64>) -> Record {
    let mut r = record(
        offset_delta,
        key.map(|k| Bytes::from(format!("k{k}"))),
        Bytes::new(),
        1_700_000_000_000 + offset_delta,
    );
    r.value = value.map(|v| Bytes::from(format!("v{v}")));
    r
}

/// Appends batches of 4 records over keys `0..KEYS` (in every codec), rolling every 5
/// batches, the very last record a tombstone if `tombstone_last`; returns what each key's
/// latest record is: `key -> (offset, tombstone)`.
async fn fill(log: &Log, batches: i64, tombstone_last: bool) -> BTreeMap<i64, (i64, bool)> {
    let mut latest = BTreeMap::new();
    for b in 0..batches {
        let base = log.log_end_offset().0;
        let records: Vec<Record> = (0..4)
            .map(|i| {
                let offset = base + i;
                let key = (offset * 7 + b) % KEYS;
                let tomb = tombstone_last && b == batches - 1 && i == 3;
                latest.insert(key, (offset, tomb));
                keyed(i, Some(key), (!tomb).then_some(offset))
            })
            .collect();
        let bytes = encode_batch(&records, CODECS[(b % 5) as usize]);
        log.append_as_leader(&bytes, LeaderEpoch(0), 0)
            .await
            .expect("append");
        if b % 5 == 4 {
            log.roll(0).await.expect("roll");
        }
    }
    log.roll(0).await.expect("roll");
    latest
}

/// Every record from the log start, following offset gaps, until a read returns nothing.
async fn read_compacted(log: &Log) -> Vec<Record> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset().0;
    loop {
        let recs = read_records(log, next, 1 << 20).await;
        let fresh: Vec<Record> = recs.into_iter().filter(|r| r.offset >= next).collect();
        let Some(last) = fresh.last() else {
            return out;
        };
        next = last.offset + 1;
        out.extend(fresh);
    }
}

/// `key -> (offset, tombstone)` of every record read, checking offsets increase and no key
/// appears twice.
fn by_key(records: &[Record]) -> BTreeMap<i64, (i64, bool)> {
    let mut out = BTreeMap::new();
    let mut last = -1;
    for r in records {
        assert!(
            r.offset > last,
            "offsets increase: {} after {last}",
            r.offset
        );
        last = r.offset;
        let key: i64 = std::str::from_utf8(r.key.as_ref().expect("keyed"))
            .unwrap()
            .trim_start_matches('k')
            .parse()
            .unwrap();
        if let Some(v) = &r.value {
            assert_eq!(
                v.as_ref(),
                format!("v{}", r.offset).as_bytes(),
                "value at {}",
                r.offset
            );
        }
        let before = out.insert(key, (r.offset, r.value.is_none()));
        assert!(
            before.is_none(),
            "key {key} twice: {before:?} and offset {}",
            r.offset
        );
    }
    out
}

async fn clean(log: &Log, limits: &CleanerLimits) -> Option<CleanStats> {
    let hw = log.log_end_offset();
    log.clean(1_800_000_000_000, hw, limits, &|| false)
        .await
        .expect("clean")
}

#[test]
fn the_latest_record_of_each_key_survives_in_every_codec_and_after_a_reopen() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), compacted(), 0).await.unwrap();
        let latest = fill(&log, 40, true).await;
        let end = log.log_end_offset();
        let segments = log.segment_base_offsets().len();
        let stats = clean(&log, &UNLIMITED)
            .await
            .expect("a dirty log is cleaned");
        assert_eq!(stats.cleaned_to, end, "{stats:?}");
        assert_eq!(stats.records_read, 160);
        assert_eq!(stats.records_removed, 160 - KEYS as u64, "{stats:?}");
        assert!(
            stats.batches_rewritten > 0 && stats.batches_removed > 0,
            "{stats:?}"
        );
        assert!(log.segment_base_offsets().len() < segments);
        // The tombstone was in the dirty part: it stays this time.
        assert_eq!(by_key(&read_compacted(&log).await), latest);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.cleaned_below(), end);
        // Nothing dirty: nothing to do.
        assert!(clean(&log, &UNLIMITED).await.is_none());

        // More records dirty the log; the tombstone is in the clean part now, older than
        // delete.retention.ms (0): it goes, with the key's older records.
        let more = fill(&log, 10, false).await;
        let stats = clean(&log, &UNLIMITED).await.expect("dirty again");
        let expected: BTreeMap<i64, (i64, bool)> = {
            let mut m = latest.clone();
            m.extend(more.clone());
            m.into_iter().filter(|(_, (_, tomb))| !tomb).collect()
        };
        let got = by_key(&read_compacted(&log).await);
        let tombstoned = latest
            .iter()
            .find(|(_, (_, t))| *t)
            .map(|(k, _)| *k)
            .unwrap();
        if !more.contains_key(&tombstoned) {
            assert_eq!(stats.tombstones_removed, 1, "{stats:?}");
        }
        assert_eq!(got, expected);

        // Reopened, the log reads the same, and takes appends at its end.
        let end = log.log_end_offset();
        log.close().await.unwrap();
        let log = Log::open(dir.path(), compacted(), 0).await.unwrap();
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(by_key(&read_compacted(&log).await), expected);
        let info = log
            .append_as_leader(
                &encode_batch(&[keyed(0, Some(1), Some(end.0))], Compression::None),
                LeaderEpoch(0),
                0,
            )
            .await
            .unwrap();
        assert_eq!(info.first_offset, end);
        log.close().await.unwrap();
        // Nothing is left of the cleaning but the new segments.
        let leftovers: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    });
}

#[test]
fn unkeyed_records_go_and_keyed_ones_in_their_batch_stay() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), compacted(), 0).await.unwrap();
        let records = vec![
            keyed(0, None, Some(0)),
            keyed(1, Some(1), Some(1)),
            keyed(2, None, Some(2)),
        ];
        log.append_as_leader(&encode_batch(&records, Compression::Lz4), LeaderEpoch(0), 0)
            .await
            .unwrap();
        log.roll(0).await.unwrap();
        let stats = clean(&log, &UNLIMITED).await.expect("cleaned");
        assert_eq!(
            (stats.unkeyed_removed, stats.batches_rewritten),
            (2, 1),
            "{stats:?}"
        );
        let got = read_compacted(&log).await;
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].offset, got[0].value.as_deref()),
            (1, Some(&b"v1"[..]))
        );
        assert_eq!(got[0].timestamp, 1_700_000_000_001, "timestamps kept");
    });
}

#[test]
fn a_small_offset_map_cleans_in_passes_to_the_same_result() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), compacted(), 0).await.unwrap();
        let latest = fill(&log, 40, false).await;
        let end = log.log_end_offset();
        let tiny = CleanerLimits {
            map_bytes: 1,
            io_bytes_per_second: None,
        };
        let mut passes = 0;
        while let Some(stats) = clean(&log, &tiny).await {
            passes += 1;
            assert!(stats.cleaned_to <= end);
            assert!(passes < 100, "cleaning does not converge");
        }
        assert!(passes > 1, "one segment per pass: {passes}");
        assert_eq!(log.cleaned_below(), end);
        assert_eq!(by_key(&read_compacted(&log).await), latest);
    });
}

/// Copies every file of `from` into `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_crash_after_the_commit_is_finished_at_open_and_one_before_it_changes_nothing() {
    run(|| async {
        let cleaned_dir = tmpdir();
        let log = Log::open(cleaned_dir.path(), compacted(), 0).await.unwrap();
        let latest = fill(&log, 40, false).await;
        log.close().await.unwrap();
        // The same log, uncleaned, in two more places.
        let before_commit = tmpdir();
        let after_commit = tmpdir();
        copy_dir(cleaned_dir.path(), before_commit.path());
        copy_dir(cleaned_dir.path(), after_commit.path());
        let all_before = {
            let log = Log::open(before_commit.path(), compacted(), 0)
                .await
                .unwrap();
            let r = read_compacted(&log).await.len();
            log.close().await.unwrap();
            r
        };

        let log = Log::open(cleaned_dir.path(), compacted(), 0).await.unwrap();
        let stats = clean(&log, &UNLIMITED).await.expect("cleaned");
        assert_eq!(stats.segments_after, 1, "all fits one segment: {stats:?}");
        log.close().await.unwrap();
        let first = "00000000000000000000.log";
        // Before the commit: a half-written `.cleaned` file. It is removed; nothing changes.
        std::fs::write(
            before_commit.path().join(format!("{first}.cleaned")),
            b"partial",
        )
        .unwrap();
        let log = Log::open(before_commit.path(), compacted(), 0)
            .await
            .unwrap();
        assert_eq!(read_compacted(&log).await.len(), all_before);
        log.close().await.unwrap();
        assert!(!before_commit
            .path()
            .join(format!("{first}.cleaned"))
            .exists());
        // After the commit: the swap file and the checkpoint are there, the old segments too.
        std::fs::copy(
            cleaned_dir.path().join(first),
            after_commit.path().join(format!("{first}.swap")),
        )
        .unwrap();
        std::fs::copy(
            cleaned_dir.path().join("cleaner-offset-checkpoint"),
            after_commit.path().join("cleaner-offset-checkpoint"),
        )
        .unwrap();
        let log = Log::open(after_commit.path(), compacted(), 0)
            .await
            .unwrap();
        assert_eq!(by_key(&read_compacted(&log).await), latest);
        assert_eq!(
            log.segment_base_offsets().len(),
            2,
            "the cleaned segment and the active one: {:?}",
            log.segment_base_offsets()
        );
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_takes_a_cleaned_leaders_batches_with_their_gaps() {
    run(|| async {
        let leader_dir = tmpdir();
        let leader = Log::open(leader_dir.path(), compacted(), 0).await.unwrap();
        let latest = fill(&leader, 20, false).await;
        clean(&leader, &UNLIMITED).await.expect("cleaned");
        let follower_dir = tmpdir();
        let follower = Log::open(follower_dir.path(), compacted(), 0)
            .await
            .unwrap();
        // Fetch as a follower does: from its log end, whatever the leader returns.
        loop {
            let at = follower.log_end_offset();
            let r = leader
                .read(
                    at,
                    ReadOptions {
                        max_bytes: 4096,
                        max_offset: None,
                        min_one_batch: true,
                    },
                )
                .await
                .unwrap();
            let bytes = iouring_log::read_slices_to_vec(&r.slices).await.unwrap();
            let whole = whole_batches(&bytes);
            if whole.is_empty() {
                break;
            }
            follower.append_as_follower(whole, 0).await.unwrap();
        }
        assert_eq!(by_key(&read_compacted(&follower).await), latest);
        follower.close().await.unwrap();
        let follower = Log::open(follower_dir.path(), compacted(), 0)
            .await
            .unwrap();
        assert_eq!(
            by_key(&read_compacted(&follower).await),
            latest,
            "after a reopen"
        );
        assert!(follower.log_end_offset() > Offset(0));
    });
}

/// The whole batches at the start of `bytes`.
fn whole_batches(bytes: &[u8]) -> &[u8] {
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize + 12;
        if at + len > bytes.len() {
            break;
        }
        at += len;
    }
    &bytes[..at]
}

#[test]
fn records_younger_than_min_compaction_lag_are_not_cleaned() {
    run(|| async {
        let dir = tmpdir();
        let mut cfg = compacted();
        // The records' timestamps are 1_700_000_000_000 + i; "now" is 1_800_000_000_000.
        cfg.compaction.min_compaction_lag_ms = 200_000_000_000;
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        fill(&log, 20, false).await;
        assert!(
            clean(&log, &UNLIMITED).await.is_none(),
            "every record is within the lag"
        );
        log.close().await.unwrap();
        cfg.compaction.min_compaction_lag_ms = 1000;
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        assert!(
            clean(&log, &UNLIMITED).await.is_some(),
            "past the lag they are cleaned"
        );
    });
}

#[test]
fn compact_and_delete_also_applies_retention() {
    run(|| async {
        let dir = tmpdir();
        let mut cfg = compacted();
        cfg.retention_ms = Some(1000);
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        fill(&log, 20, false).await;
        // Compact only: retention.ms does not apply.
        assert_eq!(
            log.delete_old_segments(1_800_000_000_000, log.log_end_offset())
                .await
                .unwrap(),
            0
        );
        log.close().await.unwrap();
        cfg.compaction.delete = true;
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        let deleted = log
            .delete_old_segments(1_800_000_000_000, log.log_end_offset())
            .await
            .unwrap();
        assert!(
            deleted > 0,
            "compact,delete: old segments go by retention.ms"
        );
    });
}

#[test]
fn replaced_segments_stay_for_file_delete_delay_and_while_a_fetch_reads_them() {
    run(|| async {
        let dir = tmpdir();
        let mut cfg = compacted();
        cfg.compaction.file_delete_delay_ms = 300;
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        fill(&log, 20, false).await;
        log.flush().await.unwrap();
        let opts = ReadOptions {
            max_bytes: 1 << 20,
            min_one_batch: true,
            max_offset: None,
        };
        // A fetch that took the first segment before the cleaning.
        let held = log.read(Offset(0), opts).await.unwrap();
        assert!(held.slices.iter().any(|s| s.is_file()), "{:?}", held.slices);
        let deleted = || -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".deleted"))
                .collect();
            names.sort();
            names
        };
        clean(&log, &UNLIMITED).await.expect("cleaned");
        let renamed = deleted();
        assert!(renamed.len() > 1, "replaced segments renamed: {renamed:?}");
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(deleted(), renamed, "kept for file.delete.delay.ms");
        // Past the delay the unread ones go; the one the fetch holds stays.
        let first: Vec<String> = ["index", "log", "timeindex"]
            .iter()
            .map(|s| format!("{:020}.{s}.deleted", 0))
            .collect();
        let start = std::time::Instant::now();
        while deleted() != first {
            assert!(
                start.elapsed().as_secs() < 10,
                "still there: {:?}",
                deleted()
            );
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        }
        // The fetch reads the records as they were before the cleaning, whole.
        let recs = decode(&iouring_log::read_slices_to_vec(&held.slices).await.unwrap());
        assert_eq!(recs.first().map(|r| r.offset), Some(0));
        assert!(recs.windows(2).all(|w| w[1].offset == w[0].offset + 1));
        drop(held);
        while !deleted().is_empty() {
            assert!(
                start.elapsed().as_secs() < 20,
                "still there: {:?}",
                deleted()
            );
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(by_key(&read_compacted(&log).await).len(), KEYS as usize);
    });
}
