//! Replica moves on the cluster metadata (Kafka's AlterPartitionReassignments): the broker ids
//! a client names turned into nodes and shards, checked, and handed to the `replication`
//! crate's [`reassignment`](replication::reassignment) rules; moves completed once their new
//! replicas are in sync. The control plane commits what these functions change (one
//! compare-and-swap per save) and broadcasts it; shards then open the new replicas (they fetch
//! as followers) and delete the removed ones.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use replication::reassignment::{self, ReassignError};
use replication::ReplicaId;

use super::placement::NodeShards;
use super::snapshot::{Slot, Snapshot, TopicMeta};
use crate::error::Refused;
use crate::ids::{node_of, shard_of, NodeId};
use crate::limits::REPLICATION_FACTOR_MAX;

/// One partition's requested move: `target` broker ids (the preferred leader first), or
/// `None` to cancel the move in progress.
#[derive(Debug, Clone)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// What a move is checked against: the live nodes and their shard counts.
pub struct Cluster<'a> {
    pub nodes: &'a [NodeShards],
    /// `min.insync.replicas` of a topic that does not set it.
    pub default_min_insync: usize,
}

impl Cluster<'_> {
    fn live(&self) -> BTreeSet<ReplicaId> {
        self.nodes.iter().map(|n| ReplicaId::from(n.node)).collect()
    }

    /// A topic's `min.insync.replicas`.
    pub fn min_insync(&self, topic: &TopicMeta) -> usize {
        min_insync_of(&topic.configs, self.default_min_insync)
    }
}

/// `min.insync.replicas` of a topic with `configs`, `default` when it does not set it.
pub fn min_insync_of(configs: &BTreeMap<String, String>, default: usize) -> usize {
    configs
        .get("min.insync.replicas")
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Applies each move to `snapshot`; one result per move, in order, and whether anything
/// changed. A refused move changes nothing; the others still apply.
pub fn apply_moves(
    snapshot: &mut Snapshot,
    moves: &[Move],
    cluster: &Cluster,
) -> (Vec<Result<(), Refused>>, bool) {
    let mut changed = false;
    let results = moves
        .iter()
        .map(|m| {
            let moved = apply_move(snapshot, m, cluster)?;
            changed |= moved;
            Ok(())
        })
        .collect();
    (results, changed)
}

fn apply_move(snapshot: &mut Snapshot, m: &Move, cluster: &Cluster) -> Result<bool, Refused> {
    let unknown = || {
        Refused::new(
            ResponseError::UnknownTopicOrPartition,
            format!("{}-{} does not exist", m.topic, m.partition),
        )
    };
    let topic = snapshot.topics.get_mut(&m.topic).ok_or_else(unknown)?;
    let min_insync = cluster.min_insync(topic);
    let meta = usize::try_from(m.partition)
        .ok()
        .and_then(|p| topic.partitions.get_mut(p))
        .ok_or_else(unknown)?;
    let state = meta.movable_state();
    if state.replicas.is_empty() {
        return Err(Refused::new(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "{}-{} is offline and its only replica is not recorded",
                m.topic, m.partition
            ),
        ));
    }
    let live = cluster.live();
    let (next, new_slots) = match &m.target {
        None => (
            reassignment::cancel(&state, &live).map_err(|e| refused(m, e))?,
            Vec::new(),
        ),
        Some(brokers) => {
            let slots = target_slots(brokers, &meta.slots(), cluster.nodes)
                .map_err(|why| refused(m, ReassignError::InvalidReplicaAssignment(why)))?;
            let target: Vec<ReplicaId> = slots.iter().map(|s| ReplicaId::from(s.node)).collect();
            match reassignment::reassign(&state, &target, &live, min_insync)
                .map_err(|e| refused(m, e))?
            {
                Some(next) => (next, slots),
                None => return Ok(false),
            }
        }
    };
    if !meta.apply_moved_state(&next, &new_slots) {
        return Err(Refused::new(
            ResponseError::InvalidReplicaAssignment,
            format!("{}-{}: a replica has no home", m.topic, m.partition),
        ));
    }
    tracing::info!(topic = %m.topic, partition = m.partition,
        replicas = ?next.replicas.iter().map(|r| r.0).collect::<Vec<_>>(),
        adding = ?next.adding.iter().map(|r| r.0).collect::<Vec<_>>(),
        removing = ?next.removing.iter().map(|r| r.0).collect::<Vec<_>>(),
        cancel = m.target.is_none(), "partition reassignment decided");
    Ok(true)
}

