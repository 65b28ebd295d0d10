//! A shard's periodic work on its partitions (retention, `flush.ms`, checkpoints, producer
//! state snapshots) and their clean shutdown.

use std::rc::Rc;

use super::{now_ms, ShardCtx};
use crate::metadata::Command;
use crate::partition::Partition;

impl ShardCtx {
    /// Retention and `flush.ms` on every partition of the shard; failed logs reopened when
    /// their disk has room.
    pub(super) async fn maintain(&self, check_retention: bool) {
        let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for p in parts {
            if p.log.failure().is_some() {
                self.reopen_failed(&p).await;
                continue;
            }
            self.propose_isr_change(&p);
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

    /// Sends a leader's ISR change to the control plane (Kafka's AlterPartition); the leader
    /// learns the outcome from the next snapshot, so the reply is not awaited.
    fn propose_isr_change(&self, p: &Partition) {
        let Some(change) = p.isr_proposal(now_ms()) else {
            return;
        };
        tracing::info!(topic = %p.topic, partition = p.index, isr = ?change.new_isr.iter().map(|r| r.0).collect::<Vec<_>>(), "proposing an ISR change");
        let (reply, _) = futures_channel::oneshot::channel();
        let cmd = Command::AlterPartition {
            topic: p.topic.clone(),
            partition: p.index,
            change,
            reply,
        };
        if self.commands.send(cmd).is_err() {
            tracing::debug!("the control plane stopped; ISR change not sent");
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
            if let Err(e) = p.checkpoint_high_watermark(now_ms(), true).await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "high watermark checkpoint failed");
            }
            if let Err(e) = p.log.close().await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "close failed");
            }
        }
    }
}
