//! The null broker's records: each partition a queue of the batches produced to it, in memory,
//! with offsets assigned as a leader assigns them (the batch's `baseOffset` patched, the rest of
//! its bytes kept verbatim). A bound on the bytes kept over all partitions drops the oldest
//! batches first; a fetch below what is kept is answered `OFFSET_OUT_OF_RANGE`. Nothing is
//! validated beyond the batch framing: the null broker is the floor a broker's own work is
//! measured against, so it does as little as a broker can.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

/// RecordBatch v2: `baseOffset` (i64) at 0, `batchLength` (i32) at 8 counting from byte 12,
/// `lastOffsetDelta` (i32) at 23; a batch header is 61 bytes.
const BATCH_LENGTH_AT: usize = 8;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BATCH_HEADER_BYTES: usize = 61;

/// A topic-partition.
pub type PartitionKey = (String, i32);

/// Why a produce or fetch of one partition was refused (Kafka's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionError {
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    UnknownTopicOrPartition,
    /// OFFSET_OUT_OF_RANGE (1).
    OffsetOutOfRange,
    /// CORRUPT_MESSAGE (2): the records are not whole v2 batches.
    CorruptMessage,
}

impl PartitionError {
    pub fn code(self) -> i16 {
        use kafka_protocol::ResponseError;
        match self {
            Self::OffsetOutOfRange => ResponseError::OffsetOutOfRange.code(),
            Self::CorruptMessage => ResponseError::CorruptMessage.code(),
            Self::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
        }
    }
}

/// What a fetch of one partition reads.
#[derive(Debug, Clone)]
pub struct PartitionRead {
    pub batches: Vec<Bytes>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

#[derive(Default)]
struct Partition {
    /// `(base_offset, batch)`, oldest first.
    batches: VecDeque<(i64, Bytes)>,
    /// The first offset still kept.
    log_start_offset: i64,
    /// The next offset to assign.
    log_end_offset: i64,
}

impl Partition {
    /// Batches from the one holding `offset`, up to `max_bytes` (at least one batch).
    fn read(&self, offset: i64, max_bytes: usize) -> Result<Vec<Bytes>, PartitionError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(PartitionError::OffsetOutOfRange);
        }
        // The first batch whose last offset is at or past `offset`: the one after the last
        // batch based at or before it, unless that one still holds it.
        let after = self.batches.partition_point(|(base, _)| *base <= offset);
        let mut from = after;
        if after > 0 {
            let (base, b) = &self.batches[after - 1];
            if base + last_offset_delta(b) >= offset {
                from = after - 1;
            }
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        for (_, b) in self.batches.range(from..) {
            if !out.is_empty() && bytes + b.len() > max_bytes {
                break;
            }
            bytes += b.len();
            out.push(b.clone());
        }
        Ok(out)
    }
}

fn last_offset_delta(batch: &[u8]) -> i64 {
    i32::from_be_bytes(
        batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .try_into()
            .expect("4 bytes"),
    ) as i64
}

/// The batches of a Produce's records, or why they are not whole v2 batches.
fn split_batches(records: &Bytes) -> Result<Vec<Bytes>, PartitionError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        if records.len() - at < BATCH_HEADER_BYTES {
            return Err(PartitionError::CorruptMessage);
        }
        let length = i32::from_be_bytes(
            records[at + BATCH_LENGTH_AT..at + BATCH_LENGTH_AT + 4]
                .try_into()
                .expect("4 bytes"),
        );
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
            .filter(|&end| end <= records.len() && end - at >= BATCH_HEADER_BYTES)
            .ok_or(PartitionError::CorruptMessage)?;
        out.push(records.slice(at..end));
        at = end;
    }
    Ok(out)
}

struct State {
    topics: HashMap<String, i32>,
    partitions: HashMap<PartitionKey, Partition>,
    /// Every kept batch in the order produced: `(partition, bytes)`, for the retention bound.
    order: VecDeque<(PartitionKey, usize)>,
    kept_bytes: usize,
}

/// Every partition's records, shared by the connections' threads; `appended` wakes the fetches
/// that wait for records.
pub struct MemoryLog {
    state: Mutex<State>,
    appended: Condvar,
    retained_bytes_max: usize,
}

