//! A seeded simulation of a consumer group: members that join, heartbeat, reconcile as Kafka's
//! consumer does (revoke first, then take what is new), lose answers, leave, leave for a while
//! as static members and come back, get killed (their session expires), while topics grow.
//! Some members speak the classic protocol (a group migrating): JoinGroup reporting what they
//! own (cooperative) or after giving up everything (eager), SyncGroup, Heartbeat until told to
//! rejoin, LeaveGroup (a third of the seeds have none, a third some, a third mostly these). The
//! way back to a classic group is the coordinator's (`membership::convert`): here the group
//! stays a consumer group.
//! After every step:
//! - no partition is owned by two live members at once (what the clients think they own);
//! - the group in memory equals a fresh group replaying every record written so far, each
//!   through its bytes (what a coordinator failover or a restart loads).
//!
//! Then churn stops and the group must settle: Stable, every subscribed partition owned by
//! exactly one member, the uniform assignor within one partition per member (each seed's
//! members ask for the uniform or the range assignor).
//!
//! Failures print the seed; `RINGLOG_SIM_SEED=N` runs that one seed.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Buf;
use kafka_protocol::ResponseError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use super::*;

/// How a classic-protocol client rebalances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Classic {
    /// Gives up every partition before it rejoins (Kafka's `range`).
    Eager,
    /// Keeps what it owns, reports it in JoinGroup, revokes what SyncGroup no longer gives
    /// and then rejoins (`cooperative-sticky`).
    Cooperative,
}

/// Where a classic client is in its rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Join,
    Sync,
    Beat,
}

struct Client {
    id: String,
    /// `Some` for a classic-protocol client, with its phase.
    classic: Option<(Classic, Phase)>,
    instance: Option<String>,
    epoch: i32,
    owned: Assignment,
    /// Its last heartbeat was answered: the next one sends only what changed.
    joined: bool,
    topics: Vec<String>,
}

fn settings() -> ConsumerSettings {
    ConsumerSettings {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 1_000,
        assignors: vec![Assignor::Uniform, Assignor::Range],
        // turning classic is the coordinator's, outside this state machine
        migration: MigrationPolicy {
            upgrade: true,
            downgrade: false,
        },
        classic_max_size: 1_000,
    }
}

fn through_bytes(group: &str, r: &ConsumerRecord) -> ConsumerRecord {
    let mut k = r.key.encode(group);
    let kind = k.get_i16();
    let (g, key) = ConsumerKey::decode(kind, &mut k).unwrap().unwrap();
    assert_eq!(g, group);
    let value = r
        .value
        .as_ref()
        .map(|v| ConsumerValue::decode(&key, v.encode()).unwrap());
    ConsumerRecord { key, value }
}

/// The group without what is not persisted (deadlines).
fn persisted(g: &ConsumerGroup) -> ConsumerGroup {
    let mut g = g.clone();
    for m in g.members.values_mut() {
        m.session_deadline_ms = 0;
        m.rebalance_deadline_ms = None;
        m.join_deadline_ms = None;
        m.sync_deadline_ms = None;
    }
    g
}

fn classic_protocols(
    kind: Classic,
    topics: &[String],
    owned: &[(String, Vec<i32>)],
) -> Vec<(String, bytes::Bytes)> {
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;
    use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_owned_partitions(
            owned
                .iter()
                .map(|(t, ps)| {
                    TopicPartition::default()
                        .with_topic(TopicName(StrBytes::from_string(t.clone())))
                        .with_partitions(ps.clone())
                })
                .collect(),
        );
    let mut out = bytes::BytesMut::new();
    bytes::BufMut::put_i16(&mut out, 1);
    sub.encode(&mut out, 1).unwrap();
    // as Kafka's consumers: both assignors, the member's own first
    let meta = out.freeze();
    let mut names = ["range", "cooperative-sticky"];
    if kind == Classic::Cooperative {
        names.reverse();
    }
    names
        .iter()
        .map(|n| (n.to_string(), meta.clone()))
        .collect()
}

fn owned_by_two(clients: &[Client]) -> Option<(Uuid, i32)> {
    let mut seen = BTreeSet::new();
    for c in clients {
        for (t, ps) in &c.owned {
            for p in ps {
                if !seen.insert((*t, *p)) {
                    return Some((*t, *p));
                }
            }
        }
    }
    None
}

struct World {
    group: ConsumerGroup,
    log: Vec<ConsumerRecord>,
    topics: TopicIndex,
    now: i64,
    next_id: u64,
    /// How often a heartbeat's answer is lost.
    loss: f64,
    /// The assignor the members ask for.
    assignor: Assignor,
}

