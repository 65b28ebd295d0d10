//! CreateTopics, DeleteTopics, CreatePartitions: forwarded to the control plane, which
//! validates (Kafka's error codes) and persists; answered once every shard applied the change,
//! and new partitions once every node holding one serves them (up to the request's timeout,
//! [`control_then_served`]).

use crate::handlers::authorized::{authorized, on_cluster};
use crate::handlers::groups::Client;
use crate::handlers::topic_propagation::control_then_served;
use crate::quotas::QuotaKey;
use crate::security::acl::{Operation, ResourceType};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::metadata::placement::check_replication_factor;
use crate::metadata::{validate_topic_name, Command};
use crate::shard::ShardCtx;

pub async fn create(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut resp = CreateTopicsResponse::default();
    let propagation = Duration::from_millis(req.timeout_ms.max(0) as u64);
    for t in req.topics {
        let name = t.name.0.to_string();
        let assignment = manual_assignment(&t);
        let manual = assignment.as_ref().ok().and_then(|a| a.as_ref());
        let partitions = match manual {
            Some(a) => a.len() as i32,
            None if t.num_partitions == -1 => ctx.config().num_partitions,
            None => t.num_partitions,
        };
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            configs.insert(
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            );
        }
        // -1: the broker's default.replication.factor.
        let factor = match manual {
            Some(a) => a.first().map_or(0, Vec::len) as i16,
            None if t.replication_factor == -1 => ctx.config().default_replication_factor,
            None => t.replication_factor,
        };
        let live_nodes = ctx.snapshot().nodes.len().max(1);
        // CREATE on the cluster or on the topic, as in Kafka.
        let may_create = on_cluster(ctx, client, Operation::Create)
            || authorized(ctx, client, Operation::Create, ResourceType::Topic, &name);
        let result = if !may_create {
            Err(not_authorized(client, "create", &name))
        } else if let Err(e) = &assignment {
            Err(e.clone())
        } else if let (None, Err(e)) = (
            manual,
            check_replication_factor(i32::from(factor), live_nodes),
        ) {
            Err(Refused::new(
                ResponseError::InvalidReplicationFactor,
                e.to_string(),
            ))
        } else if let Err(e) = mutation_quota(ctx, client, version >= 6) {
            Err(e)
        } else if req.validate_only {
            validate_topic_name(&name).and_then(|_| {
                crate::topic_config::validate(&configs)
                    .map_err(|e| Refused::new(ResponseError::InvalidConfig, e.to_string()))
            })
        } else {
            let n = name.clone();
            let assignment = manual.cloned();
            control_then_served(ctx, &name, propagation, |reply| Command::CreateTopic {
                name: n,
                partitions,
                replication_factor: i32::from(factor),
                configs,
                assignment,
                reply,
            })
            .await
            .inspect(|_| {
                ctx.charge_quota(client, QuotaKey::ControllerMutationRate, partitions as f64);
            })
        };
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        if version >= 5 {
            r.num_partitions = partitions;
            r.replication_factor = factor;
        }
        if version >= 7 {
            if let Some(m) = ctx.snapshot().topics.get(&name) {
                r.topic_id = m.id;
            }
        }
        if let Err(Refused {
            error: e,
            message: msg,
            ..
        }) = result
        {
            r.error_code = e.code();
            r.error_message = Some(StrBytes::from_string(msg));
            r.num_partitions = -1;
            r.replication_factor = -1;
            r.topic_id = Default::default();
        }
        resp.topics.push(r);
    }
    resp.throttle_time_ms = client.quota.pending_throttle() as i32;
    resp
}

pub async fn delete(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut resp = DeleteTopicsResponse::default();
    let mut names: Vec<String> = req.topic_names.iter().map(|n| n.0.to_string()).collect();
    names.extend(
        req.topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())),
    );
    for name in names {
        let n = name.clone();
        let partitions = ctx
            .snapshot()
            .topics
            .get(&name)
            .map_or(0, |t| t.partitions.len());
        let result = if !authorized(ctx, client, Operation::Delete, ResourceType::Topic, &name) {
            Err(not_authorized(client, "delete", &name))
        } else if let Err(e) = mutation_quota(ctx, client, version >= 5) {
            Err(e)
        } else {
            ctx.control(|reply| Command::DeleteTopic { name: n, reply })
                .await
                .inspect(|_| {
                    ctx.charge_quota(client, QuotaKey::ControllerMutationRate, partitions as f64);
                })
        };
        let mut r = DeletableTopicResult::default();
        r.name = Some(TopicName(StrBytes::from_string(name)));
        if let Err(Refused {
            error: e,
            message: msg,
            ..
        }) = result
        {
            r.error_code = e.code();
            if version >= 5 {
                r.error_message = Some(StrBytes::from_string(msg));
            }
        }
        resp.responses.push(r);
    }
    resp.throttle_time_ms = client.quota.pending_throttle() as i32;
    resp
}

