//! The partition side of transactions: which producers have a transaction open on this
//! partition and from which offset, the last stable offset (LSO), and the aborted transactions
//! a `read_committed` fetch must be told about (Kafka's `ProducerStateManager` transaction
//! bookkeeping and its `.txnindex` entries).
//!
//! Rules (Kafka's):
//! - A transactional batch of a producer with no open transaction here opens one at its base
//!   offset; later batches of the same transaction extend it.
//! - A control batch (COMMIT or ABORT marker) at offset `m` closes the producer's open
//!   transaction, if any. A marker from an older coordinator epoch than one already seen for
//!   the producer is refused (TRANSACTION_COORDINATOR_FENCED), as is one of an older producer
//!   epoch (INVALID_PRODUCER_EPOCH); a newer producer epoch is accepted (the coordinator bumps
//!   it when it fences or times out a transaction). A marker of a transaction version 2
//!   transaction (KIP-1228: WriteTxnMarkers v2 says so) must be above the epoch of the open
//!   transaction's records — it is the stale marker of the transaction before otherwise — and
//!   at least the producer's epoch with nothing open (its own marker sent again).
//! - An ABORT that closed a transaction `[first, m]` yields an aborted entry
//!   `(producer id, first, m, last stable offset)` — the `.txnindex` record, whose last
//!   stable offset is the first offset of the next transaction still open, else `m + 1`.
//! - Closed transactions stay *unreplicated* until the high watermark passes their marker: the
//!   LSO is the lowest first offset of open and unreplicated transactions, capped by the high
//!   watermark. `read_committed` consumers read below it.
//! - The state is rebuilt from the log's batches in offset order (after a restart, a
//!   truncation, or on a follower), so it depends only on the log.

use std::collections::{BTreeMap, HashMap};

use iouring_log::Offset;

use crate::TxnVersion;

/// A Kafka producer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId(pub i64);

/// What a control batch's record says (Kafka's `ControlRecordType`: ABORT = 0, COMMIT = 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

/// One transactional batch or marker, as the log holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnBatch {
    /// Records of a transaction: `base..=last`.
    Data {
        producer: ProducerId,
        epoch: i16,
        base: Offset,
        last: Offset,
    },
    /// A COMMIT or ABORT control batch at `offset`, written for `coordinator_epoch`.
    Marker {
        producer: ProducerId,
        epoch: i16,
        offset: Offset,
        marker: Marker,
        coordinator_epoch: i32,
    },
}

/// An aborted transaction, as Kafka's `.txnindex` entry holds it and a `read_committed` fetch
/// answers it (`aborted_transactions`: producer id and first offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer: ProducerId,
    pub first_offset: Offset,
    /// The ABORT marker's offset.
    pub last_offset: Offset,
    /// The last stable offset once this transaction was closed.
    pub last_stable_offset: Offset,
}

/// Why a marker (or a transactional batch) is refused before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MarkerRefused {
    /// Kafka's TRANSACTION_COORDINATOR_FENCED.
    #[error("coordinator epoch {got} is older than {seen}, already seen for producer {producer}")]
    CoordinatorFenced { producer: i64, seen: i32, got: i32 },
    /// Kafka's INVALID_PRODUCER_EPOCH.
    #[error("producer epoch {got} is older than {current} for producer {producer}")]
    StaleEpoch {
        producer: i64,
        current: i16,
        got: i16,
    },
}

/// A transaction open on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open {
    first: Offset,
    last: Offset,
}

/// What this partition remembers of one transactional producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProducerTxn {
    epoch: i16,
    coordinator_epoch: i32,
    open: Option<Open>,
}

/// A closed transaction whose marker the high watermark has not passed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unreplicated {
    first: Offset,
    marker: Offset,
}

/// One partition's transaction state. See the module doc.
#[derive(Debug, Default, Clone)]
pub struct PartitionTxns {
    producers: HashMap<ProducerId, ProducerTxn>,
    /// Open transactions by first offset (each producer has at most one).
    open_by_first: BTreeMap<Offset, ProducerId>,
    /// Closed, marker not yet below the high watermark, by marker offset.
    unreplicated: BTreeMap<Offset, Unreplicated>,
    high_watermark: Offset,
}

