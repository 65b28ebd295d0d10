//! Kafka's aborted transaction index (`.txnindex`): one file per segment, holding an entry for
//! every transaction aborted by an ABORT marker in that segment, so that a `read_committed`
//! fetch can tell its consumer which producers' records in its range to drop.
//!
//! Each entry is 34 bytes, big-endian, as Kafka's `AbortedTxn`: version (i16, 0), producer id
//! (i64), first offset (i64), last offset (i64, the marker's), last stable offset (i64). Kafka's
//! `DumpLogSegments` reads these files.
//!
//! What the log knows of transactions ends here: which entries to write is decided by whoever
//! reads the batches (the broker's producer state); the log keeps them with their segment —
//! deleted, truncated and merged by cleaning with it. A segment's entries are those whose
//! marker lies in it: entries at or past the next segment's base, or the log end (a crash took
//! the marker, or a cleaning that wrote a merged file did not commit), are dropped when it is
//! loaded.

use crate::types::Offset;

pub const TXN_INDEX_SUFFIX: &str = "txnindex";
/// Bytes of one entry.
pub const TXN_INDEX_ENTRY_BYTES: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction: its producer, its first offset, the offset of its ABORT marker,
/// and the last stable offset when it was aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

impl AbortedTxnEntry {
    pub fn to_bytes(&self) -> [u8; TXN_INDEX_ENTRY_BYTES] {
        let mut b = [0u8; TXN_INDEX_ENTRY_BYTES];
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Option<AbortedTxnEntry> {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let version = i16::from_be_bytes([b[0], b[1]]);
        let entry = AbortedTxnEntry {
            producer_id: i64_at(2),
            first_offset: Offset(i64_at(10)),
            last_offset: Offset(i64_at(18)),
            last_stable_offset: Offset(i64_at(26)),
        };
        let sane = version == VERSION
            && entry.producer_id >= 0
            && entry.first_offset.0 >= 0
            && entry.first_offset <= entry.last_offset;
        sane.then_some(entry)
    }
}

/// The entries of a file's bytes whose marker lies in `[base, next_offset)`, in file order. A
/// torn last entry, or an entry that is not one (zeros of a crash), ends the file.
pub fn parse(bytes: &[u8], base: Offset, next_offset: Offset) -> Vec<AbortedTxnEntry> {
    bytes
        .chunks_exact(TXN_INDEX_ENTRY_BYTES)
        .map_while(AbortedTxnEntry::from_bytes)
        .filter(|e| e.last_offset >= base && e.last_offset < next_offset)
        .collect()
}

/// The bytes of a file holding `entries`.
pub fn to_bytes(entries: &[AbortedTxnEntry]) -> Vec<u8> {
    entries.iter().flat_map(|e| e.to_bytes()).collect()
}

/// The entries overlapping `[from, upto)` (Kafka's `collectAbortedTxns`: an entry counts when
/// its marker is at or after `from` and its first offset before `upto`), in marker order, from
/// the entries of consecutive segments.
pub fn overlapping<'a>(
    segments: impl Iterator<Item = &'a [AbortedTxnEntry]>,
    from: Offset,
    upto: Offset,
) -> Vec<AbortedTxnEntry> {
    segments
        .flat_map(|entries| entries.iter())
        .filter(|e| e.last_offset >= from && e.first_offset < upto)
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(pid: i64, first: i64, last: i64) -> AbortedTxnEntry {
        AbortedTxnEntry {
            producer_id: pid,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        }
    }

    #[test]
    fn entries_round_trip_in_kafkas_layout() {
        let entries = [e(7, 10, 20), e(8, 15, 30)];
        let bytes = to_bytes(&entries);
        assert_eq!(bytes.len(), 68);
        // version 0, producer id 7, first 10, last 20, lso 21.
        assert_eq!(&bytes[0..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &21i64.to_be_bytes());
        assert_eq!(parse(&bytes, Offset(0), Offset(100)), entries.to_vec());
    }

    #[test]
    fn torn_zeroed_or_foreign_entries_are_dropped() {
        let mut bytes = to_bytes(&[e(7, 10, 20), e(8, 15, 30), e(9, 40, 50)]);
        // The last marker is past the segment's end (a crash took it).
        assert_eq!(parse(&bytes, Offset(0), Offset(50)).len(), 2);
        // A marker before the segment (a merged file whose cleaning did not commit).
        assert_eq!(parse(&bytes, Offset(25), Offset(100)).len(), 2);
        bytes.truncate(bytes.len() - 5);
        assert_eq!(parse(&bytes, Offset(0), Offset(100)).len(), 2, "torn");
        let mut zeroed = to_bytes(&[e(7, 10, 20)]);
        zeroed.extend([0xff; 34]);
        zeroed.extend(to_bytes(&[e(8, 15, 30)]));
        assert_eq!(
            parse(&zeroed, Offset(0), Offset(100)).len(),
            1,
            "garbage ends it"
        );
    }

    #[test]
    fn a_fetch_gets_the_entries_overlapping_its_range() {
        let a = [e(1, 0, 10)];
        let b = [e(2, 5, 30), e(3, 25, 40)];
        let got = overlapping([&a[..], &b[..]].into_iter(), Offset(11), Offset(25));
        assert_eq!(got, vec![e(2, 5, 30)]);
    }
}
