//! The read cache: written chunks are served from memory, cold reads go through O_DIRECT with
//! read-ahead, truncation never lets a stale chunk be served, and no budget means no cache.

mod common;

use common::*;
use iouring_log::limits::TAIL_CHUNK_BYTES as CHUNK;
use iouring_log::{read_cache_stats, set_read_cache_budget};
use iouring_log::{LeaderEpoch, Log, LogConfig, Offset, ReadOptions};
use kafka_protocol::records::Compression;

const VALUE: usize = 1000;
/// Records per batch: ~100 KiB batches.
const PER_BATCH: i64 = 100;

async fn append_values(log: &Log, from: i64, to: i64, value_len: usize) {
    let mut next = from;
    while next < to {
        let n = PER_BATCH.min(to - next);
        log.append_as_leader(
            &batch(next, n, value_len, Compression::None),
            LeaderEpoch(0),
            0,
        )
        .await
        .expect("append");
        next += n;
    }
}

/// A log in `dir` with a cache budget of `budget` bytes, `records` records appended and flushed
/// (all in the active segment).
async fn written_log(dir: &std::path::Path, budget: usize, records: i64) -> Log {
    set_read_cache_budget(budget);
    let log = Log::open(dir, LogConfig::default(), 0).await.unwrap();
    append_values(&log, 0, records, VALUE).await;
    log.flush().await.unwrap();
    log
}

fn opts() -> ReadOptions {
    ReadOptions {
        max_bytes: 1 << 20,
        max_offset: None,
        min_one_batch: true,
    }
}

#[test]
fn written_chunks_are_read_from_memory() {
    run(|| async {
        let dir = tmpdir();
        // ~5 MiB: the first chunks of the active segment are written and leave the tail.
        let log = written_log(dir.path(), 64 * CHUNK, 5000).await;
        let before = read_cache_stats();
        assert!(before.inserted_written >= 3, "{before:?}");
        // From the second megabyte on: the first is in small tail chunks (the partition was not
        // busy yet), which are not cached.
        let r = log.read(Offset(2000), opts()).await.unwrap();
        assert!(r.slices.iter().any(|s| s.is_file()), "{:?}", r.slices);
        let recs = decode(&iouring_log::read_slices_to_vec(&r.slices).await.unwrap());
        assert!(
            recs.first().is_some_and(|r| r.offset <= 2000),
            "{:?}",
            recs.first().map(|r| r.offset)
        );
        recs.iter().for_each(|r| check_record(r, VALUE));
        let after = read_cache_stats();
        assert_eq!(after.misses, before.misses, "no device read: {after:?}");
        assert!(after.hits > before.hits, "{after:?}");
        log.close().await.unwrap();
    });
}

#[test]
fn chunks_written_through_the_page_cache_are_read_through_it_and_the_others_with_o_direct() {
    run(|| async {
        let dir = tmpdir();
        // ~5 MiB: the first megabyte went to the file in small tail chunks, through the page
        // cache (the partition was not busy yet); the next ones in whole chunks, O_DIRECT.
        let log = written_log(dir.path(), 64 * CHUNK, 5000).await;
        // Empty the cache: every read below is a miss.
        set_read_cache_budget(0);
        set_read_cache_budget(64 * CHUNK);
        let before = read_cache_stats();
        let recs = read_records(&log, 2000, 64 << 10).await;
        assert!(recs.first().is_some_and(|r| r.offset <= 2000));
        recs.iter().for_each(|r| check_record(r, VALUE));
        let direct = read_cache_stats();
        assert!(direct.misses > before.misses, "{direct:?}");
        assert_eq!(
            direct.page_cache_reads, before.page_cache_reads,
            "{direct:?}"
        );
        let recs = read_records(&log, 0, 64 << 10).await;
        assert_eq!(recs.first().map(|r| r.offset), Some(0));
        recs.iter().for_each(|r| check_record(r, VALUE));
        let buffered = read_cache_stats();
        assert!(buffered.misses > direct.misses, "{buffered:?}");
        assert!(
            buffered.page_cache_reads > direct.page_cache_reads,
            "{buffered:?}"
        );
        // Everything reads back the same, whichever way each chunk came.
        let all = read_all(&log).await;
        assert_eq!(all.len(), 5000);
        all.iter().for_each(|r| check_record(r, VALUE));
        log.close().await.unwrap();
    });
}

#[test]
fn cold_reads_go_to_the_file_and_read_ahead() {
    run(|| async {
        let dir = tmpdir();
        let config = LogConfig {
            segment_bytes: 16 << 20,
            ..LogConfig::default()
        };
        {
            let log = Log::open(dir.path(), config, 0).await.unwrap();
            append_values(&log, 0, 12_000, VALUE).await;
            log.close().await.unwrap();
        }
        set_read_cache_budget(64 * CHUNK);
        let log = Log::open(dir.path(), config, 0).await.unwrap();
        log.roll(0).await.unwrap();
        log.wait_for_seals().await.unwrap();
        let before = read_cache_stats();
        let recs = read_records(&log, 0, 1 << 20).await;
        assert_eq!(recs.first().map(|r| r.offset), Some(0));
        let after_first = read_cache_stats();
        assert!(after_first.misses > before.misses, "{after_first:?}");
        assert!(after_first.read_ahead > 0, "{after_first:?}");
        // Give the read-ahead time to land, then the next megabytes are hits.
        glommio::timer::sleep(std::time::Duration::from_millis(200)).await;
        let next = recs.last().unwrap().offset + 1;
        let misses = read_cache_stats().misses;
        let recs = read_records(&log, next, 1 << 20).await;
        assert_eq!(recs.first().map(|r| r.offset <= next), Some(true));
        assert_eq!(read_cache_stats().misses, misses, "read ahead served it");
        let all = read_all(&log).await;
        assert_eq!(all.len(), 12_000);
        all.iter().for_each(|r| check_record(r, VALUE));
        log.close().await.unwrap();
    });
}

#[test]
fn truncation_never_serves_a_stale_chunk() {
    run(|| async {
        let dir = tmpdir();
        let log = written_log(dir.path(), 64 * CHUNK, 4000).await;
        // Read everything once: every chunk is cached.
        assert_eq!(read_all(&log).await.len(), 4000);
        // Cut inside the second chunk, then write other values over the same positions.
        let cut = 1500;
        log.truncate_to(Offset(cut)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(cut));
        const OTHER: usize = 700;
        append_values(&log, cut, 5000, OTHER).await;
        log.flush().await.unwrap();
        let all = read_all(&log).await;
        assert_eq!(all.len(), 5000);
        for r in &all {
            check_record(r, if r.offset < cut { VALUE } else { OTHER });
        }
        log.close().await.unwrap();
    });
}

#[test]
fn no_budget_reads_everything_from_the_file() {
    run(|| async {
        let dir = tmpdir();
        let log = written_log(dir.path(), 0, 4000).await;
        let all = read_all(&log).await;
        assert_eq!(all.len(), 4000);
        all.iter().for_each(|r| check_record(r, VALUE));
        let s = read_cache_stats();
        assert_eq!((s.chunks, s.used_bytes, s.hits), (0, 0, 0), "{s:?}");
        log.close().await.unwrap();
    });
}
