//! A seeded simulation of one transactional id's coordinator and three partitions, driving the
//! `transactions` state machines as the broker will: two producer instances of the same
//! `transactional.id` (the second fences the first) run transactions — InitProducerId,
//! AddPartitionsToTxn, transactional produce, EndTxn commit or abort — against a coordinator
//! that writes every transit to its `__transaction_state` log (encoded as Kafka's records)
//! before acting on it, sends markers to the partitions and completes transactions when they
//! are acknowledged.
//!
//! Faults, chosen by the seed: messages delayed (1–20 ms) and duplicated (at transaction
//! version 2 a marker's duplicate now and then delivered 20–300 ms later: a request held in a
//! cut link), markers and their
//! acknowledgements lost (sent again while unacknowledged); log writes failing
//! (the change dropped, the client retries); the coordinator crashing (each write in flight
//! reaching the log or not) and reloading from its log — a new coordinator epoch — to finish
//! the prepared transactions it finds; producers stalling past their transaction timeout (the
//! coordinator fences and aborts); transaction versions 0 and 2 (KIP-890's epoch bump per
//! transaction), retried EndTxn requests. A fenced instance's application starts a new one
//! 300 ms later (which fences whichever holds the id then).
//!
//! Checked: no transaction has data both committed and aborted (atomicity); a commit answered
//! to a producer has all its data committed; an abort answered has none; every partition's last
//! stable offset never goes back and never passes a transaction open there; after the faults
//! stop and everything settles, no transaction is left open on a partition or prepared at the
//! coordinator (no hanging transaction).
//!
//! A failure names its seed; `RINGLOG_SIM_SEED=N` runs that seed alone, `RINGLOG_SIM_SEEDS=N`
//! runs seeds 0..N (default 500); `RINGLOG_SIM_TRACE=1` prints every message as it is
//! delivered (with `-- --nocapture`).

use std::collections::{BTreeMap, HashMap};

use iouring_log::Offset;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use transactions::coordinator::{
    Decision, FencedAbort, InitProducerId, ProducerIdAndEpoch, Transit, TxnError, TxnSettings,
    TxnState, TxnVersion, Txns,
};
use transactions::partition::{Marker, PartitionTxns, ProducerId, TxnBatch};
use transactions::records;

const SEEDS: u64 = 500;
const PARTITIONS: i32 = 3;
const TX: &str = "tx";
const TIMEOUT_MS: i32 = 300;
const FAULT_MS: i64 = 6_000;
const SETTLE_MS: i64 = 6_000;

/// A transaction attempt of a producer instance: (instance, its n-th transaction).
type Attempt = (usize, u32);

#[derive(Debug, Clone)]
enum Msg {
    /// Producer → coordinator.
    Init {
        inst: usize,
    },
    Add {
        inst: usize,
        pid: i64,
        epoch: i16,
        parts: Vec<i32>,
    },
    End {
        inst: usize,
        pid: i64,
        epoch: i16,
        commit: bool,
        attempt: Attempt,
    },
    /// Coordinator → producer.
    InitAnswer {
        inst: usize,
        r: Result<ProducerIdAndEpoch, TxnError>,
    },
    AddAnswer {
        inst: usize,
        r: Result<(), TxnError>,
    },
    EndAnswer {
        inst: usize,
        attempt: Attempt,
        commit: bool,
        r: Result<Option<ProducerIdAndEpoch>, TxnError>,
    },
    /// Producer → partition, and back.
    Produce {
        inst: usize,
        part: i32,
        pid: i64,
        epoch: i16,
        attempt: Attempt,
    },
    ProduceAnswer {
        inst: usize,
        ok: bool,
    },
    /// Coordinator → partition, and back.
    MarkerSend {
        /// The transaction's version (WriteTxnMarkers v2, KIP-1228).
        version: TxnVersion,
        part: i32,
        pid: i64,
        epoch: i16,
        commit: bool,
        coord_epoch: i32,
    },
    MarkerAck {
        part: i32,
        ok: bool,
        coord_epoch: i32,
    },
    /// The coordinator's log write completes.
    Written {
        seq: u64,
    },
    Tick,
}

