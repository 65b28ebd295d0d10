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

/// A quiet partition's appends (small tail chunks) are written through the page cache; once
/// appends come fast enough for 1 MiB chunks, those go O_DIRECT. Either way every record reads
/// back, and a flush makes both durable.
#[test]
fn a_quiet_partition_writes_through_the_page_cache_and_a_busy_one_direct() {
    run(|| async {
        let dir = tmpdir();
        let (log, io) = open_counted(dir.path(), LogConfig::default()).await;
        let before = io.counts();
        let mut next = 1;
        for _ in 0..5 {
            let info = log
                .append_as_leader(&batch(next, 1, 300, Compression::None), LeaderEpoch(0), 0)
                .await
                .unwrap();
            next = info.last_offset.next().0;
            log.wait_for(Durability::Written, info.last_offset.next())
                .await
                .unwrap();
        }
        let quiet = io.counts();
        assert_eq!(
            quiet.writes - before.writes,
            5,
            "one write per waited append"
        );
        assert_eq!(
            quiet.page_cache_writes - before.page_cache_writes,
            5,
            "a quiet partition's writes go through the page cache"
        );
        // 3 MiB at once: the first small chunk fills at once, so the tail turns busy and takes
        // 1 MiB chunks from the next megabyte on.
        for _ in 0..48 {
            next = log
                .append_as_leader(&batch(next, 16, 4000, Compression::None), LeaderEpoch(0), 0)
                .await
                .unwrap()
                .last_offset
                .next()
                .0;
        }
        log.wait_for(Durability::Flushed, Offset(next))
            .await
            .unwrap();
        let busy = io.counts();
        let direct =
            (busy.writes - busy.page_cache_writes) - (quiet.writes - quiet.page_cache_writes);
        assert!(
            direct >= 2,
            "a busy partition's whole chunks go O_DIRECT: {busy:?} after {quiet:?}"
        );
        assert!(
            busy.page_cache_writes > quiet.page_cache_writes,
            "its first megabyte still came from small chunks: {busy:?} after {quiet:?}"
        );
        assert_eq!(read_all(&log).await.len() as i64, next);
        log.close().await.unwrap();
    });
}
