//! Kafka's producer state snapshots, in ringlog's own small file: the idempotent producer state
//! of a partition as of a log end offset, so that it survives restarts (a batch retried across a
//! broker crash must still be found a duplicate).
//!
//! `producer-state-snapshot` in the partition's folder is a checkpoint file (in the log's
//! checkpoint format; see below for how it is written): the first entry is the log end offset `S` the state reflects,
//! then one line per remembered batch (`ProducerStateMap::to_lines`). On open the state is
//! loaded, batches at or past the (maybe shorter, after a crash) log end are dropped, and the
//! batch headers from `min(S, log end)` on are replayed from the log. Without a snapshot the
//! whole log is replayed. Snapshots are written at most every
//! [`PRODUCER_SNAPSHOT_INTERVAL_MS`] while the state changes, and at shutdown.
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

use super::producer_state::ProducerStateMap;
use super::Partition;
use crate::limits::PRODUCER_SNAPSHOT_INTERVAL_MS;

pub const PRODUCER_SNAPSHOT_FILE: &str = "producer-state-snapshot";

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
            Some((offset, ProducerStateMap::from_lines(rest, end.0)?))
        });
        let (from, mut map) = match loaded {
            Some((offset, map)) => (offset.min(end), map),
            None => (self.log.log_start_offset(), ProducerStateMap::default()),
        };
        self.log
            .for_each_batch_header(from, |h, _| map.replay(h))
            .await?;
        self.snapshot_version.set(map.version());
        self.durable_snapshot_version.set(map.version());
        *self.producers.borrow_mut() = map;
        Ok(())
    }

    /// Forgets every producer: the log is about to be emptied and started at `start`
    /// ([`Partition::restart_at`]). The empty snapshot at `start` is written (synced) first, so
    /// that a crash before the log is emptied cannot bring the old state back over the new log.
    pub(super) async fn forget_producers(&self, start: Offset, now_ms: i64) -> Result<(), IoError> {
        let map = ProducerStateMap::default();
        write_checkpoint(
            self.log.dir(),
            PRODUCER_SNAPSHOT_FILE,
            &[start.0.to_string()],
        )
        .await?;
        self.snapshot_version.set(map.version());
        self.durable_snapshot_version.set(map.version());
        self.durable_snapshot_end.set(start.0);
        self.snapshot_at_ms.set(now_ms);
        *self.producers.borrow_mut() = map;
        Ok(())
    }

    /// Writes a snapshot if the state changed since the last one and, unless `force`, the last
    /// one is older than [`PRODUCER_SNAPSHOT_INTERVAL_MS`]; synced if `force` or the log is
    /// compacted.
    pub async fn snapshot_producers(&self, now_ms: i64, force: bool) -> Result<(), IoError> {
        let due = self.producers.borrow().version() != self.snapshot_version.get()
            && (force || now_ms - self.snapshot_at_ms.get() >= PRODUCER_SNAPSHOT_INTERVAL_MS);
        if !due {
            return Ok(());
        }
        let (version, end, lines) = {
            // A consistent cut: no append is between its log append and its state record.
            let _lock = self.lock_appends().await;
            let map = self.producers.borrow();
            let end = self.log.log_end_offset().0;
            let mut lines = vec![end.to_string()];
            lines.extend(map.to_lines());
            (map.version(), end, lines)
        };
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

    /// How far the log cleaner may go: below the high watermark, and below the last durable
    /// producer state snapshot while the state has changed since (after a crash the state is
    /// rebuilt from the snapshot and the batches after it, which the cleaner must not have
    /// removed).
    pub fn cleanable_bound(&self) -> iouring_log::Offset {
        let hw = self.high_watermark();
        if self.producers.borrow().version() == self.durable_snapshot_version.get() {
            hw
        } else {
            hw.min(iouring_log::Offset(self.durable_snapshot_end.get()))
        }
    }
}
