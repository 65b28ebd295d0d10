//! The file operations of segment `.log` files, behind a small trait so that tests can put a
//! fault-injecting implementation ([`crate::fault_injection::FaultyIo`]) in place of the real
//! one ([`DirectIo`]: glommio `DmaFile`s, O_DIRECT through io_uring).
//!
//! Only the appender's writes, syncs, preallocation and trims of `.log` files go through here.
//! Reads use other handles on the same file (the read cache's, see `read_cache.rs`); index and
//! checkpoint files are written whole and durably (temporary file, fdatasync, rename, directory
//! fsync).
//!
//! A write goes to the file one of two ways ([`WriteMode`]): O_DIRECT through io_uring (busy
//! partitions: whole chunks, no copy, no page cache), or a `pwrite` through the page cache on
//! the calling thread (quiet partitions: a 4 KiB O_DIRECT write costs ~15 µs of CPU in the
//! kernel's direct-I/O and block path here, a buffered one ~4 µs including its later writeback,
//! and ten thousand quiet partitions make every append such a write). Both count as written
//! once they return — in the file, surviving `kill -9` of the broker — and both are made durable
//! by the same `fdatasync`. The two never cover the same block at once: the appender picks the
//! mode by the tail chunk a write comes from (small chunks: page cache; 1 MiB chunks: O_DIRECT),
//! and a file range switches only at a chunk boundary, where the kernel keeps the two coherent
//! (an O_DIRECT read or write of a range with cached pages writes them back first). Readers
//! follow the writer: a chunk with bytes written through the page cache is read through it
//! (`read_cache`), so that a consumer of a quiet partition never waits for that writeback.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;

use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use crate::limits::SLOW_IO_THRESHOLDS;

/// A boxed future of an I/O result; segment I/O runs on one shard, so it need not be `Send`.
pub type IoFuture<'a, T> = Pin<Box<dyn Future<Output = std::io::Result<T>> + 'a>>;

/// A buffer handed to an O_DIRECT write: block-aligned address and length.
pub enum WriteBuffer {
    /// A buffer filled for this write.
    Owned(DmaBuffer),
    /// A range of a shared buffer (a tail chunk's, written without a copy while the tail keeps
    /// it for readers and appends after the range's data; or the zero-fill buffer).
    Shared(Rc<DmaBuffer>, std::ops::Range<usize>),
}

impl WriteBuffer {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            WriteBuffer::Owned(b) => b.as_bytes(),
            WriteBuffer::Shared(b, range) => &b.as_bytes()[range.clone()],
        }
    }
}

thread_local! {
    /// `(writes, bytes)` this thread made through the page cache ([`WriteMode::PageCache`]).
    static PAGE_CACHE_WRITES: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    /// How long this thread's data writes, segment `fdatasync`s and segment seals took.
    static IO_TIMES: std::cell::Cell<ShardIoTimes> = const { std::cell::Cell::new(ShardIoTimes::ZERO) };
}

/// How long one kind of a shard's log I/O took, each from its call to its completion: counts,
/// not a histogram, so the record costs two clock reads per operation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IoTimes {
    pub count: u64,
    pub total: std::time::Duration,
    /// Operations that took at least each of [`SLOW_IO_THRESHOLDS`].
    pub slow: [u64; SLOW_IO_THRESHOLDS.len()],
    pub longest: std::time::Duration,
}

impl IoTimes {
    const ZERO: IoTimes = IoTimes {
        count: 0,
        total: std::time::Duration::ZERO,
        slow: [0; SLOW_IO_THRESHOLDS.len()],
        longest: std::time::Duration::ZERO,
    };

    fn add(mut self, took: std::time::Duration) -> IoTimes {
        self.count += 1;
        self.total += took;
        for (threshold, n) in SLOW_IO_THRESHOLDS.iter().zip(self.slow.iter_mut()) {
            if took >= *threshold {
                *n += 1;
            }
        }
        self.longest = self.longest.max(took);
        self
    }
}

