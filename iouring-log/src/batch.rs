//! The fixed 61-byte header of a Kafka RecordBatch (magic v2) and the checks the log makes on
//! it. The records after the header are never decoded or re-encoded here.
//!
//! ```text
//! 0  baseOffset i64          | outside the CRC: patched by the leader on append
//! 8  batchLength i32         | bytes after this field
//! 12 partitionLeaderEpoch i32| outside the CRC: patched by the leader on append
//! 16 magic i8 (= 2)
//! 17 crc u32                 | CRC-32C of bytes [21, 12 + batchLength)
//! 21 attributes i16
//! 23 lastOffsetDelta i32
//! 27 baseTimestamp i64
//! 35 maxTimestamp i64
//! 43 producerId i64
//! 51 producerEpoch i16
//! 53 baseSequence i32
//! 57 recordsCount i32
//! 61 records ...
//! ```

use crate::limits::{BATCH_BYTES_MAX, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD};
use crate::types::{LeaderEpoch, Offset, TimestampMs};

const CRC_START: usize = 21;

/// What is wrong with a batch; the position and offsets are added by the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("{available} bytes cannot hold a record batch header ({BATCH_HEADER_BYTES} bytes)")]
    TooShort { available: usize },
    #[error(
        "batch length {batch_length} is out of range (header needs 49, limit {BATCH_BYTES_MAX})"
    )]
    BadLength { batch_length: i32 },
    #[error("batch of {needed} bytes is truncated: only {available} bytes present")]
    Truncated { needed: usize, available: usize },
    #[error("record batch magic {magic} is not supported (only v2)")]
    BadMagic { magic: i8 },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("records cannot be decoded: {reason}")]
    Undecodable { reason: String },
    #[error("records count {records_count} does not match lastOffsetDelta {last_offset_delta}")]
    BadRecordCount {
        records_count: i32,
        last_offset_delta: i32,
    },
}

/// Batch attributes bit 4: transactional.
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Batch attributes bit 5: control batch.
pub const ATTR_CONTROL: i16 = 0x20;
/// Bytes after the header enough to hold a transaction marker's record (its length, attributes,
/// timestamp and offset deltas, 4-byte key and 6-byte value, no headers).
pub const CONTROL_RECORD_BYTES_MAX: usize = 48;

/// What a control batch's only record says: Kafka's `ControlRecordType` (its key: version,
/// type) and, for the transaction markers, the coordinator epoch (its value: version, epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecord {
    /// ABORT (type 0).
    Abort { coordinator_epoch: i32 },
    /// COMMIT (type 1).
    Commit { coordinator_epoch: i32 },
    /// Another type (KRaft's LEADER_CHANGE, snapshot records): no transaction meaning.
    Other { kind: i16 },
}

/// Reads the control record of a control batch from its bytes (at least the header and
/// [`CONTROL_RECORD_BYTES_MAX`] after it, or the whole batch if shorter). Control batches are
/// never compressed.
pub fn parse_control_record(batch: &[u8]) -> Result<ControlRecord, BatchError> {
    let bad = |reason: &str| BatchError::Undecodable {
        reason: format!("control record: {reason}"),
    };
    let mut r = VarintReader {
        bytes: batch
            .get(BATCH_HEADER_BYTES..)
            .ok_or_else(|| bad("no record"))?,
        at: 0,
    };
    let _length = r.varint().ok_or_else(|| bad("length"))?;
    let _attributes = r.take(1).ok_or_else(|| bad("attributes"))?;
    let _timestamp_delta = r.varint().ok_or_else(|| bad("timestamp delta"))?;
    let _offset_delta = r.varint().ok_or_else(|| bad("offset delta"))?;
    let key_len = r.varint().ok_or_else(|| bad("key length"))?;
    if key_len < 4 {
        return Err(bad("key shorter than 4 bytes"));
    }
    let key = r.take(key_len as usize).ok_or_else(|| bad("key"))?;
    let kind = i16::from_be_bytes([key[2], key[3]]);
    if kind != 0 && kind != 1 {
        return Ok(ControlRecord::Other { kind });
    }
    let value_len = r.varint().ok_or_else(|| bad("value length"))?;
    if value_len < 6 {
        return Err(bad("marker value shorter than 6 bytes"));
    }
    let value = r.take(value_len as usize).ok_or_else(|| bad("value"))?;
    let coordinator_epoch = i32_at(value, 2);
    Ok(if kind == 0 {
        ControlRecord::Abort { coordinator_epoch }
    } else {
        ControlRecord::Commit { coordinator_epoch }
    })
}

