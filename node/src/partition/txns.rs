//! The partition side of transactions in the broker: the transactions open on this partition,
//! kept by the pure [`transactions::PartitionTxns`] from the batches the log holds (a leader's appends, a
//! follower's fetched batches, the replay after a snapshot at open or truncation); the last
//! stable offset `read_committed` consumers read below; the aborted transactions written to
//! the log's `.txnindex` as their ABORT markers are recorded; and the markers themselves,
//! appended by the leader for WriteTxnMarkers.
//!
//! Contract: every batch recorded here is in the log, in offset order; nothing else changes
//! the state. A marker is checked (coordinator and producer epochs) and appended under the
//! partition's append lock, like a produce.

use iouring_log::{AbortedTxnEntry, BatchHeader, ControlRecord, LeaderEpoch, Offset};
use kafka_protocol::ResponseError;
use transactions::{AbortedTxn, Marker, MarkerRefused, ProducerId, TxnBatch};

use super::append::{AckWait, Appended, Refused};
use super::Partition;

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
        txns.last_stable_offset()
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

    /// Checks a transactional batch before it is appended: a producer epoch older than one a
    /// marker fenced is INVALID_PRODUCER_EPOCH.
    pub(super) fn check_transactional(&self, h: &BatchHeader) -> Result<(), Refused> {
        self.txns
            .borrow()
            .check_data(ProducerId(h.producer_id), h.producer_epoch)
            .map_err(marker_refused)
    }

    /// Appends a COMMIT or ABORT marker for `producer_id` (WriteTxnMarkers on the leader),
    /// checked against the coordinator and producer epochs this partition has seen, and
    /// records it. The answer waits for the high watermark (Kafka appends markers with
    /// `acks=all`).
    pub async fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<Appended, Refused> {
        let _lock = self.lock_appends().await;
        self.txns
            .borrow()
            .check_marker(ProducerId(producer_id), producer_epoch, coordinator_epoch)
            .map_err(marker_refused)?;
        let bytes = iouring_log::encode_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            now_ms,
        );
        let info = self
            .log
            .append_as_leader(&bytes, leader_epoch, now_ms)
            .await
            .map_err(|e| self.append_refused(e))?;
        self.appended.notify_all();
        let mut header = BatchHeader::parse(&bytes).expect("a marker we encoded");
        header.base_offset = info.first_offset;
        let control = iouring_log::parse_control_record(&bytes).ok();
        if let Some(entry) = self.record_txn(&header, control) {
            self.log
                .append_aborted_txn(entry)
                .await
                .map_err(|e| Refused::new(ResponseError::KafkaStorageError, e.to_string()))?;
        }
        let wait = if info.flush_due {
            AckWait::Flushed
        } else {
            AckWait::Written
        };
        Ok(Appended {
            base_offset: info.first_offset,
            end_offset: info.last_offset.next(),
            wait,
            replicated: Some(leader_epoch),
            log_append_time: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use iouring_log::fault_injection::FaultyIo;
    use iouring_log::{LogConfig, ReadOptions};
    use replication::ReplicaId;

    use super::super::append::tests::{batch, open_partition, run, tmpdir, txn_batch};
    use super::super::replica::RoleContext;
    use super::*;

    const P: i64 = 7;
    const Q: i64 = 8;

    fn single(part: &Partition) {
        let cx = RoleContext {
            me: ReplicaId(1),
            now_ms: 0,
            replica_lag_max_ms: 10_000,
        };
        part.apply_state(None, cx);
    }

    async fn append(part: &Partition, bytes: &[u8]) -> Appended {
        let a = part.append(bytes).await.unwrap();
        part.wait_acknowledgeable(&a).await.unwrap();
        a
    }

    async fn marker(part: &Partition, pid: i64, commit: bool, coordinator_epoch: i32) -> Offset {
        let a = part
            .append_marker(pid, 0, commit, coordinator_epoch, LeaderEpoch(0), 0)
            .await
            .unwrap();
        part.wait_acknowledgeable(&a).await.unwrap();
        a.base_offset
    }

    /// Everything in `part`'s log from offset 0, as a follower's fetch would carry it.
    async fn log_bytes(part: &Partition) -> Vec<u8> {
        let opts = ReadOptions {
            max_bytes: 1 << 20,
            max_offset: None,
            min_one_batch: true,
        };
        let r = part.log.read(Offset(0), opts).await.unwrap();
        iouring_log::read_slices_to_vec(&r.slices).await.unwrap()
    }

    /// A leader's transactions: the LSO waits for the earliest open one, a commit and an abort
    /// close them, the abort is indexed; markers of an older coordinator are refused; the state
    /// rebuilt from the snapshot and the log is the same; a follower fed the leader's bytes
    /// ends with the same state.
    #[test]
    fn markers_close_transactions_move_the_lso_and_index_aborts() {
        run(LogConfig::default(), |_io, part| {
            Box::pin(async move {
                single(&part);
                // Offset 0 holds the harness's record.
                let p = append(&part, &txn_batch(P, 0, 0, 2)).await;
                let q = append(&part, &txn_batch(Q, 0, 0, 2)).await;
                append(&part, &batch(-1, 0, 1)).await;
                assert_eq!((p.base_offset, q.base_offset), (Offset(1), Offset(3)));
                assert_eq!(part.high_watermark(), Offset(6));
                assert_eq!(part.last_stable_offset(), Offset(1));
                assert!(part.has_open_transaction(P));

                assert_eq!(marker(&part, P, true, 1).await, Offset(6));
                assert_eq!(part.last_stable_offset(), Offset(3), "Q is still open");
                part.snapshot_producers(0, true).await.unwrap();
                assert_eq!(marker(&part, Q, false, 1).await, Offset(7));
                assert_eq!(part.last_stable_offset(), Offset(8));
                let aborted = vec![AbortedTxnEntry {
                    producer_id: Q,
                    first_offset: Offset(3),
                    last_offset: Offset(7),
                    last_stable_offset: Offset(8),
                }];
                assert_eq!(part.aborted_transactions(Offset(0), Offset(8)), aborted);
                assert_eq!(part.aborted_transactions(Offset(8), Offset(8)), vec![]);

                // A zombie coordinator's marker.
                let stale = part
                    .append_marker(Q, 0, true, 0, LeaderEpoch(0), 0)
                    .await
                    .unwrap_err();
                assert_eq!(stale.error, ResponseError::TransactionCoordinatorFenced);

                // Rebuilt from the snapshot (Q open at 7) and the marker after it.
                part.restore_producers().await.unwrap();
                assert_eq!(part.last_stable_offset(), Offset(8));
                assert_eq!(part.aborted_transactions(Offset(0), Offset(8)), aborted);
                assert!(part.open_transactions().is_empty());

                // A follower takes the same bytes and ends in the same state.
                let dir = tmpdir();
                let follower =
                    open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
                let bytes = log_bytes(&part).await;
                let end = follower.append_as_follower(&bytes, 0).await.unwrap();
                assert_eq!(end, Offset(8));
                assert_eq!(follower.aborted_transactions(Offset(0), Offset(8)), aborted);
                follower.log.close().await.unwrap();
                let files: Vec<_> = std::fs::read_dir(dir.path())
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".txnindex"))
                    .collect();
                assert_eq!(files, vec![format!("{:020}.txnindex", 0)]);
            })
        });
    }

    /// A transaction left open by a crash before its marker holds the LSO after the restart
    /// (the state is rebuilt from the log), and its batches of an older producer epoch are
    /// refused once a marker at a newer one fenced them.
    #[test]
    fn an_open_transaction_survives_a_restart_and_fences_older_epochs() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = tmpdir();
                let part = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
                single(&part);
                append(&part, &batch(-1, 0, 1)).await;
                append(&part, &txn_batch(P, 0, 0, 3)).await;
                part.log.close().await.unwrap();
                drop(part);
                let part = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
                single(&part);
                part.restore_producers().await.unwrap();
                assert_eq!(part.last_stable_offset(), Offset(1));
                assert_eq!(part.open_transactions(), vec![(P, Offset(1))]);
                // The coordinator aborts it at a bumped epoch (a fence or a timeout).
                let a = part
                    .append_marker(P, 1, false, 0, LeaderEpoch(0), 0)
                    .await
                    .unwrap();
                part.wait_acknowledgeable(&a).await.unwrap();
                assert_eq!(part.last_stable_offset(), Offset(5));
                let zombie = part.append(&txn_batch(P, 0, 3, 1)).await.unwrap_err();
                assert_eq!(zombie.error, ResponseError::InvalidProducerEpoch);
                part.log.close().await.unwrap();
            })
            .expect("executor (ulimit -l >= 512 KiB?)")
            .join()
            .unwrap();
    }
}
