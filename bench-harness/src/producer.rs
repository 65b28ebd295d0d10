//! A producer: open-loop rate control (or as fast as possible), records placed by the three
//! rules, per-partition batches closed by size or linger, pipelined Produce requests (up to
//! `maxInFlight` per connection) with a reader thread per connection recording publish latency
//! when each acknowledgement arrives. As the Java producer's sender drains a leader, a batch
//! whose linger expired takes every other open batch for the same leader into its request (up
//! to `max.request.size`, 1 MiB; with 10 000 partitions, one request per batch would measure
//! request overhead, not the broker); a full batch goes at once, alone. (Before 2026-12-03 only
//! the batches whose own linger had expired went together: with many quiet partitions that
//! was about one request per record.)

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::client::{connect, ClientError, Sender};
use crate::cluster::Cluster;
use crate::partitioner::Partitioner;
use crate::stats::{histogram, record, Counters, Histograms};
use crate::workload::{KeyDistributor, Workload};

const PRODUCE_VERSION: i16 = 7;
/// Bytes a record adds around its value in a v2 batch, roughly (varints of a small record).
const RECORD_OVERHEAD_BYTES: usize = 16;
/// Distinct keys cycled through by KEY_ROUND_ROBIN.
const KEYS: u64 = 10_000;
/// The Java producer's `max.request.size` default: a drain stops adding batches for a leader
/// beyond it (the batches that were due go regardless).
const MAX_REQUEST_BYTES: usize = 1 << 20;

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn compression(name: &str) -> Compression {
    match name {
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => Compression::None,
    }
}

/// What a producer thread needs.
pub struct ProducerTask {
    pub workload: Arc<Workload>,
    pub cluster: Arc<Cluster>,
    pub topic: String,
    /// Messages per second for this producer; 0 = as fast as possible.
    pub rate: f64,
    pub start: Instant,
    pub measure_from: Instant,
    pub end: Instant,
    pub counters: Arc<Counters>,
    pub histograms: Arc<Histograms>,
    /// Set by the driver to stop early (the backlog fill stops at a byte count).
    pub stop: Arc<std::sync::atomic::AtomicBool>,
}

/// How long after the run's end the producer waits for the broker's last answers.
const END_DRAIN: Duration = Duration::from_secs(30);

/// One request's batches: partition → its messages' send instants.
type SentBatches = Vec<(i32, Vec<Instant>)>;

/// Requests in flight on one connection, oldest first.
#[derive(Default)]
struct InFlight {
    queue: Mutex<VecDeque<SentBatches>>,
    changed: Condvar,
    /// Set when the run is over and the connection is being closed after the drain: requests
    /// still unanswered then are counted as errors, not a failure of the run.
    closing: std::sync::atomic::AtomicBool,
}

struct Link {
    sender: Sender,
    in_flight: Arc<InFlight>,
    reader: Option<std::thread::JoinHandle<Result<Histogram<u64>, ClientError>>>,
}

impl Link {
    /// Waits until every request sent has been acknowledged (or `timeout` passes).
    fn drain(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut q = self.in_flight.queue.lock().expect("lock");
        while !q.is_empty() && Instant::now() < deadline {
            q = self
                .in_flight
                .changed
                .wait_timeout(q, Duration::from_millis(100))
                .expect("lock")
                .0;
        }
    }
}

struct OpenBatch {
    records: Vec<Record>,
    sent_at: Vec<Instant>,
    bytes: usize,
    opened: Instant,
}

