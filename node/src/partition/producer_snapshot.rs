//! Kafka's producer state snapshots, in ringlog's own small file: the idempotent producer state
//! of a partition as of a log end offset, so that it survives restarts (a batch retried across a
//! broker crash must still be found a duplicate).
//!
//! `producer-state-snapshot` in the partition's folder is a checkpoint file (in the log's
//! checkpoint format; see below for how it is written): the first entry is the log end offset
//! `S` the state reflects, then one line per remembered batch (`ProducerStateMap::to_lines`)
//! and the transaction state's lines (`txn …`, [`txns_to_lines`]). On open the state is
//! loaded, batches at or past the (maybe shorter, after a crash) log end are dropped, and the
//! batch headers from `min(S, log end)` on are replayed from the log. Without a snapshot the
//! whole log is replayed, as it is when a snapshot with transaction state lies past the log end
//! (a marker it counted may be gone). The aborted transactions of the markers replayed are
//! written to the log's `.txnindex` again; the log's entries are synced before each snapshot.
//! Snapshots are written at most every [`PRODUCER_SNAPSHOT_INTERVAL_MS`] while the state
//! changes, and at shutdown.
//!
//! The periodic snapshots of a log the cleaner does not work on are not synced
//! ([`write_checkpoint_unsynced`]): a power loss that takes one back only means more batch
//! headers to replay, and each sync is a device cache flush that holds the disk's other writes
//! (the acknowledgements waiting on them) while the cache is written back. Snapshots at
//! shutdown, and every snapshot of a compacted log, are synced: the cleaner removes batches
//! below the last durable snapshot that the state would otherwise be rebuilt from.

use iouring_log::{
    parse_checkpoint, read_checkpoint_file, write_checkpoint, write_checkpoint_unsynced,
};
use iouring_log::{IoError, Offset, ReadError};

use transactions::{PartitionTxns, ProducerId, SnapshotEntry};

use super::producer_state::ProducerStateMap;
use super::txns::{index_entry, txn_batch};
use super::Partition;
use crate::limits::PRODUCER_SNAPSHOT_INTERVAL_MS;

pub const PRODUCER_SNAPSHOT_FILE: &str = "producer-state-snapshot";
/// First word of a snapshot line of the transaction state.
const TXN_LINE: &str = "txn ";

/// Restoring the producer state failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("replaying batch headers: {0}")]
    Replay(#[from] ReadError),
}

impl Partition {
    /// Loads the snapshot and replays the log after it. Call once, before the partition
    /// takes appends. A malformed snapshot is ignored (the whole log is replayed).
    pub async fn restore_producers(&self) -> Result<(), RestoreError> {
        let end = self.log.log_end_offset();
        let path = self.log.dir().join(PRODUCER_SNAPSHOT_FILE);
        let snapshot = read_checkpoint_file(&path)
            .await?
            .and_then(|b| parse_checkpoint(&b));
        let loaded = snapshot.and_then(|lines| {
            let (first, rest) = lines.split_first()?;
            let offset = Offset(first.trim().parse().ok()?);
            let (txn_lines, batch_lines): (Vec<String>, Vec<String>) =
                rest.iter().cloned().partition(|l| l.starts_with(TXN_LINE));
            let txns = txns_from_lines(&txn_lines)?;
            // Transactions closed by markers a crash or truncation took are open again: a
            // snapshot past the log end cannot say which.
            if offset > end && !txns.is_empty() {
                return None;
            }
            Some((
                offset,
                ProducerStateMap::from_lines(&batch_lines, end.0)?,
                txns,
            ))
        });
        let (from, mut map, mut txns) = match loaded {
            Some((offset, map, txns)) => (offset.min(end), map, txns),
            None => (
                self.log.log_start_offset(),
                ProducerStateMap::default(),
                PartitionTxns::default(),
            ),
        };
        // The aborted transactions from `from` on are recorded again as their markers replay.
        self.log.truncate_aborted_txns(from).await?;
        let mut aborted = Vec::new();
        self.log
            .for_each_batch_header(from, |h, control| {
                map.replay(h);
                if let Some(batch) = txn_batch(h, control) {
                    aborted.extend(txns.record(batch).map(index_entry));
                }
            })
            .await?;
        self.log.append_aborted_txns(&aborted).await?;
        *self.producers.borrow_mut() = map;
        *self.txns.borrow_mut() = txns;
        self.snapshot_version.set(self.state_version());
        self.durable_snapshot_version.set(self.state_version());
        Ok(())
    }

    /// Changes with every batch the producer state records, idempotent or transactional.
    fn state_version(&self) -> u64 {
        self.producers.borrow().version() + self.txn_changes.get()
    }

