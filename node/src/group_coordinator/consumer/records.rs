//! A consumer group's records in `__consumer_offsets`, byte for byte in Kafka 4.1's layouts:
//! the key is its type (int16) then the group id (and member id), non-flexible; the value is
//! version 0 (int16) then a flexible struct (compact strings and arrays, tagged fields).
//!
//! | type | key | value |
//! |---|---|---|
//! | 3 | group | ConsumerGroupMetadata: epoch, tag 0 metadata hash |
//! | 5 | group, member | ConsumerGroupMemberMetadata |
//! | 6 | group | ConsumerGroupTargetAssignmentMetadata: assignment epoch |
//! | 7 | group, member | ConsumerGroupTargetAssignmentMember: partitions |
//! | 8 | group, member | ConsumerGroupCurrentMemberAssignment |
//!
//! Type 4 (partition metadata, tombstones only since Kafka 4.1) is read and passed over.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::{Assignment, ClassicMemberMetadata, CurrentAssignment, MemberMetadata, MemberState};
use crate::group_coordinator::records::RecordError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerKey {
    Metadata,
    Member(String),
    TargetMetadata,
    TargetMember(String),
    Current(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerValue {
    Metadata { epoch: i32, metadata_hash: i64 },
    Member(MemberMetadata),
    TargetMetadata { epoch: i32 },
    TargetMember(Assignment),
    Current(CurrentAssignment),
}

/// One record of a group: a value, or a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub key: ConsumerKey,
    pub value: Option<ConsumerValue>,
}

impl ConsumerRecord {
    pub fn tombstone(key: ConsumerKey) -> ConsumerRecord {
        ConsumerRecord { key, value: None }
    }

    pub fn new(key: ConsumerKey, value: ConsumerValue) -> ConsumerRecord {
        ConsumerRecord {
            key,
            value: Some(value),
        }
    }
}

/// Record types of `__consumer_offsets` that belong to consumer groups.
pub const TYPE_METADATA: i16 = 3;
pub const TYPE_PARTITION_METADATA: i16 = 4;
pub const TYPE_MEMBER: i16 = 5;
pub const TYPE_TARGET_METADATA: i16 = 6;
pub const TYPE_TARGET_MEMBER: i16 = 7;
pub const TYPE_CURRENT: i16 = 8;

fn put_str(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

impl ConsumerKey {
    pub fn encode(&self, group: &str) -> Bytes {
        let mut out = BytesMut::new();
        let (kind, member) = match self {
            ConsumerKey::Metadata => (TYPE_METADATA, None),
            ConsumerKey::Member(m) => (TYPE_MEMBER, Some(m)),
            ConsumerKey::TargetMetadata => (TYPE_TARGET_METADATA, None),
            ConsumerKey::TargetMember(m) => (TYPE_TARGET_MEMBER, Some(m)),
            ConsumerKey::Current(m) => (TYPE_CURRENT, Some(m)),
        };
        out.put_i16(kind);
        put_str(&mut out, group);
        if let Some(m) = member {
            put_str(&mut out, m);
        }
        out.freeze()
    }

    /// `(group, key)` of a key whose type (already read) is a consumer group's; `None` for
    /// type 4, which is passed over.
    pub fn decode(
        kind: i16,
        buf: &mut Bytes,
    ) -> Result<Option<(String, ConsumerKey)>, RecordError> {
        let group = get_str(buf)?;
        let key = match kind {
            TYPE_METADATA => ConsumerKey::Metadata,
            TYPE_PARTITION_METADATA => return Ok(None),
            TYPE_MEMBER => ConsumerKey::Member(get_str(buf)?),
            TYPE_TARGET_METADATA => ConsumerKey::TargetMetadata,
            TYPE_TARGET_MEMBER => ConsumerKey::TargetMember(get_str(buf)?),
            TYPE_CURRENT => ConsumerKey::Current(get_str(buf)?),
            other => return Err(RecordError::new(format!("record type {other}"))),
        };
        Ok(Some((group, key)))
    }
}

fn err(what: &str) -> RecordError {
    RecordError::new(format!("truncated or malformed at {what}"))
}

fn get_str(buf: &mut Bytes) -> Result<String, RecordError> {
    if buf.remaining() < 2 {
        return Err(err("key string"));
    }
    let n = buf.get_i16();
    if n < 0 || buf.remaining() < n as usize {
        return Err(err("key string"));
    }
    String::from_utf8(buf.split_to(n as usize).to_vec()).map_err(|_| err("key string"))
}

// ---- flexible encoding ----

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn put_compact_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => {
            put_uvarint(out, s.len() as u64 + 1);
            out.put_slice(s.as_bytes());
        }
    }
}

