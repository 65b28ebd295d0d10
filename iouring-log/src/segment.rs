//! One log segment: its `.log` file, its offset, time and aborted transaction indexes, and its
//! lifecycle. An [`SegmentState::Active`] segment owns an O_DIRECT [`Appender`] and takes
//! appends. A roll makes it [`SegmentState::Sealing`]: it takes no more appends while its writes
//! drain, and a background task trims the file to its logical size, fsyncs it and writes the
//! offset and time index files (the `.txnindex` is written as entries come, `txn_index.rs`).
//! A [`SegmentState::Sealed`] segment is read-only and wholly durable.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::appender::{Appender, SegmentEnd};
use crate::batch::BatchHeader;
use crate::checkpoint::write_file_durably;
use crate::error::{IoError, OpenError};
use crate::limits::{DELETE_READERS_WAIT, DELETE_READERS_WAIT_MAX, DELETE_SHRINK_STEP_BYTES};
use crate::notify::Progress;
use crate::offset_index::OffsetIndex;
use crate::read_cache::CachedSegment;
use crate::reader::SegmentView;
use crate::segment_io::{SegmentFile, SegmentIo};
use crate::time_index::TimeIndex;
use crate::txn_index::{AbortedTxnEntry, TXN_INDEX_SUFFIX};
use crate::types::{FilePosition, Offset, TimestampMs};

pub const LOG_SUFFIX: &str = "log";
pub const INDEX_SUFFIX: &str = "index";
pub const TIME_INDEX_SUFFIX: &str = "timeindex";
/// Appended to a file that is deleted once its readers are done; a log's open removes such
/// files (`cleaner::finish_interrupted_cleaning`).
pub(crate) const DELETED_SUFFIX: &str = ".deleted";

/// `<dir>/<20-digit base offset>.<suffix>`, Kafka's file naming.
pub fn segment_file(dir: &Path, base_offset: Offset, suffix: &str) -> PathBuf {
    dir.join(format!("{:020}.{suffix}", base_offset.0))
}

/// Keeps the two indexes in step with the batches of a segment, the way Kafka's
/// `LogSegment.append` and `recover` do: an entry for a batch when more than
/// `index.interval.bytes` were appended since the last entry.
#[derive(Debug, Clone, Default)]
pub struct SegmentIndexes {
    pub offset_index: OffsetIndex,
    pub time_index: TimeIndex,
    pub bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp so far and the last offset of that batch.
    pub max_timestamp_so_far: Option<(TimestampMs, Offset)>,
}

impl SegmentIndexes {
    pub fn on_batch(
        &mut self,
        base_offset: Offset,
        header: &BatchHeader,
        position: u64,
        interval_bytes: u64,
    ) {
        let last = header.last_offset();
        if self
            .max_timestamp_so_far
            .is_none_or(|(ts, _)| header.max_timestamp > ts)
        {
            self.max_timestamp_so_far = Some((header.max_timestamp, last));
        }
        if self.bytes_since_last_index_entry > interval_bytes {
            let rel = last
                .relative_to(base_offset)
                .expect("offset fits the segment (checked on append)");
            self.offset_index.append(rel, FilePosition(position as u32));
            self.maybe_append_time_entry(base_offset);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += u64::from(header.size_bytes);
    }

    /// Appends the max timestamp so far to the time index (also done when a segment is sealed).
    pub fn maybe_append_time_entry(&mut self, base_offset: Offset) {
        if let Some((ts, off)) = self.max_timestamp_so_far {
            let rel = off
                .relative_to(base_offset)
                .expect("offset fits the segment");
            self.time_index.maybe_append(ts, rel);
        }
    }
}

pub struct ActiveSegment {
    pub appender: Appender,
}

pub enum SegmentState {
    /// Takes appends.
    Active(ActiveSegment),
    /// Rolled: takes no appends; its writes drain and a background task seals it.
    Sealing(ActiveSegment),
    /// Trimmed, fsynced, indexes written: read-only.
    Sealed,
}

pub struct Segment {
    pub base_offset: Offset,
    /// The `.log` file. A segment keeps no read handle of its own (recovery and truncation
    /// open one while they scan): 10 000 partitions must fit a 20 000 open-files limit; the
    /// read cache opens its O_DIRECT handle on the first read that misses.
    pub log_path: Rc<PathBuf>,
    /// The segment in the shard's read cache: fetches read through it (O_DIRECT, cached).
    pub cached: Rc<CachedSegment>,
    pub indexes: SegmentIndexes,
    /// Logical size: bytes of valid batches.
    pub size: u64,
    /// The offset after the last batch (`base_offset` when empty).
    pub next_offset: Offset,
    /// When the segment counts as created for `segment.ms`: creation time, or the first batch's
    /// max timestamp for a reopened segment (Kafka's rolling-based timestamp).
    pub rolling_timestamp_ms: i64,
    pub state: SegmentState,
    /// The `.txnindex` entries: transactions aborted by a marker in this segment, in marker
    /// order (`txn_index.rs`).
    pub aborted: Vec<AbortedTxnEntry>,
}

impl Segment {
    /// Creates the files of a new, empty active segment. Its directory entry is not synced
    /// here: whoever makes its first batch durable syncs the directory first.
    pub async fn create(
        io: &dyn SegmentIo,
        dir: &Path,
        base_offset: Offset,
        now_ms: i64,
        progress: Rc<Progress>,
    ) -> Result<Segment, IoError> {
        let path = segment_file(dir, base_offset, LOG_SUFFIX);
        let file = io
            .create(&path)
            .await
            .map_err(|e| IoError::new("creating segment", &path, e))?;
        let end = SegmentEnd {
            size: 0,
            next_offset: base_offset,
            partial_block: &[],
        };
        let log_path = Rc::new(path);
        let cached = CachedSegment::new(log_path.clone());
        let appender = Appender::new(file, end, progress, cached.clone());
        Ok(Segment {
            base_offset,
            log_path,
            cached,
            indexes: SegmentIndexes::default(),
            size: 0,
            next_offset: base_offset,
            rolling_timestamp_ms: now_ms,
            state: SegmentState::Active(ActiveSegment::start(appender)),
            aborted: Vec::new(),
        })
    }

