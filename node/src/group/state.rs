//! One consumer group's state machine: Kafka's classic group protocol (Empty →
//! PreparingRebalance → CompletingRebalance → Stable, and Dead once deleted). Pure logic: no I/O;
//! time comes in as milliseconds, and what must be written to `__consumer_offsets` is flagged
//! (`take_dirty`) for the coordinator to persist. Waiting JoinGroup/SyncGroup requests are
//! oneshot senders held by their member and answered when the rebalance step completes.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use futures_channel::oneshot;
use kafka_protocol::ResponseError;

use super::records::{GroupValue, MemberValue, OffsetValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka uses in DescribeGroups/ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// The limits a join is checked against (from the broker config).
#[derive(Debug, Clone, Copy)]
pub struct JoinLimits {
    pub initial_rebalance_delay_ms: i64,
    pub max_size: usize,
}

#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets its id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinResult {
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata for the chosen protocol: for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    pub fn error(error: ResponseError, member_id: String) -> JoinResult {
        JoinResult {
            error: Some(error),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            member_id,
            members: Vec::new(),
        }
    }
}

pub type SyncResult = Result<Bytes, ResponseError>;

/// Who a SyncGroup, Heartbeat or OffsetCommit says it is.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub generation: i32,
}

pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// Order of joining: the first joined member leads when the leader is gone.
    joined_seq: u64,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    heartbeat_deadline_ms: i64,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Kafka keeps members alive while they wait in a JoinGroup or SyncGroup.
    fn expired(&self, now_ms: i64) -> bool {
        self.awaiting_join.is_none()
            && self.awaiting_sync.is_none()
            && now_ms >= self.heartbeat_deadline_ms
    }
}

pub struct Group {
    pub id: String,
    pub state: GroupState,
    /// When the group entered its current state (for offsets retention of empty groups).
    pub state_since_ms: i64,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// group.instance.id → member id of the static member that holds it.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until the member rejoins with it.
    pending: HashMap<String, i64>,
    join_deadline_ms: Option<i64>,
    /// Start of the initial rebalance delay of a group that was empty.
    initial_join_since_ms: Option<i64>,
    next_seq: u64,
    pub offsets: BTreeMap<(String, i32), OffsetValue>,
    /// The group's metadata changed and must be written to `__consumer_offsets`.
    dirty: bool,
}

impl Group {
    pub fn new(id: String, now_ms: i64) -> Group {
        Group {
            id,
            state: GroupState::Empty,
            state_since_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending: HashMap::new(),
            join_deadline_ms: None,
            initial_join_since_ms: None,
            next_seq: 0,
            offsets: BTreeMap::new(),
            dirty: false,
        }
    }

