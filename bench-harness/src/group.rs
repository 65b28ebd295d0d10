//! A consumer group member on Kafka's classic group protocol, for workloads with
//! `consumerAssignment: group` (what OpenMessaging Benchmark's Kafka driver does with
//! `subscribe()`): FindCoordinator, JoinGroup (with the MEMBER_ID_REQUIRED step), the `range`
//! assignment computed by the leader, SyncGroup, Heartbeat, OffsetCommit/OffsetFetch and
//! LeaveGroup. Blocking, one coordinator connection per member.

use std::collections::{BTreeMap, HashMap};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition,
};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;

use crate::client::{call, connect, ClientError, Receiver, Sender};

const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 60_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn broker_error(what: &str, code: i16) -> ClientError {
    let name = ResponseError::try_from_code(code)
        .map_or_else(|| format!("error {code}"), |e| format!("{e:?}"));
    ClientError::Broker(format!("{what}: {name}"))
}

/// Encodes a consumer-protocol struct with its version prefix.
fn versioned<T: Encodable>(api: ApiKey, value: &T, version: i16) -> Result<Bytes, ClientError> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    value
        .encode(&mut buf, version)
        .map_err(|e| ClientError::Codec {
            api,
            version,
            reason: e.to_string(),
        })?;
    Ok(buf.freeze())
}

/// Kafka's `range` assignor for one topic: members sorted by id, each a contiguous range, the
/// first `partitions % members` one more.
pub fn range_assign(members: &[String], partitions: u32) -> BTreeMap<String, Vec<u32>> {
    let mut sorted = members.to_vec();
    sorted.sort();
    let n = sorted.len().max(1) as u32;
    let (each, extra) = (partitions / n, partitions % n);
    let mut next = 0;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let count = each + u32::from((i as u32) < extra);
            let parts = (next..next + count).collect();
            next += count;
            (m, parts)
        })
        .collect()
}

pub struct GroupMember {
    group: String,
    topic: String,
    partitions: u32,
    member_id: String,
    generation: i32,
    tx: Sender,
    rx: Receiver,
}

impl GroupMember {
    /// Finds the group's coordinator and connects to it.
    /// Retries for 30 s while the broker is still creating or loading `__consumer_offsets`.
    pub fn new(
        bootstrap: &str,
        group: &str,
        topic: &str,
        partitions: u32,
    ) -> Result<GroupMember, ClientError> {
        let mut req = FindCoordinatorRequest::default();
        req.key = s(group);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let resp = loop {
            let resp: FindCoordinatorResponse = call(bootstrap, ApiKey::FindCoordinator, 3, &req)?;
            let retriable = [
                ResponseError::CoordinatorNotAvailable.code(),
                ResponseError::CoordinatorLoadInProgress.code(),
            ]
            .contains(&resp.error_code);
            if resp.error_code == 0 {
                break resp;
            }
            if !retriable || std::time::Instant::now() > deadline {
                return Err(broker_error("FindCoordinator", resp.error_code));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let (tx, rx) = connect(&format!("{}:{}", resp.host, resp.port))?;
        Ok(GroupMember {
            group: group.to_owned(),
            topic: topic.to_owned(),
            partitions,
            member_id: String::new(),
            generation: -1,
            tx,
            rx,
        })
    }

    fn request<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, ClientError> {
        self.tx.send(api, version, req)?;
        Ok(self.rx.recv_decoded(api, version)?.1)
    }

    /// Joins (or rejoins) the group; returns this member's partitions once the group is stable.
    pub fn join(&mut self) -> Result<Vec<u32>, ClientError> {
        let mut subscription = ConsumerProtocolSubscription::default();
        subscription.topics = vec![s(&self.topic)];
        let metadata = versioned(ApiKey::JoinGroup, &subscription, 0)?;
        loop {
            let mut protocol = JoinGroupRequestProtocol::default();
            protocol.name = s("range");
            protocol.metadata = metadata.clone();
            let mut req = JoinGroupRequest::default();
            req.group_id = GroupId(s(&self.group));
            req.session_timeout_ms = SESSION_TIMEOUT_MS;
            req.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
            req.member_id = s(&self.member_id);
            req.protocol_type = s("consumer");
            req.protocols = vec![protocol];
            let resp: JoinGroupResponse = self.request(ApiKey::JoinGroup, 5, &req)?;
            if resp.error_code == ResponseError::MemberIdRequired.code() {
                self.member_id = resp.member_id.to_string();
                continue;
            }
            if resp.error_code == ResponseError::UnknownMemberId.code() {
                self.member_id.clear();
                continue;
            }
            if resp.error_code == ResponseError::CoordinatorLoadInProgress.code() {
                std::thread::sleep(std::time::Duration::from_millis(200));
                continue;
            }
            if resp.error_code != 0 {
                return Err(broker_error("JoinGroup", resp.error_code));
            }
            self.member_id = resp.member_id.to_string();
            self.generation = resp.generation_id;
            let mut assignments = Vec::new();
            if resp.leader == resp.member_id {
                let ids: Vec<String> = resp
                    .members
                    .iter()
                    .map(|m| m.member_id.to_string())
                    .collect();
                for (member, parts) in range_assign(&ids, self.partitions) {
                    let mut tp = TopicPartition::default();
                    tp.topic = TopicName(s(&self.topic));
                    tp.partitions = parts.iter().map(|&p| p as i32).collect();
                    let mut a = ConsumerProtocolAssignment::default();
                    a.assigned_partitions = vec![tp];
                    let mut sa = SyncGroupRequestAssignment::default();
                    sa.member_id = s(&member);
                    sa.assignment = versioned(ApiKey::SyncGroup, &a, 0)?;
                    assignments.push(sa);
                }
            }
            let mut sync = SyncGroupRequest::default();
            sync.group_id = GroupId(s(&self.group));
            sync.generation_id = self.generation;
            sync.member_id = s(&self.member_id);
            sync.assignments = assignments;
            let resp: SyncGroupResponse = self.request(ApiKey::SyncGroup, 3, &sync)?;
            if resp.error_code == ResponseError::RebalanceInProgress.code() {
                continue;
            }
            if resp.error_code != 0 {
                return Err(broker_error("SyncGroup", resp.error_code));
            }
            return self.decode_assignment(resp.assignment);
        }
    }

    fn decode_assignment(&self, mut bytes: Bytes) -> Result<Vec<u32>, ClientError> {
        if bytes.remaining() < 2 {
            return Ok(Vec::new());
        }
        let version = bytes.get_i16();
        let a =
            ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3)).map_err(|e| {
                ClientError::Codec {
                    api: ApiKey::SyncGroup,
                    version,
                    reason: e.to_string(),
                }
            })?;
        Ok(a.assigned_partitions
            .into_iter()
            .filter(|tp| tp.topic.0.as_str() == self.topic)
            .flat_map(|tp| tp.partitions.into_iter().map(|p| p as u32))
            .collect())
    }

