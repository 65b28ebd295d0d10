//! Reads: by offset (for fetches) and by timestamp (for `ListOffsets`).
//!
//! A read returns bytes of exactly one segment, starting at the batch that contains the
//! requested offset (Kafka returns whole batches; the client skips records before the offset).
//! When `max_bytes` cuts it, it ends at the last batch boundary the cut leaves whole that the
//! first batch's end or the offset index knows (Kafka's reads end inside the cut batch, whose
//! bytes the reader throws away and fetches again: with 1 MiB batches a fifth of a catching-up
//! follower's fetched bytes). Only a first batch larger than `max_bytes` is cut (or returned
//! whole under KIP-74's `min_one_batch`).

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use crate::batch::{parse_control_record, BatchHeader, ControlRecord, CONTROL_RECORD_BYTES_MAX};
use crate::error::ReadError;
use crate::limits::BATCH_HEADER_BYTES;
use crate::log::Log;
use crate::reader::{ReadSlice, SegmentView};
use crate::types::{FilePosition, Offset, TimestampMs};

/// What to send for a read.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub slices: Vec<ReadSlice>,
    /// Base offset of the first batch returned (`None` when nothing is returned).
    pub first_batch_offset: Option<Offset>,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
}

impl ReadResult {
    pub fn len(&self) -> usize {
        self.slices.iter().map(ReadSlice::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Limits of a read.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    pub max_bytes: usize,
    /// Return nothing at or beyond this offset (the high watermark for consumers).
    pub max_offset: Option<Offset>,
    /// Return the whole first batch even if it is larger than `max_bytes` (KIP-74).
    pub min_one_batch: bool,
}

impl Log {
    /// Segment views from the one that may contain `offset` onwards, plus the index hint.
    fn views_from(&self, offset: Offset) -> Result<(Vec<(Offset, SegmentView)>, u64), ReadError> {
        let st = self.inner.state.borrow();
        let (start, end) = (st.log_start_offset(), st.log_end_offset());
        if offset < start || offset > end {
            return Err(ReadError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let i = st
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        let seg = &st.segments[i];
        let hint = offset
            .relative_to(seg.base_offset)
            .and_then(|rel| seg.indexes.offset_index.lookup(rel))
            .map_or(0, |e| e.position.get());
        let views = st.segments[i..]
            .iter()
            .map(|s| (s.base_offset, s.view()))
            .collect();
        Ok((views, hint))
    }

    /// The last batch boundary in the segment at `base` that is at or before `position` and
    /// after `after`, from its offset index (whose entries are batch starts); `None` if the
    /// index knows none there.
    fn batch_boundary_before(&self, base: Offset, after: u64, position: u64) -> Option<u64> {
        let st = self.inner.state.borrow();
        let i = st
            .segments
            .binary_search_by_key(&base, |s| s.base_offset)
            .ok()?;
        let seg = &st.segments[i];
        let entries = seg.indexes.offset_index.entries();
        let n = entries.partition_point(|e| e.position.get() <= position);
        let last = entries[n.checked_sub(1)?].position.get();
        (last > after).then_some(last)
    }

    /// Reads from `offset`: the batches of one segment that contain `offset` and follow it.
    ///
    /// A failed log (a write or sync failed: a full disk, say) still serves what was written
    /// before the failure, and nothing after it: reads stop at the written end.
    pub async fn read(&self, offset: Offset, opts: ReadOptions) -> Result<ReadResult, ReadError> {
        let mut opts = opts;
        if self.refusal().is_some() {
            let written = self.written_end_offset();
            opts.max_offset = Some(opts.max_offset.map_or(written, |m| m.min(written)));
        }
        let (views, mut hint) = self.views_from(offset)?;
        let (log_start_offset, log_end_offset) = (self.log_start_offset(), self.log_end_offset());
        let mut result = ReadResult {
            slices: Vec::new(),
            first_batch_offset: None,
            log_start_offset,
            log_end_offset,
        };
        if opts.max_offset.is_some_and(|m| offset >= m) {
            return Ok(result);
        }
        for (base, view) in views {
            let Some(found) = view.find_batch(hint, offset).await? else {
                hint = 0;
                continue;
            };
            if opts.max_offset.is_some_and(|m| found.base_offset >= m) {
                return Ok(result);
            }
            let first_end = found.position + u64::from(found.size_bytes);
            let end = view.size.max(first_end);
            let mut len = (opts.max_bytes as u64).min(end - found.position);
            if len < end - found.position && len > u64::from(found.size_bytes) {
                // Cut: end on a whole batch rather than inside one.
                let cut = found.position + len;
                let boundary = self
                    .batch_boundary_before(base, first_end, cut)
                    .unwrap_or(first_end);
                len = boundary - found.position;
            }
            if opts.min_one_batch {
                len = len.max(u64::from(found.size_bytes));
            }
            // A bound below the log end (a high watermark behind it) cuts the range at the
            // batch holding it. Only the bytes about to be returned are scanned: scanning to
            // the bound itself would read a whole segment's headers for a consumer far behind.
            if let Some(m) = opts.max_offset.filter(|m| *m < log_end_offset) {
                // The high watermark is usually this segment's written watermark, whose file
                // position is known: no scan at all.
                let limit = match view.position_of_written(m) {
                    Some(position) => Some(position),
                    None => {
                        let range_end = found.position + len;
                        let limit = view.find_batch_before(found.position, m, range_end).await?;
                        limit.map(|b| b.position)
                    }
                };
                if let Some(position) = limit {
                    len = len.min(position.max(first_end) - found.position);
                }
            }
            result.slices = view.slices(found.position, found.position + len);
            result.first_batch_offset = Some(found.base_offset);
            return Ok(result);
        }
        Ok(result)
    }

    /// Calls `visit` with the header of every batch from the one holding `from` up to the log
    /// end, in offset order (Kafka rebuilds its producer state this way after its last
    /// snapshot), and with the control record of a control batch (a transaction marker). Reads
    /// only the fixed headers and the control records; their CRCs were checked on append or
    /// recovery.
    pub async fn for_each_batch_header(
        &self,
        from: Offset,
        mut visit: impl FnMut(&BatchHeader, Option<ControlRecord>),
    ) -> Result<(), ReadError> {
        let from = from.max(self.log_start_offset()).min(self.log_end_offset());
        let (views, mut position) = self.views_from(from)?;
        for (_, view) in views {
            let mut target = from;
            loop {
                let Some(found) = view.find_batch(position, target).await? else {
                    break;
                };
                let corrupt = |source| ReadError::Corrupt {
                    path: view.path.as_ref().clone(),
                    position: found.position,
                    source,
                };
                let bytes = view
                    .copy_bytes(found.position, found.position + BATCH_HEADER_BYTES as u64)
                    .await?;
                let header = BatchHeader::parse(&bytes).map_err(corrupt)?;
                let control = if header.is_control() {
                    let len = (BATCH_HEADER_BYTES + CONTROL_RECORD_BYTES_MAX)
                        .min(header.size_bytes as usize);
                    let bytes = view
                        .copy_bytes(found.position, found.position + len as u64)
                        .await?;
                    Some(parse_control_record(&bytes).map_err(corrupt)?)
                } else {
                    None
                };
                visit(&header, control);
                position = found.position + u64::from(found.size_bytes);
                target = header.next_offset();
            }
            position = 0;
        }
        Ok(())
    }

    /// The log's largest record timestamp and the last offset of the first batch that holds
    /// it (Kafka's `maxTimestampSoFar` of the segment with the largest one, the earliest such
    /// segment); `None` for a log with no record. ListOffsets' MAX_TIMESTAMP finds the record
    /// inside that batch.
    pub fn max_timestamp_batch(&self) -> Option<(TimestampMs, Offset)> {
        let st = self.inner.state.borrow();
        let start = st.log_start_offset();
        let mut best: Option<(TimestampMs, Offset)> = None;
        for s in st.segments.iter().filter(|s| s.next_offset > start) {
            if let Some((ts, last)) = s.indexes.max_timestamp_so_far {
                if best.is_none_or(|(b, _)| ts > b) {
                    best = Some((ts, last));
                }
            }
        }
        best
    }

    /// Kafka's `fetchOffsetByTimestamp`: the first offset whose record timestamp is `>= ts`,
    /// with that timestamp; `None` if every record is older.
    pub async fn offset_for_timestamp(
        &self,
        ts: TimestampMs,
    ) -> Result<Option<(Offset, TimestampMs)>, ReadError> {
        let candidates: Vec<(SegmentView, u64)> = {
            let st = self.inner.state.borrow();
            let start = st.log_start_offset();
            st.segments
                .iter()
                .filter(|s| s.largest_timestamp().is_some_and(|largest| largest >= ts))
                .map(|s| {
                    let from = s
                        .indexes
                        .time_index
                        .lookup(ts)
                        .map_or(s.base_offset, |e| e.relative_offset.absolute(s.base_offset))
                        .max(start);
                    let pos = from
                        .relative_to(s.base_offset)
                        .and_then(|rel| s.indexes.offset_index.lookup(rel))
                        .map_or(FilePosition(0), |e| e.position);
                    (s.view(), pos.get())
                })
                .collect()
        };
        let start = self.log_start_offset();
        for (view, position) in candidates {
            if let Some(found) = find_by_timestamp(&view, position, ts, start).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

/// Scans batches from `position` for the first record with timestamp `>= ts` and offset
/// `>= start`, decoding records only of the batch whose max timestamp qualifies.
async fn find_by_timestamp(
    view: &SegmentView,
    mut position: u64,
    ts: TimestampMs,
    start: Offset,
) -> Result<Option<(Offset, TimestampMs)>, ReadError> {
    loop {
        let Some(found) = view.find_batch(position, start).await? else {
            return Ok(None);
        };
        let bytes = view
            .copy_bytes(found.position, found.position + u64::from(found.size_bytes))
            .await?;
        let header = BatchHeader::parse_validated(&bytes).map_err(|source| ReadError::Corrupt {
            path: view.path.as_ref().clone(),
            position: found.position,
            source,
        })?;
        if header.max_timestamp >= ts {
            let mut buf = Bytes::from(bytes);
            let set = RecordBatchDecoder::decode(&mut buf).map_err(|e| ReadError::Corrupt {
                path: view.path.as_ref().clone(),
                position: found.position,
                source: crate::batch::BatchError::Undecodable {
                    reason: e.to_string(),
                },
            })?;
            for r in set.records {
                if r.timestamp >= ts.0 && r.offset >= start.0 {
                    return Ok(Some((Offset(r.offset), TimestampMs(r.timestamp))));
                }
            }
        }
        position = found.position + u64::from(found.size_bytes);
    }
}
