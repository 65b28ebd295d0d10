//! The in-memory tail of the active segment: the bytes appended but not yet readable from the
//! segment file (not yet written, or in the last, partially written block).
//!
//! Contract:
//! - The tail is a sequence of chunks, each [`TAIL_SMALL_CHUNK_BYTES`] or [`TAIL_CHUNK_BYTES`]
//!   long and starting at a multiple of its own length. A tail starts with small chunks (ten
//!   thousand quiet partitions hold 16 KiB each, not 1 MiB); once a small chunk fills within
//!   [`TAIL_BUSY_FILL`] the tail is busy and takes big chunks from the next 1 MiB boundary on
//!   (whole big chunks are handed to the read cache once written). Bytes are only ever added
//!   after the logical end (`end`), never changed once added. That is what lets a reader hold a
//!   [`MemSlice`] of added bytes while later appends fill the same chunk, and what lets a
//!   chunk's buffer be handed to the kernel for a write of its range without a copy
//!   ([`Tail::write_source`]).
//! - Truncation never rewrites added bytes in place: the surviving prefix of the last chunk is
//!   copied into a fresh chunk, so slices handed out earlier keep their bytes.
//! - Chunks wholly before `release_before` are dropped (their bytes are on disk); readers that
//!   still hold a slice keep the chunk alive through its `Rc`.
//! - A tail idle for [`TAIL_PARK_IDLE`] with everything written is parked: its chunks are
//!   given back and only the partial last block (which the next write rewrites) stays, in a
//!   block-sized chunk, or nothing when the end is block aligned. The next append unparks it
//!   into a small chunk, as a tail made by [`Tail::new`] with that partial block.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ops::Range;
use std::rc::Rc;
use std::time::Instant;

use glommio::io::DmaBuffer;

use crate::limits::{
    DIRECT_IO_ALIGNMENT, TAIL_BUSY_FILL, TAIL_CHUNK_BYTES, TAIL_CHUNK_POOL_MAX, TAIL_PARK_IDLE,
    TAIL_RETAIN_BYTES, TAIL_SMALL_CHUNK_BYTES, TAIL_SMALL_CHUNK_POOL_MAX,
};

thread_local! {
    /// Buffers of dropped chunks, reused so that appends do not page-fault and zero fresh
    /// memory for every megabyte. Bounded by `TAIL_CHUNK_POOL_MAX`.
    static CHUNK_POOL: RefCell<Vec<DmaBuffer>> = const { RefCell::new(Vec::new()) };
    /// The same for small chunks, bounded by `TAIL_SMALL_CHUNK_POOL_MAX`.
    static SMALL_CHUNK_POOL: RefCell<Vec<DmaBuffer>> = const { RefCell::new(Vec::new()) };
}

struct Chunk {
    /// Segment file position of the chunk's first byte (a multiple of its capacity).
    start: u64,
    /// [`TAIL_SMALL_CHUNK_BYTES`] or [`TAIL_CHUNK_BYTES`]; [`DIRECT_IO_ALIGNMENT`] for the
    /// partial block of a parked tail.
    capacity: usize,
    /// When the chunk was started (a small one filled soon after makes the tail busy).
    started: Instant,
    /// Shared with in-flight writes of its ranges; bytes past `filled` are stale (a recycled
    /// buffer) and never read, except as a write's padding, which is zeroed first
    /// ([`Tail::write_source`]). `None` only while being dropped.
    buf: Option<Rc<DmaBuffer>>,
    /// Bytes of `buf` that hold appended data.
    filled: Cell<usize>,
}

impl Chunk {
    fn new(start: u64, capacity: usize) -> Rc<Chunk> {
        debug_assert_eq!(start % capacity as u64, 0);
        // From the reactor's registered I/O arena while it has room (size it with
        // `LocalExecutorBuilder::io_memory`): the kernel then need not pin the pages of every
        // write, about a fifth of the CPU an append costs. Falls back to the heap.
        let buf = pool_of(capacity)
            .and_then(|(pool, _)| pool.with(|p| p.borrow_mut().pop()))
            .unwrap_or_else(|| glommio::allocate_dma_buffer(capacity));
        assert_eq!(buf.len(), capacity, "tail chunk buffer size");
        Rc::new(Chunk {
            start,
            capacity,
            started: Instant::now(),
            buf: Some(Rc::new(buf)),
            filled: Cell::new(0),
        })
    }

