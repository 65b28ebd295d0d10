//! A shard's report for one scrape: its counters, and what it reads of its partitions, groups,
//! caches and io_uring when asked. Built on the shard's thread, sent to the endpoint's.

use super::recorder::{ApiReport, ExecutorTotals, StallReport};

/// Everything one shard contributes to a scrape. Plain data: it crosses threads.
#[derive(Debug, Clone, Default)]
pub struct ShardReport {
    pub shard: usize,
    pub apis: Vec<ApiReport>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub connections_open: u64,
    pub connections_accepted: u64,
    pub partitions: Vec<PartitionReport>,
    pub groups: Vec<GroupReport>,
    /// The shard's read cache, as `iouring_log::read_cache_stats` counts it.
    pub read_cache: iouring_log::CacheStats,
    /// The shard's admission of O_DIRECT reads to the device (`iouring_log::read_gate`).
    pub read_gate: iouring_log::GateStats,
    /// Memory the tails of the shard's active segments hold.
    pub tail_bytes: u64,
    pub executor: ExecutorTotals,
    /// Time each named task queue of the shard ran tasks, since the broker started.
    pub task_queues: Vec<(&'static str, std::time::Duration)>,
    /// The stall probe (`shard/stall_probe.rs`).
    pub stalls: StallReport,
    /// How long the shard's data writes, `fdatasync`s and seals of segment files took.
    pub log_io: iouring_log::ShardIoTimes,
    /// `(writes, bytes)` of segment files through the page cache (quiet partitions' appends).
    pub page_cache_writes: (u64, u64),
    /// The log cleaner: `(cleanings, bytes before, bytes after)`.
    pub cleaner: (u64, u64, u64),
    /// Replica moves and replication throttles on this shard.
    pub moves: MovesReport,
    /// The transactional ids this shard coordinates, counted by Kafka's state name
    /// (`Ongoing`, `PrepareCommit`, …).
    pub transactional_ids: Vec<(&'static str, u64)>,
}

/// Replica moves led by the shard and its replication throttles.
#[derive(Debug, Clone, Default)]
pub struct MovesReport {
    /// Partitions this shard leads whose replicas are moving.
    pub reassigning: u64,
    /// Replicas this shard holds that a move is adding (catching up).
    pub adding_here: u64,
    /// What the replicas being added to partitions this shard leads still have to copy,
    /// estimated from their log end offsets and the leader's bytes per offset.
    pub bytes_left: u64,
    /// Bytes sent (leader) and fetched (follower) under the replication throttles.
    pub throttled_leader_bytes: u64,
    pub throttled_follower_bytes: u64,
    /// The throttle rates in force (bytes/s; `None`: unlimited).
    pub leader_rate: Option<u64>,
    pub follower_rate: Option<u64>,
    /// Times a throttled partition was left out because its budget was spent.
    pub held_back: u64,
}

/// One replica on the shard.
#[derive(Debug, Clone)]
pub struct PartitionReport {
    pub topic: String,
    pub partition: i32,
    pub leader: bool,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub size_bytes: u64,
    /// Replicas of the partition, and those in sync with this leader (leaders only: 0 on a
    /// follower).
    pub replicas: usize,
    pub in_sync_replicas: usize,
    /// The log failed (an I/O error) and serves nothing until reopened.
    pub offline: bool,
    /// Kafka's last stable offset: `read_committed` consumers read below it.
    pub last_stable_offset: i64,
    /// Transactions open in the partition (producers with data and no marker yet).
    pub open_transactions: usize,
}

/// A group the shard coordinates.
#[derive(Debug, Clone)]
pub struct GroupReport {
    pub group: String,
    pub state: &'static str,
    pub members: usize,
    /// `(topic, partition, committed offset)`.
    pub committed: Vec<(String, i32, i64)>,
}
