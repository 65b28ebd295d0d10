//! The completion half of an append: waiting until appended offsets are written to their
//! segment file, or flushed, with group commit — one `fdatasync` covers every append written
//! before it was issued, whoever waits for them.
//!
//! Contract:
//! - [`Log::wait_for`] returns `Ok` once every batch before `end` is written (or flushed), and
//!   an error once the log has failed or closed (a failed log answers nothing). It never issues a
//!   write (the appender's writer does, as soon as appends arrive) and issues an `fdatasync` only
//!   for `Durability::Flushed`, only when the offsets waited for are written but not flushed,
//!   and only one at a time per log.
//! - Offsets in a segment that a roll is sealing are flushed by that seal, never by a caller.
//! - What each watermark survives: written offsets survive the process being killed (the
//!   O_DIRECT write has completed, the device holds the bytes); flushed offsets survive the
//!   machine losing power. See `docs/format.md`.

use crate::appender::Appender;
use crate::error::{FlushError, IoError};
use crate::limits::RECOVERY_POINT_CHECKPOINT_INTERVAL_MS;
use crate::log::{Log, Watermark};
use crate::types::Offset;

/// How far appended offsets must have gone before they are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// In the segment file: the O_DIRECT write holding them completed.
    Written,
    /// Covered by a completed `fdatasync` as well.
    Flushed,
}

impl Log {
    /// Waits until every batch before `end` is written (or flushed) — see the module doc.
    pub async fn wait_for(&self, durability: Durability, end: Offset) -> Result<(), FlushError> {
        let which = match durability {
            Durability::Written => Watermark::Written,
            Durability::Flushed => Watermark::Flushed,
        };
        loop {
            let seen = self.inner.progress.log.generation();
            // A failed log answers nothing, not even what it had written before it failed.
            if let Some(refused) = self.refusal() {
                return Err(refused);
            }
            if self.inner.state.borrow().watermark(which) >= end {
                return Ok(());
            }
            if which == Watermark::Flushed {
                if let Some(appender) = self.active_needing_sync(end) {
                    self.sync_active(&appender).await?;
                    continue;
                }
            }
            self.inner.progress.log.changed(seen).await;
        }
    }

    /// The active segment's appender if flushing it now would bring the active segment's
    /// part of `[.., end)` to durable: those bytes are written and not yet synced.
    fn active_needing_sync(&self, end: Offset) -> Option<Appender> {
        let st = self.inner.state.borrow();
        let active = st.active();
        if active.base_offset >= end {
            // Every offset waited for is in an older segment: its seal flushes it.
            return None;
        }
        let appender = active.appender()?;
        let io = appender.io.borrow();
        let wanted = end.min(io.watermarks.next_offset());
        let ready = io.watermarks.written_offset() >= wanted;
        let synced = io.watermarks.durable_offset() >= wanted;
        (ready && !synced).then(|| appender.clone())
    }

    /// One `fdatasync` of the active segment covering what is written now; skipped when one
    /// that finished while this caller queued already covered it.
    async fn sync_active(&self, appender: &Appender) -> Result<(), FlushError> {
        let _one = self
            .inner
            .sync
            .acquire_permit(1)
            .await
            .expect("sync semaphore never closes");
        let (bytes, offset, done) = {
            let io = appender.io.borrow();
            let offset = io.watermarks.written_offset();
            let done = io.watermarks.durable_offset() >= offset;
            (io.planner.written(), offset, done)
        };
        if done {
            return Ok(());
        }
        if let Err(e) = appender.file.fdatasync().await {
            let e = IoError::new("syncing", appender.path.as_path(), e);
            self.poison(&e);
            return Err(e.into());
        }
        appender.io.borrow_mut().on_durable(bytes, offset);
        self.inner.state.borrow_mut().advance_recovery_point();
        self.inner.progress.notify_all();
        Ok(())
    }

    /// Flushes everything appended so far (group commit with concurrent callers) and moves the
    /// recovery point.
    pub async fn flush(&self) -> Result<(), FlushError> {
        {
            let mut st = self.inner.state.borrow_mut();
            st.unflushed_records = 0;
            st.first_unflushed_ms = None;
        }
        let end = self.log_end_offset();
        self.wait_for(Durability::Flushed, end).await
    }

    /// The `flush.ms` policy and the periodic recovery-point checkpoint (written when it moved,
    /// at most every `RECOVERY_POINT_CHECKPOINT_INTERVAL_MS`, like Kafka's
    /// `log.flush.offset.checkpoint.interval.ms`): call from a timer.
    pub async fn maybe_flush(&self, now_ms: i64) -> Result<(), FlushError> {
        let due = {
            let st = self.inner.state.borrow();
            match (self.inner.config.get().flush_ms, st.first_unflushed_ms) {
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
}
