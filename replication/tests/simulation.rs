//! A seeded simulation of one partition replicated on three of four nodes, driving the `replication`
//! state machines the way the broker will: followers fetch from the leader, the leader answers
//! and proposes ISR changes, a controller (sessions, elections, ISR compare-and-swap) commits
//! state and broadcasts it, and a client produces with `acks=all` (`min.insync.replicas=2`).
//!
//! A leader's appends are written a while later, and its followers fetch up to its log end
//! offset, written or not (as the broker serves them); the high watermark counts only what the
//! leader has written.
//!
//! Faults, chosen by the seed: messages delayed (1–25 ms), dropped and duplicated; nodes killed
//! (their written log survives, a leader's unwritten appends are lost — which its followers may
//! already hold) and restarted; power lost on a node (its unflushed suffix lost;
//! only while all three are up and in sync, so the acknowledged records are on two others);
//! nodes cut off from everyone or only from the controller; nodes paused past their session
//! (SIGSTOP) and resumed. Then every fault heals and the cluster settles. With moves on (the
//! second test), the controller also moves replicas while all this goes on (KIP-455: a new
//! replica added, caught up, the old one removed; a move replaced by another; a move
//! cancelled), and a replica removed deletes its log as the broker does.
//!
//! Checked all along and at the end:
//! - one leader per leader epoch;
//! - what any leader's high watermark covered (committed) never changes value and is in every
//!   later leader's log: no acknowledged record lost, none changed;
//! - every acknowledgement names a committed offset holding the acknowledged value;
//! - with moves: the settled partition is on the replicas of its last move, none moving, and
//!   nodes that are no replica hold nothing;
//! - at the end, every replica's log equals the leader's below its own high watermark, and the
//!   in-sync replicas hold the leader's log up to the high watermark.
//!
//! A failure names its seed; `RINGLOG_SIM_SEED=N` runs that seed alone (with
//! `RINGLOG_SIM_TRACE=1`, every message and fault printed), `RINGLOG_SIM_SEEDS=N` runs seeds
//! 0..N instead of the default 300.

use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpochCache;
use iouring_log::{LeaderEpoch, Offset};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use replication::controller::{
    apply_isr_change, fence_isr_proposals, on_replica_back, on_replica_lost,
    on_replica_lost_unflushed, preferred_leader_election, IsrChangeError,
};
use replication::follower::{FollowerAction, FollowerState};
use replication::leader::{
    AckState, FetchAnswer, FollowerFetch, LeaderConfig, LeaderState, StillLeader,
};
use replication::reassignment::{self, is_reassigning};
use replication::{IsrChange, PartitionState, ReplicaId};

const SEEDS: u64 = 300;
const NODES: i32 = 4;
/// The partition's replication factor (one node is spare: moves go there and back).
const REPLICAS: i32 = 3;
const FAULT_MS: i64 = 4_000;
const SETTLE_MS: i64 = 4_000;
const SESSION_MS: i64 = 150;
const HEARTBEAT_MS: i64 = 30;
const FLUSH_MS: i64 = 40;
const PRODUCE_EVERY_MS: i64 = 3;
const CONFIG: LeaderConfig = LeaderConfig {
    min_insync: 2,
    replica_lag_max_ms: 300,
    isr_change_retry_ms: 100,
};
const CONTROLLER: i32 = -1;
const CLIENT: i32 = -2;

/// One record a message: `(leader epoch, value)`.
type Record = (LeaderEpoch, u64);

#[derive(Default)]
struct SimLog {
    records: Vec<Record>,
    epochs: LeaderEpochCache,
    /// Records below are written to the file (a kill -9 keeps them); a leader's appends are
    /// written a while later, and its followers may fetch them before (as the broker serves
    /// followers up to the log end offset). A follower writes what it appends before it
    /// fetches again.
    written: usize,
    flushed: usize,
}

impl SimLog {
    fn end(&self) -> Offset {
        Offset(self.records.len() as i64)
    }

    fn written_end(&self) -> Offset {
        Offset(self.written as i64)
    }

    /// Kafka's `latestEpoch`: the latest epoch in the epoch cache, which may have no records
    /// yet (a leader that wrote nothing), so that a follower detects that it diverges.
    fn last_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.latest_epoch()
    }

    fn append(&mut self, record: Record) {
        let at = self.end();
        self.epochs.assign(record.0, at);
        self.records.push(record);
    }

    fn truncate(&mut self, to: Offset) {
        let to = (to.0.max(0) as usize).min(self.records.len());
        self.records.truncate(to);
        self.epochs.truncate_from_end(Offset(to as i64));
        self.written = self.written.min(to);
        self.flushed = self.flushed.min(to);
    }
}

enum Role {
    None,
    Leader(LeaderState),
    Follower(FollowerState),
}

