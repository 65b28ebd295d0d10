//! The partitions a shard serves, following the metadata snapshots the control plane sends:
//! logs opened (and their idempotent producer state restored) for partitions it now owns, logs
//! closed and folders removed for topics that are gone.

use std::rc::Rc;
use std::sync::Arc;

use iouring_log::Notify;
use iouring_log::{free_bytes, Log, LogOptions};

use replication::ReplicaId;

use super::{now_ms, ShardCtx};
use crate::config::dynamic;
use crate::limits::{LOG_OPEN_CLOSE_CONCURRENCY, LOG_REOPEN_INTERVAL, LOG_REOPEN_MIN_FREE_BYTES};
use crate::metadata::{Snapshot, TopicMeta};
use crate::partition::replica::RoleContext;
use crate::partition::{dir_name, Limits, Partition};
use crate::replica::throttle::Throttled;
use crate::topic_config::ThrottledReplicas;
use futures_util::stream::{self, StreamExt};
use std::collections::HashMap;

impl ShardCtx {
    /// Opens the logs of partitions this shard now owns, closes and deletes those of topics
    /// that are gone.
    pub(super) async fn apply_snapshot(self: &Rc<Self>, snapshot: Arc<Snapshot>) {
        let _topology = self.lock_topology().await;
        let mut wanted = Vec::new();
        for topic in snapshot.topics.values() {
            for (p, meta) in topic.partitions.iter().enumerate() {
                if meta.has_replica_on(self.config.node_id, self.shard) {
                    wanted.push((topic, p as i32));
                }
            }
        }
        let mut opened = std::collections::HashSet::new();
        // Several logs open at once (a restart of a node with 10 000 partitions opened them one
        // after the other in 25 s).
        let to_open: Vec<(&TopicMeta, i32)> = wanted
            .into_iter()
            .filter(|(t, p)| self.replica(&t.name, *p).is_none())
            .collect();
        let results: Vec<_> = stream::iter(to_open)
            .map(|(topic, p)| {
                let snapshot = &snapshot;
                async move { (topic, p, self.open_partition(topic, p, snapshot).await) }
            })
            .buffer_unordered(LOG_OPEN_CLOSE_CONCURRENCY)
            .collect()
            .await;
        for (topic, p, part) in results {
            if let Some(part) = part {
                self.partitions
                    .borrow_mut()
                    .insert((topic.name.clone(), p), part);
                opened.insert((topic.name.clone(), p));
            }
        }
        self.apply_roles(&snapshot, &opened).await;
        let me = (self.config.node_id, self.shard);
        let gone: Vec<(String, i32)> = self
            .partitions
            .borrow()
            .keys()
            .filter(|(t, p)| {
                snapshot
                    .partition(t, *p)
                    .is_none_or(|m| !m.has_replica_on(me.0, me.1))
            })
            .cloned()
            .collect();
        let removed: Vec<Rc<Partition>> = gone
            .into_iter()
            .filter_map(|key| {
                self.reopen_due.borrow_mut().remove(&key);
                self.stop_serving(&key)
            })
            .collect();
        stream::iter(removed)
            .for_each_concurrent(LOG_OPEN_CLOSE_CONCURRENCY, |part| async move {
                self.remove_partition(&part).await
            })
            .await;
        self.apply_altered_configs(&snapshot);
        self.apply_throttles(&snapshot);
        *self.snapshot.borrow_mut() = snapshot;
    }

