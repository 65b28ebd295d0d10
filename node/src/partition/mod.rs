//! One partition served by a shard: its log, its idempotent producer state and transactions
//! (`txns.rs`), and the two halves
//! of the produce path (`append.rs`): the ordered append, under the partition's append lock,
//! and the wait until the appended offsets may be acknowledged.

pub mod accept;
pub mod append;
pub mod compression;
pub mod hw_checkpoint;
pub mod internal;
pub mod producer_snapshot;
pub mod producer_state;
pub mod replica;
pub mod timestamps;
#[cfg(test)]
mod txn_tests;
pub mod txns;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use glommio::sync::{Permit, Semaphore};
use iouring_log::Log;
use iouring_log::Notify;

use producer_state::ProducerStateMap;
use replica::Role;

use crate::replica::throttle::Throttled;

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub log: Log,
    pub producers: RefCell<ProducerStateMap>,
    /// The transactions open here, and those closed by markers not yet replicated
    /// (`txns.rs`).
    txns: RefCell<transactions::PartitionTxns>,
    /// KIP-890 part 1: producers the coordinator confirmed to have this partition in their
    /// ongoing transaction, with that producer epoch; a producer's marker removes it
    /// (`txns.rs`).
    verified: RefCell<std::collections::HashMap<i64, i16>>,
    /// Changes with every transactional batch or marker recorded (whether a producer state
    /// snapshot is out of date, beside the idempotent state's version).
    txn_changes: Cell<u64>,
    /// The log end offset before a transactional batch being appended (the append lock held):
    /// the last stable offset stays there until the batch's transaction is recorded, else a
    /// read_committed fetch between the batch reaching the log (and the high watermark) and
    /// its recording would read it as committed.
    appending_txn: Cell<Option<iouring_log::Offset>>,
    /// Held from the idempotent producer's sequence check until its batch is appended and
    /// recorded, so a retry arriving on another connection meanwhile is seen as a duplicate.
    append_lock: Semaphore,
    /// The topic's `max.message.bytes` and `min.insync.replicas` (altered at run time).
    limits: Cell<Limits>,
    /// The producer state version last snapshotted and when (`producer_snapshot.rs`).
    snapshot_version: Cell<u64>,
    snapshot_at_ms: Cell<i64>,
    /// The version and log end of the last snapshot written durably (or restored): what the
    /// log cleaner may rely on.
    durable_snapshot_version: Cell<u64>,
    durable_snapshot_end: Cell<i64>,
    /// The high watermark last checkpointed, and when (`hw_checkpoint.rs`).
    hw_checkpointed: Cell<i64>,
    hw_checkpoint_at: Cell<i64>,
    /// Leader, follower, only replica or offline (`replica.rs`).
    role: RefCell<Role>,
    /// Notified when the high watermark or the role may have changed: the partition's own
    /// signal, which its log notifies on every write too.
    notify: Rc<Notify>,
    /// Notified when the leader appends, before the bytes are written: followers read up to
    /// the log end offset (as Kafka's do), so their fetches wake on this, and the followers'
    /// writes run beside the leader's own instead of after it. Consumers, who read only below
    /// the high watermark, do not wait on it.
    appended: Rc<Notify>,
    /// Which sides of replication its topic's throttled replica lists throttle here.
    throttled: Cell<Throttled>,
}

/// A partition's topic-level limits on what it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_message_bytes: usize,
    pub min_insync_replicas: usize,
    /// `message.timestamp.*`: LogAppendTime stamping or CreateTime bounds.
    pub timestamps: timestamps::TimestampPolicy,
    /// `compression.type` and its levels: what batches are stored as.
    pub compression: compression::TopicCompression,
}

impl Partition {
    /// Which sides of replication throttle this replica (its topic's throttled replica lists).
    pub fn throttled(&self) -> Throttled {
        self.throttled.get()
    }

    pub fn set_throttled(&self, throttled: Throttled) {
        self.throttled.set(throttled);
    }

    /// A partition over `log`, serving nothing until [`Partition::apply_state`] gives it a role;
    /// `notify` is what its log notifies on writes.
    pub fn new(
        topic: String,
        index: i32,
        log: Log,
        limits: Limits,
        notify: Rc<Notify>,
    ) -> Partition {
        Partition {
            topic,
            index,
            log,
            producers: RefCell::default(),
            txns: RefCell::default(),
            verified: RefCell::default(),
            txn_changes: Cell::new(0),
            appending_txn: Cell::new(None),
            append_lock: Semaphore::new(1),
            limits: Cell::new(limits),
            snapshot_version: Cell::new(0),
            snapshot_at_ms: Cell::new(0),
            durable_snapshot_version: Cell::new(0),
            durable_snapshot_end: Cell::new(0),
            hw_checkpointed: Cell::new(0),
            hw_checkpoint_at: Cell::new(0),
            // Until the metadata says what it is: no high watermark known (no checkpoint yet),
            // so a replica that comes back as leader shows nothing its followers do not have.
            role: RefCell::new(Role::Offline {
                high_watermark: iouring_log::Offset(0),
            }),
            notify,
            appended: Rc::default(),
            throttled: Cell::default(),
        }
    }

    /// `max.message.bytes` of the topic: the largest batch accepted.
    pub fn max_message_bytes(&self) -> usize {
        self.limits.get().max_message_bytes
    }

    /// `min.insync.replicas` of the topic: what an `acks=all` produce needs.
    pub fn min_insync_replicas(&self) -> usize {
        self.limits.get().min_insync_replicas
    }

    /// The topic's `message.timestamp.*` settings.
    pub fn timestamp_policy(&self) -> timestamps::TimestampPolicy {
        self.limits.get().timestamps
    }

    /// What a producer's batch is checked and stored by here (`accept.rs`).
    pub fn batch_policy(&self) -> accept::BatchPolicy<'_> {
        let limits = self.limits.get();
        accept::BatchPolicy {
            topic: &self.topic,
            partition: self.index,
            compacted: self.log.config().compaction.compact,
            timestamps: limits.timestamps,
            compression: limits.compression,
        }
    }

    /// The topic's configs were altered: new limits from now on.
    pub fn set_limits(&self, limits: Limits) {
        self.limits.set(limits);
    }

    /// The partition's "high watermark, role or log moved" signal (long-polling fetches wait
    /// on it).
    pub fn progress(&self) -> &Rc<Notify> {
        &self.notify
    }

    /// The partition's "leader appended" signal (follower fetches wait on it).
    pub fn appended(&self) -> &Rc<Notify> {
        &self.appended
    }

    /// Holds off appends to this partition while the permit lives.
    async fn lock_appends(&self) -> Permit<'_> {
        self.append_lock
            .acquire_permit(1)
            .await
            .expect("append lock never closes")
    }
}

/// `<topic>-<partition>`, Kafka's folder name.
pub fn dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}
