//! The ordered-append / completion-wait split: appends return before the disk, the written and
//! flushed watermarks move only over whole batches on disk, and one write and one fdatasync
//! cover every append waiting on them (group commit).

mod common;

use std::rc::Rc;

use common::{batch, read_all, run, tmpdir};
use iouring_log::fault_injection::FaultyIo;
use iouring_log::{Durability, LeaderEpoch, Log, LogConfig, LogOptions, Offset};
use kafka_protocol::records::Compression;

/// A log counting its file operations, with one record at offset 0 already written (its
/// first append also writes the leader epoch checkpoint, which waits on the disk).
async fn open_counted(dir: &std::path::Path, config: LogConfig) -> (Log, FaultyIo) {
    let io = FaultyIo::new();
    let options = LogOptions {
        io: Rc::new(io.clone()),
        progress_listener: None,
    };
    let log = Log::open_with(dir, config, 0, options).await.unwrap();
    log.append_as_leader(&batch(0, 1, 10, Compression::None), LeaderEpoch(0), 0)
        .await
        .unwrap();
    log.wait_for(Durability::Flushed, Offset(1)).await.unwrap();
    (log, io)
}

#[test]
fn appends_return_before_the_disk_and_watermarks_follow_it() {
    run(|| async {
        let dir = tmpdir();
        let (log, _io) = open_counted(dir.path(), LogConfig::default()).await;
        let info = log
            .append_as_leader(&batch(1, 5, 100, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), Offset(6));
        // No await since the append: the writer task has not run, nothing new is written.
        assert_eq!(log.written_end_offset(), Offset(1));
        assert_eq!(log.flushed_end_offset(), Offset(1));
        log.wait_for(Durability::Written, info.last_offset.next())
            .await
            .unwrap();
        assert_eq!(log.written_end_offset(), Offset(6));
        assert_eq!(
            log.flushed_end_offset(),
            Offset(1),
            "written is not flushed"
        );
        log.wait_for(Durability::Flushed, Offset(6)).await.unwrap();
        assert_eq!(log.flushed_end_offset(), Offset(6));
        assert_eq!(log.recovery_point(), Offset(6));
        log.close().await.unwrap();
    });
}

#[test]
fn one_write_and_one_fdatasync_cover_many_waiting_appends() {
    run(|| async {
        let dir = tmpdir();
        let (log, io) = open_counted(dir.path(), LogConfig::default()).await;
        let before = io.counts();
        let mut ends = Vec::new();
        // 64 records of 100 bytes stay within one small tail chunk: the partition stays quiet,
        // so no zero fill (which the counts would include) goes out beside the data write.
        for i in 1..65 {
            let info = log
                .append_as_leader(&batch(i, 1, 100, Compression::None), LeaderEpoch(0), 0)
                .await
                .unwrap();
            ends.push(info.last_offset.next());
        }
        let waiters: Vec<_> = ends
            .into_iter()
            .map(|end| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    log.wait_for(Durability::Flushed, end).await.unwrap();
                })
            })
            .collect();
        for w in waiters {
            w.await;
        }
        let after = io.counts();
        assert_eq!(
            after.writes - before.writes,
            1,
            "64 appends of one reactor turn go out in one write"
        );
        assert_eq!(
            after.syncs - before.syncs,
            1,
            "one fdatasync for 64 waiters"
        );
        assert_eq!(read_all(&log).await.len(), 65);
        log.close().await.unwrap();
    });
}

/// Appends arriving while a write is in flight go out together in the next one.
#[test]
fn appends_during_a_write_share_the_next_one() {
    run(|| async {
        let dir = tmpdir();
        let (log, io) = open_counted(dir.path(), LogConfig::default()).await;
        let before = io.counts();
        let first = log
            .append_as_leader(&batch(1, 1, 200, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        // Let the writer issue the write of the first append.
        glommio::yield_if_needed().await;
        glommio::executor().yield_task_queue_now().await;
        let mut last = first.last_offset;
        for i in 2..33 {
            last = log
                .append_as_leader(&batch(i, 1, 200, Compression::None), LeaderEpoch(0), 0)
                .await
                .unwrap()
                .last_offset;
        }
        log.wait_for(Durability::Written, last.next())
            .await
            .unwrap();
        let writes = io.counts().writes - before.writes;
        assert!((1..=2).contains(&writes), "32 appends took {writes} writes");
        log.close().await.unwrap();
    });
}

/// `flush.messages` marks the append that reaches it; the count then starts again.
#[test]
fn flush_messages_marks_the_append_that_reaches_it() {
    run(|| async {
        let dir = tmpdir();
        let config = LogConfig {
            flush_messages: Some(10),
            ..LogConfig::default()
        };
        let (log, _io) = open_counted(dir.path(), config).await;
        let mut due = Vec::new();
        for i in 0..10 {
            let info = log
                .append_as_leader(
                    &batch(1 + i * 4, 4, 50, Compression::None),
                    LeaderEpoch(0),
                    0,
                )
                .await
                .unwrap();
            due.push(info.flush_due);
        }
        // The warm-up record counts 1; 4 records an append: the 3rd append reaches 13 >= 10, the
        // count starts again, the 6th reaches 12, the 9th 12.
        let marked: Vec<usize> = (0..10).filter(|&i| due[i]).collect();
        assert_eq!(marked, vec![2, 5, 8]);
        log.close().await.unwrap();
    });
}

/// A read bounded by the written watermark (the high watermark) returns exactly the written
/// batches: the bound is cut at the watermark's known file position.
#[test]
fn reads_bounded_by_the_written_watermark_stop_at_it() {
    run(|| async {
        let dir = tmpdir();
        let (log, _io) = open_counted(dir.path(), LogConfig::default()).await;
        let a = log
            .append_as_leader(&batch(1, 5, 100, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        log.wait_for(Durability::Written, a.last_offset.next())
            .await
            .unwrap();
        log.append_as_leader(&batch(6, 5, 100, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        let hw = log.written_end_offset();
        assert_eq!((hw, log.log_end_offset()), (Offset(6), Offset(11)));
        let opts = iouring_log::ReadOptions {
            max_bytes: 1 << 20,
            max_offset: Some(hw),
            min_one_batch: true,
        };
        let r = log.read(Offset(1), opts).await.unwrap();
        let bytes = iouring_log::read_slices_to_vec(&r.slices).await.unwrap();
        let offsets: Vec<i64> = common::decode(&bytes).iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (1..6).collect::<Vec<_>>());
        log.close().await.unwrap();
    });
}