/// A transaction marker as Kafka's leader writes it for WriteTxnMarkers: one control batch,
/// transactional, of one record (key: version 0, type; value: version 0, coordinator epoch),
/// base offset 0 and leader epoch 0 (the append assigns both), no sequence.
pub fn encode_marker(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let kind: i16 = if commit { 1 } else { 0 };
    // length 16, attributes, timestamp delta 0, offset delta 0, key length 4, key, value
    // length 6, value, no headers (varints zig-zagged: 16 -> 32, 4 -> 8, 6 -> 12).
    let mut record = vec![32u8, 0, 0, 0, 8];
    record.extend(0i16.to_be_bytes());
    record.extend(kind.to_be_bytes());
    record.push(12);
    record.extend(0i16.to_be_bytes());
    record.extend(coordinator_epoch.to_be_bytes());
    record.push(0);
    let mut b = Vec::with_capacity(BATCH_HEADER_BYTES + record.len());
    b.extend(0i64.to_be_bytes());
    b.extend(((BATCH_HEADER_BYTES - 12 + record.len()) as i32).to_be_bytes());
    b.extend(0i32.to_be_bytes());
    b.push(2);
    b.extend(0u32.to_be_bytes());
    b.extend((ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    b.extend(0i32.to_be_bytes());
    b.extend(timestamp_ms.to_be_bytes());
    b.extend(timestamp_ms.to_be_bytes());
    b.extend(producer_id.to_be_bytes());
    b.extend(producer_epoch.to_be_bytes());
    b.extend((-1i32).to_be_bytes());
    b.extend(1i32.to_be_bytes());
    b.extend(record);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Reads Kafka's zig-zag varints and raw bytes.
struct VarintReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> VarintReader<'a> {
    fn varint(&mut self) -> Option<i64> {
        let mut raw: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            raw |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }
}

/// The decoded fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    /// Size of the whole batch, `batchLength + 12`.
    pub size_bytes: u32,
    pub partition_leader_epoch: LeaderEpoch,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: TimestampMs,
    pub max_timestamp: TimestampMs,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads `baseOffset` and the total batch size from the first 12 bytes, checking the length
/// is plausible. Enough to walk from batch to batch.
pub fn peek_size(bytes: &[u8]) -> Result<(Offset, u32), BatchError> {
    if bytes.len() < BATCH_LOG_OVERHEAD {
        return Err(BatchError::TooShort {
            available: bytes.len(),
        });
    }
    let batch_length = i32_at(bytes, 8);
    let min = (BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD) as i32;
    if batch_length < min || batch_length as usize + BATCH_LOG_OVERHEAD > BATCH_BYTES_MAX {
        return Err(BatchError::BadLength { batch_length });
    }
    Ok((
        Offset(i64_at(bytes, 0)),
        batch_length as u32 + BATCH_LOG_OVERHEAD as u32,
    ))
}

/// The complete batches at the start of `bytes` (a read or a fetch may end inside one), as byte
/// ranges; stops at the first batch cut short or whose length is implausible.
pub fn whole_batches(bytes: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let (_, size) = peek_size(&bytes[at..]).ok()?;
        let end = at
            .checked_add(size as usize)
            .filter(|&end| end <= bytes.len())?;
        let range = at..end;
        at = end;
        Some(range)
    })
}

impl BatchHeader {
    /// Decodes the fixed header. Checks the length field and magic, not the CRC.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        if bytes.len() < BATCH_HEADER_BYTES {
            return Err(BatchError::TooShort {
                available: bytes.len(),
            });
        }
        let (base_offset, size_bytes) = peek_size(bytes)?;
        let magic = bytes[16] as i8;
        if magic != 2 {
            return Err(BatchError::BadMagic { magic });
        }
        Ok(BatchHeader {
            base_offset,
            size_bytes,
            partition_leader_epoch: LeaderEpoch(i32_at(bytes, 12)),
            magic,
            crc: i32_at(bytes, 17) as u32,
            attributes: i16_at(bytes, 21),
            last_offset_delta: i32_at(bytes, 23),
            base_timestamp: TimestampMs(i64_at(bytes, 27)),
            max_timestamp: TimestampMs(i64_at(bytes, 35)),
            producer_id: i64_at(bytes, 43),
            producer_epoch: i16_at(bytes, 51),
            base_sequence: i32_at(bytes, 53),
            records_count: i32_at(bytes, 57),
        })
    }

    /// Decodes and fully validates one batch at the start of `bytes`: length, magic, CRC-32C
    /// over the whole batch, and the records count against `lastOffsetDelta`.
    pub fn parse_validated(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        let header = BatchHeader::parse(bytes)?;
        let size = header.size_bytes as usize;
        if bytes.len() < size {
            return Err(BatchError::Truncated {
                needed: size,
                available: bytes.len(),
            });
        }
        let computed = crc32c::crc32c(&bytes[CRC_START..size]);
        if computed != header.crc {
            return Err(BatchError::BadCrc {
                stored: header.crc,
                computed,
            });
        }
        // Compaction may leave fewer records than the offset span, never more, and a batch
        // holds at least one offset.
        if header.last_offset_delta < 0
            || header.records_count < 0
            || header.records_count > header.last_offset_delta.saturating_add(1)
        {
            return Err(BatchError::BadRecordCount {
                records_count: header.records_count,
                last_offset_delta: header.last_offset_delta,
            });
        }
        Ok(header)
    }

    pub fn last_offset(&self) -> Offset {
        Offset(self.base_offset.0 + i64::from(self.last_offset_delta))
    }

    /// Attributes bit 4: the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Attributes bit 5: a control batch (a transaction marker, or another control record).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn next_offset(&self) -> Offset {
        self.last_offset().next()
    }

    /// Number of offsets the batch spans.
    pub fn offset_count(&self) -> u64 {
        self.last_offset_delta as u64 + 1
    }
}

