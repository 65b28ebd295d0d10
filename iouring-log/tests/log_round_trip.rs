//! Appends and reads over many segments, lookups by offset and timestamp at every offset,
//! roll, retention, truncation and concurrent append/read on one shard.

mod common;

use common::*;
use iouring_log::{AppendError, LeaderEpoch, Log, LogConfig, Offset, ReadOptions, TimestampMs};
use kafka_protocol::records::Compression;

const VALUE: usize = 100;

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 32 * 1024,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// Appends batches of 1..=7 records until `total` records; returns the base offsets.
async fn fill(log: &Log, total: i64) -> Vec<i64> {
    let mut bases = Vec::new();
    let mut next = log.log_end_offset().0;
    let mut i = 0;
    while next < total {
        let count = (1 + i % 7).min(total - next);
        let codec = if i % 5 == 4 {
            Compression::Gzip
        } else {
            Compression::None
        };
        let info = log
            .append_as_leader(&batch(next, count, VALUE, codec), LeaderEpoch(0), 0)
            .await
            .expect("append");
        assert_eq!(info.first_offset, Offset(next));
        assert_eq!(info.last_offset, Offset(next + count - 1));
        bases.push(next);
        next += count;
        i += 1;
    }
    bases
}

#[test]
fn round_trip_over_many_segments_and_reopen() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 3000).await;
        assert!(
            log.segment_base_offsets().len() > 10,
            "segments: {:?}",
            log.segment_base_offsets()
        );
        let all = read_all(&log).await;
        assert_eq!(all.len(), 3000);
        for (i, r) in all.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            check_record(r, VALUE);
        }
        log.close().await.unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(3000));
        assert_eq!(read_all(&log).await.len(), 3000);
        fill(&log, 3500).await;
        let all = read_all(&log).await;
        assert_eq!(all.len(), 3500);
        all.iter().for_each(|r| check_record(r, VALUE));
    });
}

#[test]
fn lookup_by_offset_and_timestamp_at_every_offset() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 1500).await;
        for open_again in [false, true] {
            let log = if open_again {
                log.close().await.unwrap();
                Log::open(dir.path(), small_segments(), 0).await.unwrap()
            } else {
                log.clone()
            };
            for o in 0..1500 {
                let recs = read_records(&log, o, 1).await;
                let first = recs.first().unwrap_or_else(|| panic!("nothing at {o}"));
                assert!(
                    first.offset <= o,
                    "read at {o} starts after it ({})",
                    first.offset
                );
                assert!(recs.iter().any(|r| r.offset == o), "read at {o} lacks it");
                let (_, _, ts) = expected_record(o, VALUE);
                let found = log.offset_for_timestamp(TimestampMs(ts)).await.unwrap();
                assert_eq!(
                    found,
                    Some((Offset(o), TimestampMs(ts))),
                    "timestamp of offset {o}"
                );
                let between = log.offset_for_timestamp(TimestampMs(ts - 5)).await.unwrap();
                assert_eq!(
                    between.map(|f| f.0),
                    Some(Offset(o)),
                    "timestamp just before offset {o}"
                );
            }
            let after = log
                .offset_for_timestamp(TimestampMs(i64::MAX))
                .await
                .unwrap();
            assert_eq!(after, None);
            if open_again {
                log.close().await.unwrap();
                break;
            }
        }
    });
}

#[test]
fn reads_respect_max_offset_and_range() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 200).await;
        let opts = |max_offset| ReadOptions {
            max_bytes: 1 << 20,
            max_offset: Some(Offset(max_offset)),
            min_one_batch: true,
        };
        let r = log.read(Offset(0), opts(100)).await.unwrap();
        let recs = decode(&iouring_log::read_slices_to_vec(&r.slices).await.unwrap());
        assert!(
            recs.iter().all(|r| r.offset < 107),
            "a batch never straddles far past the bound"
        );
        let r = log.read(Offset(150), opts(100)).await.unwrap();
        assert!(r.is_empty(), "nothing at or beyond max_offset");
        let err = log.read(Offset(201), opts(300)).await.unwrap_err();
        assert!(
            matches!(err, iouring_log::ReadError::OffsetOutOfRange { .. }),
            "{err}"
        );
        assert!(
            log.read(Offset(200), opts(300)).await.unwrap().is_empty(),
            "log end reads empty"
        );
    });
}

