//! Committed offsets: OffsetCommit, OffsetFetch, and Kafka's offsets retention.

use kafka_protocol::ResponseError;

use super::coordinator::{Committed, Coordinator};
use super::host::Host;
use super::membership::{Caller, Group};
use super::persist::{append, append_in, tombstones, KeyValues};
use super::records::{OffsetValue, RecordKey};
use crate::partition::internal::InTransaction;

/// An offset commit's partitions checked: one result per partition in request order, the
/// records of those accepted, and those with their place in the results.
pub(super) struct Checked {
    pub results: Vec<Result<(), ResponseError>>,
    pub records: KeyValues,
    pub accepted: Vec<(usize, String, i32, OffsetValue)>,
}

/// Kafka's checks of committed offsets: the partition must exist (UNKNOWN_TOPIC_OR_PARTITION),
/// the metadata fit `offset.metadata.max.bytes` (OFFSET_METADATA_TOO_LARGE).
pub(super) fn checked_offsets(
    host: &dyn Host,
    group: &str,
    offsets: Vec<(String, i32, OffsetValue)>,
) -> Checked {
    let max_metadata = host.settings().offset_metadata_max_bytes;
    let mut checked = Checked {
        results: Vec::with_capacity(offsets.len()),
        records: Vec::new(),
        accepted: Vec::new(),
    };
    for (topic, partition, value) in offsets {
        let exists = host.snapshot().partition(&topic, partition).is_some();
        let result = if !exists {
            Err(ResponseError::UnknownTopicOrPartition)
        } else if value.metadata.len() > max_metadata {
            Err(ResponseError::OffsetMetadataTooLarge)
        } else {
            let key = RecordKey::Offset {
                group: group.to_owned(),
                topic: topic.clone(),
                partition,
            };
            checked.records.push((key.encode(), Some(value.encode())));
            let at = checked.results.len();
            checked.accepted.push((at, topic, partition, value));
            Ok(())
        };
        checked.results.push(result);
    }
    checked
}

/// Writes the accepted offsets of `checked` (in `txn`'s transaction when given): the results,
/// each accepted one failed with the write's error if it failed, and the offsets written (none
/// when the write failed or nothing was accepted).
pub(super) async fn write_checked(
    host: &dyn Host,
    p: i32,
    checked: Checked,
    txn: Option<InTransaction>,
    now: i64,
) -> (
    Vec<Result<(), ResponseError>>,
    Vec<(String, i32, OffsetValue)>,
) {
    let Checked {
        mut results,
        records,
        accepted,
    } = checked;
    if records.is_empty() {
        return (results, Vec::new());
    }
    if let Err(e) = append_in(host, p, records, txn, now).await {
        for (i, ..) in &accepted {
            results[*i] = Err(e);
        }
        return (results, Vec::new());
    }
    let written = accepted.into_iter().map(|(_, t, p, v)| (t, p, v)).collect();
    (results, written)
}

impl Coordinator {
    /// OffsetCommit. `Err` is an error for the whole request; otherwise one result per
    /// partition, in request order.
    pub async fn commit(
        &self,
        host: &dyn Host,
        group: &str,
        who: Caller<'_>,
        offsets: Vec<(String, i32, OffsetValue)>,
        now: i64,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(host, group)?;
        let exists = self.groups.borrow().contains_key(group);
        if !exists && who.generation >= 0 {
            return Err(ResponseError::IllegalGeneration);
        }
        self.with_group(group, Some(now), |g| g.check_commit(who, now))
            .expect("created")?;
        let checked = checked_offsets(host, group, offsets);
        let (results, written) = write_checked(host, p, checked, None, now).await;
        self.with_group(group, Some(now), |g| {
            for (topic, partition, value) in written {
                g.offsets.insert((topic, partition), value);
            }
        });
        Ok(results)
    }

