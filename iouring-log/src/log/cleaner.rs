//! The log cleaner (Kafka's `LogCleaner`): in a log with `compact` in its `cleanup.policy`,
//! keeps the latest record of every key and drops the older ones, in sealed segments only.
//!
//! One cleaning of a log, as in Kafka:
//! 1. **What may be cleaned**: sealed segments from the first, up to the first segment that is
//!    active, reaches the `upper_bound` (the high watermark; the caller lowers it further where
//!    it must), or holds a record younger than `min.compaction.lag.ms`. The part below the
//!    cleaner checkpoint (`cleaner-offset-checkpoint`) is clean, the rest dirty. The log is
//!    cleaned when its dirty bytes are at least `min.cleanable.dirty.ratio` of the cleanable
//!    ones, or a dirty segment is older than `max.compaction.lag.ms`.
//! 2. **The offset map**: every key in the dirty part with the offset of its latest record,
//!    up to the map's memory (`log.cleaner.dedupe.buffer.size`, shared by the node's shards;
//!    at least one segment is always mapped): the cleaning ends where the map ends.
//! 3. **Rewriting**: the segments from the first up to there, in groups of consecutive
//!    segments that fit one segment (`segment.bytes`), each group into one new segment named
//!    after its first. A record stays when its key's latest offset is its own (or its key is
//!    not in the map: a key not seen since); unkeyed records go (a compacted topic refuses
//!    them, older ones are dropped); a tombstone (null value) goes once it is in the clean
//!    part and its batch is older than `delete.retention.ms`. A transaction marker (COMMIT or
//!    ABORT control batch) goes, as in Kafka, once none of its transaction's data is left —
//!    the cleaning walked no batch of that transaction before it, so the data went in an
//!    earlier cleaning — and it is in the clean part and older than `delete.retention.ms`; an
//!    ABORT marker's `.txnindex` entry goes with it (a read_committed consumer given the entry
//!    without the marker would skip the producer's later records). A batch whose records all stay
//!    is copied as it is; one that loses some is rewritten with the same header fields (base
//!    offset, last offset delta, timestamps, producer, leader epoch, compression) around the
//!    records that stay, which are copied byte for byte; a batch that loses all goes.
//!
//! Crash safety (the files, in order): the new segment is written to `<base>.log.cleaned`, its
//! indexes to `<base>.index.cleaned` and `<base>.timeindex.cleaned`, all synced; the cleaner
//! checkpoint moves past the group; then, under the log's mutation permit, the segment file is
//! renamed to `<base>.log.swap` and the directory synced: **the commit**. The group's old
//! files are renamed to `*.deleted` (readers holding them keep reading the old bytes; they are
//! removed later), the indexes and the swap file take their final names, and the directory is
//! synced again. Opening a log
//! finishes what a crash interrupted ([`finish_interrupted_cleaning`]): a `.cleaned` file is
//! removed (the old segments stand), a `.swap` file replaces every segment its offsets cover,
//! `.deleted` files go.
//!
//! The cleaner reads through the shard's read cache and writes with buffered I/O; it yields
//! to the shard's other tasks between batches and, with `io_bytes_per_second`, sleeps to keep
//! its reads and writes under that rate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use glommio::io::BufferedFile;

use crate::batch::BatchHeader;
use crate::checkpoint::{
    replace_file_durably, sync_dir, write_checkpoint, write_file_durably, CLEANER_OFFSET_FILE,
};
use crate::config::LogConfig;
use crate::error::{FlushError, IoError, OpenError, ReadError};
use crate::helper_thread::on_helper_thread;
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::limits::{BATCH_HEADER_BYTES, DELETE_READERS_WAIT_MAX};
use crate::log::Log;

