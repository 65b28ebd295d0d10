//! Offset watermarks of one segment: which batches are wholly written to the segment file and
//! which are durable. The appender counts bytes (`durable <= written <= appended` file
//! positions); acknowledgements and consumers count offsets, and a batch counts only once all
//! of its bytes are in.
//!
//! Contract: `durable_offset <= written_offset <= next_offset`, asserted on every change. A
//! batch is written when the appender's contiguous written prefix covers its last byte; durable
//! when an `fdatasync` issued after that completes (a sync covers what was written when it was
//! issued, so [`SegmentWatermarks::written_offset`] read at issue time is what it makes durable).

use std::collections::VecDeque;

use crate::types::Offset;

/// The offset watermarks of one segment; see the module doc.
#[derive(Debug)]
pub struct SegmentWatermarks {
    written_offset: Offset,
    /// The file position where the batch at `written_offset` starts (after the last written
    /// batch): a read bounded by the written watermark ends here without scanning headers.
    written_position: u64,
    durable_offset: Offset,
    next_offset: Offset,
    /// `(file position after the batch, offset after the batch)` of every batch appended but
    /// not yet written, oldest first. Bounded by the appender's backpressure
    /// (`UNWRITTEN_BYTES_MAX` of unwritten bytes, each batch at least a header).
    unwritten: VecDeque<(u64, Offset)>,
}

impl SegmentWatermarks {
    /// A segment whose batches up to `next_offset` (ending at file position `size`) are all on
    /// disk and durable.
    pub fn new(next_offset: Offset, size: u64) -> SegmentWatermarks {
        SegmentWatermarks {
            written_offset: next_offset,
            written_position: size,
            durable_offset: next_offset,
            next_offset,
            unwritten: VecDeque::new(),
        }
    }

    /// The offset after the last batch wholly written to the file.
    pub fn written_offset(&self) -> Offset {
        self.written_offset
    }

    /// The offset after the last batch made durable by a completed `fdatasync`.
    pub fn durable_offset(&self) -> Offset {
        self.durable_offset
    }

    /// The offset after the last appended batch.
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// The file position where the batch at `offset` starts, if `offset` is the written
    /// watermark (the high watermark on one node); `None` for other offsets.
    pub fn position_of_written(&self, offset: Offset) -> Option<u64> {
        (offset == self.written_offset).then_some(self.written_position)
    }

    fn check(&self) {
        assert!(
            self.durable_offset <= self.written_offset && self.written_offset <= self.next_offset,
            "segment watermarks broken: durable {} <= written {} <= next {}",
            self.durable_offset,
            self.written_offset,
            self.next_offset
        );
    }

    /// A batch ending at file position `byte_end` was appended; `next_offset` follows it.
    pub fn on_append(&mut self, byte_end: u64, next_offset: Offset) {
        assert!(
            next_offset > self.next_offset,
            "appended batch ends at offset {next_offset}, not after {}",
            self.next_offset
        );
        if let Some(&(last_end, _)) = self.unwritten.back() {
            assert!(
                byte_end > last_end,
                "batch ends at byte {byte_end}, not after {last_end}"
            );
        }
        self.unwritten.push_back((byte_end, next_offset));
        self.next_offset = next_offset;
        self.check();
    }

    /// The appender's contiguous written prefix now ends at file position `written_bytes`.
    pub fn on_written(&mut self, written_bytes: u64) {
        while let Some(&(end, next)) = self.unwritten.front() {
            if end > written_bytes {
                break;
            }
            self.unwritten.pop_front();
            self.written_offset = next;
            self.written_position = end;
        }
        self.check();
    }

    /// An `fdatasync` issued when [`SegmentWatermarks::written_offset`] was `synced` completed.
    pub fn on_durable(&mut self, synced: Offset) {
        assert!(
            synced <= self.written_offset,
            "fsync covered offset {synced} beyond written offset {}",
            self.written_offset
        );
        self.durable_offset = self.durable_offset.max(synced);
        self.check();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_batch_counts_only_when_all_its_bytes_are_in() {
        let mut w = SegmentWatermarks::new(Offset(10), 0);
        w.on_append(100, Offset(15));
        w.on_append(250, Offset(16));
        w.on_append(4200, Offset(40));
        w.on_written(99);
        assert_eq!(w.written_offset(), Offset(10));
        w.on_written(250);
        assert_eq!(w.written_offset(), Offset(16));
        assert_eq!(w.position_of_written(Offset(16)), Some(250));
        assert_eq!(w.position_of_written(Offset(15)), None);
        let synced = w.written_offset();
        w.on_written(4200);
        w.on_durable(synced);
        assert_eq!(
            (w.durable_offset(), w.written_offset()),
            (Offset(16), Offset(40))
        );
    }

    #[test]
    #[should_panic(expected = "beyond written offset")]
    fn durable_never_passes_written() {
        let mut w = SegmentWatermarks::new(Offset(0), 0);
        w.on_append(100, Offset(5));
        w.on_durable(Offset(5));
    }

    /// Random appends, partial writes and syncs: the watermarks always name batch boundaries at
    /// or below the bytes written and synced. Seeded; prints the seed on failure.
    #[test]
    fn random_progress_stays_on_batch_boundaries() {
        for seed in 0..100u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut w = SegmentWatermarks::new(Offset(0), 0);
            let mut batches: Vec<(u64, Offset)> = Vec::new();
            let (mut bytes, mut written) = (0u64, 0u64);
            for _ in 0..300 {
                match rng.gen_range(0..3) {
                    0 => {
                        bytes += rng.gen_range(61..5000);
                        let next = Offset(w.next_offset().0 + rng.gen_range(1..10));
                        w.on_append(bytes, next);
                        batches.push((bytes, next));
                    }
                    1 => {
                        written = rng.gen_range(written..=bytes);
                        w.on_written(written);
                        let (position, expect) = batches
                            .iter()
                            .rev()
                            .find(|(end, _)| *end <= written)
                            .map_or((0, Offset(0)), |b| *b);
                        assert_eq!(w.written_offset(), expect, "seed {seed}");
                        assert_eq!(w.position_of_written(expect), Some(position), "seed {seed}");
                    }
                    _ => {
                        let synced = w.written_offset();
                        w.on_durable(synced);
                        assert_eq!(w.durable_offset(), synced, "seed {seed}");
                    }
                }
            }
        }
    }
}