    fn end(&self) -> u64 {
        self.start + self.capacity as u64
    }

    fn is_full(&self) -> bool {
        self.filled.get() == self.capacity
    }

    fn buf(&self) -> &Rc<DmaBuffer> {
        self.buf.as_ref().expect("chunk buffer present until drop")
    }

    /// Bytes `[from, to)` of the filled part.
    fn filled_slice(&self, from: usize, to: usize) -> &[u8] {
        assert!(
            from <= to && to <= self.filled.get(),
            "tail chunk at {} read [{from}, {to}) beyond filled {}",
            self.start,
            self.filled.get()
        );
        // SAFETY: the buffer holds `capacity` >= `to` initialised bytes and lives as long
        // as `self`; bytes below `filled` are never written again (append-only contract above),
        // so this shared slice cannot alias a later write. No slice ever covers bytes past
        // `filled`, which is where `push` writes.
        unsafe { std::slice::from_raw_parts(self.buf().as_ptr().add(from), to - from) }
    }

    /// Copies `bytes` after the filled part.
    fn push(&self, bytes: &[u8]) {
        let filled = self.filled.get();
        assert!(
            filled + bytes.len() <= self.capacity,
            "tail chunk overflow: {filled} + {}",
            bytes.len()
        );
        // SAFETY: the buffer's pointer comes from its own heap allocation (DmaBuffer stores a
        // raw pointer, so its provenance allows writes); the destination
        // `[filled, filled + len)` is inside it (asserted above) and lies beyond every slice
        // handed out (those stop at `filled`); the log is single-threaded and `push` is not
        // re-entrant. The kernel may be reading these bytes for an O_DIRECT write in flight
        // (the padding of its last block, see `Tail::write_source`): that write's file bytes
        // past its logical end are then zeros or these, and the next write rewrites the block.
        unsafe {
            let dst = (self.buf().as_ptr() as *mut u8).add(filled);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
        }
        self.filled.set(filled + bytes.len());
    }

    /// Zeroes the bytes from `filled` up to `to` (no more than the capacity): the padding of a
    /// write of the last, partial block, which must not carry a recycled buffer's stale bytes
    /// (another partition's batches, say) into the file.
    fn zero_past_filled(&self, to: usize) {
        let filled = self.filled.get();
        if to <= filled {
            return;
        }
        assert!(
            to <= self.capacity,
            "zeroing to {to} past a chunk of {}",
            self.capacity
        );
        // SAFETY: as for `push`: `[filled, to)` is inside the buffer and beyond every slice
        // handed out, and no write in flight covers it (the planner writes a partial last
        // block only when no data write is in flight).
        unsafe {
            let dst = (self.buf().as_ptr() as *mut u8).add(filled);
            std::ptr::write_bytes(dst, 0, to - filled);
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        let Some(buf) = self.buf.take() else { return };
        // A write still in flight or the read cache holds another reference; then whoever
        // drops it last frees or recycles it.
        if let Ok(buf) = Rc::try_unwrap(buf) {
            recycle_chunk_buffer(buf);
        }
    }
}

type Pool = std::thread::LocalKey<RefCell<Vec<DmaBuffer>>>;

/// The pool of buffers of `capacity` bytes and its bound; `None` for other sizes.
fn pool_of(capacity: usize) -> Option<(&'static Pool, usize)> {
    match capacity {
        TAIL_CHUNK_BYTES => Some((&CHUNK_POOL, TAIL_CHUNK_POOL_MAX)),
        TAIL_SMALL_CHUNK_BYTES => Some((&SMALL_CHUNK_POOL, TAIL_SMALL_CHUNK_POOL_MAX)),
        _ => None,
    }
}

/// Gives a chunk-sized buffer no one else holds to this thread's pool (or frees it).
pub fn recycle_chunk_buffer(buf: DmaBuffer) {
    let Some((pool, max)) = pool_of(buf.len()) else {
        return;
    };
    pool.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < max {
            pool.push(buf);
        }
    });
}

