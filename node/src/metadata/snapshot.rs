//! The cluster metadata the control plane hands to every shard: immutable, shared by `Arc`.

use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpoch;
use replication::{PartitionState, ReplicaId};
use serde::{Deserialize, Serialize};

use crate::ids::NodeId;
use crate::security::acl::Acls;
use crate::security::sasl::UserCredentials;

/// One replica's home: a node and one of its shards.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Slot {
    pub node: NodeId,
    pub shard: usize,
}

/// Who leads a partition (on the partition's `shard` of that node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leader {
    /// This node: a single node's own metadata names no node.
    #[default]
    Local,
    /// A node of the cluster.
    Node(NodeId),
    /// No replica may lead the partition now (Kafka's leader -1).
    Offline,
}

impl Leader {
    pub fn is_local(&self) -> bool {
        *self == Leader::Local
    }

    /// The cluster node it names: `None` for [`Leader::Local`] and [`Leader::Offline`].
    pub fn node(self) -> Option<NodeId> {
        match self {
            Leader::Node(n) => Some(n),
            Leader::Local | Leader::Offline => None,
        }
    }
}

/// [`Leader`] as the metadata stores keep it, Kafka's way: the leader's node id, -1 when
/// offline, absent for a single node's own partitions.
mod leader_serde {
    use super::{Leader, NodeId};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The leader id Kafka stores for an offline partition.
    const OFFLINE: i32 = -1;

