//! Loading a `__consumer_offsets` partition into memory when the shard opens it (every record
//! replayed, the latest per key winning), and forgetting it when the shard no longer leads it.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::coordinator::{partition_for, Coordinator};
use super::membership::Group;
use super::records::{self, OffsetValue, RecordKey};
use super::txn_offsets::{settle, Pending};
use crate::partition::internal::replay_records;
use crate::partition::Partition;

impl Coordinator {
    /// Replays partition `p` of `__consumer_offsets` into memory. Until it finishes, requests
    /// for its groups get COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn load_partition(&self, part: &Partition, now: i64) {
        let p = part.index;
        let (mut offsets, mut metas) = (0usize, 0usize);
        let mut groups = BTreeMap::<String, Group>::new();
        let mut pending = Pending::new();
        replay_records(part, |r| {
            if r.control {
                // A transaction's marker (key: version, type; ABORT 0, COMMIT 1).
                let kind = r
                    .key
                    .as_deref()
                    .filter(|k| k.len() >= 4)
                    .map(|k| i16::from_be_bytes([k[2], k[3]]));
                if let Some(kind @ (0 | 1)) = kind {
                    settle(
                        &mut pending,
                        r.producer_id,
                        kind == 1,
                        |_| true,
                        |g, tp, v| {
                            groups
                                .entry(g.to_owned())
                                .or_insert_with(|| Group::new(g.to_owned(), now))
                                .offsets
                                .insert(tp, v);
                        },
                    );
                }
                return;
            }
            if r.transactional {
                if let Err(e) = pend_record(&mut pending, r.producer_id, r.key, r.value) {
                    tracing::warn!(partition = p, offset = r.offset, error = %e, "skipped record");
                }
                return;
            }
            match apply_record(&mut groups, r.key, r.value, now) {
                Ok(true) => offsets += 1,
                Ok(false) => metas += 1,
                Err(e) => {
                    tracing::warn!(partition = p, offset = r.offset, error = %e, "skipped record")
                }
            }
        })
        .await;
        let count = groups.len();
        self.groups.borrow_mut().extend(groups);
        self.txn_offsets.borrow_mut().extend(pending);
        self.loaded.borrow_mut().insert(p);
        if count == 0 && offsets + metas == 0 {
            return;
        }
        tracing::info!(
            partition = p,
            groups = count,
            offset_records = offsets,
            group_records = metas,
            "loaded __consumer_offsets partition"
        );
    }

    /// Forgets the groups of a partition this shard no longer leads.
    pub fn unload_partition(&self, p: i32, partitions: i32) {
        self.loaded.borrow_mut().remove(&p);
        self.txn_offsets
            .borrow_mut()
            .retain(|(group, _), _| partition_for(group, partitions) != p);
        self.groups.borrow_mut().retain(|id, g| {
            let keep = partition_for(id, partitions) != p;
            if !keep {
                g.kill();
            }
            keep
        });
    }
}

/// One group as its partition's records give it (`None` if it has none): what the coordinator
/// reads back after a write it could not complete.
pub(super) async fn read_group(part: &Partition, group: &str, now: i64) -> Option<Group> {
    let mut groups = BTreeMap::<String, Group>::new();
    replay_records(part, |r| {
        if r.control || r.transactional {
            return;
        }
        let mine = r
            .key
            .as_ref()
            .and_then(|k| RecordKey::decode(k.clone()).ok())
            .is_some_and(|k| match k {
                RecordKey::Offset { group: g, .. }
                | RecordKey::Group(g)
                | RecordKey::Consumer { group: g, .. } => g == group,
                RecordKey::Other(_) => false,
            });
        if mine {
            let _ = apply_record(&mut groups, r.key, r.value, now);
        }
    })
    .await;
    groups.remove(group)
}