struct Node {
    id: ReplicaId,
    up: bool,
    paused_until: i64,
    incarnation: u64,
    log: SimLog,
    role: Role,
    known: Option<PartitionState>,
    hw_checkpoint: Offset,
    /// The fetch in flight and when it was sent (a fetch is matched to its answer as a
    /// correlation id would: only the answer to this very request counts).
    fetch_in_flight: Option<(FollowerFetch, i64)>,
    last_heartbeat_ms: i64,
    /// Its session (registration) was accepted and not lost since.
    registered: bool,
    /// Its lease holds until then: the send time of the last answered heartbeat plus the
    /// session timeout, so it always ends before the controller's view of it does.
    lease_until: i64,
    /// This incarnation started after a power loss.
    lost_unflushed: bool,
    /// `(end offset, request id)` of acks=all produces waiting for the high watermark.
    waiting: Vec<(Offset, u64)>,
}

#[derive(Clone, Debug)]
enum Msg {
    Fetch(FollowerFetch),
    FetchAnswer {
        fetch: FollowerFetch,
        answer: FetchAnswer,
        records: Vec<Record>,
    },
    Produce {
        id: u64,
        value: u64,
    },
    Produced {
        id: u64,
        result: Result<Offset, String>,
    },
    /// `lost_unflushed`: this incarnation started after a power loss (records written but not
    /// flushed may be gone).
    Heartbeat {
        incarnation: u64,
        lost_unflushed: bool,
        sent_ms: i64,
    },
    /// Carries the current state: a broker's watch delivers every change in order, eventually.
    HeartbeatAnswer {
        state: PartitionState,
        incarnation: u64,
        sent_ms: i64,
    },
    IsrChange(IsrChange),
    Metadata(PartitionState),
}

struct Envelope {
    at: i64,
    seq: u64,
    from: i32,
    to: i32,
    msg: Msg,
}

struct Controller {
    state: PartitionState,
    sessions: BTreeMap<i32, (u64, i64)>,
}

impl Controller {
    fn live(&self, now: i64) -> BTreeSet<ReplicaId> {
        self.sessions
            .iter()
            .filter(|(_, (_, last))| now - last <= SESSION_MS)
            .map(|(&n, _)| ReplicaId(n))
            .collect()
    }

    /// The live sessions' broker epochs (a node's incarnation stands for its registration).
    fn broker_epochs(&self, now: i64) -> BTreeMap<ReplicaId, i64> {
        self.sessions
            .iter()
            .filter(|(_, (_, last))| now - last <= SESSION_MS)
            .map(|(&n, &(incarnation, _))| (ReplicaId(n), incarnation as i64))
            .collect()
    }
}

struct Sim {
    seed: u64,
    rng: StdRng,
    now: i64,
    nodes: Vec<Node>,
    controller: Controller,
    queue: Vec<Envelope>,
    next_seq: u64,
    /// Links cut: `(a, b)` both ways.
    cut: BTreeSet<(i32, i32)>,
    faults_on: bool,
    drop_p: f64,
    dup_p: f64,
    next_request: u64,
    in_flight: BTreeMap<u64, u64>,
    acked: BTreeMap<i64, u64>,
    /// The value at each offset below the highest high watermark any leader reached.
    committed: Vec<u64>,
    epoch_leaders: BTreeMap<LeaderEpoch, ReplicaId>,
    acks: u64,
    /// The leader the client last heard of (`None` inside: offline).
    client_known: Option<Option<ReplicaId>>,
    /// `(when, node)` restarts due.
    restarts: Vec<(i64, usize)>,
    /// `(when, links)` cuts that heal.
    heal_at: Vec<(i64, Vec<(i32, i32)>)>,
    /// `RINGLOG_SIM_TRACE` set: print every delivered message and fault.
    trace: bool,
    /// The controller moves replicas during the faults.
    moves: bool,
    /// Moves started, completed, cancelled.
    move_counts: (u64, u64, u64),
}

