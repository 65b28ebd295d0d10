//! ListOffsets: earliest (-2), latest (-1), by timestamp, the record with the largest timestamp
//! (-3, v7+), earliest local (-4, v8+: the log start, every segment is local) and latest tiered
//! (-5, v9+: -1, nothing is tiered), from the logs this shard owns.

use crate::handlers::authorized::authorized;
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;

use iouring_log::TimestampMs;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    // v2+: READ_COMMITTED (1) asks for the last stable offset as the latest.
    let read_committed = version >= 2 && req.isolation_level == 1;
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let allowed = authorized(ctx, client, Operation::Describe, ResourceType::Topic, &name);
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = topic.name.clone();
        for p in topic.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.timestamp = -1;
            pr.offset = -1;
            pr.leader_epoch = -1;
            if !allowed {
                pr.error_code = ResponseError::TopicAuthorizationFailed.code();
                tr.partitions.push(pr);
                continue;
            }
            match ctx.partition(&name, p.partition_index) {
                None => {
                    let e = ctx.not_served(&name, p.partition_index);
                    pr.error_code = e.code();
                }
                Some(part) => {
                    if version >= 4 {
                        if let Err(e) = ctx.check_current_epoch(&part, p.current_leader_epoch) {
                            pr.error_code = e.code();
                            tr.partitions.push(pr);
                            continue;
                        }
                        pr.leader_epoch = part.log.latest_epoch().map_or(-1, |e| e.0);
                    }
                    match p.timestamp {
                        LATEST if read_committed => pr.offset = part.last_stable_offset().0,
                        LATEST => pr.offset = part.high_watermark().0,
                        EARLIEST => pr.offset = part.log.log_start_offset().0,
                        MAX_TIMESTAMP if version >= 7 => match max_timestamp(&part).await {
                            Ok(Some((offset, ts))) => {
                                pr.offset = offset;
                                pr.timestamp = ts;
                            }
                            Ok(None) => {}
                            Err(e) => {
                                tracing::error!(topic = %name, error = %e, "max timestamp lookup failed");
                                pr.error_code = ResponseError::KafkaStorageError.code();
                            }
                        },
                        EARLIEST_LOCAL if version >= 8 => {
                            pr.offset = part.log.log_start_offset().0;
                        }
                        // Nothing is tiered: Kafka answers -1 for a topic without remote storage.
                        LATEST_TIERED if version >= 9 => {}
                        ts if ts >= 0 => match part.log.offset_for_timestamp(TimestampMs(ts)).await
                        {
                            Ok(Some((offset, found))) => {
                                pr.offset = offset.0;
                                pr.timestamp = found.0;
                            }
                            Ok(None) => {}
                            Err(e) => {
                                tracing::error!(topic = %name, error = %e, "timestamp lookup failed");
                                pr.error_code = ResponseError::KafkaStorageError.code();
                            }
                        },
                        _ => pr.error_code = ResponseError::InvalidRequest.code(),
                    }
                }
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}

/// `(offset, timestamp)` of the first record holding the partition's largest timestamp, below
/// the high watermark (Kafka answers none when that record is not yet committed).
async fn max_timestamp(
    part: &crate::partition::Partition,
) -> Result<Option<(i64, i64)>, iouring_log::ReadError> {
    let Some((ts, last)) = part.log.max_timestamp_batch() else {
        return Ok(None);
    };
    let hw = part.high_watermark();
    if last >= hw {
        return Ok(None);
    }
    let opts = iouring_log::ReadOptions {
        max_bytes: 1,
        max_offset: Some(hw),
        min_one_batch: true,
    };
    let read = part.log.read(last, opts).await?;
    let mut bytes = bytes::Bytes::from(iouring_log::read_slices_to_vec(&read.slices).await?);
    let Ok(set) = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes) else {
        return Err(iouring_log::ReadError::Io(iouring_log::IoError::new(
            "decoding the batch holding the largest timestamp",
            part.log.dir(),
            std::io::Error::other(format!("batch ending at offset {} is undecodable", last.0)),
        )));
    };
    Ok(set
        .records
        .iter()
        .find(|r| r.timestamp == ts.0)
        .map(|r| (r.offset, r.timestamp))
        // A LogAppendTime batch stamps every record with its max timestamp: its first record.
        .or_else(|| set.records.first().map(|r| (r.offset, ts.0))))
}