impl World {
    fn beat(&mut self, c: &mut Client, rng: &mut StdRng, s: &ConsumerSettings) {
        if c.classic.is_some() {
            return self.beat_classic(c, rng, s);
        }
        let req = Heartbeat {
            member_id: c.id.clone(),
            member_epoch: c.epoch,
            instance_id: c.instance.clone(),
            rebalance_timeout_ms: if c.joined { -1 } else { 300_000 },
            subscribed_topic_names: (!c.joined).then(|| c.topics.clone()),
            server_assignor: (!c.joined).then(|| self.assignor.name().to_owned()),
            owned: Some(c.owned.clone()),
            ..Default::default()
        };
        match self.group.heartbeat(req, &self.topics, s, self.now) {
            Ok((answer, records)) => {
                self.log.extend(records);
                if rng.gen_bool(self.loss) {
                    // the answer is lost: as Kafka's consumer after an error, the next
                    // heartbeat is a full one (subscription, timeout and owned partitions)
                    c.joined = false;
                    return;
                }
                c.joined = true;
                c.epoch = answer.member_epoch;
                if let Some(a) = answer.assignment {
                    // revoke what is not in the assignment, then take what is new
                    c.owned = a;
                }
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.error,
                        ResponseError::FencedMemberEpoch
                            | ResponseError::UnknownMemberId
                            // a killed static member's instance id, until its session expires
                            | ResponseError::UnreleasedInstanceId
                    ),
                    "unexpected refusal {e:?}"
                );
                // abandon everything and join again
                c.owned.clear();
                c.epoch = 0;
                c.joined = false;
            }
        }
    }

    /// One request of a classic client: JoinGroup, SyncGroup or Heartbeat as its phase says.
    fn beat_classic(&mut self, c: &mut Client, rng: &mut StdRng, s: &ConsumerSettings) {
        let (kind, phase) = c.classic.expect("classic");
        let lost = rng.gen_bool(self.loss);
        let reset = |c: &mut Client, e: ResponseError| {
            assert!(
                matches!(
                    e,
                    ResponseError::UnknownMemberId
                        | ResponseError::IllegalGeneration
                        | ResponseError::FencedInstanceId
                ),
                "unexpected classic refusal {e:?}"
            );
            // onPartitionsLost, then a fresh join
            c.owned.clear();
            c.epoch = 0;
            if e == ResponseError::UnknownMemberId {
                c.id.clear();
            }
            c.classic = Some((kind, Phase::Join));
        };
        match phase {
            Phase::Join => {
                if kind == Classic::Eager {
                    c.owned.clear(); // revoked before rejoining
                }
                let named: Vec<(String, Vec<i32>)> = c
                    .owned
                    .iter()
                    .map(|(t, ps)| (self.topics.by_id[t].0.clone(), ps.iter().copied().collect()))
                    .collect();
                let req = crate::group_coordinator::join::JoinRequest {
                    member_id: c.id.clone(),
                    instance_id: c.instance.clone(),
                    client_id: "sim".into(),
                    client_host: "/127.0.0.1".into(),
                    session_timeout_ms: 45_000,
                    rebalance_timeout_ms: 300_000,
                    protocol_type: classic::PROTOCOL_TYPE.into(),
                    protocols: classic_protocols(kind, &c.topics, &named),
                    require_known_member_id: true,
                };
                match self.group.classic_join(req, &self.topics, s, self.now) {
                    Ok(classic::ClassicJoined::MemberIdRequired(id)) => c.id = id,
                    Ok(classic::ClassicJoined::Joined {
                        member_id,
                        generation,
                        records,
                        ..
                    }) => {
                        self.log.extend(records);
                        if !lost {
                            c.id = member_id;
                            c.epoch = generation;
                            c.classic = Some((kind, Phase::Sync));
                        }
                    }
                    Err(e) => reset(c, e),
                }
            }
            Phase::Sync => {
                let out = self.group.classic_sync(
                    &c.id,
                    c.instance.as_deref(),
                    c.epoch,
                    Some(classic::PROTOCOL_TYPE),
                    None,
                    &self.topics,
                    self.now,
                );
                match out {
                    Ok(bytes) => {
                        if lost {
                            return; // asks again
                        }
                        let given = classic::decode_assignment(&bytes, &self.topics);
                        // cooperative: revoke what is not given, take what is; rejoin if it
                        // revoked anything. Eager owned nothing: takes what is given.
                        let revoked = c.owned.iter().any(|(t, ps)| {
                            ps.iter()
                                .any(|p| !given.get(t).is_some_and(|g| g.contains(p)))
                        });
                        c.owned = given;
                        c.classic = Some((kind, if revoked { Phase::Join } else { Phase::Beat }));
                    }
                    Err(ResponseError::RebalanceInProgress) => {
                        c.classic = Some((kind, Phase::Join))
                    }
                    Err(e) => reset(c, e),
                }
            }
            Phase::Beat => {
                match self
                    .group
                    .classic_heartbeat(&c.id, c.instance.as_deref(), c.epoch, self.now)
                {
                    Ok(()) => {}
                    Err(ResponseError::RebalanceInProgress) => {
                        c.classic = Some((kind, Phase::Join))
                    }
                    Err(e) => reset(c, e),
                }
            }
        }
    }

    fn leave(&mut self, c: &Client, epoch: i32, s: &ConsumerSettings) {
        if c.classic.is_some() {
            if c.id.is_empty() {
                return;
            }
            let who = [(c.id.clone(), c.instance.clone())];
            let (_, records) = self.group.classic_leave(&who, &self.topics, s, self.now);
            self.log.extend(records);
            return;
        }
        let req = Heartbeat {
            member_id: c.id.clone(),
            member_epoch: epoch,
            instance_id: c.instance.clone(),
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        if let Ok((_, records)) = self.group.heartbeat(req, &self.topics, s, self.now) {
            self.log.extend(records);
        }
    }

    fn check_replay(&self, seed: u64) {
        let mut fresh = ConsumerGroup::default();
        for r in &self.log {
            fresh.replay(&through_bytes("g", r), 0, 0);
        }
        assert_eq!(
            persisted(&fresh),
            persisted(&self.group),
            "seed {seed}: replay differs"
        );
    }
}