/// Writes `baseOffset` and `partitionLeaderEpoch` into a batch's first 16 bytes. Both lie
/// outside the CRC, so the batch stays valid.
pub fn patch_offset_and_epoch(prefix: &mut [u8], base_offset: Offset, epoch: LeaderEpoch) {
    assert!(
        prefix.len() >= 16,
        "patch needs the first 16 bytes, got {}",
        prefix.len()
    );
    prefix[0..8].copy_from_slice(&base_offset.0.to_be_bytes());
    prefix[12..16].copy_from_slice(&epoch.0.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal_batch() -> Vec<u8> {
        let mut b = vec![0u8; BATCH_HEADER_BYTES];
        b[8..12].copy_from_slice(&((BATCH_HEADER_BYTES - 12) as i32).to_be_bytes());
        b[16] = 2;
        b[57..61].copy_from_slice(&0i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn a_marker_is_a_valid_control_batch_kafka_decodes() {
        let b = encode_marker(42, 3, false, 7, 1_700_000_000_000);
        let h = BatchHeader::parse_validated(&b).unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.records_count),
            (42, 3, 1)
        );
        assert_eq!(
            parse_control_record(&b).unwrap(),
            ControlRecord::Abort {
                coordinator_epoch: 7
            }
        );
        let commit = encode_marker(42, 3, true, -1, 0);
        assert_eq!(
            parse_control_record(&commit).unwrap(),
            ControlRecord::Commit {
                coordinator_epoch: -1
            }
        );
        // kafka-protocol's decoder reads it as Kafka's clients do: a control record.
        let mut bytes = bytes::Bytes::from(b);
        let decoded = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        let r = &decoded.records[0];
        assert!(r.control && r.transactional);
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
        // Cut short: an error, not a panic.
        for n in 0..commit.len() {
            let _ = parse_control_record(&commit[..n]);
        }
    }

    #[test]
    fn whole_batches_stop_at_a_cut_or_implausible_batch() {
        let one = minimal_batch();
        let mut three = [one.clone(), one.clone(), one.clone()].concat();
        let n = one.len();
        let all: Vec<_> = whole_batches(&three).collect();
        assert_eq!(all, vec![0..n, n..2 * n, 2 * n..3 * n]);
        // The last one cut short: two.
        assert_eq!(whole_batches(&three[..3 * n - 1]).count(), 2);
        // Too short for a length: none.
        assert_eq!(whole_batches(&[0; 11]).count(), 0);
        // The second one's length below a header's: the first only.
        three[n + 8..n + 12].copy_from_slice(&1i32.to_be_bytes());
        assert_eq!(whole_batches(&three).collect::<Vec<_>>(), vec![0..n]);
    }

    #[test]
    fn validates_and_patches_outside_crc() {
        let mut b = minimal_batch();
        BatchHeader::parse_validated(&b).unwrap();
        patch_offset_and_epoch(&mut b, Offset(42), LeaderEpoch(7));
        let h = BatchHeader::parse_validated(&b).unwrap();
        assert_eq!(h.base_offset, Offset(42));
        assert_eq!(h.partition_leader_epoch, LeaderEpoch(7));
    }

    #[test]
    fn rejects_every_single_bit_flip_inside_crc() {
        let b = minimal_batch();
        for byte in CRC_START..b.len() {
            let mut c = b.clone();
            c[byte] ^= 1;
            assert!(BatchHeader::parse_validated(&c).is_err(), "flip at {byte}");
        }
    }

    #[test]
    fn rejects_bad_lengths_and_magic() {
        let mut b = minimal_batch();
        b[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            BatchHeader::parse(&b),
            Err(BatchError::BadLength { .. })
        ));
        let mut b = minimal_batch();
        b[16] = 1;
        assert!(matches!(
            BatchHeader::parse(&b),
            Err(BatchError::BadMagic { magic: 1 })
        ));
        let b = minimal_batch();
        assert!(matches!(
            BatchHeader::parse_validated(&b[..40]),
            Err(BatchError::TooShort { .. })
        ));
    }
}
