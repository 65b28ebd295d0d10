//! The records inside one record batch (format v2): finding each record's bounds and fields in
//! the (decompressed) records bytes, and rebuilding a batch around some of them with a codec and
//! level of choice. The log cleaner drops records with it; the broker checks records one by one
//! (a compacted topic's keys, CreateTime bounds) and recompresses batches to a topic's
//! `compression.type` with it.
//!
//! Codecs are Kafka's: gzip, snappy (xerial framing, as the Java client writes it; raw snappy is
//! read too), lz4 (the LZ4 frame format with independent blocks) and zstd. Levels are Kafka's
//! `compression.*.level` ranges ([`Codec::level_range`]); as in Kafka, lz4's default level (9)
//! is its fast compressor and any other level its high-compression one (above 12 as 12, the
//! library's highest).

use std::io::Write as _;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};

use crate::batch::BatchHeader;
use crate::limits::BATCH_HEADER_BYTES;

/// Kafka's default `compression.lz4.level`: lz4's fast compressor, as lz4-java's.
const LZ4_DEFAULT_LEVEL: i32 = 9;

/// The attributes bits that name a batch's codec.
const CODEC_MASK: i16 = 0x7;

/// A record batch's compression codec (Kafka's `compression.type` values but `producer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec a batch's attributes name.
    pub fn of(header: &BatchHeader) -> Result<Codec, RecordsError> {
        match header.attributes & CODEC_MASK {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Gzip),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Lz4),
            4 => Ok(Codec::Zstd),
            c => Err(RecordsError::UnknownCodec(c)),
        }
    }

    /// Kafka's name (`uncompressed` for none).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "uncompressed",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// From Kafka's name; `None` for anything else (including `producer`, which is no codec).
    pub fn parse(name: &str) -> Option<Codec> {
        [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }

    fn bits(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    /// Kafka's `compression.<codec>.level` bounds and default: `(min, max, default)`; gzip also
    /// takes -1 (zlib's default, 6). `None` for codecs without levels.
    pub fn level_range(self) -> Option<(i32, i32, i32)> {
        match self {
            Codec::Gzip => Some((1, 9, -1)),
            Codec::Lz4 => Some((1, 17, LZ4_DEFAULT_LEVEL)),
            Codec::Zstd => Some((-131072, 22, 3)),
            Codec::None | Codec::Snappy => None,
        }
    }
}

/// A codec and its level (`None`: the codec's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub codec: Codec,
    pub level: Option<i32>,
}

/// One record inside a batch's (decompressed) records bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// The record's bytes, length prefix included: `[start, end)`.
    pub start: usize,
    pub end: usize,
    /// The batch's base offset plus the record's offset delta.
    pub offset: i64,
    /// The record's timestamp delta from the batch's base timestamp.
    pub timestamp_delta: i64,
    pub key: Option<(usize, usize)>,
    /// A null value.
    pub tombstone: bool,
}

impl RawRecord {
    pub fn key<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        self.key.map(|(a, b)| &bytes[a..b])
    }
}

/// Why a batch's records could not be read or rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("batch truncated")]
    Truncated,
    #[error("record length {0} out of range")]
    LengthOutOfRange(i64),
    #[error("record fields run past the record")]
    FieldsPastRecord,
    #[error("varint runs past the records")]
    VarintPastEnd,
    #[error("varint longer than 10 bytes")]
    VarintTooLong,
    #[error("unknown compression codec {0}")]
    UnknownCodec(i16),
    /// The codec's own error (the compression crate reports it as text).
    #[error("{op}: {message}")]
    Codec { op: &'static str, message: String },
}

/// A batch's records, decompressed.
pub struct BatchRecords {
    pub bytes: Bytes,
    pub records: Vec<RawRecord>,
}