use crate::read_cache::CachedSegment;
use crate::reader::SegmentView;
use crate::records::{batch_records, rebuild_batch, BatchRecords, Codec, Compression, RawRecord};
use crate::recovery::{scan_segment, Gaps};
use crate::segment::{
    delete_segment_files, list_segments, remove_if_present, rename_if_present, segment_file,
    shrink_and_remove, with_suffix, Segment, SegmentIndexes, SegmentState, DELETED_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::txn_index::{self, AbortedTxnEntry, TXN_INDEX_SUFFIX};
use crate::types::Offset;

/// Suffix of a new segment being written.
const CLEANED: &str = ".cleaned";
/// Suffix of a new segment committed but not yet in place.
const SWAP: &str = ".swap";
/// Bytes read at once while walking a segment's batches: small enough that an append's write
/// queued behind one read waits well under a millisecond.
const READ_WINDOW: usize = 256 << 10;
/// Bytes buffered before a write of the new segment.
const WRITE_CHUNK: usize = 1 << 20;
/// Memory one key takes in the offset map beyond its bytes (hash table slot, offset).
const MAP_ENTRY_OVERHEAD: usize = 48;
/// The longest the cleaner runs before it lets the shard's other task queues run: glommio
/// preempts a queue only after 100 ms when no latency-sensitive queue waits, and produce
/// requests waiting that long is what the cleaner must never cause.
const CPU_SLICE: Duration = Duration::from_micros(500);

/// The node's limits on its cleaners, per shard.
#[derive(Debug, Clone, Copy)]
pub struct CleanerLimits {
    /// Memory of the offset map (the shard's share of `log.cleaner.dedupe.buffer.size`).
    pub map_bytes: usize,
    /// Reads plus writes per second (the shard's share of
    /// `log.cleaner.io.max.bytes.per.second`); `None`: unthrottled.
    pub io_bytes_per_second: Option<u64>,
}

/// What one cleaning did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanStats {
    /// The dirty part cleaned: `[first_dirty, cleaned_to)`.
    pub first_dirty: Offset,
    pub cleaned_to: Offset,
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_read: u64,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    pub unkeyed_removed: u64,
    pub batches_rewritten: u64,
    pub batches_removed: u64,
    /// Transaction markers removed (their transactions' data gone, `delete.retention.ms` past).
    pub markers_removed: u64,
}

/// How dirty a log is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dirtiness {
    pub first_dirty: Offset,
    pub first_uncleanable: Offset,
    pub cleanable_bytes: u64,
    pub dirty_bytes: u64,
    /// A dirty segment is older than `max.compaction.lag.ms`.
    pub overdue: bool,
}

