//! FindCoordinator of a group (key type 0) or a transactional id (1), creating
//! `__consumer_offsets` or `__transaction_state` on first use as Kafka does.

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::group_coordinator::partition_for;
use crate::metadata::Command;
use crate::metadata::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
use crate::shard::ShardCtx;

use super::{s, Client};
use crate::handlers::authorized::authorized;
use crate::security::acl::{Operation, ResourceType};

/// What a coordinator's topic is created with.
struct InternalTopic {
    name: &'static str,
    partitions: i32,
    /// In a cluster; a single node's is 1.
    replication_factor: i32,
    configs: Vec<(&'static str, String)>,
}

/// `__consumer_offsets`: compacted, as Kafka's (the log cleaner keeps each key's latest
/// record, a group's offsets and metadata, and a load replays only those).
fn offsets_topic(ctx: &ShardCtx) -> InternalTopic {
    let g = &ctx.config().group;
    InternalTopic {
        name: OFFSETS_TOPIC,
        partitions: g.offsets_topic_partitions,
        replication_factor: g.offsets_topic_replication_factor,
        configs: vec![
            ("cleanup.policy", "compact".to_owned()),
            ("segment.bytes", g.offsets_topic_segment_bytes.to_string()),
        ],
    }
}

/// `__transaction_state`: compacted, `transaction.state.log.*` (its `min.insync.replicas`
/// capped by the replication factor it gets).
fn transaction_state_topic(ctx: &ShardCtx) -> InternalTopic {
    let t = &ctx.config().transactions;
    let rf = replication_factor(ctx, t.state_log_replication_factor);
    InternalTopic {
        name: TRANSACTION_STATE_TOPIC,
        partitions: t.state_log_partitions,
        replication_factor: t.state_log_replication_factor,
        configs: vec![
            ("cleanup.policy", "compact".to_owned()),
            ("segment.bytes", t.state_log_segment_bytes.to_string()),
            (
                "min.insync.replicas",
                t.state_log_min_isr.min(rf).to_string(),
            ),
        ],
    }
}

/// The replication factor a coordinator topic gets: `configured` in a cluster, 1 on a single
/// node.
fn replication_factor(ctx: &ShardCtx, configured: i32) -> i32 {
    match ctx.config().metadata {
        crate::config::MetadataConfig::Embedded => 1,
        crate::config::MetadataConfig::Etcd { .. } => configured,
    }
}

/// Creates the coordinator topic `topic` if it does not exist yet (as Kafka does on the first
/// FindCoordinator). Returns its partition count.
async fn internal_topic(ctx: &Rc<ShardCtx>, topic: InternalTopic) -> Result<i32, ResponseError> {
    let name = topic.name;
    if let Some(t) = ctx.snapshot().topics.get(name) {
        return Ok(t.partitions.len() as i32);
    }
    let configs = topic
        .configs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let partitions = topic.partitions;
    let replication_factor = replication_factor(ctx, topic.replication_factor);
    let created = ctx
        .control(|reply| Command::CreateTopic {
            name: name.to_owned(),
            partitions,
            replication_factor,
            configs,
            assignment: None,
            reply,
        })
        .await;
    match created {
        Ok(()) => tracing::info!(partitions, "created {name}"),
        Err(r) if r.error == ResponseError::TopicAlreadyExists => {}
        Err(r) => {
            tracing::error!(error = %r, "creating {name}");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
    }
    ctx.snapshot()
        .topics
        .get(name)
        .map(|t| t.partitions.len() as i32)
        .ok_or(ResponseError::CoordinatorNotAvailable)
}

/// `(broker id, host, port)` of the shard coordinating `key`, or the error.
async fn coordinator_of(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    key_type: i8,
    key: &str,
) -> Result<(BrokerId, String, i32), Refused> {
    let listener = client.listener;
    let (resource, kind, topic) = match key_type {
        0 => (ResourceType::Group, "group", offsets_topic(ctx)),
        1 => (
            ResourceType::TransactionalId,
            "transactional id",
            transaction_state_topic(ctx),
        ),
        other => {
            return Err(Refused::new(
                ResponseError::InvalidRequest,
                format!("coordinator key type {other} is not supported (share groups are not built; 0 = group, 1 = transaction)"),
            ))
        }
    };
    if key.is_empty() {
        let error = match key_type {
            0 => ResponseError::InvalidGroupId,
            _ => ResponseError::InvalidRequest,
        };
        return Err(Refused::new(error, format!("empty {kind}")));
    }
    if !authorized(ctx, client, Operation::Describe, resource, key) {
        let error = match key_type {
            0 => ResponseError::GroupAuthorizationFailed,
            _ => ResponseError::TransactionalIdAuthorizationFailed,
        };
        return Err(Refused::new(
            error,
            format!("{} may not describe {kind} {key}", client.principal),
        ));
    }
    let name = topic.name;
    let partitions = internal_topic(ctx, topic)
        .await
        .map_err(|e| Refused::new(e, format!("{name} is not available")))?;
    let p = partition_for(key, partitions);
    let meta = ctx.snapshot().partition(name, p).cloned();
    meta.and_then(|m| ctx.leader_endpoint(&m, listener))
        .ok_or(Refused::new(
            ResponseError::CoordinatorNotAvailable,
            "the coordinator's node is not live",
        ))
}

pub async fn find_coordinator(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let mut resp = FindCoordinatorResponse::default();
    let key_type = if version >= 1 { req.key_type } else { 0 };
    if version >= 4 {
        for key in req.coordinator_keys {
            let mut c = Coordinator::default();
            match coordinator_of(ctx, client, key_type, &key).await {
                Ok((id, host, port)) => {
                    c.node_id = id;
                    c.host = s(host);
                    c.port = port;
                }
                Err(refused) => {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = refused.error.code();
                    c.error_message = Some(s(refused.message));
                }
            }
            c.key = key;
            resp.coordinators.push(c);
        }
        return resp;
    }
    match coordinator_of(ctx, client, key_type, &req.key).await {
        Ok((id, host, port)) => {
            resp.node_id = id;
            resp.host = s(host);
            resp.port = port;
        }
        Err(refused) => {
            resp.error_code = refused.error.code();
            resp.node_id = BrokerId(-1);
            resp.port = -1;
            if version >= 1 {
                resp.error_message = Some(s(refused.message));
            }
        }
    }
    resp
}
