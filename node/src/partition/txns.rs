//! The partition side of transactions in the broker: the transactions open on this partition,
//! kept by the pure [`transactions::PartitionTxns`] from the batches the log holds (a leader's appends, a
//! follower's fetched batches, the replay after a snapshot at open or truncation); the last
//! stable offset `read_committed` consumers read below; the aborted transactions written to
//! the log's `.txnindex` as their ABORT markers are recorded. The markers themselves are
//! appended by the leader for WriteTxnMarkers in `append.rs`.
//!
//! Contract: every batch recorded here is in the log, in offset order; nothing else changes
//! the state. A marker is checked (coordinator and producer epochs) and appended under the
//! partition's append lock, like a produce.

use iouring_log::{AbortedTxnEntry, BatchHeader, ControlRecord, Offset};
use kafka_protocol::ResponseError;
use transactions::{AbortedTxn, Marker, MarkerRefused, ProducerId, TxnBatch, TxnVersion};

use super::Partition;
use crate::error::Refused;

/// Whether a transactional batch may start a transaction on a partition without the
/// coordinator's confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnStart {
    /// Only once the coordinator confirmed the partition in the producer's transaction (a
    /// client's produce with `transaction.partition.verification.enable`).
    Verified,
    /// As it comes (the broker's own writes; verification turned off).
    Unchecked,
}

/// One marker of a WriteTxnMarkers request, as the partition leader appends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// Its transaction's version (WriteTxnMarkers v2, KIP-1228; version 0 below): at 2 the
    /// epoch check is strict.
    pub version: TxnVersion,
}

/// One producer as DescribeProducers shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerDescription {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_start_offset: i64,
}

/// What the transaction state makes of a batch the log holds; `None` for a batch outside
/// transactions (or a control record that is no marker).
pub fn txn_batch(h: &BatchHeader, control: Option<ControlRecord>) -> Option<TxnBatch> {
    let producer = ProducerId(h.producer_id);
    let marker = |marker, coordinator_epoch| TxnBatch::Marker {
        producer,
        epoch: h.producer_epoch,
        offset: h.base_offset,
        marker,
        coordinator_epoch,
    };
    match control {
        Some(ControlRecord::Abort { coordinator_epoch }) => {
            Some(marker(Marker::Abort, coordinator_epoch))
        }
        Some(ControlRecord::Commit { coordinator_epoch }) => {
            Some(marker(Marker::Commit, coordinator_epoch))
        }
        Some(ControlRecord::Other { .. }) => None,
        None if h.is_transactional() && h.producer_id >= 0 => Some(TxnBatch::Data {
            producer,
            epoch: h.producer_epoch,
            base: h.base_offset,
            last: h.last_offset(),
        }),
        None => None,
    }
}

/// The `.txnindex` entry of an aborted transaction.
pub fn index_entry(a: AbortedTxn) -> AbortedTxnEntry {
    AbortedTxnEntry {
        producer_id: a.producer.0,
        first_offset: a.first_offset,
        last_offset: a.last_offset,
        last_stable_offset: a.last_stable_offset,
    }
}

/// Kafka's answer to a marker or transactional batch the state refuses.
pub fn marker_refused(e: MarkerRefused) -> Refused {
    let error = match e {
        MarkerRefused::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        MarkerRefused::StaleEpoch { .. } => ResponseError::InvalidProducerEpoch,
    };
    Refused::new(error, e.to_string())
}

impl Partition {
    /// Records a batch the log now holds; the aborted transaction an ABORT marker closed, for
    /// the log's `.txnindex`.
    pub(super) fn record_txn(
        &self,
        h: &BatchHeader,
        control: Option<ControlRecord>,
    ) -> Option<AbortedTxnEntry> {
        let batch = txn_batch(h, control)?;
        if let TxnBatch::Marker { producer, .. } = batch {
            // The transaction the verification was for is over.
            self.verified.borrow_mut().remove(&producer.0);
        }
        self.txn_changes.set(self.txn_changes.get() + 1);
        self.txns.borrow_mut().record(batch).map(index_entry)
    }

    /// Kafka's last stable offset: the first offset of the earliest transaction still open
    /// (or closed by a marker the high watermark has not passed), capped by the high
    /// watermark. `read_committed` consumers read below it.
    pub fn last_stable_offset(&self) -> Offset {
        let hw = self.high_watermark();
        let mut txns = self.txns.borrow_mut();
        txns.on_high_watermark(hw);
        let lso = txns.last_stable_offset();
        self.appending_txn.get().map_or(lso, |at| lso.min(at))
    }