/// The group and the clients, for a failure's message.
fn dump(w: &World, clients: &[Client]) -> String {
    let mut out = format!(
        "group epoch {} target epoch {}\n",
        w.group.epoch, w.group.assignment_epoch
    );
    for m in w.group.members.values() {
        let c = &m.current;
        out += &format!(
            "server {} e{}/{} {:?} {:?} revoking {:?} target {:?}\n",
            m.id,
            c.member_epoch,
            c.previous_member_epoch,
            c.state,
            c.assigned,
            c.pending_revocation,
            w.group.target.get(&m.id)
        );
    }
    for c in clients {
        out += &format!("client {} e{} {:?}\n", c.id, c.epoch, c.owned);
    }
    out + &format!("owners {:?}", w.group.owners)
}

/// Live clients in step with the coordinator heartbeat in time (the simulation's steps are
/// coarser than a heartbeat interval).
fn keep_alive(w: &mut World, clients: &[Client]) {
    for c in clients {
        if let Some(m) = w.group.members.get_mut(&c.id) {
            if c.epoch == m.current.member_epoch || c.epoch == m.current.previous_member_epoch {
                m.session_deadline_ms = m.session_deadline_ms.max(w.now + 1);
                for d in [
                    &mut m.rebalance_deadline_ms,
                    &mut m.join_deadline_ms,
                    &mut m.sync_deadline_ms,
                ] {
                    *d = d.map(|d| d.max(w.now + 1));
                }
            }
        }
    }
}

