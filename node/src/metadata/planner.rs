//! The replica planner behind `ringlog cluster rebalance`, `decommission`, `remove-node` and the
//! controller's automatic repair: pure code from the cluster's shape (nodes, their shards and
//! racks, each partition's replicas and bytes) to a list of moves, each a partition's new
//! replica list for AlterPartitionReassignments.
//!
//! Rules, in order:
//! 1. Evacuate: every replica on a node being emptied (decommissioned, or dead for good) moves
//!    to a node that holds no replica of the partition, in a rack its other replicas do not use
//!    when one is free, the one with the fewest replicas (then bytes). It keeps its place in
//!    the list, so a preferred leader's replacement is preferred.
//! 2. Balance replicas (rebalance only): while the most loaded node holds two or more replicas
//!    more than the least loaded, one replica moves from the first to the second — of the
//!    partitions that may go there (not already there, racks kept distinct where they were),
//!    the one whose bytes best even the two nodes' bytes.
//! 3. Balance preferred leaders (rebalance only), without moving data: while a node is the
//!    preferred leader of two or more partitions more than another that holds a replica of one
//!    of them, that replica goes first.
//!
//! Never two replicas of a partition on one node; each step only improves its measure, so a
//! balanced cluster gets an empty plan.

use std::collections::{BTreeMap, BTreeSet};

use super::snapshot::Slot;
use crate::ids::NodeId;

/// A node replicas may be placed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    pub node: NodeId,
    pub shards: usize,
    pub rack: Option<String>,
}

/// A partition as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanPartition {
    pub topic: String,
    pub partition: i32,
    /// Its replicas, the preferred leader first.
    pub replicas: Vec<Slot>,
    /// Its size (the leader's log), for evening bytes; 0 when unknown.
    pub bytes: u64,
}

/// What to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal<'a> {
    /// Even replicas, preferred leaders and bytes over the nodes (and evacuate any replica on
    /// a node not among them).
    Rebalance,
    /// Move every replica off these nodes (decommission, or repair of dead ones).
    Evacuate(&'a BTreeSet<NodeId>),
}

/// One planned move: a partition's new replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMove {
    pub topic: String,
    pub partition: i32,
    pub from: Vec<Slot>,
    pub to: Vec<Slot>,
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{topic}-{partition} needs {needed} nodes for its replicas; only {have} may hold them"
    )]
    NotEnoughNodes {
        topic: String,
        partition: i32,
        needed: usize,
        have: usize,
    },
}

struct Loads {
    replicas: BTreeMap<NodeId, usize>,
    leaders: BTreeMap<NodeId, usize>,
    bytes: BTreeMap<NodeId, u64>,
    shard_replicas: BTreeMap<Slot, usize>,
}

impl Loads {
    fn of(nodes: &[PlanNode], partitions: &[PlanPartition]) -> Loads {
        let mut l = Loads {
            replicas: nodes.iter().map(|n| (n.node, 0)).collect(),
            leaders: nodes.iter().map(|n| (n.node, 0)).collect(),
            bytes: nodes.iter().map(|n| (n.node, 0)).collect(),
            shard_replicas: BTreeMap::new(),
        };
        for p in partitions {
            l.add(p, 1);
        }
        l
    }

    fn add(&mut self, p: &PlanPartition, sign: i64) {
        let bump = |v: &mut usize| *v = (*v as i64 + sign).max(0) as usize;
        for (i, s) in p.replicas.iter().enumerate() {
            if let Some(v) = self.replicas.get_mut(&s.node) {
                bump(v);
            }
            if i == 0 {
                if let Some(v) = self.leaders.get_mut(&s.node) {
                    bump(v);
                }
            }
            if let Some(v) = self.bytes.get_mut(&s.node) {
                *v = (*v as i64 + sign * p.bytes as i64).max(0) as u64;
            }
            bump(self.shard_replicas.entry(*s).or_default());
        }
    }