pub async fn create_partitions(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: CreatePartitionsRequest,
    version: i16,
) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    let propagation = Duration::from_millis(req.timeout_ms.max(0) as u64);
    for t in req.topics {
        let name = t.name.0.to_string();
        let assignment: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|a| {
            a.iter()
                .map(|p| p.broker_ids.iter().map(|b| b.0).collect())
                .collect()
        });
        let added = ctx
            .snapshot()
            .topics
            .get(&name)
            .map_or(0, |m| (t.count as usize).saturating_sub(m.partitions.len()));
        let result = if !authorized(ctx, client, Operation::Alter, ResourceType::Topic, &name) {
            Err(not_authorized(client, "add partitions to", &name))
        } else if let Err(e) = mutation_quota(ctx, client, version >= 3) {
            Err(e)
        } else if req.validate_only {
            Ok(())
        } else {
            let count = t.count;
            let n = name.clone();
            control_then_served(ctx, &name, propagation, |reply| Command::CreatePartitions {
                name: n,
                count,
                assignment,
                reply,
            })
            .await
            .inspect(|_| {
                ctx.charge_quota(client, QuotaKey::ControllerMutationRate, added as f64);
            })
        };
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        if let Err(Refused {
            error: e,
            message: msg,
            ..
        }) = result
        {
            r.error_code = e.code();
            r.error_message = Some(StrBytes::from_string(msg));
        }
        resp.results.push(r);
    }
    resp.throttle_time_ms = client.quota.pending_throttle() as i32;
    resp
}

fn not_authorized(client: &Client, what: &str, topic: &str) -> Refused {
    Refused::new(
        ResponseError::TopicAuthorizationFailed,
        format!("{} may not {what} topic {topic}", client.principal),
    )
}

/// A CreateTopics topic's manual replica assignment, in partition order, by Kafka's rules:
/// with one, `num_partitions` and `replication_factor` must be -1 (INVALID_REQUEST) and the
/// partitions 0..n-1 each listed once (INVALID_REPLICA_ASSIGNMENT). The control plane checks
/// the replicas themselves (`placement::assigned_replicas`).
fn manual_assignment(t: &CreatableTopic) -> Result<Option<Vec<Vec<i32>>>, Refused> {
    if t.assignments.is_empty() {
        return Ok(None);
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err(Refused::new(
            ResponseError::InvalidRequest,
            "a manual replica assignment needs num_partitions and replication_factor -1",
        ));
    }
    let mut by_index: Vec<(i32, Vec<i32>)> = t
        .assignments
        .iter()
        .map(|a| {
            (
                a.partition_index,
                a.broker_ids.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    by_index.sort_by_key(|(i, _)| *i);
    for (expected, (index, _)) in by_index.iter().enumerate() {
        if *index != expected as i32 {
            return Err(Refused::new(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "the assignment must list partitions 0..{} once each; found partition {index} where {expected} belongs",
                    by_index.len()
                ),
            ));
        }
    }
    Ok(Some(by_index.into_iter().map(|(_, b)| b).collect()))
}

/// KIP-599: a client over its `controller_mutation_rate` (partitions created, added or deleted
/// per second) gets THROTTLING_QUOTA_EXCEEDED for further mutations where the request's version
/// knows the error (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+, Kafka's strict
/// mode); older versions are served and their answer throttled.
fn mutation_quota(ctx: &ShardCtx, client: &Client, strict: bool) -> Result<(), Refused> {
    if strict && ctx.charge_quota(client, QuotaKey::ControllerMutationRate, 0.0) > 0 {
        return Err(Refused::new(
            ResponseError::ThrottlingQuotaExceeded,
            "The throttling quota has been exceeded.",
        ));
    }
    Ok(())
}