fn refused(m: &Move, e: ReassignError) -> Refused {
    let code = match e {
        ReassignError::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
        ReassignError::InvalidReplicaAssignment(_) | ReassignError::CannotRevert(_) => {
            ResponseError::InvalidReplicaAssignment
        }
    };
    Refused::new(code, format!("{}-{}: {e}", m.topic, m.partition))
}

/// The homes of a target's broker ids: a replica the partition has keeps its shard (a node
/// holds one replica of a partition, so a move between shards of one node is refused); a new
/// one must be a shard of a live node. Never two replicas on one node.
fn target_slots(
    brokers: &[i32],
    current: &[Slot],
    nodes: &[NodeShards],
) -> Result<Vec<Slot>, String> {
    if brokers.is_empty() {
        return Err("the target has no replica".into());
    }
    if brokers.len() > REPLICATION_FACTOR_MAX {
        return Err(format!(
            "{} replicas; at most {REPLICATION_FACTOR_MAX}",
            brokers.len()
        ));
    }
    let mut slots: Vec<Slot> = Vec::with_capacity(brokers.len());
    for &b in brokers {
        if b < 0 {
            return Err(format!("broker {b} does not exist"));
        }
        let slot = Slot {
            node: node_of(b),
            shard: shard_of(b),
        };
        if slots.iter().any(|s| s.node == slot.node) {
            return Err(format!(
                "brokers {brokers:?} put two replicas on node {} (its shards are brokers {}..={}); a node holds one replica of a partition",
                slot.node,
                slot.node.0 * 1000,
                slot.node.0 * 1000 + 999
            ));
        }
        match current.iter().find(|s| s.node == slot.node) {
            Some(have) if have.shard != slot.shard => {
                return Err(format!(
                    "broker {b}: node {} holds this partition on shard {} (broker {}); a move between the shards of one node is not supported",
                    slot.node,
                    have.shard,
                    slot.node.0 * 1000 + have.shard as i32
                ))
            }
            Some(_) => {}
            None => match nodes.iter().find(|n| n.node == slot.node) {
                Some(n) if slot.shard < n.shards => {}
                Some(n) => {
                    return Err(format!(
                        "broker {b} does not exist: node {} has {} shard(s)",
                        n.node, n.shards
                    ))
                }
                None => return Err(format!("broker {b} is not live (node {} is not registered)", slot.node)),
            },
        }
        slots.push(slot);
    }
    Ok(slots)
}

/// Completes every move whose new replicas are all in sync (see
/// [`reassignment::complete`]); the partitions completed.
pub fn complete_moves(snapshot: &mut Snapshot, cluster: &Cluster) -> Vec<(String, i32)> {
    let live = cluster.live();
    let mut done = Vec::new();
    for topic in snapshot.topics.values_mut() {
        let min_insync = cluster.min_insync(topic);
        for (i, meta) in topic.partitions.iter_mut().enumerate() {
            if !meta.is_reassigning() {
                continue;
            }
            if let Some(next) = reassignment::complete(&meta.state(), &live, min_insync) {
                if meta.apply_moved_state(&next, &[]) {
                    tracing::info!(topic = %topic.name, partition = i,
                        replicas = ?next.replicas.iter().map(|r| r.0).collect::<Vec<_>>(),
                        leader = ?next.leader.map(|r| r.0), "partition reassignment completed");
                    done.push((topic.name.clone(), i as i32));
                }
            }
        }
    }
    done
}