impl Sim {
    fn new(seed: u64, moves: bool) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let replicas: Vec<ReplicaId> = (0..REPLICAS).map(ReplicaId).collect();
        let state = PartitionState {
            replicas: replicas.clone(),
            isr: replicas.iter().copied().collect(),
            elr: BTreeSet::new(),
            leader: Some(ReplicaId(0)),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: 0,
            adding: BTreeSet::new(),
            removing: BTreeSet::new(),
        };
        let nodes = (0..NODES)
            .map(|i| Node {
                id: ReplicaId(i),
                up: true,
                paused_until: 0,
                incarnation: 0,
                log: SimLog::default(),
                role: Role::None,
                known: None,
                hw_checkpoint: Offset(0),
                fetch_in_flight: None,
                last_heartbeat_ms: -HEARTBEAT_MS,
                registered: false,
                lease_until: 0,
                lost_unflushed: false,
                waiting: Vec::new(),
            })
            .collect();
        let sessions = (0..NODES).map(|i| (i, (0, 0))).collect();
        let drop_p = rng.gen_range(0.0..0.05);
        let dup_p = rng.gen_range(0.0..0.05);
        let mut sim = Sim {
            seed,
            rng,
            now: 0,
            nodes,
            controller: Controller { state, sessions },
            queue: Vec::new(),
            next_seq: 0,
            cut: BTreeSet::new(),
            faults_on: true,
            drop_p,
            dup_p,
            next_request: 0,
            in_flight: BTreeMap::new(),
            acked: BTreeMap::new(),
            committed: Vec::new(),
            epoch_leaders: BTreeMap::new(),
            acks: 0,
            client_known: None,
            restarts: Vec::new(),
            heal_at: Vec::new(),
            trace: std::env::var_os("RINGLOG_SIM_TRACE").is_some(),
            moves,
            move_counts: (0, 0, 0),
        };
        sim.broadcast();
        sim
    }

    fn fail(&self, what: String) -> ! {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let role = match &n.role {
                    Role::None => "none".to_owned(),
                    Role::Leader(l) => format!(
                        "leader epoch {:?} isr {:?} hw {}",
                        l.epoch(),
                        l.isr(),
                        l.high_watermark()
                    ),
                    Role::Follower(f) => format!(
                        "follower of {} epoch {:?} hw {}",
                        f.leader(),
                        f.leader_epoch(),
                        f.high_watermark()
                    ),
                };
                format!("node {} up {} end {} {role}", n.id, n.up, n.log.end())
            })
            .collect();
        panic!(
            "seed {} at {} ms: {what}\ncontroller: {:?}\n{}",
            self.seed,
            self.now,
            self.controller.state,
            nodes.join("\n")
        );
    }

    fn send(&mut self, from: i32, to: i32, msg: Msg) {
        let link = (from.min(to), from.max(to));
        if self.cut.contains(&link) {
            return;
        }
        let copies = if !self.faults_on {
            1
        } else if self.rng.gen_bool(self.drop_p) {
            0
        } else if self.rng.gen_bool(self.dup_p) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.faults_on {
                self.rng.gen_range(1..25)
            } else {
                1
            };
            self.next_seq += 1;
            let env = Envelope {
                at: self.now + delay,
                seq: self.next_seq,
                from,
                to,
                msg: msg.clone(),
            };
            self.queue.push(env);
        }
    }

    fn broadcast(&mut self) {
        let state = self.controller.state.clone();
        for n in 0..NODES {
            self.send(CONTROLLER, n, Msg::Metadata(state.clone()));
        }
        self.send(CONTROLLER, CLIENT, Msg::Metadata(state));
    }

    fn run(&mut self) {
        while self.now < FAULT_MS {
            self.inject_faults();
            self.step();
        }
        self.heal();
        while self.now < FAULT_MS + SETTLE_MS {
            self.step();
        }
        self.check_final();
    }

    fn step(&mut self) {
        self.restart_due();
        self.heal_due();
        self.deliver();
        for n in 0..NODES as usize {
            self.tick_node(n);
        }
        self.tick_controller();
        if self.faults_on && self.now % PRODUCE_EVERY_MS == 0 {
            self.produce();
        }
        self.now += 1;
    }

    fn deliver(&mut self) {
        let now = self.now;
        let mut due: Vec<Envelope> = Vec::new();
        let mut keep = Vec::new();
        for env in self.queue.drain(..) {
            let paused = env.to >= 0 && self.nodes[env.to as usize].paused_until > now;
            if env.at <= now && !paused {
                due.push(env);
            } else {
                keep.push(env);
            }
        }
        self.queue = keep;
        due.sort_by_key(|e| (e.at, e.seq));
        for env in due {
            if self.trace {
                eprintln!("{} ms: {} -> {}: {:?}", now, env.from, env.to, env.msg);
            }
            match env.to {
                CONTROLLER => self.on_controller(env.from, env.msg),
                CLIENT => self.on_client(env.msg),
                n => self.on_node(n as usize, env.from, env.msg),
            }
        }
    }

    fn produce(&mut self) {
        let Some(leader) = self.client_leader() else {
            return;
        };
        self.next_request += 1;
        let id = self.next_request;
        let value = id;
        self.in_flight.insert(id, value);
        self.send(CLIENT, leader.0, Msg::Produce { id, value });
    }

    fn client_leader(&self) -> Option<ReplicaId> {
        // The client learns leadership from the controller's broadcasts (possibly late).
        self.client_known.and_then(|s| s)
    }

    fn on_client(&mut self, msg: Msg) {
        match msg {
            Msg::Metadata(state) => self.client_known = Some(state.leader),
            Msg::Produced { id, result } => {
                let Some(value) = self.in_flight.remove(&id) else {
                    return;
                };
                if let Ok(offset) = result {
                    if let Some(&v) = self.acked.get(&offset.0) {
                        if v != value {
                            self.fail(format!(
                                "offset {offset} acknowledged for values {v} and {value}"
                            ));
                        }
                    }
                    match self.committed.get(offset.0 as usize) {
                        Some(&v) if v == value => {}
                        other => self.fail(format!(
                            "acknowledged value {value} at {offset}, committed there: {other:?}"
                        )),
                    }
                    self.acked.insert(offset.0, value);
                    self.acks += 1;
                }
            }
            _ => {}
        }
    }
}

// --- nodes ---

impl Sim {
    fn alive(&self, n: usize) -> bool {
        self.nodes[n].up && self.nodes[n].paused_until <= self.now
    }

