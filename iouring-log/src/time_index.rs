//! The sparse time index of one segment, Kafka's `.timeindex` format: 12-byte big-endian
//! entries `(timestamp i64, relative offset u32)`. An entry says: up to this offset, the largest
//! timestamp seen in the segment is this one (Kafka's "max timestamp so far" and the last offset
//! of the batch that carried it). Timestamps strictly increase; offsets never decrease.

use crate::limits::{INDEX_ENTRIES_MAX, TIME_INDEX_ENTRY_BYTES};
use crate::offset_index::IndexCorruption;
use crate::types::{RelativeOffset, TimestampMs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    pub timestamp: TimestampMs,
    pub relative_offset: RelativeOffset,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
}

impl TimeIndex {
    #[cfg(test)]
    pub fn entries(&self) -> &[TimeIndexEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn last(&self) -> Option<TimeIndexEntry> {
        self.entries.last().copied()
    }

    /// Appends an entry if its timestamp is larger than the last entry's (Kafka's
    /// `maybeAppend`).
    pub fn maybe_append(&mut self, timestamp: TimestampMs, relative_offset: RelativeOffset) {
        if let Some(last) = self.entries.last() {
            if timestamp <= last.timestamp {
                return;
            }
            assert!(
                relative_offset >= last.relative_offset,
                "time index offset {} before last entry's {}",
                relative_offset.0,
                last.relative_offset.0
            );
        }
        assert!(self.entries.len() < INDEX_ENTRIES_MAX, "time index full");
        self.entries.push(TimeIndexEntry {
            timestamp,
            relative_offset,
        });
    }

    /// The largest entry whose timestamp is `<= target`, if any.
    pub fn lookup(&self, target: TimestampMs) -> Option<TimeIndexEntry> {
        let n = self.entries.partition_point(|e| e.timestamp <= target);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    #[cfg(test)]
    /// Removes every entry for offsets `>= relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: RelativeOffset) {
        let n = self
            .entries
            .partition_point(|e| e.relative_offset < relative_offset);
        self.entries.truncate(n);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_INDEX_ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.timestamp.0.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.0.to_be_bytes());
        }
        out
    }

    /// Parses a time index file, checking its entries against the segment's offset span.
    pub fn from_bytes(
        bytes: &[u8],
        next_relative_offset: u64,
    ) -> Result<TimeIndex, IndexCorruption> {
        if !bytes.len().is_multiple_of(TIME_INDEX_ENTRY_BYTES) {
            return Err(IndexCorruption::BadSize {
                size: bytes.len(),
                entry: TIME_INDEX_ENTRY_BYTES,
            });
        }
        let mut index = TimeIndex::default();
        for (i, e) in bytes.chunks_exact(TIME_INDEX_ENTRY_BYTES).enumerate() {
            let ts = TimestampMs(i64::from_be_bytes(e[0..8].try_into().expect("8 bytes")));
            let rel = RelativeOffset(u32::from_be_bytes(e[8..12].try_into().expect("4 bytes")));
            if u64::from(rel.0) >= next_relative_offset.max(1) {
                return Err(IndexCorruption::PastEnd {
                    entry: i,
                    limit: next_relative_offset,
                });
            }
            if let Some(last) = index.entries.last() {
                if ts <= last.timestamp || rel < last.relative_offset {
                    return Err(IndexCorruption::NotIncreasing { entry: i });
                }
            }
            index.entries.push(TimeIndexEntry {
                timestamp: ts,
                relative_offset: rel,
            });
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_increasing_timestamps_and_round_trips() {
        let mut t = TimeIndex::default();
        t.maybe_append(TimestampMs(100), RelativeOffset(1));
        t.maybe_append(TimestampMs(100), RelativeOffset(2));
        t.maybe_append(TimestampMs(90), RelativeOffset(3));
        t.maybe_append(TimestampMs(200), RelativeOffset(4));
        assert_eq!(t.entries().len(), 2);
        assert_eq!(t.lookup(TimestampMs(99)), None);
        assert_eq!(
            t.lookup(TimestampMs(150)).unwrap().relative_offset,
            RelativeOffset(1)
        );
        assert_eq!(TimeIndex::from_bytes(&t.to_bytes(), 5).unwrap(), t);
        assert!(TimeIndex::from_bytes(&t.to_bytes(), 4).is_err());
        t.truncate_to_offset(RelativeOffset(4));
        assert_eq!(t.entries().len(), 1);
    }
}