impl Dirtiness {
    pub fn ratio(&self) -> f64 {
        if self.cleanable_bytes == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / self.cleanable_bytes as f64
        }
    }

    /// Whether the log should be cleaned now.
    pub fn due(&self, min_ratio: f64) -> bool {
        self.dirty_bytes > 0 && (self.overdue || self.ratio() >= min_ratio)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Flush(#[from] FlushError),
    #[error("segment {path}: batch at position {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
}

/// A sealed segment as the cleaner saw it.
#[derive(Clone)]
struct Snap {
    view: SegmentView,
    base: Offset,
    next: Offset,
    size: u64,
}

impl Log {
    /// Whether a segment from `base` may have offset gaps (cleaned, or in a compacted log).
    pub(crate) fn gaps_in(&self, base: Offset) -> Gaps {
        let compacted = self.inner.config.get().compaction.compact;
        Gaps::in_segment(base, compacted, self.cleaned_below())
    }

    /// The cleaner checkpoint: segments below it are cleaned.
    pub fn cleaned_below(&self) -> Offset {
        self.inner.state.borrow().cleaned_below
    }

    /// How dirty the log is; `None` when it is not compacted or has nothing cleanable.
    pub fn dirtiness(&self, now_ms: i64, upper_bound: Offset) -> Option<Dirtiness> {
        self.cleanable(now_ms, upper_bound).map(|(_, d)| d)
    }

    fn cleanable(&self, now_ms: i64, upper_bound: Offset) -> Option<(Vec<Snap>, Dirtiness)> {
        let cfg = self.inner.config.get().compaction;
        if !cfg.compact || self.refusal().is_some() {
            return None;
        }
        let st = self.inner.state.borrow();
        let mut snaps = Vec::new();
        for s in &st.segments {
            let young = s
                .largest_timestamp()
                .is_some_and(|ts| now_ms - ts.0 < cfg.min_compaction_lag_ms);
            if !s.is_sealed() || s.next_offset > upper_bound || young {
                break;
            }
            snaps.push(Snap {
                view: s.view(),
                base: s.base_offset,
                next: s.next_offset,
                size: s.size,
            });
        }
        let first_uncleanable = st
            .segments
            .get(snaps.len())
            .map_or(st.log_end_offset(), |s| s.base_offset);
        let first_dirty = st.cleaned_below.max(st.segments[0].base_offset);
        if snaps.is_empty() || first_dirty >= first_uncleanable {
            return None;
        }
        let dirty: Vec<&Snap> = snaps.iter().filter(|s| s.base >= first_dirty).collect();
        let overdue = cfg.max_compaction_lag_ms.is_some_and(|lag| {
            st.segments
                .iter()
                .filter(|s| s.base_offset >= first_dirty && s.base_offset < first_uncleanable)
                .any(|s| s.rolling_timestamp_ms > 0 && now_ms - s.rolling_timestamp_ms > lag)
        });
        let d = Dirtiness {
            first_dirty,
            first_uncleanable,
            cleanable_bytes: snaps.iter().map(|s| s.size).sum(),
            dirty_bytes: dirty.iter().map(|s| s.size).sum(),
            overdue,
        };
        drop(st);
        Some((snaps, d))
    }

    /// Cleans the log if it is due (see the module doc); `None` when it was not. `stop` is
    /// asked between segments and groups: when it says so, the cleaning ends early (what is
    /// done stays done).
    pub async fn clean(
        &self,
        now_ms: i64,
        upper_bound: Offset,
        limits: &CleanerLimits,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<CleanStats>, CleanError> {
        // Only sealed segments are cleaned: let the seals of recent rolls finish first.
        self.wait_for_seals().await?;
        let Some((snaps, d)) = self.cleanable(now_ms, upper_bound) else {
            return Ok(None);
        };
        let cfg = self.inner.config.get();
        if !d.due(cfg.compaction.min_cleanable_dirty_ratio) {
            return Ok(None);
        }
        let mut throttle = Throttle::new(limits.io_bytes_per_second);
        let mut stats = CleanStats {
            first_dirty: d.first_dirty,
            ..CleanStats::default()
        };
        // Aborted transactions' batches count for nothing: they neither supersede a key's
        // record nor stay (Kafka's cleaner drops them too).
        let aborted = Aborted(self.aborted_txns(Offset(0), Offset(i64::MAX)));
        // The offset map over the dirty part, as far as it fits.
        let mut map = OffsetMap::new(limits.map_bytes);
        let mut end = d.first_dirty;
        for s in snaps.iter().filter(|s| s.base >= d.first_dirty) {
            if end > d.first_dirty && (map.full() || stop()) {
                break;
            }
            let mut batches = SegmentBatches::new(&s.view);
            while let Some(batch) = batches.next_decoded(&mut throttle).await? {
                if aborted.holds(&batch.header) {
                    continue;
                }
                let records = &batch.records;
                for r in &records.records {
                    if let Some(key) = r.key(&records.bytes) {
                        map.put(key, r.offset);
                    }
                }
            }
            end = base_after(&snaps, s.base).unwrap_or(d.first_uncleanable);
        }
        stats.cleaned_to = end;
        let to_clean: Vec<Snap> = snaps.into_iter().filter(|s| s.base < end).collect();
        stats.segments_before = to_clean.len();
        stats.bytes_before = to_clean.iter().map(|s| s.size).sum();
        let rules = Rules {
            map: &map,
            aborted: &aborted,
            first_dirty: d.first_dirty,
            tombstone_horizon: now_ms - cfg.compaction.delete_retention_ms,
        };
        // Carried across the groups: a transaction's data may lie in an earlier group than its
        // marker.
        let mut markers = Markers::default();
        for group in group_by_size(&to_clean, cfg.segment_bytes) {
            if stats.segments_after > 0 && stop() {
                break;
            }
            let last = group.last().expect("groups are not empty").base;
            let group_end = base_after(&to_clean, last).unwrap_or(end);
            let cleaned = self
                .write_cleaned(&group, &rules, &mut markers, &mut stats, &mut throttle)
                .await?;
            stats.bytes_after += cleaned.size;
            stats.segments_after += 1;
            if !self.swap_in(cleaned, &group, group_end).await? {
                tracing::info!(log = %self.inner.dir.display(), "log changed while it was cleaned; cleaning stops here");
                break;
            }
        }
        tracing::info!(
            log = %self.inner.dir.display(),
            first_dirty = stats.first_dirty.0,
            cleaned_to = stats.cleaned_to.0,
            segments = format!("{} -> {}", stats.segments_before, stats.segments_after),
            bytes = format!("{} -> {}", stats.bytes_before, stats.bytes_after),
            records_removed = stats.records_removed,
            tombstones_removed = stats.tombstones_removed,
            markers_removed = stats.markers_removed,
            "log cleaned"
        );
        Ok(Some(stats))
    }

    /// Writes the cleaned copy of `group` to `<first base>.log.cleaned`, synced.
    async fn write_cleaned(
        &self,
        group: &[Snap],
        rules: &Rules<'_>,
        markers: &mut Markers,
        stats: &mut CleanStats,
        throttle: &mut Throttle,
    ) -> Result<CleanedSegment, CleanError> {
        let base = group[0].base;
        let path = with_suffix(&segment_file(&self.inner.dir, base, LOG_SUFFIX), CLEANED);
        let interval = self.inner.config.get().index_interval_bytes;
        let mut out = CleanedWriter::create(path, base, interval).await?;
        for s in group {
            let mut batches = SegmentBatches::new(&s.view);
            while let Some(batch) = batches.next_decoded(throttle).await? {
                let DecodedBatch {
                    position,
                    bytes,
                    header,
                    records,
                } = batch;
                stats.records_read += records.records.len() as u64;
                if header.is_control() {
                    if markers.removable(&header, rules) {
                        stats.markers_removed += 1;
                        stats.batches_removed += 1;
                    } else {
                        out.push(&header, bytes).await?;
                    }
                    continue;
                }
                markers.data(&header);
                if rules.aborted.holds(&header) {
                    stats.records_removed += records.records.len() as u64;
                    stats.batches_removed += 1;
                    continue;
                }
                let keep: Vec<&RawRecord> = records
                    .records
                    .iter()
                    .filter(|r| {
                        let (kept, why) = rules.keep(r, &records.bytes, &header);
                        match why {
                            Removed::Kept => {}
                            Removed::Superseded => stats.records_removed += 1,
                            Removed::Tombstone => {
                                stats.records_removed += 1;
                                stats.tombstones_removed += 1;
                            }
                            Removed::Unkeyed => {
                                stats.records_removed += 1;
                                stats.unkeyed_removed += 1;
                            }
                        }
                        kept
                    })
                    .collect();
                if keep.len() == records.records.len() {
                    out.push(&header, bytes).await?;
                } else if keep.is_empty() {
                    stats.batches_removed += 1;
                } else {
                    let codec = Codec::of(&header)
                        .map_err(|reason| corrupt(&s.view, position, reason.to_string()))?;
                    let same = Compression { codec, level: None };
                    let rebuilt = rebuild_batch(&bytes, &records.bytes, &keep, same)
                        .map_err(|reason| corrupt(&s.view, position, reason.to_string()))?;
                    let h = BatchHeader::parse_validated(&rebuilt)
                        .map_err(|e| corrupt(&s.view, position, e.to_string()))?;
                    stats.batches_rewritten += 1;
                    throttle.spent(rebuilt.len()).await;
                    out.push(&h, rebuilt).await?;
                }
            }
        }
        let mut cleaned = out.finish().await?;
        cleaned.markers_removed = std::mem::take(&mut markers.removed);
        Ok(cleaned)
    }

    /// Where `group` starts in the log's segments, if they are all still there as the cleaner
    /// saw them (retention or truncation may have taken some meanwhile).
    fn group_position(&self, group: &[Snap]) -> Option<usize> {
        let st = self.inner.state.borrow();
        let at = st
            .segments
            .iter()
            .position(|s| s.base_offset == group[0].base)?;
        let same = st.segments.len() > at + group.len()
            && group
                .iter()
                .zip(&st.segments[at..])
                .all(|(g, s)| s.base_offset == g.base && s.is_sealed() && s.size == g.size);
        same.then_some(at)
    }

    /// Puts the cleaned segment in place of `group` (see the module doc for the order of the
    /// file operations). Everything that syncs a file happens before the log's mutation permit
    /// is taken; under it (appends wait) only renames and one directory sync. `false` when the
    /// log changed meanwhile: the cleaned files are removed and the log left as it is.
    async fn swap_in(
        &self,
        cleaned: CleanedSegment,
        group: &[Snap],
        group_end: Offset,
    ) -> Result<bool, CleanError> {
        let dir = self.inner.dir.clone();
        let base = group[0].base;
        let log_path = segment_file(&dir, base, LOG_SUFFIX);
        let mut indexes = cleaned.indexes;
        indexes.maybe_append_time_entry(base);
        let index = segment_file(&dir, base, INDEX_SUFFIX);
        let time_index = segment_file(&dir, base, TIME_INDEX_SUFFIX);
        let (index_cleaned, time_cleaned) = (
            with_suffix(&index, CLEANED),
            with_suffix(&time_index, CLEANED),
        );
        let discard = || async {
            for p in [&cleaned.path, &index_cleaned, &time_cleaned] {
                remove_if_present(p).await?;
            }
            Ok::<bool, CleanError>(false)
        };
        if self.group_position(group).is_none() {
            return discard().await;
        }
        write_file_durably(&index_cleaned, indexes.offset_index.to_bytes()).await?;
        write_file_durably(&time_cleaned, indexes.time_index.to_bytes()).await?;
        // Past the checkpoint, the group's segments may have gaps (a checkpoint ahead of a
        // swap that does not happen only relaxes the checks of segments that have none).
        let checkpoint = self.cleaned_below().max(group_end);
        write_checkpoint(&dir, CLEANER_OFFSET_FILE, &[checkpoint.0.to_string()]).await?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.cleaned_below = st.cleaned_below.max(checkpoint);
        }
        // The group's aborted transaction entries, in one `.txnindex` for the cleaned segment,
        // in place before the commit: until the swap, the entries of the later segments it
        // holds lie past the base segment's end, and its load drops them (`txn_index.rs`).
        // Without the entries of the ABORT markers the cleaning removed: their data went
        // before them (a crash before the commit leaves such a marker in place without its
        // entry, which a consumer ignores: no data of the transaction is left to skip).
        let aborted: Vec<AbortedTxnEntry> = {
            let st = self.inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| group.iter().any(|g| g.base == s.base_offset))
                .flat_map(|s| s.aborted.iter().copied())
                .filter(|e| {
                    !cleaned
                        .markers_removed
                        .contains(&(e.producer_id, e.last_offset))
                })
                .collect()
        };
        if aborted != self.segment_aborted(base) {
            replace_file_durably(
                &segment_file(&dir, base, TXN_INDEX_SUFFIX),
                txn_index::to_bytes(&aborted),
            )
            .await?;
        }
        let permit = self.mutation_permit().await?;
        let Some(at) = self.group_position(group) else {
            drop(permit);
            return discard().await;
        };
        // The commit.
        let swap = with_suffix(&log_path, SWAP);
        rename(&cleaned.path, &swap).await?;
        sync_dir(&dir).await?;
        // Old files out of the way, each segment's readers pointed at where its bytes went.
        for g in group {
            for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                let from = segment_file(&dir, g.base, suffix);
                rename_if_present(&from, &with_suffix(&from, DELETED_SUFFIX)).await?;
            }
            let moved = with_suffix(&segment_file(&dir, g.base, LOG_SUFFIX), DELETED_SUFFIX);
            g.view.cached.relocate(Rc::new(moved));
            if g.base != base {
                // Its entries are in the cleaned segment's `.txnindex`, written above.
                remove_if_present(&segment_file(&dir, g.base, TXN_INDEX_SUFFIX)).await?;
            }
        }
        rename(&index_cleaned, &index).await?;
        rename(&time_cleaned, &time_index).await?;
        rename(&swap, &log_path).await?;
        let log_path = Rc::new(log_path);
        {
            let mut st = self.inner.state.borrow_mut();
            let rolling_timestamp_ms = st.segments[at + group.len() - 1].rolling_timestamp_ms;
            let segment = Segment {
                base_offset: base,
                cached: CachedSegment::new(log_path.clone()),
                log_path,
                indexes,
                size: cleaned.size,
                next_offset: group.last().expect("not empty").next,
                rolling_timestamp_ms,
                state: SegmentState::Sealed,
                aborted,
            };
            st.segments.splice(at..at + group.len(), [segment]);
            st.check();
        }
        drop(permit);
        // The final names durable (a crash before this finishes the swap at open).
        sync_dir(&dir).await?;
        // Readers that took a view of the old segments keep reading the renamed files; each
        // goes `file.delete.delay.ms` later once no fetch holds it (one still read does not
        // hold back the others).
        let delete_delay = Duration::from_millis(
            self.inner
                .config
                .get()
                .compaction
                .file_delete_delay_ms
                .max(0) as u64,
        );
        for g in group {
            let (dir, b, cached) = (dir.clone(), g.base, g.view.cached.clone());
            glommio::spawn_local(async move {
                glommio::timer::sleep(delete_delay).await;
                // The shard's read handles closed while the file still has a name, so that the
                // helper thread frees its blocks, not the shard (see `Segment::delete_files`).
                if !cached.wait_unread(DELETE_READERS_WAIT_MAX).await {
                    tracing::warn!(dir = %dir.display(), base = b.0, "replaced segment still read; removing it anyway");
                }
                cached.close_handles();
                drop(cached);
                if let Err(e) = delete_deleted(&dir, b).await {
                    tracing::warn!(dir = %dir.display(), error = %e, "removing replaced segment files");
                }
            })
            .detach();
        }
        self.inner.progress.notify_all();
        Ok(true)
    }
}

