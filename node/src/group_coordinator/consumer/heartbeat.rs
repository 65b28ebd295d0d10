//! ConsumerGroupHeartbeat on one group (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`):
//! join, update, reconcile, leave; and the session and rebalance timeouts that fence members.
//! Each step writes records and applies them with `replay`.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::reconcile::{is_subset, reconcile};
use super::{
    metadata_hash, Assignment, Assignor, ConsumerGroup, ConsumerKey, ConsumerRecord,
    ConsumerSettings, ConsumerValue, CurrentAssignment, MemberMetadata, MemberState, TopicIndex,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};

/// One ConsumerGroupHeartbeat, its "unchanged" fields as `None` (or -1).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// Never empty here: the handler gives a joining v0 member its id.
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when the member's partitions changed or it sent a full request.
    pub assignment: Option<Assignment>,
}

/// A refused heartbeat: Kafka's error code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HeartbeatError {
    pub error: ResponseError,
    pub message: String,
}

fn refuse<T>(error: ResponseError, message: impl Into<String>) -> Result<T, HeartbeatError> {
    Err(HeartbeatError {
        error,
        message: message.into(),
    })
}

/// Kafka's request validation (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
pub fn validate(req: &Heartbeat, s: &ConsumerSettings) -> Result<(), HeartbeatError> {
    let invalid = |m: &str| refuse(ResponseError::InvalidRequest, m);
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        e if e > 0 || e == LEAVE_GROUP_MEMBER_EPOCH => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            let names = req
                .subscribed_topic_names
                .as_ref()
                .is_some_and(|n| !n.is_empty());
            let regex = req
                .subscribed_topic_regex
                .as_ref()
                .is_some_and(|r| !r.is_empty());
            if !names && !regex {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if req.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(a) = &req.server_assignor {
        if !s.assignors.iter().any(|x| Assignor::parse(a) == Some(*x)) {
            let names: Vec<&str> = s.assignors.iter().map(|a| a.name()).collect();
            return refuse(
                ResponseError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    names.join(", ")
                ),
            );
        }
    }
    if let Some(re) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = super::compile_regex(re) {
            return refuse(
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}."),
            );
        }
    }
    Ok(())
}

fn fenced(received: i32, known: i32) -> HeartbeatError {
    let which = if received > known {
        "greater"
    } else {
        "smaller"
    };
    HeartbeatError {
        error: ResponseError::FencedMemberEpoch,
        message: format!(
            "The consumer group member has a {which} member epoch ({received}) than the one known \
             by the group coordinator ({known}). The member must abandon all its partitions and rejoin."
        ),
    }
}

impl ConsumerGroup {
    /// One heartbeat: the answer and the records that carry its changes (already applied).
    pub fn heartbeat(
        &mut self,
        req: Heartbeat,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Result<(HeartbeatAnswer, Vec<ConsumerRecord>), HeartbeatError> {
        validate(&req, s)?;
        if req.member_epoch < 0 {
            return self.leave(&req, topics, s, now);
        }
        let mut records = Vec::new();
        let id = req.member_id.clone();
        // 1. who the member is
        if req.member_epoch == 0 {
            if let Some(inst) = &req.instance_id {
                if let Some(old_id) = self.static_members.get(inst).cloned() {
                    if old_id != id {
                        self.replace_static(&old_id, &id, &mut records, s, now)?;
                    }
                }
            }
            if !self.members.contains_key(&id) && self.members.len() >= s.max_size {
                return refuse(
                    ResponseError::GroupMaxSizeReached,
                    format!(
                        "The consumer group has reached its maximum capacity of {} members.",
                        s.max_size
                    ),
                );
            }
        } else {
            self.check_static(&id, req.instance_id.as_deref())?;
            if !self.members.contains_key(&id) {
                return refuse(
                    ResponseError::UnknownMemberId,
                    format!("Member {id} is not a member of the group."),
                );
            }
        }
        if let Some(m) = self.members.get(&id) {
            let c = &m.current;
            if req.member_epoch > c.member_epoch {
                return Err(fenced(req.member_epoch, c.member_epoch));
            }
            if req.member_epoch < c.member_epoch
                && (req.member_epoch != c.previous_member_epoch
                    || !is_subset(req.owned.as_ref(), &c.assigned))
            {
                return Err(fenced(req.member_epoch, c.member_epoch));
            }
            if c.state == MemberState::Unknown && req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return refuse(
                    ResponseError::FencedMemberEpoch,
                    "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
                );
            }
        }
        let is_new = !self.members.contains_key(&id);
        let before = self.members.get(&id).cloned();
        let old_meta = before.as_ref().map(|m| m.meta.clone()).unwrap_or_default();
        let old_current = before.map(|m| m.current).unwrap_or_default();

        // 2. its metadata; the group epoch when subscriptions or their topics changed
        let meta = updated_meta(&old_meta, &req);
        let subscription_changed = is_new
            || meta.subscribed_topic_names != old_meta.subscribed_topic_names
            || meta.subscribed_topic_regex != old_meta.subscribed_topic_regex;
        if is_new || meta != old_meta {
            self.push(
                &mut records,
                ConsumerRecord::new(ConsumerKey::Member(id.clone()), ConsumerValue::Member(meta)),
                s,
                now,
            );
        }
        self.maybe_bump_epoch(subscription_changed, topics, &mut records, s, now);

        // 3. the target assignment when the group epoch moved past it
        if self.epoch > self.assignment_epoch {
            self.assign(topics, &mut records, s, now);
        }

        // 4. the member towards its target
        let target = self.target.get(&id).cloned().unwrap_or_default();
        let next = reconcile(
            &id,
            &old_current,
            self.assignment_epoch,
            &target,
            req.owned.as_ref(),
            &self.owners,
        );
        if next != old_current || is_new {
            self.push(
                &mut records,
                ConsumerRecord::new(
                    ConsumerKey::Current(id.clone()),
                    ConsumerValue::Current(next.clone()),
                ),
                s,
                now,
            );
        }
        if let Some(m) = self.members.get_mut(&id) {
            m.session_deadline_ms = now + i64::from(s.session_timeout_ms);
        }
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        let answer = HeartbeatAnswer {
            member_id: id,
            member_epoch: next.member_epoch,
            heartbeat_interval_ms: s.heartbeat_interval_ms,
            assignment: (full || next.assigned != old_current.assigned).then_some(next.assigned),
        };
        Ok((answer, records))
    }

