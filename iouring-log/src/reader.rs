//! Reading a segment without copying what is sent: a read yields [`ReadSlice`]s, each either a
//! range of the in-memory tail or a range of the segment file, read through the shard's read
//! cache (whole chunks, on io_uring: never on a helper thread).
//!
//! A [`SegmentView`] is a handle on one segment that can be held across `.await`s while the log
//! goes on appending: it re-checks how far the file is readable and where the tail ends at every
//! call, and never returns bytes past the logical end it sees.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use crate::appender::{align_down, AppenderIo};
use crate::batch::{peek_size, BatchError};
use crate::error::{IoError, ReadError};
use crate::limits::{BATCH_LOG_OVERHEAD, HEADER_SCAN_FIRST_BYTES, HEADER_SCAN_READ_BYTES};
use crate::read_cache::{self, CachedChunk, CachedSegment, CHUNK};
use crate::tail::MemSlice;
use crate::types::Offset;

/// Bytes to send, described rather than copied.
#[derive(Clone)]
pub enum ReadSlice {
    /// Recent bytes still in the write buffers.
    Memory(MemSlice),
    /// A range of a segment file, read through the read cache.
    File {
        segment: Rc<CachedSegment>,
        position: u64,
        len: usize,
        /// File bytes before this position were final when the slice was made (the segment's
        /// size once sealed; the written, released part of the active one).
        final_end: u64,
    },
}

impl std::fmt::Debug for ReadSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadSlice::Memory(m) => m.fmt(f),
            ReadSlice::File {
                segment,
                position,
                len,
                ..
            } => write!(
                f,
                "File({}, position {position}, {len} bytes)",
                segment.path().display()
            ),
        }
    }
}

/// A part of a cached chunk: the bytes of a file slice that lie in one chunk.
pub struct ChunkPiece {
    chunk: Rc<CachedChunk>,
    from: usize,
    to: usize,
}

impl ChunkPiece {
    pub fn as_bytes(&self) -> &[u8] {
        self.chunk.bytes(self.from, self.to)
    }
}