/// A transactional offset record during load: pending until its transaction's marker.
fn pend_record(
    pending: &mut Pending,
    producer_id: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
) -> Result<(), records::RecordError> {
    if let RecordKey::Offset {
        group,
        topic,
        partition,
    } = RecordKey::decode(key.unwrap_or_default())?
    {
        if let Some(v) = value {
            let v = OffsetValue::decode(v)?;
            pending
                .entry((group, producer_id))
                .or_default()
                .insert((topic, partition), v);
        }
    }
    Ok(())
}

/// Applies one record during load; `Ok(true)` for an offset record, `Ok(false)` for group
/// metadata.
pub(super) fn apply_record(
    groups: &mut BTreeMap<String, Group>,
    key: Option<Bytes>,
    value: Option<Bytes>,
    now: i64,
) -> Result<bool, records::RecordError> {
    let key = RecordKey::decode(key.unwrap_or_default())?;
    match key {
        RecordKey::Offset {
            group,
            topic,
            partition,
        } => {
            match value {
                None => {
                    if let Some(g) = groups.get_mut(&group) {
                        g.offsets.remove(&(topic, partition));
                    }
                }
                Some(v) => {
                    let v = OffsetValue::decode(v)?;
                    groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::new(group, now))
                        .offsets
                        .insert((topic, partition), v);
                }
            }
            Ok(true)
        }
        RecordKey::Consumer { group, key } => {
            let value = match value {
                None => None,
                Some(v) => Some(super::consumer::ConsumerValue::decode(&key, v)?),
            };
            let record = super::consumer::ConsumerRecord { key, value };
            let group_id = group.clone();
            let g = groups
                .entry(group.clone())
                .or_insert_with(|| Group::new(group, now));
            g.consumer.get_or_insert_with(Default::default).replay(
                &record,
                now,
                crate::limits::CONSUMER_LOAD_SESSION_MS,
            );
            if record.key == super::consumer::ConsumerKey::Metadata && record.value.is_none() {
                // the consumer group is gone (deleted, or made classic): what is left is its
                // offsets, if any (they have their own tombstones)
                g.consumer = None;
                if g.never_used() {
                    groups.remove(&group_id);
                }
            }
            Ok(false)
        }
        RecordKey::Other(_) => Ok(false),
        RecordKey::Group(group) => {
            match value {
                None => {
                    // the classic group is gone (deleted, or made a consumer group): what is
                    // left is its offsets and its consumer group, if any
                    if let Some(g) = groups.get_mut(&group) {
                        g.clear_classic(kafka_protocol::ResponseError::NotCoordinator);
                        if g.never_used() {
                            groups.remove(&group);
                        }
                    }
                }
                Some(v) => {
                    let v = records::GroupValue::decode(v)?;
                    groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::new(group, now))
                        .restore(v, now);
                }
            }
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_partition_matches_kafka() {
        // Java: Math.abs("my-group".hashCode()) % 50 and friends, computed with the JDK.
        let java_hash = |s: &str| {
            s.encode_utf16()
                .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
        };
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        for g in ["", "a", "consumer-group-1", "ümlaut", "日本"] {
            let p = partition_for(g, 50);
            assert!((0..50).contains(&p), "{g}: {p}");
        }
    }

    #[test]
    fn batches_split_and_replay_latest_wins() {
        let mut groups = BTreeMap::new();
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        }
        .encode();
        let v = |o| {
            OffsetValue {
                offset: o,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 0,
            }
            .encode()
        };
        apply_record(&mut groups, Some(key.clone()), Some(v(5)), 0).unwrap();
        apply_record(&mut groups, Some(key.clone()), Some(v(9)), 0).unwrap();
        assert_eq!(groups["g"].offsets[&("t".into(), 0)].offset, 9);
        apply_record(&mut groups, Some(key), None, 0).unwrap();
        assert!(groups["g"].offsets.is_empty());
        apply_record(
            &mut groups,
            Some(RecordKey::Group("g".into()).encode()),
            None,
            0,
        )
        .unwrap();
        assert!(groups.is_empty());
        assert!(apply_record(&mut groups, None, None, 0).is_err());
    }
}