#[test]
fn a_read_cut_by_max_bytes_ends_on_a_whole_batch() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 400).await;
        let bases = log.segment_base_offsets();
        let end = log.log_end_offset();
        // Every 13th start offset and a spread of limits: each answer is whole batches, never
        // empty, within the limit unless it is one batch; and where it stops before its
        // segment's end, short of the limit only by what the offset index cannot place (one
        // index interval of 1 KiB plus a batch of at most 7 records).
        let mut offset = 0;
        let mut cut = 0;
        while offset < end.0 {
            for max_bytes in [300, 700, 1500, 2500, 5000] {
                let opts = ReadOptions {
                    max_bytes,
                    max_offset: None,
                    min_one_batch: true,
                };
                let r = log.read(Offset(offset), opts).await.unwrap();
                let bytes = iouring_log::read_slices_to_vec(&r.slices).await.unwrap();
                let batches: Vec<_> = iouring_log::whole_batches(&bytes).collect();
                let what = format!("offset {offset} max {max_bytes}");
                assert!(!batches.is_empty(), "{what}: nothing read");
                let last = batches.last().unwrap().clone();
                assert_eq!(last.end, bytes.len(), "{what}: a torn batch at the end");
                if batches.len() > 1 {
                    assert!(bytes.len() <= max_bytes, "{what}: {} bytes", bytes.len());
                }
                let next = iouring_log::BatchHeader::parse(&bytes[last.start..])
                    .unwrap()
                    .last_offset()
                    .next();
                if next < end && !bases.contains(&next) {
                    cut += 1;
                    let slack = 1024 + 7 * (VALUE + 40) + 61;
                    assert!(
                        bytes.len() + slack >= max_bytes,
                        "{what}: {} bytes, cut short",
                        bytes.len()
                    );
                }
            }
            offset += 13;
        }
        assert!(cut > 50, "the limits cut reads: {cut}");
        log.close().await.unwrap();
    });
}

#[test]
fn corrupt_batches_are_rejected_and_change_nothing() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 10).await;
        let mut bad = batch(0, 3, VALUE, Compression::None);
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        let mut two = batch(0, 2, VALUE, Compression::None);
        two.extend_from_slice(&bad);
        for input in [bad, two, vec![1, 2, 3], Vec::new()] {
            let err = log
                .append_as_leader(&input, LeaderEpoch(0), 0)
                .await
                .unwrap_err();
            assert!(matches!(err, AppendError::CorruptBatch { .. }), "{err}");
        }
        assert_eq!(log.log_end_offset(), Offset(10));
        let follower = log
            .append_as_follower(&batch(0, 1, VALUE, Compression::None), 0)
            .await
            .unwrap_err();
        assert!(
            matches!(follower, AppendError::OffsetMismatch { .. }),
            "{follower}"
        );
        assert_eq!(read_all(&log).await.len(), 10);
    });
}

