//! [`Log`]: one partition's log — its segments, leader epoch cache and recovery point — and
//! the appends, flushes, rolls and truncations that change it. Reads live in `log_read.rs`,
//! opening and recovery in `log_open.rs`, retention in `retention.rs`.
//!
//! Contract:
//! - One `Log` belongs to one shard (thread). Its handle is cheap to clone; clones share state.
//! - Mutations (append, roll, truncate, retention, close) are serialised by one async permit;
//!   reads take none and may run concurrently with them. No `RefCell` borrow is held across an
//!   `.await`.
//! - `log_start_offset <= recovery_point <= log_end_offset`, asserted on every change.
//! - Any failed write or fsync latches the log as failed; every later call returns an error
//!   until the log is reopened (which re-validates the tail). An fsync is never retried.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::{Permit, Semaphore};

use crate::appender::Appender;
use crate::batch::{patch_offset_and_epoch, BatchHeader};
use crate::checkpoint::{sync_dir, write_checkpoint, LEADER_EPOCH_FILE, RECOVERY_POINT_FILE};
use crate::config::LogConfig;
use crate::error::{AppendError, FlushError, IoError};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::limits::{RECOVERY_POINT_CHECKPOINT_INTERVAL_MS, UNWRITTEN_BYTES_MAX};
use crate::segment::{seal_appender, write_index_files, Segment};
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp: TimestampMs,
    pub batches: usize,
    pub bytes: usize,
}

pub(crate) struct LogState {
    /// Sorted by base offset; the last one is the active segment.
    pub segments: Vec<Segment>,
    pub epochs: LeaderEpochCache,
    pub recovery_point: Offset,
    pub unflushed_records: u64,
    pub first_unflushed_ms: Option<i64>,
    /// The recovery point last written to the checkpoint file, and when (for `maybe_flush`).
    pub checkpointed_recovery_point: Option<Offset>,
    pub checkpointed_at_ms: i64,
    pub closed: bool,
}

pub(crate) struct LogInner {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub state: RefCell<LogState>,
    pub mutation: Semaphore,
    pub sync: Semaphore,
    pub failed: RefCell<Option<String>>,
}

impl Drop for LogInner {
    /// A log dropped without `close` stops its writer task once the appended bytes are written
    /// (nothing is fsynced: that is what `close` is for).
    fn drop(&mut self) {
        if let Ok(st) = self.state.try_borrow() {
            if let Some(a) = st.segments.last().and_then(|s| s.appender()) {
                a.io.borrow_mut().closing = true;
                a.events.notify_all();
            }
        }
    }
}

/// One partition's log. See the module doc for the contract.
#[derive(Clone)]
pub struct Log {
    pub(crate) inner: Rc<LogInner>,
}

impl LogState {
    pub fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    pub fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    pub fn log_start_offset(&self) -> Offset {
        self.segments[0].base_offset
    }

    pub fn log_end_offset(&self) -> Offset {
        self.active().next_offset
    }

    pub fn check(&self) {
        let (start, rp, end) = (
            self.log_start_offset(),
            self.recovery_point,
            self.log_end_offset(),
        );
        assert!(
            start <= end && rp <= end,
            "log invariant broken: log_start_offset {start} / recovery_point {rp} / log_end_offset {end}"
        );
    }
}

/// Walks the batches of an append request, validating each: returns `(position, header)`.
fn validate_batches(
    bytes: &[u8],
    segment_bytes: u64,
) -> Result<Vec<(usize, BatchHeader)>, AppendError> {
    let mut out = Vec::new();
    let mut at = 0;
    if bytes.is_empty() {
        return Err(AppendError::CorruptBatch {
            position: 0,
            source: crate::batch::BatchError::TooShort { available: 0 },
        });
    }
    while at < bytes.len() {
        let header = BatchHeader::parse_validated(&bytes[at..]).map_err(|source| {
            AppendError::CorruptBatch {
                position: at,
                source,
            }
        })?;
        if u64::from(header.size_bytes) > segment_bytes {
            return Err(AppendError::BatchTooLarge {
                size: header.size_bytes as usize,
                segment_bytes,
            });
        }
        out.push((at, header));
        at += header.size_bytes as usize;
    }
    Ok(out)
}

