//! Classic-protocol members inside a consumer group: Kafka's online migration between the two
//! group protocols (KIP-848). A classic consumer (JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup) joining a consumer group is one more member of it: its subscription comes from
//! its embedded `ConsumerProtocolSubscription`, the server-side assignor gives it its partitions,
//! and it reconciles as a consumer-protocol member does — except that it learns a new epoch by
//! rejoining (told with REBALANCE_IN_PROGRESS) and reports what it still owns in that JoinGroup.
//! SyncGroup hands it the partitions it may own now, as a `ConsumerProtocolAssignment`.
//!
//! Also the conversions: a classic group becomes a consumer group when a consumer-protocol
//! member joins it ([`ConsumerGroup::from_classic`]), and a consumer group whose members
//! would all be classic after one leaves becomes a classic group again
//! ([`ConsumerGroup::classic_image`]; the coordinator builds the classic group from it).

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition,
};
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::reconcile::reconcile;
use super::{
    Assignment, ClassicMemberMetadata, ConsumerGroup, ConsumerKey, ConsumerRecord,
    ConsumerSettings, ConsumerValue, CurrentAssignment, MemberMetadata, MemberState, TopicIndex,
};
use crate::group_coordinator::join::JoinRequest;

/// The protocol type of Kafka's consumers (the only one a consumer group takes).
pub const PROTOCOL_TYPE: &str = "consumer";

/// The newest `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` version known here;
/// newer ones are read as it (Kafka's consumer protocol is forward compatible).
const CONSUMER_PROTOCOL_VERSION_MAX: i16 = 3;

/// What a classic member's protocol metadata says (Kafka's `ConsumerProtocolSubscription`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub version: i16,
    pub topics: Vec<String>,
    /// Partitions the member still owns (version 1+; an eager member owns none when it joins).
    pub owned: Vec<(String, Vec<i32>)>,
    pub rack_id: Option<String>,
}

/// Decodes a classic member's subscription; `None` if it is not Kafka's consumer protocol.
pub fn decode_subscription(metadata: &Bytes) -> Option<Subscription> {
    let mut b = metadata.clone();
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16();
    if version < 0 {
        return None;
    }
    let sub =
        ConsumerProtocolSubscription::decode(&mut b, version.min(CONSUMER_PROTOCOL_VERSION_MAX))
            .ok()?;
    Some(Subscription {
        version,
        topics: sub.topics.iter().map(|t| t.to_string()).collect(),
        owned: sub
            .owned_partitions
            .iter()
            .map(|tp| (tp.topic.to_string(), tp.partitions.clone()))
            .collect(),
        rack_id: sub.rack_id.map(|r| r.to_string()),
    })
}

/// The version prefix of a member's protocol metadata (0 when absent).
fn metadata_version(metadata: &Bytes) -> i16 {
    if metadata.len() < 2 {
        return 0;
    }
    i16::from_be_bytes([metadata[0], metadata[1]]).clamp(0, CONSUMER_PROTOCOL_VERSION_MAX)
}

/// The SyncGroup assignment of `partitions`, at the version the member subscribed with.
pub fn encode_assignment(partitions: &Assignment, topics: &TopicIndex, version: i16) -> Bytes {
    let version = version.clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
    let mut named: Vec<(String, Vec<i32>)> = partitions
        .iter()
        .filter_map(|(id, ps)| {
            let (name, _) = topics.by_id.get(id)?;
            Some((name.clone(), ps.iter().copied().collect()))
        })
        .collect();
    named.sort();
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        named
            .into_iter()
            .map(|(t, ps)| {
                TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(t)))
                    .with_partitions(ps)
            })
            .collect(),
    );
    let mut out = BytesMut::new();
    out.put_i16(version);
    // encoding a built message into a growable buffer cannot fail
    let _ = assignment.encode(&mut out, version);
    out.freeze()
}