#[test]
fn roll_by_time_and_retention_by_bytes_and_time() {
    run(|| async {
        let dir = tmpdir();
        let cfg = LogConfig {
            segment_bytes: 1 << 20,
            segment_ms: 1000,
            retention_ms: None,
            retention_bytes: Some(3000),
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        for i in 0..10i64 {
            // Each append is 2 s after the previous one: every append rolls.
            log.append_as_leader(
                &batch(i, 1, 1000, Compression::None),
                LeaderEpoch(0),
                i * 2000,
            )
            .await
            .unwrap();
        }
        assert_eq!(
            log.segment_base_offsets().len(),
            10,
            "{:?}",
            log.segment_base_offsets()
        );
        let deleted = log.delete_old_segments(20_000, Offset(5)).await.unwrap();
        assert_eq!(deleted, 5, "the high watermark bounds deletion");
        assert_eq!(log.log_start_offset(), Offset(5));
        let deleted = log.delete_old_segments(20_000, Offset(10)).await.unwrap();
        let size = log.size_bytes();
        assert!(
            size >= 2000 && deleted > 0,
            "kept {size} bytes after deleting {deleted}"
        );
        let err = log
            .read(
                Offset(0),
                ReadOptions {
                    max_bytes: 100,
                    max_offset: None,
                    min_one_batch: true,
                },
            )
            .await;
        assert!(matches!(
            err,
            Err(iouring_log::ReadError::OffsetOutOfRange { .. })
        ));
        log.close().await.unwrap();

        let cfg = LogConfig {
            retention_ms: Some(10_000),
            retention_bytes: None,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        let start = log.log_start_offset();
        // Record timestamps are 1.7e12 + 10 * offset; all expire at now = 2e12.
        let deleted = log
            .delete_old_segments(2_000_000_000_000, Offset(10))
            .await
            .unwrap();
        assert!(deleted > 0);
        assert_eq!(
            log.log_start_offset(),
            Offset(10),
            "expired active segment rolled and deleted (was {start})"
        );
        assert_eq!(log.log_end_offset(), Offset(10));
        log.append_as_leader(&batch(10, 1, 10, Compression::None), LeaderEpoch(0), 0)
            .await
            .unwrap();
        assert_eq!(read_all(&log).await.len(), 1);
    });
}

#[test]
fn truncate_fully_and_start_at_empties_the_log_and_survives_reopen() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 600).await;
        assert!(log.segment_base_offsets().len() > 2);
        // At or below the end of a log that is not empty: refused, nothing changes.
        assert!(matches!(
            log.truncate_fully_and_start_at(Offset(600), 0).await,
            Err(iouring_log::FlushError::RestartInsideLog { .. })
        ));
        assert_eq!(log.log_start_offset(), Offset(0));
        assert_eq!(log.log_end_offset(), Offset(600));
        log.truncate_fully_and_start_at(Offset(5000), 0)
            .await
            .unwrap();
        assert_eq!(log.log_start_offset(), Offset(5000));
        assert_eq!(log.log_end_offset(), Offset(5000));
        assert_eq!(log.segment_base_offsets(), vec![Offset(5000)]);
        assert_eq!(log.latest_epoch(), None, "the epochs went with the records");
        // Empty: it may start again below its end (a first batch straddling the leader's start).
        log.truncate_fully_and_start_at(Offset(5000), 0)
            .await
            .unwrap();
        log.truncate_fully_and_start_at(Offset(4990), 0)
            .await
            .unwrap();
        log.truncate_fully_and_start_at(Offset(5000), 0)
            .await
            .unwrap();
        assert_eq!(log.segment_base_offsets(), vec![Offset(5000)]);
        assert!(matches!(
            log.read(
                Offset(0),
                ReadOptions {
                    max_bytes: 1 << 20,
                    max_offset: None,
                    min_one_batch: true
                }
            )
            .await,
            Err(iouring_log::ReadError::OffsetOutOfRange { .. })
        ));
        let info = log
            .append_as_leader(&batch(5000, 5, VALUE, Compression::None), LeaderEpoch(7), 0)
            .await
            .unwrap();
        assert_eq!(info.first_offset, Offset(5000));
        log.flush().await.unwrap();
        log.close().await.unwrap();
        let files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".log"))
            .collect();
        assert_eq!(
            files,
            vec!["00000000000000005000.log".to_string()],
            "old segments deleted"
        );
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(log.log_start_offset(), Offset(5000));
        assert_eq!(log.log_end_offset(), Offset(5005));
        assert_eq!(log.leader_epochs(), vec![(LeaderEpoch(7), Offset(5000))]);
        let recs = read_records(&log, 5000, 1 << 20).await;
        assert_eq!(recs.len(), 5);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.offset, 5000 + i as i64);
            check_record(r, VALUE);
        }
        log.close().await.unwrap();
    });
}

