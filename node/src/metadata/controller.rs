//! The control plane: one thread owns the cluster metadata and changes it.
//!
//! Contract: only this thread changes this node's metadata. Shards send it [`Command`]s and get
//! back a reply once every shard has applied the new [`Snapshot`] (so a topic is servable as
//! soon as its creation is acknowledged). Every change is saved to the [`MetadataStore`] before
//! it is broadcast. In a cluster other nodes change the store too: what they changed is applied
//! and broadcast as soon as the store reports it ([`Command::MetadataChanged`], sent by its
//! watch) and polled every [`METADATA_POLL_INTERVAL`] besides, and a change that collides with theirs is
//! decided again on the store's current state (so two nodes creating one topic: one wins, the
//! other answers TOPIC_ALREADY_EXISTS). Snapshots are immutable and shared by `Arc`.

use crate::ids::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use futures_channel::{mpsc as fmpsc, oneshot};
use kafka_protocol::ResponseError;
use replication::controller::{
    apply_isr_change, fence_isr_proposals, on_replica_back, on_replica_lost,
    preferred_leader_election, IsrChangeError,
};
use replication::{IsrChange, ReplicaId};

use super::elections::{apply_elections, ElectionType, Key as ElectionKey, Outcomes};
use super::moves::{apply_moves, complete_moves, min_insync_of, Cluster, Move};
use super::names::{refuse_internal, validate_topic_name};
use super::placement::{assigned_replicas, place_partitions, place_replicas, Load, NodeShards};
use super::planner::{plan, Goal, PlanNode, PlanPartition};
use super::snapshot::{
    FinalizedFeature, Leader, PartitionMeta, Slot, Snapshot, TopicMeta, DEFAULT_BROKER,
};
use super::store::{MetadataStore, Saved};
use crate::config::dynamic::UNCLEAN_LEADER_ELECTION;
use crate::error::Refused;
use crate::limits::CONTROLLER_ELECTION_INTERVAL;
use crate::limits::METADATA_POLL_INTERVAL;
use crate::limits::SNAPSHOT_APPLY_POLL;
use crate::limits::{PARTITIONS_MAX, SLOW_SNAPSHOT_APPLY_WARN};
use crate::security::acl::{Entry as AclEntry, Pattern};
use crate::security::scram::ScramCredential;

/// The answer to a [`Command`].
pub type Reply = oneshot::Sender<Result<(), Refused>>;

/// The answer to [`Command::AlterReassignments`]: one result per move, in order; `Err` when
/// none could be decided (no cluster, the store unreachable).
pub type MovesReply = oneshot::Sender<Result<Vec<Result<(), Refused>>, Refused>>;

/// A request to the control plane; the reply carries Kafka's error if it is refused.
pub enum Command {
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i32,
        configs: BTreeMap<String, String>,
        /// Manual replica assignment: Kafka broker ids per partition (then `partitions` and
        /// `replication_factor` follow from it).
        assignment: Option<Vec<Vec<i32>>>,
        reply: Reply,
    },
    DeleteTopic {
        name: String,
        reply: Reply,
    },
    CreatePartitions {
        name: String,
        count: i32,
        /// Manual replica assignment of the new partitions.
        assignment: Option<Vec<Vec<i32>>>,
        reply: Reply,
    },
    /// A topic's config overrides changed (IncrementalAlterConfigs, AlterConfigs): `alter`
    /// makes the new overrides from the current ones, or refuses (it validates them), so
    /// concurrent alterations of one topic each apply to the other's result.
    AlterTopicConfigs {
        name: String,
        alter: ConfigAlteration,
        reply: Reply,
    },
    /// A leader's ISR change (Kafka's AlterPartition), committed by compare-and-swap on the
    /// partition epoch.
    AlterPartition {
        topic: String,
        partition: i32,
        change: IsrChange,
        reply: Reply,
    },
    /// A user's SCRAM credentials set (by mechanism name) and deleted
    /// (AlterUserScramCredentials, `--add-scram`).
    AlterScram {
        user: String,
        upsert: Vec<(String, ScramCredential)>,
        delete: Vec<String>,
        reply: Reply,
    },
    /// A broker's (or, named `default`, the cluster's) dynamic configs changed
    /// (IncrementalAlterConfigs, AlterConfigs on a broker): `alter` makes the new ones from the
    /// current ones, or refuses.
    AlterBrokerConfigs {
        broker: String,
        alter: ConfigAlteration,
        reply: Reply,
    },
    /// A group's configs changed (IncrementalAlterConfigs on a GROUP resource): `alter` makes
    /// the new ones from the current ones, or refuses.
    AlterGroupConfigs {
        group: String,
        alter: ConfigAlteration,
        reply: Reply,
    },
    /// ACL bindings added (CreateAcls) and removed (DeleteAcls).
    AlterAcls {
        add: Vec<(Pattern, AclEntry)>,
        remove: Vec<(Pattern, AclEntry)>,
        reply: Reply,
    },
    /// Finalized feature levels changed (UpdateFeatures): `alter` makes the new levels from
    /// the current ones, or refuses.
    UpdateFeatures {
        alter: FeatureAlteration,
        reply: Reply,
    },
    /// Client quotas altered (AlterClientQuotas): each entity's keys set or removed, all
    /// checked first (one refused: none applied).
    AlterClientQuotas {
        alterations: Vec<crate::quotas::QuotaAlteration>,
        reply: Reply,
    },
    /// Leader elections an operator asked for (ElectLeaders): `partitions` `None` for all.
    ElectLeaders {
        kind: ElectionType,
        partitions: Option<Vec<ElectionKey>>,
        reply: oneshot::Sender<Result<Outcomes, Refused>>,
    },
    /// Replica moves started or cancelled (AlterPartitionReassignments), decided together and
    /// saved in one compare-and-swap.
    AlterReassignments {
        moves: Vec<Move>,
        reply: MovesReply,
    },
    /// The metadata store has news from other nodes (a cluster store's watch delivered
    /// changes): apply them now rather than at the next poll. Nothing to answer.
    MetadataChanged,
}

