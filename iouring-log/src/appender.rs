//! The O_DIRECT appender of the active segment.
//!
//! Contract:
//! - Appends copy bytes into the in-memory [`Tail`] and wake the writer task; they never wait
//!   for the disk. Every append that arrives before the writer task runs (one reactor turn) is
//!   covered by the same write: group commit.
//! - The writer issues up to [`WRITES_IN_FLIGHT_MAX`] non-overlapping writes of whole blocks,
//!   at most [`WRITE_BYTES_MAX`] each: O_DIRECT from a busy partition's 1 MiB chunks, through
//!   the page cache from a quiet one's small chunks ([`WriteMode`]; both are written when they
//!   complete). The last, partial block is written (zero-padded) as soon
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
use std::path::PathBuf;
use std::rc::Rc;

use crate::error::{FailureCause, LogFailure};
use crate::limits::{
    PREALLOCATE_BUDGET_BYTES_PER_SHARD, PREALLOCATE_BYTES, PREALLOCATE_GRANULE_BYTES,
    PREALLOCATE_MIN_BYTES, ZERO_FILL_WRITE_BYTES,
};
use crate::notify::{Notify, Progress};
use crate::read_cache::{self, CachedSegment};
use crate::segment_io::{SegmentFile, WriteBuffer, WriteMode};
use crate::tail::Tail;
use crate::types::Offset;
use crate::watermarks::SegmentWatermarks;
pub use crate::write_planner::{align_down, align_up, WriteJob, WriteKind, WritePlanner};

thread_local! {
    /// [`ZERO_FILL_WRITE_BYTES`] of zeros, shared by every zero fill on this thread (the kernel only
    /// reads it).
    static ZEROS: std::cell::OnceCell<Rc<glommio::io::DmaBuffer>> = const { std::cell::OnceCell::new() };
}

thread_local! {
    /// Appenders alive on this thread (active and sealing segments): the preallocation
    /// budget's divisor.
    static APPENDERS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one appender while it lives (shared by its clones).
struct AppenderCount;

impl AppenderCount {
    fn new() -> AppenderCount {
        APPENDERS.with(|n| n.set(n.get() + 1));
        AppenderCount
    }
}

impl Drop for AppenderCount {
    fn drop(&mut self) {
        APPENDERS.with(|n| n.set(n.get() - 1));
    }
}

/// The largest preallocation step one segment may take now: the shard's budget shared by its
/// appenders.
fn preallocation_cap() -> u64 {
    PREALLOCATE_BUDGET_BYTES_PER_SHARD / APPENDERS.with(|n| n.get()).max(1)
}

fn zeros() -> Rc<glommio::io::DmaBuffer> {
    ZEROS.with(|z| {
        z.get_or_init(|| {
            let mut buf = glommio::allocate_dma_buffer(ZERO_FILL_WRITE_BYTES);
            buf.as_bytes_mut().fill(0);
            Rc::new(buf)
        })
        .clone()
    })
}

/// State shared between the active segment and its writer task.
pub struct AppenderIo {
    pub planner: WritePlanner,
    pub watermarks: SegmentWatermarks,
    pub tail: Tail,
    /// Latched I/O failure: once set, the segment accepts nothing until the log is reopened.
    pub failed: Option<LogFailure>,
    /// Bytes of the file preallocated so far.
    pub preallocated: u64,
    /// `preallocate`: the first preallocation reaches this (the segment's whole size), beyond
    /// the steps and the shard's budget.
    pub preallocate_whole: u64,
    /// Set when the segment is being sealed or closed: the writer drains and exits.
    pub closing: bool,
    /// Writes planned and not yet completed, failed ones included (the planner counts a failed
    /// write in flight for ever: its range was never written). A failed log is retired only
    /// when this is zero.
    pub writes_running: usize,
}

impl AppenderIo {
    /// The segment takes no more appends: the writer drains what is appended, issues no more
    /// zero fill, and exits.
    pub fn close(&mut self) {
        self.closing = true;
        self.planner.stop_zero_fill();
    }

    /// Parks an idle tail (see `Tail::park_if_idle`) when no data write is in flight (a
    /// zero-copy write holds a chunk's buffer until it completes; zero fill holds none).
    pub fn park_idle_tail(&mut self, now: std::time::Instant) -> bool {
        if self.failed.is_some() || self.closing || self.planner.data_inflight() > 0 {
            return false;
        }
        self.tail.park_if_idle(self.planner.written(), now)
    }

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
    /// The segment as the shard's read cache knows it: written chunks move there.
    pub cached: Rc<CachedSegment>,
    /// This appender in the shard's count (the preallocation budget's divisor).
    _counted: Rc<AppenderCount>,
}

/// Where a (re)opened segment stands: its logical size, the offset after its last batch, and
/// the bytes of its last partial block (which the tail must hold to rewrite that block).
pub struct SegmentEnd<'a> {
    pub size: u64,
    pub next_offset: Offset,
    pub partial_block: &'a [u8],
}

