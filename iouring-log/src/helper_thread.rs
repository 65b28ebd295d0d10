//! Waiting on file operations glommio runs on its helper thread (ftruncate, rename, unlink).
//!
//! glommio wakes the reactor for those completions through an eventfd, and that wake-up can be
//! missed when nothing else (a timer, a socket, another I/O) wakes the reactor: the shard would
//! then sleep forever with the result waiting. Seen here as a hang of the recovery test, with
//! the reactor in `io_cqring_wait` and the helper thread idle. A 10 ms ticker raced against the
//! operation keeps the reactor polling until it completes.

use std::future::Future;
use std::time::Duration;

/// How often the reactor re-checks while a helper-thread operation is pending.
const TICK: Duration = Duration::from_millis(10);

pub async fn on_helper_thread<F: Future>(op: F) -> F::Output {
    let ticker = async {
        loop {
            glommio::timer::sleep(TICK).await;
        }
    };
    futures_lite::future::or(op, ticker).await
}