/// Who waits for a write.
#[derive(Debug, Clone)]
enum Reply {
    None,
    Init(usize, ProducerIdAndEpoch),
    Add(usize),
    End(usize, Attempt, bool, Option<ProducerIdAndEpoch>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NeedInit,
    Waiting,
    Ready,
    /// Data sent, this many produce answers outstanding.
    Producing(u32),
    Dead,
}

struct Producer {
    phase: Phase,
    pid: i64,
    epoch: i16,
    txn: u32,
    parts: Vec<i32>,
    rejected: bool,
    version: TxnVersion,
    /// When it may act next (stalls past the timeout are a fault).
    resume_ms: i64,
    /// The EndTxn in flight to retry: (commit).
    ending: Option<bool>,
}

struct Partition {
    txns: PartitionTxns,
    next: i64,
    /// Data batches of each producer's open transaction: their attempts.
    open: HashMap<i64, Vec<Attempt>>,
    lso: Offset,
}

#[derive(Default)]
struct Fate {
    committed: u32,
    aborted: u32,
}

struct Sim {
    rng: StdRng,
    seed: u64,
    now: i64,
    queue: BTreeMap<(i64, u64), Msg>,
    seq: u64,
    faults: bool,
    /// `RINGLOG_SIM_TRACE`: print each message delivered.
    trace: bool,
    version: TxnVersion,
    // Coordinator.
    alive: bool,
    coord_epoch: i32,
    txns: Txns,
    log: Vec<(String, Option<Vec<u8>>)>,
    writes: HashMap<u64, (Transit, Reply, i32)>,
    next_pid: i64,
    parts: Vec<Partition>,
    producers: Vec<Producer>,
    fates: HashMap<Attempt, Fate>,
    answered: HashMap<Attempt, bool>,
}

fn settings(cluster_version: TxnVersion) -> TxnSettings {
    TxnSettings {
        max_timeout_ms: 900_000,
        cluster_version,
    }
}

impl Sim {
    fn send(&mut self, delay: i64, msg: Msg) {
        // Markers and their acknowledgements are lost now and then (a connection dropped): the
        // coordinator sends again what is not acknowledged.
        let lossy = matches!(msg, Msg::MarkerSend { .. } | Msg::MarkerAck { .. });
        if self.faults && lossy && self.rng.gen_bool(0.05) {
            return;
        }
        self.seq += 1;
        let jitter = if self.faults {
            self.rng.gen_range(1..=20)
        } else {
            1
        };
        self.queue
            .insert((self.now + delay + jitter, self.seq), msg.clone());
        // Duplicates: markers, their acknowledgements and EndTxn (retries are recognised). Not
        // produce requests: the producer state's sequence numbers drop those, and are not
        // simulated here; not InitProducerId, whose duplicate only fences its own caller.
        // A marker's duplicate only at transaction version 2: at 0/1 one arriving after the
        // next transaction opened on the partition ends it, in Kafka too (the epoch is the
        // same; KIP-890's motivation) — a documented limit, not simulated.
        let dup = matches!(
            msg,
            Msg::MarkerSend {
                version: TxnVersion::V2,
                ..
            } | Msg::MarkerAck { .. }
                | Msg::End { .. }
        );
        if self.faults && dup && self.rng.gen_bool(0.03) {
            self.seq += 1;
            // Mostly soon; a marker (duplicated at version 2 only, above) now and then later,
            // as a request held in a cut link is delivered once the link is back — by then the
            // producer's next transaction may be open on the partition (KIP-1228).
            let held = matches!(msg, Msg::MarkerSend { .. });
            let later = if held && self.rng.gen_bool(0.5) {
                self.rng.gen_range(20..=300)
            } else {
                self.rng.gen_range(1..=40)
            };
            self.queue.insert((self.now + delay + later, self.seq), msg);
        }
    }

    fn alloc(next_pid: &mut i64) -> impl FnMut() -> Option<i64> + '_ {
        move || {
            *next_pid += 1;
            Some(*next_pid)
        }
    }

    fn write(&mut self, transit: Transit, reply: Reply) {
        self.seq += 1;
        let seq = self.seq;
        self.writes.insert(seq, (transit, reply, self.coord_epoch));
        let d = self.rng.gen_range(1..=10);
        self.send(d, Msg::Written { seq });
    }