impl Log {
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.inner.config
    }

    pub fn log_start_offset(&self) -> Offset {
        self.inner.state.borrow().log_start_offset()
    }

    pub fn log_end_offset(&self) -> Offset {
        self.inner.state.borrow().log_end_offset()
    }

    pub fn recovery_point(&self) -> Offset {
        self.inner.state.borrow().recovery_point
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.inner.state.borrow().epochs.latest_epoch()
    }

    /// Kafka's `endOffsetForEpoch` (for `OffsetForLeaderEpoch`).
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        let st = self.inner.state.borrow();
        st.epochs.end_offset_for(epoch, st.log_end_offset())
    }

    pub fn leader_epochs(&self) -> Vec<(LeaderEpoch, Offset)> {
        self.inner.state.borrow().epochs.entries().to_vec()
    }

    /// Base offsets of all segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.inner
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.base_offset)
            .collect()
    }

    /// Total logical bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.inner
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.size)
            .sum()
    }

    /// `(appended, written, durable)` byte ends of the active segment.
    pub fn active_segment_progress(&self) -> (u64, u64, u64) {
        let st = self.inner.state.borrow();
        let a = st
            .active()
            .appender()
            .expect("active segment has an appender");
        let io = a.io.borrow();
        (
            io.planner.appended(),
            io.planner.written(),
            io.planner.durable(),
        )
    }

    pub fn failure(&self) -> Option<String> {
        if let Some(f) = self.inner.failed.borrow().clone() {
            return Some(f);
        }
        let st = self.inner.state.borrow();
        if st.closed {
            return Some(format!("{} is closed", self.inner.dir.display()));
        }
        let a = st.active().appender()?;
        let failed = a.io.borrow().failed.clone();
        failed
    }

    pub(crate) fn poison(&self, what: &str) {
        tracing::error!(log = %self.inner.dir.display(), error = what, "log failed; it must be reopened");
        self.inner
            .failed
            .borrow_mut()
            .get_or_insert_with(|| what.to_owned());
    }

    /// Appends batches as the leader: assigns offsets from the log end offset and stamps
    /// `leader_epoch`, patching the headers outside the CRC. All batches are validated first;
    /// if any is bad nothing is appended.
    pub async fn append_as_leader(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let headers = validate_batches(batches, self.inner.config.segment_bytes)?;
        self.append_validated(batches, headers, Some(leader_epoch), now_ms)
            .await
    }

    /// Appends batches as a follower: offsets and epochs are kept as the leader assigned them;
    /// the first batch must start at the log end offset.
    pub async fn append_as_follower(
        &self,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let headers = validate_batches(batches, self.inner.config.segment_bytes)?;
        self.append_validated(batches, headers, None, now_ms).await
    }

    async fn append_validated(
        &self,
        bytes: &[u8],
        headers: Vec<(usize, BatchHeader)>,
        leader_epoch: Option<LeaderEpoch>,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let permit = self.mutation_permit().await?;
        self.check_append_start(&headers, leader_epoch)?;
        let mut info = AppendInfo {
            first_offset: self.log_end_offset(),
            last_offset: self.log_end_offset(),
            max_timestamp: TimestampMs(-1),
            batches: headers.len(),
            bytes: bytes.len(),
        };
        let mut epoch_changed = false;
        for (at, header) in headers {
            self.maybe_roll(
                u64::from(header.size_bytes),
                header.last_offset_delta,
                now_ms,
            )
            .await?;
            self.wait_for_write_room().await?;
            let mut st = self.inner.state.borrow_mut();
            let base = st.log_end_offset();
            let mut header = header;
            let mut prefix = [0u8; 16];
            prefix.copy_from_slice(&bytes[at..at + 16]);
            if let Some(epoch) = leader_epoch {
                patch_offset_and_epoch(&mut prefix, base, epoch);
                header.base_offset = base;
                header.partition_leader_epoch = epoch;
            }
            epoch_changed |= st
                .epochs
                .assign(header.partition_leader_epoch, header.base_offset);
            let interval = self.inner.config.index_interval_bytes;
            let end = at + header.size_bytes as usize;
            st.active_mut()
                .append_batch(&header, &prefix, &bytes[at + 16..end], interval);
            info.last_offset = header.last_offset();
            info.max_timestamp = info.max_timestamp.max(header.max_timestamp);
            st.unflushed_records += header.records_count.max(1) as u64;
            st.first_unflushed_ms.get_or_insert(now_ms);
            st.check();
        }
        if epoch_changed {
            self.write_epoch_checkpoint().await?;
        }
        drop(permit);
        let flush_due = {
            let st = self.inner.state.borrow();
            self.inner
                .config
                .flush_messages
                .is_some_and(|n| st.unflushed_records >= n)
        };
        if flush_due {
            self.flush_through(info.last_offset.next()).await?;
        }
        Ok(info)
    }

    /// Backpressure: waits while more than `UNWRITTEN_BYTES_MAX` appended bytes are unwritten.
    async fn wait_for_write_room(&self) -> Result<(), AppendError> {
        let appender = {
            let st = self.inner.state.borrow();
            st.active()
                .appender()
                .expect("active segment has an appender")
                .clone()
        };
        appender
            .wait_until(|p| p.appended() - p.written() <= UNWRITTEN_BYTES_MAX)
            .await
            .map_err(AppendError::Failed)
    }

    fn check_append_start(
        &self,
        headers: &[(usize, BatchHeader)],
        leader_epoch: Option<LeaderEpoch>,
    ) -> Result<(), AppendError> {
        let st = self.inner.state.borrow();
        match leader_epoch {
            Some(epoch) => match st.epochs.latest_epoch() {
                Some(latest) if epoch < latest => Err(AppendError::StaleEpoch { epoch, latest }),
                _ => Ok(()),
            },
            None => {
                let mut expected = st.log_end_offset();
                for (_, h) in headers {
                    if h.base_offset != expected {
                        return Err(AppendError::OffsetMismatch {
                            expected,
                            got: h.base_offset,
                        });
                    }
                    expected = h.next_offset();
                }
                Ok(())
            }
        }
    }

    /// Rolls the active segment if the next batch would overflow it, it is older than
    /// `segment.ms`, or its offsets would overflow the index's `u32`.
    async fn maybe_roll(
        &self,
        batch_bytes: u64,
        last_offset_delta: i32,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let due = {
            let st = self.inner.state.borrow();
            let a = st.active();
            let cfg = &self.inner.config;
            let full = a.size + batch_bytes > cfg.segment_bytes;
            let old = now_ms - a.rolling_timestamp_ms > cfg.segment_ms;
            let last = Offset(a.next_offset.0 + i64::from(last_offset_delta));
            let overflow = last.relative_to(a.base_offset).is_none();
            a.size > 0 && (full || old || overflow)
        };
        if due {
            self.roll_locked(now_ms).await?;
        }
        Ok(())
    }

    /// Takes the mutation permit, refusing if the log is failed or closed.
    pub(crate) async fn mutation_permit(&self) -> Result<Permit<'_>, FlushError> {
        let permit = self
            .inner
            .mutation
            .acquire_permit(1)
            .await
            .expect("log semaphore never closes");
        match self.failure() {
            Some(f) => Err(FlushError::Failed(f)),
            None => Ok(permit),
        }
    }

    /// Rolls now: seals the active segment and starts a new one at the log end offset.
    pub async fn roll(&self, now_ms: i64) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        if self.inner.state.borrow().active().size == 0 {
            return Ok(());
        }
        self.roll_locked(now_ms).await
    }

    /// Roll with the mutation permit held.
    async fn roll_locked(&self, now_ms: i64) -> Result<(), FlushError> {
        self.seal_active().await?;
        let base = self.log_end_offset();
        let segment = Segment::create(&self.inner.dir, base, now_ms).await?;
        sync_dir(&self.inner.dir).await?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.segments.push(segment);
            st.recovery_point = st.recovery_point.max(base);
            st.check();
        }
        tracing::debug!(log = %self.inner.dir.display(), base_offset = base.0, "rolled segment");
        self.write_recovery_point_checkpoint().await?;
        Ok(())
    }

    /// Seals the active segment in place (the caller holds the mutation permit). Readers keep
    /// seeing it through its tail until its bytes are all on disk.
    async fn seal_active(&self) -> Result<(), FlushError> {
        let (appender, size, path, base) = {
            let st = self.inner.state.borrow();
            let a = st.active();
            let appender = a
                .appender()
                .expect("active segment has an appender")
                .clone();
            (appender, a.size, a.log_path.clone(), a.base_offset)
        };
        if let Err(e) = seal_appender(&appender, size).await {
            self.poison(&e.to_string());
            return Err(e.into());
        }
        let (index, time_index) = self.inner.state.borrow_mut().active_mut().mark_sealed();
        if let Err(e) = write_index_files(&path, base, index, time_index).await {
            self.poison(&e.to_string());
            return Err(e.into());
        }
        if let Err(e) = appender.file.clone().close_rc().await {
            tracing::warn!(path = %path.display(), error = %e, "closing sealed segment's O_DIRECT file");
        }
        Ok(())
    }

    /// Makes everything appended so far durable (group commit: concurrent callers share one
    /// fdatasync) and moves the recovery point.
    pub async fn flush(&self) -> Result<(), FlushError> {
        let end = self.log_end_offset();
        self.flush_through(end).await
    }

    /// Waits until everything appended so far is written to the segment file (not fsynced): it
    /// then survives the process being killed, though not a machine crash — what Kafka's
    /// acknowledgement without a flush gives, its writes sitting in the page cache.
    pub async fn wait_written(&self) -> Result<(), FlushError> {
        let (appender, target_bytes) = self.active_appender_and_end();
        self.wait_appender_written(&appender, target_bytes).await
    }

    /// The active segment's appender and the file position after its last appended byte.
    fn active_appender_and_end(&self) -> (Appender, u64) {
        let st = self.inner.state.borrow();
        let a = st
            .active()
            .appender()
            .expect("active segment has an appender")
            .clone();
        let end = a.io.borrow().planner.appended();
        (a, end)
    }

    async fn flush_through(&self, target: Offset) -> Result<(), FlushError> {
        let (appender, target_bytes) = self.active_appender_and_end();
        self.wait_appender_written(&appender, target_bytes).await?;
        let _sync = self
            .inner
            .sync
            .acquire_permit(1)
            .await
            .expect("sync semaphore never closes");
        let synced = {
            let io = appender.io.borrow();
            if io.planner.durable() >= target_bytes {
                None
            } else {
                Some(io.planner.written())
            }
        };
        if let Some(synced) = synced {
            if let Err(e) = appender.file.fdatasync().await {
                let e = IoError::new("syncing", appender.path.as_path(), e);
                self.poison(&e.to_string());
                return Err(e.into());
            }
            let mut io = appender.io.borrow_mut();
            if !io.closing {
                let written = io.planner.written();
                io.planner.on_durable(synced.min(written));
            }
        }
        let mut st = self.inner.state.borrow_mut();
        st.recovery_point = st.recovery_point.max(target.min(st.log_end_offset()));
        if st.log_end_offset() <= target {
            st.unflushed_records = 0;
            st.first_unflushed_ms = None;
        }
        st.check();
        Ok(())
    }

    async fn wait_appender_written(
        &self,
        appender: &Appender,
        target_bytes: u64,
    ) -> Result<(), FlushError> {
        {
            let mut io = appender.io.borrow_mut();
            io.flush_wanted_through = io.flush_wanted_through.max(target_bytes);
        }
        appender.events.notify_all();
        appender
            .wait_until(|p| p.written() >= target_bytes)
            .await
            .map_err(FlushError::Failed)
    }

    /// The `flush.ms` policy and the periodic recovery-point checkpoint (written when it moved,
    /// at most every `RECOVERY_POINT_CHECKPOINT_INTERVAL_MS`, like Kafka's
    /// `log.flush.offset.checkpoint.interval.ms`): call from a timer.
    pub async fn maybe_flush(&self, now_ms: i64) -> Result<(), FlushError> {
        let due = {
            let st = self.inner.state.borrow();
            match (self.inner.config.flush_ms, st.first_unflushed_ms) {
                (Some(ms), Some(first)) => now_ms - first >= ms,
                _ => false,
            }
        };
        if due {
            self.flush().await?;
        }
        let checkpoint_due = {
            let st = self.inner.state.borrow();
            st.checkpointed_recovery_point != Some(st.recovery_point)
                && now_ms - st.checkpointed_at_ms >= RECOVERY_POINT_CHECKPOINT_INTERVAL_MS
        };
        if checkpoint_due {
            self.write_recovery_point_checkpoint().await?;
            self.inner.state.borrow_mut().checkpointed_at_ms = now_ms;
        }
        Ok(())
    }

    pub(crate) async fn write_recovery_point_checkpoint(&self) -> Result<(), IoError> {
        let rp = self.recovery_point();
        let written =
            write_checkpoint(&self.inner.dir, RECOVERY_POINT_FILE, &[rp.0.to_string()]).await;
        if written.is_ok() {
            self.inner.state.borrow_mut().checkpointed_recovery_point = Some(rp);
        }
        self.poison_on_error(written)
    }

    pub(crate) async fn write_epoch_checkpoint(&self) -> Result<(), IoError> {
        let lines = self.inner.state.borrow().epochs.to_lines();
        let written = write_checkpoint(&self.inner.dir, LEADER_EPOCH_FILE, &lines).await;
        self.poison_on_error(written)
    }

    /// A failed write of any file of the log poisons it (the file may be half-written).
    pub(crate) fn poison_on_error<T>(&self, result: Result<T, IoError>) -> Result<T, IoError> {
        if let Err(e) = &result {
            self.poison(&e.to_string());
        }
        result
    }

    /// Clean shutdown: drains and fsyncs the active segment, trims it, writes its indexes and
    /// both checkpoints. The log refuses every call afterwards.
    pub async fn close(&self) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        self.seal_active().await?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.recovery_point = st.log_end_offset();
        }
        self.write_recovery_point_checkpoint().await?;
        self.write_epoch_checkpoint().await?;
        self.inner.state.borrow_mut().closed = true;
        Ok(())
    }
}