    fn on_node(&mut self, n: usize, from: i32, msg: Msg) {
        if !self.nodes[n].up {
            return;
        }
        match msg {
            Msg::Metadata(state) => self.apply_metadata(n, state),
            Msg::HeartbeatAnswer {
                state,
                incarnation,
                sent_ms,
            } => {
                let node = &mut self.nodes[n];
                if incarnation == node.incarnation {
                    node.registered = true;
                    node.lease_until = node.lease_until.max(sent_ms + SESSION_MS);
                    // Its registration (which said so) was accepted.
                    node.lost_unflushed = false;
                }
                self.apply_metadata(n, state);
            }
            Msg::Fetch(fetch) => self.serve_fetch(n, from, fetch),
            Msg::FetchAnswer {
                fetch,
                answer,
                records,
            } => self.on_fetch_answer(n, fetch, answer, records),
            Msg::Produce { id, value } => self.on_produce(n, id, value),
            _ => {}
        }
    }

    fn apply_metadata(&mut self, n: usize, state: PartitionState) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let newer = node
            .known
            .as_ref()
            .is_none_or(|k| state.partition_epoch > k.partition_epoch);
        if !newer {
            return;
        }
        if let Role::Leader(l) = &mut node.role {
            if l.on_committed(&state, now) == StillLeader::No {
                node.role = Role::None;
                node.waiting.clear();
            }
        }
        node.known = Some(state);
        self.reconcile(n);
    }

    /// Brings the node's role in line with the state it knows: it leads only while its lease
    /// holds.
    fn reconcile(&mut self, n: usize) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let me = node.id;
        let lease = node.registered && now < node.lease_until;
        let Some(state) = node.known.clone() else {
            return;
        };
        if !state.replicas.contains(&me) {
            // Not a replica (never was, or a move removed it): no role, and its log deleted.
            if !matches!(node.role, Role::None) || !node.log.records.is_empty() {
                node.role = Role::None;
                node.waiting.clear();
                node.fetch_in_flight = None;
                node.log = SimLog::default();
                node.hw_checkpoint = Offset(0);
            }
            return;
        }
        let hw = node_hw(node);
        let next = match (state.leader, &node.role) {
            (Some(l), Role::Leader(current)) if l == me && lease => {
                if current.epoch() == state.leader_epoch {
                    return;
                }
                None
            }
            (Some(l), Role::Follower(f)) if l != me => {
                if f.leader() == l && f.leader_epoch() == state.leader_epoch {
                    return;
                }
                None
            }
            (Some(l), _) if l == me && !lease => Some(Role::None),
            (None, Role::None) => return,
            _ => None,
        };
        node.waiting.clear();
        node.fetch_in_flight = None;
        node.role = match (next, state.leader) {
            (Some(role), _) => role,
            (None, Some(l)) if l == me => {
                let end = node.log.end();
                node.log.epochs.assign(state.leader_epoch, end);
                let written = node.log.written_end();
                let leader = LeaderState::new(me, &state, end, written, hw, now, CONFIG);
                Role::Leader(leader)
            }
            (None, Some(l)) => Role::Follower(FollowerState::new(me, l, state.leader_epoch, hw)),
            (None, None) => Role::None,
        };
        if let Role::Leader(l) = &node.role {
            let epoch = l.epoch();
            match self.epoch_leaders.insert(epoch, me) {
                Some(other) if other != me => {
                    self.fail(format!("leader epoch {epoch:?} led by {other} and {me}"))
                }
                _ => {}
            }
            self.check_has_committed(n);
        }
    }

    /// A new leader must hold every committed record.
    fn check_has_committed(&self, n: usize) {
        let log = &self.nodes[n].log.records;
        for (o, &v) in self.committed.iter().enumerate() {
            if log.get(o).map(|r| r.1) != Some(v) {
                self.fail(format!(
                    "node {n} leads without committed offset {o} (value {v}): it has {:?}",
                    log.get(o)
                ));
            }
        }
    }

    fn serve_fetch(&mut self, n: usize, from: i32, fetch: FollowerFetch) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let (answer, records) = match &mut node.role {
            Role::Leader(leader) => {
                let answer = leader.on_fetch(fetch, &node.log.epochs, node.log.end(), now);
                let records = match answer {
                    FetchAnswer::Records { .. } => {
                        let from_at = fetch.fetch_offset.0 as usize;
                        let to = (from_at + 20).min(node.log.records.len());
                        node.log.records[from_at..to].to_vec()
                    }
                    _ => Vec::new(),
                };
                (answer, records)
            }
            _ => (FetchAnswer::NotAReplica, Vec::new()),
        };
        self.note_committed(n);
        let msg = Msg::FetchAnswer {
            fetch,
            answer,
            records,
        };
        self.send(n as i32, from, msg);
    }

    fn on_fetch_answer(
        &mut self,
        n: usize,
        fetch: FollowerFetch,
        answer: FetchAnswer,
        records: Vec<Record>,
    ) {
        let (seed, now) = (self.seed, self.now);
        let node = &mut self.nodes[n];
        let Role::Follower(f) = &mut node.role else {
            return;
        };
        // An answer to an older fetch (delayed or duplicated) is ignored.
        let current = node.fetch_in_flight.is_some_and(|(sent, _)| sent == fetch)
            && fetch.current_leader_epoch == f.leader_epoch()
            && fetch.fetch_offset == node.log.end();
        if !current {
            return;
        }
        node.fetch_in_flight = None;
        match f.on_answer(answer, &node.log.epochs, node.log.end()) {
            FollowerAction::Append => {
                for r in records {
                    node.log.append(r);
                }
                // A follower fetches again only once what it appended is written.
                node.log.written = node.log.records.len();
                if let FetchAnswer::Records { high_watermark } = answer {
                    f.on_appended(high_watermark, node.log.end());
                }
            }
            FollowerAction::TruncateTo(to) => {
                if to < Offset(f.high_watermark().0) {
                    panic!(
                        "seed {seed} at {now} ms: node {n} told to truncate to {to}, below its \
                         high watermark {}",
                        f.high_watermark()
                    );
                }
                node.log.truncate(to);
            }
            // The simulated logs keep their head (no retention, no DeleteRecords): no leader
            // ever answers below its log start.
            FollowerAction::StartAt(to) => {
                panic!("seed {seed} at {now} ms: node {n} told to start its log at {to}")
            }
            FollowerAction::AwaitMetadata => {}
        }
    }

    fn on_produce(&mut self, n: usize, id: u64, value: u64) {
        let node = &mut self.nodes[n];
        let lease = node.registered && self.now < node.lease_until;
        let refuse = match &node.role {
            Role::Leader(_) if !lease => Some("NOT_LEADER_OR_FOLLOWER"),
            Role::Leader(l) if l.may_accept_acks_all() => None,
            Role::Leader(_) => Some("NOT_ENOUGH_REPLICAS"),
            _ => Some("NOT_LEADER_OR_FOLLOWER"),
        };
        if let Some(why) = refuse {
            self.send(
                n as i32,
                CLIENT,
                Msg::Produced {
                    id,
                    result: Err(why.into()),
                },
            );
            return;
        }
        let Role::Leader(l) = &mut node.role else {
            unreachable!()
        };
        let epoch = l.epoch();
        node.log.append((epoch, value));
        // Not written yet: the high watermark waits for this leader's own write too.
        node.waiting.push((node.log.end(), id));
    }

    /// Records what the leader's high watermark now covers (a leader's log below it matches
    /// what was committed before: checked when it became leader).
    fn note_committed(&mut self, n: usize) {
        let node = &self.nodes[n];
        let Role::Leader(l) = &node.role else {
            return;
        };
        let hw = l.high_watermark().0 as usize;
        if self.trace && hw > self.committed.len() {
            eprintln!(
                "{} ms: node {n} (epoch {:?}) commits up to {hw}",
                self.now,
                l.epoch()
            );
        }
        for o in self.committed.len()..hw {
            self.committed.push(node.log.records[o].1);
        }
    }

    fn tick_node(&mut self, n: usize) {
        if !self.alive(n) {
            return;
        }
        let now = self.now;
        let id = self.nodes[n].id.0;
        if now - self.nodes[n].last_heartbeat_ms >= HEARTBEAT_MS {
            self.nodes[n].last_heartbeat_ms = now;
            let incarnation = self.nodes[n].incarnation;
            let lost_unflushed = self.nodes[n].lost_unflushed;
            let msg = Msg::Heartbeat {
                incarnation,
                lost_unflushed,
                sent_ms: now,
            };
            self.send(id, CONTROLLER, msg);
        }
        // The leader's writes complete a while after its appends.
        if self.rng.gen_bool(0.5) {
            let node = &mut self.nodes[n];
            node.log.written = node.log.records.len();
        }
        if now % FLUSH_MS == 0 {
            let node = &mut self.nodes[n];
            node.log.flushed = node.log.written;
            node.hw_checkpoint = node_hw(node);
        }
        // A broker whose lease ran out stops leading (taking writes) and registers again under
        // a new broker epoch (the controller then treats it as a replica lost and back).
        let node = &mut self.nodes[n];
        if node.registered && now >= node.lease_until {
            node.registered = false;
            node.incarnation += 1;
        }
        self.reconcile(n);
        match &mut self.nodes[n].role {
            Role::Leader(_) => self.tick_leader(n),
            Role::Follower(_) => self.tick_follower(n),
            Role::None => {}
        }
    }

    fn tick_leader(&mut self, n: usize) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let Role::Leader(l) = &mut node.role else {
            return;
        };
        l.on_written(node.log.written_end());
        let proposal = l.isr_proposal(now);
        let mut answers = Vec::new();
        node.waiting.retain(|&(end, id)| match l.ack_state(end) {
            AckState::Ready => {
                answers.push((id, Ok(Offset(end.0 - 1))));
                false
            }
            AckState::NotEnoughReplicasAfterAppend => {
                answers.push((id, Err("NOT_ENOUGH_REPLICAS_AFTER_APPEND".to_owned())));
                false
            }
            AckState::Waiting => true,
        });
        self.note_committed(n);
        let id = n as i32;
        if let Some(change) = proposal {
            self.send(id, CONTROLLER, Msg::IsrChange(change));
        }
        for (req, result) in answers {
            self.send(id, CLIENT, Msg::Produced { id: req, result });
        }
    }

    fn tick_follower(&mut self, n: usize) {
        let now = self.now;
        let node = &mut self.nodes[n];
        let Role::Follower(f) = &node.role else {
            return;
        };
        // A lost fetch or answer is retried after a while.
        if node.fetch_in_flight.is_some_and(|(_, t)| now - t < 60) {
            return;
        }
        let fetch = f.next_fetch(
            node.log.end(),
            node.log.last_epoch(),
            Some(node.incarnation as i64),
        );
        let leader = f.leader().0;
        node.fetch_in_flight = Some((fetch, now));
        self.send(n as i32, leader, Msg::Fetch(fetch));
    }
}