    /// The client whose request made a write that failed is answered `e`.
    fn refuse(&mut self, reply: Reply, e: TxnError) {
        match reply {
            Reply::Init(inst, _) => self.send(1, Msg::InitAnswer { inst, r: Err(e) }),
            Reply::Add(inst) => self.send(1, Msg::AddAnswer { inst, r: Err(e) }),
            Reply::End(inst, attempt, commit, _) => self.send(
                1,
                Msg::EndAnswer {
                    inst,
                    attempt,
                    commit,
                    r: Err(e),
                },
            ),
            // A fence's abort not written: the timeout or the next InitProducerId fences
            // again; a completion not written: the tick drives it again.
            Reply::None => {}
        }
    }

    fn fenced_abort(&mut self, FencedAbort(t): FencedAbort) {
        self.write(t, Reply::None);
    }

    fn after_written(&mut self, transit: &Transit) {
        match transit.to.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => self.send_markers(),
            _ => {}
        }
    }

    fn send_markers(&mut self) {
        let Some(m) = self.txns.markers(TX) else {
            return;
        };
        if m.partitions.is_empty() {
            if let Some(t) = self.txns.completion(TX, self.now) {
                self.write(t, Reply::None);
            }
            return;
        }
        for (_, p) in m.partitions {
            let (pid, epoch, commit, coord_epoch) =
                (m.producer_id, m.epoch, m.commit, self.coord_epoch);
            self.send(
                0,
                Msg::MarkerSend {
                    version: m.version,
                    part: p,
                    pid,
                    epoch,
                    commit,
                    coord_epoch,
                },
            );
        }
    }

    fn crash_and_reload(&mut self) {
        // Each write in flight reached the log or not (in the order they were made: the seed
        // decides, not the hash map's order); its client's connection broke, it asks again.
        let mut writes: Vec<_> = self.writes.drain().collect();
        writes.sort_by_key(|(seq, _)| *seq);
        for (_, (t, reply, epoch)) in writes {
            if epoch == self.coord_epoch && self.rng.gen_bool(0.5) {
                self.log.push((
                    t.transactional_id.clone(),
                    Some(records::encode_value(&t.to, self.version)),
                ));
            }
            self.refuse(reply, TxnError::CoordinatorNotAvailable);
        }
        self.coord_epoch += 1;
        let mut txns = Txns::default();
        for (id, value) in &self.log {
            let meta = value
                .as_ref()
                .map(|v| records::decode_value(v).expect("own records decode"));
            txns.load(id, meta);
        }
        self.txns = txns;
    }

    fn on_coordinator(&mut self, msg: Msg) {
        let now = self.now;
        let settings = settings(self.version);
        if !self.alive {
            // No coordinator: NOT_COORDINATOR, the client asks again.
            match msg {
                Msg::Init { inst } => self.send(
                    5,
                    Msg::InitAnswer {
                        inst,
                        r: Err(TxnError::CoordinatorNotAvailable),
                    },
                ),
                Msg::Add { inst, .. } => self.send(
                    5,
                    Msg::AddAnswer {
                        inst,
                        r: Err(TxnError::CoordinatorNotAvailable),
                    },
                ),
                Msg::End {
                    inst,
                    attempt,
                    commit,
                    ..
                } => self.send(
                    5,
                    Msg::EndAnswer {
                        inst,
                        attempt,
                        commit,
                        r: Err(TxnError::CoordinatorNotAvailable),
                    },
                ),
                _ => {}
            }
            return;
        }
        match msg {
            Msg::Init { inst } => {
                let r = {
                    let mut alloc = Self::alloc(&mut self.next_pid);
                    self.txns
                        .init_producer_id(TX, TIMEOUT_MS, None, now, settings, &mut alloc)
                };
                match r {
                    Ok(InitProducerId::Write(t, answer)) => {
                        self.write(t, Reply::Init(inst, answer))
                    }
                    Ok(InitProducerId::FenceOngoing(f)) => {
                        self.fenced_abort(f);
                        self.send(
                            1,
                            Msg::InitAnswer {
                                inst,
                                r: Err(TxnError::ConcurrentTransactions),
                            },
                        );
                    }
                    Err(e) => self.send(1, Msg::InitAnswer { inst, r: Err(e) }),
                }
            }
            Msg::Add {
                inst,
                pid,
                epoch,
                parts,
            } => {
                let tps: Vec<_> = parts.iter().map(|p| ("t".to_string(), *p)).collect();
                let v = self.producers[inst].version;
                match self.txns.add_partitions(TX, pid, epoch, &tps, v, now) {
                    Ok(Decision::Answer(())) => self.send(1, Msg::AddAnswer { inst, r: Ok(()) }),
                    Ok(Decision::Write(t, ())) => self.write(t, Reply::Add(inst)),
                    Err(e) => self.send(1, Msg::AddAnswer { inst, r: Err(e) }),
                }
            }
            Msg::End {
                inst,
                pid,
                epoch,
                commit,
                attempt,
            } => {
                let v = self.producers[inst].version;
                let r = {
                    let mut alloc = Self::alloc(&mut self.next_pid);
                    self.txns.end_txn(
                        TX,
                        ProducerIdAndEpoch {
                            producer_id: pid,
                            epoch,
                        },
                        commit,
                        v,
                        now,
                        &mut alloc,
                    )
                };
                match r {
                    Ok(Decision::Answer(a)) => self.send(
                        1,
                        Msg::EndAnswer {
                            inst,
                            attempt,
                            commit,
                            r: Ok(a),
                        },
                    ),
                    Ok(Decision::Write(t, a)) => {
                        self.write(t, Reply::End(inst, attempt, commit, a))
                    }
                    Err(e) => self.send(
                        1,
                        Msg::EndAnswer {
                            inst,
                            attempt,
                            commit,
                            r: Err(e),
                        },
                    ),
                }
            }
            Msg::Written { seq } => {
                let Some((t, reply, epoch)) = self.writes.remove(&seq) else {
                    return;
                };
                if epoch != self.coord_epoch {
                    return;
                }
                if self.faults && self.rng.gen_bool(0.05) {
                    self.txns.abandon(&t);
                    self.refuse(reply, TxnError::CoordinatorNotAvailable);
                    return;
                }
                self.log.push((
                    t.transactional_id.clone(),
                    Some(records::encode_value(&t.to, self.version)),
                ));
                self.txns.complete(&t);
                self.after_written(&t);
                match reply {
                    Reply::None => {}
                    Reply::Init(inst, a) => self.send(1, Msg::InitAnswer { inst, r: Ok(a) }),
                    Reply::Add(inst) => self.send(1, Msg::AddAnswer { inst, r: Ok(()) }),
                    Reply::End(inst, attempt, commit, a) => self.send(
                        1,
                        Msg::EndAnswer {
                            inst,
                            attempt,
                            commit,
                            r: Ok(a),
                        },
                    ),
                }
            }
            Msg::MarkerAck {
                part,
                ok,
                coord_epoch,
            } => {
                if coord_epoch != self.coord_epoch || !ok {
                    return;
                }
                if let Some(t) = self.txns.marker_written(TX, &("t".to_string(), part), now) {
                    self.write(t, Reply::None);
                }
            }
            Msg::Tick => {
                for f in self.txns.abort_timed_out(now, settings) {
                    self.fenced_abort(f);
                }
                // Re-drive a prepared transaction whose completion write failed.
                if self.txns.get(TX).is_some_and(|m| {
                    matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
                }) && self.writes.is_empty()
                {
                    self.send_markers();
                }
            }
            _ => unreachable!(),
        }
    }

    fn on_partition(&mut self, msg: Msg) {
        match msg {
            Msg::Produce {
                inst,
                part,
                pid,
                epoch,
                attempt,
            } => {
                let p = &mut self.parts[part as usize];
                let ok = p.txns.check_data(ProducerId(pid), epoch).is_ok();
                if ok {
                    let base = Offset(p.next);
                    p.next += 1;
                    p.txns.record(TxnBatch::Data {
                        producer: ProducerId(pid),
                        epoch,
                        base,
                        last: base,
                    });
                    p.open.entry(pid).or_default().push(attempt);
                }
                self.send(1, Msg::ProduceAnswer { inst, ok });
            }
            Msg::MarkerSend {
                version,
                part,
                pid,
                epoch,
                commit,
                coord_epoch,
            } => {
                let p = &mut self.parts[part as usize];
                let ok = p
                    .txns
                    .check_marker(ProducerId(pid), epoch, coord_epoch, version)
                    .is_ok();
                if ok {
                    let offset = Offset(p.next);
                    p.next += 1;
                    let marker = if commit {
                        Marker::Commit
                    } else {
                        Marker::Abort
                    };
                    let closed = p.txns.record(TxnBatch::Marker {
                        producer: ProducerId(pid),
                        epoch,
                        offset,
                        marker,
                        coordinator_epoch: coord_epoch,
                    });
                    assert_eq!(
                        closed.is_some(),
                        !commit && p.open.get(&pid).is_some_and(|v| !v.is_empty()),
                        "seed {}: an abort closing data yields its aborted entry",
                        self.seed
                    );
                    for attempt in p.open.remove(&pid).unwrap_or_default() {
                        let f = self.fates.entry(attempt).or_default();
                        if commit {
                            f.committed += 1
                        } else {
                            f.aborted += 1
                        }
                    }
                }
                // Single-replica partitions: the high watermark is the log end.
                let hw = Offset(p.next);
                p.txns.on_high_watermark(hw);
                let lso = p.txns.last_stable_offset();
                assert!(
                    lso >= p.lso,
                    "seed {}: partition {part}'s LSO went back {} -> {}",
                    self.seed,
                    p.lso.0,
                    lso.0
                );
                for (_, first) in p.txns.open_transactions() {
                    assert!(
                        lso <= first,
                        "seed {}: LSO {} past an open transaction at {}",
                        self.seed,
                        lso.0,
                        first.0
                    );
                }
                p.lso = lso;
                self.send(
                    1,
                    Msg::MarkerAck {
                        part,
                        ok,
                        coord_epoch,
                    },
                );
            }
            _ => unreachable!(),
        }
    }

    fn on_producer(&mut self, msg: Msg) {
        let seed = self.seed;
        match msg {
            Msg::InitAnswer { inst, r } => {
                let p = &mut self.producers[inst];
                if p.phase != Phase::Waiting {
                    return;
                }
                match r {
                    Ok(a) => {
                        (p.pid, p.epoch, p.phase) = (a.producer_id, a.epoch, Phase::Ready);
                    }
                    Err(_) => p.phase = Phase::NeedInit,
                }
            }
            Msg::AddAnswer { inst, r } => {
                let p = &mut self.producers[inst];
                if p.phase != Phase::Waiting || p.ending.is_some() {
                    return;
                }
                match r {
                    Ok(()) => {
                        let (pid, epoch, attempt) = (p.pid, p.epoch, (inst, p.txn));
                        p.phase = Phase::Producing(p.parts.len() as u32);
                        for part in p.parts.clone() {
                            self.send(
                                0,
                                Msg::Produce {
                                    inst,
                                    part,
                                    pid,
                                    epoch,
                                    attempt,
                                },
                            );
                        }
                    }
                    Err(TxnError::ConcurrentTransactions | TxnError::CoordinatorNotAvailable) => {
                        p.phase = Phase::Ready
                    }
                    Err(_) => {
                        p.phase = Phase::Dead;
                        p.resume_ms = self.now + 300;
                    }
                }
            }
            Msg::ProduceAnswer { inst, ok } => {
                let p = &mut self.producers[inst];
                let Phase::Producing(n) = p.phase else { return };
                p.rejected |= !ok;
                p.phase = if n > 1 {
                    Phase::Producing(n - 1)
                } else {
                    Phase::Waiting
                };
                if n == 1 {
                    // A producer whose data was refused aborts; otherwise mostly commits.
                    let commit = !p.rejected && self.rng.gen_bool(0.8);
                    p.ending = Some(commit);
                    if self.faults && self.rng.gen_bool(0.05) {
                        // Stalls past its transaction timeout before ending it.
                        p.resume_ms = self.now + i64::from(TIMEOUT_MS) * 2;
                    }
                }
            }
            Msg::EndAnswer {
                inst,
                attempt,
                commit,
                r,
            } => {
                let p = &mut self.producers[inst];
                if attempt != (inst, p.txn) || p.ending.is_none() {
                    return;
                }
                match r {
                    Ok(next) => {
                        let prev = self.answered.insert(attempt, commit);
                        assert!(
                            prev.is_none_or(|c| c == commit),
                            "seed {seed}: attempt {attempt:?} answered both ways"
                        );
                        if let Some(n) = next {
                            (p.pid, p.epoch) = (n.producer_id, n.epoch);
                        }
                        p.txn += 1;
                        p.ending = None;
                        p.rejected = false;
                        p.phase = Phase::Ready;
                    }
                    Err(TxnError::ConcurrentTransactions | TxnError::CoordinatorNotAvailable) => {}
                    Err(_) => {
                        // Fenced, or the coordinator aborted it (timeout): this instance is done.
                        p.ending = None;
                        p.phase = Phase::Dead;
                        p.resume_ms = self.now + 300;
                    }
                }
            }
            _ => unreachable!(),
        }
    }

    /// Each producer's next step, when it may act.
    fn step_producers(&mut self) {
        for inst in 0..self.producers.len() {
            let p = &self.producers[inst];
            if self.now < p.resume_ms {
                continue;
            }
            match p.phase {
                // A fenced (or timed out) instance's application starts a new one later,
                // fencing whichever instance holds the id then.
                Phase::Dead => {
                    let p = &mut self.producers[inst];
                    (p.phase, p.txn, p.rejected) = (Phase::NeedInit, p.txn + 1, false);
                }
                Phase::NeedInit => {
                    self.producers[inst].phase = Phase::Waiting;
                    self.send(0, Msg::Init { inst });
                }
                Phase::Ready => {
                    let mut parts: Vec<i32> =
                        (0..PARTITIONS).filter(|_| self.rng.gen_bool(0.6)).collect();
                    if parts.is_empty() {
                        parts.push(self.rng.gen_range(0..PARTITIONS));
                    }
                    let p = &mut self.producers[inst];
                    p.parts = parts.clone();
                    p.phase = Phase::Waiting;
                    let (pid, epoch) = (p.pid, p.epoch);
                    self.send(
                        0,
                        Msg::Add {
                            inst,
                            pid,
                            epoch,
                            parts,
                        },
                    );
                }
                Phase::Waiting if self.producers[inst].ending.is_some() => self.resend_end(inst),
                _ => {}
            }
        }
    }

    fn run(&mut self) {
        self.send(0, Msg::Tick);
        let end = FAULT_MS + SETTLE_MS;
        let mut next_step = 0;
        let mut restart_at: Option<i64> = None;
        while self.now < end {
            if self.now >= FAULT_MS && self.faults {
                self.faults = false;
                if !self.alive {
                    restart_at = Some(self.now);
                }
            }
            if let Some(at) = restart_at {
                if self.now >= at {
                    self.alive = true;
                    restart_at = None;
                    // Back: its state is what the log held (reloaded at the crash); it sends
                    // the prepared transaction's markers again.
                    self.send_markers();
                }
            }
            if self.now >= next_step {
                // The second instance starts a while in, fencing the first.
                if self.producers.len() < 2 && self.now >= 500 {
                    self.producers.push(new_producer(self.version));
                }
                if self.now < FAULT_MS + SETTLE_MS / 3 {
                    self.step_producers();
                } else {
                    // Settling: producers only finish what they started.
                    for inst in 0..self.producers.len() {
                        if self.producers[inst].ending.is_some() {
                            self.resend_end(inst);
                        }
                    }
                }
                next_step = self.now + 5;
            }
            if self.faults && self.alive && self.rng.gen_bool(0.0015) {
                // The coordinator crashes; it is back 20-200 ms later.
                self.alive = false;
                self.crash_and_reload();
                restart_at = Some(self.now + self.rng.gen_range(20..200));
            }
            let Some((&(t, s), _)) = self.queue.iter().next() else {
                self.now = next_step;
                continue;
            };
            if t > next_step {
                self.now = next_step;
                continue;
            }
            let msg = self.queue.remove(&(t, s)).unwrap();
            self.now = t;
            if self.trace {
                let coordinator = self.txns.get(TX).map(|m| (m.state, m.producer_epoch));
                eprintln!("{t} ms: {msg:?} (coordinator: {coordinator:?})");
            }
            match msg {
                Msg::Tick => {
                    self.send(50, Msg::Tick);
                    if self.alive {
                        self.on_coordinator(Msg::Tick);
                    }
                }
                m @ (Msg::Init { .. }
                | Msg::Add { .. }
                | Msg::End { .. }
                | Msg::Written { .. }
                | Msg::MarkerAck { .. }) => self.on_coordinator(m),
                m @ (Msg::Produce { .. } | Msg::MarkerSend { .. }) => self.on_partition(m),
                m => self.on_producer(m),
            }
        }
    }

    /// (Re)sends the EndTxn of a producer ending its transaction, every 50 ms until answered.
    fn resend_end(&mut self, inst: usize) {
        let p = &mut self.producers[inst];
        if self.now < p.resume_ms || p.phase != Phase::Waiting {
            return;
        }
        p.resume_ms = self.now + 50;
        let (pid, epoch, commit, attempt) = (p.pid, p.epoch, p.ending.unwrap(), (inst, p.txn));
        self.send(
            0,
            Msg::End {
                inst,
                pid,
                epoch,
                commit,
                attempt,
            },
        );
    }

    fn check(&self) {
        let seed = self.seed;
        for (attempt, f) in &self.fates {
            assert!(
                f.committed == 0 || f.aborted == 0,
                "seed {seed}: attempt {attempt:?} is partly committed ({}) and partly aborted ({})",
                f.committed,
                f.aborted
            );
        }
        for (attempt, &commit) in &self.answered {
            let f = self.fates.get(attempt);
            if commit {
                assert!(
                    f.is_none_or(|f| f.aborted == 0),
                    "seed {seed}: attempt {attempt:?} answered committed has aborted data"
                );
            } else {
                assert!(
                    f.is_none_or(|f| f.committed == 0),
                    "seed {seed}: attempt {attempt:?} answered aborted has committed data"
                );
            }
        }
        for (i, p) in self.parts.iter().enumerate() {
            let open: Vec<_> = p.txns.open_transactions().collect();
            assert!(
                open.is_empty(),
                "seed {seed}: partition {i} has transactions left open: {open:?}"
            );
            assert!(
                p.open.values().all(|v| v.is_empty()),
                "seed {seed}: partition {i} holds data never closed"
            );
            assert_eq!(
                p.txns.last_stable_offset(),
                Offset(p.next),
                "seed {seed}: partition {i}'s LSO is not its end"
            );
        }
        if let Some(m) = self.txns.get(TX) {
            assert!(
                !matches!(
                    m.state,
                    TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::Ongoing
                ) || self
                    .producers
                    .iter()
                    .any(|p| p.phase != Phase::Dead && p.ending.is_none()),
                "seed {seed}: the coordinator is left in {:?}",
                m.state
            );
        }
    }
}

