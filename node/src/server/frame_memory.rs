//! The memory request frames live in. A large frame (a produce request, usually) is read from
//! the socket straight into its own 4 KiB-aligned buffer, taken from a per-thread pool of
//! power-of-two sizes, so its records are copied once (into the log's tail) and the kernel
//! copies into aligned memory; a small frame is copied out of the connection's read buffer.
//! Either way the frame holds its [`BudgetPermit`] until the last `Bytes` pointing into it is
//! dropped, so the request budget counts exactly the memory requests keep alive.

use std::cell::RefCell;

use bytes::Bytes;
use iouring_log::AlignedBuf;

use crate::limits::{FRAME_POOL_BUFFER_MAX_BYTES, FRAME_POOL_BYTES_MAX, LARGE_FRAME_MIN_BYTES};
use crate::server::budget::BudgetPermit;

/// The bytes of one frame and the budget they hold.
struct FrameMemory {
    memory: Memory,
    len: usize,
    _permit: BudgetPermit,
}

enum Memory {
    Small(Vec<u8>),
    Pooled(AlignedBuf),
}

impl AsRef<[u8]> for FrameMemory {
    fn as_ref(&self) -> &[u8] {
        match &self.memory {
            Memory::Small(v) => &v[..self.len],
            Memory::Pooled(b) => &b.as_slice()[..self.len],
        }
    }
}

impl Drop for FrameMemory {
    fn drop(&mut self) {
        if let Memory::Pooled(b) = std::mem::replace(&mut self.memory, Memory::Small(Vec::new())) {
            give_back(b);
        }
    }
}

/// The bytes a frame of `len` bytes holds while alive: what the budget is charged.
pub fn frame_bytes(len: usize) -> usize {
    if len < LARGE_FRAME_MIN_BYTES {
        len
    } else {
        pooled_capacity(len)
    }
}

/// A small frame: a copy of `bytes`.
pub fn small_frame(bytes: &[u8], permit: BudgetPermit) -> Bytes {
    debug_assert!(bytes.len() < LARGE_FRAME_MIN_BYTES);
    Bytes::from_owner(FrameMemory {
        len: bytes.len(),
        memory: Memory::Small(bytes.to_vec()),
        _permit: permit,
    })
}

/// A large frame being read: its pooled buffer and how much of it is filled.
pub struct LargeFrame {
    buf: AlignedBuf,
    len: usize,
    filled: usize,
}

impl LargeFrame {
    pub fn new(len: usize) -> LargeFrame {
        debug_assert!(len >= LARGE_FRAME_MIN_BYTES);
        LargeFrame {
            buf: take(pooled_capacity(len)),
            len,
            filled: 0,
        }
    }

    /// The part not read yet.
    pub fn unfilled(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut_slice()[self.filled..self.len]
    }

    /// Copies `bytes` (already read) into the unfilled part; returns how many fitted.
    pub fn put(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.len - self.filled);
        self.unfilled()[..n].copy_from_slice(&bytes[..n]);
        self.filled += n;
        n
    }

    pub fn advance(&mut self, n: usize) {
        self.filled += n;
        debug_assert!(self.filled <= self.len);
    }

    pub fn is_full(&self) -> bool {
        self.filled == self.len
    }

    pub fn finish(self, permit: BudgetPermit) -> Bytes {
        debug_assert!(self.is_full());
        Bytes::from_owner(FrameMemory {
            memory: Memory::Pooled(self.buf),
            len: self.len,
            _permit: permit,
        })
    }
}

/// Buffers of one thread not in use, by size class (index = log2 of the capacity).
#[derive(Default)]
struct Pool {
    free: Vec<Vec<AlignedBuf>>,
    bytes: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::default();
}

fn pooled_capacity(len: usize) -> usize {
    len.next_power_of_two().max(LARGE_FRAME_MIN_BYTES)
}

/// A zeroed (fresh) or reused buffer of exactly `capacity` bytes, a power of two.
pub fn take(capacity: usize) -> AlignedBuf {
    let class = capacity.trailing_zeros() as usize;
    let reused = POOL.with(|p| {
        let mut p = p.borrow_mut();
        let b = p.free.get_mut(class)?.pop()?;
        p.bytes -= b.capacity();
        Some(b)
    });
    reused.unwrap_or_else(|| AlignedBuf::zeroed(capacity))
}

/// Keeps `buf` for reuse on this thread, unless it is too large or the pool is full.
pub fn give_back(buf: AlignedBuf) {
    let capacity = buf.capacity();
    if capacity > FRAME_POOL_BUFFER_MAX_BYTES || !capacity.is_power_of_two() {
        return;
    }
    POOL.with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            return;
        };
        if p.bytes + capacity > FRAME_POOL_BYTES_MAX {
            return;
        }
        let class = capacity.trailing_zeros() as usize;
        if p.free.len() <= class {
            p.free.resize_with(class + 1, Vec::new);
        }
        p.free[class].push(buf);
        p.bytes += capacity;
    });
}

/// Bytes this thread's pool keeps.
#[cfg(test)]
fn pooled_bytes() -> usize {
    POOL.with(|p| p.borrow().bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::budget::RequestBudget;
    use futures_lite::future::block_on;

    #[test]
    fn large_frames_reuse_pooled_buffers_and_release_the_budget() {
        let budget = RequestBudget::new(Some(1 << 20));
        let len = 100_000;
        assert_eq!(frame_bytes(len), 128 << 10);
        let permit = block_on(budget.acquire(frame_bytes(len)));
        let mut f = LargeFrame::new(len);
        let first = f.buf.as_slice().as_ptr();
        assert_eq!(first as usize % 4096, 0, "aligned");
        assert_eq!(f.put(&[7; 10]), 10);
        let rest = f.unfilled().len();
        f.unfilled().fill(9);
        f.advance(rest);
        let bytes = f.finish(permit);
        assert_eq!(bytes.len(), len);
        assert_eq!(&bytes[..11], &[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 9]);
        let slice = bytes.slice(5..20);
        drop(bytes);
        assert_eq!(
            budget.available(),
            (1 << 20) - (128 << 10),
            "a slice keeps it"
        );
        let before = pooled_bytes();
        drop(slice);
        assert_eq!(budget.available(), 1 << 20);
        assert_eq!(pooled_bytes(), before + (128 << 10));
        let again = LargeFrame::new(len + 1);
        assert_eq!(again.buf.as_slice().as_ptr(), first, "reused");
        assert_eq!(pooled_bytes(), before);
    }

    #[test]
    fn small_frames_are_copies_charged_their_length() {
        let budget = RequestBudget::new(Some(1000));
        let permit = block_on(budget.acquire(frame_bytes(300)));
        let b = small_frame(&[1; 300], permit);
        assert_eq!(budget.available(), 700);
        assert_eq!(&b[..], &[1; 300][..]);
        drop(b);
        assert_eq!(budget.available(), 1000);
    }
}