/// A classic member's assignment bytes as partitions by topic id (topics gone are dropped;
/// bytes that do not decode are no partitions).
pub fn decode_assignment(bytes: &Bytes, topics: &TopicIndex) -> Assignment {
    let mut b = bytes.clone();
    let mut out = Assignment::new();
    if b.remaining() < 2 {
        return out;
    }
    let version = b.get_i16().clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
    let Ok(a) = ConsumerProtocolAssignment::decode(&mut b, version) else {
        return out;
    };
    for tp in a.assigned_partitions {
        if let Some((id, count)) = topics.by_name.get(tp.topic.as_str()) {
            let set = out.entry(*id).or_default();
            set.extend(tp.partitions.iter().filter(|p| (0..*count).contains(*p)));
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

fn by_id(named: &[(String, Vec<i32>)], topics: &TopicIndex) -> Assignment {
    let mut out = Assignment::new();
    for (name, ps) in named {
        if let Some((id, _)) = topics.by_name.get(name) {
            out.entry(*id).or_default().extend(ps.iter().copied());
        }
    }
    out
}

/// What a classic JoinGroup to a consumer group leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassicJoined {
    /// MEMBER_ID_REQUIRED: the member rejoins with this id.
    MemberIdRequired(String),
    /// Joined at `generation` (its member epoch); it is never the leader: the coordinator
    /// assigns.
    Joined {
        member_id: String,
        generation: i32,
        protocol: String,
        records: Vec<ConsumerRecord>,
    },
}

/// What a classic member is, whichever kind of group it is in: what it sent in its last
/// JoinGroup. Carried across a conversion in both directions (`from_classic`,
/// `classic_image`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
}

/// A classic member of a consumer group as the classic group it becomes part of needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicImageMember {
    pub member: ClassicMember,
    /// Its target assignment, which the classic group starts from.
    pub assigned: Assignment,
}

/// A consumer group turning back into a classic group: its epoch becomes the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicImage {
    pub generation: i32,
    pub members: Vec<ClassicImageMember>,
}

/// A member of a classic group turning into a consumer group.
#[derive(Debug, Clone)]
pub struct FromClassic {
    pub member: ClassicMember,
    /// Its subscription for the group's protocol.
    pub subscription: Bytes,
    /// Its assignment of the last generation.
    pub assignment: Bytes,
}

