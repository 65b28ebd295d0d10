//! Where a topic's partitions and their replicas live.
//!
//! Rules (the cluster's, Kafka's where Kafka has one):
//! - a replication factor is at least 1, at most [`REPLICATION_FACTOR_MAX`] and at most the
//!   number of live nodes, else INVALID_REPLICATION_FACTOR;
//! - never two replicas of a partition on one node (the shards of a node share its machine);
//! - the first replica is the preferred leader; preferred leaders spread evenly over nodes, and
//!   over the shards of each node; the other replicas go to the nodes, and shards, holding the
//!   fewest replicas. Counting what already exists (`Load`) keeps CreatePartitions and later
//!   topics even too.
//!
//! Deterministic: the same nodes, load and request give the same placement.

use crate::ids::NodeId;
use std::collections::BTreeMap;

use super::snapshot::{Leader, PartitionMeta, Slot};
use crate::limits::REPLICATION_FACTOR_MAX;

/// A live node and how many shards it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeShards {
    pub node: NodeId,
    pub shards: usize,
}

/// How many preferred leaders and replicas each slot holds already.
#[derive(Debug, Clone, Default)]
pub struct Load {
    leaders: BTreeMap<Slot, usize>,
    replicas: BTreeMap<Slot, usize>,
    /// Each node's `broker.rack` (a node not listed is its own rack).
    racks: BTreeMap<NodeId, String>,
}

impl Load {
    /// Places replicas of a partition in distinct racks where there are enough.
    pub fn set_rack(&mut self, node: NodeId, rack: String) {
        self.racks.insert(node, rack);
    }

    fn rack(&self, node: NodeId) -> Option<&str> {
        self.racks.get(&node).map(String::as_str)
    }

    /// Counts an existing partition's replicas (the first is its preferred leader).
    pub fn add(&mut self, replicas: &[Slot]) {
        if let Some(first) = replicas.first() {
            *self.leaders.entry(*first).or_default() += 1;
        }
        for r in replicas {
            *self.replicas.entry(*r).or_default() += 1;
        }
    }

    fn leaders_on_node(&self, node: NodeId) -> usize {
        self.leaders
            .iter()
            .filter(|(s, _)| s.node == node)
            .map(|(_, n)| n)
            .sum()
    }

    fn replicas_on_node(&self, node: NodeId) -> usize {
        self.replicas
            .iter()
            .filter(|(s, _)| s.node == node)
            .map(|(_, n)| n)
            .sum()
    }
}

/// Why a placement is impossible (INVALID_REPLICATION_FACTOR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("replication factor {0} is below 1")]
    TooSmall(i32),
    #[error("replication factor {factor} is larger than the {live} live node(s): two replicas of a partition never share a node")]
    MoreThanNodes { factor: i32, live: usize },
    #[error("replication factor {0} is larger than the maximum {REPLICATION_FACTOR_MAX}")]
    TooLarge(i32),
}

/// Whether `factor` replicas fit on `live_nodes` nodes; the factor as a count.
pub fn check_replication_factor(factor: i32, live_nodes: usize) -> Result<usize, PlacementError> {
    if factor < 1 {
        return Err(PlacementError::TooSmall(factor));
    }
    let rf = factor as usize;
    if rf > REPLICATION_FACTOR_MAX {
        return Err(PlacementError::TooLarge(factor));
    }
    if rf > live_nodes {
        return Err(PlacementError::MoreThanNodes {
            factor,
            live: live_nodes,
        });
    }
    Ok(rf)
}

/// Replicas for partitions `from..to` with `factor` replicas each over `nodes`, given what
/// `load` already holds (updated with the new partitions).
pub fn place_replicas(
    nodes: &[NodeShards],
    load: &mut Load,
    from: i32,
    to: i32,
    factor: i32,
) -> Result<Vec<Vec<Slot>>, PlacementError> {
    let nodes: Vec<NodeShards> = nodes.iter().copied().filter(|n| n.shards > 0).collect();
    let rf = check_replication_factor(factor, nodes.len())?;
    let mut out = Vec::new();
    for _ in from..to {
        // The preferred leader: the node with the fewest leaders (then fewest replicas, then
        // lowest id), on its shard with the fewest leaders.
        let leader_node = *nodes
            .iter()
            .min_by_key(|n| {
                (
                    load.leaders_on_node(n.node),
                    load.replicas_on_node(n.node),
                    n.node,
                )
            })
            .expect("at least one node");
        let leader = least(leader_node, |s| {
            (
                load.leaders.get(s).copied().unwrap_or(0),
                load.replicas.get(s).copied().unwrap_or(0),
            )
        });
        let mut replicas = vec![leader];
        let mut others: Vec<NodeShards> = nodes
            .iter()
            .copied()
            .filter(|n| n.node != leader.node)
            .collect();
        // Each next replica: a node in a rack not used yet if there is one, then the fewest
        // replicas, then the lowest id.
        let mut racks: Vec<&str> = load.rack(leader.node).into_iter().collect();
        for _ in 1..rf {
            let Some(i) = (0..others.len()).min_by_key(|&i| {
                let n = others[i];
                let clash = load.rack(n.node).is_some_and(|r| racks.contains(&r));
                (clash, load.replicas_on_node(n.node), n.node)
            }) else {
                break;
            };
            let n = others.remove(i);
            racks.extend(load.rack(n.node));
            replicas.push(least(n, |s| {
                (load.replicas.get(s).copied().unwrap_or(0), 0)
            }));
        }
        load.add(&replicas);
        out.push(replicas);
    }
    Ok(out)
}

