//! The cluster metadata the control plane hands to every shard: immutable, shared by `Arc`.

use std::collections::BTreeMap;

use iouring_log::LeaderEpoch;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionMeta {
    /// The node whose shard leads the partition; `None` (a single node's own metadata): this
    /// node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<i32>,
    pub shard: usize,
    #[serde(with = "crate::ids::leader_epoch_serde")]
    pub leader_epoch: LeaderEpoch,
}

impl PartitionMeta {
    /// Whether shard `shard` of node `node` leads it.
    pub fn is_led_by(&self, node: i32, shard: usize) -> bool {
        self.node.is_none_or(|n| n == node) && self.shard == shard
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionMeta>,
    pub configs: BTreeMap<String, String>,
}

/// A live node of a cluster, as it registered: its shards are brokers `node * 1000 + shard`
/// on `port + shard`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeInfo {
    pub node: i32,
    pub host: String,
    pub port: u16,
    pub shards: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u64,
    pub topics: BTreeMap<String, TopicMeta>,
    /// The live nodes of a cluster (metadata on etcd); empty for a single node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeInfo>,
    /// The node elected controller, in a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<i32>,
}

impl Snapshot {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMeta> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
    }

    /// The live node `node`, in a cluster.
    pub fn node(&self, node: i32) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.node == node)
    }
}
