//! The records of `__consumer_offsets`, byte for byte as Apache Kafka writes them, so that a
//! partition can be read by Kafka's tools (`kafka-dump-log --offsets-decoder`) and vice versa:
//!
//! - offset commit: key version 1 `(group, topic, partition)`, value version 3
//!   `(offset, leader epoch, metadata, commit timestamp)`;
//! - group metadata: key version 2 `(group)`, value version 3 (protocol type, generation,
//!   protocol, leader, state timestamp, members with subscription and assignment).
//!
//! A null value is a tombstone: the key is gone. The latest record per key wins on load
//! (compacted semantics).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Key of one record of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group(String),
    /// A consumer group's record (KIP-848, types 3–8: `consumer/records.rs`).
    Consumer {
        group: String,
        key: super::consumer::ConsumerKey,
    },
    /// Kafka's consumer group partition metadata (type 4, tombstones only since 4.1), and
    /// share and streams groups' records (types 9+): not ringlog's, passed over.
    Other(i16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("undecodable __consumer_offsets record: {0}")]
pub struct RecordError(String);

impl RecordError {
    pub(crate) fn new(what: String) -> RecordError {
        RecordError(what)
    }
}

fn put_str(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn put_nullable_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

fn need(buf: &Bytes, n: usize, what: &str) -> Result<(), RecordError> {
    if buf.remaining() < n {
        return Err(RecordError(format!("truncated at {what}")));
    }
    Ok(())
}

fn get_i16(buf: &mut Bytes, what: &str) -> Result<i16, RecordError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut Bytes, what: &str) -> Result<i32, RecordError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut Bytes, what: &str) -> Result<i64, RecordError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

fn get_nullable_str(buf: &mut Bytes, what: &str) -> Result<Option<String>, RecordError> {
    let n = get_i16(buf, what)?;
    if n < 0 {
        return Ok(None);
    }
    need(buf, n as usize, what)?;
    let b = buf.split_to(n as usize);
    String::from_utf8(b.to_vec())
        .map(Some)
        .map_err(|_| RecordError(format!("{what} is not UTF-8")))
}

fn get_str(buf: &mut Bytes, what: &str) -> Result<String, RecordError> {
    get_nullable_str(buf, what)?.ok_or_else(|| RecordError(format!("{what} is null")))
}

fn get_bytes(buf: &mut Bytes, what: &str) -> Result<Bytes, RecordError> {
    let n = get_i32(buf, what)?;
    if n < 0 {
        return Ok(Bytes::new());
    }
    need(buf, n as usize, what)?;
    Ok(buf.split_to(n as usize))
}

impl RecordKey {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => {
                out.put_i16(1);
                put_str(&mut out, group);
                put_str(&mut out, topic);
                out.put_i32(*partition);
            }
            RecordKey::Group(group) => {
                out.put_i16(2);
                put_str(&mut out, group);
            }
            RecordKey::Consumer { group, key } => return key.encode(group),
            RecordKey::Other(kind) => out.put_i16(*kind),
        }
        out.freeze()
    }

    pub fn decode(mut buf: Bytes) -> Result<RecordKey, RecordError> {
        match get_i16(&mut buf, "key version")? {
            0 | 1 => Ok(RecordKey::Offset {
                group: get_str(&mut buf, "group")?,
                topic: get_str(&mut buf, "topic")?,
                partition: get_i32(&mut buf, "partition")?,
            }),
            2 => Ok(RecordKey::Group(get_str(&mut buf, "group")?)),
            kind @ 3..=8 => Ok(
                match super::consumer::ConsumerKey::decode(kind, &mut buf)? {
                    Some((group, key)) => RecordKey::Consumer { group, key },
                    None => RecordKey::Other(kind),
                },
            ),
            kind @ 9..=1000 => Ok(RecordKey::Other(kind)),
            v => Err(RecordError(format!("unknown key version {v}"))),
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(3);
        out.put_i64(self.offset);
        out.put_i32(self.leader_epoch);
        put_str(&mut out, &self.metadata);
        out.put_i64(self.commit_timestamp);
        out.freeze()
    }

    /// Versions 0–3 (Kafka's non-flexible layouts).
    pub fn decode(mut buf: Bytes) -> Result<OffsetValue, RecordError> {
        let version = get_i16(&mut buf, "value version")?;
        if !(0..=3).contains(&version) {
            return Err(RecordError(format!(
                "offset commit value version {version}"
            )));
        }
        let offset = get_i64(&mut buf, "offset")?;
        let leader_epoch = if version >= 3 {
            get_i32(&mut buf, "leader epoch")?
        } else {
            -1
        };
        let metadata = get_str(&mut buf, "metadata")?;
        let commit_timestamp = get_i64(&mut buf, "commit timestamp")?;
        if version == 1 {
            get_i64(&mut buf, "expire timestamp")?;
        }
        Ok(OffsetValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
        })
    }
}