impl PartitionTxns {
    /// Checks a marker before it is written (the leader, on WriteTxnMarkers).
    pub fn check_marker(
        &self,
        producer: ProducerId,
        epoch: i16,
        coordinator_epoch: i32,
        version: TxnVersion,
    ) -> Result<(), MarkerRefused> {
        let Some(p) = self.producers.get(&producer) else {
            return Ok(());
        };
        if coordinator_epoch < p.coordinator_epoch {
            return Err(MarkerRefused::CoordinatorFenced {
                producer: producer.0,
                seen: p.coordinator_epoch,
                got: coordinator_epoch,
            });
        }
        let stale = if version.bumps_epoch() {
            // KIP-1228: the transaction's records are at the epoch before its markers', so a
            // marker at the epoch of the open transaction's records is the previous
            // transaction's, arriving late — a request held in a cut link and delivered once
            // it is back — and must not end this one. At that epoch with nothing open it is
            // its own marker sent again (a coordinator retrying, or its successor resending
            // what it found prepared): written again, a no-op (KAFKA-19999).
            epoch < p.epoch || (epoch == p.epoch && p.open.is_some())
        } else {
            epoch < p.epoch
        };
        if stale {
            return Err(MarkerRefused::StaleEpoch {
                producer: producer.0,
                current: p.epoch,
                got: epoch,
            });
        }
        Ok(())
    }

    /// Checks a transactional batch of `producer` at `epoch` before it is appended: an epoch
    /// older than one seen here (the coordinator fenced it with a marker at a later one) is
    /// refused (INVALID_PRODUCER_EPOCH).
    pub fn check_data(&self, producer: ProducerId, epoch: i16) -> Result<(), MarkerRefused> {
        match self.producers.get(&producer) {
            Some(p) if epoch < p.epoch => Err(MarkerRefused::StaleEpoch {
                producer: producer.0,
                current: p.epoch,
                got: epoch,
            }),
            _ => Ok(()),
        }
    }

    /// Whether `producer` has a transaction open here (KIP-890 part 1: a transactional
    /// produce to a partition is verified with the coordinator only when none is open).
    pub fn is_open(&self, producer: ProducerId) -> bool {
        self.producers
            .get(&producer)
            .is_some_and(|p| p.open.is_some())
    }

    /// Whether `producer` has a transaction open here that its batches at `epoch` belong to:
    /// one opened at that epoch. With transaction version 2 every transaction has its own
    /// epoch, so a batch at a newer one starts a new transaction — verified with the
    /// coordinator, which confirms it only once the open one's marker is written here — and
    /// never joins the open one (KIP-890 part 2: a transaction's records never leak into the
    /// one before).
    pub fn is_open_at(&self, producer: ProducerId, epoch: i16) -> bool {
        self.producers
            .get(&producer)
            .is_some_and(|p| p.open.is_some() && p.epoch == epoch)
    }