fn new_producer(version: TxnVersion) -> Producer {
    Producer {
        phase: Phase::NeedInit,
        pid: -1,
        epoch: -1,
        txn: 0,
        parts: vec![],
        rejected: false,
        version,
        resume_ms: 0,
        ending: None,
    }
}

fn simulate(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let version = if rng.gen_bool(0.5) {
        TxnVersion::V2
    } else {
        TxnVersion::V0
    };
    let mut sim = Sim {
        rng,
        seed,
        now: 0,
        queue: BTreeMap::new(),
        seq: 0,
        faults: true,
        trace: std::env::var_os("RINGLOG_SIM_TRACE").is_some(),
        version,
        alive: true,
        coord_epoch: 0,
        txns: Txns::default(),
        log: Vec::new(),
        writes: HashMap::new(),
        next_pid: 1000,
        parts: (0..PARTITIONS)
            .map(|_| Partition {
                txns: PartitionTxns::default(),
                next: 0,
                open: HashMap::new(),
                lso: Offset(0),
            })
            .collect(),
        producers: vec![new_producer(version)],
        fates: HashMap::new(),
        answered: HashMap::new(),
    };
    sim.run();
    sim.check();
    assert!(
        sim.fates.values().any(|f| f.committed > 0),
        "seed {seed}: nothing was ever committed ({version:?})"
    );
}

fn seeds() -> Vec<u64> {
    match std::env::var("RINGLOG_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RINGLOG_SIM_SEED is a number")],
        Err(_) => {
            let n = std::env::var("RINGLOG_SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(SEEDS);
            (0..n).collect()
        }
    }
}

#[test]
fn transactions_stay_atomic_through_coordinator_crashes_fencing_and_timeouts() {
    for seed in seeds() {
        simulate(seed);
    }
}