    pub fn serialize<S: Serializer>(leader: &Leader, s: S) -> Result<S::Ok, S::Error> {
        match leader {
            Leader::Local => None::<i32>.serialize(s),
            Leader::Node(n) => Some(n.0).serialize(s),
            Leader::Offline => Some(OFFLINE).serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Leader, D::Error> {
        Ok(match Option::<i32>::deserialize(d)? {
            None => Leader::Local,
            Some(OFFLINE) => Leader::Offline,
            Some(n) => Leader::Node(NodeId(n)),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionMeta {
    /// Who leads it (stored as `node`, Kafka's leader id).
    #[serde(
        rename = "node",
        default,
        skip_serializing_if = "Leader::is_local",
        with = "leader_serde"
    )]
    pub leader: Leader,
    pub shard: usize,
    #[serde(with = "crate::ids::leader_epoch_serde")]
    pub leader_epoch: LeaderEpoch,
    /// Every replica's home, the preferred leader first; empty: one replica, the leader (a
    /// single node, or a cluster topic with replication factor 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<Slot>,
    /// The in-sync replicas (nodes), when replicated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isr: Vec<NodeId>,
    /// The eligible leader replicas (KIP-966), when replicated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elr: Vec<NodeId>,
    /// Bumped by every change of the replicas, ISR or leader (Kafka's partition epoch): the
    /// compare of an ISR change.
    #[serde(default)]
    pub partition_epoch: i32,
    /// Replicas a move in progress adds (Kafka's `adding_replicas`, KIP-455): in `replicas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<NodeId>,
    /// Replicas a move in progress removes once the adding ones are in sync (Kafka's
    /// `removing_replicas`): in `replicas` until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing: Vec<NodeId>,
}

impl PartitionMeta {
    /// A partition with one replica, on `shard` of `leader`'s node.
    pub fn single(leader: Leader, shard: usize) -> PartitionMeta {
        PartitionMeta {
            leader,
            shard,
            leader_epoch: LeaderEpoch(0),
            replicas: Vec::new(),
            isr: Vec::new(),
            elr: Vec::new(),
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    /// A new partition on `replicas` (the first leads); every replica in sync (all are empty).
    pub fn placed(replicas: Vec<Slot>) -> PartitionMeta {
        let leader = replicas[0];
        if replicas.len() == 1 {
            return PartitionMeta::single(Leader::Node(leader.node), leader.shard);
        }
        PartitionMeta {
            isr: replicas.iter().map(|s| s.node).collect(),
            replicas,
            ..PartitionMeta::single(Leader::Node(leader.node), leader.shard)
        }
    }

    /// Whether shard `shard` of node `node` leads it.
    pub fn is_led_by(&self, node: NodeId, shard: usize) -> bool {
        let led = match self.leader {
            Leader::Local => true,
            Leader::Node(n) => n == node,
            Leader::Offline => false,
        };
        led && self.shard == shard
    }

    /// Whether it has more than one replica.
    pub fn is_replicated(&self) -> bool {
        self.replicas.len() > 1
    }

    /// Whether shard `shard` of node `node` holds a replica of it (leader or follower).
    pub fn has_replica_on(&self, node: NodeId, shard: usize) -> bool {
        self.is_led_by(node, shard) || self.replicas.contains(&Slot { node, shard })
    }

    /// The replica on node `node`, if any.
    pub fn replica_on(&self, node: NodeId) -> Option<Slot> {
        self.replicas.iter().copied().find(|s| s.node == node)
    }

    /// The replication state machines' view (replica ids are nodes: never two replicas of a
    /// partition on one node).
    pub fn state(&self) -> PartitionState {
        let set = |v: &[NodeId]| {
            v.iter()
                .map(|&n| ReplicaId::from(n))
                .collect::<BTreeSet<_>>()
        };
        let leader = self.leader.node();
        PartitionState {
            replicas: self
                .replicas
                .iter()
                .map(|s| ReplicaId::from(s.node))
                .collect(),
            isr: set(&self.isr),
            elr: set(&self.elr),
            leader: leader.map(ReplicaId::from),
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            adding: set(&self.adding),
            removing: set(&self.removing),
        }
    }

    /// Every replica's home, the preferred leader first: `replicas`, or the leader's slot for a
    /// partition of one replica (empty when that one is offline: no replica is recorded).
    pub fn slots(&self) -> Vec<Slot> {
        match (self.replicas.is_empty(), self.leader.node()) {
            (false, _) => self.replicas.clone(),
            (true, Some(node)) => vec![Slot {
                node,
                shard: self.shard,
            }],
            (true, None) => Vec::new(),
        }
    }

    /// The replication state machines' view of any partition of a cluster, a single replica
    /// included (its leader alone in sync), as a move starts from.
    pub fn movable_state(&self) -> PartitionState {
        let mut state = self.state();
        if !self.is_replicated() {
            if let Some(n) = self.leader.node() {
                state.replicas = vec![ReplicaId::from(n)];
                state.isr = [ReplicaId::from(n)].into();
            }
        }
        state
    }

    /// Takes a state whose replicas may have changed (a move started, completed or was
    /// cancelled): each replica's home is the one it has, else its slot in `new_slots`. A
    /// partition left with one replica is stored as one (no ISR). `false` (nothing changed) if
    /// a replica has no home.
    pub fn apply_moved_state(&mut self, state: &PartitionState, new_slots: &[Slot]) -> bool {
        let current = self.slots();
        let homes: Option<Vec<Slot>> = state
            .replicas
            .iter()
            .map(|&r| {
                let node = NodeId::from(r);
                current
                    .iter()
                    .chain(new_slots)
                    .find(|s| s.node == node)
                    .copied()
            })
            .collect();
        let Some(homes) = homes else {
            return false;
        };
        let nodes = |s: &BTreeSet<ReplicaId>| s.iter().map(|&r| NodeId::from(r)).collect();
        self.adding = nodes(&state.adding);
        self.removing = nodes(&state.removing);
        self.replicas = homes;
        self.apply_state(state);
        if self.replicas.len() == 1 {
            self.replicas.clear();
            self.isr.clear();
            self.elr.clear();
        }
        true
    }

    /// Whether a move of its replicas is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// Takes `state`'s ISR, ELR, leader and epochs (the replicas stay where they are); the
    /// leader's shard is its replica's.
    pub fn apply_state(&mut self, state: &PartitionState) {
        let nodes =
            |s: &BTreeSet<ReplicaId>| s.iter().map(|&r| NodeId::from(r)).collect::<Vec<_>>();
        self.isr = nodes(&state.isr);
        self.elr = nodes(&state.elr);
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        match state.leader.and_then(|r| self.replica_on(r.into())) {
            Some(slot) => {
                self.leader = Leader::Node(slot.node);
                self.shard = slot.shard;
            }
            None => self.leader = Leader::Offline,
        }
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
    pub node: NodeId,
    /// The inter-broker listener's advertised host and shard 0's port.
    pub host: String,
    pub port: u16,
    pub shards: usize,
    /// Every listener's advertised host and shard 0's port, by listener name (clients are
    /// told the endpoints of the listener they connected to).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub listeners: BTreeMap<String, (String, u16)>,
    /// The node is in controlled shutdown (SIGTERM): it still serves until it leaves, but no
    /// ISR takes it in and no leadership moves to it (Kafka's KIP-841).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub controlled_shutdown: bool,
    /// `broker.rack`; `None`: the node is its own failure domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

/// The rack reported for a node's brokers: its `broker.rack`, else one of its own (every shard
/// of a node shares its machine).
pub fn rack_or_own(rack: Option<&str>, node: NodeId) -> String {
    rack.map_or_else(|| format!("ringlog-node-{node}"), str::to_owned)
}

impl NodeInfo {
    /// Where shard 0 of this node is reached on listener `name`.
    pub fn endpoint(&self, name: &str) -> Option<(&str, u16)> {
        self.listeners.get(name).map(|(h, p)| (h.as_str(), *p))
    }
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
    pub controller: Option<NodeId>,
    /// Each user's SCRAM credentials (salted; no password is stored), by mechanism name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram: BTreeMap<String, UserCredentials>,
    /// The ACL bindings, by resource pattern (`TYPE/PATTERN/name`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub acls: Acls,
    /// Dynamic broker configs (IncrementalAlterConfigs on brokers), by Kafka broker id, and
    /// the cluster-wide defaults under [`DEFAULT_BROKER`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Finalized feature levels set with UpdateFeatures (`kafka-features upgrade` /
    /// `downgrade`), by feature name; a feature not here is at the level each node is
    /// configured with (`transaction.version`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, FinalizedFeature>,
    /// Client quotas (AlterClientQuotas, `kafka-configs --entity-type users|clients`), by
    /// entity (`quotas/mod.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_quotas: crate::quotas::ClientQuotas,
    /// Per-group configs (IncrementalAlterConfigs on a GROUP resource: Kafka's
    /// `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`), by group id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// A feature's finalized level and the epoch of the change that set it (ApiVersions'
/// `finalized_features_epoch`: clients keep the features of the highest epoch they saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalizedFeature {
    pub level: i16,
    pub epoch: i64,
}

/// The epoch of features as the nodes are configured, before any UpdateFeatures.
pub const CONFIGURED_FEATURES_EPOCH: i64 = 1;

/// The feature [`Snapshot::transaction_version`] reads.
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// The key of the cluster-wide dynamic broker defaults (Kafka's `--entity-default`, a broker
/// resource named "").
pub const DEFAULT_BROKER: &str = "default";

impl Snapshot {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMeta> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
    }

    /// The cluster's `transaction.version`: as finalized with UpdateFeatures, else the node's
    /// configured level.
    pub fn transaction_version(
        &self,
        configured: transactions::TxnVersion,
    ) -> transactions::TxnVersion {
        self.features
            .get(TRANSACTION_VERSION_FEATURE)
            .map_or(configured, |f| {
                transactions::TxnVersion::from_level(f.level)
            })
    }

    /// The finalized features' epoch (ApiVersions).
    pub fn features_epoch(&self) -> i64 {
        self.features
            .values()
            .map(|f| f.epoch)
            .max()
            .unwrap_or(CONFIGURED_FEATURES_EPOCH)
    }

    /// The finalized level of each feature set with UpdateFeatures.
    pub fn feature_levels(&self) -> BTreeMap<String, i16> {
        self.features
            .iter()
            .map(|(n, f)| (n.clone(), f.level))
            .collect()
    }

    /// Dynamic broker config `name` of broker `broker`: its own, else the cluster default.
    pub fn broker_config(&self, broker: i32, name: &str) -> Option<&str> {
        let own = self.broker_configs.get(&broker.to_string());
        let default = self.broker_configs.get(DEFAULT_BROKER);
        own.and_then(|c| c.get(name))
            .or_else(|| default.and_then(|c| c.get(name)))
            .map(String::as_str)
    }

    /// The live node `node`, in a cluster.
    pub fn node(&self, node: NodeId) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.node == node)
    }
}