/// Decompresses a batch's records and finds each record's bounds, offset, timestamp delta, key
/// and whether it is a tombstone.
pub fn batch_records(batch: &[u8], header: &BatchHeader) -> Result<BatchRecords, RecordsError> {
    if batch.len() < header.size_bytes as usize || (header.size_bytes as usize) < BATCH_HEADER_BYTES
    {
        return Err(RecordsError::Truncated);
    }
    let body = Bytes::copy_from_slice(&batch[BATCH_HEADER_BYTES..header.size_bytes as usize]);
    let bytes = decompress(body, Codec::of(header)?)?;
    // The count is the producer's claim: never reserve more than the bytes could hold.
    let mut records = Vec::with_capacity((header.records_count.max(0) as usize).min(bytes.len()));
    let mut at = 0usize;
    for _ in 0..header.records_count.max(0) {
        let start = at;
        let len = varint(&bytes, &mut at)?;
        if len < 0 || at + len as usize > bytes.len() {
            return Err(RecordsError::LengthOutOfRange(len));
        }
        let end = at + len as usize;
        at += 1; // attributes
        let timestamp_delta = varint(&bytes, &mut at)?;
        let offset_delta = varint(&bytes, &mut at)?;
        let key_len = varint(&bytes, &mut at)?;
        let key = if key_len >= 0 {
            let k = (at, at + key_len as usize);
            at += key_len as usize;
            Some(k)
        } else {
            None
        };
        let value_len = varint(&bytes, &mut at)?;
        if at > end {
            return Err(RecordsError::FieldsPastRecord);
        }
        records.push(RawRecord {
            start,
            end,
            offset: header.base_offset.0 + offset_delta,
            timestamp_delta,
            key,
            tombstone: value_len < 0,
        });
        at = end;
    }
    Ok(BatchRecords { bytes, records })
}

/// The offset delta of the first record without a key in a batch (decompressing it), if any:
/// a compacted topic refuses such a batch.
pub fn first_unkeyed_record(
    batch: &[u8],
    header: &BatchHeader,
) -> Result<Option<i64>, RecordsError> {
    let records = batch_records(batch, header)?;
    Ok(records
        .records
        .iter()
        .find(|r| r.key.is_none())
        .map(|r| r.offset - header.base_offset.0))
}

