//! A shard's periodic work on its partitions (retention, `flush.ms`, checkpoints, producer
//! state snapshots) and their clean shutdown.

use std::rc::Rc;

use super::{now_ms, ShardCtx};
use crate::partition::Partition;

impl ShardCtx {
    /// Retention and `flush.ms` on every partition of the shard.
    pub(super) async fn maintain(&self, check_retention: bool) {
        let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for p in parts {
            if let Err(e) = p.log.maybe_flush(now_ms()).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
            }
            if let Err(e) = p.snapshot_producers(now_ms(), false).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "producer state snapshot failed");
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
        for p in parts {
            if let Err(e) = p.snapshot_producers(now_ms(), true).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "producer state snapshot failed");
            }
            if let Err(e) = p.log.close().await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "close failed");
            }
        }
    }
}