impl ConsumerGroup {
    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and a protocol every
    /// classic member already in the group supports.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type != PROTOCOL_TYPE || protocols.is_empty() {
            return false;
        }
        let classic: Vec<&ClassicMemberMetadata> = self
            .members
            .values()
            .filter_map(|m| m.meta.classic.as_ref())
            .collect();
        protocols.iter().any(|(name, _)| {
            classic
                .iter()
                .all(|c| c.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// The classic member `member_id` (checked against its instance id): UNKNOWN_MEMBER_ID if
    /// it is not one, FENCED_INSTANCE_ID if another member holds the instance id.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&super::Member, ResponseError> {
        let id = match instance_id {
            None => member_id,
            Some(inst) => {
                let holder = self
                    .static_members
                    .get(inst)
                    .ok_or(ResponseError::UnknownMemberId)?;
                if holder != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
                holder.as_str()
            }
        };
        let m = self.members.get(id).ok_or(ResponseError::UnknownMemberId)?;
        if m.meta.classic.is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        Ok(m)
    }

    /// JoinGroup of a classic member (Kafka's `classicGroupJoinToConsumerGroup`).
    pub fn classic_join(
        &mut self,
        req: JoinRequest,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Result<ClassicJoined, ResponseError> {
        let unknown = req.member_id.is_empty();
        let id = if unknown {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        let replacing = req
            .instance_id
            .as_ref()
            .and_then(|i| self.static_members.get(i))
            .is_some();
        if !self.members.contains_key(&id) && !replacing && self.members.len() >= s.max_size {
            return Err(ResponseError::GroupMaxSizeReached);
        }
        if !self.supports_classic(&req.protocol_type, &req.protocols) {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        let sub = decode_subscription(&req.protocols[0].1)
            .ok_or(ResponseError::InconsistentGroupProtocol)?;
        if unknown && req.instance_id.is_none() && req.require_known_member_id {
            return Ok(ClassicJoined::MemberIdRequired(id));
        }
        let mut records = Vec::new();
        if let Some(inst) = &req.instance_id {
            match self.static_members.get(inst).cloned() {
                // a new process of a static member takes over its partitions at once: with a
                // classic member on either side there is no leave epoch to wait for (Kafka)
                Some(old) if unknown => self.take_over_static(&old, &id, &mut records, s, now),
                Some(old) if old != id => return Err(ResponseError::FencedInstanceId),
                Some(_) => {}
                None if !unknown => return Err(ResponseError::UnknownMemberId),
                None => {}
            }
        }
        let before = self.members.get(&id).cloned();
        let is_new = before.is_none();
        let old_meta = before.as_ref().map(|m| m.meta.clone()).unwrap_or_default();
        let old_current = before.map(|m| m.current).unwrap_or_default();
        let mut names = sub.topics.clone();
        names.sort();
        names.dedup();
        let meta = MemberMetadata {
            instance_id: req.instance_id.clone().or(old_meta.instance_id.clone()),
            rack_id: sub.rack_id.clone().or(old_meta.rack_id.clone()),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            subscribed_topic_names: names,
            subscribed_topic_regex: None,
            rebalance_timeout_ms: if req.rebalance_timeout_ms == -1 {
                old_meta.rebalance_timeout_ms
            } else {
                req.rebalance_timeout_ms
            },
            server_assignor: None,
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: req.session_timeout_ms,
                protocols: req.protocols.clone(),
            }),
        };
        let subscription_changed = is_new
            || meta.subscribed_topic_names != old_meta.subscribed_topic_names
            || meta.subscribed_topic_regex != old_meta.subscribed_topic_regex;
        if is_new || meta != old_meta {
            let r =
                ConsumerRecord::new(ConsumerKey::Member(id.clone()), ConsumerValue::Member(meta));
            self.push(&mut records, r, s, now);
        }
        self.maybe_bump_epoch(subscription_changed, topics, &mut records, s, now);
        if self.epoch > self.assignment_epoch {
            self.assign(topics, &mut records, s, now);
        }
        let target = self.target.get(&id).cloned().unwrap_or_default();
        let owned = by_id(&sub.owned, topics);
        let next = reconcile(
            &id,
            &old_current,
            self.assignment_epoch,
            &target,
            Some(&owned),
            &self.owners,
        );
        if next != old_current || is_new {
            let r = ConsumerRecord::new(
                ConsumerKey::Current(id.clone()),
                ConsumerValue::Current(next.clone()),
            );
            self.push(&mut records, r, s, now);
        }
        if let Some(m) = self.members.get_mut(&id) {
            m.session_deadline_ms = now + i64::from(req.session_timeout_ms);
            // it must SyncGroup within its rebalance timeout
            m.sync_deadline_ms = Some(now + i64::from(m.meta.rebalance_timeout_ms.max(0)));
            m.join_deadline_ms = None;
        }
        Ok(ClassicJoined::Joined {
            member_id: id,
            generation: next.member_epoch,
            protocol: req.protocols[0].0.clone(),
            records,
        })
    }

    /// The static member `old` is replaced by a new process `new` of the same instance: it
    /// takes over the old one's subscription, target and partitions at epoch 0.
    pub(super) fn take_over_static(
        &mut self,
        old: &str,
        new: &str,
        records: &mut Vec<ConsumerRecord>,
        s: &ConsumerSettings,
        now: i64,
    ) {
        let Some(m) = self.members.get(old).cloned() else {
            return;
        };
        let target = self.target.get(old).cloned();
        self.removal_records(old, records, s, now);
        let r = ConsumerRecord::new(
            ConsumerKey::Member(new.to_owned()),
            ConsumerValue::Member(m.meta),
        );
        self.push(records, r, s, now);
        if let Some(t) = target {
            let r = ConsumerRecord::new(
                ConsumerKey::TargetMember(new.to_owned()),
                ConsumerValue::TargetMember(t),
            );
            self.push(records, r, s, now);
        }
        let current = CurrentAssignment {
            member_epoch: 0,
            previous_member_epoch: 0,
            pending_revocation: Assignment::new(),
            ..m.current
        };
        let r = ConsumerRecord::new(
            ConsumerKey::Current(new.to_owned()),
            ConsumerValue::Current(current),
        );
        self.push(records, r, s, now);
    }

    /// Whether the member is to rejoin: a new group epoch it has not joined yet (unless it is
    /// still revoking, which its rejoin will report).
    fn must_rejoin(&self, m: &super::Member) -> bool {
        self.epoch > m.current.member_epoch && m.current.state != MemberState::UnrevokedPartitions
    }

    /// SyncGroup of a classic member (`classicGroupSyncToConsumerGroup`): the partitions it may
    /// own now, in its protocol's assignment format.
    #[allow(clippy::too_many_arguments)]
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        topics: &TopicIndex,
        now: i64,
    ) -> Result<Bytes, ResponseError> {
        let m = self.classic_member(member_id, instance_id)?;
        if generation != m.current.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let classic = m.meta.classic.as_ref().expect("a classic member");
        let (name, metadata) = classic.protocols.first().cloned().unwrap_or_default();
        if protocol_type.is_some_and(|t| t != PROTOCOL_TYPE) || protocol.is_some_and(|p| p != name)
        {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        let rejoin = self.must_rejoin(m);
        let session = i64::from(classic.session_timeout_ms);
        let rebalance = i64::from(m.meta.rebalance_timeout_ms.max(0));
        let assignment =
            encode_assignment(&m.current.assigned, topics, metadata_version(&metadata));
        let id = m.id.clone();
        let m = self.members.get_mut(&id).expect("present");
        if rejoin {
            m.join_deadline_ms.get_or_insert(now + rebalance);
            return Err(ResponseError::RebalanceInProgress);
        }
        m.sync_deadline_ms = None;
        m.session_deadline_ms = now + session;
        Ok(assignment)
    }

    /// Heartbeat of a classic member (`classicGroupHeartbeatToConsumerGroup`):
    /// REBALANCE_IN_PROGRESS when it is to rejoin — a new epoch, partitions to revoke, or
    /// partitions it waited for now free.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), ResponseError> {
        let m = self.classic_member(member_id, instance_id)?;
        if generation != m.current.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let rejoin = self.epoch > m.current.member_epoch
            || m.current.state == MemberState::UnrevokedPartitions
            || (m.current.state == MemberState::UnreleasedPartitions
                && !self.waiting_on_unreleased(m));
        let session = m.meta.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
        let rebalance = i64::from(m.meta.rebalance_timeout_ms.max(0));
        let id = m.id.clone();
        let m = self.members.get_mut(&id).expect("present");
        m.session_deadline_ms = now + i64::from(session);
        if rejoin {
            m.join_deadline_ms.get_or_insert(now + rebalance);
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Whether a partition of the member's target it does not have yet is still owned by
    /// another member.
    fn waiting_on_unreleased(&self, m: &super::Member) -> bool {
        let Some(target) = self.target.get(&m.id) else {
            return false;
        };
        target.iter().any(|(t, ps)| {
            ps.iter().any(|p| {
                !m.current.assigned.get(t).is_some_and(|a| a.contains(p))
                    && self.owners.contains_key(&(*t, *p))
            })
        })
    }

    /// LeaveGroup of classic members (`classicGroupLeaveToConsumerGroup`): a result per
    /// `(member id, instance id)` — the member id that left — and the records.
    pub fn classic_leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> (Vec<Result<String, ResponseError>>, Vec<ConsumerRecord>) {
        let mut records = Vec::new();
        let mut results = Vec::new();
        for (member_id, instance_id) in leaving {
            let found = match instance_id {
                None => self.classic_member(member_id, None).map(|m| m.id.clone()),
                Some(inst) => match self.static_members.get(inst).cloned() {
                    None => Err(ResponseError::UnknownMemberId),
                    // an admin removes a static member by instance id alone
                    Some(holder) if member_id.is_empty() || *member_id == holder => self
                        .classic_member(&holder, Some(inst))
                        .map(|m| m.id.clone()),
                    Some(_) => Err(ResponseError::FencedInstanceId),
                },
            };
            if let Ok(id) = &found {
                self.removal_records(id, &mut records, s, now);
            }
            results.push(found);
        }
        if !records.is_empty() {
            self.maybe_bump_epoch(true, topics, &mut records, s, now);
        }
        (results, records)
    }

    /// Whether fencing `leaving` turns the group back into a classic group (Kafka's
    /// `validateOnlineDowngradeWithFencedMember`): every other member speaks the classic
    /// protocol, at least one remains, and they fit a classic group.
    pub fn downgrades_without(&self, leaving: &str, s: &ConsumerSettings) -> bool {
        s.migration.downgrade
            && self.members.len() > 1
            && self.members.len() - 1 <= s.classic_max_size
            && self
                .members
                .values()
                .all(|m| m.id == leaving || m.meta.classic.is_some())
    }

    /// The classic group this group becomes without `leaving`: each member keeps its target
    /// assignment.
    pub fn classic_image(&self, leaving: &str) -> ClassicImage {
        let members = self
            .members
            .values()
            .filter(|m| m.id != leaving)
            .filter_map(|m| {
                let c = m.meta.classic.as_ref()?;
                Some(ClassicImageMember {
                    member: ClassicMember {
                        id: m.id.clone(),
                        instance_id: m.meta.instance_id.clone(),
                        client_id: m.meta.client_id.clone(),
                        client_host: m.meta.client_host.clone(),
                        rebalance_timeout_ms: m.meta.rebalance_timeout_ms,
                        session_timeout_ms: c.session_timeout_ms,
                        protocols: c.protocols.clone(),
                    },
                    assigned: self.target.get(&m.id).cloned().unwrap_or_default(),
                })
            })
            .collect();
        ClassicImage {
            generation: self.epoch,
            members,
        }
    }

    /// Every record of the group gone: each member's, then the group's (Kafka's order).
    pub fn tombstones(&self) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        for id in self.members.keys() {
            for key in [
                ConsumerKey::Current(id.clone()),
                ConsumerKey::TargetMember(id.clone()),
                ConsumerKey::Member(id.clone()),
            ] {
                out.push(ConsumerRecord::tombstone(key));
            }
        }
        out.extend(self.deletion_records());
        out
    }

    /// A classic group of consumers becomes a consumer group (Kafka's `fromClassicGroup`):
    /// each member keeps its last assignment, Stable at the generation, which becomes the
    /// group epoch. `None` if a member's metadata is not Kafka's consumer protocol.
    pub fn from_classic(
        generation: i32,
        members: Vec<FromClassic>,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Option<(ConsumerGroup, Vec<ConsumerRecord>)> {
        let mut g = ConsumerGroup::default();
        let mut records = Vec::new();
        let mut assigned = Vec::new();
        for FromClassic {
            member: m,
            subscription,
            assignment,
        } in &members
        {
            let sub = decode_subscription(subscription)?;
            let mut names = sub.topics;
            names.sort();
            names.dedup();
            let meta = MemberMetadata {
                instance_id: m.instance_id.clone(),
                rack_id: sub.rack_id,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: names,
                subscribed_topic_regex: None,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                server_assignor: None,
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                }),
            };
            let r = ConsumerRecord::new(
                ConsumerKey::Member(m.id.clone()),
                ConsumerValue::Member(meta),
            );
            g.push(&mut records, r, s, now);
            assigned.push((m.id.clone(), decode_assignment(assignment, topics)));
        }
        // a partition two members claim (a torn classic rebalance) goes to the first
        let mut seen = BTreeSet::new();
        for (_, a) in assigned.iter_mut() {
            for (t, ps) in a.iter_mut() {
                ps.retain(|p| seen.insert((*t, *p)));
            }
            a.retain(|_, ps| !ps.is_empty());
        }
        let subscribed: BTreeSet<uuid::Uuid> =
            g.subscribed(topics).into_values().flatten().collect();
        let v = ConsumerValue::Metadata {
            epoch: generation,
            metadata_hash: super::metadata_hash(&subscribed, topics),
        };
        g.push(
            &mut records,
            ConsumerRecord::new(ConsumerKey::Metadata, v),
            s,
            now,
        );
        for (id, a) in &assigned {
            let r = ConsumerRecord::new(
                ConsumerKey::TargetMember(id.clone()),
                ConsumerValue::TargetMember(a.clone()),
            );
            g.push(&mut records, r, s, now);
        }
        let v = ConsumerValue::TargetMetadata { epoch: generation };
        g.push(
            &mut records,
            ConsumerRecord::new(ConsumerKey::TargetMetadata, v),
            s,
            now,
        );
        for (id, a) in assigned {
            let c = CurrentAssignment {
                member_epoch: generation,
                previous_member_epoch: generation,
                state: MemberState::Stable,
                assigned: a,
                pending_revocation: Assignment::new(),
            };
            let r = ConsumerRecord::new(ConsumerKey::Current(id), ConsumerValue::Current(c));
            g.push(&mut records, r, s, now);
        }
        Some((g, records))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_coordinator::consumer::{Assignor, Heartbeat, MigrationPolicy};

    fn settings() -> ConsumerSettings {
        ConsumerSettings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 100,
            assignors: vec![Assignor::Uniform],
            migration: MigrationPolicy::BIDIRECTIONAL,
            classic_max_size: 100,
        }
    }

    fn subscription(topics: &[&str]) -> Bytes {
        let sub = ConsumerProtocolSubscription::default().with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.to_string()))
                .collect(),
        );
        let mut out = BytesMut::new();
        out.put_i16(1);
        sub.encode(&mut out, 1).unwrap();
        out.freeze()
    }

    #[test]
    fn a_classic_group_becomes_a_consumer_group_and_back() {
        let s = settings();
        let mut topics = TopicIndex::default();
        let t = uuid::Uuid::from_u128(1);
        topics.insert("t", t, 4);
        let member = |id: &str, parts: &[i32]| {
            let mut a = Assignment::new();
            a.insert(t, parts.iter().copied().collect());
            FromClassic {
                member: ClassicMember {
                    id: id.into(),
                    instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 30_000,
                    session_timeout_ms: 10_000,
                    protocols: vec![("range".into(), subscription(&["t"]))],
                },
                subscription: subscription(&["t"]),
                assignment: encode_assignment(&a, &topics, 1),
            }
        };
        let members = vec![member("a", &[0, 1]), member("b", &[2, 3])];
        let (mut g, records) = ConsumerGroup::from_classic(7, members, &topics, &s, 0).unwrap();
        assert_eq!((g.epoch, g.assignment_epoch), (7, 7));
        assert_eq!(g.members["a"].current.assigned[&t], BTreeSet::from([0, 1]));
        assert_eq!(
            g.members["b"]
                .meta
                .classic
                .as_ref()
                .unwrap()
                .session_timeout_ms,
            10_000
        );
        // the records rebuild the same group
        let mut fresh = ConsumerGroup::default();
        for r in &records {
            fresh.replay(r, 0, 45_000);
        }
        assert_eq!(fresh.members.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(fresh.owners, g.owners);
        // a consumer-protocol member joins: the classic members are told to rejoin
        let hb = Heartbeat {
            member_id: "new".into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            owned: Some(Assignment::new()),
            ..Default::default()
        };
        let (answer, _) = g.heartbeat(hb, &topics, &s, 1).unwrap();
        assert_eq!(answer.member_epoch, 8);
        // nothing is free yet: every partition is still owned by a or b
        assert!(answer.assignment.unwrap().values().all(|p| p.is_empty()));
        assert_eq!(
            g.classic_heartbeat("a", None, 7, 2),
            Err(ResponseError::RebalanceInProgress)
        );
        assert_eq!(
            g.classic_heartbeat("a", None, 6, 2),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.classic_heartbeat("new", None, 8, 2),
            Err(ResponseError::UnknownMemberId)
        );
        // a rejoins owning nothing (eager): at epoch 8 with what it keeps of its target
        let join = JoinRequest {
            member_id: "a".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: PROTOCOL_TYPE.into(),
            protocols: vec![("range".into(), subscription(&["t"]))],
            require_known_member_id: true,
        };
        let ClassicJoined::Joined { generation, .. } =
            g.classic_join(join.clone(), &topics, &s, 3).unwrap()
        else {
            panic!("joined");
        };
        assert_eq!(generation, 8);
        let bytes = g
            .classic_sync("a", None, 8, Some("consumer"), Some("range"), &topics, 4)
            .unwrap();
        let given = decode_assignment(&bytes, &topics);
        assert_eq!(given, g.members["a"].current.assigned);
        assert_eq!(
            g.classic_sync(
                "a",
                None,
                8,
                Some("consumer"),
                Some("roundrobin"),
                &topics,
                4
            ),
            Err(ResponseError::InconsistentGroupProtocol)
        );
        // a protocol the classic members do not share is refused
        let odd = JoinRequest {
            member_id: String::new(),
            protocols: vec![("roundrobin".into(), subscription(&["t"]))],
            ..join
        };
        assert_eq!(
            g.classic_join(odd, &topics, &s, 5),
            Err(ResponseError::InconsistentGroupProtocol)
        );
        // without its consumer-protocol member the group turns classic
        assert!(g.downgrades_without("new", &s));
        assert!(!g.downgrades_without("a", &s));
        let image = g.classic_image("new");
        assert_eq!(image.generation, 8);
        assert_eq!(
            image
                .members
                .iter()
                .map(|m| m.member.id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        let all: usize = image
            .members
            .iter()
            .map(|m| m.assigned.values().map(BTreeSet::len).sum::<usize>())
            .sum();
        assert_eq!(
            all,
            2 + 1,
            "a and b keep their targets, new's partition is nobody's"
        );
        let tombstones = g.tombstones();
        assert_eq!(tombstones.len(), 3 * 3 + 2);
        assert!(tombstones.iter().all(|r| r.value.is_none()));
    }
}

#[cfg(test)]
mod decode_tests {
    #[test]
    fn a_subscription_decodes_or_is_refused() {
        // v0: no topics, null user data
        let b = bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 255, 255, 255, 255]);
        assert!(super::decode_subscription(&b).unwrap().topics.is_empty());
        for cut in 0..b.len() {
            assert!(
                super::decode_subscription(&b.slice(..cut)).is_none(),
                "{cut}"
            );
        }
    }
}
