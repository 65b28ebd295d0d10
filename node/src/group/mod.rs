//! The group coordinator (Kafka's classic group protocol) and committed offsets.
//!
//! Owns: the groups whose `__consumer_offsets` partition this shard leads — the coordinator of
//! group `g` is the shard leading partition `abs(javaHashCode(g)) % partitions`, as in Kafka —
//! their membership state machines ([`state::Group`]) and committed offsets, and the records
//! that persist them in that partition ([`records`]), replayed into memory when the shard opens
//! it. Must not touch: partitions of other shards, or any group another shard coordinates
//! (those requests get NOT_COORDINATOR).
//!
//! `__consumer_offsets` is never cleaned by a compactor here: it keeps every record (time and
//! size retention are off for it) and a load replays them all, the latest record per key
//! winning.

pub mod records;
pub mod state;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use iouring_log::{Offset, ReadOptions};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use crate::partition::Partition;
use crate::shard::{now_ms, ShardCtx};
use records::{OffsetValue, RecordKey};
use state::{Caller, Group, GroupState, JoinLimits, JoinRequest, JoinResult, Reply, SyncResult};

pub use crate::metadata::OFFSETS_TOPIC;

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

/// What DescribeGroups shows of a group.
pub struct GroupSummary {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

type Committed = Vec<((String, i32), Option<OffsetValue>)>;
/// Records to append: `(key, value)`, a `None` value being a tombstone.
type KeyValues = Vec<(Bytes, Option<Bytes>)>;

#[derive(Default)]
pub struct Coordinator {
    groups: RefCell<HashMap<String, Group>>,
    /// `__consumer_offsets` partitions of this shard whose records are in memory.
    loaded: RefCell<HashSet<i32>>,
    last_retention_ms: Cell<i64>,
}

impl Coordinator {
    fn limits(ctx: &ShardCtx) -> JoinLimits {
        JoinLimits {
            initial_rebalance_delay_ms: ctx.config.group.initial_rebalance_delay_ms,
            max_size: ctx.config.group.max_size,
        }
    }

