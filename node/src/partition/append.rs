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
//!   before them, whoever waits. For `acks=all` it then waits for the high watermark
//!   (`replica.rs`): every in-sync replica has written the records.
//! - [`Partition::append_as_follower`] is the follower's mirror of the first half: under the
//!   same append lock, the leader's batches appended verbatim (offsets, epochs and CRCs as the
//!   leader made them) and recorded in the idempotent producer state. The fetcher waits for
//!   them to be written before it fetches on from their end — the fetch offset is what the
//!   leader counts in the ISR's high watermark — except while that end is below the leader's
//!   high watermark of the same leader epoch, where no fetch offset can count for anything
//!   (`replica::fetcher`). [`Partition::truncate_diverging`], [`Partition::restart_at`] and
//!   [`Partition::follow_log_start`] are the follower's other changes to its log.
//! - [`Partition::append_marker`] is the leader's append of a transaction marker
//!   (WriteTxnMarkers): under the same lock, checked against the epochs the partition's
//!   transaction state has seen (`txns.rs`), and acknowledged like `acks=all`.

use iouring_log::{
    AppendError, BatchError, BatchHeader, Durability, FlushError, LeaderEpoch, Offset,
};
use kafka_protocol::ResponseError;

use super::producer_state::{BatchRecord, SequenceCheck};
use super::txns::{marker_refused, TxnMarker, TxnStart};
use super::Partition;
pub use crate::error::Refused;

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
    /// `acks=all`: the high watermark must pass `end_offset` too (every in-sync replica has
    /// the records; nothing more on a partition with one replica), while this replica still
    /// leads in the leader epoch the records were appended in.
    pub replicated: Option<LeaderEpoch>,
    /// The append time the batch was stamped with (a LogAppendTime topic).
    pub log_append_time: Option<i64>,
}

impl Appended {
    /// What `info`'s append waits for: flushed when `flush.messages` came due with it, else
    /// written; and the high watermark when `replicated` names the leader epoch.
    fn of(info: &iouring_log::AppendInfo, replicated: Option<LeaderEpoch>) -> Appended {
        let wait = if info.flush_due {
            AckWait::Flushed
        } else {
            AckWait::Written
        };
        Appended {
            base_offset: info.first_offset,
            end_offset: info.last_offset.next(),
            wait,
            replicated,
            log_append_time: None,
        }
    }
}

