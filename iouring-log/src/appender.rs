//! The O_DIRECT appender of the active segment.
//!
//! Contract:
//! - Appends copy bytes into the in-memory [`Tail`] and wake the writer task; they never wait
//!   for the disk. Every append that arrives before the writer task runs (one reactor turn) is
//!   covered by the same write: group commit.
//! - The writer issues up to [`WRITES_IN_FLIGHT_MAX`] non-overlapping writes of whole blocks,
//!   at most [`WRITE_BYTES_MAX`] each. The last, partial block is written (zero-padded) as soon
//!   as nothing else is in flight: appends are acknowledged only once written, so it never
//!   waits for more. A later write of the same block waits for it, so two writes of one block
//!   are never in flight together and the newest bytes always land last. Appends that arrive
//!   while a write is in flight go out together in the next one (group commit).
//! - `durable <= written <= appended` always holds and is asserted on every change:
//!   `appended` is the tail's logical end, `written` the end of the contiguous prefix of
//!   completed writes, `durable` the end covered by a completed `fdatasync`.
//! - The segment's offset watermarks ([`SegmentWatermarks`]) follow the byte counts: a batch
//!   is written once the contiguous written prefix covers it. Every change of them, and every
//!   failure, is signalled on the log's [`Progress`].
//! - A failed or short write poisons the appender: the error is latched, the writer stops and
//!   every later call fails. A write is never retried.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::rc::Rc;

use crate::limits::{
    DIRECT_IO_ALIGNMENT, PREALLOCATE_BYTES, TAIL_CHUNK_BYTES, WRITES_IN_FLIGHT_MAX, WRITE_BYTES_MAX,
};
use crate::notify::{Notify, Progress};
use crate::segment_io::{SegmentFile, WriteBuffer};
use crate::tail::Tail;
use crate::types::Offset;
use crate::watermarks::SegmentWatermarks;

const BLOCK: u64 = DIRECT_IO_ALIGNMENT as u64;

pub fn align_down(v: u64) -> u64 {
    v - v % BLOCK
}

pub fn align_up(v: u64) -> u64 {
    align_down(v + BLOCK - 1)
}

/// One planned write: file range `[start, start + len)`, of which `[start, logical_end)` is
/// data and the rest zero padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteJob {
    pub id: u64,
    pub start: u64,
    pub len: usize,
    pub logical_end: u64,
}

#[derive(Debug)]
struct Inflight {
    job: WriteJob,
    done: bool,
}

/// The pure bookkeeping of writes: which range to write next and how far the file is written.
#[derive(Debug)]
pub struct WritePlanner {
    appended: u64,
    written: u64,
    durable: u64,
    /// Every whole block below this has been submitted.
    next_full: u64,
    inflight: VecDeque<Inflight>,
    next_id: u64,
}

impl WritePlanner {
    /// A planner for a segment whose first `end` bytes are already on disk and durable.
    pub fn new(end: u64) -> WritePlanner {
        WritePlanner {
            appended: end,
            written: end,
            durable: end,
            next_full: align_down(end),
            inflight: VecDeque::new(),
            next_id: 0,
        }
    }

