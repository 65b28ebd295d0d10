//! The rebalance protocol's transitions: JoinGroup (with MEMBER_ID_REQUIRED, static members and
//! the initial delay), completing the join, SyncGroup, Heartbeat and LeaveGroup.

use std::collections::HashMap;

use bytes::Bytes;
use futures_channel::oneshot;
use kafka_protocol::ResponseError;

use super::group::Group;
use super::member::Member;
use super::{Caller, GroupState, JoinLimits, JoinRequest, JoinResult, Reply, SyncResult};

impl Group {
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

    pub(super) fn update_and_wait(&mut self, id: &str, req: JoinRequest) -> Reply<JoinResult> {
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

    pub(super) fn add_member(
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

    pub(super) fn rejoin_static(
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

    pub(super) fn prepare_rebalance(&mut self, limits: JoinLimits, now_ms: i64, reason: &str) {
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

    pub(super) fn remove_member(&mut self, id: &str) {
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
    pub(super) fn members_removed(&mut self, limits: JoinLimits, now_ms: i64) {
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
}
