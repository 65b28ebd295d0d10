//! Idempotent producer state of one partition: per producer id, its epoch and the last five
//! batches it appended (sequence range and offsets), so that a retried batch gets its original
//! offsets and a gap in sequences is refused, as Kafka does.
//!
//! It survives restarts as Kafka's does (`producer_snapshot.rs`): a snapshot of this map is
//! written now and then and at shutdown, and on open the batches after the snapshot are
//! replayed from the log's batch headers, so a batch retried across a broker crash is still
//! recognised as a duplicate. A producer never seen, or forgotten (more than
//! [`PRODUCERS_MAX`]), has its next batch accepted whatever its sequence.

use std::collections::{HashMap, VecDeque};

use crate::limits::{BATCHES_PER_PRODUCER, PRODUCERS_MAX};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRecord {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchRecord>,
    last_used: u64,
    /// The max timestamp of its last batch (-1: not known, as after a snapshot written before
    /// timestamps were kept in it, or whose last batch a crash took).
    last_timestamp: i64,
}

/// What DescribeProducers shows of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// A retry of a batch already appended at these offsets: answer with them once they may be
    /// acknowledged, append nothing.
    Duplicate { base_offset: i64, last_offset: i64 },
    /// Kafka's `OUT_OF_ORDER_SEQUENCE_NUMBER`.
    OutOfOrder { expected: i32, got: i32 },
    /// Kafka's `INVALID_PRODUCER_EPOCH`.
    StaleEpoch { current: i16, got: i16 },
}

#[derive(Debug, Default)]
pub struct ProducerStateMap {
    producers: HashMap<i64, ProducerEntry>,
    /// Advances with every batch recorded (also the least-recently-used order).
    clock: u64,
}

