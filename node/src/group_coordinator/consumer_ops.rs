//! The coordinator's side of consumer-protocol groups: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe on the groups of this shard, their records written to
//! `__consumer_offsets` before the answer, session and rebalance timeouts and topic changes on
//! the tick.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::consumer::{
    validate_heartbeat, ConsumerGroup, ConsumerRecord, ConsumerSettings, Heartbeat,
    HeartbeatAnswer, HeartbeatError, TopicIndex, LEAVE_GROUP_MEMBER_EPOCH,
};
use super::coordinator::Coordinator;
use super::host::Host;
use super::membership::Group;
use super::persist::{append, KeyValues};
use super::records::RecordKey;
use crate::metadata::Snapshot;
use kafka_protocol::ResponseError;

fn no_message(error: ResponseError) -> HeartbeatError {
    HeartbeatError {
        error,
        message: String::new(),
    }
}

/// The topics a consumer group may subscribe to, from the cluster metadata.
pub fn topic_index(snapshot: &Snapshot) -> TopicIndex {
    let mut index = TopicIndex::default();
    for (name, t) in &snapshot.topics {
        index.insert(name, t.id, t.partitions.len() as i32);
    }
    index
}

/// The [`TopicIndex`] of the cluster metadata a coordinator last looked at, built once per
/// metadata change rather than once per heartbeat (O(topics) each).
#[derive(Default)]
pub(super) struct TopicIndexCache(RefCell<Option<(Arc<Snapshot>, Rc<TopicIndex>)>>);

impl TopicIndexCache {
    pub(super) fn of(&self, snapshot: &Arc<Snapshot>) -> Rc<TopicIndex> {
        let mut cached = self.0.borrow_mut();
        if let Some((s, index)) = cached.as_ref() {
            // the snapshot is held, so its address cannot be reused by a newer one
            if Arc::ptr_eq(s, snapshot) {
                return index.clone();
            }
        }
        let index = Rc::new(topic_index(snapshot));
        *cached = Some((snapshot.clone(), index.clone()));
        index
    }
}

/// The settings of `group`: the broker's `group.consumer.*`, its own configs over them.
pub fn settings(host: &dyn Host, snapshot: &Snapshot, group: &str) -> ConsumerSettings {
    let c = &host.settings().consumer;
    let (session_timeout_ms, heartbeat_interval_ms) = match snapshot.group_configs.get(group) {
        Some(configs) => super::consumer::group_timeouts(configs, c),
        None => (c.session_timeout_ms, c.heartbeat_interval_ms),
    };
    ConsumerSettings {
        session_timeout_ms,
        heartbeat_interval_ms,
        max_size: c.max_size,
        assignors: c.assignors.clone(),
        migration: c.migration,
        classic_max_size: host.settings().max_size,
    }
}

/// A classic group with members a consumer-protocol member joins becomes a consumer group
/// (Kafka's online upgrade, `group.consumer.migration.policy`): the classic group's tombstone,
/// and the records of the consumer group its members form.
fn upgrade(
    g: &mut Group,
    topics: &TopicIndex,
    s: &ConsumerSettings,
    joining: bool,
    now: i64,
) -> Result<(KeyValues, Vec<ConsumerRecord>), HeartbeatError> {
    let id = g.id.clone();
    let refuse = |why: &str| HeartbeatError {
        error: ResponseError::GroupIdNotFound,
        message: format!("Group {id} is not a consumer group{why}."),
    };
    if !joining || !g.upgradable() {
        return Err(refuse(""));
    }
    if !s.migration.upgrade {
        return Err(refuse(
            " and group.consumer.migration.policy does not allow upgrading it",
        ));
    }
    if g.members.len() >= s.max_size {
        // the joining member would not fit: the group stays classic (Kafka converts, then
        // refuses the member and drops the conversion)
        return Err(HeartbeatError {
            error: ResponseError::GroupMaxSizeReached,
            message: format!(
                "The consumer group has reached its maximum capacity of {} members.",
                s.max_size
            ),
        });
    }
    let (generation, members) = g.upgrade_members();
    let Some((c, records)) = ConsumerGroup::from_classic(generation, members, topics, s, now)
    else {
        return Err(refuse(
            " and cannot become one: a member's embedded consumer protocol is malformed",
        ));
    };
    g.clear_classic(ResponseError::RebalanceInProgress);
    g.consumer = Some(c);
    tracing::info!(group = %id, generation, "classic group upgraded to a consumer group");
    let tombstone = (RecordKey::Group(id.clone()).encode(), None);
    Ok((vec![tombstone], records))
}

