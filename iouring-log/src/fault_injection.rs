//! A fault-injecting [`SegmentIo`] for crash tests: it passes every operation to the real
//! files ([`DirectIo`]) and keeps a model of what a machine crash may leave of each.
//!
//! Fault model of one segment file (what a power loss may do):
//! - the bytes as of the last completed `fdatasync` survive: every write or truncation that
//!   completed before that `fdatasync` was issued;
//! - every later write may be lost, may survive, or may be torn — only a prefix of its 512-byte
//!   sectors lands; each one independently, so a later write may survive where an earlier one
//!   was lost; a later truncation may be lost or survive;
//! - an operation that completes at the moment of the crash, or was in flight then, is recorded
//!   (the kernel finishes it) but its caller gets `EIO`: the process died before it learned;
//! - after the crash every new operation fails with `EIO` and touches nothing.
//!
//! A killed process (`kill -9`) with the machine up loses nothing that reached the kernel:
//! [`Crash::ProcessKill`] keeps every recorded operation. [`Crash::PowerLoss`] applies the
//! model above.
//!
//! Not modelled: directory entries (a created file survives even if its directory was not
//! synced yet), index and checkpoint files (written whole: temporary file, fdatasync, rename),
//! preallocation (reads as zeros either way).
//!
//! Use: open logs with [`LogOptions`](crate::LogOptions) holding a `FaultyIo`, arm it with
//! [`FaultyIo::crash_after_ops`] (or call [`FaultyIo::crash`]), wait for
//! [`FaultyIo::quiesce`], then [`FaultyIo::apply_crash`] writes one state the crash could
//! have left into every file, chosen by the caller's seeded RNG.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use glommio::io::DmaBuffer;
use rand::Rng;

use crate::segment_io::{DirectIo, IoFuture, SegmentFile, SegmentIo, WriteBuffer, WriteMode};

/// Sector size: the smallest unit a torn write keeps or loses.
pub const SECTOR_BYTES: usize = 512;

enum Pending {
    Write { position: u64, bytes: Vec<u8> },
    Truncate(u64),
}

#[derive(Default)]
struct FileModel {
    /// The file as of the last completed `fdatasync`.
    durable: Vec<u8>,
    /// Operations completed since, in completion order, each with its sequence number.
    pending: Vec<(u64, Pending)>,
    /// Sequence number of the next completed operation.
    next_seq: u64,
    counts: OpCounts,
}

impl FileModel {
    fn record(&mut self, op: Pending) {
        self.pending.push((self.next_seq, op));
        self.next_seq += 1;
    }

    /// An `fdatasync` issued when `next_seq` was `covered_seq` completed: the operations
    /// completed before it are durable. (Syncs may overlap; each covers its own prefix.)
    fn synced(&mut self, covered_seq: u64) {
        let n = self.pending.partition_point(|(seq, _)| *seq < covered_seq);
        for (_, op) in self.pending.drain(..n).collect::<Vec<_>>() {
            apply(&mut self.durable, &op);
        }
    }
}

#[derive(Default)]
struct Shared {
    crashed: bool,
    /// Completed operations so far, and after how many the crash happens.
    ops: u64,
    crash_at_op: Option<u64>,
    /// Real operations in flight.
    in_flight: usize,
    files: BTreeMap<PathBuf, FileModel>,
}

impl Shared {
    /// Counts a completed operation; true if the crash happens now.
    fn complete_op(&mut self) -> bool {
        self.ops += 1;
        if self.crash_at_op.is_some_and(|at| self.ops >= at) {
            self.crashed = true;
        }
        self.crashed
    }
}

/// Completed operations by kind (for tests of group commit).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpCounts {
    pub writes: u64,
    /// Of `writes`, those that went through the page cache ([`WriteMode::PageCache`]).
    pub page_cache_writes: u64,
    pub syncs: u64,
}

/// What kind of crash [`FaultyIo::apply_crash`] leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The process was killed; the machine and its kernel went on.
    ProcessKill,
    /// The machine lost power.
    PowerLoss,
}

