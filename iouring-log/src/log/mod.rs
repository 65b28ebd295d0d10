//! [`Log`]: one partition's log — its segments, leader epoch cache and recovery point — and
//! the ordered appends that change it. The rest of `Log`'s methods live beside it in this
//! folder: waiting for appended offsets to be written or flushed in `durability.rs`, rolls and
//! background sealing in `roll.rs`, reads in `read.rs`, opening and recovery in `open.rs`,
//! retention and truncation in `retention.rs`, compaction (the log cleaner) in `cleaner.rs`.
//!
//! Contract:
//! - One `Log` belongs to one shard (thread). Its handle is cheap to clone; clones share state.
//! - An append is an **ordered append**: offsets are assigned and the bytes copied into the
//!   active segment's in-memory tail; it returns without waiting for the disk (only for
//!   backpressure and rolls). Whoever acknowledges it then waits, separately, until its offsets
//!   are written or flushed ([`Log::wait_for`]): one O_DIRECT write and one `fdatasync` cover
//!   every append that came before them (group commit).
//! - Mutations (append, roll, truncate, retention, close) are serialised by one async permit;
//!   reads take none and may run concurrently with them. No `RefCell` borrow is held across an
//!   `.await`.
//! - `log_start_offset <= recovery_point <= flushed <= written <= log_end_offset`, where
//!   flushed and written are the contiguous watermarks over the segments still being written
//!   (asserted on every change of the log state; per segment in [`SegmentWatermarks`]).
//! - Any failed write or fsync latches the log as failed; every later call returns an error
//!   until the log is reopened (which re-validates the tail). An fsync is never retried.
//!
//! [`SegmentWatermarks`]: crate::watermarks::SegmentWatermarks

mod aborted;
pub(crate) mod cleaner;
pub(crate) mod durability;
pub(crate) mod open;
pub(crate) mod read;
mod retention;
mod roll;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::{Permit, Semaphore};

use crate::batch::{patch_offset_and_epoch, BatchHeader};
use crate::checkpoint::{
    write_checkpoint, LEADER_EPOCH_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE,
};
use crate::config::LogConfig;
use crate::error::{AppendError, FlushError, IoError, LogFailure};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::limits::UNWRITTEN_BYTES_MAX;
use crate::notify::Progress;
use crate::segment::Segment;
use crate::segment_io::SegmentIo;
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp: TimestampMs,
    pub batches: usize,
    pub bytes: usize,
    /// `flush.messages` was reached by this append: it must be flushed, not only written,
    /// before it is acknowledged (Kafka flushes inline before answering such a produce).
    pub flush_due: bool,
}

pub(crate) struct LogState {
    /// Sorted by base offset; the last one is the active segment. Segments before it are
    /// sealed, or sealing (in roll order, the oldest first).
    pub segments: Vec<Segment>,
    pub epochs: LeaderEpochCache,
    /// The log start offset as DeleteRecords (or, on a follower, the leader's) moved it; the
    /// first segment's base offset when that is higher.
    pub start_floor: Offset,
    /// The cleaner checkpoint: every segment below it was cleaned (its offsets may have gaps).
    pub cleaned_below: Offset,
    pub recovery_point: Offset,
    pub unflushed_records: u64,
    pub first_unflushed_ms: Option<i64>,
    /// The recovery point the checkpoint file holds (last written, or read at open), and when
    /// it was written (for `maybe_flush`). A write of the same value is skipped.
    pub checkpointed_recovery_point: Option<Offset>,
    pub checkpointed_at_ms: i64,
    /// The entries the leader-epoch checkpoint file holds (last written, or read at open);
    /// a write of the same entries is skipped. Closing and reopening 10 000 logs otherwise
    /// rewrote every unchanged file: create, fdatasync, rename, directory fsync each.
    pub checkpointed_epochs: Option<Vec<String>>,
    /// Segments whose `.txnindex` changed since [`Log::sync_aborted_txns`] last synced it.
    pub aborted_unsynced: std::collections::BTreeSet<Offset>,
    pub closed: bool,
}