fn node_hw(node: &Node) -> Offset {
    match &node.role {
        Role::Leader(l) => l.high_watermark(),
        Role::Follower(f) => f.high_watermark(),
        Role::None => node.hw_checkpoint,
    }
}

// --- the controller ---

impl Sim {
    fn on_controller(&mut self, from: i32, msg: Msg) {
        let now = self.now;
        match msg {
            Msg::Heartbeat {
                incarnation,
                lost_unflushed,
                sent_ms,
            } => {
                let known = self.controller.sessions.get(&from).copied();
                if known.is_some_and(|(i, _)| i > incarnation) {
                    return; // from an incarnation already replaced
                }
                let restarted = known.is_some_and(|(i, _)| i != incarnation);
                if restarted && self.controller.live(now).contains(&ReplicaId(from)) {
                    // A new registration (new broker epoch): the old session ends first.
                    self.controller.sessions.remove(&from);
                    self.replica_lost(ReplicaId(from));
                }
                let was_live = self.controller.live(now).contains(&ReplicaId(from));
                self.controller.sessions.insert(from, (incarnation, now));
                if restarted && lost_unflushed {
                    let live = self.controller.live(now);
                    let state = &self.controller.state;
                    if let Some(next) =
                        on_replica_lost_unflushed(state, ReplicaId(from), &live, CONFIG.min_insync)
                    {
                        self.controller.state = next;
                        self.broadcast();
                    }
                } else if !was_live {
                    self.replica_back(ReplicaId(from));
                }
                let state = self.controller.state.clone();
                let answer = Msg::HeartbeatAnswer {
                    state,
                    incarnation,
                    sent_ms,
                };
                self.send(CONTROLLER, from, answer);
            }
            Msg::IsrChange(change) => {
                let live = self.controller.live(now);
                let epochs = self.controller.broker_epochs(now);
                let state = &self.controller.state;
                match apply_isr_change(state, &change, &live, &epochs, CONFIG.min_insync) {
                    Ok(next) => {
                        self.controller.state = next;
                        self.complete_move();
                        self.broadcast();
                    }
                    Err(IsrChangeError::InvalidIsr(_) | IsrChangeError::IneligibleReplica(_)) => {
                        self.controller.state = fence_isr_proposals(&self.controller.state);
                        self.broadcast();
                    }
                    Err(_) => {
                        let state = self.controller.state.clone();
                        self.send(CONTROLLER, from, Msg::Metadata(state));
                    }
                }
            }
            _ => {}
        }
    }

