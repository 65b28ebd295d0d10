//! OffsetCommit and OffsetFetch.

use std::rc::Rc;

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::ResponseError;

use crate::group_coordinator::membership::Caller;
use crate::group_coordinator::records::OffsetValue;
use crate::shard::{now_ms, ShardCtx};

use super::{code, s, Client};
use crate::handlers::authorized::authorized;
use crate::security::acl::{Operation, ResourceType};

pub async fn offset_commit(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let now = now_ms();
    // READ on the group, and READ on each topic (Kafka's rules); what is not allowed is not
    // committed.
    let group_ok = authorized(
        ctx,
        client,
        Operation::Read,
        ResourceType::Group,
        &req.group_id.0,
    );
    let mut asked: Vec<(TopicName, Vec<i32>, bool)> = Vec::new();
    let mut offsets = Vec::new();
    for t in &req.topics {
        let mut ps = Vec::new();
        let topic_ok =
            group_ok && authorized(ctx, client, Operation::Read, ResourceType::Topic, &t.name.0);
        for p in &t.partitions {
            ps.push(p.partition_index);
            if !topic_ok {
                continue;
            }
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
        asked.push((t.name.clone(), ps, topic_ok));
    }
    let committed = offsets.len();
    let results = if !group_ok {
        Ok(Vec::new())
    } else {
        ctx.groups()
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
            .await
    };
    let mut results = match results {
        Ok(r) => r.into_iter(),
        Err(e) => vec![Err(e); committed].into_iter(),
    };
    let mut resp = OffsetCommitResponse::default();
    for (name, ps, topic_ok) in asked {
        let mut t = OffsetCommitResponseTopic::default();
        t.name = name;
        for index in ps {
            let mut p = OffsetCommitResponsePartition::default();
            p.partition_index = index;
            p.error_code = if !group_ok {
                ResponseError::GroupAuthorizationFailed.code()
            } else if !topic_ok {
                ResponseError::TopicAuthorizationFailed.code()
            } else {
                code(
                    results
                        .next()
                        .unwrap_or(Err(ResponseError::UnknownServerError)),
                )
            };
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
    let found = ctx.groups().fetch_offsets(&**ctx, group, asked)?;
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
    client: &Client,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    // DESCRIBE on the group; topics the client may not describe are left out.
    let committed_partitions = |group: &str, asked: Asked| {
        if !authorized(ctx, client, Operation::Describe, ResourceType::Group, group) {
            return Err(ResponseError::GroupAuthorizationFailed);
        }
        let mut found = committed_partitions(ctx, group, asked)?;
        found.retain(|(t, _)| authorized(ctx, client, Operation::Describe, ResourceType::Topic, t));
        Ok(found)
    };
    // v7+: offsets pending in a transaction are UNSTABLE_OFFSET_COMMIT (KIP-447), retried.
    let require_stable = version >= 7 && req.require_stable;
    let unstable = |group: &str, name: &str, index: i32| {
        require_stable
            && ctx
                .groups()
                .has_pending_offset(group, &(name.to_owned(), index))
    };
    let mut resp = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let asked: Asked = g
                .topics
                .map(|ts| asked_partitions(ts.into_iter().map(|t| (t.name, t.partition_indexes))));
            let mut rg = OffsetFetchResponseGroup::default();
            // v9: a consumer-protocol member says who it is (KIP-848)
            let member =
                ctx.groups()
                    .check_fetch(&g.group_id.0, g.member_id.as_deref(), g.member_epoch);
            match member.and_then(|()| committed_partitions(&g.group_id.0, asked)) {
                Err(e) => rg.error_code = e.code(),
                Ok(topics) => {
                    rg.topics = topics
                        .into_iter()
                        .map(|(name, ps)| {
                            let mut t = OffsetFetchResponseTopics::default();
                            t.name = TopicName(s(name.clone()));
                            t.partitions = ps
                                .into_iter()
                                .map(|(index, v)| {
                                    let mut p = OffsetFetchResponsePartitions::default();
                                    p.partition_index = index;
                                    let unstable = unstable(&g.group_id.0, &name, index);
                                    if unstable {
                                        p.error_code = ResponseError::UnstableOffsetCommit.code();
                                    }
                                    let (o, e, m) = offset_fields(v.filter(|_| !unstable));
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
    match committed_partitions(&req.group_id.0, asked.clone()) {
        Ok(topics) => {
            resp.topics = topics
                .into_iter()
                .map(|(name, ps)| {
                    let mut t = OffsetFetchResponseTopic::default();
                    t.name = TopicName(s(name.clone()));
                    t.partitions = ps
                        .into_iter()
                        .map(|(index, v)| {
                            let mut p = OffsetFetchResponsePartition::default();
                            p.partition_index = index;
                            let unstable = unstable(&req.group_id.0, &name, index);
                            if unstable {
                                p.error_code = ResponseError::UnstableOffsetCommit.code();
                            }
                            let (o, e, m) = offset_fields(v.filter(|_| !unstable));
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
                        t.name = TopicName(s(name.clone()));
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