impl Appender {
    pub fn new(
        file: Rc<dyn SegmentFile>,
        end: SegmentEnd<'_>,
        progress: Rc<Progress>,
        cached: Rc<CachedSegment>,
    ) -> Appender {
        let path = Rc::new(file.path().to_path_buf());
        Appender {
            file,
            path,
            io: Rc::new(RefCell::new(AppenderIo {
                planner: WritePlanner::new(end.size),
                watermarks: SegmentWatermarks::new(end.next_offset, end.size),
                tail: Tail::new(end.size, end.partial_block),
                failed: None,
                preallocated: 0,
                preallocate_whole: 0,
                closing: false,
                writes_running: 0,
            })),
            events: Rc::new(Notify::default()),
            _counted: Rc::new(AppenderCount::new()),
            progress,
            cached,
        }
    }

    /// Waits until `ready` holds, re-checking after every append, write completion or failure;
    /// a latched write failure ends the wait with its message.
    pub async fn wait_until(
        &self,
        ready: impl Fn(&WritePlanner) -> bool,
    ) -> Result<(), LogFailure> {
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
                    // Zero fill only ahead of busy partitions (see `limits::ZERO_FILL_AHEAD_BYTES`).
                    let busy = io.tail.is_busy();
                    io.planner.allow_zero_fill(busy);
                    let job = io.planner.plan();
                    io.writes_running += usize::from(job.is_some());
                    job
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
        let (current, whole) = {
            let io = self.io.borrow();
            (io.preallocated, io.preallocate_whole)
        };
        if needed <= current {
            return;
        }
        let target = preallocation_target(current, needed, preallocation_cap()).max(whole);
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
        let (source, mode) = {
            let io = self.io.borrow();
            // Written from the tail's own chunk, no copy (see `Tail::write_source`).
            let source = match job.kind {
                WriteKind::Data => io.tail.write_source(job.start, job.len),
                WriteKind::ZeroFill => None,
            };
            // A quiet partition's bytes (small tail chunks) go through the page cache; a busy
            // one's, and zero fill, O_DIRECT (see `segment_io`).
            let mode = if job.kind == WriteKind::Data && !io.tail.in_big_chunk(job.start) {
                WriteMode::PageCache
            } else {
                WriteMode::Direct
            };
            (source, mode)
        };
        if mode == WriteMode::PageCache {
            // Readers of these bytes read them through the page cache too (see `read_cache`).
            self.cached
                .mark_page_cache_written(job.start, job.start + job.len as u64);
        }
        let buf = match (job.kind, source) {
            (WriteKind::ZeroFill, _) => WriteBuffer::Shared(zeros(), 0..job.len),
            (WriteKind::Data, Some((chunk, range))) => WriteBuffer::Shared(chunk, range),
            // Across chunks of the tail: a quiet partition's write may span several small
            // chunks (the planner bounds writes by 1 MiB chunks).
            (WriteKind::Data, None) => WriteBuffer::Owned(self.copy_for_write(job)),
        };
        let submitted = std::time::Instant::now();
        let result = self.file.write_at(buf, job.start, mode).await;
        if job.kind == WriteKind::Data {
            crate::segment_io::record_io(crate::segment_io::IoKind::DataWrite, submitted.elapsed());
        }
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
        io.writes_running -= 1;
        if job.kind == WriteKind::ZeroFill && !matches!(result, Ok(n) if n == job.len) {
            // Zero fill is only an optimisation and covers no data: a failure (a full disk, say)
            // stops it for this segment; the data writes decide whether the log fails.
            tracing::debug!(path = %self.path.display(), position = job.start, ?result, "zero fill failed; no more for this segment");
            io.planner.abandon_zero_fill(job.id);
            drop(io);
            self.events.notify_all();
            return;
        }
        match result {
            Ok(n) if n == job.len => {
                io.planner.complete(job.id);
                let written = io.planner.written();
                io.watermarks.on_written(written);
                for (start, buf) in io.tail.release_before(align_down(written)) {
                    read_cache::insert_written(&self.cached, start, buf);
                }
            }
            Ok(n) => {
                io.failed = Some(LogFailure {
                    cause: FailureCause::ShortWrite,
                    what: format!(
                        "short write to {} at position {}: {n} of {} bytes",
                        self.path.display(),
                        job.start,
                        job.len
                    ),
                });
            }
            Err(e) => {
                let what = format!(
                    "write to {} at position {} ({} bytes) failed: {e}",
                    self.path.display(),
                    job.start,
                    job.len
                );
                io.failed = Some(LogFailure::from_io(&e, what));
            }
        }
        drop(io);
        self.events.notify_all();
        self.progress.notify_all();
    }
}

