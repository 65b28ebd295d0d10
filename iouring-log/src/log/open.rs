//! Opening a log: listing its segments, trusting those wholly before the recovery point (after
//! a sanity check of their indexes), re-validating the rest batch by batch, truncating a torn
//! or corrupt tail, and re-activating the last segment for appends.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::Semaphore;

use crate::appender::{Appender, SegmentEnd};
use crate::checkpoint::{
    parse_checkpoint, read_file, sync_dir, CLEANER_OFFSET_FILE, LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE,
};
use crate::config::LogConfig;
use crate::error::{IoError, OpenError};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log::{Log, LogInner, LogState};
use crate::notify::{Notify, Progress};
use crate::offset_index::OffsetIndex;
use crate::read_cache::CachedSegment;
use crate::recovery::{next_offset_from_index, scan_segment, Gaps};
use crate::segment::{
    delete_segment_files, list_segments, open_read_file, open_trimmed, read_partial_block,
    segment_file, write_index_files, ActiveSegment, Segment, SegmentIndexes, SegmentState,
    INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::segment_io::{DirectIo, SegmentIo};
use crate::time_index::TimeIndex;
use crate::txn_index::{self, TXN_INDEX_SUFFIX};
use crate::types::Offset;

/// How a log is opened, beyond its config.
#[derive(Clone)]
pub struct LogOptions {
    /// The file operations of segment files: [`DirectIo`] (O_DIRECT on io_uring) for real,
    /// a fault-injecting one in tests.
    pub io: Rc<dyn SegmentIo>,
    /// Woken whenever this log's written or flushed watermark moves or it fails (a shard's
    /// long-polling fetches share one across its logs).
    pub progress_listener: Option<Rc<Notify>>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            io: Rc::new(DirectIo),
            progress_listener: None,
        }
    }
}

/// The offset a one-entry checkpoint file holds; 0 when it is missing or unreadable.
async fn read_offset_checkpoint(dir: &Path, name: &str) -> Result<Offset, IoError> {
    Ok(read_offset_checkpoint_as_written(dir, name)
        .await?
        .unwrap_or(Offset(0)))
}

/// The offset a checkpoint file holds; `None` when it is missing or not exactly one valid
/// offset (the file is then rewritten at the next checkpoint, whatever the value).
async fn read_offset_checkpoint_as_written(
    dir: &Path,
    name: &str,
) -> Result<Option<Offset>, IoError> {
    let bytes = read_file(&dir.join(name)).await?;
    let offset = bytes
        .and_then(|b| parse_checkpoint(&b))
        .filter(|lines| lines.len() == 1)
        .and_then(|lines| lines[0].trim().parse::<i64>().ok())
        .filter(|o| *o >= 0);
    Ok(offset.map(Offset))
}

/// The leader-epoch cache as checkpointed, and the file's entries when it was readable.
async fn read_epochs(dir: &Path) -> Result<(LeaderEpochCache, Option<Vec<String>>), IoError> {
    let bytes = read_file(&dir.join(LEADER_EPOCH_FILE)).await?;
    let lines = bytes.and_then(|b| parse_checkpoint(&b));
    let cache = lines.as_ref().and_then(|l| LeaderEpochCache::from_lines(l));
    if cache.is_none() && dir.join(LEADER_EPOCH_FILE).exists() {
        tracing::warn!(dir = %dir.display(), "leader-epoch-checkpoint unreadable; rebuilding from batches");
    }
    let as_written = cache.as_ref().and(lines);
    Ok((cache.unwrap_or_default(), as_written))
}