fn put_assignment(out: &mut BytesMut, a: &Assignment) {
    put_uvarint(out, a.len() as u64 + 1);
    for (id, ps) in a {
        out.put_slice(id.as_bytes());
        put_uvarint(out, ps.len() as u64 + 1);
        for p in ps {
            out.put_i32(*p);
        }
        put_uvarint(out, 0); // tagged fields
    }
}

fn get_uvarint(buf: &mut Bytes) -> Result<u64, RecordError> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        if !buf.has_remaining() {
            return Err(err("varint"));
        }
        let b = buf.get_u8();
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(err("varint"))
}

fn get_compact_len(buf: &mut Bytes, what: &str) -> Result<Option<usize>, RecordError> {
    let n = get_uvarint(buf)?;
    if n == 0 {
        return Ok(None);
    }
    let n = (n - 1) as usize;
    // every element is at least a byte: a length past the buffer is damage, not a big array
    if n > buf.remaining() {
        return Err(err(what));
    }
    Ok(Some(n))
}

fn get_compact_str(buf: &mut Bytes, what: &str) -> Result<Option<String>, RecordError> {
    let Some(n) = get_compact_len(buf, what)? else {
        return Ok(None);
    };
    String::from_utf8(buf.split_to(n).to_vec())
        .map(Some)
        .map_err(|_| err(what))
}

fn get_i32(buf: &mut Bytes, what: &str) -> Result<i32, RecordError> {
    if buf.remaining() < 4 {
        return Err(err(what));
    }
    Ok(buf.get_i32())
}

/// Tagged fields: `(tag, bytes)` each.
fn get_tags(buf: &mut Bytes) -> Result<Vec<(u64, Bytes)>, RecordError> {
    let n = get_uvarint(buf)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let tag = get_uvarint(buf)?;
        let size = get_uvarint(buf)? as usize;
        if size > buf.remaining() {
            return Err(err("tagged field"));
        }
        out.push((tag, buf.split_to(size)));
    }
    Ok(out)
}

fn get_assignment(buf: &mut Bytes, what: &str) -> Result<Assignment, RecordError> {
    let n = get_compact_len(buf, what)?.unwrap_or(0);
    let mut out = Assignment::new();
    for _ in 0..n {
        if buf.remaining() < 16 {
            return Err(err(what));
        }
        let mut id = [0u8; 16];
        buf.copy_to_slice(&mut id);
        let k = get_compact_len(buf, what)?.unwrap_or(0);
        let set = out.entry(Uuid::from_bytes(id)).or_default();
        for _ in 0..k {
            set.insert(get_i32(buf, what)?);
        }
        get_tags(buf)?;
    }
    Ok(out)
}

/// The tagged ClassicMemberMetadata of a member record.
fn get_classic(mut buf: Bytes) -> Result<ClassicMemberMetadata, RecordError> {
    let b = &mut buf;
    let session_timeout_ms = get_i32(b, "classic session timeout")?;
    let n = get_compact_len(b, "classic protocols")?.unwrap_or(0);
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = get_compact_str(b, "classic protocol name")?.unwrap_or_default();
        let len = get_compact_len(b, "classic protocol metadata")?.unwrap_or(0);
        protocols.push((name, b.split_to(len)));
        get_tags(b)?;
    }
    get_tags(b)?;
    Ok(ClassicMemberMetadata {
        session_timeout_ms,
        protocols,
    })
}

