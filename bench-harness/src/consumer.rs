//! A consumer: fetches its partitions from their leaders — given by assignment, or by a consumer
//! group it joins (`crate::group`) — counts what it reads and records end-to-end latency from
//! the send time each producer wrote into the first 8 bytes of every value. Like Kafka's Java
//! consumer it keeps an incremental fetch session (KIP-227) with each leader, so a fetch names
//! only the partitions whose position moved and the answer only those with news.

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
/// How long a consumer waits after a fetch round that read nothing but errors (Kafka's
/// consumer default `retry.backoff.ms`).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

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
/// The fetch session with each leader, by leader address.
type Sessions = HashMap<String, FetchSession>;

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
                let mut sessions = Sessions::new();
                while Instant::now() < self.end {
                    self.fetch_round(
                        &by_leader,
                        (&mut conns, &mut sessions),
                        &mut offsets,
                        &mut e2e,
                    )?;
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
            // A new assignment starts new sessions (the old ones expire on the brokers).
            let mut sessions = Sessions::new();
            let stop = Arc::new(AtomicBool::new(false));
            let keeper = {
                let (shared, rejoin, stop) = (shared.clone(), rejoin.clone(), stop.clone());
                std::thread::spawn(move || keep_membership(member, &shared, &rejoin, &stop))
            };
            while Instant::now() < self.end && !rejoin.load(Ordering::Relaxed) {
                if by_leader.is_empty() {
                    std::thread::sleep(Duration::from_millis(100));
                } else {
                    self.fetch_round(&by_leader, (conns, &mut sessions), &mut offsets, e2e)?;
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

    /// One fetch from each leader of the assigned partitions, all sent before the first answer
    /// is read (as Kafka's Java consumer has a fetch in flight to every node it reads from): a
    /// leader's wait or transfer does not hold up the fetches from the others.
    fn fetch_round(
        &self,
        by_leader: &HashMap<String, Vec<(String, u32)>>,
        (conns, sessions): (&mut Connections, &mut Sessions),
        offsets: &mut Offsets,
        e2e: &mut Histogram<u64>,
    ) -> Result<(), ClientError> {
        for (leader, parts) in by_leader {
            if !conns.contains_key(leader) {
                conns.insert(leader.clone(), connect(leader)?);
            }
            let (tx, _) = conns.get_mut(leader).expect("connection");
            let session = sessions.entry(leader.clone()).or_default();
            tx.send(
                ApiKey::Fetch,
                FETCH_VERSION,
                &session.request(parts, offsets),
            )?;
        }
        let mut round = Taken::default();
        for leader in by_leader.keys() {
            let (_, rx) = conns.get_mut(leader).expect("connection");
            let session = sessions.get_mut(leader).expect("session");
            let (_, resp): (i32, FetchResponse) = rx.recv_decoded(ApiKey::Fetch, FETCH_VERSION)?;
            if let Err(code) = session.answered(&resp) {
                // The leader lost the session (evicted, restarted): the next fetch is full.
                self.counters
                    .error(Counters::code_name("fetch session", code));
                round.errors = true;
                continue;
            }
            let taken = self.take(resp, offsets, e2e);
            round.errors |= taken.errors;
            round.records |= taken.records;
        }
        if round.must_back_off() {
            // A partition in error is answered at once: wait as Kafka's consumer does
            // (`retry.backoff.ms`) instead of asking again at once.
            std::thread::sleep(RETRY_BACKOFF);
        }
        Ok(())
    }

    fn take(&self, resp: FetchResponse, offsets: &mut Offsets, e2e: &mut Histogram<u64>) -> Taken {
        let mut taken = Taken::default();
        for t in resp.responses {
            let topic = t.topic.0.to_string();
            for p in t.partitions {
                if p.error_code != 0 {
                    self.counters
                        .error(Counters::code_name("fetch", p.error_code));
                    taken.errors = true;
                    continue;
                }
                let Some(records) = p.records else { continue };
                taken.records |= !records.is_empty();
                let next = offsets
                    .get_mut(&(topic.clone(), p.partition_index as u32))
                    .expect("assigned");
                consume_batches(records, next, &self.counters, e2e, self.measure_from);
            }
        }
        taken
    }
}

/// What a fetch round's answers held.
#[derive(Default)]
struct Taken {
    /// A partition answered an error, or a leader lost the session.
    errors: bool,
    records: bool,
}

impl Taken {
    /// Errors and nothing read: the next round would get the same errors at once.
    fn must_back_off(&self) -> bool {
        self.errors && !self.records
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

/// A KIP-227 incremental fetch session with one leader, kept as the Java consumer keeps one
/// per broker: the first request is full (epoch 0) and creates it; each later one (epoch 1, 2,
/// …) names only the partitions whose fetch offset changed since it was last sent, and the
/// leader answers only the partitions with news. A leader that answers without a session id
/// (its session cache full) gets a full request each time; one that answers with a session
/// error gets a new full request.
#[derive(Default)]
struct FetchSession {
    /// 0: none yet (the next request is full).
    id: i32,
    /// The next request's epoch once the session exists.
    epoch: i32,
    /// The fetch offset the leader's session holds for each partition (the last one sent).
    sent: HashMap<(String, u32), i64>,
}

impl FetchSession {
    /// The next fetch of `parts` at `offsets` in this session.
    fn request(&mut self, parts: &[(String, u32)], offsets: &Offsets) -> FetchRequest {
        let full = self.id == 0;
        if full {
            self.sent.clear();
        }
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (t, p) in parts {
            let key = (t.clone(), *p);
            let offset = offsets[&key];
            if !full && self.sent.get(&key) == Some(&offset) {
                continue;
            }
            self.sent.insert(key, offset);
            let mut fp = FetchPartition::default();
            fp.partition = *p as i32;
            fp.fetch_offset = offset;
            fp.partition_max_bytes = 4 << 20;
            match topics.last_mut() {
                Some(ft) if ft.topic.0.as_str() == t => ft.partitions.push(fp),
                _ => {
                    let mut ft = FetchTopic::default();
                    ft.topic = TopicName(StrBytes::from_string(t.clone()));
                    ft.partitions.push(fp);
                    topics.push(ft);
                }
            }
        }
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 100;
        req.min_bytes = 1;
        req.max_bytes = 32 << 20;
        req.session_id = self.id;
        req.session_epoch = if full { 0 } else { self.epoch };
        req.topics = topics;
        req
    }

    /// Takes the leader's answer to the last request: `Err(code)` (and a fresh session next)
    /// when it refused the session.
    fn answered(&mut self, resp: &FetchResponse) -> Result<(), i16> {
        if resp.error_code != 0 {
            *self = Self::default();
            return Err(resp.error_code);
        }
        if self.id == 0 {
            self.id = resp.session_id;
            self.epoch = 1;
        } else {
            // Epochs wrap to 1 (0 asks for a new session).
            self.epoch = self.epoch.checked_add(1).unwrap_or(1);
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(req: &FetchRequest) -> Vec<(String, i32, i64)> {
        req.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic.0.to_string(), p.partition, p.fetch_offset))
            })
            .collect()
    }

    fn answer(session_id: i32, error_code: i16) -> FetchResponse {
        let mut resp = FetchResponse::default();
        resp.session_id = session_id;
        resp.error_code = error_code;
        resp
    }

    #[test]
    fn a_session_starts_full_then_names_only_moved_partitions() {
        let parts: Vec<(String, u32)> = (0..3).map(|p| ("t".to_owned(), p)).collect();
        let mut offsets: Offsets = parts.iter().map(|k| (k.clone(), 0)).collect();
        let mut s = FetchSession::default();
        let first = s.request(&parts, &offsets);
        assert_eq!((first.session_id, first.session_epoch), (0, 0));
        assert_eq!(asked(&first).len(), 3);
        s.answered(&answer(42, 0)).unwrap();

        offsets.insert(("t".to_owned(), 1), 7);
        let next = s.request(&parts, &offsets);
        assert_eq!((next.session_id, next.session_epoch), (42, 1));
        assert_eq!(asked(&next), vec![("t".to_owned(), 1, 7)]);
        s.answered(&answer(42, 0)).unwrap();
        let quiet = s.request(&parts, &offsets);
        assert_eq!(quiet.session_epoch, 2);
        assert!(asked(&quiet).is_empty());
    }

    #[test]
    fn a_round_of_errors_only_backs_off_and_one_with_records_does_not() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let task = ConsumerTask {
            assigned: Vec::new(),
            group: None,
            measure_from: Instant::now(),
            end: Instant::now(),
            counters: Arc::default(),
            histograms: Arc::default(),
        };
        let response = |error_code: i16| {
            let mut p = PartitionData::default();
            p.error_code = error_code;
            p.records = Some(Bytes::new());
            let mut t = FetchableTopicResponse::default();
            t.topic = TopicName(StrBytes::from_static_str("t"));
            t.partitions.push(p);
            let mut resp = answer(1, 0);
            resp.responses.push(t);
            resp
        };
        let mut offsets: Offsets = [(("t".to_owned(), 0), 0)].into();
        let mut e2e = histogram();
        // NOT_LEADER_OR_FOLLOWER
        let taken = task.take(response(6), &mut offsets, &mut e2e);
        assert!(taken.must_back_off());
        assert_eq!(Counters::get(&task.counters.errors), 1);
        let taken = task.take(response(0), &mut offsets, &mut e2e);
        assert!(
            !taken.must_back_off(),
            "nothing to read is no error: the long poll waited"
        );
    }

    #[test]
    fn a_refused_session_is_started_again_with_a_full_request() {
        let parts = vec![("t".to_owned(), 0), ("u".to_owned(), 0)];
        let offsets: Offsets = parts.iter().map(|k| (k.clone(), 5)).collect();
        let mut s = FetchSession::default();
        s.request(&parts, &offsets);
        s.answered(&answer(9, 0)).unwrap();
        s.request(&parts, &offsets);
        // FETCH_SESSION_ID_NOT_FOUND
        assert_eq!(s.answered(&answer(0, 70)), Err(70));
        let again = s.request(&parts, &offsets);
        assert_eq!((again.session_id, again.session_epoch), (0, 0));
        assert_eq!(asked(&again).len(), 2);
        // A leader that keeps no session: every request is full.
        s.answered(&answer(0, 0)).unwrap();
        assert_eq!(asked(&s.request(&parts, &offsets)).len(), 2);
    }
}