/// A segment before the recovery point: load and sanity-check its index files; `None` if they
/// cannot be trusted (then the caller scans it).
async fn load_trusted(dir: &Path, base: Offset) -> Result<Option<Segment>, IoError> {
    let path = segment_file(dir, base, LOG_SUFFIX);
    let read_file_handle = open_read_file(&path).await?;
    let size = read_file_handle
        .file_size()
        .await
        .map_err(|e| IoError::new("sizing", &path, e))?;
    let (Some(index_bytes), Some(time_bytes)) = (
        read_file(&segment_file(dir, base, INDEX_SUFFIX)).await?,
        read_file(&segment_file(dir, base, TIME_INDEX_SUFFIX)).await?,
    ) else {
        return Ok(None);
    };
    let Ok(offset_index) = OffsetIndex::from_bytes(&index_bytes, size) else {
        return Ok(None);
    };
    let start = offset_index
        .entries()
        .last()
        .map_or(0, |e| e.position.get());
    let Ok(next_offset) =
        next_offset_from_index(&read_file_handle, &path, base, size, start).await?
    else {
        return Ok(None);
    };
    let next_rel = (next_offset.0 - base.0) as u64;
    let Ok(time_index) = TimeIndex::from_bytes(&time_bytes, next_rel) else {
        return Ok(None);
    };
    let max_ts = time_index
        .last()
        .map(|e| (e.timestamp, e.relative_offset.absolute(base)));
    let log_path = Rc::new(path);
    Ok(Some(Segment {
        base_offset: base,
        cached: CachedSegment::new(log_path.clone()),
        log_path,
        indexes: SegmentIndexes {
            offset_index,
            time_index,
            max_timestamp_so_far: max_ts,
            ..SegmentIndexes::default()
        },
        size,
        next_offset,
        rolling_timestamp_ms: max_ts.map_or(0, |(ts, _)| ts.0),
        state: SegmentState::Sealed,
        aborted: Vec::new(),
    }))
}

/// A segment at or after the recovery point: validate every batch. Returns the segment and
/// whether the scan stopped before the end of the file (at zero padding or invalid bytes).
async fn load_scanned(
    dir: &Path,
    base: Offset,
    config: &LogConfig,
    gaps: Gaps,
    epochs: &mut LeaderEpochCache,
) -> Result<(Segment, bool), IoError> {
    let path = segment_file(dir, base, LOG_SUFFIX);
    let read_file_handle = open_read_file(&path).await?;
    let file_size = read_file_handle
        .file_size()
        .await
        .map_err(|e| IoError::new("sizing", &path, e))?;
    let scan = scan_segment(
        &read_file_handle,
        &path,
        (base, file_size),
        config.index_interval_bytes,
        gaps,
        epochs,
    )
    .await?;
    let stopped = scan.stopped.is_some();
    if let Some((position, reason)) = &scan.stopped {
        // Zero padding after the logical end is the normal state of an unclean shutdown.
        tracing::warn!(segment = %path.display(), position, ?reason, file_size, "truncating log at invalid data");
    }
    let log_path = Rc::new(path);
    let segment = Segment {
        base_offset: base,
        cached: CachedSegment::new(log_path.clone()),
        log_path,
        indexes: scan.indexes,
        size: scan.valid_bytes,
        next_offset: scan.next_offset,
        rolling_timestamp_ms: scan.first_batch_max_timestamp.unwrap_or(0),
        state: SegmentState::Sealed,
        aborted: Vec::new(),
    };
    Ok((segment, stopped))
}

/// Opens the last segment for O_DIRECT appends: trims the file to its logical size and keeps
/// the last partial block in memory.
async fn activate(
    segment: &mut Segment,
    io: &dyn SegmentIo,
    progress: Rc<Progress>,
    now_ms: i64,
) -> Result<(), IoError> {
    let path = segment.log_path.as_path();
    let file = open_trimmed(io, path, segment.size).await?;
    let partial = read_partial_block(&*open_read_file(path).await?, path, segment.size).await?;
    let end = SegmentEnd {
        size: segment.size,
        next_offset: segment.next_offset,
        partial_block: &partial,
    };
    let appender = Appender::new(file, end, progress, segment.cached.clone());
    if segment.size == 0 {
        segment.rolling_timestamp_ms = now_ms;
    }
    segment.state = SegmentState::Active(ActiveSegment::start(appender));
    Ok(())
}

