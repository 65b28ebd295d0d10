//! The coordinator's groups: locating a group's coordinator, membership (join, sync,
//! heartbeat, leave), listing, describing and deleting groups, and the periodic tick.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::host::Host;
use super::membership::{
    Caller, Group, GroupState, JoinLimits, JoinRequest, JoinResult, Reply, SyncResult,
};
use super::persist::{append, tombstones, KeyValues};
use super::records::{OffsetValue, RecordKey};
use crate::metadata::OFFSETS_TOPIC;

/// Kafka's `Utils.abs(groupId.hashCode()) % partitions`, with Java's `String.hashCode` over
/// UTF-16 code units.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// What ListGroups shows of a group.
pub struct ListedGroup {
    pub id: String,
    pub protocol_type: String,
    /// Kafka's name of its state (classic or consumer group states).
    pub state: &'static str,
    /// `classic` or `consumer` (ListGroups v5's group type).
    pub kind: &'static str,
}

/// What DescribeGroups shows of a group.
pub struct GroupSummary {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

pub(super) type Committed = Vec<((String, i32), Option<OffsetValue>)>;

/// Offsets pending in transactions: by (group, producer id), each partition's offset.
pub(super) type PendingTxnOffsets = std::collections::BTreeMap<
    (String, i64),
    std::collections::BTreeMap<(String, i32), OffsetValue>,
>;

#[derive(Default)]
pub struct Coordinator {
    pub(super) groups: RefCell<HashMap<String, Group>>,
    /// `__consumer_offsets` partitions of this shard whose records are in memory.
    pub(super) loaded: RefCell<HashSet<i32>>,
    pub(super) last_retention_ms: Cell<i64>,
    /// Offsets committed in transactions not settled yet (`txn_offsets.rs`).
    pub(super) txn_offsets: RefCell<PendingTxnOffsets>,
    /// The cluster metadata the consumer groups last looked at (its address): a new one may
    /// have created, deleted or grown a subscribed topic.
    pub(super) last_snapshot: Cell<usize>,
    /// The topics consumer groups subscribe to, per cluster metadata.
    pub(super) topic_index: super::consumer_ops::TopicIndexCache,
}

impl Coordinator {
    /// Writes the group's metadata record if it changed.
    pub(super) async fn persist_group(
        &self,
        host: &dyn Host,
        p: i32,
        id: &str,
        now: i64,
    ) -> Result<(), ResponseError> {
        let value = self.with_group(id, None, |g| g.take_dirty().then(|| g.to_record()));
        let Some(Some(value)) = value else {
            return Ok(());
        };
        let key = RecordKey::Group(id.to_owned()).encode();
        let records: KeyValues = vec![(key, Some(value.encode()))];
        append(host, p, records, now).await
    }

    pub(super) fn limits(host: &dyn Host) -> JoinLimits {
        JoinLimits {
            initial_rebalance_delay_ms: host.settings().initial_rebalance_delay_ms,
            max_size: host.settings().max_size,
        }
    }

