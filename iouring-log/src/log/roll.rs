//! Rolling the active segment without stalling appends, as Kafka does: the roll switches to a
//! new segment at once, and the old one is finished by a background task — writes drained,
//! directory synced (so the new segment's file name is durable before any of its offsets
//! counts as flushed), file trimmed to its logical size and fsynced, both indexes written, the
//! O_DIRECT handle closed, the recovery point moved past it.
//!
//! Contract:
//! - A roll holds the mutation permit only while it creates the new segment's file; appends
//!   go on into the new segment while the old one is sealed.
//! - Seals finish in roll order (each waits for the one before it), so a sealed segment never
//!   follows a sealing one, and the recovery point only ever moves over sealed segments.
//! - A failed seal poisons the log. `close` and `truncate_to` wait for every seal first.

use std::cell::Cell;
use std::rc::Rc;

use crate::appender::Appender;
use crate::checkpoint::sync_dir;
use crate::error::{FlushError, IoError};
use crate::helper_thread::on_helper_thread;
use crate::log::Log;
use crate::segment::{
    absent_is_fine, rename_if_present, seal_appender, shrink_and_remove, with_suffix,
    write_index_files, Segment, DELETED_SUFFIX,
};
use crate::segment_io::{record_io, IoKind};
use crate::types::Offset;

impl Log {
    /// Rolls the active segment if the next batch would overflow it or one of its indexes
    /// (`segment.bytes`, `segment.index.bytes`), it is older than `segment.ms` (less its
    /// `segment.jitter.ms` share), or its offsets would overflow the index's `u32`.
    pub(crate) async fn maybe_roll(
        &self,
        batch_bytes: u64,
        last_offset_delta: i32,
        now_ms: i64,
    ) -> Result<(), FlushError> {
        let due = {
            let st = self.inner.state.borrow();
            let a = st.active();
            let cfg = self.inner.config.get();
            let full = a.size + batch_bytes > cfg.segment_bytes
                || cfg.indexes_full(
                    a.indexes.offset_index.entries().len(),
                    a.indexes.time_index.len(),
                );
            let old = now_ms - a.rolling_timestamp_ms
                > cfg.roll_after_ms(&self.inner.dir, a.base_offset.0);
            let last = Offset(a.next_offset.0 + i64::from(last_offset_delta));
            let overflow = last.relative_to(a.base_offset).is_none();
            a.size > 0 && (full || old || overflow)
        };
        if due {
            self.roll_locked(now_ms).await?;
        }
        Ok(())
    }

