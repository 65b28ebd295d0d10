//! Running a shard: apply the first metadata snapshot, listen on the shard's port, serve
//! connections, run the maintenance and group timers, and on stop let connections finish and
//! close every log.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::rc::Rc;

use futures_channel::mpsc as fmpsc;
use futures_lite::StreamExt;
use glommio::net::TcpListener;
use glommio::{Latency, Shares};

use super::stall_probe::run_stall_probe;
use super::{now_ms, ShardCtx};
use crate::limits::{
    ACCEPT_RETRY_DELAY, DRAIN_MAX, DRAIN_POLL_INTERVAL, GROUP_TICK_INTERVAL, LISTEN_BACKLOG,
    MAINTENANCE_INTERVAL, MAINTENANCE_SHARES, STALL_PROBE_SHARES, STOP_POLL_INTERVAL,
};
use crate::metadata::SnapshotUpdate;
use crate::metrics::endpoint::Ask;
use crate::replica::fetcher::start_fetchers;
use crate::server::connection::serve_connection;

/// Runs shard `shard` until `stopping` is set; returns after its logs are closed. `asks` are
/// the metrics endpoint's requests for the shard's report.
pub async fn run_shard(
    ctx: Rc<ShardCtx>,
    mut updates: fmpsc::UnboundedReceiver<SnapshotUpdate>,
    mut asks: fmpsc::UnboundedReceiver<Ask>,
) {
    // The first snapshot arrives before any client is served.
    if let Some(u) = updates.next().await {
        if ctx.shard == 0 {
            ctx.remove_stray_replicas(&u.snapshot).await;
        }
        ctx.apply_snapshot(u.snapshot).await;
        u.applied.send(()).ok();
        start_fetchers(&ctx);
    }
    let mut bound = Vec::new();
    for (i, l) in ctx.config.security.listeners.iter().enumerate() {
        let addr = l.bind_of(ctx.shard);
        match bind_listener(addr) {
            Ok(socket) => {
                tracing::info!(shard = ctx.shard, listener = %l.name, protocol = l.protocol.name(), %addr, broker_id = ctx.broker_id().0, "listening");
                bound.push((i, socket));
            }
            Err(e) => {
                tracing::error!(shard = ctx.shard, listener = %l.name, %addr, error = %e, "cannot listen");
                ctx.stop.fail_node();
                return;
            }
        }
    }
    let updater = glommio::spawn_local({
        let ctx = ctx.clone();
        async move {
            while let Some(u) = updates.next().await {
                ctx.apply_snapshot(u.snapshot).await;
                u.applied.send(()).ok();
                start_fetchers(&ctx);
            }
        }
    })
    .detach();
    // Periodic work in a task queue of its own with a small share: a due request's task
    // comes first when both are ready, and each queue's runtime is reported.
    ctx.metrics
        .watch_task_queue("requests", glommio::executor().current_task_queue());
    let background = glommio::executor().create_task_queue(
        Shares::Static(MAINTENANCE_SHARES),
        Latency::NotImportant,
        "maintenance",
    );
    ctx.metrics.watch_task_queue("maintenance", background);
    let probe = glommio::executor().create_task_queue(
        Shares::Static(STALL_PROBE_SHARES),
        Latency::NotImportant,
        "stall-probe",
    );
    ctx.metrics.watch_task_queue("stall-probe", probe);
    let stall_probe = spawn_into(probe, run_stall_probe(ctx.clone()));
    let maintenance = spawn_into(background, {
        let ctx = ctx.clone();
        async move {
            let mut last_retention = now_ms();
            // Ticks left of the pass that checks retention (a crowded shard visits its
            // partitions over several ticks).
            let mut retention_ticks = 0;
            for tick in 0u64.. {
                glommio::timer::sleep(MAINTENANCE_INTERVAL).await;
                let stride = ctx.maintenance_stride();
                if now_ms() - last_retention >= ctx.config.retention_check_interval_ms as i64 {
                    last_retention = now_ms();
                    retention_ticks = stride;
                }
                let check_retention = retention_ticks > 0;
                retention_ticks = retention_ticks.saturating_sub(1);
                ctx.maintain(tick, stride, check_retention).await;
            }
        }
    });
    let group_ticker = spawn_group_ticker(ctx.clone(), background);
    let txns = &ctx.config.transactions;
    let txn_ticker = spawn_sweep(
        background,
        &ctx,
        txns.abort_timed_out_interval_ms,
        crate::txn_coordinator::abort_timed_out,
    );
    let txn_expiry = spawn_sweep(
        background,
        &ctx,
        txns.remove_expired_interval_ms,
        crate::txn_coordinator::expire_transactional_ids,
    );
    let reporter = glommio::spawn_local({
        let ctx = ctx.clone();
        async move {
            while let Some(reply) = asks.next().await {
                // The endpoint may have given up waiting: nothing to do then.
                let _ = reply.send(ctx.metrics_report());
            }
        }
    })
    .detach();
    let cleaner = super::cleaner::spawn_cleaner(ctx.clone());
    glommio::spawn_local(watch_for_stop(ctx.clone())).detach();
    let mut acceptors: Vec<_> = bound
        .into_iter()
        .map(|(i, socket)| {
            let ctx = ctx.clone();
            glommio::spawn_local(async move { accept_until_stopped(&ctx, socket, i).await })
        })
        .collect();
    for a in acceptors.drain(..) {
        a.await;
    }
    reporter.cancel();
    group_ticker.cancel();
    txn_ticker.cancel();
    txn_expiry.cancel();
    maintenance.cancel();
    stall_probe.cancel();
    // In-flight requests finish: connections close after their current request, within
    // DRAIN_MAX (fetches wait at most their max wait, acks=all produces give up at once; a
    // connection still busy after that, say writing to a client that does not read, is not
    // waited for).
    let draining = std::time::Instant::now();
    let mut told = false;
    while ctx.connections.get() > 0 {
        if draining.elapsed() >= DRAIN_MAX {
            tracing::warn!(
                shard = ctx.shard,
                connections = ctx.connections.get(),
                "stopping: connections still busy after {DRAIN_MAX:?}; closing the logs anyway"
            );
            break;
        }
        if !told && draining.elapsed() >= std::time::Duration::from_secs(2) {
            tracing::info!(
                shard = ctx.shard,
                connections = ctx.connections.get(),
                "stopping: waiting for connections to finish their requests"
            );
            told = true;
        }
        glommio::timer::sleep(DRAIN_POLL_INTERVAL).await;
    }
    // The cleaner ends its cleaning at the next group of segments once the node stops.
    if let Some(c) = cleaner {
        c.await;
    }
    ctx.close_all().await;
    updater.cancel();
    tracing::info!(shard = ctx.shard, "stopped");
}

