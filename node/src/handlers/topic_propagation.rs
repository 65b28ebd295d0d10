//! A cluster's CreateTopics and CreatePartitions answer once every node holding a new partition
//! serves it: until then a client told the partition's leader by the answering node (or by any
//! node that applied the change) would reach a leader that answers UNKNOWN_TOPIC_OR_PARTITION.
//! Kafka's brokers waited the same way for the topic's metadata to reach them before answering
//! CreateTopics (up to the request's `timeout_ms`).
//!
//! Contract: asks each replica's shard (the endpoint a client would use) for the topic's
//! Metadata over the inter-broker listener until it lists every partition, or until `timeout`
//! (connections and calls included: a paused node does not hold it longer); a node that cannot
//! be asked (not live, refuses the connection or the request) is not waited for. Never fails
//! the request: the change is committed already.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_client::async_glommio::Connection;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::limits::TOPIC_PROPAGATION_ASK_AGAIN;
use crate::metadata::controller::Reply;
use crate::metadata::Command;
use crate::metadata::Slot;
use crate::shard::ShardCtx;

/// Sends `make`'s change of `topic` to the control plane; once it is committed, waits for the
/// topic's partitions to be served everywhere (at most `timeout`).
pub async fn control_then_served(
    ctx: &ShardCtx,
    topic: &str,
    timeout: Duration,
    make: impl FnOnce(Reply) -> Command,
) -> Result<(), Refused> {
    let result = ctx.control(make).await;
    if result.is_ok() {
        await_served_everywhere(ctx, topic, timeout).await;
    }
    result
}

/// Waits until every other node's shard holding a replica of `topic` lists all the partitions
/// this node's snapshot has, for at most `timeout`.
async fn await_served_everywhere(ctx: &ShardCtx, topic: &str, timeout: Duration) {
    let (partitions, slots): (usize, BTreeSet<Slot>) = {
        let snapshot = ctx.snapshot();
        let Some(t) = snapshot.topics.get(topic) else {
            return;
        };
        let slots = t
            .partitions
            .iter()
            .flat_map(|p| {
                let led = p.leader.node().map(|node| Slot {
                    node,
                    shard: p.shard,
                });
                p.replicas.iter().copied().chain(led)
            })
            .filter(|s| s.node != ctx.config().node_id)
            .collect();
        (t.partitions.len(), slots)
    };
    let all = async {
        let waits = slots
            .into_iter()
            .map(|slot| await_slot(ctx, slot, topic, partitions));
        futures_util::future::join_all(waits).await;
        true
    };
    // A node that accepts but does not answer (paused) must not hold the request longer.
    let expired = async {
        glommio::timer::sleep(timeout).await;
        false
    };
    if !futures_lite::future::or(all, expired).await {
        tracing::debug!(
            topic,
            "a replica's node did not list the topic within the request's timeout"
        );
    }
}

/// Asks `slot` until it lists `partitions` partitions of `topic`, or cannot be asked.
async fn await_slot(ctx: &ShardCtx, slot: Slot, topic: &str, partitions: usize) {
    let Some(addr) = ctx.peer_addr(slot) else {
        return; // not live: nothing to wait for
    };
    let client = &ctx.config().security.inter_broker_client;
    let Ok(mut conn) = Connection::connect(&addr, "ringlog-topic-propagation", client).await else {
        return;
    };
    let mut req = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
    req.topics = Some(vec![t]);
    loop {
        let Ok(resp) = conn
            .call::<_, MetadataResponse>(ApiKey::Metadata, 9, &req)
            .await
        else {
            return;
        };
        let Some(t) = resp.topics.first() else {
            return;
        };
        match ResponseError::try_from_code(t.error_code) {
            None if t.partitions.len() >= partitions => return,
            None
            | Some(ResponseError::UnknownTopicOrPartition)
            | Some(ResponseError::LeaderNotAvailable) => {
                glommio::timer::sleep(TOPIC_PROPAGATION_ASK_AGAIN).await;
            }
            // Not ours to see (an ACL), or another refusal: cannot tell, do not wait.
            Some(_) => return,
        }
    }
}
