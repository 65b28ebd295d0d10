//! ListOffsets: earliest (-2), latest (-1) and by timestamp, from the logs this shard owns.

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

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = topic.name.clone();
        for p in topic.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.timestamp = -1;
            pr.offset = -1;
            pr.leader_epoch = -1;
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
                        LATEST => pr.offset = part.high_watermark().0,
                        EARLIEST => pr.offset = part.log.log_start_offset().0,
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
