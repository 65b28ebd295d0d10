//! FindCoordinator and the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! ListGroups, DescribeGroups, DeleteGroups, OffsetCommit, OffsetFetch. Translation between the
//! wire messages and the coordinator in `crate::group_coordinator`; fields are set only in the versions
//! that carry them.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::group_coordinator::membership::{Caller, GroupState, JoinRequest};
use crate::group_coordinator::partition_for;
use crate::group_coordinator::records::OffsetValue;
use crate::metadata::Command;
use crate::metadata::OFFSETS_TOPIC;
use crate::shard::{now_ms, ShardCtx};

/// Who sent a request: JoinGroup records it for DescribeGroups.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub id: String,
    pub host: String,
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn code(r: Result<(), ResponseError>) -> i16 {
    r.err().map_or(0, |e| e.code())
}

/// Creates `__consumer_offsets` if it does not exist yet (as Kafka does on the first
/// FindCoordinator). Returns its partition count.
async fn offsets_topic(ctx: &Rc<ShardCtx>) -> Result<i32, ResponseError> {
    if let Some(t) = ctx.snapshot.borrow().topics.get(OFFSETS_TOPIC) {
        return Ok(t.partitions.len() as i32);
    }
    let g = &ctx.config.group;
    // No cleanup.policy=compact: there is no log cleaner. Time retention is off instead and a
    // load replays every record, the latest per key winning.
    let configs = [
        ("retention.ms", "-1".to_owned()),
        ("segment.bytes", g.offsets_topic_segment_bytes.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let partitions = g.offsets_topic_partitions;
    let created = ctx
        .control(|reply| Command::CreateTopic {
            name: OFFSETS_TOPIC.to_owned(),
            partitions,
            configs,
            reply,
        })
        .await;
    match created {
        Ok(()) => tracing::info!(partitions, "created {OFFSETS_TOPIC}"),
        Err(r) if r.error == ResponseError::TopicAlreadyExists => {}
        Err(r) => {
            tracing::error!(error = %r, "creating {OFFSETS_TOPIC}");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
    }
    ctx.snapshot
        .borrow()
        .topics
        .get(OFFSETS_TOPIC)
        .map(|t| t.partitions.len() as i32)
        .ok_or(ResponseError::CoordinatorNotAvailable)
}

/// `(broker id, port)` of the shard coordinating `key`, or the error.
async fn coordinator_of(
    ctx: &Rc<ShardCtx>,
    key_type: i8,
    key: &str,
) -> Result<(i32, i32), (ResponseError, String)> {
    if key_type != 0 {
        return Err((
            ResponseError::InvalidRequest,
            format!("coordinator key type {key_type} is not supported (transactions and share groups are not built; 0 = group)"),
        ));
    }
    if key.is_empty() {
        return Err((ResponseError::InvalidGroupId, "empty group id".into()));
    }
    let partitions = offsets_topic(ctx)
        .await
        .map_err(|e| (e, format!("{OFFSETS_TOPIC} is not available")))?;
    let p = partition_for(key, partitions);
    let shard = ctx
        .snapshot
        .borrow()
        .partition(OFFSETS_TOPIC, p)
        .map(|m| m.shard)
        .ok_or((ResponseError::CoordinatorNotAvailable, String::new()))?;
    Ok((
        ctx.config.broker_id(shard),
        i32::from(ctx.config.advertised_port) + shard as i32,
    ))
}

pub async fn find_coordinator(
    ctx: &Rc<ShardCtx>,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let mut resp = FindCoordinatorResponse::default();
    let key_type = if version >= 1 { req.key_type } else { 0 };
    let host = s(ctx.config.advertised_host.clone());
    if version >= 4 {
        for key in req.coordinator_keys {
            let mut c = Coordinator::default();
            match coordinator_of(ctx, key_type, &key).await {
                Ok((id, port)) => {
                    c.node_id = BrokerId(id);
                    c.host = host.clone();
                    c.port = port;
                }
                Err((e, msg)) => {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = e.code();
                    c.error_message = Some(s(msg));
                }
            }
            c.key = key;
            resp.coordinators.push(c);
        }
        return resp;
    }
    match coordinator_of(ctx, key_type, &req.key).await {
        Ok((id, port)) => {
            resp.node_id = BrokerId(id);
            resp.host = host;
            resp.port = port;
        }
        Err((e, msg)) => {
            resp.error_code = e.code();
            resp.node_id = BrokerId(-1);
            resp.port = -1;
            if version >= 1 {
                resp.error_message = Some(s(msg));
            }
        }
    }
    resp
}

pub async fn join(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.map(|i| i.to_string()),
        client_id: client.id.clone(),
        client_host: client.host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let r = ctx
        .groups
        .join(&**ctx, &req.group_id.0, join, now_ms())
        .await;
    let mut resp = JoinGroupResponse::default();
    resp.error_code = r.error.map_or(0, |e| e.code());
    resp.generation_id = r.generation;
    if version >= 7 {
        resp.protocol_type = r.protocol_type.map(s);
    }
    resp.protocol_name = Some(s(r.protocol.unwrap_or_default()));
    resp.leader = s(r.leader);
    resp.member_id = s(r.member_id);
    resp.members = r
        .members
        .into_iter()
        .map(|m| {
            let mut jm = JoinGroupResponseMember::default();
            jm.member_id = s(m.member_id);
            if version >= 5 {
                jm.group_instance_id = m.instance_id.map(s);
            }
            jm.metadata = m.metadata;
            jm
        })
        .collect();
    resp
}

pub async fn sync(ctx: &Rc<ShardCtx>, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let assignments = req
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let result = ctx
        .groups
        .sync(
            &**ctx,
            &req.group_id.0,
            Caller {
                member_id: &req.member_id,
                instance_id: req.group_instance_id.as_deref(),
                generation: req.generation_id,
            },
            (req.protocol_type.as_deref(), req.protocol_name.as_deref()),
            assignments,
            now_ms(),
        )
        .await;
    let mut resp = SyncGroupResponse::default();
    match result {
        Ok(assignment) => {
            resp.assignment = assignment;
            if version >= 5 {
                let (protocol_type, protocol) = ctx.groups.protocol(&req.group_id.0);
                resp.protocol_type = Some(s(protocol_type.unwrap_or_default()));
                resp.protocol_name = Some(s(protocol.unwrap_or_default()));
            }
        }
        Err(e) => resp.error_code = e.code(),
    }
    resp
}

pub fn heartbeat(ctx: &Rc<ShardCtx>, req: HeartbeatRequest) -> HeartbeatResponse {
    let mut resp = HeartbeatResponse::default();
    let who = Caller {
        member_id: &req.member_id,
        instance_id: req.group_instance_id.as_deref(),
        generation: req.generation_id,
    };
    resp.error_code = code(ctx.groups.heartbeat(&**ctx, &req.group_id.0, who, now_ms()));
    resp
}

pub async fn leave(ctx: &Rc<ShardCtx>, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let mut resp = LeaveGroupResponse::default();
    match ctx
        .groups
        .leave(&**ctx, &req.group_id.0, &members, now_ms())
        .await
    {
        Err(e) => resp.error_code = e.code(),
        Ok(results) if version < 3 => resp.error_code = code(results[0]),
        Ok(results) => {
            resp.members = members
                .into_iter()
                .zip(results)
                .map(|((id, instance), r)| {
                    let mut m = MemberResponse::default();
                    m.member_id = s(id);
                    m.group_instance_id = instance.map(s);
                    m.error_code = code(r);
                    m
                })
                .collect();
        }
    }
    resp
}

pub fn list(ctx: &Rc<ShardCtx>, req: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let mut resp = ListGroupsResponse::default();
    resp.groups = ctx
        .groups
        .list()
        .into_iter()
        .filter(|(_, _, st)| states.is_empty() || states.contains(&st.name().to_lowercase()))
        .filter(|_| types.is_empty() || types.iter().any(|t| t == "classic"))
        .map(|(id, protocol_type, st)| {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(s(id));
            g.protocol_type = s(protocol_type);
            if version >= 4 {
                g.group_state = s(st.name());
            }
            if version >= 5 {
                g.group_type = s("classic");
            }
            g
        })
        .collect();
    resp
}

pub fn describe(
    ctx: &Rc<ShardCtx>,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    for id in req.groups {
        let mut g = DescribedGroup::default();
        if version >= 3 {
            g.authorized_operations = i32::MIN;
        }
        match ctx.groups.describe(&**ctx, &id.0) {
            Err(e) => {
                g.error_code = e.code();
                g.group_state = s(GroupState::Dead.name());
            }
            Ok(summary) => {
                g.group_state = s(summary.state.name());
                g.protocol_type = s(summary.protocol_type);
                g.protocol_data = s(summary.protocol);
                g.members = summary
                    .members
                    .into_iter()
                    .map(|(member, instance, client, host, metadata, assignment)| {
                        let mut m = DescribedGroupMember::default();
                        m.member_id = s(member);
                        if version >= 4 {
                            m.group_instance_id = instance.map(s);
                        }
                        m.client_id = s(client);
                        m.client_host = s(host);
                        m.member_metadata = metadata;
                        m.member_assignment = assignment;
                        m
                    })
                    .collect();
            }
        }
        g.group_id = id;
        resp.groups.push(g);
    }
    resp
}

pub async fn delete(ctx: &Rc<ShardCtx>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let mut r = DeletableGroupResult::default();
        r.error_code = code(ctx.groups.delete(&**ctx, &id.0, now_ms()).await);
        r.group_id = id;
        resp.results.push(r);
    }
    resp
}

pub async fn offset_commit(
    ctx: &Rc<ShardCtx>,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let now = now_ms();
    let mut asked: Vec<(TopicName, Vec<i32>)> = Vec::new();
    let mut offsets = Vec::new();
    for t in &req.topics {
        let mut ps = Vec::new();
        for p in &t.partitions {
            ps.push(p.partition_index);
            offsets.push((
                t.name.0.to_string(),
                p.partition_index,
                OffsetValue {
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p
                        .committed_metadata
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                    commit_timestamp: now,
                },
            ));
        }
        asked.push((t.name.clone(), ps));
    }
    let results = ctx
        .groups
        .commit(
            &**ctx,
            &req.group_id.0,
            Caller {
                member_id: &req.member_id,
                instance_id: req.group_instance_id.as_deref(),
                generation: req.generation_id_or_member_epoch,
            },
            offsets,
            now,
        )
        .await;
    let mut results = match results {
        Ok(r) => r.into_iter(),
        Err(e) => {
            let n = asked.iter().map(|(_, ps)| ps.len()).sum();
            vec![Err(e); n].into_iter()
        }
    };
    let mut resp = OffsetCommitResponse::default();
    for (name, ps) in asked {
        let mut t = OffsetCommitResponseTopic::default();
        t.name = name;
        for index in ps {
            let mut p = OffsetCommitResponsePartition::default();
            p.partition_index = index;
            p.error_code = code(results.next().expect("one result per partition"));
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    resp
}

type Asked = Option<Vec<(String, i32)>>;
/// Committed offsets grouped by topic, in the order first seen.
type ByTopic = Vec<(String, Vec<(i32, Option<OffsetValue>)>)>;

fn committed_partitions(
    ctx: &Rc<ShardCtx>,
    group: &str,
    asked: Asked,
) -> Result<ByTopic, ResponseError> {
    let found = ctx.groups.fetch_offsets(&**ctx, group, asked)?;
    let mut by_topic: ByTopic = Vec::new();
    for ((topic, partition), v) in found {
        match by_topic.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((partition, v)),
            None => by_topic.push((topic, vec![(partition, v)])),
        }
    }
    Ok(by_topic)
}

pub fn offset_fetch(
    ctx: &Rc<ShardCtx>,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut resp = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let asked: Asked = g
                .topics
                .map(|ts| asked_partitions(ts.into_iter().map(|t| (t.name, t.partition_indexes))));
            let mut rg = OffsetFetchResponseGroup::default();
            match committed_partitions(ctx, &g.group_id.0, asked) {
                Err(e) => rg.error_code = e.code(),
                Ok(topics) => {
                    rg.topics = topics
                        .into_iter()
                        .map(|(name, ps)| {
                            let mut t = OffsetFetchResponseTopics::default();
                            t.name = TopicName(s(name));
                            t.partitions = ps
                                .into_iter()
                                .map(|(index, v)| {
                                    let mut p = OffsetFetchResponsePartitions::default();
                                    p.partition_index = index;
                                    let (o, e, m) = offset_fields(v);
                                    p.committed_offset = o;
                                    p.committed_leader_epoch = e;
                                    p.metadata = Some(s(m));
                                    p
                                })
                                .collect();
                            t
                        })
                        .collect();
                }
            }
            rg.group_id = g.group_id;
            resp.groups.push(rg);
        }
        return resp;
    }
    let asked: Asked = req
        .topics
        .map(|ts| asked_partitions(ts.into_iter().map(|t| (t.name, t.partition_indexes))));
    match committed_partitions(ctx, &req.group_id.0, asked.clone()) {
        Ok(topics) => {
            resp.topics = topics
                .into_iter()
                .map(|(name, ps)| {
                    let mut t = OffsetFetchResponseTopic::default();
                    t.name = TopicName(s(name));
                    t.partitions = ps
                        .into_iter()
                        .map(|(index, v)| {
                            let mut p = OffsetFetchResponsePartition::default();
                            p.partition_index = index;
                            let (o, e, m) = offset_fields(v);
                            p.committed_offset = o;
                            if version >= 5 {
                                p.committed_leader_epoch = e;
                            }
                            p.metadata = Some(s(m));
                            p
                        })
                        .collect();
                    t
                })
                .collect();
        }
        Err(e) if version >= 2 => resp.error_code = e.code(),
        Err(e) => {
            // v1 has no top-level error: every asked partition carries it.
            for (name, index) in asked.unwrap_or_default() {
                let mut p = OffsetFetchResponsePartition::default();
                p.partition_index = index;
                p.committed_offset = -1;
                p.metadata = Some(s(""));
                p.error_code = e.code();
                match resp.topics.iter_mut().find(|t| t.name.0.as_str() == name) {
                    Some(t) => t.partitions.push(p),
                    None => {
                        let mut t = OffsetFetchResponseTopic::default();
                        t.name = TopicName(s(name));
                        t.partitions.push(p);
                        resp.topics.push(t);
                    }
                }
            }
        }
    }
    resp
}

/// `(topic, partition)` pairs of an OffsetFetch's topics (either request layout).
fn asked_partitions(topics: impl Iterator<Item = (TopicName, Vec<i32>)>) -> Vec<(String, i32)> {
    topics
        .flat_map(|(name, partitions)| {
            let name = name.0.to_string();
            partitions.into_iter().map(move |p| (name.clone(), p))
        })
        .collect()
}

/// `(offset, leader epoch, metadata)`; -1/-1/"" when nothing is committed.
fn offset_fields(v: Option<OffsetValue>) -> (i64, i32, String) {
    match v {
        Some(v) => (v.offset, v.leader_epoch, v.metadata),
        None => (-1, -1, String::new()),
    }
}
