//! Retention: deleting whole old segments by `retention.bytes` and `retention.ms` and below a
//! log start offset moved by DeleteRecords, and truncation of the log end for followers.

use crate::appender::{Appender, SegmentEnd};
use crate::checkpoint::sync_dir;
use crate::error::{FlushError, IoError};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log::Log;
use crate::read_cache;
use crate::reader::SegmentView;
use crate::recovery::scan_segment;
use crate::segment::{
    open_read_file, open_trimmed, read_partial_block, seal_appender, ActiveSegment, Segment,
    SegmentState,
};
use crate::types::{Offset, TimestampMs};

/// What retention may know about one segment.
#[derive(Debug, Clone, Copy)]
pub struct SegmentFacts {
    pub size: u64,
    pub next_offset: Offset,
    pub largest_timestamp: Option<TimestampMs>,
    pub active: bool,
}

/// How many of the oldest segments retention deletes (Kafka's rules): a segment goes when its
/// newest record is older than `retention.ms`, while the log stays at least `retention.bytes`
/// without it, or when all its offsets are below `log_start` (moved by DeleteRecords). Never
/// the active segment, never a segment with offsets at or above `upper_bound` (the high
/// watermark).
pub fn segments_to_delete(
    segments: &[SegmentFacts],
    (retention_ms, retention_bytes): (Option<i64>, Option<u64>),
    now_ms: i64,
    log_start: Offset,
    upper_bound: Offset,
) -> usize {
    let total: u64 = segments.iter().map(|s| s.size).sum();
    let mut excess = retention_bytes.map_or(0, |limit| total.saturating_sub(limit));
    let mut n = 0;
    for s in segments {
        if s.active || s.next_offset > upper_bound {
            break;
        }
        let expired =
            retention_ms.is_some_and(|ms| s.largest_timestamp.is_some_and(|ts| now_ms - ts.0 > ms));
        let over_size = excess >= s.size && excess > 0;
        let below_start = s.next_offset <= log_start;
        if !(expired || over_size || below_start) {
            break;
        }
        excess = excess.saturating_sub(s.size);
        n += 1;
    }
    n
}

impl Log {
    /// Applies `retention.ms` and `retention.bytes`: deletes whole old segments and moves the
    /// log start offset. Returns how many segments were deleted. If every record of the active
    /// segment has expired too, it is rolled first so it can go (as Kafka does).
    pub async fn delete_old_segments(
        &self,
        now_ms: i64,
        upper_bound: Offset,
    ) -> Result<usize, FlushError> {
        let roll_first =
            {
                let st = self.inner.state.borrow();
                let a = st.active();
                let expired =
                    self.inner.config.get().retention().0.is_some_and(|ms| {
                        a.largest_timestamp().is_some_and(|ts| now_ms - ts.0 > ms)
                    });
                expired && a.size > 0 && a.next_offset <= upper_bound
            };
        if roll_first {
            self.roll(now_ms).await?;
        }
        // Only sealed segments go; let the seals of recent rolls finish first.
        self.wait_for_seals().await?;
        // The permit covers taking the segments out of the log, not deleting their files
        // (0.4–1 s for 1 GiB under load here, see `Segment::delete_files`) or writing the
        // checkpoints: appends wait for it, and a produce waiting on one partition holds up its
        // whole request. Nothing can reuse the files' names meanwhile: new segments start at
        // the log end, truncation never goes below the log start.
        let removed = {
            let _permit = self.mutation_permit().await?;
            let mut st = self.inner.state.borrow_mut();
            let facts: Vec<SegmentFacts> = st
                .segments
                .iter()
                .map(|s| SegmentFacts {
                    size: s.size,
                    next_offset: s.next_offset,
                    largest_timestamp: s.largest_timestamp(),
                    active: !s.is_sealed(),
                })
                .collect();
            let cfg = self.inner.config.get();
            let n = segments_to_delete(
                &facts,
                cfg.retention(),
                now_ms,
                st.log_start_offset(),
                upper_bound,
            );
            let removed: Vec<_> = st.segments.drain(..n).collect();
            let start = st.log_start_offset();
            st.epochs.truncate_from_start(start);
            // Only what is gone from the disk is past recovery, not a start inside a segment.
            st.recovery_point = st.recovery_point.max(st.segments[0].base_offset);
            st.check();
            removed
        };
        let count = removed.len();
        for seg in removed {
            tracing::info!(segment = %seg.log_path.display(), "deleting segment by retention");
            seg.delete_files().await?;
        }
        if count > 0 {
            self.write_epoch_checkpoint().await?;
            self.write_recovery_point_checkpoint().await?;
        }
        Ok(count)
    }

