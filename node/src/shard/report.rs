//! What a shard reports to a scrape of the metrics endpoint (`metrics::report` defines the
//! report; the shard fills it from what it owns).

use std::time::Instant;

use super::ShardCtx;
use crate::metrics::recorder::ExecutorTotals;
use crate::metrics::report::{MovesReport, PartitionReport, ShardReport};

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
                    last_stable_offset: p.last_stable_offset().0,
                    open_transactions: p.open_transactions().len(),
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
            read_cache: iouring_log::read_cache_stats(),
            read_gate: iouring_log::read_gate_stats(),
            tail_bytes,
            executor,
            task_queues,
            stalls: m.stall_report(now),
            log_io: iouring_log::io_times(),
            page_cache_writes: iouring_log::page_cache_writes(),
            cleaner: m.cleaner(),
            moves: self.moves_report(&snapshot),
            transactional_ids: self.txns.count_by_state(),
        }
    }

    fn moves_report(&self, snapshot: &crate::metadata::Snapshot) -> MovesReport {
        let q = &self.replication_quotas;
        let me = self.config.node_id;
        let mut r = MovesReport {
            throttled_leader_bytes: q.leader.borrow().total(),
            throttled_follower_bytes: q.follower.borrow().total(),
            leader_rate: q.leader.borrow().rate(),
            follower_rate: q.follower.borrow().rate(),
            held_back: q.held_back.get(),
            ..MovesReport::default()
        };
        for p in self.partitions.borrow().values() {
            let Some(meta) = snapshot.partition(&p.topic, p.index) else {
                continue;
            };
            if !meta.is_reassigning() {
                continue;
            }
            if meta.adding.contains(&me) {
                r.adding_here += 1;
            }
            if !p.is_leader() {
                continue;
            }
            r.reassigning += 1;
            let (start, end) = (p.log.log_start_offset().0, p.log.log_end_offset().0);
            let per_offset = p.log.size_bytes() as f64 / (end - start).max(1) as f64;
            for &n in &meta.adding {
                let behind = p
                    .follower_log_end(replication::ReplicaId::from(n))
                    .map_or(end - start, |o| end - o.0.max(start));
                r.bytes_left += (behind.max(0) as f64 * per_offset) as u64;
            }
        }
        r
    }
}
