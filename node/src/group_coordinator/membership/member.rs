//! A member of a group: what it joined with, its assignment, its pending JoinGroup/SyncGroup
//! and its session deadline.

use bytes::Bytes;
use futures_channel::oneshot;

use super::{JoinResult, SyncResult};

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
    pub(super) joined_seq: u64,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinResult>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    pub(super) heartbeat_deadline_ms: i64,
}

impl Member {
    pub(super) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub(super) fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    pub(super) fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Kafka keeps members alive while they wait in a JoinGroup or SyncGroup.
    pub(super) fn expired(&self, now_ms: i64) -> bool {
        self.awaiting_join.is_none()
            && self.awaiting_sync.is_none()
            && now_ms >= self.heartbeat_deadline_ms
    }
}
