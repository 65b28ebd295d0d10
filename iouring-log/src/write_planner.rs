//! The pure bookkeeping of an active segment's writes: which file range to write next, how far
//! the file is written, and the zero fill that keeps one chunk of the file converted ahead of
//! the data.
//!
//! Contract:
//! - Data writes are whole blocks, at most [`WRITE_BYTES_MAX`], never crossing a tail chunk,
//!   at most [`WRITES_IN_FLIGHT_MAX`] in flight and never overlapping one another. The last,
//!   partial block is written only when no data write is in flight.
//! - `durable <= written <= appended`, asserted on every change; `written` is the end of the
//!   contiguous prefix of completed data writes.
//! - Zero fill: on ext4, an O_DIRECT write into preallocated (unwritten) blocks cannot be done
//!   inline by io_uring — it goes to an io-wq worker thread, which on a busy, pinned shard's CPU
//!   may wait a scheduler slice (~4 ms, measured) before it runs. A write over blocks already
//!   written once is done inline. So while the device is idle (no data write in flight) and
//!   less than [`ZERO_FILL_AHEAD_BYTES`] is converted ahead of the appended end, the planner
//!   writes zeros over the next [`ZERO_FILL_WRITE_BYTES`], one job at a time (small pieces: the
//!   device serves requests in order, and an `fdatasync` or data write issued behind a zero fill
//!   waits for it): data written later
//!   lands on converted blocks. A data write overlapping a zero fill in
//!   flight waits for it (the zeros must land first). Under sustained load data writes are
//!   always in flight and no zero fill is issued, so it costs device bandwidth only when there
//!   is bandwidth to spare. Zero fill never starts below the block after the appended end, and
//!   not once the segment is closing.

use std::collections::VecDeque;

use crate::limits::{
    DIRECT_IO_ALIGNMENT, TAIL_CHUNK_BYTES, WRITES_IN_FLIGHT_MAX, WRITE_BYTES_MAX,
    ZERO_FILL_AHEAD_BYTES, ZERO_FILL_WRITE_BYTES,
};

const BLOCK: u64 = DIRECT_IO_ALIGNMENT as u64;

pub fn align_down(v: u64) -> u64 {
    v - v % BLOCK
}

pub fn align_up(v: u64) -> u64 {
    align_down(v + BLOCK - 1)
}

/// What a write carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Appended bytes from the tail (zero-padded to the block).
    Data,
    /// Zeros past the appended end, converting the blocks ahead (see the module doc).
    ZeroFill,
}