pub(crate) struct LogInner {
    pub dir: PathBuf,
    /// Changed at run time by `set_config` (a topic's configs altered).
    pub config: Cell<LogConfig>,
    pub io: Rc<dyn SegmentIo>,
    pub state: RefCell<LogState>,
    pub mutation: Semaphore,
    /// One `fdatasync` of the active segment at a time; callers that find their offsets
    /// flushed by the one before them skip theirs (group commit).
    pub sync: Semaphore,
    /// One checkpoint file write at a time (they share temporary file names).
    pub checkpoint: Semaphore,
    /// Watermarks moved, a segment finished sealing, or the log failed.
    pub progress: Rc<Progress>,
    /// Done flag of the newest background seal: each seal waits for the one before it, so
    /// segments become sealed in roll order.
    pub last_seal: RefCell<Option<Rc<Cell<bool>>>>,
    pub failed: RefCell<Option<LogFailure>>,
}

impl Drop for LogInner {
    /// A log dropped without `close` stops its writer task once the appended bytes are written
    /// (nothing is fsynced: that is what `close` is for).
    fn drop(&mut self) {
        if let Ok(st) = self.state.try_borrow() {
            if let Some(a) = st.segments.last().and_then(|s| s.appender()) {
                a.io.borrow_mut().close();
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

/// Which of a segment's watermarks to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watermark {
    Written,
    Flushed,
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

    pub fn segment_mut(&mut self, base_offset: Offset) -> Option<&mut Segment> {
        self.segments
            .iter_mut()
            .find(|s| s.base_offset == base_offset)
    }

    /// The first offset served: the first segment's base, or where DeleteRecords moved it
    /// (never past the log end: a truncation below it brings it down).
    pub fn log_start_offset(&self) -> Offset {
        self.start_floor
            .max(self.segments[0].base_offset)
            .min(self.log_end_offset())
    }

    pub fn log_end_offset(&self) -> Offset {
        self.active().next_offset
    }

    /// The offset after the last batch such that it and every batch before it are written
    /// (or flushed): the first segment still being written decides, sealed ones are whole.
    pub fn watermark(&self, which: Watermark) -> Offset {
        let unsealed = self
            .segments
            .iter()
            .rev()
            .take_while(|s| !s.is_sealed())
            .count();
        for seg in &self.segments[self.segments.len() - unsealed..] {
            let appender = seg.appender().expect("an unsealed segment has an appender");
            let io = appender.io.borrow();
            let mark = match which {
                Watermark::Written => io.watermarks.written_offset(),
                Watermark::Flushed => io.watermarks.durable_offset(),
            };
            if mark < seg.next_offset {
                return mark;
            }
        }
        self.log_end_offset()
    }

    /// Moves the recovery point up to the flushed watermark.
    pub fn advance_recovery_point(&mut self) {
        let flushed = self.watermark(Watermark::Flushed);
        self.recovery_point = self.recovery_point.max(flushed);
        self.check();
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

    pub fn config(&self) -> LogConfig {
        self.inner.config.get()
    }

    /// Applies new settings at run time (a topic's configs altered): the next append, roll,
    /// flush and retention pass follow them. Segments already written keep their size.
    pub fn set_config(&self, config: LogConfig) -> Result<(), crate::config::ConfigError> {
        config.validate()?;
        self.inner.config.set(config);
        Ok(())
    }

    pub fn log_start_offset(&self) -> Offset {
        self.inner.state.borrow().log_start_offset()
    }

    /// The offset after the last appended batch (appended: in memory, maybe not yet written).
    pub fn log_end_offset(&self) -> Offset {
        self.inner.state.borrow().log_end_offset()
    }

    /// The offset after the last batch that is, with every batch before it, written to its
    /// segment file: what survives the process being killed.
    pub fn written_end_offset(&self) -> Offset {
        self.inner.state.borrow().watermark(Watermark::Written)
    }

    /// The offset after the last batch that is, with every batch before it, flushed (covered by
    /// a completed `fdatasync`): what survives the machine losing power.
    pub fn flushed_end_offset(&self) -> Offset {
        self.inner.state.borrow().watermark(Watermark::Flushed)
    }

    /// Kafka's recovery point: below it the log is flushed and need not be re-validated on
    /// open. It trails [`Log::flushed_end_offset`] by at most a roll's background seal.
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

    /// Kafka's divergence check for a fetch (see [`LeaderEpochCache::divergence`]).
    pub fn divergence(
        &self,
        last_fetched_epoch: LeaderEpoch,
        fetch_offset: Offset,
    ) -> Option<Option<(LeaderEpoch, Offset)>> {
        let st = self.inner.state.borrow();
        st.epochs
            .divergence(last_fetched_epoch, fetch_offset, st.log_end_offset())
    }

    /// Runs `f` on the leader epoch cache (a leader answering a follower's fetch).
    pub fn with_leader_epochs<R>(&self, f: impl FnOnce(&LeaderEpochCache) -> R) -> R {
        f(&self.inner.state.borrow().epochs)
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

    /// The log's latched I/O failure, if it failed: it then serves what it wrote and takes
    /// nothing more until retired and reopened.
    pub fn failure(&self) -> Option<LogFailure> {
        if let Some(f) = self.inner.failed.borrow().clone() {
            return Some(f);
        }
        let st = self.inner.state.borrow();
        st.segments
            .iter()
            .rev()
            .take_while(|s| !s.is_sealed())
            .find_map(|s| s.appender().and_then(|a| a.io.borrow().failed.clone()))
    }

    /// Why the log takes no more changes: failed, or closed.
    pub(crate) fn refusal(&self) -> Option<FlushError> {
        if let Some(f) = self.failure() {
            return Some(FlushError::Failed(f));
        }
        self.inner
            .state
            .borrow()
            .closed
            .then(|| FlushError::Closed(self.inner.dir.clone()))
    }

    /// Gives back the active segment's tail memory if the log took no append for
    /// `limits::TAIL_PARK_IDLE` and everything appended is written (see `tail.rs`); returns
    /// whether it did. Call from a timer.
    pub fn park_idle_tail(&self, now: std::time::Instant) -> bool {
        let st = self.inner.state.borrow();
        st.segments
            .last()
            .and_then(|s| s.appender())
            .is_some_and(|a| a.io.borrow_mut().park_idle_tail(now))
    }

    /// Bytes of memory the tails of the log's unsealed segments hold.
    pub fn tail_bytes_held(&self) -> usize {
        let st = self.inner.state.borrow();
        st.segments
            .iter()
            .filter_map(|s| s.appender())
            .map(|a| a.io.borrow().tail.held_bytes())
            .sum()
    }

    pub(crate) fn poison(&self, e: &IoError) {
        tracing::error!(log = %self.inner.dir.display(), error = %e, "log failed; it must be reopened");
        self.inner
            .failed
            .borrow_mut()
            .get_or_insert_with(|| LogFailure::from(e));
        self.inner.progress.notify_all();
    }

    /// Appends batches as the leader: assigns offsets from the log end offset and stamps
    /// `leader_epoch`, patching the headers outside the CRC. All batches are validated first;
    /// if any is bad nothing is appended. Returns once the bytes are in the log's memory; wait
    /// with [`Log::wait_for`] before acknowledging them.
    pub async fn append_as_leader(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let headers = validate_batches(batches, self.inner.config.get().segment_bytes)?;
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
        let headers = validate_batches(batches, self.inner.config.get().segment_bytes)?;
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
            flush_due: false,
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
            let interval = self.inner.config.get().index_interval_bytes;
            let end = at + header.size_bytes as usize;
            st.active_mut()
                .append_batch(&header, &prefix, &bytes[at + 16..end], interval);
            info.last_offset = header.last_offset();
            info.max_timestamp = info.max_timestamp.max(header.max_timestamp);
            st.unflushed_records += header.records_count.max(1) as u64;
            st.first_unflushed_ms.get_or_insert(now_ms);
            st.check();
        }
        info.flush_due = self.take_flush_due();
        if epoch_changed {
            self.write_epoch_checkpoint().await?;
        }
        drop(permit);
        Ok(info)
    }

    /// Whether `flush.messages` is reached; if so the count starts again (the flush the caller
    /// waits for covers every record counted).
    fn take_flush_due(&self) -> bool {
        let mut st = self.inner.state.borrow_mut();
        let due = self
            .inner
            .config
            .get()
            .flush_messages
            .is_some_and(|n| st.unflushed_records >= n);
        if due {
            st.unflushed_records = 0;
            st.first_unflushed_ms = None;
        }
        due
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
                // A follower's batches follow the leader's offsets: they run on from its log
                // end, or, in a compacted log, only increase (a cleaned segment of the
                // leader's skips the offsets of removed records). A gap anywhere else is
                // refused: it would leave offsets this replica never had.
                let gaps = self.inner.config.get().compaction.compact;
                let mut expected = st.log_end_offset();
                for (_, h) in headers {
                    if h.base_offset < expected || (h.base_offset > expected && !gaps) {
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

    /// Takes the mutation permit, refusing if the log is failed or closed.
    pub(crate) async fn mutation_permit(&self) -> Result<Permit<'_>, FlushError> {
        let permit = self
            .inner
            .mutation
            .acquire_permit(1)
            .await
            .expect("log semaphore never closes");
        match self.refusal() {
            Some(refused) => Err(refused),
            None => Ok(permit),
        }
    }

    /// One checkpoint file write at a time.
    async fn checkpoint_permit(&self) -> Permit<'_> {
        self.inner
            .checkpoint
            .acquire_permit(1)
            .await
            .expect("checkpoint semaphore never closes")
    }

    pub(crate) async fn write_recovery_point_checkpoint(&self) -> Result<(), IoError> {
        let written = self.store_recovery_point_checkpoint().await;
        self.poison_on_error(written)
    }

    /// Writes the recovery point unless the checkpoint file holds it already. A failure does
    /// not poison the log ([`Log::write_recovery_point_checkpoint`] does).
    pub(crate) async fn store_recovery_point_checkpoint(&self) -> Result<(), IoError> {
        let _one = self.checkpoint_permit().await;
        let rp = self.recovery_point();
        if self.inner.state.borrow().checkpointed_recovery_point == Some(rp) {
            return Ok(());
        }
        write_checkpoint(&self.inner.dir, RECOVERY_POINT_FILE, &[rp.0.to_string()]).await?;
        self.inner.state.borrow_mut().checkpointed_recovery_point = Some(rp);
        Ok(())
    }

    pub(crate) async fn write_log_start_checkpoint(&self) -> Result<(), IoError> {
        let _one = self.checkpoint_permit().await;
        let start = self.log_start_offset();
        let written = write_checkpoint(
            &self.inner.dir,
            LOG_START_OFFSET_FILE,
            &[start.0.to_string()],
        )
        .await;
        self.poison_on_error(written)
    }

    pub(crate) async fn write_epoch_checkpoint(&self) -> Result<(), IoError> {
        let written = self.store_epoch_checkpoint().await;
        self.poison_on_error(written)
    }

    /// Writes the leader epochs unless the checkpoint file holds them already. A failure does
    /// not poison the log ([`Log::write_epoch_checkpoint`] does).
    pub(crate) async fn store_epoch_checkpoint(&self) -> Result<(), IoError> {
        let _one = self.checkpoint_permit().await;
        let lines = self.inner.state.borrow().epochs.to_lines();
        if self.inner.state.borrow().checkpointed_epochs.as_ref() == Some(&lines) {
            return Ok(());
        }
        write_checkpoint(&self.inner.dir, LEADER_EPOCH_FILE, &lines).await?;
        self.inner.state.borrow_mut().checkpointed_epochs = Some(lines);
        Ok(())
    }

    /// A failed write of any file of the log poisons it (the file may be half-written).
    pub(crate) fn poison_on_error<T>(&self, result: Result<T, IoError>) -> Result<T, IoError> {
        if let Err(e) = &result {
            self.poison(e);
        }
        result
    }
}