impl ProducerStateMap {
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> SequenceCheck {
        let Some(p) = self.producers.get(&producer_id) else {
            return SequenceCheck::Append;
        };
        if epoch < p.epoch {
            return SequenceCheck::StaleEpoch {
                current: p.epoch,
                got: epoch,
            };
        }
        if epoch > p.epoch {
            // A new epoch starts its sequences at 0.
            return if first_seq == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: first_seq,
                }
            };
        }
        if let Some(b) = p
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SequenceCheck::Duplicate {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
            };
        }
        let expected = p.batches.back().map_or(0, |b| b.last_seq.wrapping_add(1));
        if first_seq != expected {
            return SequenceCheck::OutOfOrder {
                expected,
                got: first_seq,
            };
        }
        SequenceCheck::Append
    }

    /// Every producer remembered, with its last sequence and timestamp.
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        self.producers
            .iter()
            .map(|(&producer_id, p)| ProducerSummary {
                producer_id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: p.last_timestamp,
            })
            .collect()
    }

    /// The max timestamp of the producer's last batch.
    pub fn set_last_timestamp(&mut self, producer_id: i64, timestamp: i64) {
        if let Some(p) = self.producers.get_mut(&producer_id) {
            p.last_timestamp = timestamp;
        }
    }

    /// Changes with every batch recorded: whether a snapshot is out of date.
    pub fn version(&self) -> u64 {
        self.clock
    }

    /// Replays a batch found in the log (after a snapshot, on open).
    pub fn replay(&mut self, header: &iouring_log::BatchHeader) {
        if header.producer_id < 0 || header.base_sequence < 0 {
            return;
        }
        let batch = BatchRecord {
            first_seq: header.base_sequence,
            last_seq: header.base_sequence.wrapping_add(header.last_offset_delta),
            base_offset: header.base_offset.0,
            last_offset: header.last_offset().0,
        };
        self.record(header.producer_id, header.producer_epoch, batch);
        self.set_last_timestamp(header.producer_id, header.max_timestamp.0);
    }

    /// One line per remembered batch, oldest first: `producer_id epoch first_seq last_seq
    /// base_offset last_offset last_timestamp`, the last the producer's last timestamp on the
    /// line of its newest batch and -1 on the others.
    pub fn to_lines(&self) -> Vec<String> {
        let mut batches: Vec<(i64, i64, i16, &BatchRecord, i64)> = self
            .producers
            .iter()
            .flat_map(|(id, p)| {
                let newest = p.batches.len().saturating_sub(1);
                p.batches.iter().enumerate().map(move |(i, b)| {
                    let ts = if i == newest { p.last_timestamp } else { -1 };
                    (b.base_offset, *id, p.epoch, b, ts)
                })
            })
            .collect();
        batches.sort_by_key(|b| b.0);
        batches
            .into_iter()
            .map(|(_, id, epoch, b, ts)| {
                format!(
                    "{id} {epoch} {} {} {} {} {ts}",
                    b.first_seq, b.last_seq, b.base_offset, b.last_offset
                )
            })
            .collect()
    }

    /// The map [`ProducerStateMap::to_lines`] wrote, keeping only batches before
    /// `log_end_offset` (a crash may have taken later ones); `None` if a line is malformed.
    pub fn from_lines(lines: &[String], log_end_offset: i64) -> Option<ProducerStateMap> {
        let mut map = ProducerStateMap::default();
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            // Snapshots written before timestamps were kept have six fields.
            let (id, epoch, first, last, base, last_offset, ts) = match f[..] {
                [id, epoch, first, last, base, last_offset] => {
                    (id, epoch, first, last, base, last_offset, "-1")
                }
                [id, epoch, first, last, base, last_offset, ts] => {
                    (id, epoch, first, last, base, last_offset, ts)
                }
                _ => return None,
            };
            let ts: i64 = ts.parse().ok()?;
            let batch = BatchRecord {
                first_seq: first.parse().ok()?,
                last_seq: last.parse().ok()?,
                base_offset: base.parse().ok()?,
                last_offset: last_offset.parse().ok()?,
            };
            if batch.last_offset < log_end_offset {
                let id: i64 = id.parse().ok()?;
                map.record(id, epoch.parse().ok()?, batch);
                // The newest batch's line carries the timestamp, the others -1.
                map.set_last_timestamp(id, ts);
            }
        }
        Some(map)
    }

    pub fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchRecord) {
        self.clock += 1;
        if !self.producers.contains_key(&producer_id) && self.producers.len() >= PRODUCERS_MAX {
            let oldest = self
                .producers
                .iter()
                .min_by_key(|(_, p)| p.last_used)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                self.producers.remove(&id);
            }
        }
        let p = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry {
                last_timestamp: -1,
                ..ProducerEntry::default()
            });
        if epoch > p.epoch {
            p.batches.clear();
            p.epoch = epoch;
        }
        p.last_used = self.clock;
        if p.batches.len() == BATCHES_PER_PRODUCER {
            p.batches.pop_front();
        }
        p.batches.push_back(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_lines_round_trip_and_drop_batches_past_the_log_end() {
        let mut m = ProducerStateMap::default();
        for (i, (pid, epoch)) in [(7, 0), (9, 2), (7, 0), (9, 2), (7, 0)]
            .into_iter()
            .enumerate()
        {
            let i = i as i32;
            let batch = BatchRecord {
                first_seq: i * 10,
                last_seq: i * 10 + 9,
                base_offset: 100 + i64::from(i) * 10,
                last_offset: 109 + i64::from(i) * 10,
            };
            m.record(pid, epoch, batch);
        }
        m.set_last_timestamp(7, 1_700_000_000_007);
        m.set_last_timestamp(9, 1_700_000_000_009);
        let lines = m.to_lines();
        let back = ProducerStateMap::from_lines(&lines, i64::MAX).unwrap();
        assert_eq!(back.to_lines(), lines);
        let timestamps = |m: &ProducerStateMap| {
            let mut t: Vec<(i64, i64)> = m
                .summaries()
                .iter()
                .map(|s| (s.producer_id, s.last_timestamp))
                .collect();
            t.sort();
            t
        };
        assert_eq!(
            timestamps(&back),
            [(7, 1_700_000_000_007), (9, 1_700_000_000_009)]
        );
        // A snapshot of six fields (before timestamps were kept) still loads: timestamps unknown.
        let old: Vec<String> = lines
            .iter()
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect();
        let loaded = ProducerStateMap::from_lines(&old, i64::MAX).unwrap();
        assert_eq!(timestamps(&loaded), [(7, -1), (9, -1)]);
        assert_eq!(
            back.check(9, 2, 30, 39),
            SequenceCheck::Duplicate {
                base_offset: 130,
                last_offset: 139
            }
        );
        // The log ends at 130: the batches from 130 on are gone, so 9's retry is no duplicate.
        let cut = ProducerStateMap::from_lines(&lines, 130).unwrap();
        // Its newest batch gone with the rest, 9's timestamp is not known; 7's newest (140)
        // too.
        assert_eq!(timestamps(&cut), [(7, -1), (9, -1)]);
        assert!(!matches!(
            cut.check(9, 2, 30, 39),
            SequenceCheck::Duplicate { .. }
        ));
        assert_eq!(
            cut.check(7, 0, 0, 9),
            SequenceCheck::Duplicate {
                base_offset: 100,
                last_offset: 109
            }
        );
        assert!(ProducerStateMap::from_lines(&["1 2 3".into()], 0).is_none());
    }

    #[test]
    fn duplicates_gaps_and_epochs() {
        let mut m = ProducerStateMap::default();
        assert_eq!(m.check(7, 0, 0, 4), SequenceCheck::Append);
        m.record(
            7,
            0,
            BatchRecord {
                first_seq: 0,
                last_seq: 4,
                base_offset: 100,
                last_offset: 104,
            },
        );
        assert_eq!(
            m.check(7, 0, 0, 4),
            SequenceCheck::Duplicate {
                base_offset: 100,
                last_offset: 104
            }
        );
        assert_eq!(
            m.check(7, 0, 6, 7),
            SequenceCheck::OutOfOrder {
                expected: 5,
                got: 6
            }
        );
        assert_eq!(m.check(7, 0, 5, 7), SequenceCheck::Append);
        assert!(matches!(
            m.check(7, -1, 5, 7),
            SequenceCheck::StaleEpoch { .. }
        ));
        assert_eq!(m.check(7, 1, 0, 0), SequenceCheck::Append);
        for i in 0..6 {
            m.record(
                7,
                0,
                BatchRecord {
                    first_seq: 5 + i,
                    last_seq: 5 + i,
                    base_offset: 200 + i as i64,
                    last_offset: 200 + i as i64,
                },
            );
        }
        assert_eq!(
            m.check(7, 0, 5, 5),
            SequenceCheck::OutOfOrder {
                expected: 11,
                got: 5
            },
            "only five batches kept"
        );
    }
}
