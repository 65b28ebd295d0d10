//! The partitions a shard serves, following the metadata snapshots the control plane sends:
//! logs opened (and their idempotent producer state restored) for partitions it now owns, logs
//! closed and folders removed for topics that are gone.

use std::rc::Rc;
use std::sync::Arc;

use iouring_log::{Log, LogOptions};

use super::{now_ms, ShardCtx};
use crate::metadata::Snapshot;
use crate::partition::{dir_name, Limits, Partition};

impl ShardCtx {
    /// Opens the logs of partitions this shard now owns, closes and deletes those of topics
    /// that are gone.
    pub(super) async fn apply_snapshot(&self, snapshot: Arc<Snapshot>) {
        let mut wanted = Vec::new();
        for topic in snapshot.topics.values() {
            for (p, meta) in topic.partitions.iter().enumerate() {
                if meta.is_led_by(self.config.node_id.0, self.shard) {
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
                    let limits = Limits {
                        max_message_bytes: config.max_message_bytes,
                        min_insync_replicas: config.min_insync_replicas,
                    };
                    let part = Partition::new(topic.name.clone(), p, log, limits);
                    if let Err(e) = part.restore_producers().await {
                        tracing::error!(shard = self.shard, dir = %dir.display(), error = %e, "cannot restore idempotent producer state; the partition stays offline");
                        continue;
                    }
                    let part = Rc::new(part);
                    self.partitions
                        .borrow_mut()
                        .insert((topic.name.clone(), p), part.clone());
                    if topic.name == crate::metadata::OFFSETS_TOPIC {
                        self.groups.load_partition(&part, now_ms()).await;
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
}