/// A read-only view of appended tail bytes; keeps its chunk alive.
#[derive(Clone)]
pub struct MemSlice {
    chunk: Rc<Chunk>,
    from: usize,
    to: usize,
}

impl MemSlice {
    pub fn as_bytes(&self) -> &[u8] {
        self.chunk.filled_slice(self.from, self.to)
    }

    pub fn len(&self) -> usize {
        self.to - self.from
    }

    pub fn is_empty(&self) -> bool {
        self.from == self.to
    }

    /// Segment file position of the first byte.
    pub fn position(&self) -> u64 {
        self.chunk.start + self.from as u64
    }
}

impl std::fmt::Debug for MemSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemSlice(position {}, {} bytes)",
            self.position(),
            self.len()
        )
    }
}

/// The chunks of the active segment's tail.
pub struct Tail {
    chunks: VecDeque<Rc<Chunk>>,
    /// First file position the tail can serve (bytes before it in the first chunk are padding).
    valid_from: u64,
    /// Logical end: file position after the last appended byte.
    end: u64,
    /// Appends come fast enough for big chunks (see the module doc).
    busy: bool,
    /// When the last append came (or the tail was made).
    last_push: Instant,
}

impl Tail {
    /// An empty tail whose next byte goes at file position `end`; the bytes of the partial
    /// block before `end` (if any) must be supplied as `partial_block`, which starts at a block
    /// boundary.
    ///
    /// With no partial block the tail holds no chunk until the first append: a partition that
    /// is never written to costs no chunk (ten thousand of them would otherwise hold 10 GiB).
    pub fn new(end: u64, partial_block: &[u8]) -> Tail {
        let block_start = end - partial_block.len() as u64;
        let mut tail = Tail {
            chunks: VecDeque::new(),
            valid_from: block_start,
            end: block_start,
            busy: false,
            last_push: Instant::now(),
        };
        if !partial_block.is_empty() {
            tail.start_chunk();
            tail.push(partial_block);
        }
        tail
    }

    /// Starts the chunk holding the logical end, when the tail holds none. Bytes of the chunk
    /// before the end are on disk; the chunk keeps its layout by position and marks them
    /// filled with bytes that are never served (reads start at or after `first_position`, and
    /// writes only copy from there).
    fn start_chunk(&mut self) {
        debug_assert!(self.chunks.is_empty());
        let capacity = self.next_capacity(self.end);
        let chunk_start = self.end - self.end % capacity as u64;
        let chunk = Chunk::new(chunk_start, capacity);
        chunk.filled.set((self.end - chunk_start) as usize);
        self.chunks.push_back(chunk);
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    /// The capacity of a chunk started at `position`: big once busy, from a 1 MiB boundary on.
    fn next_capacity(&self, position: u64) -> usize {
        if self.busy && position.is_multiple_of(TAIL_CHUNK_BYTES as u64) {
            TAIL_CHUNK_BYTES
        } else {
            TAIL_SMALL_CHUNK_BYTES
        }
    }

    /// Whether the tail takes big chunks.
    pub fn is_busy(&self) -> bool {
        self.busy
    }

    /// Takes big chunks from the start (the segment rolled from a busy one): a busy
    /// partition's segments are cached and written whole from their first megabyte.
    pub fn mark_busy(&mut self) {
        self.busy = true;
    }

    /// Appends bytes at the logical end.
    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.last_push = Instant::now();
        self.unpark();
        if self.chunks.is_empty() {
            self.start_chunk();
        }
        self.push_bytes(bytes);
    }

