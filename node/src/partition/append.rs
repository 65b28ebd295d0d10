//! The two halves of the produce path for one partition.
//!
//! Contract:
//! - [`Partition::append_as_leader`] is the **ordered append**: under the partition's append
//!   lock, in call order, the idempotent producer's sequence check, the log append (offsets
//!   assigned, bytes in the log's memory) and the producer state record. Nothing else appends
//!   to the partition in between, so a retry of a batch that arrives on another connection
//!   while the batch is being appended is answered as a duplicate, never appended twice. It does
//!   not wait for the disk.
//! - [`Partition::wait_acknowledgeable`] is the **completion wait**: it returns once the
//!   appended offsets may be acknowledged — written to the segment file, and flushed when
//!   `flush.messages` asked for it. The log's writer and group-commit fsync cover every append
//!   before them, whoever waits. Replication adds the replicated high watermark here, as one
//!   more [`AckWait`].

use iouring_log::{AppendError, BatchError, BatchHeader, Durability, LeaderEpoch, Offset};
use kafka_protocol::ResponseError;

use super::producer_state::{BatchRecord, SequenceCheck};
use super::Partition;

/// A produce refused for one partition: Kafka's error code and a message for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub error: ResponseError,
    pub message: String,
}

impl Refused {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Refused {
        Refused {
            error,
            message: message.into(),
        }
    }
}

/// What an acknowledgement of appended offsets waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckWait {
    /// Written to the segment file: survives the broker process being killed (acks=1, and
    /// acks=all while the partition has one replica).
    Written,
    /// Flushed as well (`flush.messages` reached): survives the machine losing power.
    Flushed,
}

/// Offsets appended (or found appended by an earlier try) and what their acknowledgement
/// waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: Offset,
    /// The offset after the last one appended.
    pub end_offset: Offset,
    pub wait: AckWait,
}

impl Partition {
    /// The ordered append of one validated-header batch (see the module doc).
    pub async fn append_as_leader(
        &self,
        records: &[u8],
        batch: &BatchHeader,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<Appended, Refused> {
        let _lock = self.lock_appends().await;
        let idempotent = batch.producer_id >= 0 && batch.base_sequence >= 0;
        let last_seq = batch.base_sequence.wrapping_add(batch.last_offset_delta);
        if idempotent {
            let check = self.producers.borrow().check(
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                last_seq,
            );
            match check {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate {
                    base_offset,
                    last_offset,
                } => return Ok(self.duplicate(base_offset, last_offset)),
                SequenceCheck::OutOfOrder { expected, got } => {
                    return Err(Refused::new(
                        ResponseError::OutOfOrderSequenceNumber,
                        format!("expected sequence {expected}, got {got}"),
                    ))
                }
                SequenceCheck::StaleEpoch { current, got } => {
                    return Err(Refused::new(
                        ResponseError::InvalidProducerEpoch,
                        format!("producer epoch {got} is older than {current}"),
                    ))
                }
            }
        }
        let info = self
            .log
            .append_as_leader(records, leader_epoch, now_ms)
            .await
            .map_err(|e| self.append_refused(e))?;
        if idempotent {
            let record = BatchRecord {
                first_seq: batch.base_sequence,
                last_seq,
                base_offset: info.first_offset.0,
                last_offset: info.last_offset.0,
            };
            self.producers
                .borrow_mut()
                .record(batch.producer_id, batch.producer_epoch, record);
        }
        let wait = if info.flush_due {
            AckWait::Flushed
        } else {
            AckWait::Written
        };
        Ok(Appended {
            base_offset: info.first_offset,
            end_offset: info.last_offset.next(),
            wait,
        })
    }

    /// A retried batch: its original offsets, acknowledged no sooner than the original could
    /// be (flushed whenever the topic has a `flush.messages` policy at all).
    fn duplicate(&self, base_offset: i64, last_offset: i64) -> Appended {
        let wait = if self.log.config().flush_messages.is_some() {
            AckWait::Flushed
        } else {
            AckWait::Written
        };
        Appended {
            base_offset: Offset(base_offset),
            end_offset: Offset(last_offset + 1),
            wait,
        }
    }

    /// The completion wait (see the module doc).
    pub async fn wait_acknowledgeable(&self, appended: &Appended) -> Result<(), Refused> {
        let durability = match appended.wait {
            AckWait::Written => Durability::Written,
            AckWait::Flushed => Durability::Flushed,
        };
        self.log
            .wait_for(durability, appended.end_offset)
            .await
            .map_err(|e| {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "appended records not written");
                Refused::new(ResponseError::KafkaStorageError, e.to_string())
            })
    }

    fn append_refused(&self, e: AppendError) -> Refused {
        match e {
            AppendError::CorruptBatch { source, .. } => batch_refused(source),
            AppendError::BatchTooLarge {
                size,
                segment_bytes,
            } => Refused::new(
                ResponseError::RecordListTooLarge,
                format!("batch of {size} bytes exceeds segment.bytes {segment_bytes}"),
            ),
            AppendError::StaleEpoch { epoch, latest } => Refused::new(
                ResponseError::NotLeaderOrFollower,
                format!("leader epoch {epoch} is older than {latest}"),
            ),
            e => {
                tracing::error!(topic = %self.topic, partition = self.index, error = %e, "append failed");
                Refused::new(ResponseError::KafkaStorageError, e.to_string())
            }
        }
    }
}

/// Kafka's answer to a batch whose header or CRC is wrong.
pub fn batch_refused(e: BatchError) -> Refused {
    match e {
        BatchError::BadMagic { magic } => Refused::new(
            ResponseError::UnsupportedForMessageFormat,
            format!("record batch magic {magic}; only v2 is accepted"),
        ),
        other => Refused::new(ResponseError::CorruptMessage, other.to_string()),
    }
}