/// Makes a topic's new config overrides from its current ones (see
/// [`Command::AlterTopicConfigs`]).
pub type ConfigAlteration =
    Box<dyn Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Refused> + Send>;

/// New finalized feature levels from the current ones (UpdateFeatures), or a refusal; asked
/// again if the save meets a concurrent change.
pub type FeatureAlteration =
    Box<dyn Fn(&BTreeMap<String, i16>) -> Result<BTreeMap<String, i16>, Refused> + Send>;

/// A new snapshot for a shard; the shard answers on `applied` once it opened/closed its logs.
pub struct SnapshotUpdate {
    pub snapshot: Arc<Snapshot>,
    pub applied: oneshot::Sender<()>,
}

/// What the control plane needs to know of its node.
#[derive(Debug, Clone, Copy)]
pub struct ControllerSettings {
    pub node: NodeId,
    /// `min.insync.replicas` of topics that do not set it.
    pub min_insync_replicas: usize,
    /// `auto.leader.rebalance.enable`: preferred replicas take leadership back by themselves.
    pub auto_leader_rebalance: bool,
    /// `replica.repair.delay.ms`: a node gone this long has its replicas re-created elsewhere.
    pub replica_repair_delay: Option<std::time::Duration>,
}

/// The control-plane thread's state.
pub struct Controller {
    settings: ControllerSettings,
    store: Box<dyn MetadataStore>,
    shards: usize,
    snapshot: Snapshot,
    to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
    /// The node is stopping (SIGTERM): leave, broadcast nothing more.
    stopping: Arc<AtomicBool>,
    /// When the elected controller last looked for leaders to move (every
    /// [`CONTROLLER_ELECTION_INTERVAL`], or at once when the metadata changed).
    last_election: std::time::Instant,
    /// Nodes holding replicas that this controller has seen gone, and since when (the
    /// automatic repair's clock; a new controller starts it again).
    gone_since: BTreeMap<NodeId, Instant>,
}

