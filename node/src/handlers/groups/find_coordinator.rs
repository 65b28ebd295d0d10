//! FindCoordinator, creating `__consumer_offsets` on first use as Kafka does.

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::group_coordinator::partition_for;
use crate::metadata::Command;
use crate::metadata::OFFSETS_TOPIC;
use crate::shard::ShardCtx;

use super::{s, Client};
use crate::handlers::authorized::authorized;
use crate::security::acl::{Operation, ResourceType};

/// Creates `__consumer_offsets` if it does not exist yet (as Kafka does on the first
/// FindCoordinator). Returns its partition count.
async fn offsets_topic(ctx: &Rc<ShardCtx>) -> Result<i32, ResponseError> {
    if let Some(t) = ctx.snapshot().topics.get(OFFSETS_TOPIC) {
        return Ok(t.partitions.len() as i32);
    }
    let g = &ctx.config().group;
    // Compacted, as Kafka's: the log cleaner keeps each key's latest record (a group's
    // offsets and metadata), and a load replays only those.
    let configs = [
        ("cleanup.policy", "compact".to_owned()),
        ("segment.bytes", g.offsets_topic_segment_bytes.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let partitions = g.offsets_topic_partitions;
    let replication_factor = match ctx.config().metadata {
        crate::config::MetadataConfig::Embedded => 1,
        crate::config::MetadataConfig::Etcd { .. } => g.offsets_topic_replication_factor,
    };
    let created = ctx
        .control(|reply| Command::CreateTopic {
            name: OFFSETS_TOPIC.to_owned(),
            partitions,
            replication_factor,
            configs,
            assignment: None,
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
    ctx.snapshot()
        .topics
        .get(OFFSETS_TOPIC)
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
    if key_type != 0 {
        return Err(Refused::new(
            ResponseError::InvalidRequest,
            format!("coordinator key type {key_type} is not supported (transactions and share groups are not built; 0 = group)"),
        ));
    }
    if key.is_empty() {
        return Err(Refused::new(
            ResponseError::InvalidGroupId,
            "empty group id",
        ));
    }
    if !authorized(ctx, client, Operation::Describe, ResourceType::Group, key) {
        return Err(Refused::new(
            ResponseError::GroupAuthorizationFailed,
            format!("{} may not describe group {key}", client.principal),
        ));
    }
    let partitions = offsets_topic(ctx)
        .await
        .map_err(|e| Refused::new(e, format!("{OFFSETS_TOPIC} is not available")))?;
    let p = partition_for(key, partitions);
    let meta = ctx.snapshot().partition(OFFSETS_TOPIC, p).cloned();
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