    pub fn appended(&self) -> u64 {
        self.appended
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn durable(&self) -> u64 {
        self.durable
    }

    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    fn check(&self) {
        assert!(
            self.durable <= self.written && self.written <= self.appended,
            "appender invariant durable <= written <= appended broken: {} <= {} <= {}",
            self.durable,
            self.written,
            self.appended
        );
    }

    pub fn on_append(&mut self, new_appended: u64) {
        assert!(
            new_appended >= self.appended,
            "append moved the end backwards"
        );
        self.appended = new_appended;
        self.check();
    }

    /// The next write to issue, if any may be issued now.
    pub fn plan(&mut self) -> Option<WriteJob> {
        if self.inflight.len() >= WRITES_IN_FLIGHT_MAX {
            return None;
        }
        let full_end = align_down(self.appended);
        let blocked = self
            .inflight
            .iter()
            .any(|w| w.job.start + w.job.len as u64 > self.next_full);
        if blocked {
            return None;
        }
        let chunk_end = (self.next_full / TAIL_CHUNK_BYTES as u64 + 1) * TAIL_CHUNK_BYTES as u64;
        // While writes are in flight, a chunk that is not full yet waits to fill up: whole
        // chunks go to the disk straight from their buffers, without a copy.
        let wait_for_whole_chunk = full_end < chunk_end && !self.inflight.is_empty();
        let tail_end = align_up(self.appended);
        // Nothing in flight and everything unwritten fits one write in this chunk: whole
        // blocks and the partial one go out together (the partial block is rewritten later).
        let all_at_once = self.inflight.is_empty()
            && !self.appended.is_multiple_of(BLOCK)
            && self.next_full < full_end
            && tail_end <= chunk_end
            && tail_end - self.next_full <= WRITE_BYTES_MAX as u64;
        let (start, len, logical_end) = if all_at_once {
            let start = self.next_full;
            self.next_full = full_end;
            (start, tail_end - start, self.appended)
        } else if self.next_full < full_end && !wait_for_whole_chunk {
            // Writes never cross a tail chunk boundary.
            let len = (full_end.min(chunk_end) - self.next_full).min(WRITE_BYTES_MAX as u64);
            let start = self.next_full;
            self.next_full += len;
            (start, len, start + len)
        } else if self.appended > self.next_full
            && self.inflight.is_empty()
            && !wait_for_whole_chunk
            && self.written < self.appended
        {
            let len = align_up(self.appended) - self.next_full;
            (self.next_full, len, self.appended)
        } else {
            return None;
        };
        let job = WriteJob {
            id: self.next_id,
            start,
            len: len as usize,
            logical_end,
        };
        self.next_id += 1;
        self.inflight.push_back(Inflight { job, done: false });
        Some(job)
    }

    /// Records a completed write and advances `written` over the contiguous completed prefix.
    pub fn complete(&mut self, id: u64) {
        let w = self
            .inflight
            .iter_mut()
            .find(|w| w.job.id == id)
            .unwrap_or_else(|| panic!("completion of unknown write {id}"));
        w.done = true;
        while self.inflight.front().is_some_and(|w| w.done) {
            let w = self.inflight.pop_front().expect("front exists");
            self.written = self.written.max(w.job.logical_end);
        }
        self.check();
    }

    pub fn on_durable(&mut self, synced: u64) {
        assert!(
            synced <= self.written,
            "fsync covered {synced} beyond written {}",
            self.written
        );
        self.durable = self.durable.max(synced);
        self.check();
    }

    /// Cuts the logical end back to `end`. Only legal with no write in flight.
    pub fn truncate(&mut self, end: u64) {
        assert!(
            self.inflight.is_empty(),
            "truncate with {} writes in flight",
            self.inflight.len()
        );
        assert!(
            end <= self.appended,
            "truncate to {end} beyond appended {}",
            self.appended
        );
        self.appended = end;
        self.written = self.written.min(end);
        self.durable = self.durable.min(end);
        self.next_full = align_down(end);
        self.check();
    }

    pub fn is_idle(&self) -> bool {
        self.inflight.is_empty() && self.written == self.appended
    }
}

/// State shared between the active segment and its writer task.
pub struct AppenderIo {
    pub planner: WritePlanner,
    pub watermarks: SegmentWatermarks,
    pub tail: Tail,
    /// Latched I/O failure: once set, the segment accepts nothing until the log is reopened.
    pub failed: Option<String>,
    /// Bytes of the file preallocated so far.
    pub preallocated: u64,
    /// Set when the segment is being sealed or closed: the writer drains and exits.
    pub closing: bool,
}

impl AppenderIo {
    /// Records a completed `fdatasync` issued when `synced` bytes (holding the batches before
    /// `synced_offset`) were written.
    pub fn on_durable(&mut self, synced: u64, synced_offset: Offset) {
        self.planner.on_durable(synced);
        self.watermarks.on_durable(synced_offset);
    }
}

/// Everything the writer task needs.
#[derive(Clone)]
pub struct Appender {
    pub file: Rc<dyn SegmentFile>,
    pub path: Rc<PathBuf>,
    pub io: Rc<RefCell<AppenderIo>>,
    /// Notified on appends (wakes the writer) and on write completion or failure (wakes the
    /// writer and seal).
    pub events: Rc<Notify>,
    /// The log's signal that watermarks moved or the log failed.
    pub progress: Rc<Progress>,
}

/// Where a (re)opened segment stands: its logical size, the offset after its last batch, and
/// the bytes of its last partial block (which the tail must hold to rewrite that block).
pub struct SegmentEnd<'a> {
    pub size: u64,
    pub next_offset: Offset,
    pub partial_block: &'a [u8],
}