impl Partition {
    /// The ordered append of one validated-header batch (see the module doc).
    pub async fn append_as_leader(
        &self,
        records: &[u8],
        batch: &BatchHeader,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
        start: TxnStart,
    ) -> Result<Appended, Refused> {
        let _lock = self.lock_appends().await;
        if batch.is_transactional() {
            self.check_transactional(batch, start)?;
        }
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
        let _held = batch
            .is_transactional()
            .then(|| self.appending_transactional());
        let info = self
            .log
            .append_as_leader(records, leader_epoch, now_ms)
            .await
            .map_err(|e| self.append_refused(e))?;
        self.appended.notify_all();
        if idempotent {
            let record = BatchRecord {
                first_seq: batch.base_sequence,
                last_seq,
                base_offset: info.first_offset.0,
                last_offset: info.last_offset.0,
            };
            let mut producers = self.producers.borrow_mut();
            producers.record(batch.producer_id, batch.producer_epoch, record);
            producers.set_last_timestamp(batch.producer_id, batch.max_timestamp.0);
        }
        if batch.is_transactional() {
            // A client's batch is never a control batch (the produce path refuses them).
            let appended = BatchHeader {
                base_offset: info.first_offset,
                ..*batch
            };
            self.record_txn(&appended, None);
        }
        Ok(Appended::of(&info, None))
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
            replicated: None,
            log_append_time: None,
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
            })?;
        if let Some(epoch) = appended.replicated {
            self.wait_replicated(appended.end_offset, epoch).await?;
        }
        Ok(())
    }

    pub(super) fn append_refused(&self, e: AppendError) -> Refused {
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

impl Partition {
    /// Appends a COMMIT or ABORT marker for `producer_id` (WriteTxnMarkers on the leader),
    /// checked against the coordinator and producer epochs this partition has seen — strictly
    /// for a transaction version 2 marker (KIP-1228) — and records it. The answer waits for
    /// the high watermark (Kafka appends markers with `acks=all`).
    pub async fn append_marker(
        &self,
        marker: &TxnMarker,
        leader_epoch: LeaderEpoch,
        now_ms: i64,
    ) -> Result<Appended, Refused> {
        let &TxnMarker {
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            version,
        } = marker;
        let _lock = self.lock_appends().await;
        self.txns
            .borrow()
            .check_marker(
                transactions::ProducerId(producer_id),
                producer_epoch,
                coordinator_epoch,
                version,
            )
            .map_err(marker_refused)?;
        let bytes = iouring_log::encode_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            now_ms,
        );
        let info = self
            .log
            .append_as_leader(&bytes, leader_epoch, now_ms)
            .await
            .map_err(|e| self.append_refused(e))?;
        self.appended.notify_all();
        let mut header = BatchHeader::parse(&bytes).expect("a marker we encoded");
        header.base_offset = info.first_offset;
        let control = iouring_log::parse_control_record(&bytes).ok();
        if let Some(entry) = self.record_txn(&header, control) {
            self.log
                .append_aborted_txn(entry)
                .await
                .map_err(|e| Refused::new(ResponseError::KafkaStorageError, e.to_string()))?;
        }
        Ok(Appended::of(&info, Some(leader_epoch)))
    }
}