    /// Moves the log start offset up to `offset` (DeleteRecords on a leader; a follower following
    /// its leader's): offsets below it are no longer served, and segments wholly below it are
    /// deleted. Never past `upper_bound` (the high watermark) or the log end, never backwards;
    /// persisted (`log-start-offset-checkpoint`) before it returns. Returns the log start offset.
    pub async fn advance_log_start(
        &self,
        offset: Offset,
        upper_bound: Offset,
        now_ms: i64,
    ) -> Result<Offset, FlushError> {
        let target = offset.min(upper_bound).min(self.log_end_offset());
        if target <= self.log_start_offset() {
            return Ok(self.log_start_offset());
        }
        {
            let _permit = self.mutation_permit().await?;
            let mut st = self.inner.state.borrow_mut();
            st.start_floor = st.start_floor.max(target);
            let start = st.log_start_offset();
            st.epochs.truncate_from_start(start);
            st.check();
        }
        self.write_log_start_checkpoint().await?;
        self.write_epoch_checkpoint().await?;
        self.delete_old_segments(now_ms, target).await?;
        Ok(self.log_start_offset())
    }

    /// Removes every batch from the one containing `offset` onwards (a follower truncating to
    /// its leader's epoch end offset). The log end offset becomes that batch's base offset.
    pub async fn truncate_to(&self, offset: Offset) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        self.wait_for_seals().await?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset >= end {
            return Ok(());
        }
        if offset < start {
            return Err(FlushError::TruncateBelowStart {
                offset,
                log_start_offset: start,
            });
        }
        self.seal_for_truncation().await?;
        let (view, dropped) = {
            let mut st = self.inner.state.borrow_mut();
            let keep = st
                .segments
                .partition_point(|s| s.base_offset <= offset)
                .max(1);
            let dropped: Vec<_> = st.segments.drain(keep..).collect();
            (st.active().view(), dropped)
        };
        for seg in dropped {
            seg.delete_files().await?;
        }
        let cut = self.cut_position(&view, offset).await?;
        self.reactivate_truncated(cut).await?;
        let end = self.log_end_offset();
        self.truncate_aborted_txns(end).await?;
        // The cut may fall inside the batch holding a moved log start: bring it down with it.
        let lowered = {
            let mut st = self.inner.state.borrow_mut();
            let end = st.log_end_offset();
            let lowered = st.start_floor > end;
            st.start_floor = st.start_floor.min(end);
            lowered
        };
        if lowered {
            self.write_log_start_checkpoint().await?;
        }
        Ok(())
    }

    /// Empties the log and starts it again at `offset` (Kafka's `truncateFullyAndStartAt`): a
    /// follower whose leader's log start passed its log end (nothing it holds is still on the
    /// leader), or an empty log taking a first batch that starts below its end (the leader's
    /// log start falls inside that batch, after DeleteRecords). `offset` is above the log end,
    /// or the log is empty; an empty log already at `offset` is left as it is. The leader
    /// epochs go with the records; the log start and recovery point become `offset`. A new
    /// empty segment at `offset` is created and the checkpoints written before the old
    /// segments are deleted, the newest first: a crash in between leaves the old log, or a
    /// prefix of it, with the empty segment after a gap — either way a log its follower
    /// fetches on from.
    pub async fn truncate_fully_and_start_at(
        &self,
        offset: Offset,
        now_ms: i64,
    ) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        self.wait_for_seals().await?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if start == end && end == offset {
            return Ok(());
        }
        // An empty log's segments hold nothing at or above `offset` (their batches end at or
        // below its end); a segment of that base offset would be a diverged log's.
        let taken = self
            .inner
            .state
            .borrow()
            .segments
            .iter()
            .any(|s| s.base_offset == offset);
        if (offset <= end && start != end) || taken {
            return Err(FlushError::RestartInsideLog {
                offset,
                log_end_offset: end,
            });
        }
        self.seal_for_truncation().await?;
        let created = Segment::create(
            self.inner.io.as_ref(),
            &self.inner.dir,
            offset,
            now_ms,
            self.inner.progress.clone(),
        )
        .await;
        let segment = self.poison_on_error(created)?;
        let dropped = {
            let mut st = self.inner.state.borrow_mut();
            let dropped = std::mem::replace(&mut st.segments, vec![segment]);
            st.epochs = LeaderEpochCache::default();
            st.start_floor = offset;
            st.recovery_point = offset;
            st.unflushed_records = 0;
            st.first_unflushed_ms = None;
            st.check();
            dropped
        };
        self.inner.progress.notify_all();
        sync_dir(&self.inner.dir).await?;
        self.write_log_start_checkpoint().await?;
        self.write_epoch_checkpoint().await?;
        self.write_recovery_point_checkpoint().await?;
        for seg in dropped.into_iter().rev() {
            seg.delete_files().await?;
        }
        Ok(())
    }

    /// Seals the active segment so truncation can work on files only (writes drained).
    async fn seal_for_truncation(&self) -> Result<(), FlushError> {
        let active_appender = {
            let st = self.inner.state.borrow();
            st.active().appender().cloned()
        };
        if let Some(appender) = active_appender {
            let size = self.inner.state.borrow().active().size;
            if let Err(e) = seal_appender(&appender, size).await {
                self.poison(&e);
                return Err(e.into());
            }
            self.inner.state.borrow_mut().active_mut().state = SegmentState::Sealed;
        }
        Ok(())
    }

    /// `(position, new next offset)` where the kept part of the last segment ends.
    async fn cut_position(
        &self,
        view: &SegmentView,
        offset: Offset,
    ) -> Result<(u64, Offset), FlushError> {
        let (hint, next) = {
            let st = self.inner.state.borrow();
            let seg = st.active();
            let hint = offset
                .relative_to(seg.base_offset)
                .and_then(|rel| seg.indexes.offset_index.lookup(rel))
                .map_or(0, |e| e.position.get());
            (hint, seg.next_offset)
        };
        let found = view.find_batch(hint, offset).await.map_err(|e| {
            IoError::new(
                "scanning for truncation",
                view.path.as_path(),
                std::io::Error::other(e.to_string()),
            )
        })?;
        Ok(found.map_or((view.size, next), |b| (b.position, b.base_offset)))
    }

    /// Trims the last segment's file to `position`, rebuilds its indexes from what is left and
    /// opens it for appends again.
    async fn reactivate_truncated(
        &self,
        (position, next_offset): (u64, Offset),
    ) -> Result<(), FlushError> {
        let (path, base, cached) = {
            let st = self.inner.state.borrow();
            let a = st.active();
            (a.log_path.clone(), a.base_offset, a.cached.clone())
        };
        // Bytes from the cut on will be written anew: cached chunks of them are stale.
        read_cache::invalidate_from(&cached, position);
        let p = path.as_path();
        let file = open_trimmed(self.inner.io.as_ref(), p, position).await?;
        let read_file = open_read_file(p).await?;
        let interval = self.inner.config.get().index_interval_bytes;
        let mut scratch_epochs = LeaderEpochCache::default();
        let gaps = self.gaps_in(base);
        let scan = scan_segment(
            &read_file,
            p,
            (base, position),
            interval,
            gaps,
            &mut scratch_epochs,
        )
        .await?;
        if scan.stopped.is_some() || scan.next_offset != next_offset {
            let e = IoError::new(
                "re-reading after truncation",
                p,
                std::io::Error::other("segment changed under truncation"),
            );
            self.poison(&e);
            return Err(e.into());
        }
        let partial = read_partial_block(&read_file, p, position).await?;
        let end = SegmentEnd {
            size: position,
            next_offset,
            partial_block: &partial,
        };
        let appender = Appender::new(file, end, self.inner.progress.clone(), cached);
        {
            let mut st = self.inner.state.borrow_mut();
            let seg = st.active_mut();
            seg.indexes = scan.indexes;
            seg.size = position;
            seg.next_offset = next_offset;
            seg.state = SegmentState::Active(ActiveSegment::start(appender));
            st.epochs.truncate_from_end(next_offset);
            st.recovery_point = st.recovery_point.min(next_offset);
            st.check();
        }
        self.inner.progress.notify_all();
        self.write_epoch_checkpoint().await?;
        self.write_recovery_point_checkpoint().await?;
        Ok(())
    }
}