impl Log {
    /// Opens (or creates) the log in `dir`, recovering it as described in the module doc.
    /// `now_ms` dates a newly created active segment.
    pub async fn open(
        dir: impl Into<PathBuf>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Log, OpenError> {
        Log::open_with(dir, config, now_ms, LogOptions::default()).await
    }

    /// [`Log::open`] with the file operations and progress listener of `options`.
    pub async fn open_with(
        dir: impl Into<PathBuf>,
        config: LogConfig,
        now_ms: i64,
        options: LogOptions,
    ) -> Result<Log, OpenError> {
        config.validate()?;
        let io = options.io;
        let progress = Rc::new(Progress::with_listener(options.progress_listener));
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| IoError::new("creating", &dir, e))?;
        // glommio's directory operations need an absolute path.
        let dir = std::path::absolute(&dir).map_err(|e| IoError::new("resolving", &dir, e))?;
        let cleaned_below = read_offset_checkpoint(&dir, CLEANER_OFFSET_FILE).await?;
        super::cleaner::finish_interrupted_cleaning(&dir, &config).await?;
        let bases = list_segments(&dir)?;
        let checkpointed_recovery_point =
            read_offset_checkpoint_as_written(&dir, RECOVERY_POINT_FILE).await?;
        let recovery_point = checkpointed_recovery_point.unwrap_or(Offset(0));
        let start_floor = read_offset_checkpoint(&dir, LOG_START_OFFSET_FILE).await?;
        let (mut epochs, checkpointed_epochs) = read_epochs(&dir).await?;
        let found = Found {
            dir: &dir,
            bases: &bases,
            recovery_point,
            cleaned_below,
            compacted: config.compaction.compact,
        };
        let mut segments = load_segments(found, io.as_ref(), &config, &mut epochs).await?;
        load_aborted(&dir, &mut segments).await?;
        if segments.is_empty() {
            let first = Segment::create(io.as_ref(), &dir, Offset(0), now_ms, progress.clone());
            segments.push(first.await?);
            sync_dir(&dir).await?;
        } else {
            let last = segments.last_mut().expect("non-empty");
            activate(last, io.as_ref(), progress.clone(), now_ms).await?;
        }
        let last = segments.last().expect("non-empty");
        if let Some(a) = last
            .appender()
            .filter(|_| config.preallocate && last.size == 0)
        {
            a.io.borrow_mut().preallocate_whole = config.segment_bytes;
        }
        let end = last.next_offset;
        epochs.truncate_from_end(end);
        epochs.truncate_from_start(segments[0].base_offset.max(start_floor).min(end));
        let state = LogState {
            segments,
            epochs,
            start_floor,
            cleaned_below,
            // Everything up to the log end was validated and the active file synced above.
            recovery_point: end,
            unflushed_records: 0,
            first_unflushed_ms: None,
            checkpointed_recovery_point,
            checkpointed_at_ms: now_ms,
            checkpointed_epochs,
            aborted_unsynced: Default::default(),
            closed: false,
        };
        state.check();
        let log = Log {
            inner: Rc::new(LogInner {
                dir,
                config: Cell::new(config),
                io,
                state: RefCell::new(state),
                mutation: Semaphore::new(1),
                sync: Semaphore::new(1),
                checkpoint: Semaphore::new(1),
                progress,
                last_seal: RefCell::new(None),
                failed: RefCell::new(None),
            }),
        };
        log.checkpoint_after_open().await;
        Ok(log)
    }

    /// Records what recovery found (recovery point, truncated epochs). Best effort: checkpoints
    /// are replaced atomically, so a failure (a full disk) leaves the older ones, which are
    /// still right — the next open re-validates more and truncates the epochs again — and must
    /// not keep a log that holds its data from opening for reads.
    /// Files that already hold what would be written (a log closed cleanly) are left alone.
    async fn checkpoint_after_open(&self) {
        let written = async {
            self.store_recovery_point_checkpoint().await?;
            self.store_epoch_checkpoint().await
        };
        if let Err(e) = written.await {
            tracing::warn!(log = %self.inner.dir.display(), error = %e, "checkpoints not updated after recovery; the older ones stand")
        }
    }
}