/// What [`FaultyIo::apply_crash`] did, for the failure message of a test.
#[derive(Debug, Default, Clone)]
pub struct CrashReport {
    pub files: usize,
    pub ops_kept: usize,
    pub ops_lost: usize,
    pub writes_torn: usize,
}

/// See the module doc.
#[derive(Clone, Default)]
pub struct FaultyIo {
    shared: Rc<RefCell<Shared>>,
}

/// Linux's `EIO`: what every operation of a crashed process "returns".
const EIO: i32 = 5;

fn crashed_error() -> std::io::Error {
    std::io::Error::from_raw_os_error(EIO)
}

impl FaultyIo {
    pub fn new() -> FaultyIo {
        FaultyIo::default()
    }

    /// The crash happens when `n` more segment file operations have completed.
    pub fn crash_after_ops(&self, n: u64) {
        let mut s = self.shared.borrow_mut();
        s.crash_at_op = Some(s.ops + n.max(1));
    }

    /// The crash happens now.
    pub fn crash(&self) {
        self.shared.borrow_mut().crashed = true;
    }

    pub fn is_crashed(&self) -> bool {
        self.shared.borrow().crashed
    }

    /// Completed operations so far.
    pub fn ops(&self) -> u64 {
        self.shared.borrow().ops
    }

    /// Completed writes and syncs so far, over every file.
    pub fn counts(&self) -> OpCounts {
        let shared = self.shared.borrow();
        shared
            .files
            .values()
            .fold(OpCounts::default(), |sum, m| OpCounts {
                writes: sum.writes + m.counts.writes,
                page_cache_writes: sum.page_cache_writes + m.counts.page_cache_writes,
                syncs: sum.syncs + m.counts.syncs,
            })
    }

    /// Waits until no real operation is in flight (after the crash none starts).
    pub async fn quiesce(&self) {
        while self.shared.borrow().in_flight > 0 {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Writes into every file one state the crash may have left (see the module doc). Call
    /// after the crash and [`FaultyIo::quiesce`].
    pub fn apply_crash(&self, crash: Crash, rng: &mut impl Rng) -> std::io::Result<CrashReport> {
        let shared = self.shared.borrow();
        assert!(shared.crashed, "apply_crash before the crash");
        assert_eq!(shared.in_flight, 0, "apply_crash with operations in flight");
        let mut report = CrashReport::default();
        for (path, model) in &shared.files {
            let mut image = model.durable.clone();
            for (_, op) in &model.pending {
                let choice = match crash {
                    Crash::ProcessKill => 2,
                    Crash::PowerLoss => rng.gen_range(0..4),
                };
                match choice {
                    0 => report.ops_lost += 1,
                    1 => {
                        if let Pending::Write { position, bytes } = op {
                            let sectors = bytes.len().div_ceil(SECTOR_BYTES);
                            let keep = rng.gen_range(0..sectors.max(1)) * SECTOR_BYTES;
                            apply_write(&mut image, *position, &bytes[..keep.min(bytes.len())]);
                            report.writes_torn += 1;
                        } else {
                            apply(&mut image, op);
                            report.ops_kept += 1;
                        }
                    }
                    _ => {
                        apply(&mut image, op);
                        report.ops_kept += 1;
                    }
                }
            }
            std::fs::write(path, &image)?;
            report.files += 1;
        }
        Ok(report)
    }
}

fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { position, bytes } => apply_write(image, *position, bytes),
        Pending::Truncate(size) => image.resize(*size as usize, 0),
    }
}

fn apply_write(image: &mut Vec<u8>, position: u64, bytes: &[u8]) {
    let end = position as usize + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[position as usize..end].copy_from_slice(bytes);
}

impl SegmentIo for FaultyIo {
    fn create<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>> {
        Box::pin(async move {
            if self.is_crashed() {
                return Err(crashed_error());
            }
            let real = DirectIo.create(path).await?;
            let model = FileModel::default();
            self.shared
                .borrow_mut()
                .files
                .insert(path.to_path_buf(), model);
            Ok(self.wrap(real, path))
        })
    }