    /// The least loaded shard of `node`.
    fn shard_on(&self, node: &PlanNode) -> usize {
        (0..node.shards.max(1))
            .min_by_key(|&shard| {
                self.shard_replicas
                    .get(&Slot {
                        node: node.node,
                        shard,
                    })
                    .copied()
                    .unwrap_or(0)
            })
            .unwrap_or(0)
    }
}

fn rack_of(nodes: &[PlanNode], node: NodeId) -> Option<&str> {
    nodes
        .iter()
        .find(|n| n.node == node)
        .and_then(|n| n.rack.as_deref())
}

/// The best node for a replica of `p` replacing the one at `at` (see rule 1).
fn best_home<'a>(
    nodes: &'a [PlanNode],
    loads: &Loads,
    p: &PlanPartition,
    at: usize,
    allowed: impl Fn(NodeId) -> bool,
) -> Option<&'a PlanNode> {
    let others: Vec<NodeId> = p
        .replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, s)| s.node)
        .collect();
    let used_racks: BTreeSet<&str> = others.iter().filter_map(|&n| rack_of(nodes, n)).collect();
    nodes
        .iter()
        .filter(|n| allowed(n.node) && !others.contains(&n.node))
        .min_by_key(|n| {
            let rack_clash = n.rack.as_deref().is_some_and(|r| used_racks.contains(r));
            (
                rack_clash,
                loads.replicas.get(&n.node).copied().unwrap_or(0),
                loads.bytes.get(&n.node).copied().unwrap_or(0),
                n.node,
            )
        })
}

/// The moves that reach `goal` from `partitions` over `nodes` (the live nodes).
pub fn plan(
    nodes: &[PlanNode],
    partitions: &[PlanPartition],
    goal: Goal,
) -> Result<Vec<PlannedMove>, PlanError> {
    let empty = BTreeSet::new();
    let leaving = match goal {
        Goal::Evacuate(n) => n,
        Goal::Rebalance => &empty,
    };
    let targets: Vec<PlanNode> = nodes
        .iter()
        .filter(|n| !leaving.contains(&n.node))
        .cloned()
        .collect();
    let target_ids: BTreeSet<NodeId> = targets.iter().map(|n| n.node).collect();
    let mut now: Vec<PlanPartition> = partitions.to_vec();
    let mut loads = Loads::of(&targets, &now);

    // 1. Evacuate replicas on leaving nodes (or, rebalancing, on nodes that are not live). A
    // partition with no live replica at all has nothing to copy from: it stays (its data
    // comes back only with one of its nodes).
    let live: BTreeSet<NodeId> = nodes.iter().map(|n| n.node).collect();
    for p in &mut now {
        if !p.replicas.iter().any(|s| live.contains(&s.node)) {
            continue;
        }
        for at in 0..p.replicas.len() {
            let node = p.replicas[at].node;
            let must_go =
                leaving.contains(&node) || (goal == Goal::Rebalance && !target_ids.contains(&node));
            if !must_go {
                continue;
            }
            let home = best_home(&targets, &loads, p, at, |_| true).ok_or_else(|| {
                PlanError::NotEnoughNodes {
                    topic: p.topic.clone(),
                    partition: p.partition,
                    needed: p.replicas.len(),
                    have: targets.len(),
                }
            })?;
            loads.add(p, -1);
            p.replicas[at] = Slot {
                node: home.node,
                shard: loads.shard_on(home),
            };
            loads.add(p, 1);
        }
    }

    if goal == Goal::Rebalance {
        balance_replicas(&targets, &mut now, &mut loads);
        balance_leaders(&mut now, &mut loads);
    }

    Ok(partitions
        .iter()
        .zip(now)
        .filter(|(before, after)| before.replicas != after.replicas)
        .map(|(before, after)| PlannedMove {
            topic: after.topic,
            partition: after.partition,
            from: before.replicas.clone(),
            to: after.replicas,
        })
        .collect())
}