/// What a shard's log I/O took since the shard started, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ShardIoTimes {
    /// Data writes to segment files (an `acks=1` produce waits for the write covering its
    /// bytes).
    pub data_writes: IoTimes,
    /// `fdatasync`s of segment files (a produce under `flush.messages=1` waits for one).
    pub syncs: IoTimes,
    /// Seals of rolled segments, from the roll until the seal finished (writes drained, file
    /// trimmed and synced, indexes written). Offsets waited for as flushed after a roll wait
    /// for the part of it up to the trimmed file's `fdatasync`.
    pub seals: IoTimes,
}

impl ShardIoTimes {
    const ZERO: ShardIoTimes = ShardIoTimes {
        data_writes: IoTimes::ZERO,
        syncs: IoTimes::ZERO,
        seals: IoTimes::ZERO,
    };
}

/// Which of a shard's [`IoTimes`] an operation counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    DataWrite,
    Sync,
    Seal,
}

/// Records one operation of `kind` that took `took`.
pub fn record_io(kind: IoKind, took: std::time::Duration) {
    IO_TIMES.with(|t| {
        let mut times = t.get();
        let slot = match kind {
            IoKind::DataWrite => &mut times.data_writes,
            IoKind::Sync => &mut times.syncs,
            IoKind::Seal => &mut times.seals,
        };
        *slot = slot.add(took);
        t.set(times);
    });
}

/// This thread's log I/O times since it started.
pub fn io_times() -> ShardIoTimes {
    IO_TIMES.with(|t| t.get())
}

/// `(writes, bytes)` of segment files this thread (shard) made through the page cache since it
/// started (its O_DIRECT writes are counted by glommio's io_uring statistics).
pub fn page_cache_writes() -> (u64, u64) {
    PAGE_CACHE_WRITES.with(|c| c.get())
}

/// How a write reaches the file (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// O_DIRECT through io_uring: the device has the bytes when the write completes.
    Direct,
    /// A `pwrite` into the page cache on the calling thread: the file has the bytes when it
    /// returns; the kernel writes them back later (or the next `fdatasync` does).
    PageCache,
}

/// One segment file opened for appends.
pub trait SegmentFile {
    fn path(&self) -> &Path;
    /// A zeroed, block-aligned buffer of `len` bytes for [`SegmentFile::write_at`].
    fn alloc_buffer(&self, len: usize) -> DmaBuffer;
    /// Writes the whole buffer at `position` (both block-aligned) the way `mode` says; returns
    /// the bytes written.
    fn write_at(&self, buf: WriteBuffer, position: u64, mode: WriteMode) -> IoFuture<'_, usize>;
    /// Makes every write completed before the call durable.
    fn fdatasync(&self) -> IoFuture<'_, ()>;
    /// Reserves space up to `size` bytes (the file size grows to it; the bytes read as zeros).
    fn pre_allocate(&self, size: u64) -> IoFuture<'_, ()>;
    /// Cuts (or extends) the file to `size` bytes.
    fn truncate(&self, size: u64) -> IoFuture<'_, ()>;
    /// Closes the file once no one else holds it.
    fn close(self: Rc<Self>) -> IoFuture<'static, ()>;
}

/// Opens segment files for appends.
pub trait SegmentIo {
    /// Creates `path` (emptying it if it exists).
    fn create<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>>;
    /// Opens the existing `path`.
    fn open<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>>;
}

/// The real thing: O_DIRECT `DmaFile`s on glommio's io_uring.
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectIo;

struct DirectFile {
    file: Rc<DmaFile>,
    path: PathBuf,
    /// Whether the descriptor has O_DIRECT set now: cleared by a page-cache write, set again
    /// by the next direct write (a quiet partition's appends do not switch it per write).
    direct: std::cell::Cell<bool>,
}

impl SegmentIo for DirectIo {
    fn create<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>> {
        Box::pin(async move {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .dma_open(path)
                .await?;
            Ok(direct(file, path))
        })
    }

    fn open<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>> {
        Box::pin(async move {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .dma_open(path)
                .await?;
            Ok(direct(file, path))
        })
    }
}

fn direct(file: DmaFile, path: &Path) -> Rc<dyn SegmentFile> {
    Rc::new(DirectFile {
        file: Rc::new(file),
        path: path.to_path_buf(),
        direct: std::cell::Cell::new(true),
    })
}