fn run(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let s = settings();
    let mut topics = TopicIndex::default();
    topics.insert("a", Uuid::from_u128(1), 3);
    topics.insert("b", Uuid::from_u128(2), 5);
    let mut w = World {
        group: ConsumerGroup::default(),
        log: Vec::new(),
        topics,
        now: 1_000,
        next_id: 0,
        loss: 0.05,
        assignor: if rng.gen_bool(0.5) {
            Assignor::Uniform
        } else {
            Assignor::Range
        },
    };
    let mut clients: Vec<Client> = Vec::new();
    // static members that left for a while: (instance id, member id)
    let mut away: Vec<String> = Vec::new();
    let classic_share = [0.0, 0.3, 0.7][rng.gen_range(0..3)];
    let new_client = |w: &mut World, instance: Option<String>, rng: &mut StdRng| {
        w.next_id += 1;
        let classic = rng.gen_bool(classic_share).then(|| {
            let kind = if rng.gen_bool(0.5) {
                Classic::Eager
            } else {
                Classic::Cooperative
            };
            (kind, Phase::Join)
        });
        Client {
            id: if classic.is_some() {
                String::new()
            } else {
                format!("m{}", w.next_id)
            },
            classic,
            instance,
            epoch: 0,
            owned: Assignment::new(),
            joined: false,
            topics: vec!["a".into(), "b".into()],
        }
    };
    for step in 0..steps {
        w.now += rng.gen_range(1..2_000);
        let roll = rng.gen_range(0..100);
        if roll < 8 && clients.len() < 12 {
            let instance = rng
                .gen_bool(0.3)
                .then(|| format!("i{}", rng.gen_range(0..6)));
            let busy = instance
                .as_ref()
                .is_some_and(|i| clients.iter().any(|c| c.instance.as_ref() == Some(i)));
            if !busy {
                if let Some(i) = &instance {
                    away.retain(|x| x != i);
                }
                let mut c = new_client(&mut w, instance, &mut rng);
                w.beat(&mut c, &mut rng, &s);
                clients.push(c);
            }
        } else if roll < 11 && !clients.is_empty() {
            // leaves: a static member may leave for a while, keeping its partitions
            let c = clients.swap_remove(rng.gen_range(0..clients.len()));
            if c.instance.is_some() && rng.gen_bool(0.5) {
                w.leave(&c, LEAVE_GROUP_STATIC_MEMBER_EPOCH, &s);
                away.push(c.instance.clone().unwrap());
            } else {
                w.leave(&c, LEAVE_GROUP_MEMBER_EPOCH, &s);
            }
        } else if roll < 13 && !clients.is_empty() {
            // killed: it consumes nothing more, and its session expires later
            clients.swap_remove(rng.gen_range(0..clients.len()));
        } else if roll < 14 {
            // a topic grows
            let (name, id) = if rng.gen_bool(0.5) {
                ("a", Uuid::from_u128(1))
            } else {
                ("b", Uuid::from_u128(2))
            };
            let n = w.topics.by_id[&id].1;
            if n < 12 {
                w.topics.insert(name, id, n + 1);
                let records = w.group.refresh(&w.topics, &s, w.now);
                w.log.extend(records);
            }
        } else if roll < 16 {
            w.now += rng.gen_range(0..60_000);
        } else if !clients.is_empty() {
            let i = rng.gen_range(0..clients.len());
            w.beat(&mut clients[i], &mut rng, &s);
        }
        // live clients heartbeat often enough: only the killed, the away and those whose
        // heartbeats are refused (fenced with their member still there) expire
        keep_alive(&mut w, &clients);
        // a live client heartbeats before its session ends: one out of step is fenced then
        // and gives up its partitions before the coordinator gives them to others
        for c in clients.iter_mut() {
            let due = w.group.members.get(&c.id).is_some_and(|m| m.expired(w.now));
            if due {
                w.beat(c, &mut rng, &s);
            }
        }
        let (expired, _) = w.group.expire(&w.topics, &s, w.now);
        w.log.extend(expired);
        if let Some(tp) = owned_by_two(&clients) {
            panic!(
                "seed {seed} step {step}: {tp:?} owned by two members\n{}",
                dump(&w, &clients)
            );
        }
        if step % 25 == 0 {
            w.check_replay(seed);
        }
    }
    w.check_replay(seed);
    // settle: no more churn nor lost answers, everyone heartbeats until nothing changes
    w.loss = 0.0;
    for _ in 0..40 {
        w.now += 1_000;
        for c in clients.iter_mut() {
            w.beat(c, &mut rng, &s);
        }
        assert!(
            owned_by_two(&clients).is_none(),
            "seed {seed}: owned twice while settling"
        );
    }
    w.now += 100_000; // the away and the killed expire
    keep_alive(&mut w, &clients);
    let (expired, _) = w.group.expire(&w.topics, &s, w.now);
    w.log.extend(expired);
    for _ in 0..40 {
        w.now += 1_000;
        for c in clients.iter_mut() {
            w.beat(c, &mut rng, &s);
        }
    }
    w.check_replay(seed);
    if clients.is_empty() {
        return;
    }
    assert_eq!(
        w.group.state(),
        ConsumerGroupState::Stable,
        "seed {seed}: not settled\n{}",
        dump(&w, &clients)
    );
    let total: i32 = w.topics.by_name.values().map(|t| t.1).sum();
    let owned: usize = clients
        .iter()
        .map(|c| c.owned.values().map(|p| p.len()).sum::<usize>())
        .sum();
    assert_eq!(
        owned,
        total as usize,
        "seed {seed}: some partition has no owner\n{}",
        dump(&w, &clients)
    );
    let counts: Vec<usize> = clients
        .iter()
        .map(|c| c.owned.values().map(|p| p.len()).sum())
        .collect();
    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    if w.assignor == Assignor::Uniform {
        assert!(hi - lo <= 1, "seed {seed}: unbalanced {counts:?}");
    }
    let members: BTreeMap<_, _> = w
        .group
        .members
        .iter()
        .map(|(k, m)| (k.clone(), m.current.member_epoch))
        .collect();
    assert_eq!(
        members.len(),
        clients.len(),
        "seed {seed}: members {members:?}"
    );
}

#[test]
fn seeded_consumer_group_simulation() {
    if let Some(seed) = std::env::var("RINGLOG_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, 1_500);
        return;
    }
    let base: u64 = rand::random();
    for i in 0..60 {
        let seed = base.wrapping_add(i);
        eprintln!("consumer group simulation seed {seed}");
        run(seed, 1_500);
    }
}