    /// Records a batch the log holds (appended, fetched by a follower, or replayed on load),
    /// in offset order. Returns the aborted transaction an ABORT marker closed, which the
    /// caller writes to the `.txnindex` of the segment holding the marker.
    pub fn record(&mut self, batch: TxnBatch) -> Option<AbortedTxn> {
        match batch {
            TxnBatch::Data {
                producer,
                epoch,
                base,
                last,
            } => {
                let p = self.producers.entry(producer).or_insert(ProducerTxn {
                    epoch,
                    coordinator_epoch: -1,
                    open: None,
                });
                p.epoch = p.epoch.max(epoch);
                match &mut p.open {
                    Some(open) => open.last = open.last.max(last),
                    None => {
                        p.open = Some(Open { first: base, last });
                        self.open_by_first.insert(base, producer);
                    }
                }
                None
            }
            TxnBatch::Marker {
                producer,
                epoch,
                offset,
                marker,
                coordinator_epoch,
            } => {
                let p = self.producers.entry(producer).or_insert(ProducerTxn {
                    epoch,
                    coordinator_epoch,
                    open: None,
                });
                p.epoch = p.epoch.max(epoch);
                p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
                let open = p.open.take()?;
                self.open_by_first.remove(&open.first);
                if offset >= self.high_watermark {
                    self.unreplicated.insert(
                        offset,
                        Unreplicated {
                            first: open.first,
                            marker: offset,
                        },
                    );
                }
                (marker == Marker::Abort).then(|| AbortedTxn {
                    producer,
                    first_offset: open.first,
                    last_offset: offset,
                    // Kafka's: the first offset of the next transaction still open, else
                    // the offset after the marker.
                    last_stable_offset: self
                        .open_by_first
                        .keys()
                        .next()
                        .copied()
                        .unwrap_or(offset.next()),
                })
            }
        }
    }

    /// The high watermark moved: transactions whose markers are now below it are stable.
    pub fn on_high_watermark(&mut self, hw: Offset) {
        self.high_watermark = self.high_watermark.max(hw);
        let still = self.unreplicated.split_off(&self.high_watermark);
        self.unreplicated = still;
    }

    /// The lowest first offset of a transaction open, or closed with its marker not yet below
    /// the high watermark.
    fn first_unstable(&self) -> Option<Offset> {
        let open = self.open_by_first.keys().next().copied();
        let unreplicated = self.unreplicated.values().map(|u| u.first).min();
        match (open, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Kafka's last stable offset: `read_committed` consumers read below it.
    pub fn last_stable_offset(&self) -> Offset {
        self.first_unstable()
            .map_or(self.high_watermark, |f| f.min(self.high_watermark))
    }

    /// The first offset of every open transaction with its producer (DescribeProducers'
    /// `current_txn_start_offset`, `kafka-transactions find-hanging`).
    pub fn open_transactions(&self) -> impl Iterator<Item = (ProducerId, Offset)> + '_ {
        self.open_by_first.iter().map(|(&first, &p)| (p, first))
    }

    /// Every producer known here: its epoch, the coordinator epoch of its last marker (-1:
    /// none) and the first offset of its open transaction.
    pub fn producers(&self) -> impl Iterator<Item = (ProducerId, i16, i32, Option<Offset>)> + '_ {
        self.producers
            .iter()
            .map(|(&p, t)| (p, t.epoch, t.coordinator_epoch, t.open.map(|o| o.first)))
    }

    /// Forgets producers with nothing open (the producer state's expiry decides when).
    pub fn forget(&mut self, producer: ProducerId) {
        if let Some(p) = self.producers.get(&producer) {
            if p.open.is_none() {
                self.producers.remove(&producer);
            }
        }
    }
}

/// What a producer state snapshot keeps of one producer (or of one closed transaction whose
/// marker the high watermark had not passed), so that the state is rebuilt from the snapshot
/// and the batches after it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotEntry {
    Producer {
        producer: ProducerId,
        epoch: i16,
        coordinator_epoch: i32,
        /// The open transaction's first and last offsets.
        open: Option<(Offset, Offset)>,
    },
    Unreplicated {
        first: Offset,
        marker: Offset,
    },
}

impl PartitionTxns {
    /// The state as snapshot entries.
    pub fn to_snapshot(&self) -> Vec<SnapshotEntry> {
        let mut out: Vec<SnapshotEntry> = self
            .producers
            .iter()
            .map(|(&producer, p)| SnapshotEntry::Producer {
                producer,
                epoch: p.epoch,
                coordinator_epoch: p.coordinator_epoch,
                open: p.open.map(|o| (o.first, o.last)),
            })
            .collect();
        out.extend(
            self.unreplicated
                .values()
                .map(|u| SnapshotEntry::Unreplicated {
                    first: u.first,
                    marker: u.marker,
                }),
        );
        out
    }