impl Controller {
    /// A controller over `snapshot` (loaded from `store`), serving `to_shards.len()` shards.
    pub fn new(
        settings: ControllerSettings,
        store: Box<dyn MetadataStore>,
        snapshot: Snapshot,
        to_shards: Vec<fmpsc::UnboundedSender<SnapshotUpdate>>,
        stopping: Arc<AtomicBool>,
    ) -> Controller {
        Controller {
            settings,
            store,
            shards: to_shards.len(),
            snapshot,
            to_shards,
            stopping,
            last_election: std::time::Instant::now(),
            gone_since: BTreeMap::new(),
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Runs until every command sender is gone, or the node stops: then it leaves at once (a
    /// cluster store deregisters the node) and refuses what is still asked.
    pub fn run(mut self, commands: mpsc::Receiver<Command>) {
        self.broadcast();
        loop {
            if self.stopping() {
                self.controlled_shutdown();
                drop(self.store);
                // Refuse what the stopping shards still ask, until they are quiet (a shard's
                // task left pending at its executor's end may keep a sender forever).
                while let Ok(cmd) = commands.recv_timeout(METADATA_POLL_INTERVAL) {
                    if let Some((_, reply)) = cmd.split() {
                        let refused =
                            Refused::new(ResponseError::UnknownServerError, "the node is stopping");
                        reply.send(Err(refused)).ok();
                    }
                }
                return;
            }
            match commands.recv_timeout(METADATA_POLL_INTERVAL) {
                Ok(cmd) => {
                    self.catch_up();
                    self.execute(cmd);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => self.catch_up(),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Applies and broadcasts what other nodes changed; then, on the elected controller,
    /// moves leadership off nodes that are gone and back to replicas that return.
    fn catch_up(&mut self) {
        let changed = match self.store.poll() {
            Ok(Some(mut snapshot)) => {
                snapshot.version = self.snapshot.version + 1;
                self.snapshot = snapshot;
                self.broadcast();
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "reading cluster metadata changes");
                false
            }
        };
        if self.snapshot.controller == Some(self.settings.node)
            && !self.stopping()
            && (changed || self.last_election.elapsed() >= CONTROLLER_ELECTION_INTERVAL)
        {
            self.last_election = std::time::Instant::now();
            self.elect_leaders();
        }
    }

    /// The elected controller's duty: every replicated partition whose leader's node is gone
    /// gets a new leader from its ISR (or ELR; from any live replica only with
    /// `unclean.leader.election.enable`), a new leader epoch, and loses the gone nodes from
    /// its ISR; an offline partition is led again when a replica that may lead it returns;
    /// the preferred leader takes leadership back once it is in the ISR again.
    /// Saved by compare-and-swap: a conflict is decided again on the next poll.
    fn elect_leaders(&mut self) {
        let Some(nodes) = self.store.live_nodes() else {
            return;
        };
        let live: BTreeSet<ReplicaId> = nodes.iter().map(|n| ReplicaId::from(n.node)).collect();
        let eligible: BTreeSet<ReplicaId> =
            self.store.isr_eligible().map_or_else(BTreeSet::new, |n| {
                n.keys().map(|&n| ReplicaId::from(n)).collect()
            });
        let mut next = self.snapshot.clone();
        let cluster_unclean = next
            .broker_configs
            .get(DEFAULT_BROKER)
            .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION))
            .cloned();
        let mut changed = Vec::new();
        for topic in next.topics.values_mut() {
            let min_insync = self.min_insync(&topic.configs);
            let unclean = unclean_allowed(&cluster_unclean, &topic.configs);
            for (i, meta) in topic.partitions.iter_mut().enumerate() {
                if !meta.is_replicated() {
                    continue;
                }
                let mut state = meta.state();
                let mut moved = false;
                for r in state.replicas.clone() {
                    if live.contains(&r) {
                        continue;
                    }
                    if let Some(s) = on_replica_lost(&state, r, &live, min_insync, unclean) {
                        state = s;
                        moved = true;
                    }
                }
                if state.leader.is_none() {
                    for r in state.replicas.clone() {
                        if let Some(s) = on_replica_back(&state, r, &live) {
                            state = s;
                            moved = true;
                        }
                    }
                }
                // The preferred leader (the first replica) leads again once back in the ISR
                // (not while its node is in controlled shutdown).
                let preferred = self
                    .settings
                    .auto_leader_rebalance
                    .then(|| preferred_leader_election(&state, &eligible))
                    .flatten();
                if let Some(s) = preferred {
                    state = s;
                    moved = true;
                }
                if moved {
                    meta.apply_state(&state);
                    changed.push((topic.name.clone(), i, state.leader, state.leader_epoch));
                }
            }
        }
        // Moves whose new replicas are all in sync complete (a leader's ISR change usually
        // completes its own; this catches the rest, such as after a controller failover).
        let cluster = Cluster {
            nodes: &nodes,
            default_min_insync: self.settings.min_insync_replicas,
        };
        let completed = complete_moves(&mut next, &cluster);
        let repaired = self.repair_gone_nodes(&mut next, &cluster);
        if changed.is_empty() && completed.is_empty() && !repaired {
            return;
        }
        next.version += 1;
        match self.store.save(&next) {
            Ok(Saved::Yes) => {
                for (topic, partition, leader, epoch) in changed {
                    tracing::info!(%topic, partition, leader = ?leader.map(|r| r.0), leader_epoch = epoch.0, "elected partition leader");
                }
                self.snapshot = next;
                self.broadcast();
            }
            Ok(Saved::Conflict) => tracing::debug!("leader election collided; deciding again"),
            Err(e) => tracing::warn!(error = %e, "saving elected leaders"),
        }
    }

    /// Kafka's controlled shutdown, before this node leaves the cluster: every replicated
    /// partition it leads gets a new leader from the rest of its ISR (the next leader epoch), and
    /// it leaves every ISR, so clients and followers move at once instead of after the lease
    /// expires. A partition whose ISR is this node alone stays led here until the node is gone
    /// (then offline, as in Kafka). One compare-and-swap, tried again once on a conflict.
    fn controlled_shutdown(&mut self) {
        let Some(mut others) = self.live_replicas() else {
            return;
        };
        // First marked, so no ISR takes this node back in on a fetch it still makes while it
        // stops (its followers run until the node is gone), and no leadership moves back.
        if let Err(e) = self.store.begin_controlled_shutdown() {
            tracing::warn!(error = %e, "controlled shutdown: cannot mark this node as stopping");
        }
        let me = ReplicaId::from(self.settings.node);
        others.remove(&me);
        for attempt in 0..2 {
            let mut next = self.snapshot.clone();
            let mut moved = 0;
            for topic in next.topics.values_mut() {
                let min_insync = self.min_insync(&topic.configs);
                for meta in topic.partitions.iter_mut().filter(|m| m.is_replicated()) {
                    let state = meta.state();
                    if state.isr.len() < 2 || !state.isr.contains(&me) {
                        continue;
                    }
                    if let Some(s) = on_replica_lost(&state, me, &others, min_insync, false) {
                        meta.apply_state(&s);
                        moved += 1;
                    }
                }
            }
            if moved == 0 {
                return;
            }
            next.version += 1;
            match self.store.save(&next) {
                Ok(Saved::Yes) => {
                    tracing::info!(partitions = moved, "controlled shutdown: leadership and ISR membership moved to other nodes");
                    self.snapshot = next;
                    return;
                }
                Ok(Saved::Conflict) if attempt == 0 => {
                    if let Ok(Some(s)) = self.store.poll() {
                        self.snapshot = s;
                    }
                }
                Ok(Saved::Conflict) => tracing::warn!("controlled shutdown: metadata changed concurrently twice; leaving without moving leadership"),
                Err(e) => {
                    tracing::warn!(error = %e, "controlled shutdown: cannot move leadership; the controller will when this node's lease ends");
                    return;
                }
            }
        }
    }

    /// The live nodes as the replication state machines name replicas; `None` on a single
    /// node (its own metadata).
    fn live_replicas(&mut self) -> Option<BTreeSet<ReplicaId>> {
        let nodes = self.store.live_nodes()?;
        Some(nodes.iter().map(|n| ReplicaId::from(n.node)).collect())
    }

    /// A topic's `min.insync.replicas`.
    fn min_insync(&self, configs: &BTreeMap<String, String>) -> usize {
        min_insync_of(configs, self.settings.min_insync_replicas)
    }

    /// Applies a leader's ISR change if it was made against the current partition state.
    fn alter_partition(
        &mut self,
        snapshot: &mut Snapshot,
        topic: &str,
        partition: i32,
        change: &IsrChange,
    ) -> Result<bool, Refused> {
        let unknown = || {
            Refused::new(
                ResponseError::UnknownTopicOrPartition,
                format!("{topic}-{partition} does not exist"),
            )
        };
        // Only nodes an ISR may take in count as live for an addition (not one in controlled
        // shutdown), each under the broker epoch it is registered with now.
        let (live, broker_epochs) = match self.store.isr_eligible() {
            Some(nodes) => (
                nodes.keys().map(|&n| ReplicaId::from(n)).collect(),
                nodes
                    .iter()
                    .map(|(&n, &e)| (ReplicaId::from(n), e))
                    .collect(),
            ),
            None => (
                [ReplicaId::from(self.settings.node)].into(),
                BTreeMap::new(),
            ),
        };
        let t = snapshot.topics.get_mut(topic).ok_or_else(unknown)?;
        let min_insync = self.min_insync(&t.configs);
        let meta = usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get_mut(p))
            .ok_or_else(unknown)?;
        let state = meta.state();
        let next = match apply_isr_change(&state, change, &live, &broker_epochs, min_insync) {
            Ok(next) => next,
            Err(IsrChangeError::InvalidIsr(why)) => {
                tracing::warn!(topic, partition, reason = %why, "refusing an invalid ISR change");
                fence_isr_proposals(&state)
            }
            Err(IsrChangeError::IneligibleReplica(why)) => {
                tracing::info!(topic, partition, reason = %why, "refusing an ISR change that adds an ineligible replica");
                fence_isr_proposals(&state)
            }
            Err(e) => {
                return Err(Refused::new(
                    ResponseError::FencedLeaderEpoch,
                    format!("{topic}-{partition}: {e}"),
                ))
            }
        };
        tracing::debug!(topic, partition, isr = ?next.isr.iter().map(|r| r.0).collect::<Vec<_>>(), partition_epoch = next.partition_epoch, "ISR change decided; saving");
        meta.apply_state(&next);
        Ok(true)
    }

    /// The automatic repair (`replica.repair.delay.ms`): the replicas of nodes gone longer
    /// than the delay move to live nodes, as the planner places them (partitions already
    /// moving, or with no live replica left to copy from, wait). Whether anything started.
    fn repair_gone_nodes(&mut self, next: &mut Snapshot, cluster: &Cluster) -> bool {
        let Some(delay) = self.settings.replica_repair_delay else {
            return false;
        };
        let live: BTreeSet<NodeId> = cluster.nodes.iter().map(|n| n.node).collect();
        let holding: BTreeSet<NodeId> = next
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().flat_map(|p| p.slots()))
            .map(|s| s.node)
            .filter(|n| !live.contains(n))
            .collect();
        let now = Instant::now();
        self.gone_since.retain(|n, _| holding.contains(n));
        for n in &holding {
            self.gone_since.entry(*n).or_insert(now);
        }
        let due: BTreeSet<NodeId> = self
            .gone_since
            .iter()
            .filter(|(_, since)| now.duration_since(**since) >= delay)
            .map(|(n, _)| *n)
            .collect();
        if due.is_empty() {
            return false;
        }
        let racks: BTreeMap<NodeId, String> = next
            .nodes
            .iter()
            .filter_map(|n| Some((n.node, n.rack.clone()?)))
            .collect();
        let nodes: Vec<PlanNode> = cluster
            .nodes
            .iter()
            .map(|n| PlanNode {
                node: n.node,
                shards: n.shards,
                rack: racks.get(&n.node).cloned(),
            })
            .collect();
        let partitions: Vec<PlanPartition> = next
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.is_reassigning())
                    .map(|(i, p)| PlanPartition {
                        topic: t.name.clone(),
                        partition: i as i32,
                        replicas: p.slots(),
                        bytes: 0,
                    })
            })
            .collect();
        let moves = match plan(&nodes, &partitions, Goal::Evacuate(&due)) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, nodes = ?due, "automatic repair: no plan");
                return false;
            }
        };
        let moves: Vec<Move> = moves
            .into_iter()
            .map(|m| Move {
                topic: m.topic,
                partition: m.partition,
                target: Some(
                    m.to.iter()
                        .map(|s| crate::ids::broker_id(s.node, s.shard).0)
                        .collect(),
                ),
            })
            .collect();
        let (results, changed) = apply_moves(next, &moves, cluster);
        for (m, r) in moves.iter().zip(&results) {
            if let Err(e) = r {
                tracing::warn!(topic = %m.topic, partition = m.partition, error = %e.message, "automatic repair refused");
            }
        }
        if changed {
            tracing::warn!(nodes = ?due, moves = moves.len(), "automatic repair: re-creating the replicas of nodes gone longer than replica.repair.delay.ms");
        }
        changed
    }

    /// Completes the moves an ISR change made ready (their new replicas all in sync).
    fn complete_moves(&mut self, snapshot: &mut Snapshot) {
        if let Some(nodes) = self.store.live_nodes() {
            let cluster = Cluster {
                nodes: &nodes,
                default_min_insync: self.settings.min_insync_replicas,
            };
            complete_moves(snapshot, &cluster);
        }
    }

    /// Runs the elections an operator asked for (see [`super::elections`]) and saves them in
    /// one compare-and-swap.
    fn elect_on_request(
        &mut self,
        kind: ElectionType,
        partitions: Option<&[ElectionKey]>,
    ) -> Result<Outcomes, Attempt> {
        let Some(live) = self.store.isr_eligible() else {
            return Err(Attempt::Refused(Refused::new(
                ResponseError::ElectionNotNeeded,
                "a single node (metadata.store=embedded) leads every partition itself",
            )));
        };
        let live: BTreeSet<ReplicaId> = live.keys().map(|&n| ReplicaId::from(n)).collect();
        let mut next = self.snapshot.clone();
        let (outcomes, changed) = apply_elections(&mut next, kind, partitions, &live);
        if !changed {
            return Ok(outcomes);
        }
        next.version += 1;
        self.save_and_broadcast(next)?;
        Ok(outcomes)
    }

    /// Saves `next` (compare-and-swap) and hands it to the shards.
    fn save_and_broadcast(&mut self, next: Snapshot) -> Result<(), Attempt> {
        match self.store.save(&next) {
            Ok(Saved::Yes) => {
                self.snapshot = next;
                self.broadcast();
                Ok(())
            }
            Ok(Saved::Conflict) => Err(Attempt::Conflict),
            Err(e) => Err(Attempt::Refused(Refused::new(
                ResponseError::KafkaStorageError,
                format!("persisting metadata: {e}"),
            ))),
        }
    }

    /// Starts or cancels replica moves (see [`super::moves`]) and saves them in one
    /// compare-and-swap; moves needing no catch-up complete at once.
    fn alter_reassignments(&mut self, moves: &[Move]) -> Result<Vec<Result<(), Refused>>, Attempt> {
        let Some(nodes) = self.store.live_nodes() else {
            return Err(Attempt::Refused(Refused::new(
                ResponseError::InvalidReplicaAssignment,
                "replicas move between the nodes of a cluster; this node keeps its own metadata (metadata.store=embedded)",
            )));
        };
        let cluster = Cluster {
            nodes: &nodes,
            default_min_insync: self.settings.min_insync_replicas,
        };
        let mut next = self.snapshot.clone();
        let (results, changed) = apply_moves(&mut next, moves, &cluster);
        if !changed {
            return Ok(results);
        }
        next.version += 1;
        self.save_and_broadcast(next)?;
        Ok(results)
    }

    /// The nodes `change` adds to the partition's ISR as this node last read it.
    fn isr_additions(&self, topic: &str, partition: i32, change: &IsrChange) -> BTreeSet<NodeId> {
        let current = partition_state(&self.snapshot, topic, partition).map(|s| s.isr);
        change
            .new_isr
            .iter()
            .filter(|r| current.as_ref().is_none_or(|isr| !isr.contains(r)))
            .map(|&r| NodeId::from(r))
            .collect()
    }

    fn execute(&mut self, cmd: Command) {
        // The requester may have gone (connection closed); nothing to tell then.
        match cmd {
            Command::AlterReassignments { moves, reply } => {
                let result = self.retried(|c| c.alter_reassignments(&moves));
                reply.send(result).ok();
            }
            Command::ElectLeaders {
                kind,
                partitions,
                reply,
            } => {
                let result = self.retried(|c| c.elect_on_request(kind, partitions.as_deref()));
                reply.send(result).ok();
            }
            cmd => {
                let Some((op, reply)) = cmd.split() else {
                    return; // news from the store only: applied by the caller's catch-up
                };
                reply.send(self.retried(|c| c.attempt(&op))).ok();
            }
        }
    }

    /// Runs `change`; a collision with another node's change is decided again once, on the
    /// new state.
    fn retried<T>(
        &mut self,
        mut change: impl FnMut(&mut Self) -> Result<T, Attempt>,
    ) -> Result<T, Refused> {
        let mut result = change(self);
        if matches!(result, Err(Attempt::Conflict)) {
            self.catch_up();
            result = change(self);
        }
        result.map_err(Attempt::into_refused)
    }

    /// Applies `op` to a copy of the snapshot, saves and broadcasts it.
    fn attempt(&mut self, op: &Op) -> Result<(), Attempt> {
        let mut next = self.snapshot.clone();
        let changed = match op {
            Op::CreateTopic {
                name,
                partitions,
                replication_factor,
                configs,
                assignment,
            } => self.create_topic(
                &mut next,
                name,
                (*partitions, *replication_factor),
                configs,
                assignment.as_deref(),
            ),
            Op::DeleteTopic { name } => delete_topic(&mut next, name),
            Op::CreatePartitions {
                name,
                count,
                assignment,
            } => self.create_partitions(&mut next, name, *count, assignment.as_deref()),
            Op::AlterTopicConfigs { name, alter } => alter_topic_configs(&mut next, name, alter),
            Op::AlterBrokerConfigs { broker, alter } => {
                alter_broker_configs(&mut next, broker, alter)
            }
            Op::AlterGroupConfigs { group, alter } => alter_group_configs(&mut next, group, alter),
            Op::AlterPartition {
                topic,
                partition,
                change,
            } => self
                .alter_partition(&mut next, topic, *partition, change)
                .inspect(|_| self.complete_moves(&mut next)),
            Op::AlterScram {
                user,
                upsert,
                delete,
            } => alter_scram(&mut next, user, upsert, delete),
            Op::AlterAcls { add, remove } => Ok(alter_acls(&mut next, add, remove)),
            Op::UpdateFeatures { alter } => update_features(&mut next, alter),
            Op::AlterClientQuotas { alterations } => alter_client_quotas(&mut next, alterations),
        }
        .map_err(Attempt::Refused)?;
        if !changed {
            return Ok(());
        }
        next.version += 1;
        // An ISR addition was decided on the added brokers' registrations: saved only if they
        // are unchanged (none restarted or entered controlled shutdown meanwhile).
        let guarded = match op {
            Op::AlterPartition {
                topic,
                partition,
                change,
            } => self.isr_additions(topic, *partition, change),
            _ => BTreeSet::new(),
        };
        let saved = self.store.save_guarded(&next, &guarded).map_err(|e| {
            Attempt::Refused(Refused::new(
                ResponseError::KafkaStorageError,
                format!("persisting metadata: {e}"),
            ))
        })?;
        if saved == Saved::Conflict {
            return Err(Attempt::Conflict);
        }
        if let Op::AlterPartition {
            topic, partition, ..
        } = op
        {
            // Logged once saved (a change decided on a stale view is refused by the store).
            if let Some(state) = partition_state(&next, topic, *partition) {
                tracing::info!(topic, partition, isr = ?state.isr.iter().map(|r| r.0).collect::<Vec<_>>(), partition_epoch = state.partition_epoch, "ISR changed");
            }
        }
        self.snapshot = next;
        self.broadcast();
        Ok(())
    }

    /// Sends the snapshot to every shard and waits until each applied it.
    fn broadcast(&mut self) {
        let snapshot = Arc::new(self.snapshot.clone());
        let mut waits = Vec::new();
        for (shard, tx) in self.to_shards.iter().enumerate() {
            let (applied, done) = oneshot::channel();
            if tx
                .unbounded_send(SnapshotUpdate {
                    snapshot: snapshot.clone(),
                    applied,
                })
                .is_ok()
            {
                waits.push((shard, done));
            }
        }
        let started = Instant::now();
        for (shard, mut w) in waits {
            // A shard that stopped drops its sender: treat as applied. A stopping shard may
            // never get to it (its connections may wait for this thread): stop waiting then.
            let mut warned = false;
            loop {
                match w.try_recv() {
                    Ok(Some(())) | Err(_) => break,
                    Ok(None) if self.stopping() => break,
                    Ok(None) => {
                        if !warned && started.elapsed() >= SLOW_SNAPSHOT_APPLY_WARN {
                            tracing::warn!(
                                shard,
                                waited = ?started.elapsed(),
                                "a shard has not applied the new metadata snapshot yet; metadata changes wait for it"
                            );
                            warned = true;
                        }
                        std::thread::sleep(SNAPSHOT_APPLY_POLL)
                    }
                }
            }
        }
        self.store.shards_applied();
    }

    fn create_topic(
        &mut self,
        snapshot: &mut Snapshot,
        name: &str,
        (partitions, replication_factor): (i32, i32),
        configs: &BTreeMap<String, String>,
        assignment: Option<&[Vec<i32>]>,
    ) -> Result<bool, Refused> {
        let partitions = assignment.map_or(partitions, |a| a.len() as i32);
        validate_topic_name(name)?;
        if snapshot.topics.contains_key(name) {
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
        crate::topic_config::validate(configs)
            .map_err(|e| Refused::new(ResponseError::InvalidConfig, e.to_string()))?;
        let placed = match assignment {
            Some(a) => self.assign(a)?,
            None => self.place(snapshot, 0, partitions, replication_factor)?,
        };
        let topic = TopicMeta {
            name: name.to_owned(),
            id: uuid::Uuid::new_v4(),
            partitions: placed,
            configs: configs.clone(),
        };
        snapshot.topics.insert(name.to_owned(), topic);
        Ok(true)
    }

    fn create_partitions(
        &mut self,
        snapshot: &mut Snapshot,
        name: &str,
        count: i32,
        assignment: Option<&[Vec<i32>]>,
    ) -> Result<bool, Refused> {
        refuse_internal(
            name,
            "given more partitions (group coordinators would move)",
        )?;
        let (have, factor) = snapshot
            .topics
            .get(name)
            .map(|t| {
                let factor = t.partitions.first().map_or(1, |p| p.replicas.len().max(1));
                (t.partitions.len() as i32, factor as i32)
            })
            .ok_or_else(|| {
                Refused::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                )
            })?;
        if count <= have || count > PARTITIONS_MAX {
            return Err(Refused::new(
                ResponseError::InvalidPartitions,
                format!("topic '{name}' has {have} partitions; asked for {count}"),
            ));
        }
        let more = match assignment {
            Some(a) if a.len() as i32 != count - have => {
                return Err(Refused::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "{} assignments for the {} new partitions of '{name}'",
                        a.len(),
                        count - have
                    ),
                ))
            }
            Some(a) if a.first().map_or(0, Vec::len) != factor as usize => {
                return Err(Refused::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!("'{name}' has {factor} replicas per partition; the assignment differs"),
                ))
            }
            Some(a) => self.assign(a)?,
            None => self.place(snapshot, have, count, factor)?,
        };
        snapshot
            .topics
            .get_mut(name)
            .expect("checked above")
            .partitions
            .extend(more);
        Ok(true)
    }

    /// Partitions placed as a manual assignment says (checked by the placement rules: see
    /// `placement::assigned_replicas`), over the cluster's live nodes or this node's shards.
    fn assign(&mut self, assignment: &[Vec<i32>]) -> Result<Vec<PartitionMeta>, Refused> {
        let live = self.store.live_nodes();
        let single = live.is_none();
        let nodes = live.unwrap_or_else(|| {
            vec![NodeShards {
                node: self.settings.node,
                shards: self.shards,
            }]
        });
        let slots = assigned_replicas(assignment, &nodes)
            .map_err(|e| Refused::new(ResponseError::InvalidReplicaAssignment, e.to_string()))?;
        Ok(slots
            .into_iter()
            .map(|s| {
                if single {
                    PartitionMeta::single(Leader::Local, s[0].shard)
                } else {
                    PartitionMeta::placed(s)
                }
            })
            .collect())
    }

    /// Partitions `from..to` with `factor` replicas each: over this node's shards alone (one
    /// replica), or over the cluster's live nodes, counting what each holds.
    fn place(
        &mut self,
        snapshot: &Snapshot,
        from: i32,
        to: i32,
        factor: i32,
    ) -> Result<Vec<PartitionMeta>, Refused> {
        let Some(nodes) = self.store.live_nodes() else {
            if factor != 1 {
                return Err(Refused::new(
                    ResponseError::InvalidReplicationFactor,
                    format!("replication factor {factor} on a single node (metadata.store=embedded); use 1"),
                ));
            }
            return Ok(place_partitions(from, to, self.shards));
        };
        let mut load = Load::default();
        for n in &snapshot.nodes {
            if let Some(rack) = &n.rack {
                load.set_rack(n.node, rack.clone());
            }
        }
        for t in snapshot.topics.values() {
            for p in &t.partitions {
                match (p.replicas.is_empty(), p.leader.node()) {
                    (false, _) => load.add(&p.replicas),
                    (true, Some(node)) => load.add(&[Slot {
                        node,
                        shard: p.shard,
                    }]),
                    (true, None) => {}
                }
            }
        }
        let placed = place_replicas(&nodes, &mut load, from, to, factor)
            .map_err(|e| Refused::new(ResponseError::InvalidReplicationFactor, e.to_string()))?;
        Ok(placed.into_iter().map(PartitionMeta::placed).collect())
    }
}