/// One planned write: file range `[start, start + len)`, of which `[start, logical_end)` is
/// data and the rest zero padding (all zeros for a zero fill, whose `logical_end` is `start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteJob {
    pub id: u64,
    pub kind: WriteKind,
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
    /// Data writes in flight, oldest first.
    inflight: VecDeque<Inflight>,
    next_id: u64,
    /// Every block below this has been written at least once (data or zeros).
    converted: u64,
    /// The zero fill in flight, if any.
    zero_fill: Option<WriteJob>,
    /// No more zero fills (the segment is being sealed or closed, or a zero fill failed).
    closing: bool,
    /// Zero fills wanted at all (the appender asks for them only for busy partitions).
    zero_fill_allowed: bool,
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
            converted: align_up(end),
            zero_fill: None,
            closing: false,
            zero_fill_allowed: true,
        }
    }

    /// Whether zero fills may be planned (a quiet segment does without them).
    pub fn allow_zero_fill(&mut self, allowed: bool) {
        self.zero_fill_allowed = allowed;
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

    /// Writes in flight, zero fill included.
    pub fn inflight(&self) -> usize {
        self.inflight.len() + usize::from(self.zero_fill.is_some())
    }

    /// Data writes in flight (zero fill not counted: it holds no tail bytes).
    pub fn data_inflight(&self) -> usize {
        self.inflight.len()
    }

    #[cfg(test)]
    /// Every block below this has been written at least once.
    pub fn converted(&self) -> u64 {
        self.converted
    }

    /// No more zero fills: the segment is being sealed or closed.
    pub fn stop_zero_fill(&mut self) {
        self.closing = true;
    }

    /// The zero fill `id` failed: it converted nothing we can count on, and no more are issued.
    pub fn abandon_zero_fill(&mut self, id: u64) {
        assert!(
            self.zero_fill.is_some_and(|z| z.id == id),
            "abandoning zero fill {id}, which is not in flight"
        );
        self.zero_fill = None;
        self.closing = true;
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
        if self.inflight() >= WRITES_IN_FLIGHT_MAX {
            return None;
        }
        match self.plan_data() {
            Some(job) => Some(job),
            None => self.plan_zero_fill(),
        }
    }

    /// Zeros over the next [`ZERO_FILL_WRITE_BYTES`] past the converted end, when the device is
    /// idle and less than [`ZERO_FILL_AHEAD_BYTES`] is converted ahead of the appended end.
    fn plan_zero_fill(&mut self) -> Option<WriteJob> {
        let from = self.converted.max(align_up(self.appended));
        let idle = self.inflight.is_empty() && self.zero_fill.is_none();
        let ahead = from - align_up(self.appended);
        if self.closing || !self.zero_fill_allowed || !idle || ahead >= ZERO_FILL_AHEAD_BYTES {
            return None;
        }
        let job = WriteJob {
            id: self.next_id,
            kind: WriteKind::ZeroFill,
            start: from,
            len: ZERO_FILL_WRITE_BYTES,
            logical_end: from,
        };
        self.next_id += 1;
        self.zero_fill = Some(job);
        Some(job)
    }

    /// The next data write, if one may be issued now.
    fn plan_data(&mut self) -> Option<WriteJob> {
        let full_end = align_down(self.appended);
        let blocked = self
            .inflight
            .iter()
            .any(|w| w.job.start + w.job.len as u64 > self.next_full);
        if blocked {
            return None;
        }
        let chunk_end = (self.next_full / TAIL_CHUNK_BYTES as u64 + 1) * TAIL_CHUNK_BYTES as u64;
        // While writes are in flight, a chunk that is not full yet waits to fill up: one write
        // of a whole chunk instead of several of its pieces.
        let wait_for_whole_chunk = full_end < chunk_end && !self.inflight.is_empty();
        let tail_end = align_up(self.appended);
        // Nothing in flight and everything unwritten fits one write in this chunk: whole
        // blocks and the partial one go out together (the partial block is rewritten later).
        let all_at_once = self.inflight.is_empty()
            && !self.appended.is_multiple_of(BLOCK)
            && self.next_full < full_end
            && tail_end <= chunk_end
            && tail_end - self.next_full <= WRITE_BYTES_MAX as u64;
        let start = self.next_full;
        let (len, logical_end, next_full) = if all_at_once {
            (tail_end - start, self.appended, full_end)
        } else if start < full_end && !wait_for_whole_chunk {
            // Writes never cross a tail chunk boundary.
            let len = (full_end.min(chunk_end) - start).min(WRITE_BYTES_MAX as u64);
            (len, start + len, start + len)
        } else if self.appended > start
            && self.inflight.is_empty()
            && !wait_for_whole_chunk
            && self.written < self.appended
        {
            (tail_end - start, self.appended, start)
        } else {
            return None;
        };
        let end = start + len;
        if self
            .zero_fill
            .is_some_and(|z| start < z.start + z.len as u64 && z.start < end)
        {
            // The zeros must land first: wait for the zero fill to complete.
            return None;
        }
        self.next_full = next_full;
        let job = WriteJob {
            id: self.next_id,
            kind: WriteKind::Data,
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
        if let Some(z) = self.zero_fill.filter(|z| z.id == id) {
            self.zero_fill = None;
            self.converted = self.converted.max(z.start + z.len as u64);
            return;
        }
        let w = self
            .inflight
            .iter_mut()
            .find(|w| w.job.id == id)
            .unwrap_or_else(|| panic!("completion of unknown write {id}"));
        w.done = true;
        while self.inflight.front().is_some_and(|w| w.done) {
            let w = self.inflight.pop_front().expect("front exists");
            self.written = self.written.max(w.job.logical_end);
            self.converted = self.converted.max(w.job.start + w.job.len as u64);
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

    /// Nothing in flight (zero fill included) and everything appended written.
    pub fn is_idle(&self) -> bool {
        self.inflight() == 0 && self.written == self.appended
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

    #[test]
    fn zero_fill_converts_ahead_only_while_idle_and_data_waits_for_it() {
        let mut p = WritePlanner::new(0);
        p.on_append(100);
        let d = p.plan().unwrap();
        assert_eq!((d.kind, d.start, d.len), (WriteKind::Data, 0, 4096));
        assert_eq!(
            p.plan(),
            None,
            "no zero fill while a data write is in flight"
        );
        p.complete(d.id);
        let z = p.plan().unwrap();
        assert_eq!(z.kind, WriteKind::ZeroFill);
        assert_eq!(
            (z.start, z.len),
            (4096, ZERO_FILL_WRITE_BYTES),
            "from the block after the data"
        );
        assert_eq!(p.plan(), None, "one zero fill at a time");
        // Data reaching the zero-filled range waits until the zeros have landed.
        p.on_append(10_000);
        assert_eq!(p.plan(), None, "data overlapping the zero fill waits");
        p.complete(z.id);
        assert_eq!(p.converted(), 4096 + ZERO_FILL_WRITE_BYTES as u64);
        let d = p.plan().unwrap();
        assert_eq!(
            (d.kind, d.start, d.logical_end),
            (WriteKind::Data, 0, 10_000)
        );
        p.complete(d.id);
        // Piece after piece while idle, until ZERO_FILL_AHEAD_BYTES past the appended end.
        let mut pieces = 0;
        while let Some(z) = p.plan() {
            assert_eq!((z.kind, z.start), (WriteKind::ZeroFill, p.converted()));
            assert_eq!(p.plan(), None, "one zero fill at a time");
            p.complete(z.id);
            pieces += 1;
        }
        let ahead = p.converted() - align_up(10_000);
        assert!(ahead >= ZERO_FILL_AHEAD_BYTES, "{ahead}");
        assert!(
            ahead < ZERO_FILL_AHEAD_BYTES + ZERO_FILL_WRITE_BYTES as u64,
            "{ahead}"
        );
        assert!(pieces >= 3, "{pieces}");
        // Converted far enough ahead: nothing more to do.
        assert_eq!(p.plan(), None);
        p.on_append(ZERO_FILL_AHEAD_BYTES);
        let d = p.plan().unwrap();
        p.complete(d.id);
        p.stop_zero_fill();
        assert_eq!(p.plan(), None, "no zero fill once closing");
        assert!(p.is_idle());
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
                            if j.kind == WriteKind::ZeroFill {
                                assert!(
                                    j.start >= align_up(p.appended()),
                                    "seed {seed}: zero fill {j:?} over appended data"
                                );
                                assert!(
                                    flying.iter().all(|f| f.kind == WriteKind::ZeroFill),
                                    "seed {seed}: zero fill while data writes are in flight"
                                );
                            }
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