/// The batch with only the `keep` records, compressed as `compression` says: the header's
/// fields as they were (base offset, last offset delta, timestamps, producer, leader epoch, the
/// attributes but the codec), the records copied byte for byte (their deltas stay right
/// against the same base), then the codec bits, length, count and CRC set.
pub fn rebuild_batch(
    batch: &[u8],
    records: &[u8],
    keep: &[&RawRecord],
    compression: Compression,
) -> Result<Vec<u8>, RecordsError> {
    let mut raw = Vec::with_capacity(keep.iter().map(|r| r.end - r.start).sum());
    for r in keep {
        raw.extend_from_slice(&records[r.start..r.end]);
    }
    let body = compress(&raw, compression)?;
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.extend_from_slice(&batch[..BATCH_HEADER_BYTES]);
    out.extend_from_slice(&body);
    let batch_length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = i16::from_be_bytes([out[21], out[22]]);
    let attributes = (attributes & !CODEC_MASK) | compression.codec.bits();
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[57..61].copy_from_slice(&(keep.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// The whole batch recompressed with `compression` (every record kept).
pub fn recompress(
    batch: &[u8],
    records: &BatchRecords,
    compression: Compression,
) -> Result<Vec<u8>, RecordsError> {
    let keep: Vec<&RawRecord> = records.records.iter().collect();
    rebuild_batch(batch, &records.bytes, &keep, compression)
}

/// A zig-zag varint (Kafka's record fields), up to 64 bits.
pub(crate) fn varint(b: &[u8], at: &mut usize) -> Result<i64, RecordsError> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or(RecordsError::VarintPastEnd)?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(RecordsError::VarintTooLong)
}

fn decompress(body: Bytes, codec: Codec) -> Result<Bytes, RecordsError> {
    let mut body = body;
    let all = |b: &mut Bytes| Ok(b.copy_to_bytes(b.remaining()));
    match codec {
        Codec::None => Ok(body),
        Codec::Gzip => Gzip::decompress(&mut body, all),
        Codec::Snappy => Snappy::decompress(&mut body, all),
        Codec::Lz4 => Lz4::decompress(&mut body, all),
        Codec::Zstd => Zstd::decompress(&mut body, all),
    }
    .map_err(|e| RecordsError::Codec {
        op: "decompressing",
        message: e.to_string(),
    })
}

fn compress(raw: &[u8], compression: Compression) -> Result<BytesMut, RecordsError> {
    let failed = |e: std::io::Error| RecordsError::Codec {
        op: "compressing",
        message: e.to_string(),
    };
    let level = compression.level;
    let mut out = BytesMut::with_capacity(raw.len() / 2 + 64);
    match compression.codec {
        Codec::None => out.put_slice(raw),
        Codec::Gzip => {
            let level = match level {
                Some(l @ 0..=9) => flate2::Compression::new(l as u32),
                _ => flate2::Compression::default(),
            };
            let mut e = flate2::write::GzEncoder::new((&mut out).writer(), level);
            e.write_all(raw).map_err(failed)?;
            e.finish().map_err(failed)?;
        }
        Codec::Snappy => {
            use kafka_protocol::compression::Compressor;
            let put = |b: &mut BytesMut| {
                b.put_slice(raw);
                Ok(())
            };
            Snappy::compress(&mut out, put).map_err(|e| RecordsError::Codec {
                op: "compressing",
                message: e.to_string(),
            })?;
        }
        Codec::Lz4 => {
            // Kafka's default level (9) is lz4's fast compressor; any other level its high
            // compression one (above 12 as 12).
            let level = match level.unwrap_or(LZ4_DEFAULT_LEVEL) {
                LZ4_DEFAULT_LEVEL => 0,
                l => l.clamp(1, 12) as u32,
            };
            let mut e = lz4::EncoderBuilder::new()
                .level(level)
                .block_mode(lz4::BlockMode::Independent)
                .block_size(lz4::BlockSize::Max64KB)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build((&mut out).writer())
                .map_err(failed)?;
            e.write_all(raw).map_err(failed)?;
            let (_, finished) = e.finish();
            finished.map_err(failed)?;
        }
        Codec::Zstd => {
            let level = level.unwrap_or(3);
            let mut e =
                zstd::stream::write::Encoder::new((&mut out).writer(), level).map_err(failed)?;
            e.write_all(raw).map_err(failed)?;
            e.finish().map_err(failed)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc_varint(v: i64, out: &mut Vec<u8>) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    #[test]
    fn varints_decode_as_kafka_encodes_them() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut b = Vec::new();
            enc_varint(v, &mut b);
            let mut at = 0;
            assert_eq!(varint(&b, &mut at).unwrap(), v);
            assert_eq!(at, b.len());
        }
        assert!(varint(&[0x80], &mut 0).is_err());
    }

    /// A batch of `n` records (keys `k<i>`, values of a repeated letter) encoded by the
    /// kafka-protocol crate, uncompressed.
    fn batch(n: usize) -> Vec<u8> {
        use kafka_protocol::records::{
            Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: 7,
                producer_epoch: 1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: 1_000 + i as i64,
                key: Some(Bytes::from(format!("k{i}"))),
                value: (i % 3 != 0).then(|| Bytes::from(vec![b'a' + (i % 26) as u8; 200])),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: kafka_protocol::records::Compression::None,
            },
        )
        .unwrap();
        out.to_vec()
    }

    #[test]
    fn every_codec_and_level_recompresses_to_the_same_records() {
        let plain = batch(50);
        let header = BatchHeader::parse_validated(&plain).unwrap();
        let records = batch_records(&plain, &header).unwrap();
        assert_eq!(records.records.len(), 50);
        assert_eq!(records.records[7].timestamp_delta, 7);
        for (codec, levels) in [
            (Codec::Gzip, vec![None, Some(-1), Some(1), Some(9)]),
            (Codec::Snappy, vec![None]),
            (Codec::Lz4, vec![None, Some(1), Some(17)]),
            (Codec::Zstd, vec![None, Some(-5), Some(1), Some(19)]),
            (Codec::None, vec![None]),
        ] {
            for level in levels {
                let c = Compression { codec, level };
                let packed = recompress(&plain, &records, c).unwrap();
                let h = BatchHeader::parse_validated(&packed).unwrap();
                assert_eq!(Codec::of(&h).unwrap(), codec, "{c:?}");
                if codec != Codec::None {
                    assert!(packed.len() < plain.len() / 2, "{c:?}: {}", packed.len());
                }
                assert_eq!(
                    (
                        h.base_timestamp,
                        h.max_timestamp,
                        h.producer_id,
                        h.base_sequence
                    ),
                    (
                        header.base_timestamp,
                        header.max_timestamp,
                        header.producer_id,
                        header.base_sequence
                    )
                );
                // Decoded by the kafka-protocol crate (the clients' view): the same records.
                let mut b = Bytes::from(packed.clone());
                let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut b).unwrap();
                assert_eq!(set.records.len(), 50);
                assert_eq!(set.records[49].key.as_deref(), Some(&b"k49"[..]));
                assert!(set.records[48].value.is_none());
                // And back to none: byte for byte the original batch.
                let back = batch_records(&packed, &h).unwrap();
                let plain_again = recompress(
                    &packed,
                    &back,
                    Compression {
                        codec: Codec::None,
                        level: None,
                    },
                )
                .unwrap();
                assert_eq!(plain_again, plain, "{c:?}");
            }
        }
    }

    #[test]
    fn a_record_count_larger_than_the_bytes_is_an_error_not_an_allocation() {
        let mut plain = batch(3);
        plain[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&plain[21..]);
        plain[17..21].copy_from_slice(&crc.to_be_bytes());
        let header = BatchHeader::parse(&plain).unwrap();
        assert!(batch_records(&plain, &header).is_err());
    }
}