    /// `Ok(true)` when the group is rebalancing and this member must rejoin.
    pub fn heartbeat(&mut self) -> Result<bool, ClientError> {
        let mut req = HeartbeatRequest::default();
        req.group_id = GroupId(s(&self.group));
        req.generation_id = self.generation;
        req.member_id = s(&self.member_id);
        let resp: HeartbeatResponse = self.request(ApiKey::Heartbeat, 3, &req)?;
        match ResponseError::try_from_code(resp.error_code) {
            None => Ok(false),
            Some(
                e @ (ResponseError::RebalanceInProgress
                | ResponseError::IllegalGeneration
                | ResponseError::UnknownMemberId),
            ) => {
                eprintln!(
                    "[group] {} member {} rejoins (generation {}): {e:?}",
                    self.group, self.member_id, self.generation
                );
                Ok(true)
            }
            Some(_) => Err(broker_error("Heartbeat", resp.error_code)),
        }
    }

    /// The committed offset of each partition (absent: nothing committed).
    pub fn committed(&mut self, partitions: &[u32]) -> Result<HashMap<u32, i64>, ClientError> {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = TopicName(s(&self.topic));
        t.partition_indexes = partitions.iter().map(|&p| p as i32).collect();
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(&self.group));
        req.topics = Some(vec![t]);
        let resp: OffsetFetchResponse = self.request(ApiKey::OffsetFetch, 5, &req)?;
        if resp.error_code != 0 {
            return Err(broker_error("OffsetFetch", resp.error_code));
        }
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.committed_offset >= 0)
            .map(|p| (p.partition_index as u32, p.committed_offset))
            .collect())
    }

    /// Commits `offsets` (next offset to read per partition) in the current generation.
    pub fn commit(&mut self, offsets: &HashMap<u32, i64>) -> Result<(), ClientError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(s(&self.topic));
        t.partitions = offsets
            .iter()
            .map(|(&p, &o)| {
                let mut cp = OffsetCommitRequestPartition::default();
                cp.partition_index = p as i32;
                cp.committed_offset = o;
                cp.committed_leader_epoch = -1;
                cp.committed_metadata = Some(s(""));
                cp
            })
            .collect();
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(s(&self.group));
        req.generation_id_or_member_epoch = self.generation;
        req.member_id = s(&self.member_id);
        req.topics = vec![t];
        let resp: OffsetCommitResponse = self.request(ApiKey::OffsetCommit, 7, &req)?;
        for p in resp.topics.iter().flat_map(|t| t.partitions.iter()) {
            // A commit racing a rebalance is refused; the next owner re-reads a little.
            if p.error_code != 0 && p.error_code != ResponseError::RebalanceInProgress.code() {
                return Err(broker_error("OffsetCommit", p.error_code));
            }
        }
        Ok(())
    }

    pub fn leave(&mut self) -> Result<(), ClientError> {
        let mut m = MemberIdentity::default();
        m.member_id = s(&self.member_id);
        let mut req = LeaveGroupRequest::default();
        req.group_id = GroupId(s(&self.group));
        req.members = vec![m];
        let resp: LeaveGroupResponse = self.request(ApiKey::LeaveGroup, 3, &req)?;
        if resp.error_code != 0 {
            return Err(broker_error("LeaveGroup", resp.error_code));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignment_matches_kafkas_range_assignor() {
        let members = vec!["c".to_string(), "a".into(), "b".into()];
        let a = range_assign(&members, 8);
        assert_eq!(a["a"], vec![0, 1, 2]);
        assert_eq!(a["b"], vec![3, 4, 5]);
        assert_eq!(a["c"], vec![6, 7]);
        let idle = range_assign(&(0..8).map(|i| format!("m{i}")).collect::<Vec<_>>(), 6);
        assert_eq!(idle.values().filter(|p| p.is_empty()).count(), 2);
    }
}