/// Watches the process-wide stop flag (set by the signal thread, so it cannot wake this shard's
/// tasks itself) and announces it to the shard's tasks, once.
async fn watch_for_stop(ctx: Rc<ShardCtx>) {
    while !ctx.stop.is_stopping() {
        glommio::timer::sleep(STOP_POLL_INTERVAL).await;
    }
    ctx.stop.announce();
}

/// Session timeouts, join deadlines and offsets retention of the shard's groups.
fn spawn_group_ticker(
    ctx: Rc<ShardCtx>,
    queue: glommio::TaskQueueHandle,
) -> glommio::task::JoinHandle<()> {
    spawn_into(queue, async move {
        loop {
            glommio::timer::sleep(GROUP_TICK_INTERVAL).await;
            if ctx.stop.is_stopping() {
                return;
            }
            ctx.groups.tick(&*ctx, now_ms()).await;
        }
    })
}

/// Spawns `task` into `queue`, a queue this shard made (glommio refuses only an unknown one).
/// Runs the transaction coordinator's `sweep` every `every_ms` (timed-out transactions,
/// expired transactional ids), told the time.
fn spawn_sweep(
    queue: glommio::TaskQueueHandle,
    ctx: &Rc<ShardCtx>,
    every_ms: i64,
    sweep: fn(Rc<dyn crate::txn_coordinator::TxnHost>, i64),
) -> glommio::task::JoinHandle<()> {
    let ctx = ctx.clone();
    spawn_into(queue, async move {
        let every = std::time::Duration::from_millis(every_ms as u64);
        loop {
            glommio::timer::sleep(every).await;
            sweep(ctx.clone(), now_ms());
        }
    })
}

fn spawn_into(
    queue: glommio::TaskQueueHandle,
    task: impl std::future::Future<Output = ()> + 'static,
) -> glommio::task::JoinHandle<()> {
    glommio::spawn_local_into(task, queue)
        .expect("a task queue this shard created")
        .detach()
}

/// Listens on `addr` alone. glommio's own `bind` sets `SO_REUSEPORT`, so a second broker
/// started on a port in use (another ringlog, a copy left running) bound it too and the kernel
/// split the clients' connections between the two; a socket without it fails with "address in
/// use" instead, as Kafka's does.
fn bind_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = std::net::TcpListener::bind(addr)?;
    // SAFETY: `listen` on the socket's own open descriptor; it only changes the backlog.
    if unsafe { libc::listen(socket.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor is a bound, listening TCP socket whose ownership moves to
    // glommio's listener (`into_raw_fd` gives it up); this runs on the shard's executor.
    Ok(unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) })
}

/// Accepts connections on `socket` (listener `listener` of the config) until the node stops.
async fn accept_until_stopped(ctx: &Rc<ShardCtx>, socket: TcpListener, listener: usize) {
    // The accept future is polled only when a connection arrives or the shard stops: glommio's
    // listener keeps a clone of the task's waker for every poll of an accept, and a task polled
    // on a timer (every 50 ms while idle) overflowed glommio's waker count after 27 minutes and
    // panicked the shard ("Waker invariant broken").
    loop {
        if ctx.stop.is_stopping() {
            return;
        }
        let accept = async { Some(socket.accept().await) };
        let stop = async {
            ctx.stop.stopped().await;
            None
        };
        match futures_lite::future::or(accept, stop).await {
            None => return,
            Some(Ok(stream)) => {
                let ctx = ctx.clone();
                ctx.metrics.connection_accepted();
                glommio::spawn_local(async move {
                    ctx.connections.set(ctx.connections.get() + 1);
                    serve_connection(&ctx, stream, listener).await;
                    ctx.connections.set(ctx.connections.get() - 1);
                })
                .detach();
            }
            Some(Err(e)) => {
                tracing::warn!(shard = ctx.shard, error = %e, "accept failed");
                glommio::timer::sleep(ACCEPT_RETRY_DELAY).await;
            }
        }
    }
}
