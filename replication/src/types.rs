//! What the controller commits for a partition, and the requests that change it.

use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpoch;

/// A replica, named by the node that holds it. ringlog never places two replicas of a
/// partition on one node, so a node id names a replica; the node's shard holding it (and so
/// the Kafka broker id, `node × 1000 + shard`) is the broker's business, not the rules'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaId(pub i32);

impl std::fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A partition's replication state as the controller committed it (Kafka's `PartitionRecord`):
/// changed only by compare-and-swap on `partition_epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// Every replica, the preferred leader first.
    pub replicas: Vec<ReplicaId>,
    /// The in-sync replicas: each has every record below the high watermark. Empty when the
    /// last member lost its session (it is then in `elr`).
    pub isr: BTreeSet<ReplicaId>,
    /// Eligible leader replicas (Kafka's KIP-966): replicas that left the ISR while it was below
    /// `min.insync.replicas`. The high watermark does not move while the ISR is that small, so
    /// each of them still holds every committed record and may be elected when no ISR member
    /// is live. Empty whenever the ISR has at least `min.insync.replicas` members.
    pub elr: BTreeSet<ReplicaId>,
    /// `None`: no live replica of the ISR (offline).
    pub leader: Option<ReplicaId>,
    /// Bumped with every leader change.
    pub leader_epoch: LeaderEpoch,
    /// Bumped with every change of this state.
    pub partition_epoch: i32,
    /// Replicas a move in progress adds (Kafka's KIP-455 `adding_replicas`): in `replicas`,
    /// fetching as followers, not yet all in the ISR. Empty when no move is in progress.
    pub adding: BTreeSet<ReplicaId>,
    /// Replicas a move in progress removes once every adding replica is in sync (Kafka's
    /// `removing_replicas`): still in `replicas` and serving until then.
    pub removing: BTreeSet<ReplicaId>,
}

/// A leader asks the controller to change the ISR (Kafka's AlterPartition): valid only against
/// the state it read, so a leader cut off from the controller cannot change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub leader: ReplicaId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub new_isr: BTreeSet<ReplicaId>,
    /// The broker epoch each replica this change adds fetched with (Kafka's KIP-903
    /// `NewIsrWithEpochs`): the controller refuses the addition if that broker has registered
    /// again since (a fetch of its previous process), so a stopped or restarted broker is
    /// never counted in sync on what its old process had.
    pub broker_epochs: BTreeMap<ReplicaId, i64>,
}
