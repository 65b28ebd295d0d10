//! A producer: open-loop rate control (or as fast as possible), records placed by the three
//! rules, per-partition batches closed by size or linger, pipelined Produce requests (up to
//! `maxInFlight` per connection) with a reader thread per connection recording publish latency
//! when each acknowledgement arrives.

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

/// Requests in flight on one connection: their messages' send instants, oldest first.
#[derive(Default)]
struct InFlight {
    queue: Mutex<VecDeque<Vec<Instant>>>,
    changed: Condvar,
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
        let mut delay = histogram();
        let linger = Duration::from_millis(w.producer.linger_ms);
        let mut seq: u64 = 0;
        while Instant::now() < self.end && !self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let intended = if self.rate > 0.0 {
                self.start + Duration::from_secs_f64(seq as f64 / self.rate)
            } else {
                Instant::now()
            };
            self.flush_lingering(&mut batches, &mut links, linger, intended)?;
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
            let b = batches.entry(partition).or_insert_with(|| OpenBatch {
                records: Vec::new(),
                sent_at: Vec::new(),
                bytes: 0,
                opened: now,
            });
            b.records
                .push(bench_record(b.records.len() as i64, key, value.freeze()));
            b.sent_at.push(now);
            // Record framing (length, attributes, deltas, key length, headers count) on top.
            b.bytes += w.message_size + RECORD_OVERHEAD_BYTES;
            Counters::add(&self.counters.sent_messages, 1);
            if b.bytes >= w.producer.batch_size_bytes {
                let b = batches.remove(&partition).expect("batch present");
                self.send_batch(partition, b, &mut links)?;
            }
            seq += 1;
        }
        for (p, b) in std::mem::take(&mut batches) {
            self.send_batch(p, b, &mut links)?;
        }
        Histograms::merge(&self.histograms.publish_delay_us, &delay);
        for (_, link) in links {
            link.drain(Duration::from_secs(30));
            link.sender.shutdown();
            if let Some(r) = link.reader {
                let latency = r.join().expect("reader thread")?;
                Histograms::merge(&self.histograms.publish_latency_us, &latency);
            }
        }
        Ok(())
    }

    fn flush_lingering(
        &self,
        batches: &mut HashMap<u32, OpenBatch>,
        links: &mut HashMap<String, Link>,
        linger: Duration,
        now: Instant,
    ) -> Result<(), ClientError> {
        let due: Vec<u32> = batches
            .iter()
            .filter(|(_, b)| now.saturating_duration_since(b.opened) >= linger)
            .map(|(p, _)| *p)
            .collect();
        for p in due {
            let b = batches.remove(&p).expect("batch present");
            self.send_batch(p, b, links)?;
        }
        Ok(())
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
                            // The sender closed the connection after the last acknowledgement.
                            Err(ClientError::Io { .. })
                                if in_flight.queue.lock().expect("lock").is_empty() =>
                            {
                                return Ok(latency)
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
                        let failed = resp
                            .responses
                            .iter()
                            .flat_map(|t| &t.partition_responses)
                            .find(|p| p.error_code != 0);
                        if let Some(p) = failed {
                            counters.error(Counters::code_name("produce", p.error_code));
                            continue;
                        }
                        let now = Instant::now();
                        Counters::add(&counters.acked_messages, sent.len() as u64);
                        Counters::add(&counters.acked_bytes, sent.len() as u64 * size);
                        for t in sent.iter().filter(|t| **t >= measure_from) {
                            record(&mut latency, (now - *t).as_micros() as u64);
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

    fn send_batch(
        &self,
        partition: u32,
        batch: OpenBatch,
        links: &mut HashMap<String, Link>,
    ) -> Result<(), ClientError> {
        let w = &self.workload;
        let addr = self
            .cluster
            .leaders
            .get(&(self.topic.clone(), partition))
            .expect("leader known");
        let link = links.get_mut(addr).expect("link open");
        let mut records = BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: compression(&w.producer.compression),
        };
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
        let mut td = TopicProduceData::default();
        td.name = TopicName(StrBytes::from_string(self.topic.clone()));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = w.producer.acks;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        if w.producer.acks != 0 {
            let mut q = link.in_flight.queue.lock().expect("lock");
            while q.len() >= w.producer.max_in_flight {
                q = link.in_flight.changed.wait(q).expect("lock");
            }
            q.push_back(batch.sent_at);
        } else {
            Counters::add(&self.counters.acked_messages, batch.records.len() as u64);
            Counters::add(
                &self.counters.acked_bytes,
                (batch.records.len() * w.message_size) as u64,
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