/// A consumer group's records as `__consumer_offsets` keys and values.
pub(super) fn encode(group: &str, records: &[ConsumerRecord]) -> KeyValues {
    records
        .iter()
        .map(|r| {
            let key = RecordKey::Consumer {
                group: group.to_owned(),
                key: r.key.clone(),
            };
            (key.encode(), r.value.as_ref().map(|v| v.encode()))
        })
        .collect()
}

impl Coordinator {
    /// One ConsumerGroupHeartbeat. The records it produced are written (every in-sync replica)
    /// before the answer; if that fails the group is read back from the log, so memory never
    /// holds what a failover would not.
    pub async fn consumer_heartbeat(
        &self,
        host: &dyn Host,
        group: &str,
        req: Heartbeat,
        now: i64,
    ) -> Result<HeartbeatAnswer, HeartbeatError> {
        let p = self.locate(host, group).map_err(no_message)?;
        let snapshot = host.snapshot();
        let topics = self.topic_index.of(&snapshot);
        let s = settings(host, &snapshot, group);
        // an invalid heartbeat changes nothing, not even a classic group it would upgrade
        validate_heartbeat(&req, &s)?;
        let joining = req.member_epoch == 0;
        let leaving = (req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH).then(|| req.member_id.clone());
        // records written before the heartbeat's own: a classic group's tombstone and its
        // members as the consumer group they became (online upgrade)
        let mut converted: Option<(KeyValues, Vec<ConsumerRecord>)> = None;
        let out = {
            let mut groups = self.groups.borrow_mut();
            if !groups.contains_key(group) {
                if !joining {
                    return Err(HeartbeatError {
                        error: ResponseError::GroupIdNotFound,
                        message: format!("Consumer group {group} not found."),
                    });
                }
                groups.insert(group.to_owned(), Group::new(group.to_owned(), now));
            }
            let g = groups.get_mut(group).expect("present");
            if g.consumer.is_none() {
                if joining && g.is_empty() {
                    // an empty classic group (offsets only) becomes a consumer group, keeping
                    // its offsets
                    g.consumer = Some(ConsumerGroup::default());
                } else {
                    converted = Some(upgrade(g, &topics, &s, joining, now)?);
                }
            }
            let c = g.consumer.as_mut().expect("set");
            if let Some(id) = leaving.as_ref().filter(|id| c.downgrades_without(id, &s)) {
                // its last consumer-protocol member leaves: the group turns classic
                Err(id.clone())
            } else {
                let out = c.heartbeat(req, &topics, &s, now);
                g.note_consumer_emptiness(now);
                Ok(out)
            }
        };
        let out = match out {
            Ok(out) => out,
            Err(leaving) => {
                self.downgrade(host, p, group, &leaving, &topics, now)
                    .await
                    .map_err(no_message)?;
                return Ok(HeartbeatAnswer {
                    member_id: leaving,
                    member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
        };
        let (prefix, mut records) = converted.unwrap_or_default();
        let (answer, more) = match out {
            Ok(x) => x,
            Err(e) => {
                if prefix.is_empty() {
                    self.forget_if_unused(group);
                } else {
                    // the conversion stands even though this heartbeat was refused
                    self.write_consumer_after(host, p, group, prefix, &records, now)
                        .await
                        .map_err(no_message)?;
                }
                return Err(e);
            }
        };
        records.extend(more);
        self.write_consumer_after(host, p, group, prefix, &records, now)
            .await
            .map_err(no_message)?;
        if joining || answer.member_epoch < 0 {
            let what = if joining { "joined" } else { "left" };
            tracing::info!(group, member = %answer.member_id, epoch = answer.member_epoch, "member {what} the consumer group");
        }
        Ok(answer)
    }

    /// An empty consumer group a classic member joins: its records get tombstones (its offsets
    /// stay) and it is a classic group from then on.
    pub(super) async fn drop_empty_consumer_group(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        now: i64,
    ) -> Result<(), ResponseError> {
        let records = match self
            .groups
            .borrow()
            .get(group)
            .and_then(|g| g.consumer.as_ref())
        {
            Some(c) => c.deletion_records(),
            None => return Ok(()),
        };
        append(host, p, encode(group, &records), now).await?;
        if let Some(g) = self.groups.borrow_mut().get_mut(group) {
            g.consumer = None;
        }
        Ok(())
    }

    /// A group created by a refused first heartbeat leaves no trace.
    fn forget_if_unused(&self, group: &str) {
        let mut groups = self.groups.borrow_mut();
        let unused = groups.get(group).is_some_and(|g| {
            g.offsets.is_empty()
                && g.consumer
                    .as_ref()
                    .is_some_and(|c| c.members.is_empty() && c.epoch == 0)
        });
        if unused {
            groups.remove(group);
        }
    }

    /// Writes a group's records; on failure reads the group back from the log.
    pub(super) async fn write_consumer(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        records: &[ConsumerRecord],
        now: i64,
    ) -> Result<(), ResponseError> {
        self.write_consumer_after(host, p, group, KeyValues::new(), records, now)
            .await
    }

    /// [`Coordinator::write_consumer`] after other records of the group (`first`), in one
    /// append.
    async fn write_consumer_after(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        first: KeyValues,
        records: &[ConsumerRecord],
        now: i64,
    ) -> Result<(), ResponseError> {
        if records.is_empty() && first.is_empty() {
            return Ok(());
        }
        let mut keys = first;
        keys.extend(encode(group, records));
        let written = append(host, p, keys, now).await;
        if let Err(e) = written {
            tracing::warn!(
                group,
                code = e.code(),
                "writing consumer group records failed; reloading the group"
            );
            self.reload_group(host, p, group, now).await;
            return Err(e);
        }
        Ok(())
    }

    /// Replays one group's records from its partition (after a failed write): memory holds
    /// only what a failover would read.
    pub(super) async fn reload_group(&self, host: &dyn Host, p: i32, group: &str, now: i64) {
        let Some(part) = host.offsets_partition(p) else {
            return;
        };
        let fresh = super::load::read_group(&part, group, now).await;
        let mut groups = self.groups.borrow_mut();
        if let Some(mut old) = groups.remove(group) {
            old.clear_classic(ResponseError::NotCoordinator);
        }
        if let Some(g) = fresh {
            groups.insert(group.to_owned(), g);
        }
    }

    /// The consumer group `group` as ConsumerGroupDescribe shows it.
    pub fn consumer_describe(
        &self,
        host: &dyn Host,
        group: &str,
    ) -> Result<(ConsumerGroup, Arc<Snapshot>, &'static str), HeartbeatError> {
        self.locate(host, group).map_err(no_message)?;
        let groups = self.groups.borrow();
        let Some(c) = groups.get(group).and_then(|g| g.consumer.as_ref()) else {
            let message = if groups.contains_key(group) {
                format!("Group {group} is not a consumer group.")
            } else {
                format!("Group {group} not found.")
            };
            return Err(HeartbeatError {
                error: ResponseError::GroupIdNotFound,
                message,
            });
        };
        let snapshot = host.snapshot();
        let assignor = c.assignor(&settings(host, &snapshot, group)).name();
        Ok((c.clone(), snapshot, assignor))
    }

    /// Session and rebalance timeouts; topics created, deleted or grown (when the cluster
    /// metadata changed since the last tick).
    pub(super) async fn tick_consumer_groups(&self, host: &dyn Host, now: i64) {
        let snapshot = host.snapshot();
        let changed_metadata = {
            let ptr = Arc::as_ptr(&snapshot) as usize;
            self.last_snapshot.replace(ptr) != ptr
        };
        let due: Vec<String> = self
            .groups
            .borrow()
            .values()
            .filter(|g| {
                g.consumer.as_ref().is_some_and(|c| {
                    changed_metadata && !c.members.is_empty()
                        || c.members.values().any(|m| m.expired(now))
                })
            })
            .map(|g| g.id.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        let topics = self.topic_index.of(&snapshot);
        for id in due {
            let s = settings(host, &snapshot, &id);
            let Ok(p) = self.locate(host, &id) else {
                continue;
            };
            let (records, downgrade) = {
                let mut groups = self.groups.borrow_mut();
                let Some(g) = groups.get_mut(&id) else {
                    continue;
                };
                let Some(c) = g.consumer.as_mut() else {
                    continue;
                };
                let before: Vec<String> = c.members.keys().cloned().collect();
                let (mut records, downgrade) = c.expire(&topics, &s, now);
                for m in before.iter().filter(|m| !c.members.contains_key(*m)) {
                    tracing::info!(group = %id, member = %m, "member fenced: session or rebalance timeout");
                }
                if downgrade.is_none() {
                    records.extend(c.refresh(&topics, &s, now));
                }
                g.note_consumer_emptiness(now);
                (records, downgrade)
            };
            if let Err(e) = self.write_consumer(host, p, &id, &records, now).await {
                tracing::warn!(group = %id, code = e.code(), "consumer group timeouts not written");
                continue;
            }
            if let Some(m) = downgrade {
                tracing::info!(group = %id, member = %m, "member fenced: session or rebalance timeout");
                if let Err(e) = self.downgrade(host, p, &id, &m, &topics, now).await {
                    tracing::warn!(group = %id, code = e.code(), "consumer group not turned classic");
                }
            }
        }
    }
}
