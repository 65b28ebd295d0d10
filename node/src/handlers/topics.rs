//! CreateTopics, DeleteTopics, CreatePartitions: forwarded to the control plane, which
//! validates (Kafka's error codes) and persists; answered once every shard applied the change.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::messages::create_topics_request::CreateTopicsRequest;
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
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut resp = CreateTopicsResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let partitions = if t.num_partitions == -1 {
            ctx.config.num_partitions
        } else {
            t.num_partitions
        };
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            configs.insert(
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            );
        }
        // -1: the broker's default (Kafka's default.replication.factor, 1).
        let factor = if t.replication_factor == -1 {
            1
        } else {
            t.replication_factor
        };
        let live_nodes = ctx.snapshot.borrow().nodes.len().max(1);
        let result = if let Err(e) = check_replication_factor(i32::from(factor), live_nodes) {
            Err(Refused::new(
                ResponseError::InvalidReplicationFactor,
                e.to_string(),
            ))
        } else if !t.assignments.is_empty() {
            Err(Refused::new(
                ResponseError::InvalidRequest,
                "manual replica assignment is not supported",
            ))
        } else if req.validate_only {
            validate_topic_name(&name).and_then(|_| {
                crate::topic_config::validate(&configs)
                    .map_err(|e| Refused::new(ResponseError::InvalidConfig, e.to_string()))
            })
        } else {
            let n = name.clone();
            ctx.control(|reply| Command::CreateTopic {
                name: n,
                partitions,
                replication_factor: i32::from(factor),
                configs,
                reply,
            })
            .await
        };
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        if version >= 5 {
            r.num_partitions = partitions;
            r.replication_factor = factor;
        }
        if version >= 7 {
            if let Some(m) = ctx.snapshot.borrow().topics.get(&name) {
                r.topic_id = m.id;
            }
        }
        if let Err(Refused {
            error: e,
            message: msg,
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
    resp
}

pub async fn delete(
    ctx: &Rc<ShardCtx>,
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
        let result = ctx
            .control(|reply| Command::DeleteTopic { name: n, reply })
            .await;
        let mut r = DeletableTopicResult::default();
        r.name = Some(TopicName(StrBytes::from_string(name)));
        if let Err(Refused {
            error: e,
            message: msg,
        }) = result
        {
            r.error_code = e.code();
            if version >= 5 {
                r.error_message = Some(StrBytes::from_string(msg));
            }
        }
        resp.responses.push(r);
    }
    resp
}

pub async fn create_partitions(
    ctx: &Rc<ShardCtx>,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let result = if t.assignments.is_some() {
            Err(Refused::new(
                ResponseError::InvalidRequest,
                "manual replica assignment is not supported",
            ))
        } else if req.validate_only {
            Ok(())
        } else {
            let count = t.count;
            ctx.control(|reply| Command::CreatePartitions { name, count, reply })
                .await
        };
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        if let Err(Refused {
            error: e,
            message: msg,
        }) = result
        {
            r.error_code = e.code();
            r.error_message = Some(StrBytes::from_string(msg));
        }
        resp.results.push(r);
    }
    resp
}
