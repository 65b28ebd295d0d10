//! The control plane: one thread owns the cluster metadata and changes it.
//!
//! Contract: only this thread changes metadata. Shards send it [`Command`]s and get back a reply
//! once every shard has applied the new [`Snapshot`] (so a topic is servable as soon as its
//! creation is acknowledged). Every change is saved to the [`MetadataStore`] before it is
//! broadcast. Snapshots are immutable and shared by `Arc`.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};

use futures_channel::{mpsc as fmpsc, oneshot};
use kafka_protocol::ResponseError;

use super::names::{refuse_internal, validate_topic_name};
use super::placement::place_partitions;
use super::snapshot::{Snapshot, TopicMeta};
use super::store::MetadataStore;
use crate::error::Refused;
use crate::limits::PARTITIONS_MAX;

/// The answer to a [`Command`].
pub type Reply = oneshot::Sender<Result<(), Refused>>;

/// A request to the control plane; the reply carries Kafka's error if it is refused.
pub enum Command {
    CreateTopic {
        name: String,
        partitions: i32,
        configs: BTreeMap<String, String>,
        reply: Reply,
    },
    DeleteTopic {
        name: String,
        reply: Reply,
    },
    CreatePartitions {
        name: String,
        count: i32,
        reply: Reply,
    },
}

/// A new snapshot for a shard; the shard answers on `applied` once it opened/closed its logs.
pub struct SnapshotUpdate {
    pub snapshot: Arc<Snapshot>,
    pub applied: oneshot::Sender<()>,
}

/// The control-plane thread's state.
pub struct Controller {
    store: Box<dyn MetadataStore>,
    shards: usize,
    snapshot: Snapshot,
    to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
}

impl Controller {
    /// A controller over `snapshot` (loaded from `store`), serving `to_shards.len()` shards.
    pub fn new(
        store: Box<dyn MetadataStore>,
        snapshot: Snapshot,
        to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
    ) -> Controller {
        Controller {
            store,
            shards: to_shards.len(),
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

    fn finish(&mut self, result: Result<bool, Refused>, reply: Reply) {
        let result = result.and_then(|changed| {
            if !changed {
                return Ok(());
            }
            self.snapshot.version += 1;
            self.store.save(&self.snapshot).map_err(|e| {
                Refused::new(
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
    ) -> Result<bool, Refused> {
        validate_topic_name(&name)?;
        if self.snapshot.topics.contains_key(&name) {
            return Err(Refused::new(
                ResponseError::TopicAlreadyExists,
                format!("topic '{name}' already exists"),
            ));
        }
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(Refused::new(
                ResponseError::InvalidPartitions,
                format!("{partitions} partitions; allowed 1..={PARTITIONS_MAX}"),
            ));
        }
        crate::topic_config::validate(&configs)
            .map_err(|e| Refused::new(ResponseError::InvalidConfig, e.to_string()))?;
        let topic = TopicMeta {
            name: name.clone(),
            id: uuid::Uuid::new_v4(),
            partitions: place_partitions(0, partitions, self.shards),
            configs,
        };
        self.snapshot.topics.insert(name, topic);
        Ok(true)
    }

    fn delete_topic(&mut self, name: &str) -> Result<bool, Refused> {
        refuse_internal(name, "deleted")?;
        if self.snapshot.topics.remove(name).is_none() {
            return Err(Refused::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            ));
        }
        Ok(true)
    }

    fn create_partitions(&mut self, name: &str, count: i32) -> Result<bool, Refused> {
        refuse_internal(
            name,
            "given more partitions (group coordinators would move)",
        )?;
        let shards = self.shards;
        let topic = self.snapshot.topics.get_mut(name).ok_or_else(|| {
            Refused::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            )
        })?;
        let have = topic.partitions.len() as i32;
        if count <= have || count > PARTITIONS_MAX {
            return Err(Refused::new(
                ResponseError::InvalidPartitions,
                format!("topic '{name}' has {have} partitions; asked for {count}"),
            ));
        }
        topic
            .partitions
            .extend(place_partitions(have, count, shards));
        Ok(true)
    }
}