/// What the cleaner decides for each record.
/// The log's aborted transactions (its `.txnindex` entries).
struct Aborted(Vec<AbortedTxnEntry>);

impl Aborted {
    /// Whether `header`'s batch holds records of an aborted transaction: a transactional
    /// data batch of the entry's producer between its first offset and its ABORT marker (a
    /// producer's transactions do not overlap).
    fn holds(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && self.0.iter().any(|e| {
                e.producer_id == header.producer_id
                    && e.first_offset <= header.base_offset
                    && header.base_offset <= e.last_offset
            })
    }
}

/// The transactions whose data one cleaning walked: a marker stays while its transaction's
/// data may still be in the log (Kafka's `CleanedTransactionMetadata`).
#[derive(Default)]
struct Markers {
    /// Producers with a transactional data batch walked since their last marker (a producer's
    /// transactions on a partition do not overlap: its next starts after the marker).
    open: std::collections::HashSet<i64>,
    /// `(producer id, offset)` of the markers removed from the group being written.
    removed: Vec<(i64, Offset)>,
}

impl Markers {
    fn data(&mut self, header: &BatchHeader) {
        if header.is_transactional() {
            self.open.insert(header.producer_id);
        }
    }

    /// Whether the marker `header` goes; remembers it if so.
    fn removable(&mut self, header: &BatchHeader, rules: &Rules<'_>) -> bool {
        let data_walked = self.open.remove(&header.producer_id);
        let go = !data_walked
            && header.base_offset < rules.first_dirty
            && header.max_timestamp.0 <= rules.tombstone_horizon;
        if go {
            self.removed.push((header.producer_id, header.base_offset));
        }
        go
    }
}

