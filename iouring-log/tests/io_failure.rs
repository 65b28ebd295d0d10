//! A failed write poisons the log: on a small real ext4 filesystem (a loop-mounted image) the
//! disk fills, the write fails with ENOSPC, and every later call returns an error until the log
//! is reopened, which recovers everything that was flushed. Needs root and `mkfs.ext4` (both on
//! this project's machines and in CI).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use iouring_log::{AppendError, FlushError, LeaderEpoch, Log, LogConfig, Offset, ReadOptions};
use kafka_protocol::records::Compression;

const VALUE: usize = 1000;

/// A 96 MiB ext4 filesystem mounted on a fresh folder; unmounted on drop.
struct SmallFs {
    image: PathBuf,
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

fn sh(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl SmallFs {
    fn new() -> SmallFs {
        let dir = tmpdir();
        let image = dir.path().join("fs.img");
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(96 << 20)
            .unwrap();
        sh("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
        let fs = SmallFs {
            image,
            mount,
            _dir: dir,
        };
        fs.mount();
        fs
    }

    fn mount(&self) {
        sh(
            "mount",
            &[
                "-o",
                "loop",
                self.image.to_str().unwrap(),
                self.mount.to_str().unwrap(),
            ],
        );
    }

    fn log_dir(&self) -> PathBuf {
        self.mount.join("topic-0")
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Lazy: files closed asynchronously by the finished executors may still be open.
        if let Err(e) = Command::new("umount").arg("-l").arg(&self.mount).status() {
            eprintln!("umount {}: {e}", self.mount.display());
        }
    }
}

async fn fill_until_failure(dir: &Path) -> i64 {
    let log = Log::open(dir, LogConfig::default(), 0).await.unwrap();
    let mut flushed = 0i64;
    let mut next = 0i64;
    let failure = loop {
        assert!(next < 400_000, "the 96 MiB filesystem never filled");
        if let Err(e) = log
            .append_as_leader(
                &batch(next, 16, VALUE, Compression::None),
                LeaderEpoch(0),
                0,
            )
            .await
        {
            break e.to_string();
        }
        next += 16;
        match log.flush().await {
            Ok(()) => flushed = next,
            Err(e) => break e.to_string(),
        }
    };
    eprintln!("first failure after {next} records ({flushed} flushed): {failure}");
    assert!(
        failure.contains("No space left") || failure.contains("failed"),
        "{failure}"
    );
    let again = log
        .append_as_leader(&batch(next, 1, VALUE, Compression::None), LeaderEpoch(0), 0)
        .await;
    assert!(
        matches!(again, Err(AppendError::Failed(_))),
        "append after failure: {again:?}"
    );
    assert!(matches!(log.flush().await, Err(FlushError::Failed(_))));
    assert!(matches!(log.roll(0).await, Err(FlushError::Failed(_))));
    // The latched failure says the disk is full: what the node's reopening keys on.
    let latched = log.failure().expect("the log failed");
    assert!(latched.is_no_space(), "{latched:?}");
    let opts = ReadOptions {
        max_bytes: 1 << 20,
        max_offset: None,
        min_one_batch: true,
    };
    // What was written before the failure is still served; nothing after the written end.
    let served = read_records(&log, 0, 1 << 20).await;
    assert!(!served.is_empty(), "written records are still read");
    served.iter().for_each(|r| check_record(r, VALUE));
    let written = log.written_end_offset();
    let past = log
        .read(written, opts)
        .await
        .expect("a read at the written end");
    assert!(
        past.is_empty(),
        "nothing past the written end: {:?}",
        past.slices
    );
    assert!(
        log.close().await.is_err(),
        "close refuses: nothing more is written"
    );
    flushed
}

#[test]
fn a_failed_write_poisons_the_log_until_reopened() {
    let fs = SmallFs::new();
    let dir = fs.log_dir();
    let flushed = {
        let dir = dir.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        run(move || async move { tx.send(fill_until_failure(&dir).await).unwrap() });
        rx.recv().unwrap()
    };
    assert!(
        flushed > 1000,
        "a good part was flushed before the disk filled: {flushed}"
    );
    // Reopen on the same (still full) filesystem: recovery trims the preallocated space.
    run(move || async move {
        let log = Log::open(&dir, LogConfig::default(), 0).await.unwrap();
        assert!(
            log.log_end_offset() >= Offset(flushed),
            "flushed data survives: {flushed}"
        );
        let all = read_all(&log).await;
        assert!(all.len() as i64 >= flushed);
        all.iter().for_each(|r| check_record(r, VALUE));
    });
}

/// Writes resume without a restart: a log failed on a full disk is retired (none of its I/O
/// still running) and opened again on the same executor once space returns; what was flushed
/// survives and new appends are written and flushed.
#[test]
fn a_retired_failed_log_reopens_and_takes_writes_once_space_returns() {
    let fs = SmallFs::new();
    let dir = fs.log_dir();
    let ballast = fs.mount.join("ballast");
    sh("fallocate", &["-l", "24M", ballast.to_str().unwrap()]);
    let started = std::time::Instant::now();
    run(move || async move {
        let log = Log::open(&dir, LogConfig::default(), 0).await.unwrap();
        assert!(
            log.retire_failed().await.is_err(),
            "a healthy log is closed, not retired"
        );
        let mut flushed = 0i64;
        let mut next = 0i64;
        loop {
            assert!(next < 400_000, "the filesystem never filled");
            let b = batch(next, 16, VALUE, Compression::None);
            if log.append_as_leader(&b, LeaderEpoch(0), 0).await.is_err() {
                break;
            }
            next += 16;
            match log.flush().await {
                Ok(()) => flushed = next,
                Err(_) => break,
            }
        }
        log.retire_failed().await.expect("a failed log retires");
        assert!(
            log.append_as_leader(&batch(next, 1, VALUE, Compression::None), LeaderEpoch(0), 0)
                .await
                .is_err(),
            "a retired log takes nothing"
        );
        std::fs::remove_file(&ballast).unwrap();
        let log = Log::open(&dir, LogConfig::default(), 0).await.unwrap();
        let start = log.log_end_offset();
        assert!(start >= Offset(flushed), "flushed data survives: {flushed}");
        for i in 0..200 {
            let b = batch(start.0 + i * 16, 16, VALUE, Compression::None);
            log.append_as_leader(&b, LeaderEpoch(0), 0)
                .await
                .unwrap_or_else(|e| panic!("append {i} after space returned: {e}"));
        }
        log.flush().await.expect("flush after space returned");
        assert_eq!(log.log_end_offset(), Offset(start.0 + 200 * 16));
        let all = read_all(&log).await;
        assert_eq!(all.len() as i64, start.0 + 200 * 16);
        all.iter().for_each(|r| check_record(r, VALUE));
        log.close().await.expect("clean close");
    });
    // A hang guard, not a timing: this takes ~3 s. Each of its ~thousands of append + flush
    // rounds waits for a completion; a reactor that parks while a task it just woke is still
    // runnable (the executor gap `third_party/glommio`'s patch closes) leaves every round to
    // the tests' 10 ms ticker: 965 s.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(240),
        "filling and reopening took {:?}: is the reactor parking with runnable tasks?",
        started.elapsed()
    );
}
