//! A shard's view of "the node is stopping": the process-wide flag the signal thread sets, and
//! a notifier the shard fires once it has seen the flag (the signal thread cannot wake a shard's
//! tasks itself). Tasks that wait on a client (accept, a read, a join, a long poll) race their
//! wait against [`StopSignal::stopped`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iouring_log::Notify;

pub struct StopSignal {
    flag: Arc<AtomicBool>,
    /// Set with `flag` when a shard cannot serve: the process then exits with a failure.
    failed: Arc<AtomicBool>,
    seen: Notify,
}

impl StopSignal {
    pub fn new(flag: Arc<AtomicBool>, failed: Arc<AtomicBool>) -> StopSignal {
        StopSignal {
            flag,
            failed,
            seen: Notify::default(),
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Stops the node because this shard cannot serve (a listener it cannot bind): the
    /// process-wide stop flag, and the failure the process exits with once stopped.
    pub fn fail_node(&self) {
        self.failed.store(true, Ordering::SeqCst);
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Wakes every [`StopSignal::stopped`] waiter of this shard; call once the flag is seen.
    pub fn announce(&self) {
        self.seen.notify_all();
    }

    /// Completes once the node is stopping: at once if the flag is set, else when the shard
    /// announces it.
    pub async fn stopped(&self) {
        loop {
            let seen = self.seen.generation();
            if self.is_stopping() {
                return;
            }
            self.seen.changed(seen).await;
        }
    }
}
