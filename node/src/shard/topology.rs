//! The partitions a shard serves, following the metadata snapshots the control plane sends:
//! logs opened (and their idempotent producer state restored) for partitions it now owns, logs
//! closed and folders removed for topics that are gone.

use std::rc::Rc;
use std::sync::Arc;

use iouring_log::notify::Notify;
use iouring_log::{Log, LogOptions};

use replication::ReplicaId;

use super::{now_ms, ShardCtx};
use crate::metadata::Snapshot;
use crate::partition::replica::RoleContext;
use crate::partition::{dir_name, Limits, Partition};

impl ShardCtx {
    /// Opens the logs of partitions this shard now owns, closes and deletes those of topics
    /// that are gone.
    pub(super) async fn apply_snapshot(&self, snapshot: Arc<Snapshot>) {
        let mut wanted = Vec::new();
        for topic in snapshot.topics.values() {
            for (p, meta) in topic.partitions.iter().enumerate() {
                if meta.has_replica_on(self.config.node_id.0, self.shard) {
                    wanted.push((topic, p as i32));
                }
            }
        }
        let mut opened = std::collections::HashSet::new();
        for (topic, p) in wanted {
            if self.replica(&topic.name, p).is_some() {
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
            // The partition's own signal: its log's writes, its high watermark and role changes
            // wake only what waits on this partition.
            let notify = Rc::new(Notify::default());
            let options = LogOptions {
                progress_listener: Some(notify.clone()),
                ..LogOptions::default()
            };
            match Log::open_with(&dir, config.log, now_ms(), options).await {
                Ok(log) => {
                    let limits = Limits {
                        max_message_bytes: config.max_message_bytes,
                        min_insync_replicas: config.min_insync_replicas,
                    };
                    let part = Partition::new(topic.name.clone(), p, log, limits, notify);
                    if let Err(e) = part.restore_producers().await {
                        tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot restore idempotent producer state; the partition stays offline");
                        continue;
                    }
                    if let Err(e) = part.restore_high_watermark().await {
                        tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot read the high watermark checkpoint; the partition stays offline");
                        continue;
                    }
                    let part = Rc::new(part);
                    self.partitions
                        .borrow_mut()
                        .insert((topic.name.clone(), p), part.clone());
                    opened.insert((topic.name.clone(), p));
                }
                Err(e) => {
                    tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot open partition; it stays offline")
                }
            }
        }
        self.apply_roles(&snapshot, &opened).await;
        let me = (self.config.node_id.0, self.shard);
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

    /// Each local replica takes the role the snapshot gives it (leader, follower, only
    /// replica, offline); the group coordinator loads a `__consumer_offsets` partition this
    /// shard starts leading and unloads one it stops leading.
    async fn apply_roles(
        &self,
        snapshot: &Snapshot,
        opened: &std::collections::HashSet<(String, i32)>,
    ) {
        let me = ReplicaId(self.config.node_id.0);
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
                    leader = ?meta.node,
                    leader_epoch = meta.leader_epoch.0,
                    leading = part.is_leader(),
                    "replica role changed"
                );
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
