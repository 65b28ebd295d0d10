//! A leader's ISR changes, proposed to the control plane (Kafka's AlterPartition): the
//! `replication` crate's leader state decides them; the controller commits them in the
//! cluster metadata by compare-and-swap on the partition epoch.

use crate::metadata::Command;
use crate::partition::Partition;
use crate::shard::{now_ms, ShardCtx};

/// Sends a leader's pending ISR change to the control plane; the leader learns the outcome
/// from the next snapshot, so the reply is not awaited.
pub fn propose_change(ctx: &ShardCtx, p: &Partition) {
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
    if let Err(e) = ctx.send_to_control_plane(cmd) {
        tracing::debug!(error = %e, "ISR change not sent");
    }
}
