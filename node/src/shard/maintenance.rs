//! A shard's periodic work on its partitions (retention, `flush.ms`, checkpoints, producer
//! state snapshots) and their clean shutdown.

use std::rc::Rc;

use super::{now_ms, ShardCtx};
use crate::limits::{LOG_OPEN_CLOSE_CONCURRENCY, MAINTENANCE_PARTITIONS_PER_TICK};
use crate::partition::Partition;
use futures_util::stream::{self, StreamExt};

impl ShardCtx {
    /// How many ticks one pass over the shard's partitions takes: one while they are at most
    /// [`MAINTENANCE_PARTITIONS_PER_TICK`], more for a crowded shard (5 000 partitions: 10
    /// ticks, each partition visited every second).
    pub(super) fn maintenance_stride(&self) -> u64 {
        let n = self.partitions.borrow().len() as u64;
        n.div_ceil(MAINTENANCE_PARTITIONS_PER_TICK as u64).max(1)
    }

    /// Retention and `flush.ms` on the partitions of the shard this tick visits (every
    /// `stride`-th, from `tick`); failed logs reopened when their disk has room.
    pub(super) async fn maintain(self: &Rc<Self>, tick: u64, stride: u64, check_retention: bool) {
        let parts: Vec<Rc<Partition>> = self
            .partitions
            .borrow()
            .values()
            .enumerate()
            .filter(|(i, _)| *i as u64 % stride == tick % stride)
            .map(|(_, p)| p.clone())
            .collect();
        for p in parts {
            if p.log.failure().is_some() {
                self.reopen_failed(&p).await;
                continue;
            }
            crate::replica::isr::propose_change(self, &p);
            p.log.park_idle_tail(std::time::Instant::now());
            if let Err(e) = p.log.maybe_flush(now_ms()).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
            }
            if let Err(e) = p.snapshot_producers(now_ms(), false).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "producer state snapshot failed");
            }
            if let Err(e) = p.checkpoint_high_watermark(now_ms(), false).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "high watermark checkpoint failed");
            }
            if check_retention {
                let hw = p.high_watermark();
                if let Err(e) = p.log.delete_old_segments(now_ms(), hw).await {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "retention failed");
                }
            }
        }
    }

    /// Clean shutdown of every log.
    pub(super) async fn close_all(&self) {
        let parts: Vec<Rc<Partition>> = self
            .partitions
            .borrow_mut()
            .drain()
            .map(|(_, p)| p)
            .collect();
        // Several at once: each close fsyncs a few files, and 5 000 logs closed one after the
        // other took longer than a stop may.
        stream::iter(parts)
            .for_each_concurrent(LOG_OPEN_CLOSE_CONCURRENCY, |p| async move {
                close_partition(&p).await
            })
            .await;
    }
}

/// Snapshots, checkpoints and closes one partition's log.
async fn close_partition(p: &Partition) {
    if let Err(e) = p.snapshot_producers(now_ms(), true).await {
        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "producer state snapshot failed");
    }
    if let Err(e) = p.checkpoint_high_watermark(now_ms(), true).await {
        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "high watermark checkpoint failed");
    }
    if let Err(e) = p.log.close().await {
        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "close failed");
    }
}
