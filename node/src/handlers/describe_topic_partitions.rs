//! DescribeTopicPartitions (KIP-966): topics sorted by name with their partitions' leader,
//! replicas, ISR, eligible leader replicas and offline replicas, at most
//! `response_partition_limit` partitions an answer (capped at [`DESCRIBE_TOPIC_PARTITIONS_MAX`],
//! Kafka's `max.request.partition.size.limit` default), continued from the cursor.

use std::rc::Rc;

use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::authorized::{self, authorized};
use crate::handlers::groups::Client;
use crate::handlers::metadata::partition_view;
use crate::limits::DESCRIBE_TOPIC_PARTITIONS_MAX;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::ShardCtx;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let snapshot = ctx.snapshot().clone();
    let describable =
        |n: &str| authorized(ctx, client, Operation::Describe, ResourceType::Topic, n);
    // Empty: every topic the client may describe.
    let mut names: Vec<String> = if req.topics.is_empty() {
        snapshot
            .topics
            .keys()
            .filter(|n| describable(n))
            .cloned()
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (first_topic, first_partition) = match &req.cursor {
        Some(c) => (Some(c.topic_name.0.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    let mut budget = req
        .response_partition_limit
        .clamp(1, DESCRIBE_TOPIC_PARTITIONS_MAX);
    let mut resp = DescribeTopicPartitionsResponse::default();
    for name in names {
        if first_topic.as_ref().is_some_and(|first| name < *first) {
            continue;
        }
        let start = if first_topic.as_ref() == Some(&name) {
            first_partition
        } else {
            0
        };
        if budget == 0 {
            resp.next_cursor = Some(cursor(&name, start));
            break;
        }
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.name = Some(TopicName(StrBytes::from_string(name.clone())));
        if !describable(&name) {
            t.error_code = ResponseError::TopicAuthorizationFailed.code();
            resp.topics.push(t);
            continue;
        }
        t.topic_authorized_operations =
            authorized::operations(ctx, client, ResourceType::Topic, &name);
        let Some(meta) = snapshot.topics.get(&name) else {
            t.error_code = ResponseError::UnknownTopicOrPartition.code();
            resp.topics.push(t);
            continue;
        };
        t.topic_id = meta.id;
        t.is_internal = crate::metadata::is_internal(&name);
        for (i, p) in meta.partitions.iter().enumerate().skip(start as usize) {
            if budget == 0 {
                resp.next_cursor = Some(cursor(&name, i as i32));
                break;
            }
            budget -= 1;
            let view = partition_view(ctx, p);
            let mut dp = DescribeTopicPartitionsResponsePartition::default();
            dp.partition_index = i as i32;
            dp.leader_epoch = p.leader_epoch.0;
            match view.leader {
                Some(leader) => dp.leader_id = leader,
                None => {
                    dp.leader_id = kafka_protocol::messages::BrokerId(-1);
                    dp.error_code = ResponseError::LeaderNotAvailable.code();
                }
            }
            dp.replica_nodes = view.replicas;
            dp.isr_nodes = view.isr;
            dp.eligible_leader_replicas = Some(view.elr);
            dp.last_known_elr = Some(Vec::new());
            dp.offline_replicas = view.offline;
            t.partitions.push(dp);
        }
        resp.topics.push(t);
        if resp.next_cursor.is_some() {
            break;
        }
    }
    resp
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(StrBytes::from_string(topic.to_owned()));
    c.partition_index = partition;
    c
}