    /// The appender of an active or sealing segment.
    pub fn appender(&self) -> Option<&Appender> {
        match &self.state {
            SegmentState::Active(a) | SegmentState::Sealing(a) => Some(&a.appender),
            SegmentState::Sealed => None,
        }
    }

    pub fn is_sealed(&self) -> bool {
        matches!(self.state, SegmentState::Sealed)
    }

    /// Stops appends to the active segment: it becomes sealing and its writer drains.
    pub fn start_sealing(&mut self) -> Appender {
        let state = std::mem::replace(&mut self.state, SegmentState::Sealed);
        let SegmentState::Active(active) = state else {
            panic!("sealing {}, which is not active", self.log_path.display());
        };
        let appender = active.appender.clone();
        appender.io.borrow_mut().close();
        appender.events.notify_all();
        self.state = SegmentState::Sealing(active);
        appender
    }

    pub fn view(&self) -> SegmentView {
        SegmentView {
            path: self.log_path.clone(),
            cached: self.cached.clone(),
            size: self.size,
            io: self.appender().map(|a| a.io.clone()),
        }
    }

    /// The largest timestamp in the segment (Kafka's `largestTimestamp`), if it has batches.
    pub fn largest_timestamp(&self) -> Option<TimestampMs> {
        self.indexes.max_timestamp_so_far.map(|(ts, _)| ts)
    }

    /// Appends a batch whose header is already validated and patched. `prefix` holds the
    /// patched first bytes of the batch and `rest` the remainder. The appender is woken; the
    /// bytes reach the disk asynchronously.
    pub fn append_batch(
        &mut self,
        header: &BatchHeader,
        prefix: &[u8],
        rest: &[u8],
        interval_bytes: u64,
    ) {
        let SegmentState::Active(active) = &self.state else {
            panic!("append to sealed segment {}", self.log_path.display());
        };
        assert!(
            header.base_offset >= self.next_offset,
            "batch offsets must increase: {} after {}",
            header.base_offset,
            self.next_offset
        );
        let position = self.size;
        {
            let mut io = active.appender.io.borrow_mut();
            io.tail.push(prefix);
            io.tail.push(rest);
            let end = io.tail.end();
            io.planner.on_append(end);
            io.watermarks.on_append(end, header.next_offset());
        }
        self.indexes
            .on_batch(self.base_offset, header, position, interval_bytes);
        self.size += u64::from(header.size_bytes);
        self.next_offset = header.next_offset();
        active.appender.events.notify_all();
    }

    /// Marks the segment sealed after its appender was drained, trimmed and synced
    /// ([`seal_appender`]), or at open for a segment that never had one: adds the final time
    /// index entry and returns both index files' bytes to write.
    pub fn mark_sealed(&mut self) -> (Vec<u8>, Vec<u8>) {
        self.state = SegmentState::Sealed;
        self.indexes.maybe_append_time_entry(self.base_offset);
        (
            self.indexes.offset_index.to_bytes(),
            self.indexes.time_index.to_bytes(),
        )
    }

