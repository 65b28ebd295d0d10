//! A group's state, its persisted form, protocol selection, member validation, expiry and what
//! DescribeGroups shows. The rebalance transitions are in `rebalance.rs`.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::member::Member;
use super::{Caller, GroupState, JoinLimits, JoinResult, JoinedMember};
use crate::group_coordinator::records::{GroupValue, MemberValue, OffsetValue};

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
    pub(super) static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until the member rejoins with it.
    pub(super) pending: HashMap<String, i64>,
    pub(super) join_deadline_ms: Option<i64>,
    /// Start of the initial rebalance delay of a group that was empty.
    pub(super) initial_join_since_ms: Option<i64>,
    pub(super) next_seq: u64,
    pub offsets: BTreeMap<(String, i32), OffsetValue>,
    /// The group's metadata changed and must be written to `__consumer_offsets`.
    pub(super) dirty: bool,
    /// Set when the group is a consumer-protocol (KIP-848) group: the classic fields above
    /// stay empty, `offsets` is shared.
    pub consumer: Option<crate::group_coordinator::consumer::ConsumerGroup>,
    /// Whether the consumer group had no member when last looked at (its classic `state`
    /// stays Empty: `state_since_ms` is when it last became empty or not).
    consumer_empty: bool,
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
            consumer: None,
            consumer_empty: true,
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
            && self.consumer.as_ref().is_none_or(|c| c.members.is_empty())
    }

    /// Topics the members subscribe to, from their consumer protocol metadata for the
    /// group's protocol (Kafka's `ConsumerProtocolSubscription`; a newer version than this
    /// crate knows is read as the newest it knows, as Kafka reads forward-compatible ones).
    /// Metadata that does not decode subscribes to nothing.
    pub fn subscribed_topics(&self) -> std::collections::HashSet<String> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        let Some(protocol) = &self.protocol else {
            return Default::default();
        };
        let mut topics = std::collections::HashSet::new();
        for m in self.members.values() {
            let mut bytes = m.metadata(protocol);
            if bytes.len() < 2 {
                continue;
            }
            let version = i16::from_be_bytes([bytes[0], bytes[1]]).clamp(0, 3);
            let _ = bytes::Buf::get_i16(&mut bytes);
            if let Ok(sub) = ConsumerProtocolSubscription::decode(&mut bytes, version) {
                topics.extend(sub.topics.iter().map(|t| t.to_string()));
            }
        }
        topics
    }

    /// A consumer-protocol group that has just become empty (or stopped being so) starts its
    /// offsets retention clock then, as a classic group does on entering Empty.
    pub fn note_consumer_emptiness(&mut self, now_ms: i64) {
        let Some(c) = &self.consumer else {
            return;
        };
        let empty = c.members.is_empty();
        if empty != self.consumer_empty {
            self.consumer_empty = empty;
            self.state_since_ms = now_ms;
        }
    }

    /// Created by a request that was then refused: no member, no generation, no offsets, and
    /// nobody waiting for a member id.
    pub fn never_used(&self) -> bool {
        self.state == GroupState::Empty
            && self.generation == 0
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
            && self.consumer.is_none()
    }

    pub(super) fn set_state(&mut self, state: GroupState, now_ms: i64) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = now_ms;
        }
    }

    /// Whether a member with this protocol type and these protocols can be in the group.
    pub(super) fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
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
    pub(super) fn select_protocol(&self) -> Option<String> {
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

    pub(super) fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Checks that `member_id` (with `instance_id`, for static members) is a member.
    pub(super) fn validate_member(
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

    pub(super) fn join_result(&self, member_id: &str) -> JoinResult {
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
        if let Some(c) = &self.consumer {
            // a consumer-protocol group: the generation is the member epoch (KIP-848)
            if generation < 0 && c.members.is_empty() {
                return Ok(());
            }
            let m = c
                .members
                .get(member_id)
                .ok_or(ResponseError::UnknownMemberId)?;
            if generation != m.current.member_epoch {
                // a classic member's generation is its member epoch
                return Err(if m.meta.classic.is_some() {
                    ResponseError::IllegalGeneration
                } else {
                    ResponseError::StaleMemberEpoch
                });
            }
            return Ok(());
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