    /// OffsetFetch: the committed offset of each asked partition (`None`: nothing committed),
    /// or of every partition the group committed when `partitions` is `None`.
    /// OffsetFetch v9's member check (Kafka's `ConsumerGroup.validateOffsetFetch`): a member of
    /// a consumer-protocol group must be one (UNKNOWN_MEMBER_ID) at its current epoch
    /// (STALE_MEMBER_EPOCH); a fetch without a member (an admin tool) is not checked, nor a
    /// classic group's.
    pub fn check_fetch(
        &self,
        group: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let Some(member_id) = member_id.filter(|_| member_epoch >= 0) else {
            return Ok(());
        };
        let groups = self.groups.borrow();
        let Some(c) = groups.get(group).and_then(|g| g.consumer.as_ref()) else {
            return Ok(());
        };
        let m = c
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if m.current.member_epoch != member_epoch {
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }

    pub fn fetch_offsets(
        &self,
        host: &dyn Host,
        group: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Committed, ResponseError> {
        self.locate(host, group)?;
        let groups = self.groups.borrow();
        let offsets = groups.get(group).map(|g| &g.offsets);
        Ok(match partitions {
            Some(ps) => ps
                .into_iter()
                .map(|k| {
                    let v = offsets.and_then(|o| o.get(&k)).cloned();
                    (k, v)
                })
                .collect(),
            None => offsets
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), Some(v.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Kafka's offsets retention: once a group has been empty for `offsets.retention.minutes`
    /// its committed offsets expire and the group is removed.
    pub(super) async fn expire_offsets(&self, host: &dyn Host, now: i64) {
        let retention = host.settings().offsets_retention_ms;
        let expired: Vec<(String, KeyValues)> = self
            .groups
            .borrow()
            .values()
            .filter(|g| g.is_empty() && now - g.state_since_ms >= retention)
            .map(|g| (g.id.clone(), super::coordinator::group_tombstones(g)))
            .collect();
        for (id, keys) in expired {
            let Ok(p) = self.locate(host, &id) else {
                continue;
            };
            match append(host, p, keys, now).await {
                Ok(()) => {
                    tracing::info!(group = %id, "offsets expired (group empty past offsets.retention.minutes)");
                    let still_empty = self.groups.borrow().get(&id).is_some_and(Group::is_empty);
                    if still_empty {
                        self.groups.borrow_mut().remove(&id);
                    }
                }
                Err(e) => tracing::warn!(group = %id, code = e.code(), "expiring offsets failed"),
            }
        }
    }

    /// OffsetDelete: removes a group's committed offsets of the given partitions (tombstones
    /// in `__consumer_offsets`). Kafka's rules: the group must exist; an empty group, or a
    /// consumer group whose members do not subscribe to the topic, loses them; a partition of
    /// a subscribed topic gets GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group of another
    /// protocol type NON_EMPTY_GROUP for the whole request.
    pub async fn delete_offsets(
        &self,
        host: &dyn Host,
        group: &str,
        partitions: Vec<(String, i32)>,
        now: i64,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(host, group)?;
        let (results, gone) = {
            let groups = self.groups.borrow();
            let g = groups
                .get(group)
                .filter(|g| g.state != super::membership::GroupState::Dead)
                .ok_or(ResponseError::GroupIdNotFound)?;
            let consumer = g.protocol_type.as_deref() == Some("consumer") || g.consumer.is_some();
            if !g.is_empty() && !consumer {
                return Err(ResponseError::NonEmptyGroup);
            }
            let subscribed = match (&g.consumer, g.is_empty()) {
                (_, true) => Default::default(),
                // a consumer-protocol group: its members' topics, by name and by regex
                (Some(c), false) => {
                    let index = super::consumer_ops::topic_index(&host.snapshot());
                    c.members
                        .values()
                        .flat_map(|m| m.subscribed_topics(&index))
                        .filter_map(|id| index.by_id.get(&id).map(|t| t.0.clone()))
                        .collect()
                }
                (None, false) => g.subscribed_topics(),
            };
            let mut gone = Vec::new();
            let results = partitions
                .into_iter()
                .map(|(topic, partition)| {
                    if subscribed.contains(&topic) {
                        return Err(ResponseError::GroupSubscribedToTopic);
                    }
                    if g.offsets.contains_key(&(topic.clone(), partition)) {
                        gone.push((topic, partition));
                    }
                    Ok(())
                })
                .collect::<Vec<_>>();
            (results, gone)
        };
        if gone.is_empty() {
            return Ok(results);
        }
        append(host, p, tombstones(group, gone.iter().cloned(), false), now).await?;
        self.with_group(group, None, |g| {
            for key in &gone {
                g.offsets.remove(key);
            }
        });
        Ok(results)
    }
}