    /// Rebuilds a group from its last metadata record. Members come back as they were, with
    /// a fresh session: those that do not heartbeat again expire and trigger a rebalance.
    pub fn restore(&mut self, v: GroupValue, now_ms: i64) {
        self.generation = v.generation;
        self.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        self.protocol = v.protocol;
        self.leader = v.leader;
        self.state_since_ms = if v.state_timestamp > 0 {
            v.state_timestamp
        } else {
            now_ms
        };
        self.members.clear();
        self.static_members.clear();
        for m in v.members {
            if let Some(i) = &m.instance_id {
                self.static_members.insert(i.clone(), m.member_id.clone());
            }
            let protocols = match &self.protocol {
                Some(p) => vec![(p.clone(), m.subscription.clone())],
                None => Vec::new(),
            };
            self.next_seq += 1;
            self.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocol_type: self.protocol_type.clone().unwrap_or_default(),
                    protocols,
                    assignment: m.assignment,
                    joined_seq: self.next_seq,
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
                },
            );
        }
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
    }

    /// The metadata record of the group as it is now.
    pub fn to_record(&self) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_since_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: self
                        .protocol
                        .as_deref()
                        .map(|p| m.metadata(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    pub fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
    }

    /// Created by a request that was then refused: no member, no generation, no offsets, and
    /// nobody waiting for a member id.
    pub fn never_used(&self) -> bool {
        self.state == GroupState::Empty
            && self.generation == 0
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
    }

    fn set_state(&mut self, state: GroupState, now_ms: i64) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = now_ms;
        }
    }

    /// Whether a member with this protocol type and these protocols can be in the group.
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(p, _)| self.members.values().all(|m| m.supports(p)))
    }

    /// A protocol every member supports, chosen by the members' preferences (one vote each
    /// for its most preferred candidate), as Kafka's `selectProtocol`.
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(&n.as_str()))
            {
                *votes.entry(n.as_str()).or_default() += 1;
            }
        }
        // Ties go to the first member's preference order.
        candidates
            .iter()
            .max_by_key(|c| {
                let pos = candidates.iter().position(|x| x == *c).unwrap_or(0);
                (votes.get(*c).copied().unwrap_or(0), usize::MAX - pos)
            })
            .map(|c| (*c).to_owned())
    }

    fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Checks that `member_id` (with `instance_id`, for static members) is a member.
    fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(id) if id != member_id => return Err(ResponseError::FencedInstanceId),
                None if !self.members.contains_key(member_id) => {
                    return Err(ResponseError::UnknownMemberId)
                }
                _ => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        Ok(())
    }

    fn join_result(&self, member_id: &str) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
        }
    }

    /// JoinGroup. The caller runs [`Group::try_complete_join`] afterwards.
    pub fn join(&mut self, req: JoinRequest, limits: JoinLimits, now_ms: i64) -> Reply<JoinResult> {
        let fail = |e, id: &str| Reply::Now(JoinResult::error(e, id.to_owned()));
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable, &req.member_id);
        }
        if !self.supports(&req.protocol_type, &req.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol, &req.member_id);
        }
        if req.member_id.is_empty() {
            let new_id = format!("{}-{}", req.client_id, uuid::Uuid::new_v4());
            if let Some(instance) = req.instance_id.clone() {
                if let Some(old) = self.static_members.get(&instance).cloned() {
                    return self.rejoin_static(old, new_id, req, limits, now_ms);
                }
            } else if req.require_known_member_id {
                self.pending
                    .insert(new_id.clone(), now_ms + i64::from(req.session_timeout_ms));
                return fail(ResponseError::MemberIdRequired, &new_id);
            }
            if self.members.len() >= limits.max_size {
                return fail(ResponseError::GroupMaxSizeReached, &new_id);
            }
            return self.add_member(new_id, req, limits, now_ms);
        }
        if let Some(instance) = &req.instance_id {
            if let Some(id) = self.static_members.get(instance) {
                if id != &req.member_id {
                    return fail(ResponseError::FencedInstanceId, &req.member_id);
                }
            }
        }
        if self.pending.remove(&req.member_id).is_some() {
            if self.members.len() >= limits.max_size {
                return fail(ResponseError::GroupMaxSizeReached, &req.member_id);
            }
            let id = req.member_id.clone();
            return self.add_member(id, req, limits, now_ms);
        }
        let id = req.member_id.clone();
        let Some(member) = self.members.get_mut(&id) else {
            return fail(ResponseError::UnknownMemberId, &id);
        };
        member.heartbeat_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
        let unchanged = member.same_protocols(&req.protocols);
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        match self.state {
            GroupState::PreparingRebalance => self.update_and_wait(&id, req),
            GroupState::CompletingRebalance if unchanged => Reply::Now(self.join_result(&id)),
            GroupState::Stable if unchanged && !is_leader => Reply::Now(self.join_result(&id)),
            GroupState::CompletingRebalance | GroupState::Stable => {
                let reply = self.update_and_wait(&id, req);
                self.prepare_rebalance(
                    limits,
                    now_ms,
                    "a member rejoined with new protocols (or the leader rejoined)",
                );
                reply
            }
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId, &id),
        }
    }

    fn update_and_wait(&mut self, id: &str, req: JoinRequest) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        let m = self.members.get_mut(id).expect("member present");
        m.client_id = req.client_id;
        m.client_host = req.client_host;
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.protocols = req.protocols;
        m.awaiting_join = Some(tx);
        Reply::Wait(rx)
    }

    fn add_member(
        &mut self,
        id: String,
        req: JoinRequest,
        limits: JoinLimits,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.static_members.insert(instance.clone(), id.clone());
        }
        self.next_seq += 1;
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: req.instance_id,
                client_id: req.client_id,
                client_host: req.client_host,
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                protocol_type: req.protocol_type,
                protocols: req.protocols,
                assignment: Bytes::new(),
                joined_seq: self.next_seq,
                awaiting_join: Some(tx),
                awaiting_sync: None,
                heartbeat_deadline_ms: now_ms + i64::from(req.session_timeout_ms),
            },
        );
        match (self.state, self.initial_join_since_ms) {
            (GroupState::PreparingRebalance, Some(since)) => {
                // Each member arriving during the initial delay extends it, up to the
                // rebalance timeout (Kafka's DelayedInitialJoin).
                let cap = since + self.max_rebalance_timeout_ms();
                let next = (now_ms + limits.initial_rebalance_delay_ms).min(cap);
                self.join_deadline_ms = Some(next.max(self.join_deadline_ms.unwrap_or(next)));
            }
            (GroupState::PreparingRebalance, None) => {}
            _ => self.prepare_rebalance(limits, now_ms, "a member joined"),
        }
        Reply::Wait(rx)
    }

    fn rejoin_static(
        &mut self,
        old_id: String,
        new_id: String,
        req: JoinRequest,
        limits: JoinLimits,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let mut m = self.members.remove(&old_id).expect("static member present");
        if let Some(tx) = m.awaiting_join.take() {
            let _ = tx.send(JoinResult::error(
                ResponseError::FencedInstanceId,
                old_id.clone(),
            ));
        }
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(Err(ResponseError::FencedInstanceId));
        }
        let unchanged = m.same_protocols(&req.protocols);
        m.id = new_id.clone();
        m.heartbeat_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
        self.members.insert(new_id.clone(), m);
        if let Some(instance) = &req.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        let was_leader = self.leader.as_deref() == Some(old_id.as_str());
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            GroupState::Stable if unchanged && !was_leader => {
                // The static member takes its place back without a rebalance.
                self.dirty = true;
                Reply::Now(self.join_result(&new_id))
            }
            GroupState::PreparingRebalance => self.update_and_wait(&new_id, req),
            _ => {
                let reply = self.update_and_wait(&new_id, req);
                self.prepare_rebalance(
                    limits,
                    now_ms,
                    "a static member rejoined with new protocols",
                );
                reply
            }
        }
    }

    fn prepare_rebalance(&mut self, limits: JoinLimits, now_ms: i64, reason: &str) {
        tracing::info!(group = %self.id, generation = self.generation, members = self.members.len(), reason, "preparing to rebalance");
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(tx) = m.awaiting_sync.take() {
                    let _ = tx.send(Err(ResponseError::RebalanceInProgress));
                }
            }
        }
        let was_empty = self.state == GroupState::Empty;
        self.set_state(GroupState::PreparingRebalance, now_ms);
        let max_timeout = self.max_rebalance_timeout_ms();
        if was_empty && limits.initial_rebalance_delay_ms > 0 {
            self.initial_join_since_ms = Some(now_ms);
            self.join_deadline_ms =
                Some(now_ms + limits.initial_rebalance_delay_ms.min(max_timeout));
        } else {
            self.initial_join_since_ms = None;
            self.join_deadline_ms = Some(now_ms + max_timeout);
        }
    }

    /// Completes the join phase when every member has rejoined (or the deadline passed):
    /// members that did not rejoin are removed, the generation advances, a protocol and a
    /// leader are chosen and every waiting JoinGroup is answered. Returns whether it completed.
    pub fn try_complete_join(&mut self, now_ms: i64) -> bool {
        if self.state != GroupState::PreparingRebalance {
            return false;
        }
        let due = self.join_deadline_ms.is_some_and(|d| now_ms >= d);
        let all_joined =
            self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some());
        let ready = if self.initial_join_since_ms.is_some() {
            due
        } else {
            due || all_joined
        };
        if !ready {
            return false;
        }
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id);
        }
        self.join_deadline_ms = None;
        self.initial_join_since_ms = None;
        self.generation += 1;
        self.dirty = true;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now_ms);
            return true;
        }
        self.protocol = self.select_protocol();
        let leader_ok = self.leader.as_ref().is_some_and(|l| {
            self.members
                .get(l)
                .is_some_and(|m| m.awaiting_join.is_some())
        });
        if !leader_ok {
            self.leader = self
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .min_by_key(|m| m.joined_seq)
                .or_else(|| self.members.values().min_by_key(|m| m.joined_seq))
                .map(|m| m.id.clone());
        }
        self.set_state(GroupState::CompletingRebalance, now_ms);
        tracing::info!(group = %self.id, generation = self.generation, members = self.members.len(), protocol = ?self.protocol, "join phase complete");
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result(&id);
            let m = self.members.get_mut(&id).expect("member present");
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
            if let Some(tx) = m.awaiting_join.take() {
                let _ = tx.send(result);
            }
        }
        true
    }

    fn remove_member(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(i) = &m.instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(id) {
                    self.static_members.remove(i);
                }
            }
            if let Some(tx) = m.awaiting_join {
                let _ = tx.send(JoinResult::error(
                    ResponseError::UnknownMemberId,
                    id.to_owned(),
                ));
            }
            if let Some(tx) = m.awaiting_sync {
                let _ = tx.send(Err(ResponseError::UnknownMemberId));
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// After members left or expired: a stable group rebalances, an empty one becomes Empty.
    fn members_removed(&mut self, limits: JoinLimits, now_ms: i64) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(limits, now_ms, "members left or timed out");
                // Nobody is left to wait for when the group emptied.
                if self.members.is_empty() {
                    self.join_deadline_ms = Some(now_ms);
                }
            }
            GroupState::PreparingRebalance if self.members.is_empty() => {
                self.initial_join_since_ms = None;
                self.join_deadline_ms = Some(now_ms);
            }
            _ => {}
        }
        self.try_complete_join(now_ms);
    }

    /// SyncGroup. The leader's call carries every member's assignment.
    pub fn sync(
        &mut self,
        who: Caller<'_>,
        protocol_type: Option<&str>,
        protocol: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> Reply<SyncResult> {
        let member_id = who.member_id;
        if self.state == GroupState::Dead {
            return Reply::Now(Err(ResponseError::CoordinatorNotAvailable));
        }
        if let Err(e) = self.validate_member(member_id, who.instance_id) {
            return Reply::Now(Err(e));
        }
        if who.generation != self.generation {
            return Reply::Now(Err(ResponseError::IllegalGeneration));
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol.is_some_and(|p| Some(p) != self.protocol.as_deref())
        {
            return Reply::Now(Err(ResponseError::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Reply::Now(Err(ResponseError::UnknownMemberId)),
            GroupState::PreparingRebalance => Reply::Now(Err(ResponseError::RebalanceInProgress)),
            GroupState::Stable => {
                let m = self.members.get_mut(member_id).expect("validated");
                m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
                Reply::Now(Ok(m.assignment.clone()))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                let m = self.members.get_mut(member_id).expect("validated");
                m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
                m.awaiting_sync = Some(tx);
                if self.leader.as_deref() == Some(member_id) {
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                    }
                    self.set_state(GroupState::Stable, now_ms);
                    self.dirty = true;
                    for m in self.members.values_mut() {
                        if let Some(tx) = m.awaiting_sync.take() {
                            let _ = tx.send(Ok(m.assignment.clone()));
                        }
                    }
                }
                Reply::Wait(rx)
            }
        }
    }

    pub fn heartbeat(&mut self, who: Caller<'_>, now_ms: i64) -> Result<(), ResponseError> {
        match self.state {
            GroupState::Dead => return Err(ResponseError::CoordinatorNotAvailable),
            GroupState::Empty => return Err(ResponseError::UnknownMemberId),
            _ => {}
        }
        self.validate_member(who.member_id, who.instance_id)?;
        if who.generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        let m = self.members.get_mut(who.member_id).expect("validated");
        m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        if self.state == GroupState::PreparingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup for each `(member id, group instance id)`; one result per member.
    pub fn leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        limits: JoinLimits,
        now_ms: i64,
    ) -> Vec<Result<(), ResponseError>> {
        let mut removed = false;
        let results = leaving
            .iter()
            .map(|(member_id, instance_id)| {
                let id = match instance_id {
                    Some(instance) => match self.static_members.get(instance) {
                        None => return Err(ResponseError::UnknownMemberId),
                        Some(id) if !member_id.is_empty() && id != member_id => {
                            return Err(ResponseError::FencedInstanceId)
                        }
                        Some(id) => id.clone(),
                    },
                    None => member_id.clone(),
                };
                if self.pending.remove(&id).is_some() {
                    return Ok(());
                }
                if !self.members.contains_key(&id) {
                    return Err(ResponseError::UnknownMemberId);
                }
                self.remove_member(&id);
                removed = true;
                Ok(())
            })
            .collect();
        if removed {
            self.members_removed(limits, now_ms);
        }
        results
    }

    /// Session timeouts and the join deadline. Returns whether anything changed.
    pub fn expire(&mut self, limits: JoinLimits, now_ms: i64) -> bool {
        self.pending.retain(|_, deadline| *deadline > now_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.expired(now_ms))
            .map(|m| m.id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = %self.id, member = %id, "session timeout: member removed");
            self.remove_member(id);
        }
        if !expired.is_empty() {
            self.members_removed(limits, now_ms);
            return true;
        }
        self.try_complete_join(now_ms)
    }

    /// OffsetCommit's membership check. `generation < 0` with no member id is a commit from
    /// outside the group protocol (an admin tool, a consumer with manual assignment): only
    /// allowed while the group has no members.
    pub fn check_commit(&mut self, who: Caller<'_>, now_ms: i64) -> Result<(), ResponseError> {
        let (member_id, generation) = (who.member_id, who.generation);
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if generation < 0 && member_id.is_empty() {
            return if self.state == GroupState::Empty {
                Ok(())
            } else {
                Err(ResponseError::UnknownMemberId)
            };
        }
        self.validate_member(member_id, who.instance_id)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        let m = self.members.get_mut(member_id).expect("validated");
        m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        Ok(())
    }

    /// `(member id, instance id, client id, host, metadata, assignment)` per member.
    pub fn describe_members(&self) -> Vec<(String, Option<String>, String, String, Bytes, Bytes)> {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| {
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    m.metadata(&protocol),
                    m.assignment.clone(),
                )
            })
            .collect()
    }

    /// Marks the group deleted; waiting requests are answered.
    pub fn kill(&mut self) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            self.remove_member(&id);
        }
        self.state = GroupState::Dead;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(member_id: &str, generation: i32) -> Caller<'_> {
        Caller {
            member_id,
            instance_id: None,
            generation,
        }
    }

    const LIMITS: JoinLimits = JoinLimits {
        initial_rebalance_delay_ms: 0,
        max_size: 100,
    };

    fn req(member_id: &str) -> JoinRequest {
        JoinRequest {
            member_id: member_id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![
                ("range".into(), Bytes::from_static(b"r")),
                ("roundrobin".into(), Bytes::from_static(b"rr")),
            ],
            require_known_member_id: true,
        }
    }

    fn now<T>(r: Reply<T>) -> T {
        match r {
            Reply::Now(v) => v,
            Reply::Wait(_) => panic!("expected an immediate answer"),
        }
    }

    fn wait<T>(r: Reply<T>) -> oneshot::Receiver<T> {
        match r {
            Reply::Wait(rx) => rx,
            Reply::Now(_) => panic!("expected to wait"),
        }
    }

    /// Two-step join of a new dynamic member; returns its id and the pending receiver.
    fn join_new(g: &mut Group, t: i64) -> (String, oneshot::Receiver<JoinResult>) {
        let first = now(g.join(req(""), LIMITS, t));
        assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
        let id = first.member_id.clone();
        let rx = wait(g.join(req(&id), LIMITS, t));
        (id, rx)
    }

    #[test]
    fn two_members_join_sync_and_heartbeat() {
        let mut g = Group::new("g".into(), 0);
        let (a, mut rx_a) = join_new(&mut g, 0);
        assert!(g.try_complete_join(0), "single member completes at once");
        let ja = rx_a.try_recv().unwrap().unwrap();
        assert_eq!((ja.generation, ja.leader.as_str()), (1, a.as_str()));
        assert_eq!(ja.protocol.as_deref(), Some("range"));
        assert_eq!(ja.members.len(), 1);
        let rx = wait(g.sync(caller(&a, 1), None, None, vec![(a.clone(), "A".into())], 1));
        drop(rx);
        assert_eq!(g.state, GroupState::Stable);
        assert!(g.take_dirty());

        // A second member joins: the stable group rebalances, the first learns by heartbeat.
        let (b, mut rx_b) = join_new(&mut g, 2);
        assert_eq!(g.state, GroupState::PreparingRebalance);
        assert_eq!(
            g.heartbeat(caller(&a, 1), 3),
            Err(ResponseError::RebalanceInProgress)
        );
        assert!(
            !g.try_complete_join(3),
            "waits for the first member to rejoin"
        );
        let mut rx_a = wait(g.join(req(&a), LIMITS, 4));
        assert!(g.try_complete_join(4));
        let ja = rx_a.try_recv().unwrap().unwrap();
        let jb = rx_b.try_recv().unwrap().unwrap();
        assert_eq!((ja.generation, jb.generation), (2, 2));
        assert_eq!(ja.leader, a, "the leader stays");
        assert_eq!((ja.members.len(), jb.members.len()), (2, 0));
        let mut follower = wait(g.sync(caller(&b, 2), None, None, vec![], 5));
        assert!(
            follower.try_recv().unwrap().is_none(),
            "waits for the leader"
        );
        let assignments = vec![(a.clone(), "A2".into()), (b.clone(), "B2".into())];
        let mut leader = wait(g.sync(caller(&a, 2), None, None, assignments, 6));
        assert_eq!(&follower.try_recv().unwrap().unwrap().unwrap()[..], b"B2");
        assert_eq!(&leader.try_recv().unwrap().unwrap().unwrap()[..], b"A2");
        assert_eq!(g.heartbeat(caller(&b, 2), 7), Ok(()));
        assert_eq!(
            g.heartbeat(caller(&b, 1), 7),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.heartbeat(caller("nobody", 2), 7),
            Err(ResponseError::UnknownMemberId)
        );
    }

    #[test]
    fn session_timeout_and_leave_rebalance_and_empty_the_group() {
        let mut g = Group::new("g".into(), 0);
        let (a, _rx) = join_new(&mut g, 0);
        g.try_complete_join(0);
        let _ = g.sync(caller(&a, 1), None, None, vec![], 0);
        let (b, _rxb) = join_new(&mut g, 1);
        let _rxa = wait(g.join(req(&a), LIMITS, 1));
        g.try_complete_join(1);
        let _ = g.sync(caller(&a, 2), None, None, vec![], 1);
        assert_eq!(g.state, GroupState::Stable);
        // b stops heartbeating: removed after its session, a is told to rejoin.
        assert_eq!(g.heartbeat(caller(&a, 2), 9_000), Ok(()));
        assert!(g.expire(LIMITS, 10_001));
        assert!(!g.members.contains_key(&b));
        assert_eq!(
            g.heartbeat(caller(&a, 2), 10_002),
            Err(ResponseError::RebalanceInProgress)
        );
        let mut rx = wait(g.join(req(&a), LIMITS, 10_003));
        g.try_complete_join(10_003);
        assert_eq!(rx.try_recv().unwrap().unwrap().generation, 3);
        let results = g.leave(&[(a.clone(), None), ("x".into(), None)], LIMITS, 10_004);
        assert_eq!(results, vec![Ok(()), Err(ResponseError::UnknownMemberId)]);
        assert_eq!(g.state, GroupState::Empty);
        assert_eq!(g.generation, 4);
    }

    #[test]
    fn protocol_mismatch_and_commit_checks() {
        let mut g = Group::new("g".into(), 0);
        let (a, _rx) = join_new(&mut g, 0);
        g.try_complete_join(0);
        let mut other = req("");
        other.protocols = vec![("sticky".into(), Bytes::new())];
        assert_eq!(
            now(g.join(other, LIMITS, 1)).error,
            Some(ResponseError::InconsistentGroupProtocol)
        );
        assert_eq!(
            g.check_commit(caller(&a, 1), 1),
            Err(ResponseError::RebalanceInProgress)
        );
        let _ = g.sync(caller(&a, 1), None, None, vec![], 1);
        assert_eq!(g.check_commit(caller(&a, 1), 2), Ok(()));
        assert_eq!(
            g.check_commit(caller(&a, 0), 2),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.check_commit(caller("", -1), 2),
            Err(ResponseError::UnknownMemberId),
            "no simple commits into a group with members"
        );
    }

    #[test]
    fn static_member_rejoins_without_rebalance_and_fences_the_old_id() {
        let mut g = Group::new("g".into(), 0);
        let mut r = req("");
        r.instance_id = Some("i-1".into());
        let mut rx = wait(g.join(r.clone(), LIMITS, 0));
        g.try_complete_join(0);
        let old = rx.try_recv().unwrap().unwrap().member_id;
        let mut r2 = req("");
        r2.instance_id = Some("i-2".into());
        let _rx2 = wait(g.join(r2, LIMITS, 0));
        let mut again = wait(g.join(
            JoinRequest {
                member_id: old.clone(),
                ..r.clone()
            },
            LIMITS,
            0,
        ));
        g.try_complete_join(0);
        let j = again.try_recv().unwrap().unwrap();
        let leader = j.leader.clone();
        let _ = g.sync(caller(&leader, j.generation), None, None, vec![], 0);
        assert_eq!(g.state, GroupState::Stable);
        let gen = g.generation;
        // The follower restarts with the same instance id: new member id, same generation.
        let follower_instance = if leader == old { "i-2" } else { "i-1" };
        let old_follower = g.static_members[follower_instance].clone();
        let mut r3 = req("");
        r3.instance_id = Some(follower_instance.into());
        let j = now(g.join(r3, LIMITS, 1));
        assert_eq!((j.error, j.generation), (None, gen));
        assert_ne!(j.member_id, old_follower);
        assert_eq!(g.state, GroupState::Stable);
        assert_eq!(
            g.heartbeat(
                Caller {
                    member_id: &old_follower,
                    instance_id: Some(follower_instance),
                    generation: gen,
                },
                2
            ),
            Err(ResponseError::FencedInstanceId)
        );
    }

    #[test]
    fn initial_delay_collects_members_before_the_first_generation() {
        let limits = JoinLimits {
            initial_rebalance_delay_ms: 3_000,
            max_size: 100,
        };
        let mut g = Group::new("g".into(), 0);
        let mut rxs = Vec::new();
        for t in [0, 1_000, 2_000] {
            let id = now(g.join(req(""), limits, t)).member_id;
            rxs.push(wait(g.join(req(&id), limits, t)));
            assert!(!g.try_complete_join(t));
        }
        assert!(
            !g.expire(limits, 4_999),
            "the delay was extended by the last member"
        );
        assert!(g.expire(limits, 5_000));
        for mut rx in rxs {
            assert_eq!(rx.try_recv().unwrap().unwrap().generation, 1);
        }
    }
}
