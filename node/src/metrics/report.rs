//! A shard's report for one scrape: its counters, and what it reads of its partitions, groups,
//! caches and io_uring when asked. Built on the shard's thread, sent to the endpoint's.

use std::time::Instant;

use super::recorder::{ApiReport, ExecutorTotals, StallReport};
use crate::shard::ShardCtx;

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
    /// The shard's read cache, as `iouring_log::read_cache::stats` counts it.
    pub read_cache: iouring_log::read_cache::CacheStats,
    /// The shard's admission of O_DIRECT reads to the device (`iouring_log::read_gate`).
    pub read_gate: iouring_log::read_gate::GateStats,
    /// Memory the tails of the shard's active segments hold.
    pub tail_bytes: u64,
    pub executor: ExecutorTotals,
    /// Time each named task queue of the shard ran tasks, since the broker started.
    pub task_queues: Vec<(&'static str, std::time::Duration)>,
    /// The stall probe (`shard/stall_probe.rs`).
    pub stalls: StallReport,
    /// How long the shard's data writes, `fdatasync`s and seals of segment files took.
    pub log_io: iouring_log::segment_io::ShardIoTimes,
    /// `(writes, bytes)` of segment files through the page cache (quiet partitions' appends).
    pub page_cache_writes: (u64, u64),
    /// The log cleaner: `(cleanings, bytes before, bytes after)`.
    pub cleaner: (u64, u64, u64),
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

impl ShardCtx {
    /// What this shard reports to a scrape.
    pub fn metrics_report(&self) -> ShardReport {
        let now = Instant::now();
        let m = &self.metrics;
        let ex = glommio::executor();
        let io = ex.io_stats().all_rings();
        let stats = ex.executor_stats();
        let executor = m.add_executor(ExecutorTotals {
            file_reads: io.file_reads().0,
            file_read_bytes: io.file_reads().1,
            file_writes: io.file_writes().0,
            file_written_bytes: io.file_writes().1,
            busy: stats.total_runtime(),
            tasks_executed: stats.tasks_executed(),
        });
        let task_queues = m.add_task_queue_runtimes(|handle| {
            ex.task_queue_stats(handle)
                .map_or(std::time::Duration::ZERO, |s| s.runtime())
        });
        let snapshot = self.snapshot.borrow().clone();
        let mut tail_bytes = 0u64;
        let partitions = self
            .partitions
            .borrow()
            .values()
            .map(|p| {
                tail_bytes += p.log.tail_bytes_held() as u64;
                let leader = p.is_leader();
                let replicas = snapshot
                    .partition(&p.topic, p.index)
                    .map_or(1, |meta| meta.replicas.len().max(1));
                PartitionReport {
                    topic: p.topic.clone(),
                    partition: p.index,
                    leader,
                    log_start_offset: p.log.log_start_offset().0,
                    log_end_offset: p.log.log_end_offset().0,
                    high_watermark: p.high_watermark().0,
                    size_bytes: p.log.size_bytes(),
                    replicas,
                    in_sync_replicas: if leader { p.in_sync_replicas() } else { 0 },
                    offline: p.log.failure().is_some(),
                }
            })
            .collect();
        ShardReport {
            shard: self.shard,
            apis: m.api_reports(now),
            bytes_received: m.bytes_received(),
            bytes_sent: m.bytes_sent(),
            connections_open: self.connections.get() as u64,
            connections_accepted: m.connections_accepted(),
            partitions,
            groups: self.groups.report(),
            read_cache: iouring_log::read_cache::stats(),
            read_gate: iouring_log::read_gate::stats(),
            tail_bytes,
            executor,
            task_queues,
            stalls: m.stall_report(now),
            log_io: iouring_log::segment_io::io_times(),
            page_cache_writes: iouring_log::segment_io::page_cache_writes(),
            cleaner: m.cleaner(),
        }
    }
}
