//! The transaction coordinator (Kafka's), on the shard leading each `__transaction_state`
//! partition: the coordinator of `transactional.id` `t` is the shard leading partition
//! `abs(javaHashCode(t)) % partitions`, as in Kafka.
//!
//! Owns: the transactional ids of the partitions this shard leads — their state machines, the
//! pure [`transactions::Txns`] — and the records that persist them. Every change is a transit
//! written to the partition (`acks=all`) before it takes effect ([`write`]); the markers of a
//! prepared transaction are sent to the partitions' leaders over the inter-broker listener
//! until each is written, then the completion is written (`markers.rs`); transactions open
//! longer than their timeout are aborted. A partition taken over is replayed into memory and
//! its prepared transactions' markers are sent again (`load.rs`). The coordinator epoch is the
//! partition's leader epoch: markers carry it, and a partition refuses those of an older one.
//!
//! Must not touch: partitions of other shards, or transactional ids another shard coordinates
//! (NOT_COORDINATOR). It uses its shard only through [`TxnHost`], and is told the time.

pub mod host;
mod load;
mod markers;
mod ops;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpoch;
use kafka_protocol::ResponseError;
use transactions::coordinator::TxnSettings;
use transactions::{records, Transit, TxnError, Txns};

pub use host::{MarkerAnswers, MarkerRequest, TxnHost};
pub use load::load_partition;
pub use markers::{abort_timed_out, expire_transactional_ids};
pub use ops::{
    add_offsets, add_partitions, check_partitions, end_txn, init_producer_id, txn_error,
    verify_partitions, TxnCheck, Verdicts,
};

use crate::limits::TXN_STATE_WRITE_TIMEOUT;
use crate::metadata::TRANSACTION_STATE_TOPIC;
use crate::partition::internal::append_keyed;

/// The coordinator state of one shard. See the module doc.
#[derive(Default)]
pub struct TxnCoordinator {
    partitions: RefCell<BTreeMap<i32, Owned>>,
    /// Partitions being replayed: their ids get COORDINATOR_LOAD_IN_PROGRESS.
    loading: RefCell<BTreeSet<i32>>,
    /// Notified whenever a written (or failed) transit settles: requests held while a
    /// transaction completes look again (`ops.rs`).
    settled: iouring_log::Notify,
}

/// A `__transaction_state` partition this shard leads, loaded.
struct Owned {
    txns: Txns,
    /// Its leader epoch when loaded.
    coordinator_epoch: i32,
}

impl TxnCoordinator {
    /// Runs `f` on partition `p`'s state if it is loaded at `coordinator_epoch`.
    fn with<T>(&self, p: i32, coordinator_epoch: i32, f: impl FnOnce(&mut Txns) -> T) -> Option<T> {
        let mut parts = self.partitions.borrow_mut();
        let owned = parts.get_mut(&p)?;
        (owned.coordinator_epoch == coordinator_epoch).then(|| f(&mut owned.txns))
    }

    /// The coordinator epoch partition `p` is loaded at, if it is.
    pub fn loaded_epoch(&self, p: i32) -> Option<i32> {
        self.partitions
            .borrow()
            .get(&p)
            .map(|o| o.coordinator_epoch)
    }

    /// Forgets partition `p` (this shard no longer leads it, or leads it in a new epoch and
    /// loads it again).
    pub fn unload_partition(&self, p: i32) {
        self.partitions.borrow_mut().remove(&p);
        self.loading.borrow_mut().remove(&p);
    }

    /// Every transactional id this shard coordinates, with its state (DescribeTransactions,
    /// ListTransactions).
    pub fn each<T>(
        &self,
        mut f: impl FnMut(&str, &transactions::TxnMetadata) -> Option<T>,
    ) -> Vec<T> {
        let parts = self.partitions.borrow();
        parts
            .values()
            .flat_map(|o| o.txns.iter())
            .filter_map(|(id, m)| f(id, m))
            .collect()
    }

    /// How many transactional ids this shard coordinates in each state (metrics), by Kafka's
    /// state name, states with none left out.
    pub fn count_by_state(&self) -> Vec<(&'static str, u64)> {
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for (_, m) in self
            .partitions
            .borrow()
            .values()
            .flat_map(|o| o.txns.iter())
        {
            *counts.entry(m.state.name()).or_default() += 1;
        }
        counts.into_iter().collect()
    }
}