#[test]
fn truncate_to_removes_the_tail_across_segments() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        let bases = fill(&log, 1000).await;
        log.append_as_leader(&batch(1000, 5, VALUE, Compression::None), LeaderEpoch(3), 0)
            .await
            .unwrap();
        assert_eq!(log.latest_epoch(), Some(LeaderEpoch(3)));
        let cut = bases[bases.len() / 3];
        log.truncate_to(Offset(cut)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(cut));
        assert_eq!(
            log.latest_epoch(),
            Some(LeaderEpoch(0)),
            "epoch 3 started after the cut"
        );
        let all = read_all(&log).await;
        assert_eq!(all.len() as i64, cut);
        fill(&log, 1200).await;
        log.close().await.unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        let all = read_all(&log).await;
        assert_eq!(all.len(), 1200);
        all.iter().for_each(|r| check_record(r, VALUE));
    });
}

#[test]
fn leader_epochs_are_stamped_checkpointed_and_answer_end_offsets() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        log.append_as_leader(&batch(0, 5, 10, Compression::None), LeaderEpoch(1), 0)
            .await
            .unwrap();
        log.append_as_leader(&batch(5, 5, 10, Compression::None), LeaderEpoch(4), 0)
            .await
            .unwrap();
        let stale = log
            .append_as_leader(&batch(10, 1, 10, Compression::None), LeaderEpoch(2), 0)
            .await;
        assert!(matches!(stale, Err(AppendError::StaleEpoch { .. })));
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(2)),
            Some((LeaderEpoch(1), Offset(5)))
        );
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(4)),
            Some((LeaderEpoch(4), Offset(10)))
        );
        let r = log
            .read(
                Offset(5),
                ReadOptions {
                    max_bytes: 1 << 20,
                    max_offset: None,
                    min_one_batch: true,
                },
            )
            .await
            .unwrap();
        let bytes = iouring_log::read_slices_to_vec(&r.slices).await.unwrap();
        let h = iouring_log::BatchHeader::parse_validated(&bytes).unwrap();
        assert_eq!(
            (h.base_offset, h.partition_leader_epoch),
            (Offset(5), LeaderEpoch(4))
        );
        drop(log); // no clean close: the checkpoint written on the epoch change must suffice
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(
            log.leader_epochs(),
            vec![(LeaderEpoch(1), Offset(0)), (LeaderEpoch(4), Offset(5))]
        );
        let text = std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap();
        assert_eq!(text, "0\n2\n1 0\n4 5\n");
    });
}

#[test]
fn concurrent_append_and_read_on_one_shard() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        let total = 4000i64;
        let writer = {
            let log = log.clone();
            glommio::spawn_local(async move {
                fill(&log, total).await;
            })
        };
        let mut readers = Vec::new();
        for _ in 0..3 {
            let log = log.clone();
            readers.push(glommio::spawn_local(async move {
                let mut next = 0i64;
                while next < total {
                    if next >= log.log_end_offset().0 {
                        glommio::yield_if_needed().await;
                        glommio::timer::sleep(std::time::Duration::from_micros(50)).await;
                        continue;
                    }
                    for r in read_records(&log, next, 8192).await {
                        if r.offset >= next {
                            assert_eq!(r.offset, next, "records arrive in order without gaps");
                            check_record(&r, VALUE);
                            next += 1;
                        }
                    }
                }
            }));
        }
        writer.await;
        for r in readers {
            r.await;
        }
        log.flush().await.unwrap();
        let (appended, written, durable) = log.active_segment_progress();
        assert!(
            durable == written && written == appended,
            "{durable} {written} {appended}"
        );
    });
}

