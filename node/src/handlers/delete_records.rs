//! DeleteRecords: moves a partition's log start offset (Kafka's low watermark) up to the
//! requested offset (-1: the high watermark). Offsets below it are then out of range for every
//! reader, segments wholly below it are deleted, and the new start is persisted before the
//! answer. Followers move theirs when their fetches carry the leader's log start offset
//! (they are not waited for: the answer is the leader's low watermark).

use crate::handlers::authorized::authorized;
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;

use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::ResponseError;

use iouring_log::Offset;

use crate::shard::{now_ms, ShardCtx};

/// DeleteRecords' "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut resp = DeleteRecordsResponse::default();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let allowed = authorized(ctx, client, Operation::Delete, ResourceType::Topic, &name);
        let mut tr = DeleteRecordsTopicResult::default();
        tr.name = topic.name.clone();
        for p in topic.partitions {
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            pr.low_watermark = -1;
            if !allowed {
                pr.error_code = ResponseError::TopicAuthorizationFailed.code();
                tr.partitions.push(pr);
                continue;
            }
            match delete_before(ctx, &name, p.partition_index, p.offset).await {
                Ok(start) => pr.low_watermark = start.0,
                Err(e) => pr.error_code = e.code(),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}

/// The partition's new log start offset, or the error Kafka gives.
async fn delete_before(
    ctx: &ShardCtx,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<Offset, ResponseError> {
    let part = ctx.writable_partition(topic, index).map_err(|r| r.error)?;
    let hw = part.high_watermark();
    let target = match offset {
        HIGH_WATERMARK => hw,
        o if o >= 0 && o <= hw.0 => Offset(o),
        _ => return Err(ResponseError::OffsetOutOfRange),
    };
    part.log
        .advance_log_start(target, hw, now_ms())
        .await
        .map_err(|e| {
            tracing::error!(topic, partition = index, error = %e, "moving the log start offset failed");
            ResponseError::KafkaStorageError
        })
}