/// Whether a topic allows unclean leader election: its own `unclean.leader.election.enable`,
/// else the cluster's dynamic default, else Kafka's default (no).
fn unclean_allowed(cluster: &Option<String>, topic: &BTreeMap<String, String>) -> bool {
    topic
        .get(UNCLEAN_LEADER_ELECTION)
        .or(cluster.as_ref())
        .is_some_and(|v| v == "true")
}

/// A partition's replication state in `snapshot`, if the partition exists.
fn partition_state(
    snapshot: &Snapshot,
    topic: &str,
    partition: i32,
) -> Option<replication::PartitionState> {
    let p = usize::try_from(partition).ok()?;
    Some(snapshot.topics.get(topic)?.partitions.get(p)?.state())
}

fn alter_topic_configs(
    snapshot: &mut Snapshot,
    name: &str,
    alter: &ConfigAlteration,
) -> Result<bool, Refused> {
    let topic = snapshot.topics.get_mut(name).ok_or_else(|| {
        Refused::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        )
    })?;
    let configs = alter(&topic.configs)?;
    if topic.configs == configs {
        return Ok(false);
    }
    tracing::info!(topic = name, ?configs, "topic configs altered");
    topic.configs = configs;
    Ok(true)
}

fn alter_broker_configs(
    snapshot: &mut Snapshot,
    broker: &str,
    alter: &ConfigAlteration,
) -> Result<bool, Refused> {
    alter_configs_of(
        &mut snapshot.broker_configs,
        broker,
        alter,
        "dynamic broker configs",
    )
}