impl GroupValue {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(3);
        put_str(&mut out, &self.protocol_type);
        out.put_i32(self.generation);
        put_nullable_str(&mut out, self.protocol.as_deref());
        put_nullable_str(&mut out, self.leader.as_deref());
        out.put_i64(self.state_timestamp);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_str(&mut out, &m.member_id);
            put_nullable_str(&mut out, m.instance_id.as_deref());
            put_str(&mut out, &m.client_id);
            put_str(&mut out, &m.client_host);
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out.freeze()
    }

    /// Versions 0–3 (Kafka's non-flexible layouts).
    pub fn decode(mut buf: Bytes) -> Result<GroupValue, RecordError> {
        let version = get_i16(&mut buf, "value version")?;
        if !(0..=3).contains(&version) {
            return Err(RecordError(format!(
                "group metadata value version {version}"
            )));
        }
        let protocol_type = get_str(&mut buf, "protocol type")?;
        let generation = get_i32(&mut buf, "generation")?;
        let protocol = get_nullable_str(&mut buf, "protocol")?;
        let leader = get_nullable_str(&mut buf, "leader")?;
        let state_timestamp = if version >= 2 {
            get_i64(&mut buf, "state timestamp")?
        } else {
            -1
        };
        let count = get_i32(&mut buf, "member count")?;
        let mut members = Vec::new();
        for _ in 0..count.max(0) {
            let member_id = get_str(&mut buf, "member id")?;
            let instance_id = if version >= 3 {
                get_nullable_str(&mut buf, "group instance id")?
            } else {
                None
            };
            let client_id = get_str(&mut buf, "client id")?;
            let client_host = get_str(&mut buf, "client host")?;
            let rebalance_timeout_ms = if version >= 1 {
                get_i32(&mut buf, "rebalance timeout")?
            } else {
                -1
            };
            let session_timeout_ms = get_i32(&mut buf, "session timeout")?;
            let rebalance_timeout_ms = if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            };
            members.push(MemberValue {
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription: get_bytes(&mut buf, "subscription")?,
                assignment: get_bytes(&mut buf, "assignment")?,
            });
        }
        Ok(GroupValue {
            protocol_type,
            generation,
            protocol,
            leader,
            state_timestamp,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip_in_kafkas_layout() {
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        };
        let bytes = key.encode();
        // version 1, "g", "t", partition 7
        assert_eq!(&bytes[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        assert_eq!(RecordKey::decode(bytes).unwrap(), key);
        let gk = RecordKey::Group("grp".into());
        assert_eq!(&gk.encode()[..2], &[0, 2]);
        assert_eq!(RecordKey::decode(gk.encode()).unwrap(), gk);

        let v = OffsetValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1000,
        };
        assert_eq!(v.encode().len(), 2 + 8 + 4 + 3 + 8);
        assert_eq!(OffsetValue::decode(v.encode()).unwrap(), v);

        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp: 99,
            members: vec![MemberValue {
                member_id: "m-1".into(),
                instance_id: Some("i-1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(g.encode()).unwrap(), g);
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let v = OffsetValue {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }
        .encode();
        for cut in 0..v.len() {
            assert!(OffsetValue::decode(v.slice(..cut)).is_err(), "cut at {cut}");
        }
        assert!(RecordKey::decode(Bytes::from_static(&[0xff, 0xff])).is_err());
        // share and streams groups' records (types 9+) are Kafka's, not ringlog's: passed over
        assert_eq!(
            RecordKey::decode(Bytes::from_static(&[0, 9])),
            Ok(RecordKey::Other(9))
        );
        assert!(GroupValue::decode(Bytes::from_static(&[0, 3, 0, 5, b'a'])).is_err());
    }
}
