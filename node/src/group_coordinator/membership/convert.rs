//! A classic group handing its members to a consumer group (a consumer-protocol member joined
//! it) and taking them back (the consumer group is left with classic members only): the
//! classic side of Kafka's online migration. The consumer side is
//! `consumer::classic`.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::group::Group;
use super::member::Member;
use super::{GroupState, JoinLimits, JoinResult};
use crate::group_coordinator::consumer::classic::{
    encode_assignment, ClassicImage, ClassicImageMember, ClassicMember, FromClassic, PROTOCOL_TYPE,
};
use crate::group_coordinator::consumer::TopicIndex;

impl Group {
    /// Whether a consumer-protocol member may convert this group: it has members, and they
    /// are Kafka consumers (`usesConsumerGroupProtocol`).
    pub fn upgradable(&self) -> bool {
        !self.members.is_empty() && self.protocol_type.as_deref() == Some(PROTOCOL_TYPE)
    }

    /// The members as the consumer group they become needs them, and the generation. Once the
    /// consumer group is built, [`Group::clear_classic`] with REBALANCE_IN_PROGRESS tells a
    /// waiting JoinGroup or SyncGroup to rejoin (the consumer group).
    pub fn upgrade_members(&self) -> (i32, Vec<FromClassic>) {
        let generation = self.generation;
        let members = self
            .members
            .values()
            .map(|m| FromClassic {
                member: ClassicMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                },
                // a group still choosing its first protocol: the member's favourite
                subscription: match &self.protocol {
                    Some(p) => m.metadata(p),
                    None => m.protocols.first().map(|p| p.1.clone()).unwrap_or_default(),
                },
                assignment: m.assignment.clone(),
            })
            .collect();
        (generation, members)
    }

    /// Forgets the classic group (members, generation, protocol) and keeps the offsets; a
    /// waiting JoinGroup or SyncGroup gets `error`. What a classic group's tombstone means.
    pub fn clear_classic(&mut self, error: ResponseError) {
        for (id, m) in std::mem::take(&mut self.members) {
            if let Some(tx) = m.awaiting_join {
                let _ = tx.send(JoinResult::error(error, id));
            }
            if let Some(tx) = m.awaiting_sync {
                let _ = tx.send(Err(error));
            }
        }
        self.static_members.clear();
        self.pending.clear();
        self.generation = 0;
        self.protocol_type = None;
        self.protocol = None;
        self.leader = None;
        self.join_deadline_ms = None;
        self.initial_join_since_ms = None;
        self.state = GroupState::Empty;
        self.dirty = false;
    }

    /// The group becomes classic again from what its consumer group was (Kafka's
    /// `fromConsumerGroup`): Stable at the consumer group's epoch, each member holding its
    /// target assignment, then a rebalance so that the members rejoin as a classic group. The
    /// metadata record is then to be written (`take_dirty`).
    pub fn become_classic(
        &mut self,
        image: ClassicImage,
        topics: &TopicIndex,
        limits: JoinLimits,
        now_ms: i64,
    ) {
        self.consumer = None;
        self.clear_classic(ResponseError::RebalanceInProgress);
        self.generation = image.generation;
        self.protocol_type = Some(PROTOCOL_TYPE.to_owned());
        let mut assigned = Vec::new();
        for ClassicImageMember {
            member: m,
            assigned: target,
        } in image.members
        {
            if let Some(i) = &m.instance_id {
                self.static_members.insert(i.clone(), m.id.clone());
            }
            self.next_seq += 1;
            assigned.push((m.id.clone(), target));
            self.members.insert(
                m.id.clone(),
                Member {
                    id: m.id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocol_type: PROTOCOL_TYPE.to_owned(),
                    protocols: m.protocols,
                    assignment: Bytes::new(),
                    joined_seq: self.next_seq,
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
                },
            );
        }
        self.protocol = self.select_protocol();
        let protocol = self.protocol.clone().unwrap_or_default();
        self.leader = self
            .members
            .values()
            .min_by_key(|m| m.joined_seq)
            .map(|m| m.id.clone());
        for (id, a) in assigned {
            if let Some(m) = self.members.get_mut(&id) {
                let version = m.metadata(&protocol);
                let version = if version.len() >= 2 {
                    i16::from_be_bytes([version[0], version[1]])
                } else {
                    0
                };
                m.assignment = encode_assignment(&a, topics, version);
            }
        }
        self.set_state(GroupState::Stable, now_ms);
        self.dirty = true;
        self.prepare_rebalance(limits, now_ms, "downgrade from the consumer protocol");
    }
}