    /// The `__consumer_offsets` partition of `group` if this shard coordinates it.
    pub fn locate(&self, host: &dyn Host, group: &str) -> Result<i32, ResponseError> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let snapshot = host.snapshot();
        let Some(topic) = snapshot.topics.get(OFFSETS_TOPIC) else {
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let p = partition_for(group, topic.partitions.len() as i32);
        // Led here, and this shard may write there now: a node whose lease is in doubt
        // (paused, cut off, or back but not yet caught up with the metadata) may have lost the
        // partition, and its groups' state (committed offsets, members) may be stale.
        if !topic.partitions[p as usize].is_led_by(host.node(), host.shard())
            || host.offsets_partition(p).is_none()
        {
            return Err(ResponseError::NotCoordinator);
        }
        if !self.loaded.borrow().contains(&p) {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        Ok(p)
    }

    /// Runs `f` on the group (created empty at `create_at` if given); `None` if it does not
    /// exist.
    pub(super) fn with_group<R>(
        &self,
        id: &str,
        create_at: Option<i64>,
        f: impl FnOnce(&mut Group) -> R,
    ) -> Option<R> {
        let mut groups = self.groups.borrow_mut();
        if let Some(now) = create_at.filter(|_| !groups.contains_key(id)) {
            groups.insert(id.to_owned(), Group::new(id.to_owned(), now));
        }
        groups.get_mut(id).map(f)
    }

    pub async fn join(
        &self,
        host: &dyn Host,
        group: &str,
        req: JoinRequest,
        now: i64,
    ) -> JoinResult {
        let member_id = req.member_id.clone();
        let p = match self.locate(host, group) {
            Ok(p) => p,
            Err(e) => return JoinResult::error(e, member_id),
        };
        let s = host.settings();
        if req.session_timeout_ms < s.min_session_timeout_ms
            || req.session_timeout_ms > s.max_session_timeout_ms
        {
            return JoinResult::error(ResponseError::InvalidSessionTimeout, member_id);
        }
        // A consumer-protocol group: a classic member joins it as one more member (online
        // migration); an empty one becomes a classic group (Kafka's
        // `maybeDeleteEmptyConsumerGroup`).
        let consumer_members = self
            .groups
            .borrow()
            .get(group)
            .and_then(|g| g.consumer.as_ref().map(|c| c.members.len()));
        match consumer_members {
            Some(0) => {
                if let Err(e) = self.drop_empty_consumer_group(host, p, group, now).await {
                    return JoinResult::error(e, member_id);
                }
            }
            Some(_) => return self.classic_join_consumer(host, p, group, req, now).await,
            None => {}
        }
        let limits = Self::limits(host);
        let known = !req.member_id.is_empty();
        let reply = self.with_group(group, (!known).then_some(now), |g| {
            let reply = g.join(req, limits, now);
            g.try_complete_join(now);
            reply
        });
        let Some(reply) = reply else {
            return JoinResult::error(ResponseError::UnknownMemberId, member_id);
        };
        // A refused first join leaves no trace: no empty group appears in ListGroups.
        let unused = self
            .groups
            .borrow()
            .get(group)
            .is_some_and(Group::never_used);
        if unused {
            self.groups.borrow_mut().remove(group);
        }
        if let Err(e) = self.persist_group(host, p, group, now).await {
            tracing::warn!(group, code = e.code(), "writing group metadata failed");
        }
        answer(host, reply, || {
            JoinResult::error(ResponseError::NotCoordinator, member_id)
        })
        .await
    }

    pub async fn sync(
        &self,
        host: &dyn Host,
        group: &str,
        who: Caller<'_>,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
        now: i64,
    ) -> SyncResult {
        let p = self.locate(host, group)?;
        if self.consumer_with_members(group) {
            return self.classic_sync_consumer(host, group, who, protocol, now);
        }
        let reply = self
            .with_group(group, None, |g| {
                g.sync(who, protocol.0, protocol.1, assignments, now)
            })
            .ok_or(ResponseError::UnknownMemberId)?;
        // The leader's assignment is written before the leader hears back.
        self.persist_group(host, p, group, now).await?;
        answer(host, reply, || Err(ResponseError::NotCoordinator)).await
    }

    pub fn heartbeat(
        &self,
        host: &dyn Host,
        group: &str,
        who: Caller<'_>,
        now: i64,
    ) -> Result<(), ResponseError> {
        self.locate(host, group)?;
        if self.consumer_with_members(group) {
            return self.classic_heartbeat_consumer(group, who, now);
        }
        self.with_group(group, None, |g| g.heartbeat(who, now))
            .unwrap_or(Err(ResponseError::UnknownMemberId))
    }

    /// LeaveGroup: one result per `(member id, group instance id)`.
    pub async fn leave(
        &self,
        host: &dyn Host,
        group: &str,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(host, group)?;
        if self.consumer_with_members(group) {
            return self
                .classic_leave_consumer(host, p, group, members, now)
                .await;
        }
        let limits = Self::limits(host);
        let results = self
            .with_group(group, None, |g| g.leave(members, limits, now))
            .ok_or(ResponseError::UnknownMemberId)?;
        self.persist_group(host, p, group, now).await?;
        Ok(results)
    }

    /// Every group this shard coordinates.
    pub fn list(&self) -> Vec<ListedGroup> {
        let mut out: Vec<_> = self
            .groups
            .borrow()
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| match &g.consumer {
                Some(c) => ListedGroup {
                    id: g.id.clone(),
                    protocol_type: "consumer".to_owned(),
                    state: c.state().name(),
                    kind: "consumer",
                },
                None => ListedGroup {
                    id: g.id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state.name(),
                    kind: "classic",
                },
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The groups this shard coordinates, for the metrics: state, members and committed
    /// offsets.
    pub fn report(&self) -> Vec<crate::metrics::report::GroupReport> {
        self.groups
            .borrow()
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| crate::metrics::report::GroupReport {
                group: g.id.clone(),
                state: g
                    .consumer
                    .as_ref()
                    .map_or(g.state.name(), |c| c.state().name()),
                members: g
                    .consumer
                    .as_ref()
                    .map_or(g.members.len(), |c| c.members.len()),
                committed: g
                    .offsets
                    .iter()
                    .map(|((t, p), v)| (t.clone(), *p, v.offset))
                    .collect(),
            })
            .collect()
    }

    pub fn describe(&self, host: &dyn Host, group: &str) -> Result<GroupSummary, ResponseError> {
        self.locate(host, group)?;
        let groups = self.groups.borrow();
        Ok(match groups.get(group) {
            // Kafka describes an unknown group as Dead, without an error; and so a consumer
            // group, which is not a classic group (DescribeGroups up to v5).
            None
            | Some(Group {
                consumer: Some(_), ..
            }) => GroupSummary {
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            },
            Some(g) => GroupSummary {
                state: g.state,
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocol: g.protocol.clone().unwrap_or_default(),
                members: g.describe_members(),
            },
        })
    }

    /// `(protocol type, protocol)` of a group, for SyncGroup v5's answer.
    pub fn protocol(&self, group: &str) -> (Option<String>, Option<String>) {
        self.groups.borrow().get(group).map_or((None, None), |g| {
            (g.protocol_type.clone(), g.protocol.clone())
        })
    }

    /// DeleteGroups for one group: only an empty group can be deleted; its offsets and
    /// metadata get tombstones.
    pub async fn delete(
        &self,
        host: &dyn Host,
        group: &str,
        now: i64,
    ) -> Result<(), ResponseError> {
        let p = self.locate(host, group)?;
        // members whose session ended by now are gone, whether or not the tick (every
        // GROUP_TICK_INTERVAL) has seen it yet: a static member's session ends without a leave,
        // and a delete one session after it stopped must find the group empty, as in Kafka
        let limits = Self::limits(host);
        if self
            .with_group(group, None, |g| {
                g.consumer.is_none() && g.expire(limits, now)
            })
            .unwrap_or(false)
        {
            if let Err(e) = self.persist_group(host, p, group, now).await {
                tracing::warn!(group, code = e.code(), "writing group metadata failed");
            }
        }
        let keys = {
            let groups = self.groups.borrow();
            let g = groups.get(group).ok_or(ResponseError::GroupIdNotFound)?;
            if g.state == GroupState::Dead {
                return Err(ResponseError::GroupIdNotFound);
            }
            if !g.is_empty() {
                return Err(ResponseError::NonEmptyGroup);
            }
            group_tombstones(g)
        };
        append(host, p, keys, now).await?;
        if let Some(mut g) = self.groups.borrow_mut().remove(group) {
            g.kill();
        }
        Ok(())
    }

    /// Session timeouts and join deadlines of every group; offsets retention of empty groups
    /// every `offsets.retention.check.interval.ms`.
    pub async fn tick(&self, host: &dyn Host, now: i64) {
        let limits = Self::limits(host);
        let changed: Vec<String> = self
            .groups
            .borrow_mut()
            .values_mut()
            .filter_map(|g| g.expire(limits, now).then(|| g.id.clone()))
            .collect();
        for id in changed {
            if let Ok(p) = self.locate(host, &id) {
                if let Err(e) = self.persist_group(host, p, &id, now).await {
                    tracing::warn!(group = %id, code = e.code(), "writing group metadata failed");
                }
            }
        }
        self.tick_consumer_groups(host, now).await;
        let cfg = host.settings();
        if now - self.last_retention_ms.get() >= cfg.offsets_retention_check_interval_ms {
            self.last_retention_ms.set(now);
            self.expire_offsets(host, now).await;
        }
    }
}

/// Every record of an empty group gone: its offsets and its metadata (a classic group's record, or
/// a consumer group's metadata and target assignment epoch — its members' records went with them).
pub(super) fn group_tombstones(g: &Group) -> KeyValues {
    let mut keys = tombstones(&g.id, g.offsets.keys().cloned(), g.consumer.is_none());
    if let Some(c) = &g.consumer {
        keys.extend(super::consumer_ops::encode(&g.id, &c.deletion_records()));
    }
    keys
}

/// The answer to a JoinGroup/SyncGroup, waiting for the rebalance step when it is not ready;
/// `stopped()` when the shard stops first or the group dropped the request.
async fn answer<T>(host: &dyn Host, reply: Reply<T>, stopped: impl FnOnce() -> T) -> T {
    let rx = match reply {
        Reply::Now(r) => return r,
        Reply::Wait(rx) => rx,
    };
    let answer = async { rx.await.ok() };
    let stop = async {
        host.stop().stopped().await;
        None
    };
    futures_lite::future::or(answer, stop)
        .await
        .unwrap_or_else(stopped)
}