    /// A static member's heartbeat must come from the member holding its instance id.
    fn check_static(&self, id: &str, instance: Option<&str>) -> Result<(), HeartbeatError> {
        let Some(inst) = instance else {
            return Ok(());
        };
        match self.static_members.get(inst) {
            None => refuse(
                ResponseError::UnknownMemberId,
                format!("Instance id {inst} is unknown."),
            ),
            Some(holder) if holder != id => refuse(
                ResponseError::FencedInstanceId,
                format!(
                    "Static member {id} with instance id {inst} is fenced by existing member {holder}."
                ),
            ),
            Some(_) => Ok(()),
        }
    }

    pub(super) fn push(
        &mut self,
        records: &mut Vec<ConsumerRecord>,
        r: ConsumerRecord,
        s: &ConsumerSettings,
        now: i64,
    ) {
        records.push(r);
        let n = records.len();
        self.apply(records, n - 1, now, s.session_timeout_ms);
    }

    /// Every topic any member subscribes to.
    pub(super) fn subscribed(&self, topics: &TopicIndex) -> BTreeMap<String, BTreeSet<Uuid>> {
        self.members
            .iter()
            .map(|(id, m)| (id.clone(), m.subscribed_topics(topics)))
            .collect()
    }

    pub(super) fn maybe_bump_epoch(
        &mut self,
        force: bool,
        topics: &TopicIndex,
        records: &mut Vec<ConsumerRecord>,
        s: &ConsumerSettings,
        now: i64,
    ) {
        let all: BTreeSet<Uuid> = self.subscribed(topics).into_values().flatten().collect();
        let hash = metadata_hash(&all, topics);
        if force || hash != self.metadata_hash {
            let v = ConsumerValue::Metadata {
                epoch: self.epoch + 1,
                metadata_hash: hash,
            };
            self.push(
                records,
                ConsumerRecord::new(ConsumerKey::Metadata, v),
                s,
                now,
            );
        }
    }