/// The shard of `node` with the smallest `key`, the lowest shard on ties.
fn least(node: NodeShards, key: impl Fn(&Slot) -> (usize, usize)) -> Slot {
    (0..node.shards)
        .map(|shard| Slot {
            node: node.node,
            shard,
        })
        .min_by_key(|s| (key(s), s.shard))
        .expect("a node has a shard")
}

/// Why a manual replica assignment breaks the placement rules (INVALID_REPLICA_ASSIGNMENT).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("an assignment needs at least one replica for every partition")]
    NoReplicas,
    #[error("{0} replicas; at most {REPLICATION_FACTOR_MAX}")]
    TooManyReplicas(usize),
    #[error("partition {partition} has {replicas} replicas, partition 0 has {factor}: all partitions need the same number")]
    UnevenReplicas {
        partition: usize,
        replicas: usize,
        factor: usize,
    },
    #[error("partition {partition}: broker {broker} is not a live broker")]
    NotLive { partition: usize, broker: i32 },
    #[error("partition {partition}: two replicas on node {node} (brokers {brokers}): the shards of a node share its machine")]
    TwoOnOneNode {
        partition: usize,
        node: NodeId,
        brokers: String,
    },
}

/// The replicas of a manual assignment (Kafka broker ids per partition, in partition order),
/// checked by the placement rules: every partition has replicas, all the same number, at most
/// [`REPLICATION_FACTOR_MAX`]; each replica on a live broker (a shard of a live node); never two
/// replicas of a partition on one node. The first replica of each is its preferred leader.
pub fn assigned_replicas(
    assignment: &[Vec<i32>],
    nodes: &[NodeShards],
) -> Result<Vec<Vec<Slot>>, AssignmentError> {
    let factor = assignment.first().map_or(0, Vec::len);
    if factor == 0 {
        return Err(AssignmentError::NoReplicas);
    }
    if factor > REPLICATION_FACTOR_MAX {
        return Err(AssignmentError::TooManyReplicas(factor));
    }
    assignment
        .iter()
        .enumerate()
        .map(|(p, brokers)| {
            if brokers.len() != factor {
                return Err(AssignmentError::UnevenReplicas {
                    partition: p,
                    replicas: brokers.len(),
                    factor,
                });
            }
            let mut slots: Vec<Slot> = Vec::with_capacity(factor);
            for &id in brokers {
                let slot = Slot {
                    node: crate::ids::node_of(id),
                    shard: crate::ids::shard_of(id),
                };
                let live = id >= 0
                    && nodes
                        .iter()
                        .any(|n| n.node == slot.node && slot.shard < n.shards);
                if !live {
                    return Err(AssignmentError::NotLive {
                        partition: p,
                        broker: id,
                    });
                }
                if slots.iter().any(|s| s.node == slot.node) {
                    return Err(AssignmentError::TwoOnOneNode {
                        partition: p,
                        node: slot.node,
                        brokers: brokers
                            .iter()
                            .map(i32::to_string)
                            .collect::<Vec<_>>()
                            .join(","),
                    });
                }
                slots.push(slot);
            }
            Ok(slots)
        })
        .collect()
}