/// A move in progress as ListPartitionReassignments reports it: broker ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ongoing {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// The move in progress of `topic`-`partition`, if any.
pub fn ongoing(snapshot: &Snapshot, topic: &str, partition: i32) -> Option<Ongoing> {
    let meta = snapshot.partition(topic, partition)?;
    if !meta.is_reassigning() {
        return None;
    }
    let broker = |n: &NodeId| {
        meta.replica_on(*n)
            .map(|s| crate::ids::broker_id(s.node, s.shard).0)
    };
    Some(Ongoing {
        replicas: meta
            .replicas
            .iter()
            .map(|s| crate::ids::broker_id(s.node, s.shard).0)
            .collect(),
        adding: meta.adding.iter().filter_map(broker).collect(),
        removing: meta.removing.iter().filter_map(broker).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::snapshot::PartitionMeta;

    fn slot(node: i32, shard: usize) -> Slot {
        Slot {
            node: NodeId(node),
            shard,
        }
    }

    fn cluster_of(nodes: &[i32]) -> Vec<NodeShards> {
        nodes
            .iter()
            .map(|&n| NodeShards {
                node: NodeId(n),
                shards: 2,
            })
            .collect()
    }

    fn snapshot(partition: PartitionMeta) -> Snapshot {
        let mut s = Snapshot::default();
        s.topics.insert(
            "t".into(),
            TopicMeta {
                name: "t".into(),
                id: uuid::Uuid::nil(),
                partitions: vec![partition],
                configs: [("min.insync.replicas".to_owned(), "2".to_owned())].into(),
            },
        );
        s
    }

    fn mv(target: Option<Vec<i32>>) -> Move {
        Move {
            topic: "t".into(),
            partition: 0,
            target,
        }
    }

    #[test]
    fn a_move_onto_a_new_node_adds_then_completes_when_in_sync() {
        let nodes = cluster_of(&[1, 2, 3, 4]);
        let cluster = Cluster {
            nodes: &nodes,
            default_min_insync: 1,
        };
        let mut s = snapshot(PartitionMeta::placed(vec![
            slot(1, 0),
            slot(2, 1),
            slot(3, 0),
        ]));
        let (results, changed) = apply_moves(&mut s, &[mv(Some(vec![4001, 2001, 3000]))], &cluster);
        assert!(results[0].is_ok() && changed, "{results:?}");
        let p = s.partition("t", 0).unwrap().clone();
        assert_eq!(
            p.replicas,
            vec![slot(4, 1), slot(2, 1), slot(3, 0), slot(1, 0)]
        );
        assert_eq!(
            (p.adding.clone(), p.removing.clone()),
            (vec![NodeId(4)], vec![NodeId(1)])
        );
        assert_eq!(
            ongoing(&s, "t", 0).unwrap(),
            Ongoing {
                replicas: vec![4001, 2001, 3000, 1000],
                adding: vec![4001],
                removing: vec![1000]
            }
        );
        assert!(complete_moves(&mut s, &cluster).is_empty());
        s.topics.get_mut("t").unwrap().partitions[0]
            .isr
            .push(NodeId(4));
        assert_eq!(complete_moves(&mut s, &cluster), vec![("t".to_owned(), 0)]);
        let p = s.partition("t", 0).unwrap();
        assert_eq!(p.replicas, vec![slot(4, 1), slot(2, 1), slot(3, 0)]);
        assert_eq!(p.leader.node(), Some(NodeId(4)));
        assert_eq!(p.shard, 1, "the leader's shard is its replica's");
        assert!(ongoing(&s, "t", 0).is_none());
    }

    #[test]
    fn a_single_replica_moves_and_stays_a_single_replica() {
        let nodes = cluster_of(&[1, 2]);
        let cluster = Cluster {
            nodes: &nodes,
            default_min_insync: 1,
        };
        let mut s = snapshot(PartitionMeta::placed(vec![slot(1, 1)]));
        let (results, _) = apply_moves(&mut s, &[mv(Some(vec![2000]))], &cluster);
        assert!(results[0].is_ok(), "{results:?}");
        assert!(s.partition("t", 0).unwrap().is_replicated());
        s.topics.get_mut("t").unwrap().partitions[0]
            .isr
            .push(NodeId(2));
        complete_moves(&mut s, &cluster);
        let p = s.partition("t", 0).unwrap();
        assert!(p.replicas.is_empty() && p.isr.is_empty());
        assert_eq!((p.leader.node(), p.shard), (Some(NodeId(2)), 0));
    }

    #[test]
    fn bad_targets_are_refused_with_the_reason() {
        let nodes = cluster_of(&[1, 2, 3]);
        let cluster = Cluster {
            nodes: &nodes,
            default_min_insync: 1,
        };
        let mut s = snapshot(PartitionMeta::placed(vec![slot(1, 0), slot(2, 0)]));
        let bad = [
            (vec![1000, 1001], "two replicas on node 1"),
            (vec![1001, 2000], "between the shards of one node"),
            (vec![1000, 5000], "not live"),
            (vec![1000, 3007], "node 3 has 2 shard(s)"),
            (vec![-1], "does not exist"),
        ];
        for (target, why) in bad {
            let (results, changed) = apply_moves(&mut s, &[mv(Some(target.clone()))], &cluster);
            let err = results[0].as_ref().unwrap_err();
            assert_eq!(
                err.error,
                ResponseError::InvalidReplicaAssignment,
                "{target:?}"
            );
            assert!(err.message.contains(why), "{target:?}: {}", err.message);
            assert!(!changed);
        }
        let (results, _) = apply_moves(&mut s, &[mv(None)], &cluster);
        assert_eq!(
            results[0].as_ref().unwrap_err().error,
            ResponseError::NoReassignmentInProgress
        );
        let missing = Move {
            partition: 7,
            ..mv(None)
        };
        let (results, _) = apply_moves(&mut s, &[missing], &cluster);
        assert_eq!(
            results[0].as_ref().unwrap_err().error,
            ResponseError::UnknownTopicOrPartition
        );
    }
}
