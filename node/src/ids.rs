//! Typed identifiers that cross modules. Offsets and leader epochs are `iouring_log`'s
//! [`Offset`](iouring_log::Offset) and [`LeaderEpoch`]; broker ids are Kafka's
//! [`BrokerId`](kafka_protocol::messages::BrokerId).

use iouring_log::LeaderEpoch;
use replication::ReplicaId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A ringlog node (`node.id`): one machine, running one shard per core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub i32);

impl std::str::FromStr for NodeId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<NodeId, Self::Err> {
        s.parse().map(NodeId)
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A replica of a partition is named by its node (never two replicas of a partition on one
/// node): the `replication` crate's [`ReplicaId`] is a node id.
impl From<NodeId> for ReplicaId {
    fn from(node: NodeId) -> ReplicaId {
        ReplicaId(node.0)
    }
}

impl From<ReplicaId> for NodeId {
    fn from(replica: ReplicaId) -> NodeId {
        NodeId(replica.0)
    }
}

/// Kafka's broker id of shard `shard` of node `node`: every shard is a broker of its own.
pub fn broker_id(node: NodeId, shard: usize) -> kafka_protocol::messages::BrokerId {
    kafka_protocol::messages::BrokerId(node.0 * 1000 + shard as i32)
}

/// The node whose shard is Kafka broker `broker` (the inverse of [`broker_id`]).
pub fn node_of(broker: i32) -> NodeId {
    NodeId(broker.div_euclid(1000))
}

/// The shard (of node [`node_of`]) that is Kafka broker `broker`.
pub fn shard_of(broker: i32) -> usize {
    broker.rem_euclid(1000) as usize
}

/// A leader epoch in the persisted metadata, as the plain number Kafka stores.
pub mod leader_epoch_serde {
    use super::*;

    pub fn serialize<S: Serializer>(epoch: &LeaderEpoch, s: S) -> Result<S::Ok, S::Error> {
        epoch.0.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LeaderEpoch, D::Error> {
        i32::deserialize(d).map(LeaderEpoch)
    }
}
