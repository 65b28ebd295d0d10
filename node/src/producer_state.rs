//! Idempotent producer state of one partition: per producer id, its epoch and the last five
//! batches it appended (sequence range and offsets), so that a retried batch gets its original
//! offsets and a gap in sequences is refused, as Kafka does.
//!
//! State lives in memory only: after a restart a producer's next batch is accepted whatever
//! its sequence (Kafka's behaviour for a producer it has no state for). Not persisted yet.

use std::collections::{HashMap, VecDeque};

pub const BATCHES_PER_PRODUCER: usize = 5;
/// Producers tracked per partition; the least recently used one is forgotten beyond this.
pub const PRODUCERS_MAX: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRecord {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
}

#[derive(Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchRecord>,
    last_used: u64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// A retry of a batch already appended at this base offset: answer with it, append nothing.
    Duplicate { base_offset: i64 },
    /// Kafka's `OUT_OF_ORDER_SEQUENCE_NUMBER`.
    OutOfOrder { expected: i32, got: i32 },
    /// Kafka's `INVALID_PRODUCER_EPOCH`.
    StaleEpoch { current: i16, got: i16 },
}

#[derive(Debug, Default)]
pub struct ProducerStateMap {
    producers: HashMap<i64, ProducerEntry>,
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
        let p = self.producers.entry(producer_id).or_default();
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
            },
        );
        assert_eq!(
            m.check(7, 0, 0, 4),
            SequenceCheck::Duplicate { base_offset: 100 }
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