fn alter_group_configs(
    snapshot: &mut Snapshot,
    group: &str,
    alter: &ConfigAlteration,
) -> Result<bool, Refused> {
    alter_configs_of(&mut snapshot.group_configs, group, alter, "group configs")
}

/// `alter` applied to the configs of `name` in `all` (none left: the entry goes).
fn alter_configs_of(
    all: &mut BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    alter: &ConfigAlteration,
    what: &str,
) -> Result<bool, Refused> {
    let current = all.get(name).cloned().unwrap_or_default();
    let configs = alter(&current)?;
    if configs == current {
        return Ok(false);
    }
    tracing::info!(name, ?configs, "{what} altered");
    if configs.is_empty() {
        all.remove(name);
    } else {
        all.insert(name.to_owned(), configs);
    }
    Ok(true)
}

/// The levels `alter` makes, each changed one at the next features epoch (a feature set to 0
/// stays listed at 0, so the epoch never goes back).
fn update_features(snapshot: &mut Snapshot, alter: &FeatureAlteration) -> Result<bool, Refused> {
    let current = snapshot.feature_levels();
    let levels = alter(&current)?;
    if levels == current {
        return Ok(false);
    }
    let epoch = snapshot.features_epoch() + 1;
    for (name, level) in levels {
        if current.get(&name) != Some(&level) {
            tracing::info!(feature = %name, level, epoch, "finalized feature level changed");
            snapshot
                .features
                .insert(name, FinalizedFeature { level, epoch });
        }
    }
    Ok(true)
}

