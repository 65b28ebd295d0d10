//! Encoding responses, with the record bytes of fetches left out of the encoded buffer.
//!
//! A fetch response is encoded by the `kafka-protocol` crate like any other, but each
//! partition's `records` is a placeholder: a `Bytes` pointing into [`PLACEHOLDER`], a static
//! region that is never read or written. [`GapBuf`] recognises placeholder slices in
//! `put_slice` and records a gap instead of copying; the connection then sends the encoded
//! buffer with the real record bytes written between the gaps' neighbours, straight from where
//! they are (a read-cache chunk of the segment file, or the log's in-memory tail), not copied.

use bytes::{buf::UninitSlice, BufMut, Bytes, BytesMut};
use iouring_log::ReadSlice;
use kafka_protocol::protocol::buf::ByteBufMut;

pub use crate::limits::RECORDS_PLACEHOLDER_MAX;

/// Never read or written: only its addresses mark placeholders. Lives in `.bss`.
static PLACEHOLDER: [u8; RECORDS_PLACEHOLDER_MAX] = [0; RECORDS_PLACEHOLDER_MAX];

/// A `records` value that stands for `len` bytes sent separately.
pub fn records_placeholder(len: usize) -> Bytes {
    assert!(
        len <= RECORDS_PLACEHOLDER_MAX,
        "records placeholder of {len} bytes"
    );
    Bytes::from_static(&PLACEHOLDER[..len])
}

fn is_placeholder(s: &[u8]) -> bool {
    let start = PLACEHOLDER.as_ptr() as usize;
    let p = s.as_ptr() as usize;
    !s.is_empty() && p >= start && p + s.len() <= start + RECORDS_PLACEHOLDER_MAX
}

/// An encode buffer that leaves placeholder slices out, remembering where they belong.
#[derive(Default)]
pub struct GapBuf {
    pub bytes: BytesMut,
    /// `(offset in bytes, length)` of each placeholder, in encoding order.
    pub gaps: Vec<(usize, usize)>,
}

// SAFETY: every method delegates to the inner `BytesMut`, which upholds `BufMut`'s contract;
// `put_slice` either delegates or writes nothing (a gap is only recorded).
unsafe impl BufMut for GapBuf {
    fn remaining_mut(&self) -> usize {
        self.bytes.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller guarantees `cnt` bytes of `chunk_mut` were initialised, as the
        // inner buffer requires.
        unsafe { self.bytes.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.bytes.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if is_placeholder(src) {
            self.gaps.push((self.bytes.len(), src.len()));
        } else {
            self.bytes.put_slice(src);
        }
    }
}

impl ByteBufMut for GapBuf {
    fn offset(&self) -> usize {
        self.bytes.offset()
    }

    fn seek(&mut self, offset: usize) {
        self.bytes.seek(offset)
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        self.bytes.range(r)
    }
}

/// One piece of an outgoing response.
pub enum Part {
    Bytes(Bytes),
    Records(Vec<ReadSlice>),
}

/// A response ready to send: the size prefix is computed from the parts.
pub struct Outgoing {
    pub parts: Vec<Part>,
}

impl Outgoing {
    pub fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len(),
                Part::Records(s) => s.iter().map(ReadSlice::len).sum(),
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn from_bytes(bytes: Bytes) -> Outgoing {
        Outgoing {
            parts: vec![Part::Bytes(bytes)],
        }
    }

    /// Puts the encoded response header in front.
    pub fn with_header(mut self, header: Bytes) -> Outgoing {
        self.parts.insert(0, Part::Bytes(header));
        self
    }

    /// Interleaves the encoded buffer with the records of each gap (in order).
    pub fn from_gaps(body: GapBuf, mut records: Vec<Vec<ReadSlice>>) -> Outgoing {
        assert_eq!(
            body.gaps.len(),
            records.len(),
            "one records part per placeholder"
        );
        let bytes = body.bytes.freeze();
        let mut parts = Vec::new();
        let mut at = 0;
        for (i, (offset, len)) in body.gaps.iter().copied().enumerate() {
            parts.push(Part::Bytes(bytes.slice(at..offset)));
            let slices = std::mem::take(&mut records[i]);
            let actual: usize = slices.iter().map(ReadSlice::len).sum();
            assert_eq!(actual, len, "records part {i} differs from its placeholder");
            parts.push(Part::Records(slices));
            at = offset;
        }
        parts.push(Part::Bytes(bytes.slice(at..)));
        Outgoing { parts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        FetchResponse, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn placeholders_become_gaps_of_the_right_size() {
        let mut p = PartitionData::default();
        p.records = Some(records_placeholder(1000));
        let mut t = FetchableTopicResponse::default();
        t.partitions = vec![p.clone(), p];
        let mut r = FetchResponse::default();
        r.responses = vec![t];
        for version in [4, 11, 12] {
            let mut full = BytesMut::new();
            r.encode(&mut full, version).unwrap();
            let mut gb = GapBuf::default();
            r.encode(&mut gb, version).unwrap();
            assert_eq!(gb.gaps.len(), 2);
            assert_eq!(
                gb.bytes.len() + 2000,
                full.len(),
                "v{version}: only the records are left out"
            );
            let (o0, _) = gb.gaps[0];
            assert_eq!(
                &gb.bytes[..o0],
                &full[..o0],
                "v{version}: bytes before the gap match"
            );
        }
    }
}
