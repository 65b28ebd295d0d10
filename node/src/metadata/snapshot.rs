//! The cluster metadata the control plane hands to every shard: immutable, shared by `Arc`.

use std::collections::BTreeMap;

use iouring_log::LeaderEpoch;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionMeta {
    pub shard: usize,
    #[serde(with = "crate::ids::leader_epoch_serde")]
    pub leader_epoch: LeaderEpoch,
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
