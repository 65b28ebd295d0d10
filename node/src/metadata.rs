//! Cluster metadata for a single node: topics, their partitions' owning shards and per-topic
//! configs, persisted in the data dir (the embedded store), owned by one control-plane thread.
//!
//! Contract: only the control-plane thread changes metadata. Shards send it [`Command`]s and
//! get back a reply once every shard has applied the new [`Snapshot`] (so a topic is servable
//! as soon as its creation is acknowledged). Snapshots are immutable and shared by `Arc`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use futures_channel::{mpsc as fmpsc, oneshot};
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

use crate::limits::{PARTITIONS_MAX, TOPIC_NAME_MAX};

pub const METADATA_FILE: &str = "__ringlog_metadata.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionMeta {
    pub shard: usize,
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionMeta>,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u64,
    pub topics: BTreeMap<String, TopicMeta>,
}

impl Snapshot {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMeta> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
    }
}

/// A request to the control plane; the reply carries Kafka's error if it is refused.
pub enum Command {
    CreateTopic {
        name: String,
        partitions: i32,
        configs: BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), (ResponseError, String)>>,
    },
    DeleteTopic {
        name: String,
        reply: oneshot::Sender<Result<(), (ResponseError, String)>>,
    },
    CreatePartitions {
        name: String,
        count: i32,
        reply: oneshot::Sender<Result<(), (ResponseError, String)>>,
    },
}

/// A new snapshot for a shard; the shard answers on `applied` once it opened/closed its logs.
pub struct SnapshotUpdate {
    pub snapshot: Arc<Snapshot>,
    pub applied: oneshot::Sender<()>,
}

/// Kafka's internal topics: written only by the broker itself.
pub fn is_internal(name: &str) -> bool {
    name == crate::group::OFFSETS_TOPIC
}

fn refuse_internal(name: &str, what: &str) -> Result<(), (ResponseError, String)> {
    if is_internal(name) {
        return Err((
            ResponseError::InvalidTopicException,
            format!("'{name}' is an internal topic and cannot be {what}"),
        ));
    }
    Ok(())
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(format!("topic name '{name}' is not allowed"));
    }
    if name.len() > TOPIC_NAME_MAX {
        return Err(format!(
            "topic name is {} characters; the limit is {TOPIC_NAME_MAX}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name '{name}' contains '{c}'; allowed are ASCII letters, digits, '.', '_', '-'"
        ));
    }
    Ok(())
}

/// Loads the persisted snapshot, or an empty one.
pub fn load(dir: &Path) -> Result<Snapshot, String> {
    let path = dir.join(METADATA_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Snapshot::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the snapshot atomically (temp file, fsync, rename, fsync the folder). Runs on the
/// control-plane thread, where blocking I/O is allowed.
fn persist(dir: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{METADATA_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec_pretty(snapshot).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(METADATA_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

/// The control-plane thread's state.
pub struct Controller {
    dir: PathBuf,
    shards: usize,
    snapshot: Snapshot,
    to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
}

impl Controller {
    pub fn new(
        dir: PathBuf,
        shards: usize,
        snapshot: Snapshot,
        to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
    ) -> Controller {
        Controller {
            dir,
            shards,
            snapshot,
            to_shards,
        }
    }

    /// Runs until every command sender is gone.
    pub fn run(mut self, commands: mpsc::Receiver<Command>) {
        self.broadcast();
        while let Ok(cmd) = commands.recv() {
            match cmd {
                Command::CreateTopic {
                    name,
                    partitions,
                    configs,
                    reply,
                } => {
                    let r = self.create_topic(name, partitions, configs);
                    self.finish(r, reply);
                }
                Command::DeleteTopic { name, reply } => {
                    let r = self.delete_topic(&name);
                    self.finish(r, reply);
                }
                Command::CreatePartitions { name, count, reply } => {
                    let r = self.create_partitions(&name, count);
                    self.finish(r, reply);
                }
            }
        }
    }

    fn finish(
        &mut self,
        result: Result<bool, (ResponseError, String)>,
        reply: oneshot::Sender<Result<(), (ResponseError, String)>>,
    ) {
        let result = result.and_then(|changed| {
            if !changed {
                return Ok(());
            }
            self.snapshot.version += 1;
            persist(&self.dir, &self.snapshot).map_err(|e| {
                (
                    ResponseError::KafkaStorageError,
                    format!("persisting metadata: {e}"),
                )
            })?;
            self.broadcast();
            Ok(())
        });
        // The requester may have gone (connection closed); nothing to tell then.
        reply.send(result).ok();
    }

    /// Sends the snapshot to every shard and waits until each applied it.
    fn broadcast(&self) {
        let snapshot = Arc::new(self.snapshot.clone());
        let mut waits = Vec::new();
        for tx in &self.to_shards {
            let (applied, done) = oneshot::channel();
            if tx
                .unbounded_send(SnapshotUpdate {
                    snapshot: snapshot.clone(),
                    applied,
                })
                .is_ok()
            {
                waits.push(done);
            }
        }
        for w in waits {
            // A shard that stopped drops its sender: treat as applied.
            futures_lite::future::block_on(w).ok();
        }
    }

    fn create_topic(
        &mut self,
        name: String,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<bool, (ResponseError, String)> {
        validate_topic_name(&name).map_err(|m| (ResponseError::InvalidTopicException, m))?;
        if self.snapshot.topics.contains_key(&name) {
            return Err((
                ResponseError::TopicAlreadyExists,
                format!("topic '{name}' already exists"),
            ));
        }
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err((
                ResponseError::InvalidPartitions,
                format!("{partitions} partitions; allowed 1..={PARTITIONS_MAX}"),
            ));
        }
        crate::topic_config::validate(&configs)
            .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
        let parts = (0..partitions)
            .map(|p| PartitionMeta {
                shard: p as usize % self.shards,
                leader_epoch: 0,
            })
            .collect();
        let topic = TopicMeta {
            name: name.clone(),
            id: uuid::Uuid::new_v4(),
            partitions: parts,
            configs,
        };
        self.snapshot.topics.insert(name, topic);
        Ok(true)
    }

    fn delete_topic(&mut self, name: &str) -> Result<bool, (ResponseError, String)> {
        refuse_internal(name, "deleted")?;
        if self.snapshot.topics.remove(name).is_none() {
            return Err((
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            ));
        }
        Ok(true)
    }

    fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
    ) -> Result<bool, (ResponseError, String)> {
        refuse_internal(
            name,
            "given more partitions (group coordinators would move)",
        )?;
        let shards = self.shards;
        let topic = self.snapshot.topics.get_mut(name).ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            )
        })?;
        let have = topic.partitions.len() as i32;
        if count <= have || count > PARTITIONS_MAX {
            return Err((
                ResponseError::InvalidPartitions,
                format!("topic '{name}' has {have} partitions; asked for {count}"),
            ));
        }
        for p in have..count {
            topic.partitions.push(PartitionMeta {
                shard: p as usize % shards,
                leader_epoch: 0,
            });
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }
}