    /// At start, before any log opens: removes the folders of replicas this node no longer
    /// holds — moved off it or of a topic deleted while it was down (Kafka's stray replicas) —
    /// so they are neither served nor reopened if a replica comes back here later (it then
    /// fetches from the leader's log start like any new replica).
    pub(super) async fn remove_stray_replicas(&self, snapshot: &Snapshot) {
        let me = self.config.node_id;
        let entries = match std::fs::read_dir(&self.config.log_dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(dir = %self.config.log_dir.display(), error = %e, "cannot list the log directory for stray replicas");
                return;
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((topic, p)) = name
                .rsplit_once('-')
                .and_then(|(t, p)| Some((t, p.parse::<i32>().ok()?)))
            else {
                continue;
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir())
                || crate::metadata::validate_topic_name(topic).is_err()
            {
                continue;
            }
            let held = match snapshot.topics.get(topic) {
                None => false,
                Some(t) => usize::try_from(p)
                    .ok()
                    .and_then(|i| t.partitions.get(i))
                    .is_some_and(|m| {
                        // No replica recorded (an offline partition of one replica): keep it.
                        let slots = m.slots();
                        m.leader.is_local()
                            || slots.is_empty()
                            || slots.iter().any(|s| s.node == me)
                    }),
            };
            if held {
                continue;
            }
            tracing::warn!(dir = %entry.path().display(), "removing a stray replica: this node no longer holds it (moved away or its topic deleted while the node was down)");
            let path = entry.path();
            let removed = glommio::executor()
                .spawn_blocking(move || std::fs::remove_dir_all(path))
                .await;
            if let Err(e) = removed {
                tracing::warn!(dir = %entry.path().display(), error = %e, "cannot remove a stray replica");
            }
        }
    }

    /// This shard's replication throttle rates (its broker's dynamic configs, else the
    /// cluster's) and which of its replicas the topics' throttled replica lists name.
    fn apply_throttles(&self, snapshot: &Snapshot) {
        let broker = self.broker_id().0;
        let now = std::time::Instant::now();
        let quotas = &self.replication_quotas;
        let rate = |name| dynamic::rate(snapshot.broker_config(broker, name));
        quotas
            .leader
            .borrow_mut()
            .set_rate(rate(dynamic::LEADER_THROTTLED_RATE), now);
        quotas
            .follower
            .borrow_mut()
            .set_rate(rate(dynamic::FOLLOWER_THROTTLED_RATE), now);
        let mut lists: HashMap<&str, (ThrottledReplicas, ThrottledReplicas)> = HashMap::new();
        for part in self.partitions.borrow().values() {
            let Some(topic) = snapshot.topics.get(&part.topic) else {
                continue;
            };
            let (leader, follower) = lists.entry(&topic.name).or_insert_with(|| {
                (
                    ThrottledReplicas::of(&topic.configs, "leader.replication.throttled.replicas"),
                    ThrottledReplicas::of(
                        &topic.configs,
                        "follower.replication.throttled.replicas",
                    ),
                )
            });
            part.set_throttled(Throttled {
                leader: leader.contains(part.index, broker),
                follower: follower.contains(part.index, broker),
            });
        }
    }

