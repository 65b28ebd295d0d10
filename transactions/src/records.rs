//! The records of `__transaction_state`, byte for byte as Kafka 4.1.1 writes them, so Kafka's
//! tools read ringlog's partitions and the other way round:
//!
//! - key (`TransactionLogKey`, version 0): `int16 0`, `string transactional_id`;
//! - value (`TransactionLogValue`): version 0 (classic encodings) when the cluster's
//!   `transaction.version` is 0, else version 1 (flexible: compact arrays and strings, tagged
//!   fields, of which 4.1.1 writes `ClientTransactionVersion`, tag 2): producer id, epoch,
//!   timeout, state id, partitions by topic (null exactly when the state is `Empty`), last
//!   update and start timestamps.
//!
//! A null value is a tombstone: the transactional id expired (Kafka never writes `Dead`).
//! The previous and next producer ids and the last producer epoch are not written (as in
//! 4.1.1); they load as -1.

use std::collections::{BTreeMap, BTreeSet};

use crate::coordinator::{TxnMetadata, TxnState, TxnVersion};

/// A record that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable __transaction_state record: {0}")]
pub struct RecordError(String);

fn err(what: &str) -> RecordError {
    RecordError(what.to_string())
}

/// A cursor over a record's bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], RecordError> {
        if self.buf.len() < n {
            return Err(err(&format!(
                "{what}: {n} bytes needed, {} left",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn i8(&mut self, what: &str) -> Result<i8, RecordError> {
        Ok(self.take(1, what)?[0] as i8)
    }

    fn i16(&mut self, what: &str) -> Result<i16, RecordError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, RecordError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    fn i64(&mut self, what: &str) -> Result<i64, RecordError> {
        let b = self.take(8, what)?;
        Ok(i64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn uvarint(&mut self, what: &str) -> Result<u64, RecordError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1, what)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(err(&format!("{what}: varint too long")))
    }

    fn utf8(&mut self, n: usize, what: &str) -> Result<String, RecordError> {
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| err(&format!("{what}: not UTF-8")))
    }

    /// A classic string (int16 length).
    fn string(&mut self, what: &str) -> Result<String, RecordError> {
        let n = self.i16(what)?;
        let n = usize::try_from(n).map_err(|_| err(&format!("{what}: null")))?;
        self.utf8(n, what)
    }

    /// A compact string (uvarint length + 1).
    fn compact_string(&mut self, what: &str) -> Result<String, RecordError> {
        let n = self.uvarint(what)?;
        let n = usize::try_from(
            n.checked_sub(1)
                .ok_or_else(|| err(&format!("{what}: null")))?,
        )
        .map_err(|_| err(what))?;
        self.utf8(n, what)
    }

    /// Skips a tagged-field section, returning the tags it holds.
    fn tags(&mut self, what: &str) -> Result<Vec<(u64, &'a [u8])>, RecordError> {
        let n = self.uvarint(what)?;
        let mut out = Vec::new();
        for _ in 0..n {
            let tag = self.uvarint(what)?;
            let size = usize::try_from(self.uvarint(what)?).map_err(|_| err(what))?;
            out.push((tag, self.take(size, what)?));
        }
        Ok(out)
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u64 + 1);
    out.extend_from_slice(s.as_bytes());
}

/// The key of a transactional id's records.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// The transactional id of a key; `None` for another record type (Kafka skips those).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, RecordError> {
    let mut r = Reader { buf: key };
    if r.i16("key version")? != 0 {
        return Ok(None);
    }
    Ok(Some(r.string("transactional id")?))
}

/// The value of a state: version 0 when the cluster's `transaction.version` is 0, else 1.
pub fn encode_value(meta: &TxnMetadata, cluster_version: TxnVersion) -> Vec<u8> {
    let flexible = cluster_version >= TxnVersion::V1;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&i16::from(flexible).to_be_bytes());
    out.extend_from_slice(&meta.producer_id.to_be_bytes());
    out.extend_from_slice(&meta.producer_epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.push(meta.state.id() as u8);
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in &meta.partitions {
        by_topic.entry(t.as_str()).or_default().push(*p);
    }
    let null = meta.state == TxnState::Empty;
    if flexible {
        put_uvarint(&mut out, if null { 0 } else { by_topic.len() as u64 + 1 });
    } else {
        out.extend_from_slice(&(if null { -1 } else { by_topic.len() as i32 }).to_be_bytes());
    }
    if !null {
        for (topic, parts) in &by_topic {
            if flexible {
                put_compact_string(&mut out, topic);
                put_uvarint(&mut out, parts.len() as u64 + 1);
            } else {
                put_string(&mut out, topic);
                out.extend_from_slice(&(parts.len() as i32).to_be_bytes());
            }
            for p in parts {
                out.extend_from_slice(&p.to_be_bytes());
            }
            if flexible {
                put_uvarint(&mut out, 0);
            }
        }
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    if flexible {
        let level = meta.client_version.level();
        if level == 0 {
            put_uvarint(&mut out, 0);
        } else {
            put_uvarint(&mut out, 1);
            put_uvarint(&mut out, 2);
            put_uvarint(&mut out, 2);
            out.extend_from_slice(&level.to_be_bytes());
        }
    }
    out
}

/// A state from its value. Kafka's loader refuses versions above 1; so does this.
pub fn decode_value(value: &[u8]) -> Result<TxnMetadata, RecordError> {
    let mut r = Reader { buf: value };
    let version = r.i16("value version")?;
    if !(0..=1).contains(&version) {
        return Err(err(&format!("value version {version}")));
    }
    let flexible = version == 1;
    let producer_id = r.i64("producer id")?;
    let producer_epoch = r.i16("producer epoch")?;
    let timeout_ms = r.i32("timeout")?;
    let state_id = r.i8("state")?;
    let state = TxnState::from_id(state_id).ok_or_else(|| err(&format!("state {state_id}")))?;
    let topics: Option<usize> = if flexible {
        let n = r.uvarint("partitions")?;
        n.checked_sub(1).map(|n| n as usize)
    } else {
        let n = r.i32("partitions")?;
        usize::try_from(n).ok()
    };
    let mut partitions = BTreeSet::new();
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            r.compact_string("topic")?
        } else {
            r.string("topic")?
        };
        let count = if flexible {
            (r.uvarint("partition ids")?.saturating_sub(1)) as usize
        } else {
            usize::try_from(r.i32("partition ids")?).unwrap_or(0)
        };
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32("partition id")?));
        }
        if flexible {
            r.tags("topic tags")?;
        }
    }
    let last_update_ms = r.i64("last update")?;
    let start_ms = r.i64("start")?;
    let mut client_version = TxnVersion::V0;
    let (mut prev, mut next) = (-1, -1);
    if flexible {
        for (tag, data) in r.tags("tags")? {
            let mut d = Reader { buf: data };
            match tag {
                0 => prev = d.i64("previous producer id")?,
                1 => next = d.i64("next producer id")?,
                2 => client_version = TxnVersion::from_level(d.i16("client version")?),
                _ => {}
            }
        }
    }
    Ok(TxnMetadata {
        producer_id,
        prev_producer_id: prev,
        next_producer_id: next,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        client_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(state: TxnState, partitions: &[(&str, i32)]) -> TxnMetadata {
        TxnMetadata {
            producer_id: 4242,
            prev_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 7,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_123,
            client_version: TxnVersion::V2,
        }
    }

    #[test]
    fn keys_and_values_round_trip_in_both_versions() {
        assert_eq!(
            decode_key(&encode_key("my-tx")).unwrap().as_deref(),
            Some("my-tx")
        );
        assert_eq!(
            decode_key(&[0, 1, 0, 0]).unwrap(),
            None,
            "another record type"
        );
        for cluster in [TxnVersion::V0, TxnVersion::V2] {
            for m in [
                meta(TxnState::Ongoing, &[("a", 0), ("a", 3), ("b", 1)]),
                meta(TxnState::Empty, &[]),
                meta(TxnState::CompleteCommit, &[]),
            ] {
                let back = decode_value(&encode_value(&m, cluster)).unwrap();
                let expect = TxnMetadata {
                    client_version: if cluster == TxnVersion::V0 {
                        TxnVersion::V0
                    } else {
                        m.client_version
                    },
                    ..m.clone()
                };
                assert_eq!(back, expect, "{cluster:?} {:?}", m.state);
            }
        }
    }

    #[test]
    fn the_value_layout_is_kafkas() {
        // Version 0, Ongoing with a-0: every field at its place.
        let mut m = meta(TxnState::Ongoing, &[("a", 0)]);
        m.client_version = TxnVersion::V0;
        let v = encode_value(&m, TxnVersion::V0);
        let mut expect = vec![0, 0];
        expect.extend_from_slice(&4242i64.to_be_bytes());
        expect.extend_from_slice(&7i16.to_be_bytes());
        expect.extend_from_slice(&60_000i32.to_be_bytes());
        expect.push(1);
        expect.extend_from_slice(&1i32.to_be_bytes());
        expect.extend_from_slice(&[0, 1, b'a']);
        expect.extend_from_slice(&1i32.to_be_bytes());
        expect.extend_from_slice(&0i32.to_be_bytes());
        expect.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expect.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(v, expect);
        // Version 1 of an Empty state: null partitions (0), client version in tag 2.
        let v = encode_value(&meta(TxnState::Empty, &[]), TxnVersion::V2);
        assert_eq!(&v[..2], &[0, 1]);
        assert_eq!(v[2 + 8 + 2 + 4 + 1], 0, "null compact array");
        assert_eq!(
            &v[v.len() - 5..],
            &[1, 2, 2, 0, 2],
            "one tag: 2, two bytes, level 2"
        );
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        let v = encode_value(&meta(TxnState::Ongoing, &[("a", 0)]), TxnVersion::V2);
        for cut in 0..v.len() {
            assert!(decode_value(&v[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = v.clone();
        bad[1] = 9;
        assert!(decode_value(&bad).is_err(), "version 9");
        let mut bad = v;
        bad[2 + 8 + 2 + 4] = 42;
        assert!(decode_value(&bad).is_err(), "state 42");
    }
}