impl MemoryLog {
    pub fn new(retained_bytes_max: usize) -> Self {
        Self {
            state: Mutex::new(State {
                topics: HashMap::new(),
                partitions: HashMap::new(),
                order: VecDeque::new(),
                kept_bytes: 0,
            }),
            appended: Condvar::new(),
            retained_bytes_max,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A connection thread that panicked holding the lock left whole batches: go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates `name` with `partitions` partitions; false if it exists.
    pub fn create_topic(&self, name: &str, partitions: i32) -> bool {
        let mut s = self.lock();
        if s.topics.contains_key(name) {
            return false;
        }
        s.topics.insert(name.to_owned(), partitions);
        for p in 0..partitions {
            s.partitions
                .insert((name.to_owned(), p), Partition::default());
        }
        true
    }

    /// Deletes `name`; false if it does not exist.
    pub fn delete_topic(&self, name: &str) -> bool {
        let mut s = self.lock();
        let Some(n) = s.topics.remove(name) else {
            return false;
        };
        for p in 0..n {
            s.partitions.remove(&(name.to_owned(), p));
        }
        let State {
            order, kept_bytes, ..
        } = &mut *s;
        order.retain(|((t, _), len)| {
            let gone = t == name;
            if gone {
                *kept_bytes -= len;
            }
            !gone
        });
        true
    }

    /// Every topic and its partition count, by name.
    pub fn topics(&self) -> Vec<(String, i32)> {
        let mut t: Vec<_> = self
            .lock()
            .topics
            .iter()
            .map(|(n, p)| (n.clone(), *p))
            .collect();
        t.sort();
        t
    }

    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        self.lock().topics.get(topic).copied()
    }

    /// Appends `records` (whole v2 batches) to `key`, assigning offsets; the first one assigned.
    pub fn append(&self, key: &PartitionKey, records: &Bytes) -> Result<i64, PartitionError> {
        let batches = split_batches(records)?;
        let mut s = self.lock();
        let part = s
            .partitions
            .get_mut(key)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        let base_offset = part.log_end_offset;
        let mut added = Vec::with_capacity(batches.len());
        for b in batches {
            let offset = part.log_end_offset;
            part.log_end_offset += last_offset_delta(&b) + 1;
            let mut patched = BytesMut::from(&b[..]);
            patched[..8].copy_from_slice(&offset.to_be_bytes());
            added.push(patched.len());
            part.batches.push_back((offset, patched.freeze()));
        }
        for len in added {
            s.order.push_back((key.clone(), len));
            s.kept_bytes += len;
        }
        self.trim(&mut s);
        drop(s);
        self.appended.notify_all();
        Ok(base_offset)
    }

    /// Drops the oldest batches over the bound (each is its partition's oldest).
    fn trim(&self, s: &mut State) {
        while s.kept_bytes > self.retained_bytes_max {
            let Some((key, len)) = s.order.pop_front() else {
                return;
            };
            s.kept_bytes -= len;
            if let Some(p) = s.partitions.get_mut(&key) {
                if let Some((_, b)) = p.batches.pop_front() {
                    p.log_start_offset = p
                        .batches
                        .front()
                        .map_or(p.log_end_offset, |(base, _)| *base);
                    debug_assert_eq!(b.len(), len);
                }
            }
        }
    }

    /// Reads each `(partition, offset, max_bytes)`; waits until `deadline` while fewer than
    /// `min_bytes` bytes are there. Per partition: the batches, the high watermark and the log
    /// start offset, or the error.
    pub fn read(
        &self,
        wanted: &[(PartitionKey, i64, usize)],
        min_bytes: usize,
        deadline: Instant,
    ) -> Vec<Result<PartitionRead, PartitionError>> {
        let mut s = self.lock();
        loop {
            let answers: Vec<_> = wanted
                .iter()
                .map(|(key, offset, max)| {
                    let p = s
                        .partitions
                        .get(key)
                        .ok_or(PartitionError::UnknownTopicOrPartition)?;
                    Ok(PartitionRead {
                        batches: p.read(*offset, *max)?,
                        high_watermark: p.log_end_offset,
                        log_start_offset: p.log_start_offset,
                    })
                })
                .collect();
            let bytes: usize = answers
                .iter()
                .filter_map(|a| a.as_ref().ok())
                .flat_map(|r| r.batches.iter().map(Bytes::len))
                .sum();
            let errors = answers.iter().any(Result::is_err);
            let now = Instant::now();
            if bytes >= min_bytes || errors || now >= deadline {
                return answers;
            }
            s = self
                .appended
                .wait_timeout(s, deadline.saturating_duration_since(now))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A v2 batch of `records` records (only the framing fields the null broker reads are set).
    fn batch(records: i32, filler: usize) -> Vec<u8> {
        let mut b = vec![0u8; BATCH_HEADER_BYTES + filler];
        let length = (b.len() - 12) as i32;
        b[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        b[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&(records - 1).to_be_bytes());
        b
    }

    fn key() -> PartitionKey {
        ("t".to_owned(), 0)
    }

    #[test]
    fn offsets_are_assigned_in_order_and_patched_into_the_batches() {
        let log = MemoryLog::new(1 << 20);
        assert!(log.create_topic("t", 1));
        let mut two = batch(3, 10);
        two.extend(batch(2, 5));
        assert_eq!(log.append(&key(), &Bytes::from(two)), Ok(0));
        assert_eq!(log.append(&key(), &Bytes::from(batch(1, 0))), Ok(5));
        let got = log.read(&[(key(), 4, 1 << 20)], 1, Instant::now());
        let r = got[0].clone().unwrap();
        // Offset 4 is inside the second batch (3..=4): it comes first.
        let bases: Vec<i64> = r
            .batches
            .iter()
            .map(|b| i64::from_be_bytes(b[..8].try_into().unwrap()))
            .collect();
        assert_eq!(
            (bases, r.high_watermark, r.log_start_offset),
            (vec![3, 5], 6, 0)
        );
    }

    #[test]
    fn the_bound_drops_the_oldest_batches_and_a_fetch_below_them_is_out_of_range() {
        let one = batch(1, 100).len();
        let log = MemoryLog::new(3 * one);
        log.create_topic("t", 1);
        for _ in 0..5 {
            log.append(&key(), &Bytes::from(batch(1, 100))).unwrap();
        }
        let got = log.read(&[(key(), 0, 1 << 20)], 0, Instant::now());
        assert_eq!(
            got[0].clone().unwrap_err(),
            PartitionError::OffsetOutOfRange
        );
        let r = log.read(&[(key(), 2, 1 << 20)], 0, Instant::now())[0]
            .clone()
            .unwrap();
        assert_eq!((r.batches.len(), r.log_start_offset), (3, 2));
    }

    #[test]
    fn torn_batches_and_unknown_partitions_are_refused() {
        let log = MemoryLog::new(1 << 20);
        log.create_topic("t", 1);
        let mut torn = batch(1, 10);
        torn.truncate(40);
        assert_eq!(
            log.append(&key(), &Bytes::from(torn)),
            Err(PartitionError::CorruptMessage)
        );
        assert_eq!(
            log.append(&("t".to_owned(), 1), &Bytes::from(batch(1, 0))),
            Err(PartitionError::UnknownTopicOrPartition)
        );
        // Nothing was kept of the torn batch.
        let r = log.read(&[(key(), 0, 1 << 20)], 0, Instant::now())[0]
            .clone()
            .unwrap();
        assert_eq!((r.batches.len(), r.high_watermark), (0, 0));
    }

    #[test]
    fn a_fetch_waits_for_records_until_its_deadline() {
        let log = std::sync::Arc::new(MemoryLog::new(1 << 20));
        log.create_topic("t", 1);
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                log.append(&key(), &Bytes::from(batch(1, 0))).unwrap();
            })
        };
        let got = log.read(
            &[(key(), 0, 1 << 20)],
            1,
            Instant::now() + Duration::from_secs(30),
        );
        writer.join().unwrap();
        assert_eq!(got[0].clone().unwrap().batches.len(), 1);
    }
}
