//! ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequest;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::GroupId;
use kafka_protocol::ResponseError;

use crate::group_coordinator::membership::GroupState;
use crate::shard::{now_ms, ShardCtx};

use super::{code, s, Client};
use crate::handlers::authorized::{authorized, on_cluster};
use crate::security::acl::{Operation, ResourceType};

pub fn list(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    // DESCRIBE on the cluster lists every group; otherwise those the client may describe.
    let all = on_cluster(ctx, client, Operation::Describe);
    let visible =
        |g: &str| all || authorized(ctx, client, Operation::Describe, ResourceType::Group, g);
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let mut resp = ListGroupsResponse::default();
    resp.groups = ctx
        .groups()
        .list()
        .into_iter()
        .filter(|g| visible(&g.id))
        .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.kind))
        .map(|listed| {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(s(listed.id));
            g.protocol_type = s(listed.protocol_type);
            if version >= 4 {
                g.group_state = s(listed.state);
            }
            if version >= 5 {
                g.group_type = s(listed.kind);
            }
            g
        })
        .collect();
    resp
}

pub fn describe(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    for id in req.groups {
        let mut g = DescribedGroup::default();
        if version >= 3 {
            g.authorized_operations =
                crate::handlers::authorized::report(req.include_authorized_operations, || {
                    crate::handlers::authorized::operations(ctx, client, ResourceType::Group, &id.0)
                });
        }
        let described = if authorized(ctx, client, Operation::Describe, ResourceType::Group, &id.0)
        {
            ctx.groups().describe(&**ctx, &id.0)
        } else {
            Err(ResponseError::GroupAuthorizationFailed)
        };
        match described {
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

pub async fn delete(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let mut r = DeletableGroupResult::default();
        r.error_code = if authorized(ctx, client, Operation::Delete, ResourceType::Group, &id.0) {
            code(ctx.groups().delete(&**ctx, &id.0, now_ms()).await)
        } else {
            ResponseError::GroupAuthorizationFailed.code()
        };
        r.group_id = id;
        resp.results.push(r);
    }
    resp
}

/// OffsetDelete: the group's committed offsets of the listed partitions are removed.
pub async fn offset_delete(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let mut resp = OffsetDeleteResponse::default();
    // DELETE on the group, READ on each topic (Kafka's rules).
    if !authorized(
        ctx,
        client,
        Operation::Delete,
        ResourceType::Group,
        &req.group_id.0,
    ) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return resp;
    }
    let readable = |t: &str| authorized(ctx, client, Operation::Read, ResourceType::Topic, t);
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| readable(&t.name.0))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let results = match ctx
        .groups()
        .delete_offsets(&**ctx, &req.group_id.0, partitions, now_ms())
        .await
    {
        Ok(results) => results,
        Err(e) => {
            resp.error_code = e.code();
            return resp;
        }
    };
    let mut results = results.into_iter();
    for t in req.topics {
        let mut tr = OffsetDeleteResponseTopic::default();
        tr.name = t.name.clone();
        let ok = readable(&t.name.0);
        for p in t.partitions {
            let mut pr = OffsetDeleteResponsePartition::default();
            pr.partition_index = p.partition_index;
            pr.error_code = if ok {
                code(results.next().unwrap_or(Ok(())))
            } else {
                ResponseError::TopicAuthorizationFailed.code()
            };
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}