/// Each segment's `.txnindex` entries whose markers it holds (`txn_index.rs`).
/// A segment's offsets run up to the next one's base (a cleaned one's last batches may be
/// gone), the last one's to the log end.
async fn load_aborted(dir: &Path, segments: &mut [Segment]) -> Result<(), IoError> {
    let ends: Vec<Offset> = segments
        .iter()
        .skip(1)
        .map(|s| s.base_offset)
        .chain(segments.last().map(|s| s.next_offset))
        .collect();
    for (seg, end) in segments.iter_mut().zip(ends) {
        let path = segment_file(dir, seg.base_offset, TXN_INDEX_SUFFIX);
        // Most segments have none: a stat, not an open, for each of them.
        if !path.exists() {
            continue;
        }
        if let Some(bytes) = read_file(&path).await? {
            seg.aborted = txn_index::parse(&bytes, seg.base_offset, end);
        }
    }
    Ok(())
}

/// What a log's directory holds: its segments' base offsets and its checkpointed recovery
/// point.
#[derive(Clone, Copy)]
struct Found<'a> {
    dir: &'a Path,
    bases: &'a [Offset],
    recovery_point: Offset,
    /// The cleaner checkpoint: segments below it may have offset gaps.
    cleaned_below: Offset,
    /// A compacted topic's log: any segment may (a follower's copies of cleaned ones).
    compacted: bool,
}

impl Found<'_> {
    fn gaps_in(&self, base: Offset) -> Gaps {
        Gaps::in_segment(base, self.compacted, self.cleaned_below)
    }
}

async fn load_segments(
    found: Found<'_>,
    io: &dyn SegmentIo,
    config: &LogConfig,
    epochs: &mut LeaderEpochCache,
) -> Result<Vec<Segment>, OpenError> {
    let Found {
        dir,
        bases,
        recovery_point,
        ..
    } = found;
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        if let Some(prev) = segments.last() {
            if base < prev.next_offset {
                return Err(OpenError::Layout {
                    path: segment_file(dir, base, LOG_SUFFIX),
                    reason: format!(
                        "segment overlaps the previous one, which ends at offset {}",
                        prev.next_offset
                    ),
                });
            }
        }
        let wholly_before_recovery_point =
            bases.get(i + 1).is_some_and(|&next| next <= recovery_point);
        if wholly_before_recovery_point {
            if let Some(seg) = load_trusted(dir, base).await? {
                segments.push(seg);
                continue;
            }
            tracing::warn!(dir = %dir.display(), base_offset = base.0, "index missing or corrupt; rebuilding");
        }
        let gaps = found.gaps_in(base);
        let (mut seg, stopped) = load_scanned(dir, base, config, gaps, epochs).await?;
        let next_base = bases.get(i + 1).copied();
        // A segment before the last one is whole when its offsets run up to the next one's
        // base. It may still end in zero padding or a torn write, not trimmed yet: the crash
        // came while a background seal was finishing it. A cleaned segment may end before the
        // next base (its last records were removed), but not in damage.
        let gap = next_base
            .is_some_and(|next| seg.next_offset != next && (gaps == Gaps::Damage || stopped));
        if stopped && next_base.is_some() {
            let path = seg.log_path.as_path();
            let trimmed = open_trimmed(io, path, seg.size).await?;
            trimmed
                .close()
                .await
                .map_err(|e| IoError::new("closing", path, e))?;
        }
        if gap {
            let later = &bases[i + 1..];
            tracing::warn!(dir = %dir.display(), segments = later.len(), next_offset = seg.next_offset.0, "deleting segments after damaged data");
            for &base in later {
                delete_segment_files(dir, base).await?;
            }
            sync_dir(dir).await?;
            segments.push(seg);
            break;
        }
        if next_base.is_some() {
            let (index, time_index) = seg.mark_sealed();
            write_index_files(&seg.log_path, base, index, time_index).await?;
        }
        segments.push(seg);
    }
    Ok(segments)
}