    fn open<'a>(&'a self, path: &'a Path) -> IoFuture<'a, Rc<dyn SegmentFile>> {
        Box::pin(async move {
            if self.is_crashed() {
                return Err(crashed_error());
            }
            let real = DirectIo.open(path).await?;
            let known = self.shared.borrow().files.contains_key(path);
            if !known {
                // A file from before this I/O layer existed counts as durable as it is.
                let durable = std::fs::read(path)?;
                let model = FileModel {
                    durable,
                    ..FileModel::default()
                };
                self.shared
                    .borrow_mut()
                    .files
                    .insert(path.to_path_buf(), model);
            }
            Ok(self.wrap(real, path))
        })
    }
}

impl FaultyIo {
    fn wrap(&self, real: Rc<dyn SegmentFile>, path: &Path) -> Rc<dyn SegmentFile> {
        Rc::new(FaultyFile {
            real,
            path: path.to_path_buf(),
            shared: self.shared.clone(),
        })
    }
}

struct FaultyFile {
    real: Rc<dyn SegmentFile>,
    path: PathBuf,
    shared: Rc<RefCell<Shared>>,
}

impl FaultyFile {
    /// Runs a real operation unless crashed; `record` notes its effect in the model when it
    /// completes (also at the moment of the crash, whose caller still gets `EIO`).
    async fn run<T>(
        &self,
        op: IoFuture<'_, T>,
        record: impl FnOnce(&mut FileModel, &T),
    ) -> std::io::Result<T> {
        if self.shared.borrow().crashed {
            return Err(crashed_error());
        }
        self.shared.borrow_mut().in_flight += 1;
        let result = op.await;
        let mut shared = self.shared.borrow_mut();
        shared.in_flight -= 1;
        let value = match result {
            Ok(v) => v,
            Err(_) if shared.crashed => return Err(crashed_error()),
            Err(e) => return Err(e),
        };
        let model = shared
            .files
            .get_mut(&self.path)
            .expect("a file the layer opened has a model");
        record(model, &value);
        let crashed_before = shared.crashed;
        if shared.complete_op() || crashed_before {
            return Err(crashed_error());
        }
        Ok(value)
    }
}

impl SegmentFile for FaultyFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        self.real.alloc_buffer(len)
    }

    fn write_at(&self, buf: WriteBuffer, position: u64, mode: WriteMode) -> IoFuture<'_, usize> {
        // Either mode is modelled alike: written when it returns, durable at the next fdatasync
        // (a power loss drops or tears it before that).
        Box::pin(async move {
            let bytes = buf.as_bytes().to_vec();
            let op = self.real.write_at(buf, position, mode);
            self.run(op, |model, n| {
                let bytes = bytes[..*n].to_vec();
                model.counts.writes += 1;
                model.counts.page_cache_writes += u64::from(mode == WriteMode::PageCache);
                model.record(Pending::Write { position, bytes });
            })
            .await
        })
    }

    fn fdatasync(&self) -> IoFuture<'_, ()> {
        Box::pin(async move {
            let covered = self
                .shared
                .borrow()
                .files
                .get(&self.path)
                .map_or(0, |m| m.next_seq);
            let op = self.real.fdatasync();
            // A sync completing at the moment of the crash counts as durable in the model
            // though its caller gets EIO: that only keeps bytes nobody was told are durable.
            self.run(op, |model, _| {
                model.counts.syncs += 1;
                model.synced(covered)
            })
            .await
        })
    }

    fn pre_allocate(&self, size: u64) -> IoFuture<'_, ()> {
        Box::pin(async move {
            let op = self.real.pre_allocate(size);
            self.run(op, |_, _| {}).await
        })
    }

    fn truncate(&self, size: u64) -> IoFuture<'_, ()> {
        Box::pin(async move {
            let op = self.real.truncate(size);
            self.run(op, |model, _| model.record(Pending::Truncate(size)))
                .await
        })
    }

    fn close(self: Rc<Self>) -> IoFuture<'static, ()> {
        Box::pin(async move {
            match Rc::try_unwrap(self) {
                Ok(f) => f.real.close().await,
                Err(_) => Ok(()),
            }
        })
    }
}
