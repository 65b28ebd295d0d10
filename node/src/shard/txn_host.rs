//! The shard as the transaction coordinator's host: its settings, metadata and
//! `__transaction_state` partitions, and WriteTxnMarkers sent to partition leaders over the
//! inter-broker listener (one connection per shard kept between calls, shared with the
//! produce path's verification calls, `txn_verify.rs`).

use std::rc::Rc;
use std::sync::Arc;

use futures_util::future::LocalBoxFuture;
use kafka_client::async_glommio::Connection;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::write_txn_markers_response::WriteTxnMarkersResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::ShardCtx;
use crate::config::TxnConfig;
use crate::ids::NodeId;
use crate::limits::TXN_MARKER_CALL_TIMEOUT;
use crate::metadata::{Slot, Snapshot, TRANSACTION_STATE_TOPIC};
use crate::partition::Partition;
use crate::stop::StopSignal;
use crate::txn_coordinator::{MarkerAnswers, MarkerRequest, TxnCoordinator, TxnHost};

impl TxnHost for ShardCtx {
    fn txn_node(&self) -> NodeId {
        self.config.node_id
    }

    fn txn_shard(&self) -> usize {
        self.shard
    }

    fn txn_settings(&self) -> &TxnConfig {
        &self.config.transactions
    }

    fn txn_snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    fn state_partition(&self, p: i32) -> Option<Rc<Partition>> {
        self.writable_partition(TRANSACTION_STATE_TOPIC, p).ok()
    }

    fn new_producer_id(&self) -> i64 {
        self.next_producer_id()
    }

    fn txn_coordinator(&self) -> &TxnCoordinator {
        &self.txns
    }

    fn txn_stop(&self) -> &StopSignal {
        &self.stop
    }

    fn write_markers(
        &self,
        leader: Slot,
        marker: MarkerRequest,
    ) -> LocalBoxFuture<'_, MarkerAnswers> {
        Box::pin(async move {
            let call = self.call_write_markers(leader, &marker);
            let expired = async {
                glommio::timer::sleep(TXN_MARKER_CALL_TIMEOUT).await;
                Err(format!(
                    "{leader:?} did not answer within {TXN_MARKER_CALL_TIMEOUT:?}"
                ))
            };
            futures_lite::future::or(call, expired).await
        })
    }
}

impl ShardCtx {
    /// Where shard `slot` listens for other brokers: this node's own inter-broker listener,
    /// or the registered endpoint of another node.
    fn inter_broker_addr(&self, slot: Slot) -> Option<String> {
        if slot.node == self.config.node_id {
            let l = self.config.inter_broker_listener();
            return Some(format!(
                "{}:{}",
                l.advertised_host,
                l.advertised_port as usize + slot.shard
            ));
        }
        self.peer_addr(slot)
    }

    /// One request to shard `slot`'s inter-broker listener on a connection kept between calls
    /// (one idle connection per shard; a call that finds none in the pool opens one). A
    /// connection that failed is dropped.
    pub(super) async fn inter_broker_call<Req: Encodable, Resp: Decodable>(
        &self,
        slot: Slot,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, String> {
        let pooled = self.inter_broker_connections.borrow_mut().remove(&slot);
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let addr = self
                    .inter_broker_addr(slot)
                    .ok_or_else(|| format!("node {} is not live", slot.node))?;
                let client = &self.config.security.inter_broker_client;
                Connection::connect(&addr, "ringlog-txn", client)
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        let resp = conn
            .call(api, version, request)
            .await
            .map_err(|e| e.to_string())?;
        self.inter_broker_connections
            .borrow_mut()
            .insert(slot, conn);
        Ok(resp)
    }

    async fn call_write_markers(&self, leader: Slot, marker: &MarkerRequest) -> MarkerAnswers {
        let mut by_topic: Vec<WritableTxnMarkerTopic> = Vec::new();
        for (topic, p) in &marker.partitions {
            match by_topic.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partition_indexes.push(*p),
                None => by_topic.push(
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partition_indexes(vec![*p]),
                ),
            }
        }
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(marker.producer_id))
                .with_producer_epoch(marker.producer_epoch)
                .with_transaction_result(marker.commit)
                .with_topics(by_topic)
                .with_coordinator_epoch(marker.coordinator_epoch)
                .with_transaction_version(marker.version.level() as i8)]);
        // Version 2 (KIP-1228): the partition checks a version 2 transaction's marker strictly.
        let resp: WriteTxnMarkersResponse = self
            .inter_broker_call(leader, ApiKey::WriteTxnMarkers, 2, &request)
            .await?;
        let mut answers = Vec::new();
        for m in resp.markers {
            for t in m.topics {
                for p in t.partitions {
                    let error = ResponseError::try_from_code(p.error_code);
                    answers.push(((t.name.0.to_string(), p.partition_index), error));
                }
            }
        }
        Ok(answers)
    }
}