struct Rules<'a> {
    map: &'a OffsetMap,
    aborted: &'a Aborted,
    first_dirty: Offset,
    /// Tombstones and markers in batches at or before this time, in the clean part, go.
    tombstone_horizon: i64,
}

enum Removed {
    Kept,
    Superseded,
    Tombstone,
    Unkeyed,
}

impl Rules<'_> {
    fn keep(&self, r: &RawRecord, bytes: &[u8], header: &BatchHeader) -> (bool, Removed) {
        let Some(key) = r.key(bytes) else {
            return (false, Removed::Unkeyed);
        };
        if self.map.get(key).is_some_and(|latest| latest > r.offset) {
            return (false, Removed::Superseded);
        }
        let in_clean_part = header.base_offset < self.first_dirty;
        if r.tombstone && in_clean_part && header.max_timestamp.0 <= self.tombstone_horizon {
            return (false, Removed::Tombstone);
        }
        (true, Removed::Kept)
    }
}

/// The base offset of the segment after the one from `base` among `segments`.
fn base_after(segments: &[Snap], base: Offset) -> Option<Offset> {
    segments.iter().find(|n| n.base > base).map(|n| n.base)
}

/// Groups consecutive segments whose sizes add up to at most `segment_bytes` (one segment
/// each at least) and whose offsets fit one segment's relative offsets.
fn group_by_size(segments: &[Snap], segment_bytes: u64) -> Vec<Vec<Snap>> {
    let mut groups: Vec<Vec<Snap>> = Vec::new();
    let mut size = 0u64;
    for s in segments {
        let fits = groups.last().is_some_and(|g| {
            size + s.size <= segment_bytes && s.next.0 - g[0].base.0 < i64::from(i32::MAX)
        });
        if fits {
            groups.last_mut().expect("checked").push(s.clone());
            size += s.size;
        } else {
            groups.push(vec![s.clone()]);
            size = s.size;
        }
    }
    groups
}

