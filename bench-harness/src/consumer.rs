//! A consumer: fetches its partitions from their leaders — given by assignment, or by a consumer
//! group it joins (`crate::group`) — counts what it reads and records end-to-end latency from
//! the send time each producer wrote into the first 8 bytes of every value.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use crate::client::{connect, ClientError, Receiver, Sender};
use crate::group::GroupMember;
use crate::producer::now_us;
use crate::stats::{histogram, record, Counters, Histograms};

const FETCH_VERSION: i16 = 11;

/// A consumer that gets its partitions from a consumer group.
#[derive(Clone)]
pub struct GroupSpec {
    pub bootstrap: String,
    pub group: String,
    pub topic: String,
    pub partitions: u32,
    pub leaders: HashMap<(String, u32), String>,
}

/// `(topic, partition, leader)` per assigned partition.
pub type Assigned = Vec<(String, u32, String)>;
type Connections = HashMap<String, (Sender, Receiver)>;
type Offsets = HashMap<(String, u32), i64>;

pub struct ConsumerTask {
    /// `(topic, partition, leader)` assigned to this consumer (unused with `group`).
    pub assigned: Vec<(String, u32, String)>,
    /// Join this group instead of using `assigned`.
    pub group: Option<GroupSpec>,
    pub measure_from: Instant,
    pub end: Instant,
    pub counters: Arc<Counters>,
    pub histograms: Arc<Histograms>,
}

impl ConsumerTask {
    pub fn run(self) -> Result<(), ClientError> {
        let mut conns = Connections::new();
        let mut e2e = histogram();
        match self.group.clone() {
            None => {
                let by_leader = by_leader(&self.assigned);
                let mut offsets: Offsets = self
                    .assigned
                    .iter()
                    .map(|(t, p, _)| ((t.clone(), *p), 0))
                    .collect();
                while Instant::now() < self.end {
                    self.fetch_round(&by_leader, &mut conns, &mut offsets, &mut e2e)?;
                }
            }
            Some(g) => self.run_in_group(&g, &mut conns, &mut e2e)?,
        }
        Histograms::merge(&self.histograms.end_to_end_us, &e2e);
        Ok(())
    }

    /// Joins the group and fetches what it is given from the committed offsets; a keeper
    /// thread commits and heartbeats every second (as real clients do in the background, so a
    /// slow commit never holds up fetching) and asks for a rejoin on a rebalance. At the end it
    /// commits and leaves.
    fn run_in_group(
        &self,
        g: &GroupSpec,
        conns: &mut Connections,
        e2e: &mut Histogram<u64>,
    ) -> Result<(), ClientError> {
        let mut member = GroupMember::new(&g.bootstrap, &g.group, &g.topic, g.partitions)?;
        loop {
            let parts = member.join()?;
            let committed = member.committed(&parts)?;
            let assigned: Vec<(String, u32, String)> = parts
                .iter()
                .map(|&p| (g.topic.clone(), p, g.leaders[&(g.topic.clone(), p)].clone()))
                .collect();
            let by_leader = by_leader(&assigned);
            let mut offsets: Offsets = parts
                .iter()
                .map(|&p| {
                    (
                        (g.topic.clone(), p),
                        committed.get(&p).copied().unwrap_or(0),
                    )
                })
                .collect();
            let shared = Arc::new(Mutex::new(by_partition(&offsets)));
            let rejoin = Arc::new(AtomicBool::new(false));
            let stop = Arc::new(AtomicBool::new(false));
            let keeper = {
                let (shared, rejoin, stop) = (shared.clone(), rejoin.clone(), stop.clone());
                std::thread::spawn(move || keep_membership(member, &shared, &rejoin, &stop))
            };
            while Instant::now() < self.end && !rejoin.load(Ordering::Relaxed) {
                if by_leader.is_empty() {
                    std::thread::sleep(Duration::from_millis(100));
                } else {
                    self.fetch_round(&by_leader, conns, &mut offsets, e2e)?;
                    *shared.lock().expect("offsets lock") = by_partition(&offsets);
                }
            }
            stop.store(true, Ordering::Relaxed);
            member = keeper.join().expect("group keeper thread")?;
            member.commit(&by_partition(&offsets))?;
            if !rejoin.load(Ordering::Relaxed) {
                return member.leave();
            }
        }
    }

    /// One fetch from each leader of the assigned partitions.
    fn fetch_round(
        &self,
        by_leader: &HashMap<String, Vec<(String, u32)>>,
        conns: &mut Connections,
        offsets: &mut Offsets,
        e2e: &mut Histogram<u64>,
    ) -> Result<(), ClientError> {
        for (leader, parts) in by_leader {
            if !conns.contains_key(leader) {
                conns.insert(leader.clone(), connect(leader)?);
            }
            let (tx, rx) = conns.get_mut(leader).expect("connection");
            tx.send(ApiKey::Fetch, FETCH_VERSION, &fetch_request(parts, offsets))?;
            let (_, resp): (i32, FetchResponse) = rx.recv_decoded(ApiKey::Fetch, FETCH_VERSION)?;
            self.take(resp, offsets, e2e);
        }
        Ok(())
    }