/// Every alteration applied, or none (the first refused is the answer).
fn alter_client_quotas(
    snapshot: &mut Snapshot,
    alterations: &[crate::quotas::QuotaAlteration],
) -> Result<bool, Refused> {
    let mut changed = false;
    for a in alterations {
        changed |= crate::quotas::alter(&mut snapshot.client_quotas, a)
            .map_err(|e| Refused::new(ResponseError::InvalidRequest, e.to_string()))?;
    }
    Ok(changed)
}

fn delete_topic(snapshot: &mut Snapshot, name: &str) -> Result<bool, Refused> {
    refuse_internal(name, "deleted")?;
    if snapshot.topics.remove(name).is_none() {
        return Err(Refused::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        ));
    }
    Ok(true)
}

/// A command without its reply channel.
enum Op {
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i32,
        configs: BTreeMap<String, String>,
        assignment: Option<Vec<Vec<i32>>>,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        count: i32,
        assignment: Option<Vec<Vec<i32>>>,
    },
    AlterTopicConfigs {
        name: String,
        alter: ConfigAlteration,
    },
    AlterPartition {
        topic: String,
        partition: i32,
        change: IsrChange,
    },
    AlterBrokerConfigs {
        broker: String,
        alter: ConfigAlteration,
    },
    AlterGroupConfigs {
        group: String,
        alter: ConfigAlteration,
    },
    AlterScram {
        user: String,
        upsert: Vec<(String, ScramCredential)>,
        delete: Vec<String>,
    },
    AlterAcls {
        add: Vec<(Pattern, AclEntry)>,
        remove: Vec<(Pattern, AclEntry)>,
    },
    UpdateFeatures {
        alter: FeatureAlteration,
    },
    AlterClientQuotas {
        alterations: Vec<crate::quotas::QuotaAlteration>,
    },
}