/// Every key of the dirty part with its latest offset, within a memory budget.
struct OffsetMap {
    keys: HashMap<Bytes, i64>,
    bytes: usize,
    budget: usize,
}

impl OffsetMap {
    fn new(budget: usize) -> OffsetMap {
        OffsetMap {
            keys: HashMap::new(),
            bytes: 0,
            budget,
        }
    }

    fn put(&mut self, key: &[u8], offset: i64) {
        if let Some(o) = self.keys.get_mut(key) {
            *o = (*o).max(offset);
            return;
        }
        self.bytes += key.len() + MAP_ENTRY_OVERHEAD;
        self.keys.insert(Bytes::copy_from_slice(key), offset);
    }

    fn get(&self, key: &[u8]) -> Option<i64> {
        self.keys.get(key).copied()
    }

    fn full(&self) -> bool {
        self.bytes >= self.budget
    }
}

fn parse(view: &SegmentView, position: u64, bytes: &[u8]) -> Result<BatchHeader, CleanError> {
    BatchHeader::parse_validated(bytes).map_err(|e| corrupt(view, position, e.to_string()))
}

fn corrupt(view: &SegmentView, position: u64, reason: String) -> CleanError {
    CleanError::Corrupt {
        path: view.path.as_ref().clone(),
        position,
        reason,
    }
}

/// One batch of a segment as the cleaner reads it.
struct DecodedBatch {
    position: u64,
    bytes: Vec<u8>,
    header: BatchHeader,
    records: BatchRecords,
}

/// The batches of a sealed segment in order, read a window at a time with O_DIRECT, one read
/// in flight and no read-ahead: the cleaner neither floods the device's queue ahead of the
/// appenders' writes nor evicts what consumers read from the shard's read cache.
struct SegmentBatches<'a> {
    view: &'a SegmentView,
    file: Option<Rc<BufferedFile>>,
    position: u64,
    window: Vec<u8>,
    window_start: u64,
}

impl<'a> SegmentBatches<'a> {
    fn new(view: &'a SegmentView) -> Self {
        SegmentBatches {
            view,
            file: None,
            position: 0,
            window: Vec::new(),
            window_start: 0,
        }
    }