    /// The state [`PartitionTxns::to_snapshot`] saved, as of a log whose end is at or past
    /// everything the entries name (the caller replays the batches after the snapshot).
    pub fn from_snapshot(entries: &[SnapshotEntry]) -> PartitionTxns {
        let mut t = PartitionTxns::default();
        for e in entries {
            match *e {
                SnapshotEntry::Producer {
                    producer,
                    epoch,
                    coordinator_epoch,
                    open,
                } => {
                    let open = open.map(|(first, last)| Open { first, last });
                    if let Some(o) = open {
                        t.open_by_first.insert(o.first, producer);
                    }
                    t.producers.insert(
                        producer,
                        ProducerTxn {
                            epoch,
                            coordinator_epoch,
                            open,
                        },
                    );
                }
                SnapshotEntry::Unreplicated { first, marker } => {
                    t.unreplicated
                        .insert(marker, Unreplicated { first, marker });
                }
            }
        }
        t
    }

    /// Whether anything transactional is known here (a snapshot without it may be used as of
    /// any log end).
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.unreplicated.is_empty()
    }
}

/// The aborted transactions a `read_committed` fetch of `[from, upto)` must carry: those whose
/// range overlaps it (Kafka's `collectAbortedTxns`), in first-offset order.
pub fn aborted_overlapping(aborted: &[AbortedTxn], from: Offset, upto: Offset) -> Vec<AbortedTxn> {
    let mut out: Vec<AbortedTxn> = aborted
        .iter()
        .filter(|a| a.last_offset >= from && a.first_offset < upto)
        .copied()
        .collect();
    out.sort_by_key(|a| a.first_offset);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: ProducerId = ProducerId(7);
    const Q: ProducerId = ProducerId(8);

    fn data(p: ProducerId, base: i64, last: i64) -> TxnBatch {
        TxnBatch::Data {
            producer: p,
            epoch: 0,
            base: Offset(base),
            last: Offset(last),
        }
    }

    fn marker(p: ProducerId, at: i64, marker: Marker) -> TxnBatch {
        TxnBatch::Marker {
            producer: p,
            epoch: 0,
            offset: Offset(at),
            marker,
            coordinator_epoch: 3,
        }
    }

    #[test]
    fn the_lso_stops_at_the_first_open_transaction_until_its_marker_is_replicated() {
        let mut t = PartitionTxns::default();
        t.on_high_watermark(Offset(0));
        t.record(data(P, 0, 4));
        t.record(data(Q, 5, 9));
        t.on_high_watermark(Offset(10));
        assert_eq!(t.last_stable_offset(), Offset(0));
        assert_eq!(t.record(marker(P, 10, Marker::Commit)), None);
        // P closed but its marker is not below the high watermark yet.
        assert_eq!(t.last_stable_offset(), Offset(0));
        t.on_high_watermark(Offset(11));
        assert_eq!(t.last_stable_offset(), Offset(5), "Q is still open");
        let aborted = t.record(marker(Q, 11, Marker::Abort)).unwrap();
        assert_eq!(
            aborted,
            AbortedTxn {
                producer: Q,
                first_offset: Offset(5),
                last_offset: Offset(11),
                last_stable_offset: Offset(12),
            }
        );
        t.on_high_watermark(Offset(12));
        assert_eq!(t.last_stable_offset(), Offset(12));
        assert!(!t.is_open(P) && !t.is_open(Q));
    }

    #[test]
    fn markers_of_older_coordinator_or_producer_epochs_are_refused() {
        let mut t = PartitionTxns::default();
        t.record(data(P, 0, 0));
        t.record(marker(P, 1, Marker::Commit));
        assert!(matches!(
            t.check_marker(P, 0, 2, TxnVersion::V0),
            Err(MarkerRefused::CoordinatorFenced { .. })
        ));
        t.record(TxnBatch::Data {
            producer: P,
            epoch: 2,
            base: Offset(2),
            last: Offset(2),
        });
        assert!(matches!(
            t.check_marker(P, 1, 3, TxnVersion::V0),
            Err(MarkerRefused::StaleEpoch { .. })
        ));
        assert_eq!(
            t.check_marker(P, 3, 3, TxnVersion::V0),
            Ok(()),
            "a bumped epoch is fine"
        );
        assert_eq!(
            t.check_marker(Q, 0, 0, TxnVersion::V0),
            Ok(()),
            "an unknown producer too"
        );
    }

    /// Transaction version 2 (KIP-1228): a transaction's records are at the epoch before its
    /// markers', so a marker at the open transaction's epoch is the previous transaction's,
    /// late — refused; at the producer's epoch with nothing open it is its own, sent again.
    #[test]
    fn a_late_marker_of_the_previous_transaction_does_not_end_the_next_at_version_2() {
        let mut t = PartitionTxns::default();
        // transaction 1 at epoch 0, its commit marker at the bumped epoch 1
        t.record(data(P, 0, 0));
        assert_eq!(t.check_marker(P, 1, 0, TxnVersion::V2), Ok(()));
        t.record(TxnBatch::Marker {
            producer: P,
            epoch: 1,
            offset: Offset(1),
            marker: Marker::Commit,
            coordinator_epoch: 0,
        });
        // its marker sent again (a retry, a new coordinator): nothing open, accepted
        assert_eq!(t.check_marker(P, 1, 0, TxnVersion::V2), Ok(()));
        // transaction 2 at epoch 1 opens; transaction 1's marker, late, is refused
        t.record(TxnBatch::Data {
            producer: P,
            epoch: 1,
            base: Offset(2),
            last: Offset(2),
        });
        assert_eq!(
            t.check_marker(P, 1, 0, TxnVersion::V2),
            Err(MarkerRefused::StaleEpoch {
                producer: P.0,
                current: 1,
                got: 1
            })
        );
        // at version 0/1 markers carry the records' epoch: the same marker is accepted
        assert_eq!(t.check_marker(P, 1, 0, TxnVersion::V0), Ok(()));
        // transaction 2's own marker (epoch 2)
        assert_eq!(t.check_marker(P, 2, 0, TxnVersion::V2), Ok(()));
    }

    #[test]
    fn a_snapshot_restores_open_and_unreplicated_transactions() {
        let mut t = PartitionTxns::default();
        t.record(data(P, 0, 4));
        t.record(data(Q, 5, 9));
        t.record(marker(Q, 10, Marker::Commit));
        t.on_high_watermark(Offset(10));
        let back = PartitionTxns::from_snapshot(&t.to_snapshot());
        assert_eq!(back.last_stable_offset(), Offset(0));
        assert!(back.is_open(P) && !back.is_open(Q));
        let mut back = back;
        back.record(marker(P, 11, Marker::Abort)).unwrap();
        back.on_high_watermark(Offset(11));
        // Q's marker passed, P's not yet: P's first offset holds the LSO.
        assert_eq!(back.last_stable_offset(), Offset(0));
        back.on_high_watermark(Offset(12));
        assert_eq!(back.last_stable_offset(), Offset(12));
        assert!(matches!(
            back.check_marker(Q, 0, 2, TxnVersion::V0),
            Err(MarkerRefused::CoordinatorFenced { .. })
        ));
    }

    #[test]
    fn a_marker_without_an_open_transaction_closes_nothing() {
        let mut t = PartitionTxns::default();
        assert_eq!(t.record(marker(P, 0, Marker::Abort)), None);
        t.on_high_watermark(Offset(1));
        assert_eq!(t.last_stable_offset(), Offset(1));
    }

    #[test]
    fn fetches_carry_the_aborted_transactions_overlapping_their_range() {
        let a = |first, last| AbortedTxn {
            producer: P,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(0),
        };
        let all = [a(20, 30), a(0, 10), a(40, 50)];
        assert_eq!(
            aborted_overlapping(&all, Offset(10), Offset(21)),
            vec![a(0, 10), a(20, 30)]
        );
        assert_eq!(aborted_overlapping(&all, Offset(31), Offset(40)), vec![]);
    }
}