/// Why a follower could not take the leader's batches or follow its log: the log refused or
/// failed them; the fetcher logs it and asks again later.
#[derive(Debug, thiserror::Error)]
pub enum FollowerAppendError {
    #[error("append failed: {0}")]
    Append(#[from] AppendError),
    #[error("write failed: {0}")]
    Write(#[from] FlushError),
    #[error("producer state not rebuilt after the truncation: {0}")]
    Producers(#[from] super::producer_snapshot::RestoreError),
}

impl Partition {
    /// Appends the whole batches at the start of `records` (a fetch answer may end inside
    /// one) as the leader made them, records their producers' state, and returns the new log
    /// end offset, without waiting for the disk (see the module doc).
    pub async fn append_as_follower(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Offset, FollowerAppendError> {
        let whole = iouring_log::whole_batches(records)
            .last()
            .map_or(0, |r| r.end);
        if whole == 0 {
            return Ok(self.log.log_end_offset());
        }
        let bytes = &records[..whole];
        if let Ok(first) = BatchHeader::parse(bytes) {
            let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset());
            if start == end && first.base_offset < end && first.last_offset() >= end {
                // An empty log whose leader's log start falls inside this batch (DeleteRecords
                // moved it there): the log starts again at the batch, as Kafka's does.
                self.restart_at(first.base_offset, now_ms).await?;
            }
        }
        let _lock = self.lock_appends().await;
        // Until their transactions are recorded below.
        let _held = self.appending_transactional();
        let info = self.log.append_as_follower(bytes, now_ms).await?;
        let mut aborted = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let Ok(h) = BatchHeader::parse(&bytes[at..]) else {
                break;
            };
            self.producers.borrow_mut().replay(&h);
            let batch = &bytes[at..(at + h.size_bytes as usize).min(bytes.len())];
            let control = h
                .is_control()
                .then(|| iouring_log::parse_control_record(batch).ok())
                .flatten();
            aborted.extend(self.record_txn(&h, control));
            at += h.size_bytes as usize;
        }
        // All at once: the transactions are closed already (see `append_aborted_txns`).
        self.log
            .append_aborted_txns(&aborted)
            .await
            .map_err(FlushError::from)?;
        Ok(info.last_offset.next())
    }

    /// Truncates a follower's log to `to`, where it diverged from its leader's
    /// (`DivergingEpoch`), and rebuilds its idempotent producer state from what remains.
    pub async fn truncate_diverging(&self, to: Offset) -> Result<(), FollowerAppendError> {
        tracing::warn!(topic = %self.topic, partition = self.index, from = self.log.log_end_offset().0, to = to.0, "follower truncating a diverging log");
        let _lock = self.lock_appends().await;
        self.log.truncate_to(to).await?;
        self.restore_producers().await?;
        Ok(())
    }

    /// Empties a follower's log and starts it at `start` (Kafka's `truncateFullyAndStartAt`):
    /// its leader's log start offset passed this log's end, so nothing here is still on the
    /// leader; or the log is empty and the batch holding the leader's log start begins at
    /// `start`. The producer state goes with it; the high watermark moves up to `start`.
    pub async fn restart_at(&self, start: Offset, now_ms: i64) -> Result<(), FollowerAppendError> {
        tracing::warn!(topic = %self.topic, partition = self.index, log_end = self.log.log_end_offset().0, start = start.0, "follower log ends below its leader's log start: emptying it to start there");
        let _lock = self.lock_appends().await;
        self.forget_producers(start, now_ms)
            .await
            .map_err(FlushError::from)?;
        self.log.truncate_fully_and_start_at(start, now_ms).await?;
        self.on_follower_restarted(start);
        Ok(())
    }

    /// The leader's log start offset moved (DeleteRecords): moves this replica's too, up to
    /// its own high watermark, as Kafka's followers do.
    pub async fn follow_log_start(
        &self,
        leader_start: Offset,
        now_ms: i64,
    ) -> Result<(), FollowerAppendError> {
        if leader_start > self.log.log_start_offset() {
            let hw = self.high_watermark();
            self.log.advance_log_start(leader_start, hw, now_ms).await?;
        }
        Ok(())
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

#[cfg(test)]
pub(super) mod tests {
    use std::rc::Rc;

    use bytes::{Bytes, BytesMut};
    use iouring_log::fault_injection::FaultyIo;
    use iouring_log::{Log, LogConfig, LogOptions};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;

    /// One batch of `count` records of producer `pid` (-1: not idempotent) from `first_seq`.
    pub(in crate::partition) fn batch(pid: i64, first_seq: i32, count: i32) -> Vec<u8> {
        records_batch(pid, 0, first_seq, count, false)
    }

    /// One batch of a transaction of producer `pid` at `epoch`.
    pub(in crate::partition) fn txn_batch(
        pid: i64,
        epoch: i16,
        first_seq: i32,
        count: i32,
    ) -> Vec<u8> {
        records_batch(pid, epoch, first_seq, count, true)
    }

    fn records_batch(
        pid: i64,
        epoch: i16,
        first_seq: i32,
        count: i32,
        transactional: bool,
    ) -> Vec<u8> {
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: pid,
                producer_epoch: if pid < 0 { -1 } else { epoch },
                timestamp_type: TimestampType::Creation,
                offset: i64::from(i),
                sequence: if pid < 0 { i - 1 } else { first_seq + i },
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(Bytes::from(format!("p{pid}-s{}", first_seq + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
        buf.to_vec()
    }

    type Body = fn(FaultyIo, Rc<Partition>) -> futures_lite::future::BoxedLocal<()>;

    /// A temporary directory in the target directory: a real filesystem (O_DIRECT), unlike a
    /// tmpfs /tmp.
    pub(in crate::partition) fn tmpdir() -> tempfile::TempDir {
        tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap()
    }

    /// A partition (its role not set yet) over the log in `dir`, opened with `io`.
    pub(in crate::partition) async fn open_partition(
        dir: &std::path::Path,
        config: LogConfig,
        io: FaultyIo,
    ) -> Rc<Partition> {
        let options = LogOptions {
            io: Rc::new(io),
            progress_listener: None,
        };
        let log = Log::open_with(dir, config, 0, options).await.unwrap();
        let limits = crate::partition::Limits {
            max_message_bytes: 1 << 20,
            min_insync_replicas: 1,
            timestamps: crate::config::BrokerConfig::default_timestamps(),
            compression: Default::default(),
        };
        Rc::new(Partition::new("t".into(), 0, log, limits, Rc::default()))
    }

    /// Runs `body` on a fresh executor with a partition whose log counts its file operations;
    /// the partition already holds one record (its first append writes the epoch checkpoint).
    pub(in crate::partition) fn run(config: LogConfig, body: Body) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let dir = tmpdir();
                let io = FaultyIo::new();
                let part = open_partition(dir.path(), config, io.clone()).await;
                let warm = part.append(&batch(-1, 0, 1)).await.unwrap();
                part.wait_acknowledgeable(&warm).await.unwrap();
                body(io, part.clone()).await;
                part.log.close().await.unwrap();
            })
            .expect("executor (ulimit -l >= 512 KiB?)")
            .join()
            .unwrap();
    }

    impl Partition {
        pub(in crate::partition) async fn append(
            &self,
            records: &[u8],
        ) -> Result<Appended, Refused> {
            let header = BatchHeader::parse(records).unwrap();
            self.append_as_leader(records, &header, LeaderEpoch(0), 0, TxnStart::Unchecked)
                .await
        }
    }

    /// The same idempotent batches sent on two connections at once (a client retrying on a new
    /// connection). Tiny segments make every append roll, so the log append waits for a new
    /// segment file while the other connection's copy arrives: each batch is still appended
    /// once, and both answers name the same offsets.
    #[test]
    fn idempotent_retries_racing_are_appended_once() {
        let config = LogConfig {
            segment_bytes: 100,
            ..LogConfig::default()
        };
        run(config, |_io, part| {
            Box::pin(async move {
                let sender = |part: Rc<Partition>| {
                    glommio::spawn_local(async move {
                        let mut offsets = Vec::new();
                        for seq in 0..20 {
                            let a = part.append(&batch(7, seq * 3, 3)).await.unwrap();
                            part.wait_acknowledgeable(&a).await.unwrap();
                            offsets.push(a.base_offset);
                        }
                        offsets
                    })
                };
                let (a, b) = (sender(part.clone()), sender(part.clone()));
                let (a, b) = (a.await, b.await);
                assert_eq!(a, b, "both connections get the same offsets");
                assert_eq!(part.log.log_end_offset(), Offset(1 + 60), "each batch once");
            })
        });
    }

    /// Pipelined produces under `flush.messages=1`: every answer waits for a flush, and one
    /// write and one fdatasync serve them all.
    #[test]
    fn one_write_and_one_fsync_answer_many_pipelined_produces() {
        let config = LogConfig {
            flush_messages: Some(1),
            ..LogConfig::default()
        };
        run(config, |io, part| {
            Box::pin(async move {
                let before = io.counts();
                let mut pending = Vec::new();
                for i in 0..32 {
                    let a = part.append(&batch(-1, 0, 2 + i % 3)).await.unwrap();
                    assert_eq!(a.wait, AckWait::Flushed);
                    pending.push(a);
                }
                let waits: Vec<_> = pending
                    .into_iter()
                    .map(|a| {
                        let part = part.clone();
                        glommio::spawn_local(async move { part.wait_acknowledgeable(&a).await })
                    })
                    .collect();
                for w in waits {
                    w.await.unwrap();
                }
                let after = io.counts();
                assert_eq!(after.writes - before.writes, 1, "{before:?} -> {after:?}");
                assert_eq!(after.syncs - before.syncs, 1, "{before:?} -> {after:?}");
                assert_eq!(part.log.flushed_end_offset(), part.log.log_end_offset());
            })
        });
    }
}