    /// Rolls now: the active segment starts sealing and a new one takes appends.
    pub async fn roll(&self, now_ms: i64) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        if self.inner.state.borrow().active().size == 0 {
            return Ok(());
        }
        self.roll_locked(now_ms).await
    }

    /// Roll with the mutation permit held.
    async fn roll_locked(&self, now_ms: i64) -> Result<(), FlushError> {
        let rolled = std::time::Instant::now();
        let base = self.log_end_offset();
        let created = Segment::create(
            self.inner.io.as_ref(),
            &self.inner.dir,
            base,
            now_ms,
            self.inner.progress.clone(),
        )
        .await;
        let segment = self.poison_on_error(created)?;
        let (old_base, old) = {
            let mut st = self.inner.state.borrow_mut();
            let old = st.active_mut();
            let old_base = old.base_offset;
            let busy = old.appender().is_some_and(|a| a.io.borrow().tail.is_busy());
            if let Some(a) = segment.appender().filter(|_| busy) {
                a.io.borrow_mut().tail.mark_busy();
            }
            let cfg = self.inner.config.get();
            if let Some(a) = segment.appender().filter(|_| cfg.preallocate) {
                a.io.borrow_mut().preallocate_whole = cfg.segment_bytes;
            }
            let appender = old.start_sealing();
            st.segments.push(segment);
            st.check();
            (old_base, appender)
        };
        let done = Rc::new(Cell::new(false));
        let previous = self.inner.last_seal.replace(Some(done.clone()));
        tracing::debug!(log = %self.inner.dir.display(), base_offset = base.0, "rolled segment");
        let log = self.clone();
        glommio::spawn_local(async move {
            log.finish_seal(old_base, old, previous).await;
            record_io(IoKind::Seal, rolled.elapsed());
            done.set(true);
            log.inner.progress.notify_all();
        })
        .detach();
        Ok(())
    }

    /// The background half of a roll (see the module doc). Errors poison the log.
    async fn finish_seal(
        &self,
        base: Offset,
        appender: Appender,
        previous: Option<Rc<Cell<bool>>>,
    ) {
        if let Some(previous) = previous {
            while !previous.get() {
                let seen = self.inner.progress.log.generation();
                if previous.get() {
                    break;
                }
                self.inner.progress.log.changed(seen).await;
            }
        }
        if self.refusal().is_some() {
            return;
        }
        if let Err(e) = self.seal_segment(base, &appender).await {
            self.poison(&e);
            return;
        }
        self.inner.state.borrow_mut().advance_recovery_point();
    }

    /// Syncs the directory, then seals the sealing segment at `base` and writes its indexes.
    async fn seal_segment(&self, base: Offset, appender: &Appender) -> Result<(), IoError> {
        sync_dir(&self.inner.dir).await?;
        let size = self
            .inner
            .state
            .borrow_mut()
            .segment_mut(base)
            .expect("a sealing segment stays in the log")
            .size;
        seal_appender(appender, size).await?;
        let (path, index, time_index) = {
            let mut st = self.inner.state.borrow_mut();
            let seg = st
                .segment_mut(base)
                .expect("a sealing segment stays in the log");
            let (index, time_index) = seg.mark_sealed();
            (seg.log_path.clone(), index, time_index)
        };
        write_index_files(&path, base, index, time_index).await?;
        if let Err(e) = appender.file.clone().close().await {
            tracing::warn!(path = %path.display(), error = %e, "closing sealed segment's O_DIRECT file");
        }
        Ok(())
    }

    /// Waits until every segment before the active one is sealed and every background seal has
    /// finished (its index files written: a segment is marked sealed before they are, and
    /// retention must not delete files a seal is still writing).
    pub async fn wait_for_seals(&self) -> Result<(), FlushError> {
        loop {
            let seen = self.inner.progress.log.generation();
            let sealing = {
                let st = self.inner.state.borrow();
                let n = st.segments.len();
                let unsealed = st.segments[..n - 1].iter().any(|s| !s.is_sealed());
                // Seals finish in roll order: the last one done means all are.
                let last_running = self
                    .inner
                    .last_seal
                    .borrow()
                    .as_ref()
                    .is_some_and(|done| !done.get());
                unsealed || last_running
            };
            if !sealing {
                return Ok(());
            }
            if let Some(refused) = self.refusal() {
                return Err(refused);
            }
            self.inner.progress.log.changed(seen).await;
        }
    }

    /// Retires a failed log so that its folder may be opened again (writes resuming once the
    /// disk has space): waits until none of its I/O is running — writes in flight, background
    /// seals, an `fdatasync`, a checkpoint write — and closes it. Nothing is written: what the
    /// failure left half-done is for the next open's recovery to validate. Refuses a log that
    /// has not failed (close that one).
    pub async fn retire_failed(&self) -> Result<(), FlushError> {
        if self.refusal().is_none() {
            return Err(FlushError::NotFailed(self.inner.dir.clone()));
        }
        loop {
            let seen = self.inner.progress.log.generation();
            let busy = {
                let st = self.inner.state.borrow();
                let writing = st
                    .segments
                    .iter()
                    .filter_map(|s| s.appender())
                    .any(|a| a.io.borrow().writes_running > 0);
                let sealing = self
                    .inner
                    .last_seal
                    .borrow()
                    .as_ref()
                    .is_some_and(|done| !done.get());
                writing || sealing
            };
            if !busy {
                break;
            }
            self.inner.progress.log.changed(seen).await;
        }
        // An fsync or checkpoint write in flight holds its permit until it completes.
        drop(self.inner.sync.acquire_permit(1).await);
        drop(self.inner.checkpoint.acquire_permit(1).await);
        self.inner.state.borrow_mut().closed = true;
        self.inner.progress.notify_all();
        Ok(())
    }

    /// Seals the active segment in place (the caller holds the mutation permit and waited for
    /// every background seal). Readers keep seeing it through its tail until its bytes are all
    /// on disk.
    async fn seal_active_in_place(&self) -> Result<(), FlushError> {
        let (appender, base) = {
            let mut st = self.inner.state.borrow_mut();
            let a = st.active_mut();
            (a.start_sealing(), a.base_offset)
        };
        let sealed = self.seal_segment(base, &appender).await;
        self.poison_on_error(sealed)?;
        Ok(())
    }

    /// Clean shutdown: waits for background seals, drains and fsyncs the active segment, trims
    /// it, writes its indexes and both checkpoints. The log refuses every call afterwards.
    pub async fn close(&self) -> Result<(), FlushError> {
        let _permit = self.mutation_permit().await?;
        self.wait_for_seals().await?;
        self.seal_active_in_place().await?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.recovery_point = st.log_end_offset();
        }
        self.write_recovery_point_checkpoint().await?;
        self.write_epoch_checkpoint().await?;
        self.sync_aborted_txns().await?;
        self.inner.state.borrow_mut().closed = true;
        self.inner.progress.notify_all();
        Ok(())
    }

    /// Removes the folder of a closed log (its topic was deleted) so that the helper thread,
    /// not the shard, frees the segments' blocks (see `Segment::delete_files`): each segment's
    /// read handles are closed, its file shrunk in steps and unlinked, then the folder goes.
    /// Refuses a log that is open.
    pub async fn remove_closed(&self) -> Result<(), IoError> {
        let segments: Vec<_> = {
            let st = self.inner.state.borrow();
            if !st.closed {
                return Err(IoError::new(
                    "removing",
                    &self.inner.dir,
                    std::io::Error::other("the log is open; close it first"),
                ));
            }
            st.segments
                .iter()
                .map(|s| (s.cached.clone(), s.log_path.clone()))
                .collect()
        };
        for (cached, path) in segments {
            // Renamed first, as `Segment::delete_files` does: a crash never leaves a shrunk
            // file that a log's open would take for a segment.
            let deleted = with_suffix(&path, DELETED_SUFFIX);
            rename_if_present(&path, &deleted).await?;
            cached.close_handles();
            shrink_and_remove(&deleted).await?;
        }
        let dir = self.inner.dir.clone();
        let removing = dir.clone();
        let removed = on_helper_thread(
            glommio::executor().spawn_blocking(move || std::fs::remove_dir_all(&removing)),
        );
        absent_is_fine(removed.await, "removing", &dir)
    }
}
