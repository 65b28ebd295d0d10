//! Recovery: re-validating segment files batch by batch and rebuilding their indexes.
//!
//! Crash cases (see also `docs/format.md`):
//! - A torn write leaves a partial batch, or a block of zeros, at the end of the active
//!   segment: the scan stops at the first batch whose length, magic, CRC or offset continuity
//!   fails, and the log is truncated there. Nothing before the damage is dropped.
//! - Corruption in the middle of a segment after the recovery point truncates the log at the
//!   damage: later batches cannot be trusted to be contiguous, as in Kafka.
//! - Offsets must run on without gaps, except in segments the log cleaner rewrote (below the
//!   log's cleaner checkpoint) and in logs of compacted topics (a follower's copies of cleaned
//!   segments): there they must only increase ([`Gaps`]).
//! - A missing or unreadable `.index`/`.timeindex` of a segment before the recovery point is
//!   rebuilt from its `.log`.

use glommio::io::BufferedFile;

use crate::batch::{BatchError, BatchHeader};
use crate::error::IoError;
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::limits::{BATCH_HEADER_BYTES, SCAN_READ_BYTES, SEGMENT_BYTES_MAX};
use crate::segment::SegmentIndexes;
use crate::types::Offset;

/// Why a scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    Batch(BatchError),
    OffsetGap { expected: Offset, found: Offset },
    OffsetOverflow { last: Offset },
    SegmentTooLarge,
}

/// What a scan of a segment file found.
#[derive(Debug, Clone)]
pub struct ScannedSegment {
    /// Bytes of valid batches from position 0.
    pub valid_bytes: u64,
    pub next_offset: Offset,
    pub indexes: SegmentIndexes,
    pub first_batch_max_timestamp: Option<i64>,
    pub batches: u64,
    /// Where and why the scan stopped early; `None` if the whole file was valid.
    pub stopped: Option<(u64, StopReason)>,
}

/// Reads a file sequentially in large windows, handing out byte ranges by file position.
struct Window<'a> {
    file: &'a BufferedFile,
    path: &'a std::path::Path,
    file_size: u64,
    start: u64,
    bytes: Vec<u8>,
}

impl Window<'_> {
    /// Bytes `[pos, pos + n)` or fewer if the file ends first.
    async fn get(&mut self, pos: u64, n: usize) -> Result<&[u8], IoError> {
        let have = pos >= self.start && pos + n as u64 <= self.start + self.bytes.len() as u64;
        if !have {
            let want = n
                .max(SCAN_READ_BYTES)
                .min(self.file_size.saturating_sub(pos) as usize);
            let r = if want == 0 {
                Vec::new()
            } else {
                self.file
                    .read_at(pos, want)
                    .await
                    .map_err(|e| IoError::new("reading segment", self.path, e))?
                    .to_vec()
            };
            self.start = pos;
            self.bytes = r;
        }
        let from = (pos - self.start) as usize;
        let to = (from + n).min(self.bytes.len());
        Ok(&self.bytes[from..to])
    }
}

/// Whether a scan accepts offsets that skip ahead between batches: a segment the log cleaner
/// rewrote (or a follower's copy of one) has gaps where records were removed; any other
/// segment's offsets are contiguous, and a gap there is damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    Allowed,
    Damage,
}

impl Gaps {
    /// For the segment from `base` of a log that is compacted (`compacted`) or was cleaned
    /// below `cleaned_below` (its cleaner checkpoint).
    pub fn in_segment(base: Offset, compacted: bool, cleaned_below: Offset) -> Gaps {
        if compacted || base < cleaned_below {
            Gaps::Allowed
        } else {
            Gaps::Damage
        }
    }
}

/// Validates every batch of a segment file from position 0, rebuilding its indexes and
/// assigning the leader epochs its batches carry.
pub async fn scan_segment(
    file: &BufferedFile,
    path: &std::path::Path,
    (base_offset, file_size): (Offset, u64),
    interval_bytes: u64,
    gaps: Gaps,
    epochs: &mut LeaderEpochCache,
) -> Result<ScannedSegment, IoError> {
    let mut w = Window {
        file,
        path,
        file_size,
        start: 0,
        bytes: Vec::new(),
    };
    let mut out = ScannedSegment {
        valid_bytes: 0,
        next_offset: base_offset,
        indexes: SegmentIndexes::default(),
        first_batch_max_timestamp: None,
        batches: 0,
        stopped: None,
    };
    let mut pos = 0u64;
    while pos < file_size {
        let head = w.get(pos, BATCH_HEADER_BYTES).await?;
        let header = match BatchHeader::parse(head) {
            Ok(h) => h,
            Err(e) => {
                out.stopped = Some((pos, StopReason::Batch(e)));
                break;
            }
        };
        let whole = w.get(pos, header.size_bytes as usize).await?;
        if let Err(e) = BatchHeader::parse_validated(whole) {
            out.stopped = Some((pos, StopReason::Batch(e)));
            break;
        }
        if let Some(reason) = check_placement(&header, (out.next_offset, gaps), base_offset, pos) {
            out.stopped = Some((pos, reason));
            break;
        }
        out.indexes
            .on_batch(base_offset, &header, pos, interval_bytes);
        epochs.assign(header.partition_leader_epoch, header.base_offset);
        out.first_batch_max_timestamp
            .get_or_insert(header.max_timestamp.0);
        out.next_offset = header.next_offset();
        out.batches += 1;
        pos += u64::from(header.size_bytes);
        out.valid_bytes = pos;
    }
    Ok(out)
}

fn check_placement(
    header: &BatchHeader,
    (expected, gaps): (Offset, Gaps),
    base_offset: Offset,
    pos: u64,
) -> Option<StopReason> {
    let placed = match gaps {
        Gaps::Allowed => header.base_offset >= expected,
        Gaps::Damage => header.base_offset == expected,
    };
    if !placed {
        return Some(StopReason::OffsetGap {
            expected,
            found: header.base_offset,
        });
    }
    if header.last_offset().relative_to(base_offset).is_none() {
        return Some(StopReason::OffsetOverflow {
            last: header.last_offset(),
        });
    }
    if pos + u64::from(header.size_bytes) > SEGMENT_BYTES_MAX {
        return Some(StopReason::SegmentTooLarge);
    }
    None
}

/// For a trusted (sealed, before the recovery point) segment with a valid offset index: the
/// next offset, found by walking batch headers from the last index entry to the end.
pub async fn next_offset_from_index(
    file: &BufferedFile,
    path: &std::path::Path,
    base_offset: Offset,
    file_size: u64,
    start_position: u64,
) -> Result<Result<Offset, (u64, BatchError)>, IoError> {
    let mut w = Window {
        file,
        path,
        file_size,
        start: 0,
        bytes: Vec::new(),
    };
    let mut pos = start_position;
    let mut next = base_offset;
    while pos < file_size {
        let head = w.get(pos, BATCH_HEADER_BYTES).await?;
        match BatchHeader::parse(head) {
            Ok(h) if pos + u64::from(h.size_bytes) <= file_size => {
                next = h.next_offset();
                pos += u64::from(h.size_bytes);
            }
            Ok(h) => {
                let e = BatchError::Truncated {
                    needed: h.size_bytes as usize,
                    available: (file_size - pos) as usize,
                };
                return Ok(Err((pos, e)));
            }
            Err(e) => return Ok(Err((pos, e))),
        }
    }
    Ok(Ok(next))
}
