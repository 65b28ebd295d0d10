//! The shard's log cleaner: a background task that cleans the compacted logs of the shard's
//! replicas (leaders and followers alike, each its own copy, as in Kafka), the dirtiest due
//! log first, one at a time, and sleeps `log.cleaner.backoff.ms` when none is due. It runs in
//! a task queue of its own with a small share of the shard's CPU, so produce and fetch tasks
//! come first when both are ready; its I/O rate is bounded by
//! `log.cleaner.io.max.bytes.per.second`. The cleaning itself is `iouring_log::cleaner`.

use std::rc::Rc;
use std::time::Duration;

use glommio::{Latency, Shares};

use super::{now_ms, ShardCtx};
use crate::limits::LOG_CLEANER_SHARES;
use crate::partition::Partition;

/// Starts the shard's cleaner (unless `log.cleaner.enable` is false); it returns once the node
/// stops, after the cleaning under way (which checks the stop between segment groups).
pub(super) fn spawn_cleaner(ctx: Rc<ShardCtx>) -> Option<glommio::task::JoinHandle<()>> {
    let settings = ctx.config.cleaner;
    if !settings.enable {
        return None;
    }
    let queue = glommio::executor().create_task_queue(
        Shares::Static(LOG_CLEANER_SHARES),
        Latency::NotImportant,
        "log-cleaner",
    );
    ctx.metrics.watch_task_queue("log-cleaner", queue);
    let shard = ctx.shard;
    let task = glommio::spawn_local_into(
        async move {
            loop {
                if ctx.stop.is_stopping() {
                    return;
                }
                let cleaned = ctx.clean_dirtiest().await;
                if !cleaned {
                    let backoff = Duration::from_millis(settings.backoff_ms);
                    let stop = async {
                        ctx.stop.stopped().await;
                    };
                    futures_lite::future::or(glommio::timer::sleep(backoff), stop).await;
                }
            }
        },
        queue,
    );
    match task {
        Ok(t) => Some(t.detach()),
        Err(e) => {
            tracing::error!(shard, error = %e, "cannot start the log cleaner");
            None
        }
    }
}

impl ShardCtx {
    /// Cleans the shard's dirtiest log that is due; whether one was cleaned.
    async fn clean_dirtiest(&self) -> bool {
        let now = now_ms();
        // `(urgency, bound, partition)`: the bound is worked out for compacted logs only.
        let dirtiest: Option<(f64, iouring_log::Offset, Rc<Partition>)> = self
            .partitions
            .borrow()
            .values()
            .filter_map(|p| {
                let cfg = p.log.config().compaction;
                if !cfg.compact {
                    return None;
                }
                let bound = p.cleanable_bound();
                let d = p.log.dirtiness(now, bound)?;
                d.due(cfg.min_cleanable_dirty_ratio).then(|| {
                    let urgency = if d.overdue { 2.0 } else { d.ratio() };
                    (urgency, bound, p.clone())
                })
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, bound, p)) = dirtiest else {
            return false;
        };
        let limits = self.config.cleaner.limits;
        let stop = || self.stop.is_stopping();
        match p.log.clean(now, bound, &limits, &stop).await {
            Ok(Some(stats)) => {
                self.metrics
                    .log_cleaned(stats.bytes_before, stats.bytes_after);
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "log cleaning failed");
                false
            }
        }
    }
}