impl ConsumerValue {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(0); // value version
        match self {
            ConsumerValue::Metadata {
                epoch,
                metadata_hash,
            } => {
                out.put_i32(*epoch);
                // tag 0: MetadataHash (int64)
                put_uvarint(&mut out, 1);
                put_uvarint(&mut out, 0);
                put_uvarint(&mut out, 8);
                out.put_i64(*metadata_hash);
            }
            ConsumerValue::Member(m) => {
                put_compact_str(&mut out, m.instance_id.as_deref());
                put_compact_str(&mut out, m.rack_id.as_deref());
                put_compact_str(&mut out, Some(&m.client_id));
                put_compact_str(&mut out, Some(&m.client_host));
                put_uvarint(&mut out, m.subscribed_topic_names.len() as u64 + 1);
                for t in &m.subscribed_topic_names {
                    put_compact_str(&mut out, Some(t));
                }
                put_compact_str(&mut out, m.subscribed_topic_regex.as_deref());
                out.put_i32(m.rebalance_timeout_ms);
                put_compact_str(&mut out, m.server_assignor.as_deref());
                match &m.classic {
                    None => put_uvarint(&mut out, 0),
                    Some(c) => {
                        // tag 0: ClassicMemberMetadata (a flexible struct)
                        let mut tag = BytesMut::new();
                        tag.put_i32(c.session_timeout_ms);
                        put_uvarint(&mut tag, c.protocols.len() as u64 + 1);
                        for (name, meta) in &c.protocols {
                            put_compact_str(&mut tag, Some(name));
                            put_uvarint(&mut tag, meta.len() as u64 + 1);
                            tag.put_slice(meta);
                            put_uvarint(&mut tag, 0);
                        }
                        put_uvarint(&mut tag, 0);
                        put_uvarint(&mut out, 1);
                        put_uvarint(&mut out, 0);
                        put_uvarint(&mut out, tag.len() as u64);
                        out.put_slice(&tag);
                    }
                }
            }
            ConsumerValue::TargetMetadata { epoch } => {
                out.put_i32(*epoch);
                put_uvarint(&mut out, 0);
            }
            ConsumerValue::TargetMember(a) => {
                put_assignment(&mut out, a);
                put_uvarint(&mut out, 0);
            }
            ConsumerValue::Current(c) => {
                out.put_i32(c.member_epoch);
                out.put_i32(c.previous_member_epoch);
                out.put_i8(c.state.code());
                put_assignment(&mut out, &c.assigned);
                put_assignment(&mut out, &c.pending_revocation);
                put_uvarint(&mut out, 0);
            }
        }
        out.freeze()
    }

    pub fn decode(key: &ConsumerKey, mut buf: Bytes) -> Result<ConsumerValue, RecordError> {
        if buf.remaining() < 2 {
            return Err(err("value version"));
        }
        let version = buf.get_i16();
        if version != 0 {
            return Err(RecordError::new(format!("value version {version}")));
        }
        let b = &mut buf;
        Ok(match key {
            ConsumerKey::Metadata => {
                let epoch = get_i32(b, "epoch")?;
                let mut metadata_hash = 0;
                for (tag, mut v) in get_tags(b)? {
                    if tag == 0 && v.remaining() == 8 {
                        metadata_hash = v.get_i64();
                    }
                }
                ConsumerValue::Metadata {
                    epoch,
                    metadata_hash,
                }
            }
            ConsumerKey::Member(_) => {
                let instance_id = get_compact_str(b, "instance id")?;
                let rack_id = get_compact_str(b, "rack id")?;
                let client_id = get_compact_str(b, "client id")?.unwrap_or_default();
                let client_host = get_compact_str(b, "client host")?.unwrap_or_default();
                let n = get_compact_len(b, "topics")?.unwrap_or(0);
                let mut subscribed_topic_names = Vec::with_capacity(n);
                for _ in 0..n {
                    subscribed_topic_names.push(get_compact_str(b, "topic")?.unwrap_or_default());
                }
                let subscribed_topic_regex = get_compact_str(b, "regex")?;
                let rebalance_timeout_ms = get_i32(b, "rebalance timeout")?;
                let server_assignor = get_compact_str(b, "assignor")?;
                let mut classic = None;
                for (tag, v) in get_tags(b)? {
                    if tag == 0 {
                        classic = Some(get_classic(v)?);
                    }
                }
                ConsumerValue::Member(MemberMetadata {
                    instance_id,
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topic_names,
                    subscribed_topic_regex,
                    rebalance_timeout_ms,
                    server_assignor,
                    classic,
                })
            }
            ConsumerKey::TargetMetadata => {
                let epoch = get_i32(b, "assignment epoch")?;
                get_tags(b)?;
                ConsumerValue::TargetMetadata { epoch }
            }
            ConsumerKey::TargetMember(_) => {
                let a = get_assignment(b, "target partitions")?;
                get_tags(b)?;
                ConsumerValue::TargetMember(a)
            }
            ConsumerKey::Current(_) => {
                let member_epoch = get_i32(b, "member epoch")?;
                let previous_member_epoch = get_i32(b, "previous member epoch")?;
                if !b.has_remaining() {
                    return Err(err("state"));
                }
                let state = MemberState::from_code(b.get_i8());
                let assigned = get_assignment(b, "assigned partitions")?;
                let pending_revocation = get_assignment(b, "partitions pending revocation")?;
                get_tags(b)?;
                ConsumerValue::Current(CurrentAssignment {
                    member_epoch,
                    previous_member_epoch,
                    state,
                    assigned,
                    pending_revocation,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(key: ConsumerKey, value: ConsumerValue) {
        let k = key.encode("g1");
        let mut kb = k.clone();
        let kind = kb.get_i16();
        let (group, back) = ConsumerKey::decode(kind, &mut kb).unwrap().unwrap();
        assert_eq!((group.as_str(), &back), ("g1", &key));
        let v = value.encode();
        assert_eq!(ConsumerValue::decode(&key, v.clone()).unwrap(), value);
        // every truncation is an error, never a panic
        for cut in 0..v.len() {
            let _ = ConsumerValue::decode(&key, v.slice(..cut));
        }
    }

    #[test]
    fn every_consumer_group_record_round_trips_in_kafkas_layout() {
        let id = Uuid::from_u128(7);
        let mut a = Assignment::new();
        a.entry(id).or_default().extend([0, 3]);
        round_trip(
            ConsumerKey::Metadata,
            ConsumerValue::Metadata {
                epoch: 4,
                metadata_hash: -9,
            },
        );
        round_trip(
            ConsumerKey::Member("m".into()),
            ConsumerValue::Member(MemberMetadata {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                subscribed_topic_regex: Some("x.*".into()),
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("range".into()),
                classic: None,
            }),
        );
        round_trip(
            ConsumerKey::Member("c".into()),
            ConsumerValue::Member(MemberMetadata {
                client_id: "c".into(),
                subscribed_topic_names: vec!["a".into()],
                rebalance_timeout_ms: 45_000,
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: 10_000,
                    protocols: vec![
                        ("range".into(), Bytes::from_static(&[0, 3, 1, 2])),
                        ("cooperative-sticky".into(), Bytes::new()),
                    ],
                }),
                ..Default::default()
            }),
        );
        round_trip(
            ConsumerKey::TargetMetadata,
            ConsumerValue::TargetMetadata { epoch: 4 },
        );
        round_trip(
            ConsumerKey::TargetMember("m".into()),
            ConsumerValue::TargetMember(a.clone()),
        );
        round_trip(
            ConsumerKey::Current("m".into()),
            ConsumerValue::Current(CurrentAssignment {
                member_epoch: 4,
                previous_member_epoch: 3,
                state: MemberState::UnrevokedPartitions,
                assigned: a.clone(),
                pending_revocation: a,
            }),
        );
    }

    #[test]
    fn the_layout_is_kafkas() {
        // ConsumerGroupMetadataKey: type 3, group "g"; value version 0, epoch 1, one tag
        // (0: MetadataHash, 8 bytes)
        assert_eq!(&ConsumerKey::Metadata.encode("g")[..], &[0, 3, 0, 1, b'g']);
        let v = ConsumerValue::Metadata {
            epoch: 1,
            metadata_hash: 2,
        }
        .encode();
        assert_eq!(&v[..], &[0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2]);
        // TargetAssignmentMetadata: version 0, epoch 5, no tags
        let v = ConsumerValue::TargetMetadata { epoch: 5 }.encode();
        assert_eq!(&v[..], &[0, 0, 0, 0, 0, 5, 0]);
    }
}