impl DirectFile {
    /// `pwrite` of all of `bytes` at `position` through the page cache, on this thread: a copy
    /// into cached pages, no device I/O, so it does not wait (io_uring would hand an ext4
    /// buffered write to a worker thread).
    ///
    /// The file's own descriptor is used with O_DIRECT cleared, and it stays cleared until the
    /// next direct write sets it again ([`DirectFile::set_direct`]): a second descriptor per
    /// segment would double the open files of ten thousand partitions, and switching for each
    /// write cost three `fcntl` calls per append (4 % of a node of 10 000 quiet partitions). A
    /// direct write of this file queued but not yet submitted when a page-cache write clears
    /// the flag, or one the kernel re-issues from a worker thread, goes through the page cache
    /// instead: the same bytes in the same file, as written and as coherent (and covered by
    /// the same `fdatasync`); only slower.
    fn write_through_page_cache(&self, bytes: &[u8], position: u64) -> std::io::Result<usize> {
        use std::os::unix::io::AsRawFd;
        self.set_direct(false)?;
        let written = pwrite_all(self.file.as_raw_fd(), bytes, position);
        if let Ok(n) = written {
            PAGE_CACHE_WRITES.with(|c| {
                let (writes, total) = c.get();
                c.set((writes + 1, total + n as u64));
            });
        }
        written
    }

    /// Sets (`on`) or clears O_DIRECT on the descriptor, unless it already is so.
    fn set_direct(&self, on: bool) -> std::io::Result<()> {
        use std::os::unix::io::AsRawFd;
        if self.direct.get() != on {
            let fd = self.file.as_raw_fd();
            let flags = fcntl_flags(fd, None)? & !libc::O_DIRECT;
            fcntl_flags(fd, Some(if on { flags | libc::O_DIRECT } else { flags }))?;
            self.direct.set(on);
        }
        Ok(())
    }
}

/// The descriptor's status flags (`F_GETFL`), or sets them to `set` (`F_SETFL`).
fn fcntl_flags(fd: std::os::unix::io::RawFd, set: Option<i32>) -> std::io::Result<i32> {
    // SAFETY: plain integer arguments; the caller keeps `fd` open.
    let r = unsafe {
        match set {
            None => libc::fcntl(fd, libc::F_GETFL),
            Some(flags) => libc::fcntl(fd, libc::F_SETFL, flags),
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(set.unwrap_or(r))
}

/// `pwrite` until all of `bytes` is written at `position` (or the file takes no more).
fn pwrite_all(fd: std::os::unix::io::RawFd, bytes: &[u8], position: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < bytes.len() {
        let at = libc::off_t::try_from(position + done as u64)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the caller keeps `fd` open; the pointer and length stay inside `bytes`.
        let n = unsafe { libc::pwrite(fd, bytes[done..].as_ptr().cast(), bytes.len() - done, at) };
        match n {
            n if n > 0 => done += n as usize,
            0 => break,
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(done)
}

impl SegmentFile for DirectFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        self.file.alloc_dma_buffer(len)
    }

    fn write_at(&self, buf: WriteBuffer, position: u64, mode: WriteMode) -> IoFuture<'_, usize> {
        Box::pin(async move {
            if mode == WriteMode::PageCache {
                return self.write_through_page_cache(buf.as_bytes(), position);
            }
            self.set_direct(true)?;
            let written = match buf {
                WriteBuffer::Owned(b) => self.file.write_at(b, position).await,
                WriteBuffer::Shared(b, range) => {
                    self.file.write_rc_range_at(b, range, position).await
                }
            };
            Ok(written?)
        })
    }

    fn fdatasync(&self) -> IoFuture<'_, ()> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let synced = self.file.fdatasync().await;
            record_io(IoKind::Sync, started.elapsed());
            Ok(synced?)
        })
    }

    fn pre_allocate(&self, size: u64) -> IoFuture<'_, ()> {
        Box::pin(async move { Ok(self.file.pre_allocate(size, false).await?) })
    }

    fn truncate(&self, size: u64) -> IoFuture<'_, ()> {
        Box::pin(async move {
            crate::helper_thread::on_helper_thread(self.file.truncate(size)).await?;
            Ok(())
        })
    }

    fn close(self: Rc<Self>) -> IoFuture<'static, ()> {
        Box::pin(async move {
            let file = match Rc::try_unwrap(self) {
                Ok(f) => f.file,
                // Someone still holds the file: it closes when the last holder drops it.
                Err(_) => return Ok(()),
            };
            file.close_rc().await?;
            Ok(())
        })
    }
}

