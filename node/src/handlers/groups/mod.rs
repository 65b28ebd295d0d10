//! FindCoordinator and the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! ListGroups, DescribeGroups, DeleteGroups, OffsetCommit, OffsetFetch; and the consumer
//! protocol's ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848). Translation between the
//! wire messages and `crate::group_coordinator`; fields are set only in the versions that carry
//! them.

mod admin;
mod consumer;
mod find_coordinator;
mod join_sync;
mod offsets;

pub use admin::{delete, describe, list, offset_delete};
pub use consumer::{describe as consumer_describe, heartbeat as consumer_heartbeat};
pub use find_coordinator::find_coordinator;
pub use join_sync::{heartbeat, join, leave, sync};
pub use offsets::{offset_commit, offset_fetch};

use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

pub use crate::handlers::client::Client;

pub(super) fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(super) fn code(r: Result<(), ResponseError>) -> i16 {
    r.err().map_or(0, |e| e.code())
}
