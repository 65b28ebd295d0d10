//! A JoinGroup as the coordinator receives it: the classic group protocol's request, answered
//! by a classic group (`membership`) or by a consumer group with classic members
//! (`consumer::classic`, Kafka's online migration).

use bytes::Bytes;

#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// Empty for a new member.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// `(name, metadata)` in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets its id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}