#[test]
fn head_reads_come_from_memory_until_the_tail_releases_them() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), LogConfig::default(), 0)
            .await
            .unwrap();
        fill(&log, 50).await;
        log.flush().await.unwrap();
        let opts = ReadOptions {
            max_bytes: 1 << 20,
            max_offset: None,
            min_one_batch: true,
        };
        // Written and fsynced, but still in the active segment's tail: O_DIRECT wrote around the
        // page cache, so the head is served from memory, not read back from the device.
        let r = log.read(Offset(10), opts).await.unwrap();
        assert!(!r.is_empty());
        assert!(
            r.slices.iter().all(|s| !s.is_file()),
            "head of the log read from the file: {:?}",
            r.slices
        );
        let head = decode(&iouring_log::read_slices_to_vec(&r.slices).await.unwrap());
        assert_eq!(head.first().map(|r| r.offset), Some(10));
        assert_eq!(head.last().map(|r| r.offset), Some(49));
        // Once the segment is sealed its bytes come from the file (through the read cache).
        log.roll(0).await.unwrap();
        log.wait_for_seals().await.unwrap();
        let r = log.read(Offset(10), opts).await.unwrap();
        assert!(r.slices.iter().all(|s| s.is_file()));
        let sealed = decode(&iouring_log::read_slices_to_vec(&r.slices).await.unwrap());
        assert_eq!(sealed.len(), head.len());
    });
}

/// An idle log gives back its tail (`Log::park_idle_tail`): only the partial last block stays
/// in memory, every record still reads back (its last ones now from the file), appends after
/// it rewrite that block correctly, and a reopened log reads the same records.
#[test]
fn an_idle_tail_is_parked_and_appends_resume_after_it() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), LogConfig::default(), 0)
            .await
            .unwrap();
        fill(&log, 300).await;
        log.wait_for(iouring_log::Durability::Written, log.log_end_offset())
            .await
            .unwrap();
        let idle = std::time::Instant::now() + iouring_log::limits::TAIL_PARK_IDLE;
        let before = log.tail_bytes_held();
        assert!(
            before >= iouring_log::limits::TAIL_SMALL_CHUNK_BYTES,
            "{before}"
        );
        assert!(
            !log.park_idle_tail(std::time::Instant::now()),
            "appended just now"
        );
        assert!(log.park_idle_tail(idle));
        assert!(log.tail_bytes_held() <= iouring_log::limits::DIRECT_IO_ALIGNMENT);
        let all = read_all(&log).await;
        assert_eq!(all.len(), 300);
        all.iter().for_each(|r| check_record(r, VALUE));
        fill(&log, 600).await;
        log.wait_for(iouring_log::Durability::Written, log.log_end_offset())
            .await
            .unwrap();
        let all = read_all(&log).await;
        assert_eq!(all.len(), 600);
        for (i, r) in all.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            check_record(r, VALUE);
        }
        assert!(
            log.park_idle_tail(std::time::Instant::now() + 2 * iouring_log::limits::TAIL_PARK_IDLE)
        );
        log.close().await.unwrap();
        let log = Log::open(dir.path(), LogConfig::default(), 0)
            .await
            .unwrap();
        let all = read_all(&log).await;
        assert_eq!(all.len(), 600);
        all.iter().for_each(|r| check_record(r, VALUE));
    });
}