    /// The assignor the group uses: the one most members ask for, else the default.
    pub fn assignor(&self, s: &ConsumerSettings) -> Assignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.meta.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(name, n)| (*n, std::cmp::Reverse(*name)))
            .and_then(|(name, _)| Assignor::parse(name))
            .or_else(|| s.assignors.first().copied())
            .unwrap_or(Assignor::Uniform)
    }

    pub(super) fn assign(
        &mut self,
        topics: &TopicIndex,
        records: &mut Vec<ConsumerRecord>,
        s: &ConsumerSettings,
        now: i64,
    ) {
        let subs = self.subscribed(topics);
        let partitions: BTreeMap<Uuid, i32> = subs
            .values()
            .flatten()
            .filter_map(|t| topics.by_id.get(t).map(|x| (*t, x.1)))
            .collect();
        let next = self.assignor(s).assign(&subs, &partitions, &self.target);
        for (m, a) in next {
            if self.target.get(&m) != Some(&a) {
                let r = ConsumerRecord::new(
                    ConsumerKey::TargetMember(m),
                    ConsumerValue::TargetMember(a),
                );
                self.push(records, r, s, now);
            }
        }
        let v = ConsumerValue::TargetMetadata { epoch: self.epoch };
        self.push(
            records,
            ConsumerRecord::new(ConsumerKey::TargetMetadata, v),
            s,
            now,
        );
    }

    /// A static member comes back under a new member id: it takes over the old one's
    /// subscription, target and partitions (Kafka's `replaceMember`), if the old one left.
    fn replace_static(
        &mut self,
        old_id: &str,
        new_id: &str,
        records: &mut Vec<ConsumerRecord>,
        s: &ConsumerSettings,
        now: i64,
    ) -> Result<(), HeartbeatError> {
        let Some(old) = self.members.get(old_id).cloned() else {
            return Ok(());
        };
        if old.current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            let inst = old.meta.instance_id.clone().unwrap_or_default();
            return refuse(
                ResponseError::UnreleasedInstanceId,
                format!(
                    "Static member {new_id} with instance id {inst} cannot join the group because the \
                     instance id is owned by {old_id} member."
                ),
            );
        }
        self.take_over_static(old_id, new_id, records, s, now);
        Ok(())
    }

    /// Kafka's order for a member going: current assignment, target, metadata.
    pub(super) fn removal_records(
        &mut self,
        id: &str,
        records: &mut Vec<ConsumerRecord>,
        s: &ConsumerSettings,
        now: i64,
    ) {
        for key in [
            ConsumerKey::Current(id.to_owned()),
            ConsumerKey::TargetMember(id.to_owned()),
            ConsumerKey::Member(id.to_owned()),
        ] {
            self.push(records, ConsumerRecord::tombstone(key), s, now);
        }
    }

    /// Removes (fences) a member: its partitions are free, and the group epoch moves so that
    /// the others get them.
    pub fn fence(
        &mut self,
        id: &str,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Vec<ConsumerRecord> {
        let mut records = Vec::new();
        if self.members.contains_key(id) {
            self.removal_records(id, &mut records, s, now);
            self.maybe_bump_epoch(true, topics, &mut records, s, now);
        }
        records
    }

    fn leave(
        &mut self,
        req: &Heartbeat,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Result<(HeartbeatAnswer, Vec<ConsumerRecord>), HeartbeatError> {
        let id = req.member_id.clone();
        self.check_static(&id, req.instance_id.as_deref())?;
        let Some(m) = self.members.get(&id).cloned() else {
            return refuse(
                ResponseError::UnknownMemberId,
                format!("Member {id} is not a member of the group."),
            );
        };
        let answer = HeartbeatAnswer {
            member_id: id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            // keeps its partitions (not those it was revoking) until its session expires
            let current = CurrentAssignment {
                member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                pending_revocation: Assignment::new(),
                ..m.current
            };
            let mut records = Vec::new();
            let r = ConsumerRecord::new(ConsumerKey::Current(id), ConsumerValue::Current(current));
            self.push(&mut records, r, s, now);
            return Ok((answer, records));
        }
        Ok((answer, self.fence(&id, topics, s, now)))
    }

    /// Members whose session expired, who kept partitions to revoke past their rebalance
    /// timeout, or (classic members) did not rejoin or sync in time, are fenced — until fencing
    /// one would leave classic members only: that member is returned, for the coordinator to
    /// turn the group classic without it.
    pub fn expire(
        &mut self,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> (Vec<ConsumerRecord>, Option<String>) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.expired(now))
            .map(|m| m.id.clone())
            .collect();
        let mut records = Vec::new();
        for id in gone {
            if self.downgrades_without(&id, s) {
                return (records, Some(id));
            }
            records.extend(self.fence(&id, topics, s, now));
        }
        (records, None)
    }

    /// A topic created, deleted or grown: the group epoch moves and the target follows.
    pub fn refresh(
        &mut self,
        topics: &TopicIndex,
        s: &ConsumerSettings,
        now: i64,
    ) -> Vec<ConsumerRecord> {
        let mut records = Vec::new();
        if !self.members.is_empty() {
            self.maybe_bump_epoch(false, topics, &mut records, s, now);
        }
        records
    }
}

fn updated_meta(old: &MemberMetadata, req: &Heartbeat) -> MemberMetadata {
    let mut m = old.clone();
    if let Some(i) = &req.instance_id {
        m.instance_id = Some(i.clone());
    }
    if let Some(r) = &req.rack_id {
        m.rack_id = Some(r.clone());
    }
    if req.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(a) = &req.server_assignor {
        m.server_assignor = Some(a.clone());
    }
    if let Some(names) = &req.subscribed_topic_names {
        let mut names = names.clone();
        names.sort();
        names.dedup();
        m.subscribed_topic_names = names;
    }
    if let Some(re) = &req.subscribed_topic_regex {
        m.subscribed_topic_regex = (!re.is_empty()).then(|| re.clone());
    }
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    // a member heartbeating with the consumer protocol no longer speaks the classic one
    m.classic = None;
    m
}