    /// Gives the open partitions of topics whose configs changed since the last snapshot their
    /// new settings (IncrementalAlterConfigs): the log's segment size, roll, flush and
    /// retention settings and the partition's batch size and `min.insync.replicas` limits.
    fn apply_altered_configs(&self, snapshot: &Snapshot) {
        let old = self.snapshot.borrow().clone();
        // a dynamic broker default changed: every topic may follow it
        let defaults_changed =
            self.dynamic_cleanup_policy(&old) != self.dynamic_cleanup_policy(snapshot);
        for topic in snapshot.topics.values() {
            if !defaults_changed
                && old
                    .topics
                    .get(&topic.name)
                    .is_none_or(|o| o.configs == topic.configs)
            {
                continue;
            }
            let config = match self.topic_config_in(topic, snapshot) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(shard = self.shard, topic = %topic.name, error = %e, "altered topic config invalid; partitions keep their settings");
                    continue;
                }
            };
            let parts: Vec<Rc<Partition>> = self
                .partitions
                .borrow()
                .iter()
                .filter(|((t, _), _)| *t == topic.name)
                .map(|(_, p)| p.clone())
                .collect();
            for part in parts {
                if let Err(e) = part.log.set_config(config.log) {
                    tracing::error!(shard = self.shard, topic = %topic.name, partition = part.index, error = %e, "altered log config refused");
                    continue;
                }
                part.set_limits(Limits {
                    max_message_bytes: config.max_message_bytes,
                    min_insync_replicas: config.min_insync_replicas,
                    timestamps: config.timestamps,
                    compression: config.compression,
                });
            }
        }
    }

    /// Takes `key`'s partition out of the shard's map and notifies its progress signal at once:
    /// long polls waiting on it look again and find it gone, and the fetch sessions watching it
    /// mark it as moved, so their next request reads it (and answers the error).
    fn stop_serving(&self, key: &(String, i32)) -> Option<Rc<Partition>> {
        let part = self.partitions.borrow_mut().remove(key)?;
        part.progress().notify_all();
        Some(part)
    }

    /// Closes the log of a partition of a deleted topic and removes its folder, on glommio's
    /// helper thread (no io_uring operation removes a directory, a topic of 1000 partitions
    /// would block the shard for as long as the file system takes, and freeing a large
    /// segment's blocks is slow: `Log::remove_closed`).
    async fn remove_partition(&self, part: &Partition) {
        if part.topic == crate::metadata::TRANSACTION_STATE_TOPIC {
            self.txns.unload_partition(part.index);
        }
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
        if let Err(e) = part.log.remove_closed().await {
            tracing::warn!(error = %e, "removing a deleted partition's folder");
        }
    }

    /// Opens the log of `topic`-`p` and restores its idempotent producer state and high
    /// watermark checkpoint: a partition with no role yet (`apply_roles` gives it one). `None`
    /// (logged) when any of it fails: the partition stays offline.
    async fn open_partition(
        &self,
        topic: &TopicMeta,
        p: i32,
        snapshot: &Snapshot,
    ) -> Option<Rc<Partition>> {
        let dir = self.config.log_dir.join(dir_name(&topic.name, p));
        let config = match self.topic_config_in(topic, snapshot) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(shard = self.shard, topic = %topic.name, error = %e, "invalid topic config; the partition stays offline");
                return None;
            }
        };
        // The partition's own signal: its log's writes, its high watermark and role changes
        // wake only what waits on this partition.
        let notify = Rc::new(Notify::default());
        let options = LogOptions {
            progress_listener: Some(notify.clone()),
            ..LogOptions::default()
        };
        let log = match Log::open_with(&dir, config.log, now_ms(), options).await {
            Ok(log) => log,
            Err(e) => {
                tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot open partition; it stays offline");
                return None;
            }
        };
        let limits = Limits {
            max_message_bytes: config.max_message_bytes,
            min_insync_replicas: config.min_insync_replicas,
            timestamps: config.timestamps,
            compression: config.compression,
        };
        let part = Partition::new(topic.name.clone(), p, log, limits, notify);
        if let Err(e) = part.restore_producers().await {
            tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot restore idempotent producer state; the partition stays offline");
            return None;
        }
        if let Err(e) = part.restore_high_watermark().await {
            tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot read the high watermark checkpoint; the partition stays offline");
            return None;
        }
        Some(Rc::new(part))
    }

    /// Reopens a partition whose log failed because its disk was full (ENOSPC or EDQUOT) once
    /// the disk has room again, so writes resume without a restart; a log failed by another I/O
    /// error (EIO: the device) stays offline until the node restarts, as Kafka takes a failed
    /// log directory offline. The failed log is retired
    /// first (none of its I/O still running); the new one validates the tail the failure left
    /// (recovery, as after a crash), restores producer state and high watermark, and takes the
    /// role the current snapshot gives it. Until then the failed log serves reads of what it
    /// wrote and produce gets KAFKA_STORAGE_ERROR. Retried every [`LOG_REOPEN_INTERVAL`].
    pub(super) async fn reopen_failed(self: &Rc<Self>, failed: &Rc<Partition>) {
        if !failed
            .log
            .failure()
            .is_some_and(|f| f.recoverable_with_space())
        {
            return;
        }
        let key = (failed.topic.clone(), failed.index);
        let now = std::time::Instant::now();
        if self
            .reopen_due
            .borrow()
            .get(&key)
            .is_some_and(|due| now < *due)
        {
            return;
        }
        self.reopen_due
            .borrow_mut()
            .insert(key.clone(), now + LOG_REOPEN_INTERVAL);
        match free_bytes(failed.log.dir()) {
            Ok(free) if free >= LOG_REOPEN_MIN_FREE_BYTES => {}
            Ok(free) => {
                tracing::debug!(shard = self.shard, topic = %failed.topic, partition = failed.index, free, "failed log not reopened: its disk is still full");
                return;
            }
            Err(e) => {
                tracing::warn!(shard = self.shard, dir = %failed.log.dir().display(), error = %e, "cannot read the free space of a failed log's disk");
                return;
            }
        }
        let _topology = self.lock_topology().await;
        let snapshot = self.snapshot.borrow().clone();
        let Some(topic) = snapshot.topics.get(&failed.topic) else {
            return;
        };
        let current = self.replica(&failed.topic, failed.index);
        if !current.is_some_and(|c| Rc::ptr_eq(&c, failed)) {
            return; // reopened or removed meanwhile
        }
        tracing::info!(shard = self.shard, topic = %failed.topic, partition = failed.index, reason = ?failed.log.failure(), "reopening a failed log");
        self.stop_serving(&key);
        if failed.topic == crate::metadata::TRANSACTION_STATE_TOPIC {
            self.txns.unload_partition(failed.index);
        }
        if failed.topic == crate::metadata::OFFSETS_TOPIC && failed.is_leader() {
            self.groups
                .unload_partition(failed.index, topic.partitions.len() as i32);
        }
        // Retiring notifies the partition's signal (the log's progress listener): waiters on
        // the failed partition look again and find it gone.
        if let Err(e) = failed.log.retire_failed().await {
            tracing::warn!(error = %e, "retiring a failed log");
        }
        let Some(part) = self.open_partition(topic, failed.index, &snapshot).await else {
            return;
        };
        self.partitions.borrow_mut().insert(key.clone(), part);
        self.apply_roles(&snapshot, &std::collections::HashSet::from([key]))
            .await;
    }

    /// Each local replica takes the role the snapshot gives it (leader, follower, only
    /// replica, offline); the group coordinator loads a `__consumer_offsets` partition this
    /// shard starts leading and unloads one it stops leading.
    async fn apply_roles(
        self: &Rc<Self>,
        snapshot: &Snapshot,
        opened: &std::collections::HashSet<(String, i32)>,
    ) {
        let me = ReplicaId::from(self.config.node_id);
        let cx = RoleContext {
            me,
            now_ms: now_ms(),
            replica_lag_max_ms: self.config.replica.lag_time_max_ms,
        };
        let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for part in parts {
            let Some(meta) = snapshot.partition(&part.topic, part.index) else {
                continue;
            };
            let is_new = opened
                .iter()
                .any(|(t, p)| *t == part.topic && *p == part.index);
            let was_leader = part.is_leader() && !is_new;
            let state = meta.is_replicated().then(|| meta.state());
            if part.apply_state(state.as_ref(), cx) && meta.is_replicated() {
                tracing::info!(
                    shard = self.shard,
                    topic = %part.topic,
                    partition = part.index,
                    leader = ?meta.leader,
                    leader_epoch = meta.leader_epoch.0,
                    leading = part.is_leader(),
                    "replica role changed"
                );
            }
            if part.topic == crate::metadata::TRANSACTION_STATE_TOPIC {
                // Loaded again when it leads in a new epoch: the coordinator epoch changes.
                let loaded = self.txns.loaded_epoch(part.index);
                let epoch = meta.leader_epoch.0;
                if part.is_leader() && loaded != Some(epoch) {
                    crate::txn_coordinator::load_partition(self.clone(), &part, epoch).await;
                } else if !part.is_leader() && loaded.is_some() {
                    self.txns.unload_partition(part.index);
                }
            }
            if part.topic == crate::metadata::OFFSETS_TOPIC && part.is_leader() != was_leader {
                if part.is_leader() {
                    self.groups.load_partition(&part, now_ms()).await;
                } else {
                    let count = snapshot
                        .topics
                        .get(&part.topic)
                        .map_or(0, |t| t.partitions.len());
                    self.groups.unload_partition(part.index, count as i32);
                }
            }
        }
    }
}
