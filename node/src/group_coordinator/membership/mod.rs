//! One consumer group's state machine: Kafka's classic group protocol (Empty →
//! PreparingRebalance → CompletingRebalance → Stable, and Dead once deleted). Pure logic: no I/O;
//! time comes in as milliseconds, and what must be written to `__consumer_offsets` is flagged
//! (`take_dirty`) for the coordinator to persist. Waiting JoinGroup/SyncGroup requests are
//! oneshot senders held by their member and answered when the rebalance step completes.

mod convert;
mod group;
mod member;
mod rebalance;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use futures_channel::oneshot;
use kafka_protocol::ResponseError;

pub use super::join::JoinRequest;
pub use group::Group;
pub use member::Member;

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