/// Name (before `-<shard>`) of the file [`probe_direct_io`] writes and removes in a data
/// directory.
pub const PROBE_FILE: &str = ".ringlog-direct-io-probe";

/// Makes glommio decide, for this thread, whether the device under `dir` takes polled I/O
/// (IOPOLL) by a read of real data.
///
/// glommio probes a device once per thread with a read at position 0 of the first `DmaFile`
/// opened on it, and caches the answer. When that file is a freshly created, empty segment the
/// read returns nothing without reaching the device, so the probe answers "yes" on devices
/// without poll queues (these machines' virtio disks report `io_poll` 0): every O_DIRECT write
/// then goes to glommio's poll ring, and every O_DIRECT read there fails with EOPNOTSUPP. Opening
/// a file holding one block first makes the probe read the device. Call it on every shard
/// before it opens a log.
///
/// `shard` names the file: shards probe at once in one directory, and glommio panics when a
/// file it opens is gone before it looks at its file system.
pub async fn probe_direct_io(dir: &Path, shard: usize) -> std::io::Result<()> {
    let path = dir.join(format!("{PROBE_FILE}-{shard}"));
    // Written through a buffered file (which glommio does not probe), then synced so an
    // O_DIRECT read finds it on the device.
    let file = glommio::io::BufferedFile::create(&path).await?;
    let written = file
        .write_at(vec![0u8; crate::limits::DIRECT_IO_ALIGNMENT], 0)
        .await;
    let synced = file.fdatasync().await;
    file.close().await?;
    written?;
    synced?;
    // The probe: glommio reads the first block of the first DmaFile of the thread.
    let probe = DmaFile::open(&path).await;
    let removed = crate::helper_thread::on_helper_thread(glommio::io::remove(&path)).await;
    probe?.close().await?;
    removed.map_err(std::io::Error::from)
}

/// Bytes of the file system holding `path` that an unprivileged writer may still use
/// (`statvfs`'s `f_bavail`): whether a log failed on a full disk may be reopened.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    disk_space(path).map(|(_, usable)| usable)
}

/// `(total, usable)` bytes of the file system holding `path` (`statvfs`'s `f_blocks` and
/// `f_bavail`), as DescribeLogDirs reports them.
pub fn disk_space(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: an all-zero statvfs is a valid value for statvfs to overwrite.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a NUL-terminated string and st a valid, writable statvfs.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let block = st.f_frsize as u64;
    Ok((st.f_blocks as u64 * block, st.f_bavail as u64 * block))
}

#[cfg(test)]
mod io_times_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_write_counts_under_every_threshold_it_reaches() {
        let t = [0u64, 2, 7, 25]
            .iter()
            .fold(IoTimes::ZERO, |t, ms| t.add(Duration::from_millis(*ms)));
        assert_eq!(t.count, 4);
        assert_eq!(t.total, Duration::from_millis(34));
        assert_eq!(t.slow, [3, 2, 1]);
        assert_eq!(t.longest, Duration::from_millis(25));
    }

    #[test]
    fn each_kind_counts_apart() {
        let before = io_times();
        record_io(IoKind::Sync, Duration::from_millis(6));
        record_io(IoKind::Seal, Duration::from_millis(30));
        record_io(IoKind::Seal, Duration::from_millis(1));
        let after = io_times();
        assert_eq!(after.data_writes, before.data_writes);
        assert_eq!(after.syncs.count - before.syncs.count, 1);
        assert_eq!(after.seals.count - before.seals.count, 2);
        assert_eq!(after.seals.slow[2] - before.seals.slow[2], 1);
        assert!(after.seals.longest >= Duration::from_millis(30));
    }
}