    fn take(&self, resp: FetchResponse, offsets: &mut Offsets, e2e: &mut Histogram<u64>) {
        for t in resp.responses {
            let topic = t.topic.0.to_string();
            for p in t.partitions {
                if p.error_code != 0 {
                    self.counters
                        .error(Counters::code_name("fetch", p.error_code));
                    continue;
                }
                let Some(records) = p.records else { continue };
                let next = offsets
                    .get_mut(&(topic.clone(), p.partition_index as u32))
                    .expect("assigned");
                consume_batches(records, next, &self.counters, e2e, self.measure_from);
            }
        }
    }
}

/// The keeper thread of a group consumer: every second commits the offsets the fetch loop
/// published and heartbeats; stops when told to or when the group rebalances (`rejoin`).
fn keep_membership(
    mut member: GroupMember,
    offsets: &Mutex<HashMap<u32, i64>>,
    rejoin: &AtomicBool,
    stop: &AtomicBool,
) -> Result<GroupMember, ClientError> {
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if last.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last = Instant::now();
        let snapshot = offsets.lock().expect("offsets lock").clone();
        member.commit(&snapshot)?;
        if member.heartbeat()? {
            rejoin.store(true, Ordering::Relaxed);
            break;
        }
    }
    Ok(member)
}

fn by_leader(assigned: &[(String, u32, String)]) -> HashMap<String, Vec<(String, u32)>> {
    let mut out: HashMap<String, Vec<(String, u32)>> = HashMap::new();
    for (t, p, leader) in assigned {
        out.entry(leader.clone()).or_default().push((t.clone(), *p));
    }
    out
}

/// Next offset per partition, for a commit (one topic per group consumer).
fn by_partition(offsets: &Offsets) -> HashMap<u32, i64> {
    offsets.iter().map(|((_, p), o)| (*p, *o)).collect()
}

fn fetch_request(parts: &[(String, u32)], offsets: &Offsets) -> FetchRequest {
    let mut topics: HashMap<&str, Vec<FetchPartition>> = HashMap::new();
    for (t, p) in parts {
        let mut fp = FetchPartition::default();
        fp.partition = *p as i32;
        fp.fetch_offset = offsets[&(t.clone(), *p)];
        fp.partition_max_bytes = 4 << 20;
        topics.entry(t.as_str()).or_default().push(fp);
    }
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 100;
    req.min_bytes = 1;
    req.max_bytes = 32 << 20;
    req.topics = topics
        .into_iter()
        .map(|(t, ps)| {
            let mut ft = FetchTopic::default();
            ft.topic = TopicName(StrBytes::from_string(t.to_owned()));
            ft.partitions = ps;
            ft
        })
        .collect();
    req
}

/// Decodes the whole batches in `records` (a trailing partial batch is left for the next
/// fetch), advancing `next` past what was read.
fn consume_batches(
    records: Bytes,
    next: &mut i64,
    counters: &Counters,
    e2e: &mut Histogram<u64>,
    measure_from: Instant,
) {
    let mut at = 0usize;
    while at + 12 <= records.len() {
        let len =
            i32::from_be_bytes(records[at + 8..at + 12].try_into().expect("4 bytes")) as usize + 12;
        if at + len > records.len() {
            break;
        }
        let mut batch = records.slice(at..at + len);
        at += len;
        let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
            counters.error("fetch: undecodable record batch");
            continue;
        };
        let now = now_us();
        let measuring = Instant::now() >= measure_from;
        for r in set.records {
            if r.offset < *next {
                continue;
            }
            *next = r.offset + 1;
            let value = r.value.unwrap_or_default();
            Counters::add(&counters.consumed_messages, 1);
            Counters::add(&counters.consumed_bytes, value.len() as u64);
            if measuring && value.len() >= 8 {
                let sent = u64::from_be_bytes(value[..8].try_into().expect("8 bytes"));
                record(e2e, now.saturating_sub(sent));
            }
        }
    }
}

/// Gives each of `consumers` consumers a share of the partitions, round-robin.
pub fn assign(
    topic: &str,
    partitions: u32,
    consumers: u32,
    leaders: &HashMap<(String, u32), String>,
) -> Vec<Vec<(String, u32, String)>> {
    let mut out = vec![Vec::new(); consumers as usize];
    for p in 0..partitions {
        let leader = leaders[&(topic.to_owned(), p)].clone();
        out[(p % consumers) as usize].push((topic.to_owned(), p, leader));
    }
    out.retain(|a| !a.is_empty());
    out
}