impl ProducerTask {
    pub fn run(self) -> Result<(), ClientError> {
        let w = self.workload.clone();
        let mut links: HashMap<String, Link> = HashMap::new();
        for addr in self.cluster.leaders.values() {
            if !links.contains_key(addr) {
                links.insert(addr.clone(), self.open_link(addr)?);
            }
        }
        let payload = vec![0xabu8; w.message_size];
        let mut partitioner = Partitioner::default();
        let mut batches: HashMap<u32, OpenBatch> = HashMap::new();
        // When each open batch was opened, oldest first (entries of batches sent full are
        // skipped when they come up).
        let mut opened: VecDeque<(Instant, u32)> = VecDeque::new();
        let mut delay = histogram();
        let linger = Duration::from_millis(w.producer.linger_ms);
        let mut seq: u64 = 0;
        while Instant::now() < self.end && !self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let intended = if self.rate > 0.0 {
                self.start + Duration::from_secs_f64(seq as f64 / self.rate)
            } else {
                Instant::now()
            };
            self.flush_lingering(&mut batches, &mut opened, &mut links, linger, intended)?;
            let now = Instant::now();
            if intended > now {
                std::thread::sleep((intended - now).min(linger.max(Duration::from_micros(200))));
                continue;
            }
            if now >= self.measure_from && self.rate > 0.0 {
                record(&mut delay, (now - intended).as_micros() as u64);
            }
            let key = match w.key_distributor {
                KeyDistributor::NoKey => None,
                KeyDistributor::KeyRoundRobin => Some(Bytes::from(format!("key-{}", seq % KEYS))),
                KeyDistributor::RandomNano => Some(Bytes::from(format!("key-{}", now_us()))),
            };
            let partition = partitioner.partition(None, key.as_deref(), self.cluster.partitions);
            let mut value = BytesMut::from(&payload[..]);
            value[..8].copy_from_slice(&now_us().to_be_bytes());
            let b = batches.entry(partition).or_insert_with(|| {
                opened.push_back((now, partition));
                OpenBatch {
                    records: Vec::new(),
                    sent_at: Vec::new(),
                    bytes: 0,
                    opened: now,
                }
            });
            b.records
                .push(bench_record(b.records.len() as i64, key, value.freeze()));
            b.sent_at.push(now);
            // Record framing (length, attributes, deltas, key length, headers count) on top.
            b.bytes += w.message_size + RECORD_OVERHEAD_BYTES;
            Counters::add(&self.counters.sent_messages, 1);
            if b.bytes >= w.producer.batch_size_bytes {
                let b = batches.remove(&partition).expect("batch present");
                self.send_batches(vec![(partition, b)], &mut links)?;
            }
            seq += 1;
        }
        let rest: Vec<(u32, OpenBatch)> = std::mem::take(&mut batches).into_iter().collect();
        self.send_batches(rest, &mut links)?;
        Histograms::merge(&self.histograms.publish_delay_us, &delay);
        for (_, link) in links {
            link.drain(END_DRAIN);
            link.in_flight
                .closing
                .store(true, std::sync::atomic::Ordering::SeqCst);
            link.sender.shutdown();
            if let Some(r) = link.reader {
                let latency = r.join().expect("reader thread")?;
                Histograms::merge(&self.histograms.publish_latency_us, &latency);
            }
        }
        Ok(())
    }

    /// Sends every batch whose linger expired by `now`, one request per leader.
    fn flush_lingering(
        &self,
        batches: &mut HashMap<u32, OpenBatch>,
        opened: &mut VecDeque<(Instant, u32)>,
        links: &mut HashMap<String, Link>,
        linger: Duration,
        now: Instant,
    ) -> Result<(), ClientError> {
        let mut due = Vec::new();
        while let Some(&(at, p)) = opened.front() {
            if now.saturating_duration_since(at) < linger {
                break;
            }
            opened.pop_front();
            // The batch opened then, unless it was sent full and another opened since.
            if batches.get(&p).is_some_and(|b| b.opened == at) {
                due.push((p, batches.remove(&p).expect("batch present")));
            }
        }
        if due.is_empty() {
            return Ok(());
        }
        let leader = |p: u32| {
            self.cluster
                .leaders
                .get(&(self.topic.clone(), p))
                .map(String::as_str)
        };
        let mut size: HashMap<Option<&str>, usize> = HashMap::new();
        for (p, b) in &due {
            *size.entry(leader(*p)).or_default() += b.bytes;
        }
        let open: Vec<(u32, usize)> = batches.iter().map(|(&p, b)| (p, b.bytes)).collect();
        for p in drain_with_due(&mut size, open, leader) {
            due.push((p, batches.remove(&p).expect("batch present")));
        }
        self.send_batches(due, links)
    }

    fn open_link(&self, addr: &str) -> Result<Link, ClientError> {
        let (sender, mut receiver) = connect(addr)?;
        let in_flight = Arc::new(InFlight::default());
        let reader = if self.workload.producer.acks == 0 {
            None
        } else {
            let (in_flight, counters, measure_from, size) = (
                in_flight.clone(),
                self.counters.clone(),
                self.measure_from,
                self.workload.message_size as u64,
            );
            Some(std::thread::spawn(
                move || -> Result<Histogram<u64>, ClientError> {
                    let mut latency = histogram();
                    loop {
                        let (_, resp) = match receiver
                            .recv_decoded::<ProduceResponse>(ApiKey::Produce, PRODUCE_VERSION)
                        {
                            Ok(r) => r,
                            // The sender closed the connection after the last acknowledgement,
                            // or after the drain gave up on a broker that did not answer: its
                            // unanswered records are errors of the run.
                            Err(ClientError::Io { .. })
                                if in_flight.closing.load(std::sync::atomic::Ordering::SeqCst)
                                    || in_flight.queue.lock().expect("lock").is_empty() =>
                            {
                                let unanswered: usize = in_flight
                                    .queue
                                    .lock()
                                    .expect("lock")
                                    .iter()
                                    .flat_map(|r| r.iter().map(|(_, sent)| sent.len()))
                                    .sum();
                                counters.errors_of(
                                    "produce: no answer 30 s after the run ended",
                                    unanswered as u64,
                                );
                                return Ok(latency);
                            }
                            Err(e) => return Err(e),
                        };
                        let sent = in_flight
                            .queue
                            .lock()
                            .expect("lock")
                            .pop_front()
                            .unwrap_or_default();
                        in_flight.changed.notify_all();
                        let now = Instant::now();
                        for (partition, sent_at) in &sent {
                            let answer = resp
                                .responses
                                .iter()
                                .flat_map(|t| &t.partition_responses)
                                .find(|p| p.index == *partition);
                            match answer.map(|p| p.error_code) {
                                Some(0) => {}
                                Some(code) => {
                                    counters.error(Counters::code_name("produce", code));
                                    continue;
                                }
                                None => {
                                    counters.error("produce: partition missing from the answer");
                                    continue;
                                }
                            }
                            Counters::add(&counters.acked_messages, sent_at.len() as u64);
                            Counters::add(&counters.acked_bytes, sent_at.len() as u64 * size);
                            for t in sent_at.iter().filter(|t| **t >= measure_from) {
                                record(&mut latency, (now - *t).as_micros() as u64);
                            }
                        }
                    }
                },
            ))
        };
        Ok(Link {
            sender,
            in_flight,
            reader,
        })
    }

    /// Sends `batches`, one Produce request per leader holding all of its batches.
    fn send_batches(
        &self,
        batches: Vec<(u32, OpenBatch)>,
        links: &mut HashMap<String, Link>,
    ) -> Result<(), ClientError> {
        let mut by_leader: HashMap<&str, Vec<(u32, OpenBatch)>> = HashMap::new();
        for (partition, batch) in batches {
            let addr = self
                .cluster
                .leaders
                .get(&(self.topic.clone(), partition))
                .expect("leader known");
            by_leader.entry(addr).or_default().push((partition, batch));
        }
        for (addr, batches) in by_leader {
            let link = links.get_mut(addr).expect("link open");
            self.send_request(link, batches)?;
        }
        Ok(())
    }

    fn send_request(
        &self,
        link: &mut Link,
        batches: Vec<(u32, OpenBatch)>,
    ) -> Result<(), ClientError> {
        let w = &self.workload;
        let opts = RecordEncodeOptions {
            version: 2,
            compression: compression(&w.producer.compression),
        };
        let mut td = TopicProduceData::default();
        td.name = TopicName(StrBytes::from_string(self.topic.clone()));
        let mut sent: SentBatches = Vec::with_capacity(batches.len());
        let mut messages = 0;
        for (partition, batch) in batches {
            let mut records = BytesMut::new();
            RecordBatchEncoder::encode(&mut records, &batch.records, &opts).map_err(|e| {
                ClientError::Codec {
                    api: ApiKey::Produce,
                    version: PRODUCE_VERSION,
                    reason: e.to_string(),
                }
            })?;
            let mut pd = PartitionProduceData::default();
            pd.index = partition as i32;
            pd.records = Some(records.freeze());
            td.partition_data.push(pd);
            messages += batch.records.len();
            sent.push((partition as i32, batch.sent_at));
        }
        let mut req = ProduceRequest::default();
        req.acks = w.producer.acks;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        if w.producer.acks != 0 {
            let mut q = link.in_flight.queue.lock().expect("lock");
            while q.len() >= w.producer.max_in_flight {
                // A broker that stops answering must not hold the run forever: past the end
                // and the drain, what is left is counted as not sent.
                if Instant::now() >= self.end + END_DRAIN {
                    self.counters.errors_of(
                        "produce: not sent, no answer 30 s after the run ended",
                        messages as u64,
                    );
                    return Ok(());
                }
                q = link
                    .in_flight
                    .changed
                    .wait_timeout(q, Duration::from_millis(100))
                    .expect("lock")
                    .0;
            }
            q.push_back(sent);
        } else {
            Counters::add(&self.counters.acked_messages, messages as u64);
            Counters::add(
                &self.counters.acked_bytes,
                (messages * w.message_size) as u64,
            );
        }
        link.sender.send(ApiKey::Produce, PRODUCE_VERSION, &req)?;
        Ok(())
    }
}