    /// Completes the move in progress if its new replicas are all in sync.
    fn complete_move(&mut self) {
        let live = self.controller.live(self.now);
        if let Some(next) = reassignment::complete(&self.controller.state, &live, CONFIG.min_insync)
        {
            if self.trace {
                eprintln!("{} ms: move completed: {:?}", self.now, next.replicas);
            }
            self.controller.state = next;
            self.move_counts.1 += 1;
        }
    }

    /// Now and then: a move started (a replica to the spare node), replaced by another, or
    /// cancelled.
    fn maybe_move(&mut self) {
        if !self.moves || !self.faults_on || self.rng.gen_range(0..1000) >= 3 {
            return;
        }
        let now = self.now;
        let live = self.controller.live(now);
        let state = self.controller.state.clone();
        if is_reassigning(&state) && self.rng.gen_bool(0.5) {
            match reassignment::cancel(&state, &live) {
                Ok(next) => {
                    if self.trace {
                        eprintln!("{now} ms: move cancelled: {:?}", next.replicas);
                    }
                    self.controller.state = next;
                    self.move_counts.2 += 1;
                    self.broadcast();
                }
                Err(e) => {
                    if self.trace {
                        eprintln!("{now} ms: cancel refused: {e}");
                    }
                }
            }
            return;
        }
        // A target: the current target with one replica swapped for a node outside it.
        let mut target = reassignment::target_replicas(&state);
        let outside: Vec<ReplicaId> = (0..NODES)
            .map(ReplicaId)
            .filter(|r| !target.contains(r))
            .collect();
        let (Some(&new), false) = (outside.first(), target.is_empty()) else {
            return;
        };
        let at = self.rng.gen_range(0..target.len());
        target[at] = new;
        if self.rng.gen_bool(0.3) {
            target.rotate_left(1);
        }
        match reassignment::reassign(&state, &target, &live, CONFIG.min_insync) {
            Ok(Some(next)) => {
                if self.trace {
                    eprintln!(
                        "{now} ms: move to {target:?}: replicas {:?} adding {:?} removing {:?}",
                        next.replicas, next.adding, next.removing
                    );
                }
                self.controller.state = next;
                self.move_counts.0 += 1;
                self.broadcast();
            }
            Ok(None) => {}
            Err(e) => self.fail(format!("a valid target refused: {e}")),
        }
    }