    /// Deletes the segment's files (retention, truncation) without the shard paying for it.
    ///
    /// Freeing a large file's blocks is slow — this machine's ext4 (mounted `discard`) discards
    /// them synchronously: ~0.2 s for 1 GiB idle, 0.4–0.7 s under load — and it happens in the
    /// call that drops the file's last reference: the `unlink` if no descriptor is open, else
    /// the last `close`, which for the read cache's descriptors runs on the shard's own thread
    /// (even an io_uring close releases the file on the submitting thread). Found as publish
    /// falling from ~900 000 to a few thousand msg/s for half a second at every retention
    /// check, the shard threads in `__fput` → `ext4_free_blocks` → `blkdev_issue_discard`.
    /// So the file is renamed `.deleted` first (a crash part way leaves nothing a log's open
    /// takes for a segment; the open removes such files), the shard's descriptors are closed
    /// once no fetch or read holds the segment (waiting up to [`DELETE_READERS_WAIT`]), and the
    /// helper thread then shrinks the file in steps of [`DELETE_SHRINK_STEP_BYTES`] (its other
    /// work runs between them) and unlinks it. A segment still read after that wait is removed
    /// the same way by a background task when its readers are done, or after
    /// [`DELETE_READERS_WAIT_MAX`].
    pub async fn delete_files(self) -> Result<(), IoError> {
        let dir = self
            .log_path
            .parent()
            .expect("segment file has a directory")
            .to_path_buf();
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            remove_if_present(&segment_file(&dir, self.base_offset, suffix)).await?;
        }
        let log = segment_file(&dir, self.base_offset, LOG_SUFFIX);
        let cached = self.cached.clone();
        drop(self);
        // Renamed first: a file shrunk part way is never taken for a segment after a crash
        // (a log's open removes `.deleted` files), as an unlink's all-or-nothing was.
        let deleted = with_suffix(&log, DELETED_SUFFIX);
        rename_if_present(&log, &deleted).await?;
        cached.relocate(Rc::new(deleted.clone()));
        if cached.wait_unread(DELETE_READERS_WAIT).await {
            cached.close_handles();
            return shrink_and_remove(&deleted).await;
        }
        tracing::debug!(segment = %deleted.display(), "deleting a segment once its readers are done");
        glommio::spawn_local(async move {
            if !cached.wait_unread(DELETE_READERS_WAIT_MAX).await {
                tracing::warn!(segment = %deleted.display(), "still read; deleting it anyway");
            }
            cached.close_handles();
            if let Err(e) = shrink_and_remove(&deleted).await {
                tracing::warn!(segment = %deleted.display(), error = %e, "deleting a segment");
            }
        })
        .detach();
        Ok(())
    }
}

/// Renames `from` to `to` on the helper thread; a file already gone is fine.
pub(crate) async fn rename_if_present(from: &Path, to: &Path) -> Result<(), IoError> {
    let renamed = crate::helper_thread::on_helper_thread(glommio::io::rename(from, to)).await;
    absent_is_fine(renamed, "renaming", from)
}

/// `path` followed by `suffix` (`x.log` → `x.log.deleted`).
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Frees `path`'s blocks on the helper thread a step at a time, from the end, then unlinks it
/// (see [`Segment::delete_files`]); a file already gone is fine.
pub(crate) async fn shrink_and_remove(path: &Path) -> Result<(), IoError> {
    let p = path.to_path_buf();
    let sized = glommio::executor().spawn_blocking(move || std::fs::metadata(&p).map(|m| m.len()));
    let mut size = match crate::helper_thread::on_helper_thread(sized).await {
        Ok(size) => size,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IoError::new("sizing", path, e)),
    };
    while size > DELETE_SHRINK_STEP_BYTES {
        size -= DELETE_SHRINK_STEP_BYTES;
        let p = path.to_path_buf();
        let shrunk = glommio::executor().spawn_blocking(move || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)?
                .set_len(size)
        });
        absent_is_fine(
            crate::helper_thread::on_helper_thread(shrunk).await,
            "shrinking",
            path,
        )?;
    }
    remove_if_present(path).await
}

impl ActiveSegment {
    pub fn start(appender: Appender) -> ActiveSegment {
        // The writer task ends by itself once the appender is closing and drained, or failed.
        glommio::spawn_local(appender.clone().run_writer()).detach();
        ActiveSegment { appender }
    }
}

/// Writes `.index` and `.timeindex` of the segment at `log_path` whole, durably.
pub async fn write_index_files(
    log_path: &Path,
    base_offset: Offset,
    index: Vec<u8>,
    time_index: Vec<u8>,
) -> Result<(), IoError> {
    let dir = log_path.parent().expect("segment file has a directory");
    write_file_durably(&segment_file(dir, base_offset, INDEX_SUFFIX), index).await?;
    write_file_durably(
        &segment_file(dir, base_offset, TIME_INDEX_SUFFIX),
        time_index,
    )
    .await
}