/// Rule 2: replica counts within one of each other.
fn balance_replicas(nodes: &[PlanNode], now: &mut [PlanPartition], loads: &mut Loads) {
    // Each move lowers the spread of replica counts; bounded in any case.
    for _ in 0..now.len() * nodes.len() + 1 {
        let Some((&most, &high)) = loads.replicas.iter().max_by_key(|(n, c)| (**c, **n)) else {
            return;
        };
        let Some((&least, &low)) = loads.replicas.iter().min_by_key(|(n, c)| (**c, **n)) else {
            return;
        };
        if high < low + 2 {
            return;
        }
        let gap = loads.bytes[&most].saturating_sub(loads.bytes[&least]) / 2;
        let candidate = now
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let at = p.replicas.iter().position(|s| s.node == most)?;
                if p.replicas.iter().any(|s| s.node == least) {
                    return None;
                }
                // Keep racks distinct where they were.
                let rack = rack_of(nodes, least);
                let clash = rack.is_some()
                    && p.replicas
                        .iter()
                        .enumerate()
                        .any(|(j, s)| j != at && rack_of(nodes, s.node) == rack);
                let was_distinct = rack_of(nodes, most) != rack;
                (!(clash && was_distinct)).then_some((i, at, p.bytes.abs_diff(gap)))
            })
            .min_by_key(|&(i, _, fit)| (fit, i));
        let Some((i, at, _)) = candidate else {
            return;
        };
        let target = nodes
            .iter()
            .find(|n| n.node == least)
            .expect("loads are of these nodes");
        let p = &mut now[i];
        loads.add(p, -1);
        p.replicas[at] = Slot {
            node: least,
            shard: loads.shard_on(target),
        };
        loads.add(p, 1);
    }
}

