//! The shard's stall probe: a task that asks to run every [`STALL_PROBE_INTERVAL`] and records
//! how late it ran. Lateness is time the shard could not run a task that was due: another task
//! running long without yielding, a blocking system call on the shard's thread, the thread
//! preempted by another (a kernel worker, another process on the CPU), or the reactor waking
//! late from a sleep (timer slack, an idle vCPU of a virtual machine taking time to run again).
//! A request that arrives then waits as long; the probe makes such stalls visible
//! (`ringlog_shard_stall_probe_lateness_seconds`, `ringlog_shard_stalls_total`) without
//! tracing every request.
//!
//! It runs in a task queue of its own, so its figures are not folded into the request path's
//! runtime, and it costs one timer wake-up per interval (100 a second).

use std::rc::Rc;
use std::time::Instant;

use super::ShardCtx;
use crate::limits::STALL_PROBE_INTERVAL;

/// Runs until the node stops; reads only the stop flag and writes only the shard's metrics.
pub(super) async fn run_stall_probe(ctx: Rc<ShardCtx>) {
    while !ctx.stop.is_stopping() {
        let due = Instant::now() + STALL_PROBE_INTERVAL;
        glommio::timer::sleep(STALL_PROBE_INTERVAL).await;
        let now = Instant::now();
        ctx.metrics
            .record_stall_probe(now.saturating_duration_since(due), now);
    }
}