/// Stops appends to an appender and waits until every appended byte is written, then trims
/// the file to `size`, fdatasyncs it and marks everything durable. The caller must hold the
/// log's mutation permit so no append arrives meanwhile.
pub async fn seal_appender(appender: &Appender, size: u64) -> Result<(), IoError> {
    let path = appender.path.as_path();
    appender.io.borrow_mut().close();
    appender.events.notify_all();
    appender
        .wait_until(|p| p.is_idle())
        .await
        .map_err(|f| IoError::new("writing", path, std::io::Error::other(f)))?;
    let (appended, next_offset) = {
        let io = appender.io.borrow();
        (io.planner.appended(), io.watermarks.next_offset())
    };
    assert_eq!(appended, size, "sealed size differs from appended bytes");
    appender
        .file
        .truncate(size)
        .await
        .map_err(|e| IoError::new("trimming", path, e))?;
    appender
        .file
        .fdatasync()
        .await
        .map_err(|e| IoError::new("syncing", path, e))?;
    appender.io.borrow_mut().on_durable(size, next_offset);
    appender.progress.notify_all();
    Ok(())
}

pub async fn open_read_file(path: &Path) -> Result<Rc<BufferedFile>, IoError> {
    BufferedFile::open(path)
        .await
        .map(Rc::new)
        .map_err(|e| IoError::new("opening for reads", path, e))
}

/// The bytes of the last, partial block before `size` (empty when `size` is block-aligned):
/// what an appender must keep in memory to rewrite that block.
pub async fn read_partial_block(
    read_file: &BufferedFile,
    path: &Path,
    size: u64,
) -> Result<Vec<u8>, IoError> {
    let block_start = crate::appender::align_down(size);
    if block_start == size {
        return Ok(Vec::new());
    }
    let r = read_file
        .read_at(block_start, (size - block_start) as usize)
        .await
        .map_err(|e| IoError::new("reading last block", path, e))?;
    Ok(r.to_vec())
}

/// Deletes the `.log`, `.index`, `.timeindex` and `.txnindex` of the segment at `base_offset`;
/// files already gone are fine.
pub async fn delete_segment_files(dir: &Path, base_offset: Offset) -> Result<(), IoError> {
    for suffix in [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ] {
        remove_if_present(&segment_file(dir, base_offset, suffix)).await?;
    }
    Ok(())
}

/// Deletes `path`; a file already gone is fine.
pub(crate) async fn remove_if_present(path: &Path) -> Result<(), IoError> {
    let removed = crate::helper_thread::on_helper_thread(glommio::io::remove(path)).await;
    absent_is_fine(removed, "deleting", path)
}

/// The result of a file operation on `path`, where the file being gone already is fine.
pub(crate) fn absent_is_fine<E>(
    result: Result<(), E>,
    what: &'static str,
    path: &Path,
) -> Result<(), IoError>
where
    std::io::Error: From<E>,
{
    match result.map_err(std::io::Error::from) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IoError::new(what, path, e)),
        _ => Ok(()),
    }
}

/// Opens a segment file for O_DIRECT appends, cut to `size` (dropping torn or truncated
/// bytes and preallocation) and synced.
pub async fn open_trimmed(
    io: &dyn SegmentIo,
    path: &Path,
    size: u64,
) -> Result<Rc<dyn SegmentFile>, IoError> {
    let file = io
        .open(path)
        .await
        .map_err(|e| IoError::new("opening segment for appends", path, e))?;
    file.truncate(size)
        .await
        .map_err(|e| IoError::new("trimming", path, e))?;
    file.fdatasync()
        .await
        .map_err(|e| IoError::new("syncing", path, e))?;
    Ok(file)
}

/// Base offsets of the `.log` files in `dir`, sorted; removes leftover temporary files.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<Offset>, OpenError> {
    // Listing a directory has no io_uring operation; this runs once per log open.
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("listing", dir, e))?;
    let mut bases = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("listing", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".tmp") {
            std::fs::remove_file(entry.path())
                .map_err(|e| IoError::new("removing", entry.path(), e))?;
            continue;
        }
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            return Err(OpenError::Layout {
                path: entry.path(),
                reason: "a .log file not named by a 20-digit base offset".into(),
            });
        }
        let base: i64 = stem.parse().map_err(|_| OpenError::Layout {
            path: entry.path(),
            reason: "base offset does not fit i64".into(),
        })?;
        bases.push(Offset(base));
    }
    bases.sort();
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_shrunk_in_steps_then_removed_and_one_already_gone_is_fine() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("00000000000000000000.log");
                // Sparse: three steps and a remainder, no blocks to write first.
                let len = 3 * DELETE_SHRINK_STEP_BYTES + 4096;
                std::fs::File::create(&path).unwrap().set_len(len).unwrap();
                shrink_and_remove(&path).await.unwrap();
                assert!(!path.exists());
                shrink_and_remove(&path).await.unwrap();
                let not_a_file = dir.path().join("a-directory");
                std::fs::create_dir(&not_a_file).unwrap();
                let e = shrink_and_remove(&not_a_file)
                    .await
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("a-directory"), "{e}");
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
