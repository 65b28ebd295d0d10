//! Apache Kafka reads our files and we read Kafka's. Uses Kafka 4.x jars resolved from Maven
//! Central by `scripts/kafka/fetch-kafka.sh` (called by `scripts/test.sh`): DumpLogSegments (the
//! class behind `kafka-dump-log.sh`) on segments written by `iouring-log`, and a partition
//! written by a real Kafka broker (`scripts/kafka/kafka-make-segment.sh`) opened by `iouring-log`.
//! DumpLogSegments exits 0 even when it reports mismatches, so its output is checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use iouring_log::{LeaderEpoch, Log, LogConfig, Offset, TimestampMs};
use kafka_protocol::records::Compression;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs DumpLogSegments; returns stdout, failing the test on a non-zero exit or any stderr.
fn dump_log(args: &[&str]) -> String {
    let out = Command::new(repo_root().join("scripts/kafka/kafka-dump-log.sh"))
        .args(args)
        .output()
        .expect("run scripts/kafka/kafka-dump-log.sh (needs java)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "DumpLogSegments {args:?} failed: {stderr}\n{stdout}"
    );
    assert!(
        stderr.trim().is_empty(),
        "DumpLogSegments {args:?} reported problems:\n{stderr}"
    );
    for bad in [
        "Mismatches",
        "mismatch",
        "out of order",
        "not found in the log",
        "invalid bytes",
        "isvalid: false",
    ] {
        assert!(
            !stdout.contains(bad),
            "DumpLogSegments {args:?} reported '{bad}':\n{stdout}"
        );
    }
    stdout
}

fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn kafka_dump_log_reads_our_segments_and_finds_no_index_mismatch() {
    let dir = tmpdir();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let cfg = LogConfig {
            segment_bytes: 64 * 1024,
            ..LogConfig::default()
        };
        let log = Log::open(&path, cfg, 0).await.unwrap();
        let mut next = 0;
        for i in 0..600i64 {
            let count = 1 + i % 9;
            let codec = [
                Compression::None,
                Compression::Gzip,
                Compression::Snappy,
                Compression::Lz4,
                Compression::Zstd,
            ][(i % 5) as usize];
            log.append_as_leader(
                &batch(next, count, 300, codec),
                LeaderEpoch(i as i32 / 200),
                0,
            )
            .await
            .unwrap();
            next += count;
        }
        log.close().await.unwrap();
    });
    let logs = files_with(dir.path(), "log");
    assert!(logs.len() >= 3, "several segments: {logs:?}");
    let join = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect::<Vec<_>>()
            .join(",")
    };
    let out = dump_log(&["--files", &join(&logs), "--deep-iteration"]);
    let records = out.lines().filter(|l| l.starts_with("| offset:")).count();
    let batches = out.lines().filter(|l| l.starts_with("baseOffset:")).count();
    assert_eq!(batches, 600, "Kafka sees every batch");
    assert_eq!(
        records,
        (0..600).map(|i| 1 + i % 9).sum::<usize>(),
        "Kafka sees every record"
    );
    for suffix in ["index", "timeindex"] {
        let indexes = files_with(dir.path(), suffix);
        assert_eq!(indexes.len(), logs.len());
        assert!(
            indexes
                .iter()
                .all(|i| std::fs::metadata(i).unwrap().len() > 0),
            "{suffix} files have entries"
        );
        let out = dump_log(&["--files", &join(&indexes), "--verify-index-only"]);
        assert_eq!(
            out.lines().filter(|l| l.starts_with("Dumping")).count(),
            indexes.len(),
            "{out}"
        );
        let out = dump_log(&["--files", &join(&indexes), "--index-sanity-check"]);
        assert_eq!(
            out.matches("passed sanity check").count(),
            indexes.len(),
            "{out}"
        );
    }
}

#[test]
fn segments_written_by_apache_kafka_are_readable() {
    let out_dir = tmpdir();
    let status = Command::new(repo_root().join("scripts/kafka/kafka-make-segment.sh"))
        .arg(out_dir.path())
        .status()
        .expect("run scripts/kafka/kafka-make-segment.sh");
    assert!(status.success(), "Kafka broker produced the partition");
    let partition = out_dir.path().join("kafka-written-0");
    assert!(
        files_with(&partition, "log").len() >= 2,
        "Kafka rolled several segments"
    );
    let path = partition.clone();
    run(move || async move {
        let log = Log::open(&path, LogConfig::default(), 0).await.unwrap();
        assert_eq!(
            log.log_end_offset(),
            Offset(6100),
            "every Kafka batch validated"
        );
        let all = read_all(&log).await;
        assert_eq!(all.len(), 6100);
        for (i, r) in all.iter().enumerate() {
            assert_eq!(r.offset, i as i64, "contiguous offsets");
        }
        // Lookup by timestamp agrees with a scan of the records.
        for probe in (0..6100).step_by(97) {
            let ts = all[probe].timestamp;
            let expected = all.iter().find(|r| r.timestamp >= ts).unwrap();
            let found = log.offset_for_timestamp(TimestampMs(ts)).await.unwrap();
            assert_eq!(
                found,
                Some((Offset(expected.offset), TimestampMs(expected.timestamp))),
                "timestamp {ts}"
            );
        }
        // Our appends continue Kafka's log, with the epoch Kafka recorded.
        assert_eq!(log.latest_epoch(), Some(LeaderEpoch(0)));
        log.append_as_leader(&batch(6100, 5, 50, Compression::None), LeaderEpoch(1), 0)
            .await
            .unwrap();
        log.close().await.unwrap();
    });
    let logs = files_with(&partition, "log");
    let last = logs.last().unwrap().to_str().unwrap().to_owned();
    let out = dump_log(&["--files", &last, "--deep-iteration"]);
    assert!(
        out.contains("| offset: 6104"),
        "Kafka reads the records we appended to its log"
    );
}