    /// The `__consumer_offsets` partition of `group` if this shard coordinates it.
    pub fn locate(&self, ctx: &ShardCtx, group: &str) -> Result<i32, ResponseError> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let snapshot = ctx.snapshot.borrow();
        let Some(topic) = snapshot.topics.get(OFFSETS_TOPIC) else {
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let p = partition_for(group, topic.partitions.len() as i32);
        if topic.partitions[p as usize].shard != ctx.shard {
            return Err(ResponseError::NotCoordinator);
        }
        if !self.loaded.borrow().contains(&p) {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        Ok(p)
    }

    /// Runs `f` on the group (created empty when `create`); `None` if it does not exist.
    fn with_group<R>(&self, id: &str, create: bool, f: impl FnOnce(&mut Group) -> R) -> Option<R> {
        let mut groups = self.groups.borrow_mut();
        if create && !groups.contains_key(id) {
            groups.insert(id.to_owned(), Group::new(id.to_owned(), now_ms()));
        }
        groups.get_mut(id).map(f)
    }

    /// Writes the group's metadata record if it changed.
    async fn persist_group(&self, ctx: &ShardCtx, p: i32, id: &str) -> Result<(), ResponseError> {
        let value = self.with_group(id, false, |g| g.take_dirty().then(|| g.to_record()));
        let Some(Some(value)) = value else {
            return Ok(());
        };
        let key = RecordKey::Group(id.to_owned()).encode();
        let records: KeyValues = vec![(key, Some(value.encode()))];
        append(ctx, p, records).await
    }

    pub async fn join(&self, ctx: &ShardCtx, group: &str, req: JoinRequest) -> JoinResult {
        let member_id = req.member_id.clone();
        let p = match self.locate(ctx, group) {
            Ok(p) => p,
            Err(e) => return JoinResult::error(e, member_id),
        };
        let s = &ctx.config.group;
        if req.session_timeout_ms < s.min_session_timeout_ms
            || req.session_timeout_ms > s.max_session_timeout_ms
        {
            return JoinResult::error(ResponseError::InvalidSessionTimeout, member_id);
        }
        let limits = Self::limits(ctx);
        let now = now_ms();
        let known = !req.member_id.is_empty();
        let reply = self.with_group(group, !known, |g| {
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
        if let Err(e) = self.persist_group(ctx, p, group).await {
            tracing::warn!(group, code = e.code(), "writing group metadata failed");
        }
        answer(ctx, reply, || {
            JoinResult::error(ResponseError::NotCoordinator, member_id)
        })
        .await
    }

    pub async fn sync(
        &self,
        ctx: &ShardCtx,
        group: &str,
        who: Caller<'_>,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResult {
        let p = self.locate(ctx, group)?;
        let now = now_ms();
        let reply = self
            .with_group(group, false, |g| {
                g.sync(who, protocol.0, protocol.1, assignments, now)
            })
            .ok_or(ResponseError::UnknownMemberId)?;
        // The leader's assignment is written before the leader hears back.
        self.persist_group(ctx, p, group).await?;
        answer(ctx, reply, || Err(ResponseError::NotCoordinator)).await
    }

    pub fn heartbeat(
        &self,
        ctx: &ShardCtx,
        group: &str,
        who: Caller<'_>,
    ) -> Result<(), ResponseError> {
        self.locate(ctx, group)?;
        let now = now_ms();
        self.with_group(group, false, |g| g.heartbeat(who, now))
            .unwrap_or(Err(ResponseError::UnknownMemberId))
    }

    /// LeaveGroup: one result per `(member id, group instance id)`.
    pub async fn leave(
        &self,
        ctx: &ShardCtx,
        group: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(ctx, group)?;
        let limits = Self::limits(ctx);
        let now = now_ms();
        let results = self
            .with_group(group, false, |g| g.leave(members, limits, now))
            .ok_or(ResponseError::UnknownMemberId)?;
        self.persist_group(ctx, p, group).await?;
        Ok(results)
    }

    /// OffsetCommit. `Err` is an error for the whole request; otherwise one result per
    /// partition, in request order.
    pub async fn commit(
        &self,
        ctx: &ShardCtx,
        group: &str,
        who: Caller<'_>,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(ctx, group)?;
        let now = now_ms();
        let exists = self.groups.borrow().contains_key(group);
        if !exists && who.generation >= 0 {
            return Err(ResponseError::IllegalGeneration);
        }
        self.with_group(group, true, |g| g.check_commit(who, now))
            .expect("created")?;
        let max_metadata = ctx.config.group.offset_metadata_max_bytes;
        let mut results = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for (topic, partition, value) in offsets {
            let exists = ctx.snapshot.borrow().partition(&topic, partition).is_some();
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
                records.push((key.encode(), Some(value.encode())));
                accepted.push((results.len(), topic, partition, value));
                Ok(())
            };
            results.push(result);
        }
        if records.is_empty() {
            return Ok(results);
        }
        if let Err(e) = append(ctx, p, records).await {
            for (i, ..) in &accepted {
                results[*i] = Err(e);
            }
            return Ok(results);
        }
        self.with_group(group, true, |g| {
            for (_, topic, partition, value) in accepted {
                g.offsets.insert((topic, partition), value);
            }
        });
        Ok(results)
    }

    /// OffsetFetch: the committed offset of each asked partition (`None`: nothing committed),
    /// or of every partition the group committed when `partitions` is `None`.
    pub fn fetch_offsets(
        &self,
        ctx: &ShardCtx,
        group: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Committed, ResponseError> {
        self.locate(ctx, group)?;
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

    /// `(group id, protocol type, state)` of every group this shard coordinates.
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        let mut out: Vec<_> = self
            .groups
            .borrow()
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| {
                (
                    g.id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state,
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub fn describe(&self, ctx: &ShardCtx, group: &str) -> Result<GroupSummary, ResponseError> {
        self.locate(ctx, group)?;
        let groups = self.groups.borrow();
        Ok(match groups.get(group) {
            // Kafka describes an unknown group as Dead, without an error.
            None => GroupSummary {
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
    pub async fn delete(&self, ctx: &ShardCtx, group: &str) -> Result<(), ResponseError> {
        let p = self.locate(ctx, group)?;
        let keys = {
            let groups = self.groups.borrow();
            let g = groups.get(group).ok_or(ResponseError::GroupIdNotFound)?;
            if g.state == GroupState::Dead {
                return Err(ResponseError::GroupIdNotFound);
            }
            if !g.is_empty() {
                return Err(ResponseError::NonEmptyGroup);
            }
            tombstones(group, g.offsets.keys().cloned(), true)
        };
        append(ctx, p, keys).await?;
        if let Some(mut g) = self.groups.borrow_mut().remove(group) {
            g.kill();
        }
        Ok(())
    }

    /// Session timeouts and join deadlines of every group; offsets retention of empty groups
    /// every `offsets.retention.check.interval.ms`.
    pub async fn tick(&self, ctx: &ShardCtx) {
        let now = now_ms();
        let limits = Self::limits(ctx);
        let changed: Vec<String> = self
            .groups
            .borrow_mut()
            .values_mut()
            .filter_map(|g| g.expire(limits, now).then(|| g.id.clone()))
            .collect();
        for id in changed {
            if let Ok(p) = self.locate(ctx, &id) {
                if let Err(e) = self.persist_group(ctx, p, &id).await {
                    tracing::warn!(group = %id, code = e.code(), "writing group metadata failed");
                }
            }
        }
        let cfg = &ctx.config.group;
        if now - self.last_retention_ms.get() >= cfg.offsets_retention_check_interval_ms {
            self.last_retention_ms.set(now);
            self.expire_offsets(ctx, now).await;
        }
    }

    /// Kafka's offsets retention: once a group has been empty for `offsets.retention.minutes`
    /// its committed offsets expire and the group is removed.
    async fn expire_offsets(&self, ctx: &ShardCtx, now: i64) {
        let retention = ctx.config.group.offsets_retention_ms;
        let expired: Vec<(String, KeyValues)> = self
            .groups
            .borrow()
            .values()
            .filter(|g| g.is_empty() && now - g.state_since_ms >= retention)
            .map(|g| {
                (
                    g.id.clone(),
                    tombstones(&g.id, g.offsets.keys().cloned(), true),
                )
            })
            .collect();
        for (id, keys) in expired {
            let Ok(p) = self.locate(ctx, &id) else {
                continue;
            };
            match append(ctx, p, keys).await {
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

    /// Replays partition `p` of `__consumer_offsets` into memory. Until it finishes, requests
    /// for its groups get COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn load_partition(&self, part: &Partition) {
        let p = part.index;
        let mut next = part.log.log_start_offset();
        let end = part.log.log_end_offset();
        let (mut offsets, mut metas) = (0usize, 0usize);
        let now = now_ms();
        let mut groups = BTreeMap::<String, Group>::new();
        while next < end {
            let opts = ReadOptions {
                max_bytes: 1 << 20,
                max_offset: None,
                min_one_batch: true,
            };
            let bytes = match part.log.read(next, opts).await {
                Ok(r) if r.is_empty() => break,
                Ok(r) => match iouring_log::read_slices_to_vec(&r.slices).await {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::error!(partition = p, error = %e, "loading __consumer_offsets");
                        break;
                    }
                },
                Err(e) => {
                    tracing::error!(partition = p, error = %e, "loading __consumer_offsets");
                    break;
                }
            };
            let before = next;
            for batch in whole_batches(Bytes::from(bytes)) {
                let mut batch = batch;
                let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
                    tracing::error!(
                        partition = p,
                        offset = next.0,
                        "undecodable batch in __consumer_offsets; skipped"
                    );
                    continue;
                };
                for r in set.records {
                    if r.offset < next.0 {
                        continue;
                    }
                    next = Offset(r.offset + 1);
                    if r.control {
                        continue;
                    }
                    match apply_record(&mut groups, r.key, r.value, now) {
                        Ok(true) => offsets += 1,
                        Ok(false) => metas += 1,
                        Err(e) => {
                            tracing::warn!(partition = p, offset = r.offset, error = %e, "skipped record")
                        }
                    }
                }
            }
            if next == before {
                break;
            }
        }
        let count = groups.len();
        self.groups.borrow_mut().extend(groups);
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
        self.groups.borrow_mut().retain(|id, g| {
            let keep = partition_for(id, partitions) != p;
            if !keep {
                g.kill();
            }
            keep
        });
    }
}

/// Applies one record during load; `Ok(true)` for an offset record, `Ok(false)` for group
/// metadata.
fn apply_record(
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
        RecordKey::Group(group) => {
            match value {
                None => {
                    groups.remove(&group);
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

/// Tombstones for the given offsets of `group` (and its metadata when `group_too`).
fn tombstones(
    group: &str,
    partitions: impl Iterator<Item = (String, i32)>,
    group_too: bool,
) -> KeyValues {
    let mut out: KeyValues = partitions
        .map(|(topic, partition)| {
            let key = RecordKey::Offset {
                group: group.to_owned(),
                topic,
                partition,
            };
            (key.encode(), None)
        })
        .collect();
    if group_too {
        out.push((RecordKey::Group(group.to_owned()).encode(), None));
    }
    out
}

/// Splits fetched bytes into whole record batches (a trailing partial batch is dropped).
fn whole_batches(bytes: Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        if at + 12 + len > bytes.len() {
            break;
        }
        out.push(bytes.slice(at..at + 12 + len));
        at += 12 + len;
    }
    out
}

/// Appends coordinator records to partition `p` of `__consumer_offsets` and waits until they
/// are written to the segment file: a commit survives the broker being killed once it is
/// acknowledged (not a machine crash: like Kafka, no fsync per commit; `log.flush.*` applies).
async fn append(ctx: &ShardCtx, p: i32, records: KeyValues) -> Result<(), ResponseError> {
    let part = ctx
        .partition(OFFSETS_TOPIC, p)
        .ok_or(ResponseError::NotCoordinator)?;
    let now = now_ms();
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: now,
            key: Some(key),
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).map_err(|e| {
        tracing::error!(error = %e, "encoding __consumer_offsets records");
        ResponseError::UnknownServerError
    })?;
    let header = iouring_log::BatchHeader::parse(&buf).map_err(|e| {
        tracing::error!(error = %e, "encoded __consumer_offsets batch");
        ResponseError::UnknownServerError
    })?;
    let epoch = ctx.leader_epoch(&part);
    let appended = part
        .append_as_leader(&buf, &header, epoch, now)
        .await
        .map_err(|refused| {
            tracing::error!(partition = p, error = %refused.message, "appending to __consumer_offsets");
            match refused.error {
                ResponseError::RecordListTooLarge | ResponseError::MessageTooLarge => {
                    ResponseError::InvalidCommitOffsetSize
                }
                _ => ResponseError::UnknownServerError,
            }
        })?;
    part.wait_acknowledgeable(&appended)
        .await
        .map_err(|refused| {
            tracing::error!(partition = p, error = %refused.message, "writing __consumer_offsets");
            ResponseError::UnknownServerError
        })
}

/// The answer to a JoinGroup/SyncGroup, waiting for the rebalance step when it is not ready;
/// `stopped()` when the shard stops first or the group dropped the request.
async fn answer<T>(ctx: &ShardCtx, reply: Reply<T>, stopped: impl FnOnce() -> T) -> T {
    let rx = match reply {
        Reply::Now(r) => return r,
        Reply::Wait(rx) => rx,
    };
    let seen = ctx.stop_notify.generation();
    if ctx.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return stopped();
    }
    let answer = async { rx.await.ok() };
    let stop = async {
        ctx.stop_notify.changed(seen).await;
        None
    };
    futures_lite::future::or(answer, stop)
        .await
        .unwrap_or_else(stopped)
}

/// The coordinator of the shard, as a shared handle for the timer task.
pub fn spawn_ticker(ctx: Rc<ShardCtx>) -> glommio::task::JoinHandle<()> {
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(crate::limits::GROUP_TICK_INTERVAL).await;
            if ctx.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            ctx.groups.tick(&ctx).await;
        }
    })
    .detach()
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
        assert!(whole_batches(Bytes::from_static(&[0; 11])).is_empty());
    }
}
