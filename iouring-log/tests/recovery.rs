//! Crash recovery: the log cut at every byte of its tail, random corruption, lost or damaged
//! index files. Nothing valid before the damage may be lost; nothing invalid may be served.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use iouring_log::{BatchHeader, Durability, LeaderEpoch, Log, LogConfig, Offset};
use kafka_protocol::records::Compression;
use rand::{Rng, SeedableRng};

const VALUE: usize = 40;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

type Snapshot = Vec<(PathBuf, Vec<u8>)>;

fn snapshot(dir: &Path) -> Snapshot {
    let mut files: Snapshot = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

fn restore(dir: &Path, snap: &Snapshot) {
    for e in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    for (p, bytes) in snap {
        std::fs::write(p, bytes).unwrap();
    }
}

fn last_log_file(snap: &Snapshot) -> usize {
    snap.iter()
        .rposition(|(p, _)| p.extension().is_some_and(|e| e == "log"))
        .unwrap()
}

/// `(position, base offset, size)` of every batch in a segment file.
fn batches_of(bytes: &[u8]) -> Vec<(usize, i64, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let h = BatchHeader::parse_validated(&bytes[at..]).unwrap();
        out.push((at, h.base_offset.0, h.size_bytes as usize));
        at += h.size_bytes as usize;
    }
    out
}

/// Writes a closed multi-segment log of `total` records and returns its snapshot.
async fn build_log(dir: &Path, total: i64) -> Snapshot {
    let log = Log::open(dir, config(), 0).await.unwrap();
    let mut next = 0;
    let mut i = 0;
    while next < total {
        let count = (1 + i % 4).min(total - next);
        log.append_as_leader(
            &batch(next, count, VALUE, Compression::None),
            LeaderEpoch(0),
            0,
        )
        .await
        .unwrap();
        next += count;
        i += 1;
    }
    log.close().await.unwrap();
    snapshot(dir)
}

/// Opens the damaged log and checks that it serves exactly the records `0..expected_end`,
/// each with the content written.
async fn check_served(dir: &Path, expected_end: i64, context: &str) -> Log {
    let log = Log::open(dir, config(), 0)
        .await
        .unwrap_or_else(|e| panic!("{context}: open failed: {e}"));
    assert_eq!(
        log.log_end_offset(),
        Offset(expected_end),
        "{context}: log end offset"
    );
    let all = read_all(&log).await;
    assert_eq!(all.len() as i64, expected_end, "{context}: records served");
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r.offset, i as i64, "{context}");
        check_record(r, VALUE);
    }
    log
}

/// [`check_served`], then appends after the recovered end and checks the appends survive.
async fn check_recovered(dir: &Path, expected_end: i64, context: &str) {
    let log = check_served(dir, expected_end, context).await;
    log.append_as_leader(
        &batch(expected_end, 2, VALUE, Compression::None),
        LeaderEpoch(0),
        0,
    )
    .await
    .unwrap();
    log.close().await.unwrap();
    let log = Log::open(dir, config(), 0).await.unwrap();
    assert_eq!(
        log.log_end_offset(),
        Offset(expected_end + 2),
        "{context}: appends after recovery survive"
    );
    log.close().await.unwrap();
}

#[test]
fn cut_at_every_byte_of_the_last_segments_tail() {
    run(|| async {
        let dir = tmpdir();
        let snap = build_log(dir.path(), 400).await;
        let li = last_log_file(&snap);
        let (log_path, log_bytes) = snap[li].clone();
        let batches = batches_of(&log_bytes);
        assert!(
            batches.len() >= 3,
            "tail region spans several batches: {}",
            batches.len()
        );
        let region_start = batches[batches.len().saturating_sub(6)].0;
        for cut in region_start..=log_bytes.len() {
            restore(dir.path(), &snap);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&log_path)
                .unwrap();
            f.set_len(cut as u64).unwrap();
            drop(f);
            let complete = batches
                .iter()
                .filter(|(pos, _, size)| pos + size <= cut)
                .count();
            let expected_end = batches.get(complete).map_or(400, |b| b.1);
            let context = format!("cut at byte {cut}");
            // Every cut is opened and read; appending after recovery (two more opens and
            // closes, a dozen fsyncs) is checked at every batch boundary and every 16th cut.
            if batches.iter().any(|b| b.0 == cut) || cut % 16 == 0 {
                check_recovered(dir.path(), expected_end, &context).await;
            } else {
                check_served(dir.path(), expected_end, &context).await;
            }
        }
    });
}

#[test]
fn zero_padding_and_garbage_after_the_end_are_truncated() {
    run(|| async {
        let dir = tmpdir();
        let snap = build_log(dir.path(), 200).await;
        let li = last_log_file(&snap);
        for tail in [
            vec![0u8; 4096],
            vec![0xAB; 100],
            batch(0, 1, VALUE, Compression::None),
        ] {
            restore(dir.path(), &snap);
            let mut bytes = snap[li].1.clone();
            bytes.extend_from_slice(&tail);
            std::fs::write(&snap[li].0, bytes).unwrap();
            check_recovered(dir.path(), 200, "appended junk").await;
        }
    });
}

#[test]
fn random_corruption_of_the_last_segment_keeps_everything_before_it() {
    run(|| async {
        let dir = tmpdir();
        let snap = build_log(dir.path(), 400).await;
        let li = last_log_file(&snap);
        let batches = batches_of(&snap[li].1);
        for seed in 0..150u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            restore(dir.path(), &snap);
            let mut bytes = snap[li].1.clone();
            let at = rng.gen_range(0..bytes.len());
            // Skip the leader epoch field: it lies outside the CRC by design (Kafka's too).
            let (pos, base, _) = *batches.iter().rev().find(|b| b.0 <= at).unwrap();
            if (12..16).contains(&(at - pos)) {
                continue;
            }
            bytes[at] ^= rng.gen_range(1..=255u8);
            std::fs::write(&snap[li].0, bytes).unwrap();
            check_recovered(
                dir.path(),
                base,
                &format!("seed {seed}: byte {at} of the last segment"),
            )
            .await;
        }
    });
}