    fn replica_lost(&mut self, r: ReplicaId) {
        let live = self.controller.live(self.now);
        let state = &self.controller.state;
        if let Some(next) = on_replica_lost(state, r, &live, CONFIG.min_insync, false) {
            self.controller.state = next;
            self.broadcast();
        }
    }

    fn replica_back(&mut self, r: ReplicaId) {
        let live = self.controller.live(self.now);
        let state = &self.controller.state;
        let next = on_replica_back(state, r, &live).or_else(|| {
            (Some(r) == state.replicas.first().copied())
                .then(|| preferred_leader_election(state, &live))
                .flatten()
        });
        if let Some(next) = next {
            self.controller.state = next;
            self.broadcast();
        }
    }

    fn tick_controller(&mut self) {
        let now = self.now;
        let expired: Vec<i32> = self
            .controller
            .sessions
            .iter()
            .filter(|(_, (_, last))| now - last == SESSION_MS + 1)
            .map(|(&n, _)| n)
            .collect();
        for n in expired {
            self.replica_lost(ReplicaId(n));
        }
        self.maybe_move();
        if now % 20 == 0 && is_reassigning(&self.controller.state) {
            let before = self.controller.state.partition_epoch;
            self.complete_move();
            if self.controller.state.partition_epoch != before {
                self.broadcast();
            }
        }
        if now % 50 == 0 {
            // Clients refresh their metadata now and then.
            let state = self.controller.state.clone();
            self.send(CONTROLLER, CLIENT, Msg::Metadata(state));
        }
        if now % 200 == 0 {
            // Kafka's periodic preferred leader election.
            let live = self.controller.live(now);
            if let Some(next) = preferred_leader_election(&self.controller.state, &live) {
                self.controller.state = next;
                self.broadcast();
            }
        }
    }
}

// --- faults, healing, the final check ---

impl Sim {
    fn inject_faults(&mut self) {
        if self.rng.gen_range(0..1000) >= 4 {
            return;
        }
        let n = self.rng.gen_range(0..NODES) as usize;
        let down = self.nodes.iter().filter(|x| !x.up).count();
        match self.rng.gen_range(0..5) {
            0 if self.nodes[n].up && down < 2 => self.kill(n, false),
            1 if self.nodes[n].up && down == 0 && self.all_in_sync() => self.kill(n, true),
            2 => {
                // Cut off from everyone, the controller included, for a while.
                let ms = self.rng.gen_range(50..600);
                self.isolate(n as i32, true, ms);
            }
            3 => {
                // Cut off from the controller only: it may keep leading its followers.
                let ms = self.rng.gen_range(50..600);
                self.isolate(n as i32, false, ms);
            }
            _ if self.nodes[n].up => {
                // SIGSTOP past the session, then SIGCONT.
                self.nodes[n].paused_until = self.now + self.rng.gen_range(100..500);
                if self.trace {
                    eprintln!(
                        "{} ms: pause {n} until {}",
                        self.now, self.nodes[n].paused_until
                    );
                }
            }
            _ => {}
        }
    }

    fn all_in_sync(&self) -> bool {
        let s = &self.controller.state;
        s.isr.len() == s.replicas.len() && !is_reassigning(s)
    }

    fn kill(&mut self, n: usize, power_loss: bool) {
        if self.trace {
            eprintln!("{} ms: kill {n} (power loss: {power_loss})", self.now);
        }
        let node = &mut self.nodes[n];
        node.up = false;
        node.role = Role::None;
        node.known = None;
        node.waiting.clear();
        node.fetch_in_flight = None;
        node.lost_unflushed = power_loss;
        // What was not written dies with the process; a power loss may take back what was
        // written but not flushed too.
        let keep = if power_loss {
            self.rng.gen_range(node.log.flushed..=node.log.written)
        } else {
            node.log.written
        };
        node.log.truncate(Offset(keep as i64));
        // Its connections die with it: nothing in flight reaches the next incarnation.
        let me = n as i32;
        self.queue.retain(|e| e.to != me && e.from != me);
        node.hw_checkpoint = node.hw_checkpoint.min(node.log.end());
        let back = self.now + self.rng.gen_range(50..400);
        self.restarts.push((back, n));
    }

    fn restart_due(&mut self) {
        let now = self.now;
        let due: Vec<usize> = self
            .restarts
            .iter()
            .filter(|(t, _)| *t <= now)
            .map(|(_, n)| *n)
            .collect();
        self.restarts.retain(|(t, _)| *t > now);
        for n in due {
            let node = &mut self.nodes[n];
            node.up = true;
            node.incarnation += 1;
            node.last_heartbeat_ms = now - HEARTBEAT_MS;
            node.registered = false;
            node.lease_until = 0;
        }
    }