    /// Forgets every producer: the log is about to be emptied and started at `start`
    /// ([`Partition::restart_at`]). The empty snapshot at `start` is written (synced) first, so
    /// that a crash before the log is emptied cannot bring the old state back over the new log.
    pub(super) async fn forget_producers(&self, start: Offset, now_ms: i64) -> Result<(), IoError> {
        let map = ProducerStateMap::default();
        self.log.truncate_aborted_txns(Offset(0)).await?;
        write_checkpoint(
            self.log.dir(),
            PRODUCER_SNAPSHOT_FILE,
            &[start.0.to_string()],
        )
        .await?;
        *self.producers.borrow_mut() = map;
        *self.txns.borrow_mut() = PartitionTxns::default();
        self.snapshot_version.set(self.state_version());
        self.durable_snapshot_version.set(self.state_version());
        self.durable_snapshot_end.set(start.0);
        self.snapshot_at_ms.set(now_ms);
        Ok(())
    }

    /// Writes a snapshot if the state changed since the last one and, unless `force`, the last
    /// one is older than [`PRODUCER_SNAPSHOT_INTERVAL_MS`]; synced if `force` or the log is
    /// compacted.
    pub async fn snapshot_producers(&self, now_ms: i64, force: bool) -> Result<(), IoError> {
        let due = self.state_version() != self.snapshot_version.get()
            && (force || now_ms - self.snapshot_at_ms.get() >= PRODUCER_SNAPSHOT_INTERVAL_MS);
        if !due {
            return Ok(());
        }
        let (version, end, lines) = {
            // A consistent cut: no append is between its log append and its state record.
            let _lock = self.lock_appends().await;
            let end = self.log.log_end_offset().0;
            let mut lines = vec![end.to_string()];
            lines.extend(self.producers.borrow().to_lines());
            lines.extend(txns_to_lines(&self.txns.borrow()));
            (self.state_version(), end, lines)
        };
        // The snapshot replaces the replay of the markers before it: their entries first.
        self.log.sync_aborted_txns().await?;
        let durable = force || self.log.config().compaction.compact;
        if durable {
            write_checkpoint(self.log.dir(), PRODUCER_SNAPSHOT_FILE, &lines).await?;
            self.durable_snapshot_version.set(version);
            self.durable_snapshot_end.set(end);
        } else {
            write_checkpoint_unsynced(self.log.dir(), PRODUCER_SNAPSHOT_FILE, &lines).await?;
        }
        self.snapshot_version.set(version);
        self.snapshot_at_ms.set(now_ms);
        Ok(())
    }

    /// How far the log cleaner may go: below the last stable offset (so the high watermark),
    /// and below the last durable
    /// producer state snapshot while the state has changed since (after a crash the state is
    /// rebuilt from the snapshot and the batches after it, which the cleaner must not have
    /// removed).
    pub fn cleanable_bound(&self) -> iouring_log::Offset {
        // Below the last stable offset: an open transaction's records are neither dropped
        // (it may abort) nor kept as the latest of their keys (nor may they supersede one).
        let hw = self.last_stable_offset();
        if self.state_version() == self.durable_snapshot_version.get() {
            hw
        } else {
            hw.min(iouring_log::Offset(self.durable_snapshot_end.get()))
        }
    }
}

/// The transaction state as snapshot lines: `txn p <producer id> <epoch> <coordinator epoch>
/// <open first offset> <open last offset>` (-1 -1 with nothing open) and `txn u <first offset>
/// <marker offset>` for a closed transaction whose marker was not replicated yet.
fn txns_to_lines(txns: &PartitionTxns) -> Vec<String> {
    txns.to_snapshot()
        .into_iter()
        .map(|e| match e {
            SnapshotEntry::Producer {
                producer,
                epoch,
                coordinator_epoch,
                open,
            } => {
                let (first, last) = open.map_or((-1, -1), |(f, l)| (f.0, l.0));
                format!(
                    "{TXN_LINE}p {} {epoch} {coordinator_epoch} {first} {last}",
                    producer.0
                )
            }
            SnapshotEntry::Unreplicated { first, marker } => {
                format!("{TXN_LINE}u {} {}", first.0, marker.0)
            }
        })
        .collect()
}

/// The state [`txns_to_lines`] wrote; `None` if a line is malformed.
fn txns_from_lines(lines: &[String]) -> Option<PartitionTxns> {
    let mut entries = Vec::with_capacity(lines.len());
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let entry = match f[..] {
            ["txn", "p", pid, epoch, coordinator_epoch, first, last] => {
                let (first, last): (i64, i64) = (first.parse().ok()?, last.parse().ok()?);
                SnapshotEntry::Producer {
                    producer: ProducerId(pid.parse().ok()?),
                    epoch: epoch.parse().ok()?,
                    coordinator_epoch: coordinator_epoch.parse().ok()?,
                    open: (first >= 0).then_some((Offset(first), Offset(last))),
                }
            }
            ["txn", "u", first, marker] => SnapshotEntry::Unreplicated {
                first: Offset(first.parse().ok()?),
                marker: Offset(marker.parse().ok()?),
            },
            _ => return None,
        };
        entries.push(entry);
    }
    Some(PartitionTxns::from_snapshot(&entries))
}