/// How far to preallocate a segment file that is preallocated to `current` bytes and must hold
/// `needed`: steps that grow with the file — its size so far, at least
/// [`PREALLOCATE_MIN_BYTES`], at most [`PREALLOCATE_BYTES`] — so an idle partition reserves a
/// few megabytes, not 64 (ten on a small disk), and a busy one reaches 64 MiB steps after a
/// few rolls of its own size; and at most `cap`, the segment's share of the shard's budget (ten
/// thousand partitions take steps of a few hundred KiB), never less than
/// [`PREALLOCATE_GRANULE_BYTES`].
pub fn preallocation_target(current: u64, needed: u64, cap: u64) -> u64 {
    // Rounded down to the granule: targets stay multiples of it, so a step never overshoots
    // the budget's share.
    let step = (current
        .clamp(PREALLOCATE_MIN_BYTES, PREALLOCATE_BYTES)
        .min(cap)
        / PREALLOCATE_GRANULE_BYTES)
        .max(1)
        * PREALLOCATE_GRANULE_BYTES;
    let target = align_up(needed).max(current + step);
    target.div_ceil(PREALLOCATE_GRANULE_BYTES) * PREALLOCATE_GRANULE_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preallocation_steps_grow_with_the_file() {
        const MIB: u64 = 1 << 20;
        let mut current = 0;
        let mut steps = Vec::new();
        while current < 300 * MIB {
            let next = preallocation_target(current, current + 1, u64::MAX);
            steps.push((next - current) / MIB);
            current = next;
        }
        assert_eq!(steps[..6], [4, 4, 8, 16, 32, 64]);
        assert!(steps[6..].iter().all(|s| *s == 64), "{steps:?}");
        // A write far past the preallocated end is covered at once.
        assert_eq!(
            preallocation_target(0, 10 * MIB + 1, u64::MAX),
            10 * MIB + (64 << 10)
        );
        // Within a budget shared by many segments: small steps, never below the granule.
        let cap = PREALLOCATE_BUDGET_BYTES_PER_SHARD / 5000;
        let t = preallocation_target(0, 1, cap);
        assert!(
            t <= cap && t + PREALLOCATE_GRANULE_BYTES > cap,
            "{t} for cap {cap}"
        );
        assert_eq!(preallocation_target(0, 1, 1), PREALLOCATE_GRANULE_BYTES);
    }
}