    fn isolate(&mut self, n: i32, from_all: bool, ms: i64) {
        if self.trace {
            eprintln!(
                "{} ms: cut {n} for {ms} ms (from all: {from_all})",
                self.now
            );
        }
        let mut links = vec![(CONTROLLER.min(n), CONTROLLER.max(n))];
        if from_all {
            links.extend((0..NODES).filter(|&m| m != n).map(|m| (m.min(n), m.max(n))));
            links.push((CLIENT.min(n), CLIENT.max(n)));
        }
        for l in &links {
            self.cut.insert(*l);
        }
        self.heal_at.push((self.now + ms, links));
    }

    fn heal_due(&mut self) {
        let now = self.now;
        let (due, keep): (Vec<_>, Vec<_>) = self.heal_at.drain(..).partition(|(t, _)| *t <= now);
        self.heal_at = keep;
        for (_, links) in due {
            for l in links {
                self.cut.remove(&l);
            }
        }
    }

    fn heal(&mut self) {
        self.faults_on = false;
        self.cut.clear();
        self.heal_at.clear();
        for (_, n) in std::mem::take(&mut self.restarts) {
            self.restarts.push((self.now, n));
        }
        self.restart_due();
        for node in &mut self.nodes {
            node.paused_until = 0;
        }
    }

    fn check_final(&self) {
        let leaders: Vec<usize> = (0..NODES as usize)
            .filter(|&n| matches!(self.nodes[n].role, Role::Leader(_)))
            .collect();
        let [l] = leaders[..] else {
            self.fail(format!(
                "after settling, leaders {leaders:?}; controller state {:?}",
                self.controller.state
            ));
        };
        let Role::Leader(leader) = &self.nodes[l].role else {
            unreachable!()
        };
        let log = &self.nodes[l].log.records;
        let hw = leader.high_watermark().0 as usize;
        for (&o, &v) in &self.acked {
            if log.get(o as usize).map(|r| r.1) != Some(v) {
                self.fail(format!(
                    "acknowledged value {v} at {o} lost: leader {l} has {:?}",
                    log.get(o as usize)
                ));
            }
        }
        if hw < self.committed.len() {
            self.fail(format!(
                "leader high watermark {hw} below committed {}",
                self.committed.len()
            ));
        }
        let state = &self.controller.state;
        if is_reassigning(state) {
            self.fail(format!(
                "a move still in progress after settling: {state:?}"
            ));
        }
        for n in 0..NODES as usize {
            let node = &self.nodes[n];
            if !state.replicas.contains(&node.id) {
                if !node.log.records.is_empty() {
                    self.fail(format!(
                        "node {n} is no replica but holds {} records",
                        node.log.records.len()
                    ));
                }
                continue;
            }
            let own_hw = node_hw(node).0 as usize;
            let upto = if leader.isr().contains(&node.id) {
                hw
            } else {
                own_hw.min(hw)
            };
            if node.log.records.len() < upto || node.log.records[..upto] != log[..upto] {
                self.fail(format!(
                    "node {n} differs from leader {l} below {upto} (in ISR: {})",
                    leader.isr().contains(&node.id)
                ));
            }
        }
    }
}

/// The seeds to run: `RINGLOG_SIM_SEED` alone, else 0..`RINGLOG_SIM_SEEDS` (default 300).
fn seeds() -> Vec<u64> {
    match std::env::var("RINGLOG_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RINGLOG_SIM_SEED is a number")],
        Err(_) => {
            let n = std::env::var("RINGLOG_SIM_SEEDS")
                .map_or(SEEDS, |s| s.parse().expect("RINGLOG_SIM_SEEDS is a number"));
            (0..n).collect()
        }
    }
}

#[test]
fn replicated_partition_keeps_every_acknowledged_record_through_faults() {
    let (mut acks, mut committed) = (0, 0);
    for seed in seeds() {
        let mut sim = Sim::new(seed, false);
        sim.run();
        acks += sim.acks;
        committed += sim.committed.len();
    }
    assert!(
        acks > 0 && committed > 0,
        "nothing was acknowledged: the simulation tests nothing"
    );
}

/// The same faults while the controller moves replicas (KIP-455) to the spare node and back,
/// replaces moves and cancels them: no acknowledged record lost or changed, every new leader
/// holds every committed record, and the partition settles on its last move's replicas.
#[test]
fn replica_moves_keep_every_acknowledged_record_through_faults() {
    let (mut acks, mut started, mut completed, mut cancelled) = (0, 0, 0, 0);
    for seed in seeds() {
        let mut sim = Sim::new(seed, true);
        sim.run();
        acks += sim.acks;
        started += sim.move_counts.0;
        completed += sim.move_counts.1;
        cancelled += sim.move_counts.2;
    }
    println!("moves started {started}, completed {completed}, cancelled {cancelled}; {acks} acknowledgements");
    assert!(
        acks > 0,
        "nothing was acknowledged: the simulation tests nothing"
    );
    assert!(
        started > 0 && completed > 0 && cancelled > 0,
        "moves must start, complete and be cancelled: {started}/{completed}/{cancelled}"
    );
}
