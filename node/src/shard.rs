//! A shard: one glommio executor pinned to one CPU, a Kafka broker endpoint of its own (listener
//! port base + shard, broker id node * 1000 + shard), and the partitions it owns. Nothing a
//! shard owns is touched by another thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc};

use futures_channel::mpsc as fmpsc;
use futures_lite::StreamExt;
use glommio::net::TcpListener;
use iouring_log::notify::Notify;
use iouring_log::{LeaderEpoch, Log, LogOptions};
use kafka_protocol::ResponseError;

use crate::config::BrokerConfig;
use crate::error::Refused;
use crate::limits::{
    ACCEPT_RETRY_DELAY, DRAIN_POLL_INTERVAL, MAINTENANCE_INTERVAL, STOP_POLL_INTERVAL,
};
use crate::metadata::{Command, Snapshot, SnapshotUpdate, TopicMeta};
use crate::partition::{dir_name, Partition};
use crate::server::connection::serve_connection;
use crate::topic_config::{TopicConfig, TopicConfigError, TopicOverrides};

/// Everything a shard's tasks share. Single-threaded: `Rc` and `RefCell`, no locks.
pub struct ShardCtx {
    pub shard: usize,
    pub config: Arc<BrokerConfig>,
    pub snapshot: RefCell<Arc<Snapshot>>,
    pub partitions: RefCell<HashMap<(String, i32), Rc<Partition>>>,
    pub commands: mpsc::Sender<Command>,
    /// Notified whenever a log of this shard has more written (or flushed) records, i.e. its
    /// high watermark may have moved: long-polling fetches re-check.
    pub data_arrived: Rc<Notify>,
    pub producer_ids: Arc<AtomicI64>,
    pub stopping: Arc<AtomicBool>,
    /// Notified once when the shard starts stopping: idle connections close at once.
    pub stop_notify: Notify,
    pub connections: Cell<usize>,
    /// The group coordinator for the `__consumer_offsets` partitions this shard leads.
    pub groups: crate::group::Coordinator,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ShardCtx {
    pub fn broker_id(&self) -> i32 {
        self.config.broker_id(self.shard)
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        self.partitions
            .borrow()
            .get(&(topic.to_owned(), index))
            .cloned()
    }

    /// Kafka's answer for a partition this shard does not serve: another shard leads it, or it
    /// does not exist.
    pub fn not_served(&self, topic: &str, index: i32) -> ResponseError {
        if self.snapshot.borrow().partition(topic, index).is_some() {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        }
    }

    /// The partition's current leader epoch, stamped into the batches appended to it.
    pub fn leader_epoch(&self, part: &Partition) -> LeaderEpoch {
        let epoch = self
            .snapshot
            .borrow()
            .partition(&part.topic, part.index)
            .map_or(0, |p| p.leader_epoch);
        LeaderEpoch(epoch)
    }

    /// A topic's effective configs: broker defaults overridden by the topic's own.
    pub fn topic_config(&self, topic: &TopicMeta) -> Result<TopicConfig, TopicConfigError> {
        TopicOverrides::parse(&topic.configs)?
            .resolve(&self.config.log, self.config.message_max_bytes)
    }

    /// Opens the logs of partitions this shard now owns, closes and deletes those of topics
    /// that are gone.
    async fn apply_snapshot(&self, snapshot: Arc<Snapshot>) {
        let mut wanted = Vec::new();
        for topic in snapshot.topics.values() {
            for (p, meta) in topic.partitions.iter().enumerate() {
                if meta.shard == self.shard {
                    wanted.push((topic, p as i32));
                }
            }
        }
        for (topic, p) in wanted {
            if self.partition(&topic.name, p).is_some() {
                continue;
            }
            let dir = self.config.log_dir.join(dir_name(&topic.name, p));
            let config = match self.topic_config(topic) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(shard = self.shard, topic = %topic.name, error = %e, "invalid topic config; the partition stays offline");
                    continue;
                }
            };
            let options = LogOptions {
                progress_listener: Some(self.data_arrived.clone()),
                ..LogOptions::default()
            };
            match Log::open_with(&dir, config.log, now_ms(), options).await {
                Ok(log) => {
                    let part = Partition::new(topic.name.clone(), p, log, config.max_message_bytes);
                    if let Err(e) = part.restore_producers().await {
                        tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot restore idempotent producer state; the partition stays offline");
                        continue;
                    }
                    let part = Rc::new(part);
                    self.partitions
                        .borrow_mut()
                        .insert((topic.name.clone(), p), part.clone());
                    if topic.name == crate::metadata::OFFSETS_TOPIC {
                        self.groups.load_partition(&part).await;
                    }
                }
                Err(e) => {
                    tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot open partition; it stays offline")
                }
            }
        }
        let gone: Vec<(String, i32)> = self
            .partitions
            .borrow()
            .keys()
            .filter(|(t, p)| snapshot.partition(t, *p).is_none())
            .cloned()
            .collect();
        for key in gone {
            let part = self.partitions.borrow_mut().remove(&key);
            if let Some(part) = part {
                if part.topic == crate::metadata::OFFSETS_TOPIC {
                    let count = self
                        .snapshot
                        .borrow()
                        .topics
                        .get(&part.topic)
                        .map_or(0, |t| t.partitions.len());
                    self.groups.unload_partition(part.index, count as i32);
                }
                if let Err(e) = part.log.close().await {
                    tracing::warn!(error = %e, "closing a deleted partition");
                }
                let dir = part.log.dir().to_path_buf();
                // Directory removal has no io_uring operation; deleting a topic is rare.
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(dir = %dir.display(), error = %e, "removing a deleted partition's folder");
                }
            }
        }
        *self.snapshot.borrow_mut() = snapshot;
    }

    /// Sends a command to the control plane and waits for its answer.
    pub async fn control(
        &self,
        make: impl FnOnce(crate::metadata::controller::Reply) -> Command,
    ) -> Result<(), Refused> {
        let gone = || {
            Refused::new(
                ResponseError::UnknownServerError,
                "the control plane stopped",
            )
        };
        let (tx, rx) = futures_channel::oneshot::channel();
        self.commands.send(make(tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    pub fn next_producer_id(&self) -> i64 {
        self.producer_ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Retention and `flush.ms` on every partition of the shard.
    async fn maintain(&self, check_retention: bool) {
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
    async fn close_all(&self) {
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

/// Runs shard `shard` until `stopping` is set; returns after its logs are closed.
pub async fn run_shard(ctx: Rc<ShardCtx>, mut updates: fmpsc::UnboundedReceiver<SnapshotUpdate>) {
    let addr = std::net::SocketAddr::new(
        ctx.config.listen.ip(),
        ctx.config.listen.port() + ctx.shard as u16,
    );
    // The first snapshot arrives before any client is served.
    if let Some(u) = updates.next().await {
        ctx.apply_snapshot(u.snapshot).await;
        u.applied.send(()).ok();
    }
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(shard = ctx.shard, %addr, error = %e, "cannot listen");
            ctx.stopping.store(true, Ordering::SeqCst);
            return;
        }
    };
    tracing::info!(shard = ctx.shard, %addr, broker_id = ctx.broker_id(), "listening");
    let updater = glommio::spawn_local({
        let ctx = ctx.clone();
        async move {
            while let Some(u) = updates.next().await {
                ctx.apply_snapshot(u.snapshot).await;
                u.applied.send(()).ok();
            }
        }
    })
    .detach();
    let maintenance = glommio::spawn_local({
        let ctx = ctx.clone();
        async move {
            let mut last_retention = now_ms();
            loop {
                glommio::timer::sleep(MAINTENANCE_INTERVAL).await;
                let due =
                    now_ms() - last_retention >= ctx.config.retention_check_interval_ms as i64;
                if due {
                    last_retention = now_ms();
                }
                ctx.maintain(due).await;
            }
        }
    })
    .detach();
    let group_ticker = crate::group::spawn_ticker(ctx.clone());
    accept_until_stopped(&ctx, listener).await;
    group_ticker.cancel();
    maintenance.cancel();
    // In-flight requests finish: connections close after their current request.
    while ctx.connections.get() > 0 {
        glommio::timer::sleep(DRAIN_POLL_INTERVAL).await;
    }
    ctx.close_all().await;
    updater.cancel();
    tracing::info!(shard = ctx.shard, "stopped");
}

/// Watches the process-wide `stopping` flag (set by the signal thread, so it cannot wake this
/// shard's tasks itself) and turns it into `stop_notify`, once.
async fn watch_for_stop(ctx: Rc<ShardCtx>) {
    while !ctx.stopping.load(Ordering::SeqCst) {
        glommio::timer::sleep(STOP_POLL_INTERVAL).await;
    }
    ctx.stop_notify.notify_all();
}


async fn accept_until_stopped(ctx: &Rc<ShardCtx>, listener: TcpListener) {
    // The accept future is polled only when a connection arrives or the shard stops: glommio's
    // listener keeps a clone of the task's waker for every poll of an accept, and a task polled
    // on a timer (every 50 ms while idle) overflowed glommio's waker count after 27 minutes and
    // panicked the shard ("Waker invariant broken").
    glommio::spawn_local(watch_for_stop(ctx.clone())).detach();
    loop {
        let seen = ctx.stop_notify.generation();
        if ctx.stopping.load(Ordering::SeqCst) {
            return;
        }
        let accept = async { Some(listener.accept().await) };
        let stop = async {
            ctx.stop_notify.changed(seen).await;
            None
        };
        match futures_lite::future::or(accept, stop).await {
            None => return,
            Some(Ok(stream)) => {
                let ctx = ctx.clone();
                glommio::spawn_local(async move {
                    ctx.connections.set(ctx.connections.get() + 1);
                    serve_connection(&ctx, stream).await;
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