impl ReadSlice {
    pub fn len(&self) -> usize {
        match self {
            ReadSlice::Memory(m) => m.len(),
            ReadSlice::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes come from the segment file (not the in-memory tail).
    pub fn is_file(&self) -> bool {
        matches!(self, ReadSlice::File { .. })
    }

    /// Starts reading every chunk a file slice covers, all at once (each a task of the shard,
    /// so they are in flight together), and reads ahead past its end. Await the tasks in order
    /// for the bytes. Empty for a memory slice.
    pub fn start_reads(&self) -> Vec<PieceRead> {
        let ReadSlice::File { segment, .. } = self else {
            return Vec::new();
        };
        self.pieces()
            .map(|piece| {
                let segment = segment.clone();
                glommio::spawn_local(async move { read_piece(&segment, piece).await }).detach()
            })
            .collect()
    }

    /// Copies the bytes out (for tests, header scans and the copying paths), the chunks one
    /// after the other on the calling task.
    pub async fn to_vec(&self) -> Result<Vec<u8>, IoError> {
        match self {
            ReadSlice::Memory(m) => Ok(m.as_bytes().to_vec()),
            ReadSlice::File { segment, .. } => {
                let mut out = Vec::with_capacity(self.len());
                for piece in self.pieces() {
                    out.extend_from_slice(read_piece(segment, piece).await?.as_bytes());
                }
                Ok(out)
            }
        }
    }

    /// The chunk pieces a file slice covers (none for a memory slice); starts the read-ahead
    /// past its end.
    fn pieces(&self) -> impl Iterator<Item = PieceRange> {
        let (from, to, final_end) = match self {
            ReadSlice::File {
                segment,
                position,
                len,
                final_end,
            } => {
                let to = *position + *len as u64;
                if *final_end > to && *len > 0 {
                    read_cache::read_ahead(segment, (to - 1) / CHUNK as u64, *final_end);
                }
                (*position, to, *final_end)
            }
            ReadSlice::Memory(_) => (0, 0, 0),
        };
        let chunk = CHUNK as u64;
        (from / chunk..to.div_ceil(chunk)).map(move |index| {
            let chunk_start = index * chunk;
            let to_in_chunk = ((chunk_start + chunk).min(to) - chunk_start) as usize;
            PieceRange {
                index,
                from: (from.max(chunk_start) - chunk_start) as usize,
                to: to_in_chunk,
                final_len: (final_end.saturating_sub(chunk_start).min(chunk) as usize)
                    .max(to_in_chunk),
            }
        })
    }
}

/// The bytes `[from, to)` of chunk `index` of a segment, `final_len` of whose bytes are final.
#[derive(Clone, Copy)]
struct PieceRange {
    index: u64,
    from: usize,
    to: usize,
    final_len: usize,
}

async fn read_piece(segment: &Rc<CachedSegment>, r: PieceRange) -> Result<ChunkPiece, IoError> {
    let chunk = read_cache::chunk(segment, r.index, (r.from, r.to), r.final_len).await?;
    Ok(ChunkPiece {
        chunk,
        from: r.from,
        to: r.to,
    })
}

/// One of [`ReadSlice::start_reads`]'s tasks.
pub type PieceRead = glommio::task::JoinHandle<Result<ChunkPiece, IoError>>;

/// The result of one of [`ReadSlice::start_reads`]'s tasks.
pub async fn await_piece(read: PieceRead) -> Result<ChunkPiece, IoError> {
    piece_result(read.await)
}

/// The result of one of [`ReadSlice::start_reads`]'s tasks if it is done (without waiting);
/// the task back if it is not.
pub async fn try_piece(mut read: PieceRead) -> Result<Result<ChunkPiece, IoError>, PieceRead> {
    match futures_lite::future::poll_once(&mut read).await {
        Some(done) => Ok(piece_result(done)),
        None => Err(read),
    }
}

fn piece_result(done: Option<Result<ChunkPiece, IoError>>) -> Result<ChunkPiece, IoError> {
    done.unwrap_or_else(|| {
        Err(IoError::new(
            "reading",
            std::path::Path::new("(segment)"),
            std::io::Error::other("read task cancelled"),
        ))
    })
}

/// Copies all slices into one buffer.
pub async fn read_slices_to_vec(slices: &[ReadSlice]) -> Result<Vec<u8>, IoError> {
    let mut out = Vec::with_capacity(slices.iter().map(ReadSlice::len).sum());
    for s in slices {
        out.extend_from_slice(&s.to_vec().await?);
    }
    Ok(out)
}

/// A handle on one segment's bytes, safe to hold across awaits.
#[derive(Clone)]
pub struct SegmentView {
    pub path: Rc<PathBuf>,
    pub cached: Rc<CachedSegment>,
    /// Logical size when the view was taken (sealed segments never change).
    pub size: u64,
    /// The active segment's appender state; `None` once sealed.
    pub io: Option<Rc<RefCell<AppenderIo>>>,
}

/// A batch found by scanning headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundBatch {
    pub position: u64,
    pub size_bytes: u32,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

impl SegmentView {
    /// `(end of the bytes served from the file, logical end)` right now. Bytes the tail still
    /// holds are served from memory even when they are already written: O_DIRECT writes bypass
    /// the page cache, so reading them back from the file would go to the device, and a
    /// consumer at the head of the log would pay a disk read and a blocking-pool hop per fetch.
    fn live_bounds(&self) -> (u64, u64) {
        match &self.io {
            None => (self.size, self.size),
            Some(io) => {
                let io = io.borrow();
                let end = io.tail.end();
                let file_end = align_down(io.planner.written()).min(io.tail.first_position());
                (file_end.min(end), end)
            }
        }
    }

    /// Slices for `[from, to)`, clamped to the live logical end.
    pub fn slices(&self, from: u64, to: u64) -> Vec<ReadSlice> {
        let (file_end, end) = self.live_bounds();
        let to = to.min(end);
        let mut out = Vec::new();
        if from >= to {
            return out;
        }
        let file_to = to.min(file_end);
        if from < file_to {
            out.push(ReadSlice::File {
                segment: self.cached.clone(),
                position: from,
                len: (file_to - from) as usize,
                final_end: file_end,
            });
        }
        let mem_from = from.max(file_end);
        if mem_from < to {
            let io = self
                .io
                .as_ref()
                .expect("bytes past the file end are in the tail")
                .borrow();
            out.extend(
                io.tail
                    .slices(mem_from, to)
                    .into_iter()
                    .map(ReadSlice::Memory),
            );
        }
        out
    }

    /// The file position where the batch at `offset` starts, if `offset` is this (active or
    /// sealing) segment's written watermark.
    pub fn position_of_written(&self, offset: Offset) -> Option<u64> {
        self.io
            .as_ref()
            .and_then(|io| io.borrow().watermarks.position_of_written(offset))
    }

    /// Copies `[from, to)` (clamped to the live end) for header scanning.
    pub async fn copy_bytes(&self, from: u64, to: u64) -> Result<Vec<u8>, ReadError> {
        let slices = self.slices(from, to);
        Ok(read_slices_to_vec(&slices).await?)
    }

    /// Walks batch headers from `position` (a batch boundary) and returns the first batch whose
    /// last offset is `>= target`, or `None` if the segment ends first.
    pub async fn find_batch(
        &self,
        position: u64,
        target: Offset,
    ) -> Result<Option<FoundBatch>, ReadError> {
        self.find_batch_before(position, target, u64::MAX).await
    }

    /// [`SegmentView::find_batch`], giving up (`None`) at file position `limit`.
    pub async fn find_batch_before(
        &self,
        mut position: u64,
        target: Offset,
        limit: u64,
    ) -> Result<Option<FoundBatch>, ReadError> {
        const LAST_OFFSET_DELTA_END: usize = 27;
        let mut window = HEADER_SCAN_FIRST_BYTES;
        loop {
            let (_, end) = self.live_bounds();
            if position >= end || position >= limit {
                return Ok(None);
            }
            let window_end = (position + window as u64).min(end);
            window = (window * 2).min(HEADER_SCAN_READ_BYTES);
            let bytes = self.copy_bytes(position, window_end).await?;
            let mut at = 0usize;
            while at + LAST_OFFSET_DELTA_END <= bytes.len() {
                if position + at as u64 >= limit {
                    return Ok(None);
                }
                let (base, size) = peek_size(&bytes[at..])
                    .map_err(|source| self.corrupt(position + at as u64, source))?;
                let delta =
                    i32::from_be_bytes(bytes[at + 23..at + 27].try_into().expect("4 bytes"));
                let last = Offset(base.0 + i64::from(delta.max(0)));
                if last >= target {
                    return Ok(Some(FoundBatch {
                        position: position + at as u64,
                        size_bytes: size,
                        base_offset: base,
                        last_offset: last,
                    }));
                }
                at += size as usize;
            }
            if at == 0 && bytes.len() < BATCH_LOG_OVERHEAD.max(LAST_OFFSET_DELTA_END) {
                // A torn header at the live end: nothing more to find.
                return Ok(None);
            }
            position += at as u64;
        }
    }

    fn corrupt(&self, position: u64, source: BatchError) -> ReadError {
        ReadError::Corrupt {
            path: self.path.as_ref().clone(),
            position,
            source,
        }
    }
}