    /// Appends bytes after the last chunk's filled part (there is a chunk).
    fn push_bytes(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let last = self.chunks.back().expect("tail has a chunk");
            let room = last.capacity - last.filled.get();
            if room == 0 {
                if last.capacity < TAIL_CHUNK_BYTES && last.started.elapsed() < TAIL_BUSY_FILL {
                    self.busy = true;
                }
                let start = last.end();
                let next = Chunk::new(start, self.next_capacity(start));
                self.chunks.push_back(next);
                continue;
            }
            let n = room.min(bytes.len());
            last.push(&bytes[..n]);
            self.end += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// Copies `[from, to)` into `dst`, which must be `to - from` long. Used to fill write
    /// buffers.
    pub fn copy_out(&self, from: u64, to: u64, dst: &mut [u8]) {
        assert_eq!(dst.len() as u64, to - from, "copy_out destination size");
        let mut at = from;
        for slice in self.slices(from, to) {
            let n = slice.len();
            let o = (at - from) as usize;
            dst[o..o + n].copy_from_slice(slice.as_bytes());
            at += n as u64;
        }
        assert_eq!(at, to, "tail does not hold [{from}, {to})");
    }

    /// Views of the appended bytes `[from, to)`, one per chunk crossed.
    pub fn slices(&self, from: u64, to: u64) -> Vec<MemSlice> {
        assert!(
            from >= self.first_position() && to <= self.end && from <= to,
            "tail holds [{}, {}), asked [{from}, {to})",
            self.first_position(),
            self.end
        );
        let mut out = Vec::new();
        for chunk in &self.chunks {
            let c_end = chunk.start + chunk.filled.get() as u64;
            if c_end <= from || chunk.start >= to {
                continue;
            }
            let a = from.max(chunk.start) - chunk.start;
            let b = to.min(c_end) - chunk.start;
            out.push(MemSlice {
                chunk: chunk.clone(),
                from: a as usize,
                to: b as usize,
            });
        }
        out
    }

    /// The buffer of the chunk holding file range `[start, start + len)` and the range's place
    /// in it, for a write straight from the tail, without a copy: a full chunk, or appended
    /// bytes and the padding to the end of their last block, which is zeroed here (appends
    /// may fill it while the write is in flight; see `Chunk::push`). `None` when the range is
    /// not inside one chunk or starts before [`Tail::first_position`].
    pub fn write_source(&self, start: u64, len: usize) -> Option<(Rc<DmaBuffer>, Range<usize>)> {
        let end = start + len as u64;
        if start < self.valid_from {
            return None;
        }
        let chunk = self
            .chunks
            .iter()
            .find(|c| c.start <= start && end <= c.end())?;
        let range = (start - chunk.start) as usize..(end - chunk.start) as usize;
        chunk.zero_past_filled(range.end);
        Some((chunk.buf().clone(), range))
    }

    /// Whether the bytes at `position` are in a 1 MiB chunk (a busy partition's, written
    /// O_DIRECT) rather than a small one or a parked block (a quiet partition's, written through
    /// the page cache; see `segment_io`). A write never crosses a chunk, so its start decides.
    pub fn in_big_chunk(&self, position: u64) -> bool {
        self.chunks
            .iter()
            .find(|c| c.start <= position && position < c.end())
            .is_some_and(|c| c.capacity == TAIL_CHUNK_BYTES)
    }

    /// First file position whose bytes the tail still holds.
    pub fn first_position(&self) -> u64 {
        self.valid_from
    }

    /// Drops chunks that end at or before `position` (their bytes are readable from the file),
    /// keeping at least the last chunk, and a small chunk until [`TAIL_RETAIN_BYTES`] more are
    /// written after it: consumers a little behind a quiet partition's head read memory, not
    /// the device (small chunks do not go to the read cache). Returns `(start, buffer)` of each
    /// full big chunk dropped, for the read cache (whose chunks are [`TAIL_CHUNK_BYTES`]).
    pub fn release_before(&mut self, position: u64) -> Vec<(u64, Rc<DmaBuffer>)> {
        let mut released = Vec::new();
        while self.chunks.len() > 1 {
            let first = &self.chunks[0];
            let retain = if first.capacity < TAIL_CHUNK_BYTES {
                TAIL_RETAIN_BYTES
            } else {
                0
            };
            if first.end() + retain <= position {
                let chunk = self.chunks.pop_front().expect("a first chunk");
                if chunk.capacity == TAIL_CHUNK_BYTES
                    && chunk.is_full()
                    && chunk.start >= self.valid_from
                {
                    released.push((chunk.start, chunk.buf().clone()));
                }
                self.valid_from = self.valid_from.max(self.chunks[0].start);
            } else {
                break;
            }
        }
        released
    }

    /// Parks the tail if no append came for [`TAIL_PARK_IDLE`] before `now` and every
    /// appended byte is `written` (see the module doc); returns whether it gave back memory.
    pub fn park_if_idle(&mut self, written: u64, now: Instant) -> bool {
        if written < self.end
            || now.saturating_duration_since(self.last_push) < TAIL_PARK_IDLE
            || self.is_parked()
            || self.chunks.is_empty()
        {
            return false;
        }
        let block_start = self.end - self.end % DIRECT_IO_ALIGNMENT as u64;
        if block_start < self.first_position() {
            return false;
        }
        let block = Chunk::new(block_start, DIRECT_IO_ALIGNMENT);
        for slice in self.slices(block_start, self.end) {
            block.push(slice.as_bytes());
        }
        self.chunks.clear();
        if block.filled.get() > 0 {
            self.chunks.push_back(block);
        }
        self.valid_from = block_start;
        self.busy = false;
        true
    }

    /// Whether the tail holds just a parked partial block.
    fn is_parked(&self) -> bool {
        self.chunks.len() == 1 && self.chunks[0].capacity == DIRECT_IO_ALIGNMENT
    }

    /// Moves a parked partial block into a small chunk, before an append.
    fn unpark(&mut self) {
        if !self.is_parked() {
            return;
        }
        let block = self.chunks.pop_front().expect("a parked block");
        self.end = block.start;
        self.start_chunk();
        self.push_bytes(block.filled_slice(0, block.filled.get()));
    }

    /// Bytes of memory the tail's chunks take.
    pub fn held_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity).sum()
    }

    #[cfg(test)]
    /// Cuts the tail back to logical end `end`, copying the surviving part of the last chunk
    /// into a fresh chunk so that slices already handed out stay unchanged.
    pub fn truncate(&mut self, end: u64) {
        assert!(
            end <= self.end,
            "truncate to {end} beyond tail end {}",
            self.end
        );
        assert!(
            end >= self.first_position(),
            "truncate below the tail start"
        );
        while let Some(last) = self.chunks.back() {
            if last.start >= end && self.chunks.len() > 1 {
                self.chunks.pop_back();
            } else {
                break;
            }
        }
        let Some(last) = self.chunks.pop_back() else {
            // No chunk: nothing appended since the tail was made, `end` is its end.
            return;
        };
        let keep = (end - last.start) as usize;
        let fresh = Chunk::new(last.start, last.capacity);
        fresh.push(last.filled_slice(0, keep));
        self.chunks.push_back(fresh);
        self.end = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tail chunks come from the reactor's I/O arena: run inside an executor.
    fn on_executor(f: impl FnOnce() + 'static) {
        glommio::LocalExecutor::default().run(async move { f() });
    }

    #[test]
    fn a_write_source_is_the_chunk_itself_with_its_padding_zeroed() {
        on_executor(|| {
            // The first chunk gets a recycled buffer full of stale bytes.
            let mut stale = glommio::allocate_dma_buffer(TAIL_SMALL_CHUNK_BYTES);
            stale.as_bytes_mut().fill(0xAB);
            recycle_chunk_buffer(stale);
            let mut t = Tail::new(0, &[]);
            t.push(&[7; 5000]);
            let (buf, range) = t.write_source(0, 8192).expect("inside the first chunk");
            assert_eq!(range, 0..8192);
            let bytes = &buf.as_bytes()[range];
            assert!(bytes[..5000].iter().all(|&b| b == 7), "appended bytes");
            assert!(
                bytes[5000..].iter().all(|&b| b == 0),
                "the padding is zeroed, not the recycled buffer's bytes"
            );
            // Appends after it land in that same buffer (no copy was made).
            t.push(&[9; 100]);
            assert!(buf.as_bytes()[5000..5100].iter().all(|&b| b == 9));
            // A range across two chunks, or before the tail's first position: none.
            t.push(&vec![1; TAIL_SMALL_CHUNK_BYTES]);
            let at = TAIL_SMALL_CHUNK_BYTES as u64 - 4096;
            assert!(t.write_source(at, 8192).is_none());
            let mut reopened = Tail::new(4096 + 10, &[3; 10]);
            reopened.push(&[4; 10]);
            assert!(reopened.write_source(0, 8192).is_none());
            assert!(reopened.write_source(4096, 4096).is_some());
        });
    }

    #[test]
    fn slices_survive_later_pushes_and_truncation() {
        on_executor(slices_survive_later_pushes_and_truncation_body);
    }

    fn slices_survive_later_pushes_and_truncation_body() {
        let mut t = Tail::new(0, &[]);
        let data: Vec<u8> = (0..3 * TAIL_CHUNK_BYTES as u32 / 2)
            .map(|i| i as u8)
            .collect();
        t.push(&data[..1000]);
        let s = t.slices(0, 1000);
        t.push(&data[1000..]);
        assert_eq!(s[0].as_bytes(), &data[..1000]);
        let all = t.slices(0, data.len() as u64);
        let joined: Vec<u8> = all.iter().flat_map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(joined, data);
        let mut out = vec![0; data.len()];
        t.copy_out(0, data.len() as u64, &mut out);
        assert_eq!(out, data);
        let before = t.slices(10, 500);
        t.truncate(100);
        t.push(&[0xff; 1000]);
        assert_eq!(before[0].as_bytes(), &data[10..500]);
        assert_eq!(t.slices(100, 101)[0].as_bytes(), &[0xff]);
    }

    #[test]
    fn starts_mid_chunk_with_partial_block() {
        on_executor(starts_mid_chunk_with_partial_block_body);
    }

    fn starts_mid_chunk_with_partial_block_body() {
        let mut t = Tail::new(4096 * 3 + 10, &[7; 10]);
        assert_eq!(t.first_position(), 4096 * 3);
        t.push(&[8; 5]);
        assert_eq!(
            t.slices(4096 * 3, 4096 * 3 + 15)[0].as_bytes()[..11],
            [7; 10].iter().chain(&[8]).copied().collect::<Vec<_>>()[..]
        );
        t.release_before(TAIL_CHUNK_BYTES as u64 * 5);
        assert_eq!(t.first_position(), 4096 * 3, "last chunk is kept");
    }

    #[test]
    fn a_quiet_tail_keeps_small_chunks_and_a_busy_one_goes_big_at_a_boundary() {
        on_executor(|| {
            let mut quiet = Tail::new(0, &[]);
            quiet.push(&[1; 100]);
            std::thread::sleep(TAIL_BUSY_FILL);
            quiet.push(&vec![2; TAIL_SMALL_CHUNK_BYTES]);
            assert!(
                !quiet.is_busy(),
                "a chunk filled slower than TAIL_BUSY_FILL"
            );
            assert!(quiet
                .chunks
                .iter()
                .all(|c| c.capacity == TAIL_SMALL_CHUNK_BYTES));

            let mut busy = Tail::new(0, &[]);
            let data: Vec<u8> = (0..2 * TAIL_CHUNK_BYTES + 5000)
                .map(|i| (i % 251) as u8)
                .collect();
            busy.push(&data);
            assert!(busy.is_busy());
            let caps: Vec<(u64, usize)> =
                busy.chunks.iter().map(|c| (c.start, c.capacity)).collect();
            // Small chunks up to the first 1 MiB boundary, big ones from there.
            assert!(caps[..TAIL_CHUNK_BYTES / TAIL_SMALL_CHUNK_BYTES]
                .iter()
                .all(|&(_, c)| c == TAIL_SMALL_CHUNK_BYTES));
            assert_eq!(
                &caps[TAIL_CHUNK_BYTES / TAIL_SMALL_CHUNK_BYTES..],
                &[
                    (TAIL_CHUNK_BYTES as u64, TAIL_CHUNK_BYTES),
                    (2 * TAIL_CHUNK_BYTES as u64, TAIL_CHUNK_BYTES)
                ]
            );
            let mut out = vec![0; data.len()];
            busy.copy_out(0, data.len() as u64, &mut out);
            assert_eq!(out, data);
            let (_, whole) = busy
                .write_source(TAIL_CHUNK_BYTES as u64, TAIL_CHUNK_BYTES)
                .expect("a full big chunk");
            assert_eq!(whole, 0..TAIL_CHUNK_BYTES);
            // Only full big chunks go to the read cache; small ones are just dropped.
            let released = busy.release_before(2 * TAIL_CHUNK_BYTES as u64);
            assert_eq!(
                released.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                [TAIL_CHUNK_BYTES as u64]
            );
            assert_eq!(busy.first_position(), 2 * TAIL_CHUNK_BYTES as u64);
        });
    }

    /// An idle, written tail keeps only its partial block (4 KiB), serves the same bytes, and
    /// takes appends after it as if just opened; a block-aligned end keeps nothing. A tail
    /// with unwritten bytes, or appended to recently, is not parked.
    #[test]
    fn an_idle_written_tail_is_parked_down_to_its_partial_block() {
        on_executor(|| {
            let later = || Instant::now() + TAIL_PARK_IDLE;
            let mut t = Tail::new(0, &[]);
            let data: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
            t.push(&data);
            assert!(!t.park_if_idle(39_000, later()), "bytes not written yet");
            assert!(!t.park_if_idle(40_000, Instant::now()), "not idle");
            let held = t.slices(36_864, 40_000);
            t.release_before(32_768);
            assert_eq!(t.held_bytes(), 2 * TAIL_SMALL_CHUNK_BYTES);
            assert!(t.park_if_idle(40_000, later()));
            assert_eq!(t.held_bytes(), DIRECT_IO_ALIGNMENT);
            assert_eq!(t.first_position(), 36_864, "the partial block's start");
            assert!(
                !t.park_if_idle(40_000, later() + TAIL_PARK_IDLE),
                "parked once"
            );
            let served: Vec<u8> = t
                .slices(36_864, 40_000)
                .iter()
                .flat_map(|s| s.as_bytes().to_vec())
                .collect();
            assert_eq!(served, &data[36_864..]);
            let more: Vec<u8> = (0..30_000u32).map(|i| (i % 7) as u8).collect();
            t.push(&more);
            assert_eq!(
                held.iter().map(|s| s.len()).sum::<usize>(),
                3136,
                "old slices live on"
            );
            assert!(t
                .chunks
                .iter()
                .all(|c| c.capacity == TAIL_SMALL_CHUNK_BYTES));
            let mut out = vec![0; 3136 + more.len()];
            t.copy_out(36_864, 70_000, &mut out);
            assert_eq!(&out[..3136], &data[36_864..]);
            assert_eq!(&out[3136..], &more[..]);
            // Block-aligned end: nothing kept; the next append starts a chunk there.
            let mut aligned = Tail::new(0, &[]);
            aligned.push(&data[..8192]);
            assert!(aligned.park_if_idle(8192, later()));
            assert_eq!(aligned.held_bytes(), 0);
            aligned.push(b"xyz");
            assert_eq!(aligned.slices(8192, 8195)[0].as_bytes(), b"xyz");
            // A parked tail truncated keeps its block layout.
            assert!(t.park_if_idle(70_000, Instant::now() + 2 * TAIL_PARK_IDLE));
            t.truncate(69_700);
            t.push(b"after");
            let mut tail_end = vec![0; 5];
            t.copy_out(69_700, 69_705, &mut tail_end);
            assert_eq!(tail_end, b"after");
        });
    }

    #[test]
    fn an_unwritten_tail_holds_no_chunk() {
        on_executor(|| {
            let end = 3 * TAIL_CHUNK_BYTES as u64 + 8192;
            let mut t = Tail::new(end, &[]);
            assert!(t.chunks.is_empty(), "no chunk before the first append");
            assert!(t.slices(end, end).is_empty());
            t.truncate(end);
            assert!(t.chunks.is_empty());
            t.push(b"abc");
            assert_eq!(t.chunks.len(), 1);
            assert_eq!(t.chunks[0].start, 3 * TAIL_CHUNK_BYTES as u64);
            assert_eq!(t.slices(end, end + 3)[0].as_bytes(), b"abc");
            assert_eq!(t.end(), end + 3);
        });
    }
}