    /// Holds the last stable offset at the log end while transactional batches are appended
    /// and recorded: the returned guard lets it go (the append lock must be held).
    pub(super) fn appending_transactional(&self) -> AppendingTxn<'_> {
        self.appending_txn.set(Some(self.log.log_end_offset()));
        AppendingTxn(self)
    }

    /// The aborted transactions a `read_committed` fetch of `[from, upto)` carries.
    pub fn aborted_transactions(&self, from: Offset, upto: Offset) -> Vec<AbortedTxnEntry> {
        self.log.aborted_txns(from, upto)
    }

    /// Producers with a transaction open here and its first offset, oldest first
    /// (DescribeProducers, `kafka-transactions find-hanging`).
    pub fn open_transactions(&self) -> Vec<(i64, Offset)> {
        self.txns
            .borrow()
            .open_transactions()
            .map(|(p, first)| (p.0, first))
            .collect()
    }

    /// DescribeProducers: every producer this partition remembers — idempotent ones and those
    /// with transaction state — with its epoch, last sequence and timestamp (-1 when not
    /// known), the coordinator epoch of its last marker (-1: none) and the first offset of its
    /// open transaction (-1: none), by producer id.
    pub fn describe_producers(&self) -> Vec<ProducerDescription> {
        let mut out: std::collections::BTreeMap<i64, ProducerDescription> = self
            .producers
            .borrow()
            .summaries()
            .into_iter()
            .map(|s| {
                let d = ProducerDescription {
                    producer_id: s.producer_id,
                    epoch: s.epoch,
                    last_sequence: s.last_sequence,
                    last_timestamp: s.last_timestamp,
                    coordinator_epoch: -1,
                    current_txn_start_offset: -1,
                };
                (s.producer_id, d)
            })
            .collect();
        for (producer, epoch, coordinator_epoch, open) in self.txns.borrow().producers() {
            let d = out.entry(producer.0).or_insert(ProducerDescription {
                producer_id: producer.0,
                epoch,
                last_sequence: -1,
                last_timestamp: -1,
                coordinator_epoch: -1,
                current_txn_start_offset: -1,
            });
            d.epoch = d.epoch.max(epoch);
            d.coordinator_epoch = coordinator_epoch;
            d.current_txn_start_offset = open.map_or(-1, |o| o.0);
        }
        out.into_values().collect()
    }

    /// Whether `producer_id` has a transaction open here.
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.txns.borrow().is_open(ProducerId(producer_id))
    }

    /// Whether a client's transactional batch must be verified with the coordinator before it
    /// is appended (KIP-890 part 1): it would start a transaction here, and the coordinator has
    /// not confirmed this partition in the producer's transaction at this epoch.
    pub fn needs_verification(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && !self.has_open_transaction_at(h.producer_id, h.producer_epoch)
            && self.verified.borrow().get(&h.producer_id) != Some(&h.producer_epoch)
    }

    /// Whether `producer_id` has a transaction open here at `epoch` (a batch at a newer epoch
    /// starts a new transaction, `transactions::PartitionTxns::is_open_at`).
    fn has_open_transaction_at(&self, producer_id: i64, epoch: i16) -> bool {
        self.txns
            .borrow()
            .is_open_at(ProducerId(producer_id), epoch)
    }

    /// The coordinator confirmed this partition in `producer_id`'s transaction at `epoch`.
    pub fn set_verified(&self, producer_id: i64, epoch: i16) {
        self.verified.borrow_mut().insert(producer_id, epoch);
    }

    /// Checks a transactional batch before it is appended: a producer epoch older than one a
    /// marker fenced is INVALID_PRODUCER_EPOCH; under [`TxnStart::Verified`] a batch that
    /// would start a transaction here needs the coordinator's confirmation (a marker may have
    /// ended the transaction since it was given): INVALID_TXN_STATE.
    pub(super) fn check_transactional(
        &self,
        h: &BatchHeader,
        start: TxnStart,
    ) -> Result<(), Refused> {
        self.txns
            .borrow()
            .check_data(ProducerId(h.producer_id), h.producer_epoch)
            .map_err(marker_refused)?;
        if start == TxnStart::Verified && self.needs_verification(h) {
            return Err(Refused::new(
                ResponseError::InvalidTxnState,
                format!(
                    "{}-{}: producer {} epoch {} has no transaction here the coordinator confirmed",
                    self.topic, self.index, h.producer_id, h.producer_epoch
                ),
            ));
        }
        Ok(())
    }
}

/// See [`Partition::appending_transactional`].
pub(super) struct AppendingTxn<'a>(&'a Partition);

impl Drop for AppendingTxn<'_> {
    fn drop(&mut self) {
        self.0.appending_txn.set(None);
    }
}