/// DescribeTransactions of one id: its state, or TRANSACTIONAL_ID_NOT_FOUND (NOT_COORDINATOR,
/// COORDINATOR_LOAD_IN_PROGRESS as for the other requests).
pub fn describe(
    host: &dyn TxnHost,
    transactional_id: &str,
) -> Result<transactions::TxnMetadata, ResponseError> {
    let (p, epoch) = owner(host, transactional_id)?;
    host.txn_coordinator()
        .with(p, epoch, |t| t.get(transactional_id).cloned())
        .flatten()
        .ok_or(ResponseError::TransactionalIdNotFound)
}

/// The settings the state machines decide with.
fn settings(host: &dyn TxnHost) -> TxnSettings {
    TxnSettings {
        max_timeout_ms: host.txn_settings().max_timeout_ms,
        cluster_version: cluster_version(host),
    }
}

/// The cluster's `transaction.version`: finalized with UpdateFeatures, else this node's
/// (what ApiVersions finalizes, and what the coordinator decides and writes with).
pub fn cluster_version(host: &dyn TxnHost) -> transactions::TxnVersion {
    host.txn_snapshot()
        .transaction_version(host.txn_settings().version)
}

/// The partition of `transactional_id` and its coordinator epoch, if this shard coordinates
/// it: NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while its partition is replayed.
pub fn owner(host: &dyn TxnHost, transactional_id: &str) -> Result<(i32, i32), ResponseError> {
    let count = host
        .txn_snapshot()
        .topics
        .get(TRANSACTION_STATE_TOPIC)
        .map(|t| t.partitions.len() as i32)
        .filter(|n| *n > 0)
        .ok_or(ResponseError::NotCoordinator)?;
    let p = transactions::partition_for(transactional_id, count);
    let c = host.txn_coordinator();
    if let Some(epoch) = c.loaded_epoch(p) {
        // Only while it may write there: a node whose lease is in doubt (paused, cut off, or
        // back but not yet caught up with the metadata) may have lost the partition to another
        // coordinator, and its state may be stale — answering from it (a refusal that needs
        // no write, say) would be a zombie's answer. NOT_COORDINATOR: the client looks again.
        if host.state_partition(p).is_none() {
            return Err(ResponseError::NotCoordinator);
        }
        return Ok((p, epoch));
    }
    if c.loading.borrow().contains(&p) {
        return Err(ResponseError::CoordinatorLoadInProgress);
    }
    Err(ResponseError::NotCoordinator)
}

/// Writes `transit` to partition `p` and makes it the state, or drops it when the write fails
/// (Kafka's error mapping: the partition gone or led elsewhere is NOT_COORDINATOR, too few
/// replicas or a timeout COORDINATOR_NOT_AVAILABLE). A partition reloaded meanwhile is
/// NOT_COORDINATOR: its new state came from the log.
async fn write(
    host: &dyn TxnHost,
    p: i32,
    coordinator_epoch: i32,
    transit: &Transit,
    now: i64,
) -> Result<(), ResponseError> {
    let written = async {
        let part = host.state_partition(p).ok_or(ResponseError::NotCoordinator)?;
        let key = records::encode_key(&transit.transactional_id);
        // A removed id (`Dead`) is a tombstone, as in Kafka.
        let value = (transit.to.state != transactions::TxnState::Dead)
            .then(|| records::encode_value(&transit.to, cluster_version(host)).into());
        let records = vec![(key.into(), value)];
        let epoch = LeaderEpoch(coordinator_epoch);
        append_keyed(&part, epoch, records, now, TXN_STATE_WRITE_TIMEOUT)
            .await
            .map_err(|refused| {
                tracing::warn!(partition = p, transactional_id = %transit.transactional_id, error = %refused.message, "writing __transaction_state");
                match refused.error {
                    ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
                        ResponseError::NotCoordinator
                    }
                    ResponseError::NotEnoughReplicas
                    | ResponseError::NotEnoughReplicasAfterAppend
                    | ResponseError::RequestTimedOut
                    | ResponseError::UnknownTopicOrPartition => {
                        ResponseError::CoordinatorNotAvailable
                    }
                    _ => ResponseError::UnknownServerError,
                }
            })
    }
    .await;
    let c = host.txn_coordinator();
    let applied = c.with(p, coordinator_epoch, |txns| match written {
        Ok(()) => txns.complete(transit),
        Err(_) => txns.abandon(transit),
    });
    c.settled.notify_all();
    match applied {
        Some(()) => written,
        None => Err(ResponseError::NotCoordinator),
    }
}

/// Kafka's error for a state machine's refusal.
fn refusal(e: TxnError) -> ResponseError {
    match e {
        TxnError::InvalidRequest => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced { .. } => ResponseError::ProducerFenced,
        TxnError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        TxnError::TransactionAbortable => ResponseError::TransactionAbortable,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
    }
}