fn bench_record(offset: i64, key: Option<Bytes>, value: Bytes) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        // The encoder keeps records in one batch while offset - sequence is constant.
        sequence: (offset - 1) as i32,
        timestamp: (now_us() / 1000) as i64,
        key,
        value: Some(value),
        headers: Default::default(),
    }
}

/// The open batches (`(partition, bytes)`) that go with the due ones: those of a leader that
/// has a batch due (`size`: the bytes of each such leader's request so far), until the first
/// that would take its request past [`MAX_REQUEST_BYTES`] (as the Java producer's drain stops).
fn drain_with_due<K: std::hash::Hash + Eq>(
    size: &mut HashMap<K, usize>,
    open: Vec<(u32, usize)>,
    leader: impl Fn(u32) -> K,
) -> Vec<u32> {
    let mut taken = Vec::new();
    for (p, bytes) in open {
        let Some(s) = size.get_mut(&leader(p)) else {
            continue;
        };
        if s.saturating_add(bytes) > MAX_REQUEST_BYTES {
            // Full: nothing more for this leader in this request.
            *s = usize::MAX;
            continue;
        }
        *s += bytes;
        taken.push(p);
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Partitions 0–3 on leader "a", 4–5 on "b"; a batch of "a" is due with 1000 bytes.
    fn leader(p: u32) -> &'static str {
        if p < 4 {
            "a"
        } else {
            "b"
        }
    }

    #[test]
    fn a_due_batch_takes_its_leaders_other_open_batches_only() {
        let mut size = HashMap::from([("a", 1000)]);
        let mut taken = drain_with_due(&mut size, vec![(1, 500), (4, 500), (2, 700)], leader);
        taken.sort_unstable();
        assert_eq!(taken, vec![1, 2], "not leader b's, which has nothing due");
        assert_eq!(size["a"], 2200);
    }

    #[test]
    fn a_drain_stops_at_the_request_size_limit() {
        let mut size = HashMap::from([("a", MAX_REQUEST_BYTES - 600)]);
        let taken = drain_with_due(&mut size, vec![(1, 500), (2, 700), (3, 100)], leader);
        assert_eq!(
            taken,
            vec![1],
            "500 fits, 700 would not, and the drain stops there"
        );
    }
}
