//! Reading a segment without copying what is sent: a read yields [`ReadSlice`]s, each either a
//! range of the in-memory tail or a `(file, position, length)` range of the segment file opened
//! a second time without O_DIRECT, ready for `sendfile`/`splice`.
//!
//! A [`SegmentView`] is a handle on one segment that can be held across `.await`s while the log
//! goes on appending: it re-checks how far the file is readable and where the tail ends at every
//! call, and never returns bytes past the logical end it sees.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::appender::{align_down, AppenderIo};
use crate::batch::{peek_size, BatchError};
use crate::error::{IoError, ReadError};
use crate::limits::{BATCH_LOG_OVERHEAD, HEADER_SCAN_READ_BYTES};
use crate::tail::MemSlice;
use crate::types::Offset;

/// Bytes to send, described rather than copied.
#[derive(Clone, Debug)]
pub enum ReadSlice {
    /// Recent bytes still in the write buffers.
    Memory(MemSlice),
    /// A range of a segment file, for zero-copy sending.
    File {
        file: Rc<BufferedFile>,
        path: Rc<PathBuf>,
        position: u64,
        len: usize,
    },
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

    /// The file descriptor and position of a file slice (for `sendfile`/`splice`).
    pub fn file_range(&self) -> Option<(RawFd, u64, usize)> {
        match self {
            ReadSlice::File {
                file,
                position,
                len,
                ..
            } => Some((file.as_raw_fd(), *position, *len)),
            ReadSlice::Memory(_) => None,
        }
    }

    /// Copies the bytes out (for tests and for the copying fetch path).
    pub async fn to_vec(&self) -> Result<Vec<u8>, IoError> {
        match self {
            ReadSlice::Memory(m) => Ok(m.as_bytes().to_vec()),
            ReadSlice::File {
                file,
                path,
                position,
                len,
            } => {
                let r = file
                    .read_at(*position, *len)
                    .await
                    .map_err(|e| IoError::new("reading", path.as_path(), e))?;
                if r.len() != *len {
                    let e =
                        std::io::Error::other(format!("short read: {} of {len} bytes", r.len()));
                    return Err(IoError::new("reading", path.as_path(), e));
                }
                Ok(r.to_vec())
            }
        }
    }
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
    pub base_offset: Offset,
    pub path: Rc<PathBuf>,
    pub file: Rc<BufferedFile>,
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
                file: self.file.clone(),
                path: self.path.clone(),
                position: from,
                len: (file_to - from) as usize,
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
        loop {
            let (_, end) = self.live_bounds();
            if position >= end || position >= limit {
                return Ok(None);
            }
            let window_end = (position + HEADER_SCAN_READ_BYTES as u64).min(end);
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