/// DeleteRecords' log start offset (`Log::advance_log_start`): offsets below it are out of
/// range, segments wholly below it are deleted, it never moves back or past its bound, it
/// survives a reopen, and a truncation below it brings it down.
#[test]
fn the_log_start_offset_moves_inside_a_segment_and_survives_reopen() {
    run(|| async {
        let dir = tmpdir();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        fill(&log, 3000).await;
        let end = log.log_end_offset();
        let segments_before = log.segment_base_offsets().len();
        let start = log.advance_log_start(Offset(1234), end, 0).await.unwrap();
        assert_eq!(start, Offset(1234));
        assert_eq!(log.log_start_offset(), Offset(1234));
        let bases = log.segment_base_offsets();
        assert!(bases.len() < segments_before, "{bases:?}");
        assert!(bases[0] <= Offset(1234) && bases.get(1).is_none_or(|b| *b > Offset(1234)));
        assert!(matches!(
            log.read(
                Offset(1233),
                ReadOptions {
                    max_bytes: 1 << 20,
                    max_offset: None,
                    min_one_batch: true,
                }
            )
            .await,
            Err(iouring_log::ReadError::OffsetOutOfRange { .. })
        ));
        let from_start = read_records(&log, 1234, 1 << 20).await;
        assert!(from_start.iter().any(|r| r.offset == 1234));
        // Never backwards, never past the bound given (the high watermark).
        assert_eq!(
            log.advance_log_start(Offset(10), end, 0).await.unwrap(),
            Offset(1234)
        );
        assert_eq!(
            log.advance_log_start(Offset(5000), Offset(2000), 0)
                .await
                .unwrap(),
            Offset(2000)
        );
        log.close().await.unwrap();
        let log = Log::open(dir.path(), small_segments(), 0).await.unwrap();
        assert_eq!(log.log_start_offset(), Offset(2000));
        let all = read_all(&log).await;
        assert_eq!(all.first().map(|r| r.offset <= 2000), Some(true));
        assert_eq!(all.last().map(|r| r.offset), Some(2999));
        // A follower truncating into the batch that holds the start brings the start down.
        // (Batches hold 1 to 7 records: 2000 is inside one, or its first.)
        let batch_base = read_records(&log, 2000, 1).await[0].offset;
        log.truncate_to(Offset(2000)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(batch_base));
        assert_eq!(log.log_start_offset(), Offset(batch_base));
        fill(&log, 3100).await;
        assert_eq!(read_all(&log).await.last().map(|r| r.offset), Some(3099));
    });
}

/// Appends `batches` batches of 20 records of 1 000 bytes from offset 0, then flushes.
async fn append_batches_of_20(log: &Log, batches: i64) {
    for i in 0..batches {
        log.append_as_leader(
            &batch(i * 20, 20, 1000, Compression::None),
            LeaderEpoch(0),
            0,
        )
        .await
        .unwrap();
    }
    log.flush().await.unwrap();
}

/// Retention deletes a segment nobody reads at once; one a fetch still holds is renamed
/// `.deleted` (gone from the log, readable by that fetch) and removed once the fetch is done.
/// The deleting shard never closes a descriptor that frees the file's blocks (see
/// `Segment::delete_files`): that part is shown by the broker benchmark, not here.
#[test]
fn a_deleted_segment_a_fetch_holds_is_read_whole_then_removed() {
    run(|| async {
        let dir = tmpdir();
        let cfg = LogConfig {
            segment_bytes: 64 << 10,
            retention_ms: None,
            retention_bytes: Some(1),
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        // 1 000-byte records, 20 a batch: ~3 batches a segment.
        append_batches_of_20(&log, 20).await;
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 5, "{bases:?}");
        let held = log
            .read(
                Offset(0),
                ReadOptions {
                    max_bytes: 1 << 20,
                    max_offset: None,
                    min_one_batch: true,
                },
            )
            .await
            .unwrap();
        assert!(held.slices.iter().any(|s| s.is_file()), "{:?}", held.slices);
        let path =
            |base: &Offset, suffix: &str| dir.path().join(format!("{:020}.{suffix}", base.0));
        let deleted = log
            .delete_old_segments(0, log.log_end_offset())
            .await
            .unwrap();
        assert_eq!(deleted, bases.len() - 1, "all but the active segment");
        let first = &bases[0];
        assert!(!path(first, "log").exists() && !path(first, "index").exists());
        assert!(
            path(first, "log.deleted").exists(),
            "the held segment waits for its reader"
        );
        for base in &bases[1..bases.len() - 1] {
            for suffix in ["log", "log.deleted", "index", "timeindex"] {
                assert!(!path(base, suffix).exists(), "{base:?}.{suffix}");
            }
        }
        let recs = decode(&iouring_log::read_slices_to_vec(&held.slices).await.unwrap());
        assert_eq!(recs.first().map(|r| r.offset), Some(0));
        recs.iter().for_each(|r| check_record(r, 1000));
        drop(held);
        let start = std::time::Instant::now();
        while path(first, "log.deleted").exists() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "not removed after its reader finished"
            );
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        }
        log.close().await.unwrap();
        // A `.deleted` file left by a crash goes at the next open.
        std::fs::write(path(&Offset(7), "log.deleted"), b"x").unwrap();
        let log = Log::open(dir.path(), LogConfig::default(), 0)
            .await
            .unwrap();
        assert!(!path(&Offset(7), "log.deleted").exists());
        log.close().await.unwrap();
    });
}

