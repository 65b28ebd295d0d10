//! Heap memory aligned to [`DIRECT_IO_ALIGNMENT`], for buffers the kernel copies from or into.
//! One of the two modules of this crate allowed to hold `unsafe`.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::limits::DIRECT_IO_ALIGNMENT;

/// A zero-initialised, fixed-capacity, 4 KiB-aligned byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: an `AlignedBuf` owns its allocation alone, like a `Box<[u8]>`; nothing in it is tied
// to the thread that allocated it (the global allocator frees from any thread). Not `Sync`:
// `as_mut_ptr` hands out a writable pointer from a shared borrow.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of no bytes, allocating nothing (a placeholder for a moved-out buffer).
    pub fn empty() -> AlignedBuf {
        AlignedBuf {
            ptr: NonNull::dangling(),
            capacity: 0,
        }
    }
}

impl AlignedBuf {
    /// Allocates `capacity` zeroed bytes; `capacity` must be a non-zero multiple of the
    /// alignment.
    pub fn zeroed(capacity: usize) -> AlignedBuf {
        assert!(
            capacity > 0 && capacity.is_multiple_of(DIRECT_IO_ALIGNMENT),
            "aligned buffer capacity {capacity} must be a non-zero multiple of {DIRECT_IO_ALIGNMENT}"
        );
        let layout = Self::layout(capacity);
        // SAFETY: `layout` has a non-zero size (asserted above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, capacity }
    }

    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, DIRECT_IO_ALIGNMENT).expect("valid aligned layout")
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points (or is dangling with `capacity` 0, valid for an empty slice) to `capacity` initialised (zeroed at allocation) bytes owned by
        // `self`; the shared borrow of `self` prevents concurrent mutation through `as_mut_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the exclusive borrow of `self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Raw pointer for code that shares disjoint ranges of the buffer (see `tail.rs`).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity == 0 {
            return;
        }
        // SAFETY: `ptr` was allocated in `zeroed` with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_aligned_and_zeroed() {
        let mut b = AlignedBuf::zeroed(8192);
        assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_IO_ALIGNMENT, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[8191] = 7;
        assert_eq!(b.as_slice()[8191], 7);
    }

    #[test]
    #[should_panic(expected = "multiple of 4096")]
    fn rejects_unaligned_capacity() {
        AlignedBuf::zeroed(100);
    }
}
