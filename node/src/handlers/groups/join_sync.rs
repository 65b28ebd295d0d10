//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

use std::rc::Rc;

use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;

use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::group_coordinator::membership::{Caller, JoinRequest, JoinResult};
use crate::handlers::authorized::authorized;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::{now_ms, ShardCtx};

use super::{code, s, Client};

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
    // Membership needs READ on the group (Kafka's rule), as do SyncGroup, Heartbeat and
    // LeaveGroup below.
    let r = if group_readable(ctx, client, &req.group_id.0) {
        ctx.groups()
            .join(&**ctx, &req.group_id.0, join, now_ms())
            .await
    } else {
        JoinResult::error(ResponseError::GroupAuthorizationFailed, join.member_id)
    };
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

pub async fn sync(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let assignments = req
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let result = if !group_readable(ctx, client, &req.group_id.0) {
        Err(ResponseError::GroupAuthorizationFailed)
    } else {
        ctx.groups()
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
            .await
    };
    let mut resp = SyncGroupResponse::default();
    match result {
        Ok(assignment) => {
            resp.assignment = assignment;
            if version >= 5 {
                // a consumer group (a classic member of a migrating group) has no protocol of
                // its own: the member's is echoed, as Kafka does
                let (protocol_type, protocol) = ctx.groups().protocol(&req.group_id.0);
                let or_asked = |v: Option<String>, asked: Option<StrBytes>| {
                    v.map(s).or(asked).unwrap_or_default()
                };
                resp.protocol_type = Some(or_asked(protocol_type, req.protocol_type));
                resp.protocol_name = Some(or_asked(protocol, req.protocol_name));
            }
        }
        Err(e) => resp.error_code = e.code(),
    }
    resp
}

pub fn heartbeat(ctx: &Rc<ShardCtx>, client: &Client, req: HeartbeatRequest) -> HeartbeatResponse {
    let mut resp = HeartbeatResponse::default();
    let who = Caller {
        member_id: &req.member_id,
        instance_id: req.group_instance_id.as_deref(),
        generation: req.generation_id,
    };
    resp.error_code = if group_readable(ctx, client, &req.group_id.0) {
        code(
            ctx.groups()
                .heartbeat(&**ctx, &req.group_id.0, who, now_ms()),
        )
    } else {
        ResponseError::GroupAuthorizationFailed.code()
    };
    resp
}

pub async fn leave(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
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
    let left = if group_readable(ctx, client, &req.group_id.0) {
        ctx.groups()
            .leave(&**ctx, &req.group_id.0, &members, now_ms())
            .await
    } else {
        Err(ResponseError::GroupAuthorizationFailed)
    };
    match left {
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

fn group_readable(ctx: &ShardCtx, client: &Client, group: &str) -> bool {
    authorized(ctx, client, Operation::Read, ResourceType::Group, group)
}
