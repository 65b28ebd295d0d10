//! The sparse offset index of one segment, Kafka's `.index` format: 8-byte big-endian entries
//! `(relative offset u32, file position u32)`, one per `index.interval.bytes` of log. An entry's
//! offset is the *last* offset of the batch that starts at its position (as Kafka writes it).
//!
//! The index lives in memory; the file is written whole when the segment is sealed or closed.
//! Entries are strictly increasing in both offset and position (asserted on every append).

use crate::limits::{INDEX_ENTRIES_MAX, OFFSET_INDEX_ENTRY_BYTES};
use crate::types::{FilePosition, RelativeOffset};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    pub relative_offset: RelativeOffset,
    pub position: FilePosition,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetIndexEntry>,
}

/// Why index bytes on disk cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexCorruption {
    #[error("index file size {size} is not a multiple of the entry size {entry}")]
    BadSize { size: usize, entry: usize },
    #[error("entry {entry} is not after the previous entry")]
    NotIncreasing { entry: usize },
    #[error("entry {entry} points past the end of the log ({limit})")]
    PastEnd { entry: usize, limit: u64 },
}

impl OffsetIndex {
    pub fn entries(&self) -> &[OffsetIndexEntry] {
        &self.entries
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn append(&mut self, relative_offset: RelativeOffset, position: FilePosition) {
        if let Some(last) = self.entries.last() {
            assert!(
                relative_offset > last.relative_offset && position > last.position,
                "offset index entries must increase: ({}, {}) after ({}, {})",
                relative_offset.0,
                position.0,
                last.relative_offset.0,
                last.position.0
            );
        }
        assert!(self.entries.len() < INDEX_ENTRIES_MAX, "offset index full");
        self.entries.push(OffsetIndexEntry {
            relative_offset,
            position,
        });
    }

    /// The largest entry whose offset is `<= target`, if any.
    pub fn lookup(&self, target: RelativeOffset) -> Option<OffsetIndexEntry> {
        let n = self
            .entries
            .partition_point(|e| e.relative_offset <= target);
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
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_INDEX_ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.relative_offset.0.to_be_bytes());
            out.extend_from_slice(&e.position.0.to_be_bytes());
        }
        out
    }

    /// Parses an index file, checking it fits a log of `log_size` bytes.
    pub fn from_bytes(bytes: &[u8], log_size: u64) -> Result<OffsetIndex, IndexCorruption> {
        if !bytes.len().is_multiple_of(OFFSET_INDEX_ENTRY_BYTES) {
            return Err(IndexCorruption::BadSize {
                size: bytes.len(),
                entry: OFFSET_INDEX_ENTRY_BYTES,
            });
        }
        let mut index = OffsetIndex::default();
        for (i, e) in bytes.chunks_exact(OFFSET_INDEX_ENTRY_BYTES).enumerate() {
            let rel = RelativeOffset(u32::from_be_bytes(e[0..4].try_into().expect("4 bytes")));
            let pos = FilePosition(u32::from_be_bytes(e[4..8].try_into().expect("4 bytes")));
            if pos.get() >= log_size {
                return Err(IndexCorruption::PastEnd {
                    entry: i,
                    limit: log_size,
                });
            }
            if let Some(last) = index.entries.last() {
                if rel <= last.relative_offset || pos <= last.position {
                    return Err(IndexCorruption::NotIncreasing { entry: i });
                }
            }
            index.entries.push(OffsetIndexEntry {
                relative_offset: rel,
                position: pos,
            });
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_largest_entry_not_after_target() {
        let mut idx = OffsetIndex::default();
        for i in 1..10u32 {
            idx.append(RelativeOffset(i * 10), FilePosition(i * 4096));
        }
        assert_eq!(idx.lookup(RelativeOffset(5)), None);
        assert_eq!(
            idx.lookup(RelativeOffset(10)).unwrap().position,
            FilePosition(4096)
        );
        assert_eq!(
            idx.lookup(RelativeOffset(19)).unwrap().position,
            FilePosition(4096)
        );
        assert_eq!(
            idx.lookup(RelativeOffset(1000)).unwrap().position,
            FilePosition(9 * 4096)
        );
        let bytes = idx.to_bytes();
        assert_eq!(OffsetIndex::from_bytes(&bytes, 10 * 4096).unwrap(), idx);
        assert!(OffsetIndex::from_bytes(&bytes, 9 * 4096).is_err());
        assert!(OffsetIndex::from_bytes(&bytes[..7], 1 << 20).is_err());
        idx.truncate_to_offset(RelativeOffset(30));
        assert_eq!(idx.len(), 2);
    }

    #[test]
    #[should_panic(expected = "must increase")]
    fn rejects_non_increasing_append() {
        let mut idx = OffsetIndex::default();
        idx.append(RelativeOffset(5), FilePosition(100));
        idx.append(RelativeOffset(5), FilePosition(200));
    }
}