enum Attempt {
    Refused(Refused),
    /// The store refused the save: another node changed the same metadata first.
    Conflict,
}

impl Attempt {
    /// What the requester is told after the retry.
    fn into_refused(self) -> Refused {
        match self {
            Attempt::Refused(r) => r,
            Attempt::Conflict => Refused::new(
                ResponseError::UnknownServerError,
                "the cluster metadata changed concurrently twice; retry",
            ),
        }
    }
}

impl Command {
    /// The operation and its reply; `None` for [`Command::MetadataChanged`], which asks for none.
    fn split(self) -> Option<(Op, Reply)> {
        let split = match self {
            Command::CreateTopic {
                name,
                partitions,
                replication_factor,
                configs,
                assignment,
                reply,
            } => (
                Op::CreateTopic {
                    name,
                    partitions,
                    replication_factor,
                    configs,
                    assignment,
                },
                reply,
            ),
            Command::DeleteTopic { name, reply } => (Op::DeleteTopic { name }, reply),
            Command::CreatePartitions {
                name,
                count,
                assignment,
                reply,
            } => (
                Op::CreatePartitions {
                    name,
                    count,
                    assignment,
                },
                reply,
            ),
            Command::AlterTopicConfigs { name, alter, reply } => {
                (Op::AlterTopicConfigs { name, alter }, reply)
            }
            Command::AlterPartition {
                topic,
                partition,
                change,
                reply,
            } => (
                Op::AlterPartition {
                    topic,
                    partition,
                    change,
                },
                reply,
            ),
            Command::AlterAcls { add, remove, reply } => (Op::AlterAcls { add, remove }, reply),
            Command::UpdateFeatures { alter, reply } => (Op::UpdateFeatures { alter }, reply),
            Command::AlterClientQuotas { alterations, reply } => {
                (Op::AlterClientQuotas { alterations }, reply)
            }
            Command::AlterBrokerConfigs {
                broker,
                alter,
                reply,
            } => (Op::AlterBrokerConfigs { broker, alter }, reply),
            Command::AlterGroupConfigs {
                group,
                alter,
                reply,
            } => (Op::AlterGroupConfigs { group, alter }, reply),
            Command::AlterScram {
                user,
                upsert,
                delete,
                reply,
            } => (
                Op::AlterScram {
                    user,
                    upsert,
                    delete,
                },
                reply,
            ),
            Command::MetadataChanged
            | Command::AlterReassignments { .. }
            | Command::ElectLeaders { .. } => return None,
        };
        Some(split)
    }
}

