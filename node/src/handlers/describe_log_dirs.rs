//! DescribeLogDirs: the node's data directory, with the size of every partition replica this
//! shard (broker) holds in it and the file system's total and usable bytes (v4).

use crate::handlers::authorized::on_cluster;
use crate::handlers::groups::Client;
use crate::security::acl::Operation;
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // DESCRIBE on the cluster, as in Kafka.
    if !on_cluster(ctx, client, Operation::Describe) {
        let mut resp = DescribeLogDirsResponse::default();
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    // Null: every partition; otherwise the partitions listed.
    let wanted: Option<BTreeMap<String, Vec<i32>>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
            .collect()
    });
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    ctx.with_replicas(|replicas| {
        for part in replicas {
            let (topic, index) = (&part.topic, &part.index);
            let listed = wanted
                .as_ref()
                .is_none_or(|w| w.get(topic).is_some_and(|ps| ps.contains(index)));
            if !listed {
                continue;
            }
            let mut p = DescribeLogDirsPartition::default();
            p.partition_index = *index;
            p.partition_size = part.log.size_bytes() as i64;
            // Kafka: how far a replica's log end is behind its high watermark (0 once caught up).
            p.offset_lag = (part.high_watermark().0 - part.log.log_end_offset().0).max(0);
            p.is_future_key = false;
            by_topic.entry(topic.clone()).or_default().push(p);
        }
    });
    let mut result = DescribeLogDirsResult::default();
    let dir = std::path::absolute(&ctx.config().log_dir).unwrap_or(ctx.config().log_dir.clone());
    result.log_dir = StrBytes::from_string(dir.display().to_string());
    match iouring_log::disk_space(&dir) {
        Ok((total, usable)) => {
            result.total_bytes = total as i64;
            result.usable_bytes = usable as i64;
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "statvfs of the data directory failed");
            result.error_code = ResponseError::KafkaStorageError.code();
        }
    }
    result.topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            let mut t = DescribeLogDirsTopic::default();
            t.name = TopicName(StrBytes::from_string(name));
            t.partitions = partitions;
            t
        })
        .collect();
    let mut resp = DescribeLogDirsResponse::default();
    resp.results.push(result);
    resp
}