/// Rule 3: preferred leader counts within one of each other where a reorder can do it.
fn balance_leaders(now: &mut [PlanPartition], loads: &mut Loads) {
    for _ in 0..now.len() + 1 {
        let mut improved = false;
        let Some((&most, &high)) = loads.leaders.iter().max_by_key(|(n, c)| (**c, **n)) else {
            return;
        };
        // The partition led by `most` with a follower on the node leading fewest.
        let candidate = now
            .iter()
            .enumerate()
            .filter(|(_, p)| p.replicas.first().is_some_and(|s| s.node == most))
            .filter_map(|(i, p)| {
                let (j, s) = p.replicas.iter().enumerate().skip(1).min_by_key(|(_, s)| {
                    loads.leaders.get(&s.node).copied().unwrap_or(usize::MAX)
                })?;
                let count = loads.leaders.get(&s.node).copied()?;
                (count + 2 <= high).then_some((count, i, j))
            })
            .min();
        if let Some((_, i, j)) = candidate {
            let p = &mut now[i];
            loads.add(p, -1);
            p.replicas.swap(0, j);
            loads.add(p, 1);
            improved = true;
        }
        if !improved {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[i32], racks: &[&str]) -> Vec<PlanNode> {
        ids.iter()
            .enumerate()
            .map(|(i, &n)| PlanNode {
                node: NodeId(n),
                shards: 2,
                rack: racks.get(i).map(|r| r.to_string()),
            })
            .collect()
    }

    fn slot(n: i32) -> Slot {
        Slot {
            node: NodeId(n),
            shard: 0,
        }
    }

    fn partitions(count: i32, replicas: &[i32]) -> Vec<PlanPartition> {
        (0..count)
            .map(|p| {
                let k = replicas.len();
                let rotated: Vec<Slot> = (0..k)
                    .map(|i| slot(replicas[(p as usize + i) % k]))
                    .collect();
                PlanPartition {
                    topic: "t".into(),
                    partition: p,
                    replicas: rotated,
                    bytes: 1000 + p as u64,
                }
            })
            .collect()
    }

    fn apply(ps: &[PlanPartition], moves: &[PlannedMove]) -> Vec<PlanPartition> {
        ps.iter()
            .map(|p| {
                let m = moves.iter().find(|m| m.partition == p.partition);
                PlanPartition {
                    replicas: m.map_or(p.replicas.clone(), |m| m.to.clone()),
                    ..p.clone()
                }
            })
            .collect()
    }

    fn counts(ps: &[PlanPartition], first_only: bool) -> BTreeMap<NodeId, usize> {
        let mut c = BTreeMap::new();
        for p in ps {
            let take = if first_only { 1 } else { p.replicas.len() };
            for s in p.replicas.iter().take(take) {
                *c.entry(s.node).or_default() += 1;
            }
        }
        c
    }

    fn no_two_on_a_node(ps: &[PlanPartition]) {
        for p in ps {
            let set: BTreeSet<NodeId> = p.replicas.iter().map(|s| s.node).collect();
            assert_eq!(set.len(), p.replicas.len(), "{p:?}");
        }
    }

    #[test]
    fn a_new_node_gets_its_share_and_a_balanced_cluster_no_moves() {
        let before = partitions(12, &[1, 2, 3]);
        let four = nodes(&[1, 2, 3, 4], &[]);
        let moves = plan(&four, &before, Goal::Rebalance).unwrap();
        let after = apply(&before, &moves);
        no_two_on_a_node(&after);
        let c = counts(&after, false);
        assert_eq!(c.values().sum::<usize>(), 36);
        assert!(
            c.values().max().unwrap() - c.values().min().unwrap() <= 1,
            "{c:?}"
        );
        let leaders = counts(&after, true);
        assert!(
            leaders.values().max().unwrap() - leaders.values().min().unwrap() <= 1,
            "{leaders:?}"
        );
        // Minimal: 9 replicas move (node 4's share), not more.
        let moved: usize = moves
            .iter()
            .map(|m| m.to.iter().filter(|s| !m.from.contains(s)).count())
            .sum();
        assert_eq!(moved, 9, "{moves:?}");
        assert!(plan(&four, &after, Goal::Rebalance).unwrap().is_empty());
    }

    #[test]
    fn decommissioning_empties_the_node_and_keeps_racks_distinct() {
        let before = partitions(6, &[1, 2, 3]);
        let racked = nodes(&[1, 2, 3, 4], &["a", "b", "c", "c"]);
        let leaving = BTreeSet::from([NodeId(3)]);
        let moves = plan(&racked, &before, Goal::Evacuate(&leaving)).unwrap();
        let after = apply(&before, &moves);
        no_two_on_a_node(&after);
        assert!(after
            .iter()
            .all(|p| p.replicas.iter().all(|s| s.node != NodeId(3))));
        // Node 4 (rack c) replaces node 3 (rack c): racks stay a, b, c.
        for p in &after {
            let racks: BTreeSet<_> = p
                .replicas
                .iter()
                .map(|s| rack_of(&racked, s.node))
                .collect();
            assert_eq!(racks.len(), 3, "{p:?}");
        }
        // Preferred order kept: where 3 led, 4 leads.
        for (b, a) in before.iter().zip(&after) {
            if b.replicas[0].node == NodeId(3) {
                assert_eq!(a.replicas[0].node, NodeId(4));
            }
        }
    }

    #[test]
    fn a_dead_node_is_repaired_onto_the_live_ones_or_the_plan_says_why_not() {
        let before = partitions(4, &[1, 2, 3]);
        let live = nodes(&[1, 2, 4], &[]);
        let dead = BTreeSet::from([NodeId(3)]);
        let moves = plan(&live, &before, Goal::Evacuate(&dead)).unwrap();
        let after = apply(&before, &moves);
        no_two_on_a_node(&after);
        assert!(after
            .iter()
            .all(|p| p.replicas.iter().any(|s| s.node == NodeId(4))));
        // A partition whose only replicas were on dead nodes has no source: left alone.
        let orphan = vec![PlanPartition {
            topic: "o".into(),
            partition: 0,
            replicas: vec![slot(3)],
            bytes: 0,
        }];
        assert!(plan(&live, &orphan, Goal::Evacuate(&dead))
            .unwrap()
            .is_empty());
        let too_few = nodes(&[1, 2], &[]);
        assert!(matches!(
            plan(&too_few, &before, Goal::Evacuate(&dead)),
            Err(PlanError::NotEnoughNodes { .. })
        ));
    }
}