/// Sets and deletes a user's SCRAM credentials; deleting one the user does not have is
/// RESOURCE_NOT_FOUND, as in Kafka (and nothing changes).
fn alter_scram(
    snapshot: &mut Snapshot,
    user: &str,
    upsert: &[(String, ScramCredential)],
    delete: &[String],
) -> Result<bool, Refused> {
    let creds = snapshot.scram.entry(user.to_owned()).or_default();
    for mech in delete {
        if creds.remove(mech).is_none() {
            return Err(Refused::new(
                ResponseError::ResourceNotFound,
                format!("attempt to delete a user credential that does not exist: {user} has no {mech} credential"),
            ));
        }
    }
    for (mech, cred) in upsert {
        creds.insert(mech.clone(), cred.clone());
    }
    if creds.is_empty() {
        snapshot.scram.remove(user);
    }
    Ok(!upsert.is_empty() || !delete.is_empty())
}

/// Adds and removes ACL bindings (removing one that is gone already is no error: a concurrent
/// DeleteAcls took it); whether anything changed.
fn alter_acls(
    snapshot: &mut Snapshot,
    add: &[(Pattern, AclEntry)],
    remove: &[(Pattern, AclEntry)],
) -> bool {
    let mut changed = false;
    for (pattern, entry) in remove {
        let key = pattern.key();
        if let Some(entries) = snapshot.acls.get_mut(&key) {
            changed |= entries.remove(entry);
            if entries.is_empty() {
                snapshot.acls.remove(&key);
            }
        }
    }
    for (pattern, entry) in add {
        changed |= snapshot
            .acls
            .entry(pattern.key())
            .or_default()
            .insert(entry.clone());
    }
    changed
}