#[test]
fn corruption_before_the_recovery_point_is_found_when_the_checkpoint_is_lost() {
    run(|| async {
        let dir = tmpdir();
        let snap = build_log(dir.path(), 1200).await;
        let logs: Vec<usize> = (0..snap.len())
            .filter(|&i| snap[i].0.extension().is_some_and(|e| e == "log"))
            .collect();
        assert!(logs.len() >= 3);
        let victim = logs[1];
        let batches = batches_of(&snap[victim].1);
        let (pos, base, _) = batches[batches.len() / 2];
        restore(dir.path(), &snap);
        let mut bytes = snap[victim].1.clone();
        bytes[pos + 30] ^= 0x40;
        std::fs::write(&snap[victim].0, bytes).unwrap();
        std::fs::remove_file(dir.path().join("recovery-point-checkpoint")).unwrap();
        check_recovered(
            dir.path(),
            base,
            "corrupt middle segment, no recovery point",
        )
        .await;
        let remaining = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "log")
            })
            .count();
        assert_eq!(remaining, 2, "segments after the damage are deleted");
    });
}

#[test]
fn missing_or_corrupt_indexes_are_rebuilt_identically() {
    run(|| async {
        let dir = tmpdir();
        let snap = build_log(dir.path(), 400).await;
        let find = |suffix: &str, nth: usize| {
            snap.iter()
                .enumerate()
                .filter(|(_, (p, _))| p.extension().is_some_and(|e| e == suffix))
                .nth(nth)
                .unwrap()
                .0
        };
        let (idx0, tidx0, idx1) = (find("index", 0), find("timeindex", 0), find("index", 1));
        assert!(
            snap[idx0].1.len() >= 16 && snap[idx1].1.len() >= 16,
            "indexes have entries"
        );
        restore(dir.path(), &snap);
        std::fs::remove_file(&snap[idx0].0).unwrap();
        std::fs::write(&snap[tidx0].0, [1u8, 2, 3]).unwrap();
        // Swap the first two entries: offsets and positions no longer increase.
        let mut shuffled = snap[idx1].1.clone();
        shuffled[..16].rotate_left(8);
        std::fs::write(&snap[idx1].0, shuffled).unwrap();
        check_recovered(dir.path(), 400, "damaged indexes").await;
        for i in [idx0, tidx0, idx1] {
            assert_eq!(
                std::fs::read(&snap[i].0).unwrap(),
                snap[i].1,
                "{} rebuilt",
                snap[i].0.display()
            );
        }
    });
}

/// What `kill -9` leaves behind right after `wait_for(Written)` returned (the log never closed, the
/// files copied while it is open): every record appended before the call is recovered, including
/// those in the last, partial block.
#[test]
fn records_waited_written_survive_a_killed_process() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), config(), 0).await.unwrap();
        for base in (0..30).step_by(3) {
            log.append_as_leader(&batch(base, 3, VALUE, Compression::None), LeaderEpoch(0), 0)
                .await
                .unwrap();
        }
        log.wait_for(Durability::Written, log.log_end_offset())
            .await
            .unwrap();
        let snap = snapshot(dir.path());
        let crashed = tmpdir();
        for (p, bytes) in &snap {
            std::fs::write(crashed.path().join(p.file_name().unwrap()), bytes).unwrap();
        }
        log.close().await.unwrap();
        check_served(crashed.path(), 30, "killed after wait_written")
            .await
            .close()
            .await
            .unwrap();
    });
}

/// The inode of a file: a checkpoint rewritten (temporary file renamed over it) gets a new one.
fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn checkpoints_holding_the_same_values_are_not_rewritten() {
    run(|| async {
        let dir = tmpdir();
        build_log(dir.path(), 50).await;
        let rp_file = dir.path().join("recovery-point-checkpoint");
        let epoch_file = dir.path().join("leader-epoch-checkpoint");
        let (rp_before, epoch_before) = (inode(&rp_file), inode(&epoch_file));
        assert_eq!(std::fs::read_to_string(&rp_file).unwrap(), "0\n1\n50\n");

        // Opened and closed with nothing appended: both files already say it.
        let log = check_served(dir.path(), 50, "reopened").await;
        log.close().await.unwrap();
        assert_eq!(
            inode(&rp_file),
            rp_before,
            "recovery point rewritten unchanged"
        );
        assert_eq!(
            inode(&epoch_file),
            epoch_before,
            "epochs rewritten unchanged"
        );

        // Appends move the recovery point at close; the epochs stay.
        let log = Log::open(dir.path(), config(), 0).await.unwrap();
        log.append_as_leader(&batch(50, 2, VALUE, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        log.close().await.unwrap();
        assert_ne!(
            inode(&rp_file),
            rp_before,
            "a new recovery point is written"
        );
        assert_eq!(std::fs::read_to_string(&rp_file).unwrap(), "0\n1\n52\n");
        assert_eq!(
            inode(&epoch_file),
            epoch_before,
            "epochs rewritten unchanged"
        );

        // A damaged checkpoint is rewritten at open even where its value would be the same.
        std::fs::write(&rp_file, "0\n1\nfifty-two\n").unwrap();
        let log = check_served(dir.path(), 52, "damaged checkpoint").await;
        assert_eq!(std::fs::read_to_string(&rp_file).unwrap(), "0\n1\n52\n");
        log.close().await.unwrap();
    });
}