    /// `[from, to)` of the file (both within its size), read with O_DIRECT.
    async fn read(&mut self, from: u64, to: u64) -> Result<Vec<u8>, CleanError> {
        const ALIGN: u64 = crate::limits::DIRECT_IO_ALIGNMENT as u64;
        // Where the bytes are now (a replaced segment's file moves to `.deleted`).
        let path = self.view.cached.path();
        let file = match &self.file {
            Some(f) => f.clone(),
            None => {
                let mut options = glommio::io::OpenOptions::new();
                options.read(true).custom_flags(libc::O_DIRECT);
                let f = on_helper_thread(options.buffered_open(path.as_path()))
                    .await
                    .map(Rc::new)
                    .map_err(|e| IoError::new("opening for cleaning", path.as_path(), e))?;
                self.file = Some(f.clone());
                f
            }
        };
        let start = from / ALIGN * ALIGN;
        let len = (to - start).div_ceil(ALIGN) * ALIGN;
        let read = on_helper_thread(file.read_at(start, len as usize))
            .await
            .map_err(|e| {
                IoError::new(
                    "reading for cleaning",
                    path.as_path(),
                    std::io::Error::from(e),
                )
            })?;
        let (a, b) = ((from - start) as usize, (to - start) as usize);
        if read.len() < b {
            let short = std::io::Error::other(format!(
                "short read at {start}: {} of {b} bytes",
                read.len()
            ));
            return Err(IoError::new("reading for cleaning", path.as_path(), short).into());
        }
        Ok(read[a..b].to_vec())
    }

    /// The next batch, validated and its records decompressed and found; the bytes read go on
    /// `throttle`'s account. `None` at the segment's end.
    async fn next_decoded(
        &mut self,
        throttle: &mut Throttle,
    ) -> Result<Option<DecodedBatch>, CleanError> {
        let Some((position, bytes)) = self.next().await? else {
            return Ok(None);
        };
        throttle.spent(bytes.len()).await;
        let header = parse(self.view, position, &bytes)?;
        let records = batch_records(&bytes, &header)
            .map_err(|reason| corrupt(self.view, position, reason.to_string()))?;
        Ok(Some(DecodedBatch {
            position,
            bytes,
            header,
            records,
        }))
    }

    /// The next batch's position and bytes; `None` at the segment's end.
    async fn next(&mut self) -> Result<Option<(u64, Vec<u8>)>, CleanError> {
        let size = self.view.size;
        if self.position >= size {
            return Ok(None);
        }
        let (_, len) = {
            let head = self.bytes(BATCH_HEADER_BYTES).await?;
            crate::batch::peek_size(head)
                .map_err(|e| corrupt(self.view, self.position, e.to_string()))?
        };
        let bytes = self.bytes(len as usize).await?.to_vec();
        if bytes.len() < len as usize {
            return Err(corrupt(
                self.view,
                self.position,
                format!("batch of {len} bytes runs past the segment's end"),
            ));
        }
        let at = self.position;
        self.position += u64::from(len);
        Ok(Some((at, bytes)))
    }

    /// Up to `n` bytes from the current position (fewer at the segment's end).
    async fn bytes(&mut self, n: usize) -> Result<&[u8], CleanError> {
        let from = self.position;
        let have = from >= self.window_start
            && from + n as u64 <= self.window_start + self.window.len() as u64;
        if !have {
            let to = (from + n.max(READ_WINDOW) as u64).min(self.view.size);
            self.window = self.read(from, to).await?;
            self.window_start = from;
        }
        let at = (from - self.window_start) as usize;
        let to = (at + n).min(self.window.len());
        Ok(&self.window[at..to])
    }
}

/// A new segment written by the cleaner, synced.
struct CleanedSegment {
    path: PathBuf,
    size: u64,
    indexes: SegmentIndexes,
    /// `(producer id, offset)` of the transaction markers left out.
    markers_removed: Vec<(i64, Offset)>,
}

/// Writes a new segment file with buffered I/O, building its indexes.
struct CleanedWriter {
    file: BufferedFile,
    path: PathBuf,
    base: Offset,
    interval: u64,
    pending: Vec<u8>,
    size: u64,
    written: u64,
    indexes: SegmentIndexes,
}

impl CleanedWriter {
    async fn create(path: PathBuf, base: Offset, interval: u64) -> Result<Self, IoError> {
        let file = BufferedFile::create(&path)
            .await
            .map_err(|e| IoError::new("creating cleaned segment", &path, e))?;
        Ok(CleanedWriter {
            file,
            path,
            base,
            interval,
            pending: Vec::with_capacity(WRITE_CHUNK),
            size: 0,
            written: 0,
            indexes: SegmentIndexes::default(),
        })
    }

    async fn push(&mut self, header: &BatchHeader, bytes: Vec<u8>) -> Result<(), IoError> {
        self.indexes
            .on_batch(self.base, header, self.size, self.interval);
        self.size += bytes.len() as u64;
        self.pending.extend_from_slice(&bytes);
        if self.pending.len() >= WRITE_CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), IoError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let buf = std::mem::replace(&mut self.pending, Vec::with_capacity(WRITE_CHUNK));
        let len = buf.len();
        let n = self
            .file
            .write_at(buf, self.written)
            .await
            .map_err(|e| IoError::new("writing cleaned segment", &self.path, e))?;
        if n != len {
            let short = std::io::Error::other(format!("short write: {n} of {len} bytes"));
            return Err(IoError::new("writing cleaned segment", &self.path, short));
        }
        self.written += len as u64;
        Ok(())
    }

    async fn finish(mut self) -> Result<CleanedSegment, IoError> {
        self.flush().await?;
        self.file
            .fdatasync()
            .await
            .map_err(|e| IoError::new("syncing cleaned segment", &self.path, e))?;
        self.file
            .close()
            .await
            .map_err(|e| IoError::new("closing cleaned segment", &self.path, e))?;
        Ok(CleanedSegment {
            path: self.path,
            size: self.size,
            indexes: self.indexes,
            markers_removed: Vec::new(),
        })
    }
}