impl Appender {
    pub fn new(file: Rc<dyn SegmentFile>, end: SegmentEnd<'_>, progress: Rc<Progress>) -> Appender {
        let path = Rc::new(file.path().to_path_buf());
        Appender {
            file,
            path,
            io: Rc::new(RefCell::new(AppenderIo {
                planner: WritePlanner::new(end.size),
                watermarks: SegmentWatermarks::new(end.next_offset),
                tail: Tail::new(end.size, end.partial_block),
                failed: None,
                preallocated: 0,
                closing: false,
            })),
            events: Rc::new(Notify::default()),
            progress,
        }
    }

    /// Waits until `ready` holds, re-checking after every append, write completion or failure;
    /// a latched write failure ends the wait with its message.
    pub async fn wait_until(&self, ready: impl Fn(&WritePlanner) -> bool) -> Result<(), String> {
        loop {
            let seen = self.events.generation();
            {
                let io = self.io.borrow();
                if let Some(f) = &io.failed {
                    return Err(f.clone());
                }
                if ready(&io.planner) {
                    return Ok(());
                }
            }
            self.events.changed(seen).await;
        }
    }

    /// The writer task: issues writes as appends arrive until closed (and drained) or failed.
    pub async fn run_writer(self) {
        loop {
            let seen = self.events.generation();
            loop {
                let job = {
                    let mut io = self.io.borrow_mut();
                    if io.failed.is_some() {
                        return;
                    }
                    io.planner.plan()
                };
                let Some(job) = job else { break };
                self.ensure_preallocated(job.start + job.len as u64).await;
                let me = self.clone();
                glommio::spawn_local(async move { me.run_write(job).await }).detach();
            }
            {
                let io = self.io.borrow();
                if io.failed.is_some() || (io.closing && io.planner.is_idle()) {
                    return;
                }
            }
            self.events.changed(seen).await;
        }
    }