/// A single node's partitions `from..to` (one replica each) over its `shards` shards: partition
/// `p` on shard `p % shards`, what [`place_replicas`] gives for one node and no prior load.
pub fn place_partitions(from: i32, to: i32, shards: usize) -> Vec<PartitionMeta> {
    (from..to)
        .map(|p| PartitionMeta::single(Leader::Local, p as usize % shards))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: i32, shards: usize) -> Vec<NodeShards> {
        (1..=n)
            .map(|node| NodeShards {
                node: NodeId(node),
                shards,
            })
            .collect()
    }

    #[test]
    fn replication_factor_bounds_are_refused_with_the_reason() {
        let three = nodes(3, 2);
        let mut load = Load::default();
        assert_eq!(
            place_replicas(&three, &mut load, 0, 1, 0),
            Err(PlacementError::TooSmall(0))
        );
        assert_eq!(
            place_replicas(&three, &mut load, 0, 1, 4),
            Err(PlacementError::MoreThanNodes { factor: 4, live: 3 })
        );
        assert_eq!(
            place_replicas(&nodes(12, 1), &mut load, 0, 1, 11),
            Err(PlacementError::TooLarge(11))
        );
        assert_eq!(
            place_replicas(&nodes(12, 1), &mut load, 0, 1, 10).unwrap()[0].len(),
            10
        );
    }

    #[test]
    fn replicas_never_share_a_node_and_leaders_spread_over_nodes_and_shards() {
        for (n, shards, rf, partitions) in
            [(3, 2, 3, 12), (5, 3, 3, 30), (4, 1, 2, 7), (2, 4, 1, 9)]
        {
            let cluster = nodes(n, shards);
            let mut load = Load::default();
            let placed = place_replicas(&cluster, &mut load, 0, partitions, rf).unwrap();
            let mut leaders_per_node = BTreeMap::new();
            let mut leaders_per_slot = BTreeMap::new();
            let mut replicas_per_node = BTreeMap::new();
            for replicas in &placed {
                assert_eq!(replicas.len(), rf as usize);
                let mut seen: Vec<NodeId> = replicas.iter().map(|s| s.node).collect();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(
                    seen.len(),
                    replicas.len(),
                    "two replicas on one node: {replicas:?}"
                );
                *leaders_per_node.entry(replicas[0].node).or_insert(0) += 1;
                *leaders_per_slot.entry(replicas[0]).or_insert(0) += 1;
                for r in replicas {
                    assert!(r.shard < shards);
                    *replicas_per_node.entry(r.node).or_insert(0) += 1;
                }
            }
            fn spread<K>(m: &BTreeMap<K, i32>, of: usize) -> i32 {
                let counts: Vec<i32> = m.values().copied().collect();
                assert_eq!(counts.len(), of, "every node/slot used");
                counts.iter().max().unwrap() - counts.iter().min().unwrap()
            }
            let case = format!("{n} nodes x {shards} shards, rf {rf}, {partitions} partitions");
            assert!(
                spread(&leaders_per_node, n as usize) <= 1,
                "{case}: {leaders_per_node:?}"
            );
            if partitions as usize >= n as usize * shards {
                assert!(
                    spread(&leaders_per_slot, n as usize * shards) <= 1,
                    "{case}"
                );
            }
            assert!(
                spread(&replicas_per_node, n as usize) <= 1,
                "{case}: {replicas_per_node:?}"
            );
        }
    }

    #[test]
    fn later_partitions_and_topics_keep_the_spread_even() {
        let cluster = nodes(3, 2);
        let mut load = Load::default();
        let first = place_replicas(&cluster, &mut load, 0, 2, 2).unwrap();
        let more = place_replicas(&cluster, &mut load, 2, 6, 2).unwrap();
        let mut leaders = BTreeMap::new();
        for r in first.iter().chain(&more) {
            *leaders.entry(r[0].node).or_insert(0) += 1;
        }
        assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
        // Deterministic.
        let again = place_replicas(&cluster, &mut Load::default(), 0, 2, 2).unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn one_node_places_like_the_single_node_layout() {
        let one = [NodeShards {
            node: NodeId(0),
            shards: 3,
        }];
        let placed = place_replicas(&one, &mut Load::default(), 0, 7, 1).unwrap();
        let single = place_partitions(0, 7, 3);
        let shards: Vec<usize> = placed.iter().map(|r| r[0].shard).collect();
        assert_eq!(shards, single.iter().map(|p| p.shard).collect::<Vec<_>>());
    }

    #[test]
    fn manual_assignments_follow_the_placement_rules() {
        let live = nodes(3, 2);
        let ok = assigned_replicas(&[vec![1000, 2001], vec![3001, 1000]], &live).unwrap();
        assert_eq!(
            ok[1],
            [
                Slot {
                    node: NodeId(3),
                    shard: 1
                },
                Slot {
                    node: NodeId(1),
                    shard: 0
                }
            ]
        );
        for (bad, why) in [
            (vec![vec![1000, 1001]], "two replicas on node 1"),
            (vec![vec![1000], vec![2000, 3000]], "same number"),
            (vec![vec![4000]], "broker 4000 is not a live broker"),
            (vec![vec![1002]], "broker 1002 is not a live broker"),
            (vec![vec![-1]], "broker -1 is not a live broker"),
            (vec![vec![]], "at least one replica"),
        ] {
            let e = assigned_replicas(&bad, &live).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn replicas_go_to_distinct_racks_where_there_are_enough() {
        // Nodes 1, 2 in rack a; 3, 4 in rack b: every partition of RF 2 spans both racks.
        let cluster = nodes(4, 1);
        let mut load = Load::default();
        for (n, r) in [(1, "a"), (2, "a"), (3, "b"), (4, "b")] {
            load.set_rack(NodeId(n), r.into());
        }
        let placed = place_replicas(&cluster, &mut load, 0, 8, 2).unwrap();
        for p in &placed {
            let racks: std::collections::BTreeSet<_> =
                p.iter().map(|s| load.rack(s.node).unwrap()).collect();
            assert_eq!(racks.len(), 2, "{p:?}");
        }
        // RF 3 over two racks: both racks used, never two replicas on a node.
        let three = place_replicas(&cluster, &mut load, 8, 12, 3).unwrap();
        for p in &three {
            let racks: std::collections::BTreeSet<_> =
                p.iter().map(|s| load.rack(s.node).unwrap()).collect();
            assert_eq!(racks.len(), 2, "{p:?}");
        }
    }
}