/// Paces the cleaner: at most [`CPU_SLICE`] of work before the shard's other task queues get
/// to run, and with a rate, reads and writes kept under it (after each step it sleeps as long
/// as the bytes so far are ahead of the rate).
struct Throttle {
    rate: Option<u64>,
    start: Instant,
    bytes: u64,
    slice_start: Instant,
}

impl Throttle {
    fn new(rate: Option<u64>) -> Throttle {
        Throttle {
            rate,
            start: Instant::now(),
            bytes: 0,
            slice_start: Instant::now(),
        }
    }

    async fn spent(&mut self, bytes: usize) {
        if self.slice_start.elapsed() >= CPU_SLICE {
            glommio::executor().yield_task_queue_now().await;
            self.slice_start = Instant::now();
        }
        let Some(rate) = self.rate.filter(|r| *r > 0) else {
            return;
        };
        self.bytes += bytes as u64;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            glommio::timer::sleep(due - elapsed).await;
            self.slice_start = Instant::now();
        }
    }
}

async fn rename(from: &Path, to: &Path) -> Result<(), IoError> {
    on_helper_thread(glommio::io::rename(from, to))
        .await
        .map_err(|e| IoError::new("renaming", from, std::io::Error::from(e)))
}

/// Removes the `.deleted` files of the segment at `base` (the log's blocks freed in steps).
async fn delete_deleted(dir: &Path, base: Offset) -> Result<(), IoError> {
    for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        remove_if_present(&with_suffix(
            &segment_file(dir, base, suffix),
            DELETED_SUFFIX,
        ))
        .await?;
    }
    shrink_and_remove(&with_suffix(
        &segment_file(dir, base, LOG_SUFFIX),
        DELETED_SUFFIX,
    ))
    .await
}

/// Finishes, when a log opens, what a crash interrupted: `.cleaned` files are removed (their
/// cleaning was not committed), a `.swap` file replaces the segments its offsets cover and
/// takes their place, and `.deleted` files go.
pub async fn finish_interrupted_cleaning(dir: &Path, config: &LogConfig) -> Result<(), OpenError> {
    // Listing a directory has no io_uring operation; this runs once per log open.
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("listing", dir, e))?;
    let mut swaps = Vec::new();
    let mut changed = false;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("listing", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(CLEANED) || name.ends_with(DELETED_SUFFIX) {
            remove_if_present(&entry.path()).await?;
            changed = true;
        } else if let Some(stem) = name.strip_suffix(&format!(".{LOG_SUFFIX}{SWAP}")) {
            match stem.parse::<i64>() {
                Ok(base) if stem.len() == 20 => swaps.push(Offset(base)),
                _ => {
                    tracing::warn!(file = %entry.path().display(), "ignoring a swap file not named by a base offset")
                }
            }
        }
    }
    swaps.sort();
    for base in swaps {
        let log_path = segment_file(dir, base, LOG_SUFFIX);
        let swap = with_suffix(&log_path, SWAP);
        let file = crate::segment::open_read_file(&swap).await?;
        let size = file
            .file_size()
            .await
            .map_err(|e| IoError::new("sizing", &swap, e))?;
        let mut scratch = LeaderEpochCache::default();
        let scan = scan_segment(
            &file,
            &swap,
            (base, size),
            config.index_interval_bytes,
            Gaps::Allowed,
            &mut scratch,
        )
        .await?;
        if let Some((position, reason)) = scan.stopped {
            // A committed swap file was synced whole: damage here is not a crash's doing.
            return Err(IoError::new(
                "finishing an interrupted cleaning",
                &swap,
                std::io::Error::other(format!("invalid at position {position}: {reason:?}")),
            )
            .into());
        }
        // Every other segment whose offsets the swap file covers is replaced by it.
        let covered: Vec<Offset> = list_segments(dir)?
            .into_iter()
            .filter(|b| *b > base && *b < scan.next_offset)
            .collect();
        for b in covered {
            delete_segment_files(dir, b).await?;
        }
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            remove_if_present(&segment_file(dir, base, suffix)).await?;
        }
        tracing::warn!(segment = %log_path.display(), "finishing a cleaning interrupted by a crash");
        rename(&swap, &log_path).await?;
        changed = true;
    }
    if changed {
        sync_dir(dir).await?;
    }
    Ok(())
}