/// A deleted topic's partition: its closed log removes its own folder (segments freed on the
/// helper thread, read handles closed first); an open log refuses.
#[test]
fn a_closed_log_removes_its_folder_and_an_open_one_refuses() {
    run(|| async {
        let parent = tmpdir();
        let dir = parent.path().join("orders-0");
        let cfg = LogConfig {
            segment_bytes: 64 << 10,
            ..LogConfig::default()
        };
        let log = Log::open(&dir, cfg, 0).await.unwrap();
        append_batches_of_20(&log, 10).await;
        assert!(log.segment_base_offsets().len() > 2);
        let opts = ReadOptions {
            max_bytes: 1 << 20,
            max_offset: None,
            min_one_batch: true,
        };
        let r = log.read(Offset(0), opts).await.unwrap();
        let recs = decode(&iouring_log::read_slices_to_vec(&r.slices).await.unwrap());
        assert_eq!(recs.first().map(|r| r.offset), Some(0));
        drop(r);
        let e = log.remove_closed().await.unwrap_err().to_string();
        assert!(
            e.contains("close it first") && e.contains("orders-0"),
            "{e}"
        );
        assert!(dir.join("00000000000000000000.log").exists());
        log.close().await.unwrap();
        log.remove_closed().await.unwrap();
        assert!(!dir.exists());
    });
}

/// `segment.index.bytes`: a segment rolls before either index would hold more entries than
/// fit (8-byte offset entries, 12-byte time entries; the time index may take one more entry
/// when the segment is sealed, as Kafka's does); `preallocate`: a new segment's file is
/// allocated to `segment.bytes` by its first write.
#[test]
fn full_indexes_roll_the_segment_and_preallocate_allocates_it_whole() {
    run(|| async {
        let dir = tmpdir();
        let cfg = LogConfig {
            segment_bytes: 8 << 20,
            index_interval_bytes: 1,
            segment_index_bytes: 24,
            preallocate: true,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        for i in 0..30i64 {
            log.append_as_leader(&batch(i, 1, 100, Compression::None), LeaderEpoch(0), i)
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let segments = log.segment_base_offsets().len();
        assert!(segments >= 10, "{segments} segments for 30 batches");
        // The active segment's file: allocated whole (8 MiB), though it holds a few batches.
        let active = *log.segment_base_offsets().last().unwrap();
        let path = dir.path().join(format!("{:020}.log", active.0));
        let blocks = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&path).unwrap());
        assert!(blocks * 512 >= 8 << 20, "{} bytes allocated", blocks * 512);
        log.close().await.unwrap();
        let mut indexes = 0;
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let p = e.unwrap().path();
            let len = std::fs::metadata(&p).unwrap().len();
            match p.extension().and_then(|x| x.to_str()) {
                Some("index") => {
                    indexes += 1;
                    assert!(len <= 24, "{}: {len} bytes", p.display());
                }
                Some("timeindex") => assert!(len <= 24 + 12, "{}: {len} bytes", p.display()),
                _ => {}
            }
        }
        assert_eq!(indexes, segments);
        // Without the limit (10 MiB, Kafka's default) the same appends stay in one segment.
        let dir = tmpdir();
        let cfg = LogConfig {
            segment_bytes: 8 << 20,
            index_interval_bytes: 1,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), cfg, 0).await.unwrap();
        for i in 0..30i64 {
            log.append_as_leader(&batch(i, 1, 100, Compression::None), LeaderEpoch(0), i)
                .await
                .unwrap();
        }
        assert_eq!(log.segment_base_offsets().len(), 1);
    });
}