    async fn ensure_preallocated(&self, needed: u64) {
        let current = self.io.borrow().preallocated;
        if needed <= current {
            return;
        }
        let target = align_up(needed).div_ceil(PREALLOCATE_BYTES) * PREALLOCATE_BYTES;
        match self.file.pre_allocate(target).await {
            Ok(()) => self.io.borrow_mut().preallocated = target,
            // Preallocation is an optimisation: a filesystem without fallocate still takes the
            // writes. Remember the target so it is not asked again for every write.
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "preallocation failed");
                self.io.borrow_mut().preallocated = target;
            }
        }
    }

    async fn run_write(self, job: WriteJob) {
        let whole_chunk = self
            .io
            .borrow()
            .tail
            .full_chunk(job.start)
            .filter(|b| b.len() == job.len);
        let buf = match whole_chunk {
            // Zero-copy: the full chunk's buffer goes to the kernel as it is.
            Some(chunk) => WriteBuffer::Shared(chunk),
            None => WriteBuffer::Owned(self.copy_for_write(job)),
        };
        let result = self.file.write_at(buf, job.start).await;
        self.complete_write(job, result);
    }

    /// A write buffer holding `[start, logical_end)` of the tail, zero-padded to the block.
    fn copy_for_write(&self, job: WriteJob) -> glommio::io::DmaBuffer {
        let mut buf = self.file.alloc_buffer(job.len);
        let io = self.io.borrow();
        let data = (job.logical_end - job.start) as usize;
        let bytes = buf.as_bytes_mut();
        io.tail
            .copy_out(job.start, job.logical_end, &mut bytes[..data]);
        bytes[data..].fill(0);
        buf
    }

    fn complete_write(&self, job: WriteJob, result: std::io::Result<usize>) {
        let mut io = self.io.borrow_mut();
        match result {
            Ok(n) if n == job.len => {
                io.planner.complete(job.id);
                let written = io.planner.written();
                io.watermarks.on_written(written);
                io.tail.release_before(align_down(written));
            }
            Ok(n) => {
                io.failed = Some(format!(
                    "short write to {} at position {}: {n} of {} bytes",
                    self.path.display(),
                    job.start,
                    job.len
                ));
            }
            Err(e) => {
                io.failed = Some(format!(
                    "write to {} at position {} ({} bytes) failed: {e}",
                    self.path.display(),
                    job.start,
                    job.len
                ));
            }
        }
        drop(io);
        self.events.notify_all();
        self.progress.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn full_blocks_pipeline_and_partial_waits_for_idle() {
        let mut p = WritePlanner::new(0);
        p.on_append(3 * WRITE_BYTES_MAX as u64 + 100);
        let a = p.plan().unwrap();
        let b = p.plan().unwrap();
        let c = p.plan().unwrap();
        assert_eq!(
            (a.start, b.start, c.start),
            (0, WRITE_BYTES_MAX as u64, 2 * WRITE_BYTES_MAX as u64)
        );
        assert_eq!(
            p.plan(),
            None,
            "partial block waits while full writes are in flight"
        );
        p.complete(b.id);
        assert_eq!(p.written(), 0, "written is a contiguous prefix");
        p.complete(a.id);
        p.complete(c.id);
        assert_eq!(p.written(), 3 * WRITE_BYTES_MAX as u64);
        let d = p.plan().unwrap();
        assert_eq!(
            (d.len, d.logical_end),
            (4096, 3 * WRITE_BYTES_MAX as u64 + 100)
        );
        p.on_append(3 * WRITE_BYTES_MAX as u64 + 5000);
        assert_eq!(
            p.plan(),
            None,
            "the block being written is not written twice at once"
        );
        p.complete(d.id);
        let e = p.plan().unwrap();
        assert_eq!(
            e.start,
            3 * WRITE_BYTES_MAX as u64,
            "the partial block is rewritten"
        );
        assert_eq!(
            (e.len, e.logical_end),
            (8192, 3 * WRITE_BYTES_MAX as u64 + 5000),
            "the block it filled and the new partial block go out in one write"
        );
    }

    /// Random appends and completions: every byte ends up covered by a completed write after
    /// the last write covering it, and in-flight writes never overlap. Seeded; prints the seed.
    #[test]
    fn random_schedules_keep_invariants() {
        for seed in 0..200u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut p = WritePlanner::new(rng.gen_range(0..10_000));
            let mut flying: Vec<WriteJob> = Vec::new();
            for _ in 0..500 {
                match rng.gen_range(0..3) {
                    0 => p.on_append(p.appended() + rng.gen_range(1..300_000)),
                    1 => {
                        while let Some(j) = p.plan() {
                            for f in &flying {
                                let overlap = j.start < f.start + f.len as u64
                                    && f.start < j.start + j.len as u64;
                                assert!(!overlap, "seed {seed}: {j:?} overlaps {f:?}");
                            }
                            flying.push(j);
                        }
                    }
                    _ if !flying.is_empty() => {
                        let j = flying.swap_remove(rng.gen_range(0..flying.len()));
                        p.complete(j.id);
                    }
                    _ => {}
                }
            }
            loop {
                while let Some(j) = p.plan() {
                    flying.push(j);
                }
                if flying.is_empty() {
                    break;
                }
                let j = flying.remove(0);
                p.complete(j.id);
            }
            assert_eq!(p.written(), p.appended(), "seed {seed}: drained");
        }
    }
}
