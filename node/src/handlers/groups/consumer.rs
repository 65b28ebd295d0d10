//! ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), served only when
//! `group.coordinator.rebalance.protocols` lists `consumer`.

use std::rc::Rc;

use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, ConsumerGroupDescribeResponse, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    self as heartbeat, ConsumerGroupHeartbeatResponse,
};
use kafka_protocol::messages::GroupId;
use kafka_protocol::ResponseError;

use crate::group_coordinator::consumer::{Assignment, Heartbeat, TopicIndex};
use crate::group_coordinator::Host;
use crate::handlers::authorized::authorized;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::{now_ms, ShardCtx};

use super::{s, Client};

/// Kafka's member ids: a random UUID in its URL-safe base64 form (22 characters).
fn new_member_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

fn refused(error: ResponseError, message: String) -> ConsumerGroupHeartbeatResponse {
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.error_code = error.code();
    r.error_message = (!message.is_empty()).then(|| s(message));
    r
}

pub async fn heartbeat(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    if !Host::settings(&**ctx).consumer_protocol {
        return refused(
            ResponseError::UnsupportedVersion,
            "The consumer group protocol is not enabled (group.coordinator.rebalance.protocols)."
                .into(),
        );
    }
    let group = req.group_id.0.to_string();
    if group.is_empty() {
        return refused(
            ResponseError::InvalidRequest,
            "GroupId can't be empty.".into(),
        );
    }
    if !authorized(ctx, client, Operation::Read, ResourceType::Group, &group) {
        return refused(ResponseError::GroupAuthorizationFailed, String::new());
    }
    let names: Option<Vec<String>> = req
        .subscribed_topic_names
        .map(|ts| ts.into_iter().map(|t| t.0.to_string()).collect());
    if let Some(names) = &names {
        let denied: Vec<&str> = names
            .iter()
            .filter(|t| !authorized(ctx, client, Operation::Describe, ResourceType::Topic, t))
            .map(String::as_str)
            .collect();
        if !denied.is_empty() {
            return refused(
                ResponseError::TopicAuthorizationFailed,
                format!("Unauthorized topics: {}.", denied.join(", ")),
            );
        }
    }
    let mut member_id = req.member_id.to_string();
    if member_id.is_empty() && req.member_epoch == 0 {
        if version >= 1 {
            // v1: the consumer makes its own id (KIP-1082)
            return refused(
                ResponseError::InvalidRequest,
                "MemberId can't be empty.".into(),
            );
        }
        member_id = new_member_id();
    }
    let hb = Heartbeat {
        member_id,
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|i| i.to_string()),
        rack_id: req.rack_id.map(|r| r.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: names,
        subscribed_topic_regex: req.subscribed_topic_regex.map(|r| r.to_string()),
        server_assignor: req.server_assignor.map(|a| a.to_string()),
        owned: req.topic_partitions.map(|tps| {
            let mut a = Assignment::new();
            for tp in tps {
                a.entry(tp.topic_id).or_default().extend(tp.partitions);
            }
            a
        }),
        client_id: client.id.clone(),
        client_host: client.host.clone(),
    };
    let answer = ctx
        .groups()
        .consumer_heartbeat(&**ctx, &group, hb, now_ms())
        .await;
    match answer {
        Err(e) => refused(e.error, e.message),
        Ok(a) => {
            let mut r = ConsumerGroupHeartbeatResponse::default();
            r.member_id = Some(s(a.member_id));
            r.member_epoch = a.member_epoch;
            r.heartbeat_interval_ms = a.heartbeat_interval_ms;
            r.assignment = a.assignment.map(|a| {
                let mut out = heartbeat::Assignment::default();
                out.topic_partitions = a
                    .into_iter()
                    .map(|(id, ps)| {
                        let mut tp = heartbeat::TopicPartitions::default();
                        tp.topic_id = id;
                        tp.partitions = ps.into_iter().collect();
                        tp
                    })
                    .collect();
                out
            });
            r.throttle_time_ms = client.quota.pending_throttle() as i32;
            r
        }
    }
}

fn described(a: &Assignment, topics: &TopicIndex) -> describe::Assignment {
    let mut out = describe::Assignment::default();
    out.topic_partitions = a
        .iter()
        .map(|(id, ps)| {
            let mut tp = describe::TopicPartitions::default();
            tp.topic_id = *id;
            // a deleted topic keeps its id, without a name
            tp.topic_name = topics
                .by_id
                .get(id)
                .map(|t| s(t.0.clone()))
                .unwrap_or_default()
                .into();
            tp.partitions = ps.iter().copied().collect();
            tp
        })
        .collect();
    out
}

pub fn describe(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let mut resp = ConsumerGroupDescribeResponse::default();
    for GroupId(id) in req.group_ids {
        let mut g = DescribedGroup::default();
        g.group_id = GroupId(id.clone());
        g.authorized_operations = i32::MIN;
        if !Host::settings(&**ctx).consumer_protocol {
            g.error_code = ResponseError::UnsupportedVersion.code();
        } else if !authorized(ctx, client, Operation::Describe, ResourceType::Group, &id) {
            g.error_code = ResponseError::GroupAuthorizationFailed.code();
        } else {
            match ctx.groups().consumer_describe(&**ctx, &id) {
                Err(e) => {
                    g.error_code = e.error.code();
                    g.error_message = (!e.message.is_empty()).then(|| s(e.message));
                }
                Ok((c, snapshot, assignor)) => {
                    let topics = crate::group_coordinator::topic_index(&snapshot);
                    g.group_state = s(c.state().name());
                    g.group_epoch = c.epoch;
                    g.assignment_epoch = c.assignment_epoch;
                    g.assignor_name = s(assignor);
                    g.members = c
                        .members
                        .values()
                        .map(|m| {
                            let mut d = describe::Member::default();
                            d.member_id = s(m.id.clone());
                            d.instance_id = m.meta.instance_id.clone().map(s);
                            d.rack_id = m.meta.rack_id.clone().map(s);
                            d.member_epoch = m.current.member_epoch;
                            d.client_id = s(m.meta.client_id.clone());
                            d.client_host = s(m.meta.client_host.clone());
                            d.subscribed_topic_names = m
                                .meta
                                .subscribed_topic_names
                                .iter()
                                .map(|t| s(t.clone()).into())
                                .collect();
                            d.subscribed_topic_regex = m.meta.subscribed_topic_regex.clone().map(s);
                            d.assignment = described(&m.current.assigned, &topics);
                            d.target_assignment = described(
                                c.target.get(&m.id).unwrap_or(&Assignment::new()),
                                &topics,
                            );
                            if version >= 1 {
                                // 0: a classic member (a group migrating), 1: consumer protocol
                                d.member_type = if m.meta.classic.is_some() { 0 } else { 1 };
                            }
                            d
                        })
                        .collect();
                }
            }
        }
        resp.groups.push(g);
    }
    resp.throttle_time_ms = client.quota.pending_throttle() as i32;
    resp
}
