//! OffsetForLeaderEpoch: where a leader epoch ends in a partition's log (Kafka's
//! `endOffsetForEpoch`, see `iouring_log::leader_epoch_cache`), so a consumer can tell whether
//! the log it read was truncated (KIP-320) and a follower where to truncate (KIP-101) when the
//! Fetch response's `DivergingEpoch` is not available.

use crate::handlers::authorized::{authorized, on_cluster};
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;

use iouring_log::LeaderEpoch;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};

use crate::shard::ShardCtx;
use kafka_protocol::ResponseError;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut resp = OffsetForLeaderEpochResponse::default();
    // Followers (replica id >= 0) need CLUSTER_ACTION, clients DESCRIBE on each topic.
    let follower = req.replica_id.0 >= 0;
    let follower_allowed = !follower || on_cluster(ctx, client, Operation::ClusterAction);
    for topic in req.topics {
        let name = topic.topic.0.to_string();
        let allowed = follower_allowed
            && (follower
                || authorized(ctx, client, Operation::Describe, ResourceType::Topic, &name));
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = topic.topic.clone();
        for p in topic.partitions {
            let mut pr = EpochEndOffset::default();
            pr.partition = p.partition;
            pr.leader_epoch = -1;
            pr.end_offset = -1;
            let answer = match ctx.partition(&name, p.partition) {
                _ if !allowed => Err(ResponseError::TopicAuthorizationFailed),
                None => Err(ctx.not_served(&name, p.partition)),
                Some(part) => ctx
                    .check_current_epoch(&part, p.current_leader_epoch)
                    .map(|()| part.log.end_offset_for_epoch(LeaderEpoch(p.leader_epoch))),
            };
            match answer {
                Ok(Some((epoch, end))) => {
                    pr.leader_epoch = epoch.0;
                    pr.end_offset = end.0;
                }
                // Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET, with no error.
                Ok(None) => {}
                Err(e) => pr.error_code = e.code(),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}
