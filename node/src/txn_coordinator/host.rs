//! What the transaction coordinator uses of the shard it runs on — and nothing more: the
//! coordinator depends on this trait, the shard implements it (sending markers over its
//! inter-broker client included).

use std::rc::Rc;
use std::sync::Arc;

use futures_util::future::LocalBoxFuture;
use kafka_protocol::ResponseError;

use super::TxnCoordinator;
use crate::config::TxnConfig;
use crate::ids::NodeId;
use crate::metadata::{Slot, Snapshot};
use crate::partition::Partition;
use crate::stop::StopSignal;

/// One WriteTxnMarkers marker for partitions one leader shard leads.
#[derive(Debug, Clone)]
pub struct MarkerRequest {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// The transaction's version (WriteTxnMarkers v2's `TransactionVersion`, KIP-1228).
    pub version: transactions::TxnVersion,
    pub partitions: Vec<(String, i32)>,
}

/// Each partition's answer (`None`: written), or why the leader could not be asked.
pub type MarkerAnswers = Result<Vec<((String, i32), Option<ResponseError>)>, String>;

pub trait TxnHost {
    /// The node the shard runs on (`node.id`).
    fn txn_node(&self) -> NodeId;
    /// The shard's index on its node.
    fn txn_shard(&self) -> usize;
    /// The `transaction.*` settings.
    fn txn_settings(&self) -> &TxnConfig;
    /// The cluster metadata the shard last applied.
    fn txn_snapshot(&self) -> Arc<Snapshot>;
    /// Partition `p` of `__transaction_state`, if this shard leads it and may write to it now.
    fn state_partition(&self, p: i32) -> Option<Rc<Partition>>;
    /// A producer id never handed out before.
    fn new_producer_id(&self) -> i64;
    /// The coordinator of this shard.
    fn txn_coordinator(&self) -> &TxnCoordinator;
    /// The node stopping: marker retries give up.
    fn txn_stop(&self) -> &StopSignal;
    /// Sends `marker` to the shard `leader` (WriteTxnMarkers over the inter-broker listener).
    fn write_markers(
        &self,
        leader: Slot,
        marker: MarkerRequest,
    ) -> LocalBoxFuture<'_, MarkerAnswers>;
}
