//! The transaction coordinator's state of each `transactional.id` (Kafka's
//! `TransactionMetadata` and the checks of its `TransactionCoordinator`), as of Kafka 4.1.1.
//!
//! Every change is two-phase, as Kafka's: a request that changes the state yields a
//! [`Transit`] — the whole new state — which the broker writes to `__transaction_state`
//! (acks=all) before anything acts on it; the state holds it as *pending* meanwhile (requests
//! meeting a pending change get CONCURRENT_TRANSACTIONS). Once written, [`Txns::complete`]
//! makes it the state; if the write failed, [`Txns::abandon`] drops it. A `PrepareCommit` or
//! `PrepareAbort` written starts the markers: the broker sends them to every partition of the
//! transaction ([`Txns::marker_written`] for each one acknowledged) and, when none is left,
//! writes the `CompleteCommit`/`CompleteAbort` transit this returns. A coordinator that loads
//! its partition finishes the prepared transactions it finds the same way.
//!
//! Transaction versions (KIP-890): with TV2 (EndTxn v5+, AddPartitionsToTxn v4+ from a broker,
//! Produce v12+) every transaction ends with an epoch bump and a retried EndTxn is recognised
//! by the epoch; with TV0/1 the epoch changes only on InitProducerId and fencing.

use std::collections::{BTreeMap, BTreeSet};

/// A topic partition named in a transaction.
pub type TopicPartition = (String, i32);

/// Kafka's `TransactionState`, with its id in `__transaction_state` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        (0..=7)
            .filter_map(TxnState::from_id)
            .find(|s| s.name() == name)
    }

    /// Whether `self` may follow `from` (Kafka's valid previous states; PrepareAbort after
    /// Empty or a completed transaction is TV2's empty abort).
    fn may_follow(self, from: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(from, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => from == Ongoing,
            PrepareAbort => matches!(
                from,
                Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort
            ),
            CompleteCommit => from == PrepareCommit,
            CompleteAbort => from == PrepareAbort,
            Dead => matches!(from, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => from == Ongoing,
        }
    }

    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// Kafka's transaction version (`transaction.version` feature level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TxnVersion {
    #[default]
    V0,
    V1,
    /// KIP-890 part 2: an epoch bump per transaction.
    V2,
}

impl TxnVersion {
    pub fn level(self) -> i16 {
        match self {
            TxnVersion::V0 => 0,
            TxnVersion::V1 => 1,
            TxnVersion::V2 => 2,
        }
    }

    pub fn from_level(level: i16) -> TxnVersion {
        match level {
            i16::MIN..=0 => TxnVersion::V0,
            1 => TxnVersion::V1,
            _ => TxnVersion::V2,
        }
    }

    /// Whether each transaction ends with an epoch bump (KIP-890 part 2): its markers then
    /// carry an epoch above its records', which a partition checks strictly (KIP-1228).
    pub fn bumps_epoch(self) -> bool {
        self == TxnVersion::V2
    }
}

/// Kafka's `isEpochExhausted`: the epoch must be bumped once more at most.
pub const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

/// Why a coordinator request is refused (Kafka's error codes, mapped by the broker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("INVALID_REQUEST: an empty transactional id")]
    InvalidRequest,
    #[error("INVALID_TRANSACTION_TIMEOUT: {0} ms is not in 1..=transaction.max.timeout.ms")]
    InvalidTransactionTimeout(i32),
    #[error("CONCURRENT_TRANSACTIONS: a change of this transaction is in progress")]
    ConcurrentTransactions,
    #[error("INVALID_PRODUCER_ID_MAPPING: producer id {got} is not this transactional id's")]
    InvalidProducerIdMapping { got: i64 },
    #[error("PRODUCER_FENCED: epoch {got} is not the current {current}")]
    ProducerFenced { got: i16, current: i16 },
    #[error("INVALID_TXN_STATE: {0}")]
    InvalidTxnState(&'static str),
    #[error("TRANSACTION_ABORTABLE: the partition is not in the transaction")]
    TransactionAbortable,
    /// A producer-id rotation needed an id and none could be had.
    #[error("COORDINATOR_NOT_AVAILABLE: no producer id could be allocated")]
    CoordinatorNotAvailable,
}

/// One transactional id's state (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    /// The producer id before the last change (Kafka keeps it for retries across a rotation).
    pub prev_producer_id: i64,
    /// TV2: the producer id the transaction completes with after the epoch ran out.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (-1: none kept): a retried InitProducerId or EndTxn of
    /// the producer that asked for the bump is recognised by it.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the transaction started (-1: none open).
    pub start_ms: i64,
    pub last_update_ms: i64,
    pub client_version: TxnVersion,
}

/// A change decided and to be written before it takes effect: the whole new state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transit {
    pub transactional_id: String,
    pub to: TxnMetadata,
}

/// A transactional id's entry: its state and the change being written, if any.
#[derive(Debug, Clone)]
struct Entry {
    meta: TxnMetadata,
    pending: Option<TxnState>,
}

/// The answer to InitProducerId, once its transit is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// What a request decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<T> {
    /// Answer at once; nothing to write.
    Answer(T),
    /// Write this transit, then ([`Txns::complete`]) answer `T`.
    Write(Transit, T),
}

/// What an ongoing transaction met in InitProducerId or its timeout: its producer epoch is
/// fenced and it is aborted. Write the `PrepareAbort` transit; the InitProducerId caller is
/// answered CONCURRENT_TRANSACTIONS and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedAbort(pub Transit);

/// Settings of the coordinator that decide answers.
#[derive(Debug, Clone, Copy)]
pub struct TxnSettings {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// The cluster's `transaction.version`: coordinator-started aborts use it.
    pub cluster_version: TxnVersion,
}

/// The transactional ids of one `__transaction_state` partition this coordinator owns.
#[derive(Debug, Clone, Default)]
pub struct Txns {
    entries: BTreeMap<String, Entry>,
}

/// The outcome of InitProducerId's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitProducerId {
    /// Write the `Empty` transit, then answer its producer id and epoch.
    Write(Transit, ProducerIdAndEpoch),
    /// An ongoing transaction is fenced and aborted first: write this, answer
    /// CONCURRENT_TRANSACTIONS.
    FenceOngoing(FencedAbort),
}

impl Txns {
    /// Replays one `__transaction_state` record (in offset order; `None`: a tombstone).
    pub fn load(&mut self, transactional_id: &str, value: Option<TxnMetadata>) {
        match value {
            None => {
                self.entries.remove(transactional_id);
            }
            Some(meta) => {
                self.entries.insert(
                    transactional_id.to_string(),
                    Entry {
                        meta: TxnMetadata {
                            last_producer_epoch: -1,
                            ..meta
                        },
                        pending: None,
                    },
                );
            }
        }
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.entries
            .get(transactional_id)
            .filter(|e| e.meta.state != TxnState::Dead)
            .map(|e| &e.meta)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &TxnMetadata)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.meta.state != TxnState::Dead)
            .map(|(k, e)| (k.as_str(), &e.meta))
    }

    fn pending_transit(&mut self, id: &str, mut to: TxnMetadata) -> Transit {
        let entry = self.entries.get_mut(id).expect("an entry exists");
        // Kafka's transit: the previous producer id is the one before this change.
        to.prev_producer_id = entry.meta.producer_id;
        debug_assert!(entry.pending.is_none(), "one change at a time");
        debug_assert!(
            to.state == TxnState::PrepareEpochFence || to.state.may_follow(entry.meta.state),
            "{:?} after {:?}",
            to.state,
            entry.meta.state
        );
        entry.pending = Some(to.state);
        Transit {
            transactional_id: id.to_string(),
            to,
        }
    }

    /// The transit was written: it is the state now (a `Dead` one, written as a tombstone,
    /// removes the id).
    pub fn complete(&mut self, transit: &Transit) {
        if transit.to.state == TxnState::Dead {
            self.entries.remove(&transit.transactional_id);
        } else if let Some(entry) = self.entries.get_mut(&transit.transactional_id) {
            entry.meta = transit.to.clone();
            entry.pending = None;
        }
    }

    /// The transit could not be written: the change is dropped. The state keeps the epoch it
    /// had, so a fence whose abort was not written bumps it again next time (Kafka bumps its
    /// in-memory epoch before the write and remembers the failure; the epochs come out equal).
    pub fn abandon(&mut self, transit: &Transit) {
        if let Some(entry) = self.entries.get_mut(&transit.transactional_id) {
            entry.pending = None;
        }
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): `expected` is
    /// KIP-360's (producer id, epoch) of a producer recovering, `new_producer_id` allocates.
    pub fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
        now_ms: i64,
        settings: TxnSettings,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Result<InitProducerId, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > settings.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout(timeout_ms));
        }
        if !self.entries.contains_key(id) {
            let pid = new_producer_id().ok_or(TxnError::CoordinatorNotAvailable)?;
            self.entries.insert(
                id.to_string(),
                Entry {
                    meta: TxnMetadata {
                        producer_id: pid,
                        prev_producer_id: -1,
                        next_producer_id: -1,
                        producer_epoch: -1,
                        last_producer_epoch: -1,
                        timeout_ms,
                        state: TxnState::Empty,
                        partitions: BTreeSet::new(),
                        start_ms: -1,
                        last_update_ms: now_ms,
                        client_version: TxnVersion::V0,
                    },
                    pending: None,
                },
            );
        }
        let entry = &self.entries[id];
        if entry.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let m = entry.meta.clone();
        if let Some(e) = expected {
            let known = m.producer_epoch == -1
                || e.producer_id == m.producer_id
                || (e.producer_id == m.prev_producer_id && e.epoch >= EPOCH_EXHAUSTED);
            if !known {
                return Err(TxnError::ProducerFenced {
                    got: e.epoch,
                    current: m.producer_epoch,
                });
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let exhausted = m.producer_epoch >= EPOCH_EXHAUSTED;
                let to = if exhausted && expected.is_none_or(|e| e.epoch == m.producer_epoch) {
                    // Producer-id rotation: a new id at epoch 0.
                    let pid = new_producer_id().ok_or(TxnError::CoordinatorNotAvailable)?;
                    TxnMetadata {
                        producer_id: pid,
                        prev_producer_id: m.producer_id,
                        producer_epoch: 0,
                        last_producer_epoch: if expected.is_some() {
                            m.producer_epoch
                        } else {
                            -1
                        },
                        ..empty_from(&m, timeout_ms, now_ms)
                    }
                } else {
                    let (epoch, last) = match expected {
                        None => (m.producer_epoch + 1, -1),
                        Some(e) if m.producer_epoch == -1 || e.epoch == m.producer_epoch => {
                            (m.producer_epoch + 1, m.producer_epoch)
                        }
                        // A retry of the InitProducerId that made the last bump.
                        Some(e) if e.epoch == m.last_producer_epoch => {
                            (m.producer_epoch, m.last_producer_epoch)
                        }
                        Some(e) => {
                            return Err(TxnError::ProducerFenced {
                                got: e.epoch,
                                current: m.producer_epoch,
                            })
                        }
                    };
                    TxnMetadata {
                        prev_producer_id: m.producer_id,
                        producer_epoch: epoch,
                        last_producer_epoch: last,
                        ..empty_from(&m, timeout_ms, now_ms)
                    }
                };
                let answer = ProducerIdAndEpoch {
                    producer_id: to.producer_id,
                    epoch: to.producer_epoch,
                };
                Ok(InitProducerId::Write(self.pending_transit(id, to), answer))
            }
            TxnState::Ongoing => {
                let abort = self.fence_and_abort(id, now_ms, settings.cluster_version)?;
                Ok(InitProducerId::FenceOngoing(abort))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::InvalidTxnState(
                "the transactional id is being removed",
            )),
        }
    }

    /// Fences the producer epoch of an ongoing transaction and aborts it (InitProducerId of a
    /// new producer instance, or the transaction timed out): the `PrepareAbort` transit at a
    /// bumped epoch, so the old producer's epoch is refused from then on.
    fn fence_and_abort(
        &mut self,
        id: &str,
        now_ms: i64,
        version: TxnVersion,
    ) -> Result<FencedAbort, TxnError> {
        let m = self.entries[id].meta.clone();
        if m.producer_epoch == i16::MAX {
            return Err(TxnError::InvalidTxnState(
                "the producer epoch cannot be fenced",
            ));
        }
        let to = if version.bumps_epoch() {
            // TV2: the abort itself bumps the epoch once.
            TxnMetadata {
                producer_epoch: m.producer_epoch + 1,
                last_producer_epoch: m.producer_epoch,
                state: TxnState::PrepareAbort,
                last_update_ms: now_ms,
                client_version: version,
                ..m
            }
        } else {
            TxnMetadata {
                producer_epoch: m.producer_epoch + 1,
                last_producer_epoch: -1,
                state: TxnState::PrepareAbort,
                last_update_ms: now_ms,
                client_version: version,
                ..m
            }
        };
        Ok(FencedAbort(self.pending_transit(id, to)))
    }

    /// Every ongoing transaction started more than its timeout before `now_ms`, fenced and
    /// aborted (Kafka's `abortTimedOutTransactions`).
    pub fn abort_timed_out(&mut self, now_ms: i64, settings: TxnSettings) -> Vec<FencedAbort> {
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.pending.is_none()
                    && e.meta.state == TxnState::Ongoing
                    && e.meta.start_ms + i64::from(e.meta.timeout_ms) < now_ms
            })
            .map(|(k, _)| k.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                self.fence_and_abort(&id, now_ms, settings.cluster_version)
                    .ok()
            })
            .collect()
    }

    /// Every transactional id with no transaction open or completing whose state last changed
    /// `expiration_ms` or more before `now_ms`, as the `Dead` transit the broker writes as a
    /// tombstone (Kafka's `transactional.id.expiration.ms`, `removeExpiredTransactionalIds`).
    /// A producer using an id again after that gets a new producer id.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<Transit> {
        let due: Vec<(String, TxnMetadata)> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.pending.is_none()
                    && matches!(
                        e.meta.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    )
                    && e.meta.last_update_ms <= now_ms.saturating_sub(expiration_ms)
            })
            .map(|(k, e)| (k.clone(), e.meta.clone()))
            .collect();
        due.into_iter()
            .map(|(id, m)| {
                let to = TxnMetadata {
                    state: TxnState::Dead,
                    last_update_ms: now_ms,
                    ..m
                };
                self.pending_transit(&id, to)
            })
            .collect()
    }

    /// The checks AddPartitionsToTxn makes, in Kafka's order; `while_pending`: whether a change
    /// being written refuses it (the verify-only check does not look).
    fn checked(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        while_pending: bool,
    ) -> Result<&TxnMetadata, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let entry = self
            .entries
            .get(id)
            .ok_or(TxnError::InvalidProducerIdMapping { got: producer_id })?;
        if while_pending && entry.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let m = &entry.meta;
        if producer_id != m.producer_id {
            return Err(TxnError::InvalidProducerIdMapping { got: producer_id });
        }
        if epoch != m.producer_epoch {
            return Err(TxnError::ProducerFenced {
                got: epoch,
                current: m.producer_epoch,
            });
        }
        if m.state.is_prepare() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(m)
    }

    /// AddPartitionsToTxn (a client's, v0–3; a broker's adding for TV2 produce, v4+), and
    /// AddOffsetsToTxn with the group's `__consumer_offsets` partition.
    pub fn add_partitions(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        version: TxnVersion,
        now_ms: i64,
    ) -> Result<Decision<()>, TxnError> {
        let m = self.checked(id, producer_id, epoch, true)?.clone();
        if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
            return Ok(Decision::Answer(()));
        }
        let starts = matches!(
            m.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        );
        let mut all = m.partitions.clone();
        all.extend(partitions.iter().cloned());
        let to = TxnMetadata {
            state: TxnState::Ongoing,
            partitions: all,
            start_ms: if starts { now_ms } else { m.start_ms },
            last_update_ms: now_ms,
            client_version: version,
            ..m
        };
        Ok(Decision::Write(self.pending_transit(id, to), ()))
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1: a partition leader asking
    /// whether a transactional produce's partition is in the transaction): nothing written.
    pub fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, Result<(), TxnError>)> {
        let found = self.checked(id, producer_id, epoch, false);
        partitions
            .iter()
            .map(|p| {
                let r = match &found {
                    Err(e) => Err(*e),
                    Ok(m) if m.partitions.contains(p) => Ok(()),
                    Ok(_) => Err(TxnError::TransactionAbortable),
                };
                (p.clone(), r)
            })
            .collect()
    }

    /// EndTxn (Kafka's `endTransaction`): `version` V2 for EndTxn v5+. Answers the producer id
    /// and epoch the producer goes on with (EndTxn v5's fields; TV1 answers none).
    pub fn end_txn(
        &mut self,
        id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        version: TxnVersion,
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Result<Decision<Option<ProducerIdAndEpoch>>, TxnError> {
        let ProducerIdAndEpoch { producer_id, epoch } = producer;
        if id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let entry = self
            .entries
            .get(id)
            .ok_or(TxnError::InvalidProducerIdMapping { got: producer_id })?;
        if entry.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let m = entry.meta.clone();
        let wanted = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        let done = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        let fenced = || TxnError::ProducerFenced {
            got: epoch,
            current: m.producer_epoch,
        };
        if !version.bumps_epoch() {
            if producer_id != m.producer_id {
                return Err(TxnError::InvalidProducerIdMapping { got: producer_id });
            }
            if epoch != m.producer_epoch {
                return Err(fenced());
            }
            return match m.state {
                TxnState::Ongoing => {
                    let to = TxnMetadata {
                        state: wanted,
                        last_update_ms: now_ms,
                        client_version: version,
                        ..m
                    };
                    Ok(Decision::Write(self.pending_transit(id, to), None))
                }
                s if s == done => Ok(Decision::Answer(None)),
                s if s == wanted => Err(TxnError::ConcurrentTransactions),
                TxnState::Empty => Err(TxnError::InvalidTxnState("no transaction is open")),
                _ => Err(TxnError::InvalidTxnState(
                    "the transaction ended the other way",
                )),
            };
        }
        // TV2: each transaction ends with an epoch bump; a retry comes with the epoch before it.
        let retry_on_overflow =
            m.prev_producer_id == producer_id && epoch == EPOCH_EXHAUSTED && m.producer_epoch == 0;
        let retry_on_bump = i32::from(m.producer_epoch) == i32::from(epoch) + 1;
        if producer_id != m.producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping { got: producer_id });
        }
        // The producer's next EndTxn (its epoch the bumped one) while the last transaction's
        // markers are still going out: it waits, it is not fenced (Kafka's KAFKA-18464 — there
        // the completion is pending meanwhile; here the markers are sent from the prepared
        // state). A TV2 client that begins, fails every produce and aborts at once gets here.
        if m.state.is_prepare() && epoch == m.producer_epoch && producer_id == m.producer_id {
            return Err(TxnError::ConcurrentTransactions);
        }
        let valid_epoch = match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || epoch == m.producer_epoch
            }
            _ => epoch == m.producer_epoch,
        };
        if !valid_epoch {
            return Err(fenced());
        }
        let retry = retry_on_bump || retry_on_overflow;
        let current = Some(ProducerIdAndEpoch {
            producer_id: m.producer_id,
            epoch: m.producer_epoch,
        });
        match (m.state, retry) {
            (TxnState::CompleteCommit, true) if commit => return Ok(Decision::Answer(current)),
            (TxnState::CompleteAbort, true) if !commit => return Ok(Decision::Answer(current)),
            (TxnState::PrepareCommit, _) if commit => return Err(TxnError::ConcurrentTransactions),
            (TxnState::PrepareAbort, _) if !commit => return Err(TxnError::ConcurrentTransactions),
            // A commit at the epoch before an abort's bump: a client retrying its own EndTxn
            // always asks the same way, so this abort was the coordinator's (the transaction
            // timed out) and the commit lost the race — the producer is fenced, which clients
            // recover from, not INVALID_TXN_STATE, which they treat as fatal (KAFKA-20785).
            // While the abort's markers go out it waits, as any EndTxn then.
            (TxnState::PrepareAbort, true) => return Err(TxnError::ConcurrentTransactions),
            (TxnState::CompleteAbort, true) => return Err(fenced()),
            (TxnState::Ongoing, false) => {}
            // TV2's empty abort: nothing open, still an epoch bump.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false)
                if !commit => {}
            _ => return Err(TxnError::InvalidTxnState("no transaction to end that way")),
        }
        if m.producer_epoch == i16::MAX {
            return Err(fenced());
        }
        let next_producer_id = if m.producer_epoch >= EPOCH_EXHAUSTED {
            new_producer_id().ok_or(TxnError::CoordinatorNotAvailable)?
        } else {
            -1
        };
        let empty_abort = m.state != TxnState::Ongoing;
        let to = TxnMetadata {
            producer_epoch: m.producer_epoch + 1,
            last_producer_epoch: m.producer_epoch,
            next_producer_id,
            state: wanted,
            start_ms: if empty_abort { now_ms } else { m.start_ms },
            last_update_ms: now_ms,
            client_version: version,
            ..m
        };
        let after = if next_producer_id >= 0 {
            ProducerIdAndEpoch {
                producer_id: next_producer_id,
                epoch: 0,
            }
        } else {
            ProducerIdAndEpoch {
                producer_id: to.producer_id,
                epoch: to.producer_epoch,
            }
        };
        Ok(Decision::Write(self.pending_transit(id, to), Some(after)))
    }

    /// The partitions of a prepared transaction whose markers are not acknowledged yet, with
    /// the producer id and epoch and the result the markers carry.
    pub fn markers(&self, id: &str) -> Option<Markers> {
        let e = self.entries.get(id)?;
        let commit = match e.meta.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return None,
        };
        Some(Markers {
            producer_id: e.meta.producer_id,
            epoch: e.meta.producer_epoch,
            commit,
            version: e.meta.client_version,
            partitions: e.meta.partitions.iter().cloned().collect(),
        })
    }

    /// A partition's marker was written (or the partition is gone). When none is left, the
    /// `CompleteCommit`/`CompleteAbort` transit to write ([`Txns::completion`]).
    pub fn marker_written(
        &mut self,
        id: &str,
        partition: &TopicPartition,
        now_ms: i64,
    ) -> Option<Transit> {
        let entry = self.entries.get_mut(id)?;
        if !entry.meta.state.is_prepare() || entry.pending.is_some() {
            return None;
        }
        entry.meta.partitions.remove(partition);
        self.completion(id, now_ms)
    }

    /// The `CompleteCommit`/`CompleteAbort` transit of a prepared transaction with no marker
    /// left to write (all acknowledged, or none to send: TV2's empty abort), if it is one.
    pub fn completion(&mut self, id: &str, now_ms: i64) -> Option<Transit> {
        let entry = self.entries.get(id)?;
        if !entry.meta.state.is_prepare()
            || entry.pending.is_some()
            || !entry.meta.partitions.is_empty()
        {
            return None;
        }
        let m = entry.meta.clone();
        let (producer_id, epoch) = if m.client_version.bumps_epoch() && m.next_producer_id >= 0 {
            (m.next_producer_id, 0)
        } else {
            (m.producer_id, m.producer_epoch)
        };
        let to = TxnMetadata {
            producer_id,
            producer_epoch: epoch,
            next_producer_id: -1,
            state: if m.state == TxnState::PrepareCommit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            },
            partitions: BTreeSet::new(),
            last_update_ms: now_ms,
            ..m
        };
        Some(self.pending_transit(id, to))
    }
}

/// The markers a prepared transaction sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Markers {
    pub producer_id: i64,
    pub epoch: i16,
    pub commit: bool,
    /// The transaction's version, which the markers carry (WriteTxnMarkers v2, KIP-1228).
    pub version: TxnVersion,
    pub partitions: Vec<TopicPartition>,
}

/// The `Empty` state after `m`, for a new producer instance.
fn empty_from(m: &TxnMetadata, timeout_ms: i32, now_ms: i64) -> TxnMetadata {
    TxnMetadata {
        timeout_ms,
        state: TxnState::Empty,
        partitions: BTreeSet::new(),
        start_ms: -1,
        last_update_ms: now_ms,
        ..m.clone()
    }
}

/// Kafka's `partitionFor`: `abs(String.hashCode) % partitions`, Java's hash over UTF-16.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let h = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let a = if h == i32::MIN { 0 } else { h.abs() };
    a % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: TxnSettings = TxnSettings {
        max_timeout_ms: 900_000,
        cluster_version: TxnVersion::V2,
    };

    fn ids() -> impl FnMut() -> Option<i64> {
        let mut next = 1000;
        move || {
            next += 1;
            Some(next)
        }
    }

    fn pe(producer_id: i64, epoch: i16) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch { producer_id, epoch }
    }

    /// AddPartitionsToTxn that writes its transit, written.
    fn add(
        t: &mut Txns,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        version: TxnVersion,
        now_ms: i64,
    ) {
        let d = t
            .add_partitions(id, producer_id, epoch, partitions, version, now_ms)
            .unwrap();
        write(t, d);
    }

    fn tp(t: &str, p: i32) -> TopicPartition {
        (t.to_string(), p)
    }

    /// InitProducerId written: the producer's id and epoch.
    fn init(
        t: &mut Txns,
        alloc: &mut dyn FnMut() -> Option<i64>,
        expected: Option<ProducerIdAndEpoch>,
    ) -> ProducerIdAndEpoch {
        match t
            .init_producer_id("tx", 60_000, expected, 0, SETTINGS, alloc)
            .unwrap()
        {
            InitProducerId::Write(transit, answer) => {
                t.complete(&transit);
                answer
            }
            other => panic!("{other:?}"),
        }
    }

    fn write<T: std::fmt::Debug>(t: &mut Txns, d: Decision<T>) -> T {
        match d {
            Decision::Write(transit, answer) => {
                t.complete(&transit);
                answer
            }
            other => panic!("expected a write: {other:?}"),
        }
    }

    /// Acknowledges every marker of a prepared transaction and writes its completion.
    fn markers_done(t: &mut Txns) {
        let m = t.markers("tx").expect("prepared");
        let mut last = t.completion("tx", 5);
        for p in &m.partitions {
            assert!(last.is_none(), "completed before its last marker");
            last = t.marker_written("tx", p, 5);
        }
        t.complete(&last.expect("complete transit after the last marker"));
    }

    #[test]
    fn a_tv1_transaction_commits_and_a_retried_commit_is_answered() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        let p = init(&mut t, &mut alloc, None);
        assert_eq!(p, pe(1001, 0));
        add(
            &mut t,
            "tx",
            1001,
            0,
            &[tp("a", 0), tp("a", 1)],
            TxnVersion::V0,
            1,
        );
        assert_eq!(t.get("tx").unwrap().state, TxnState::Ongoing);
        assert_eq!(t.get("tx").unwrap().start_ms, 1);
        // Adding what is there already writes nothing.
        assert_eq!(
            t.add_partitions("tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 2),
            Ok(Decision::Answer(()))
        );
        let d = t
            .end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 3, &mut alloc)
            .unwrap();
        let Decision::Write(transit, None) = d else {
            panic!("{d:?}")
        };
        // While the prepare is written, everything else waits.
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 3, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        t.complete(&transit);
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 3, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), false, TxnVersion::V0, 3, &mut alloc),
            Err(TxnError::InvalidTxnState(
                "the transaction ended the other way"
            ))
        );
        let m = t.markers("tx").unwrap();
        assert!(m.commit && m.epoch == 0 && m.partitions.len() == 2);
        markers_done(&mut t);
        let done = t.get("tx").unwrap();
        assert_eq!(
            (done.state, done.producer_epoch),
            (TxnState::CompleteCommit, 0)
        );
        assert!(done.partitions.is_empty());
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 6, &mut alloc),
            Ok(Decision::Answer(None))
        );
    }

    #[test]
    fn a_new_producer_instance_fences_the_ongoing_transaction_of_the_old_one() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 1);
        // The new instance: the ongoing transaction is aborted at a bumped epoch first.
        let r = t
            .init_producer_id("tx", 60_000, None, 2, SETTINGS, &mut alloc)
            .unwrap();
        let InitProducerId::FenceOngoing(FencedAbort(abort)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(
            (abort.to.state, abort.to.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        t.complete(&abort);
        assert!(matches!(
            t.init_producer_id("tx", 60_000, None, 3, SETTINGS, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        ));
        // The zombie cannot add or end anything any more.
        assert!(matches!(
            t.add_partitions("tx", 1001, 0, &[tp("a", 1)], TxnVersion::V0, 3),
            Err(TxnError::ProducerFenced { .. }) | Err(TxnError::ConcurrentTransactions)
        ));
        assert!(!t.markers("tx").unwrap().commit);
        markers_done(&mut t);
        let p = init(&mut t, &mut alloc, None);
        assert_eq!(p, pe(1001, 2));
        assert!(matches!(
            t.add_partitions("tx", 1001, 0, &[tp("a", 1)], TxnVersion::V0, 3),
            Err(TxnError::ProducerFenced { got: 0, current: 2 })
        ));
        assert!(matches!(
            t.end_txn("tx", pe(1001, 1), true, TxnVersion::V0, 3, &mut alloc),
            Err(TxnError::ProducerFenced { .. })
        ));
        assert!(matches!(
            t.add_partitions("tx", 999, 2, &[tp("a", 1)], TxnVersion::V0, 3),
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
    }

    #[test]
    fn tv2_bumps_the_epoch_per_transaction_and_recognises_retries() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V2, 1);
        let after = {
            let d = t
                .end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 2, &mut alloc)
                .unwrap();
            write(&mut t, d)
        };
        assert_eq!(after, Some(pe(1001, 1)));
        assert_eq!(
            t.markers("tx").unwrap().epoch,
            1,
            "markers carry the bumped epoch"
        );
        // A retry of the same EndTxn (the old epoch) while the markers go out, and after.
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 3, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        // The next transaction's abort (epoch 1, nothing produced) before the markers are
        // out: CONCURRENT_TRANSACTIONS, not PRODUCER_FENCED.
        assert_eq!(
            t.end_txn("tx", pe(1001, 1), false, TxnVersion::V2, 3, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        markers_done(&mut t);
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 4, &mut alloc),
            Ok(Decision::Answer(Some(pe(1001, 1))))
        );
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), false, TxnVersion::V2, 4, &mut alloc),
            Err(TxnError::InvalidTxnState("no transaction to end that way"))
        );
        // The next transaction at epoch 1; an abort with nothing open still bumps.
        let after = {
            let d = t
                .end_txn("tx", pe(1001, 1), false, TxnVersion::V2, 5, &mut alloc)
                .unwrap();
            write(&mut t, d)
        };
        assert_eq!(after, Some(pe(1001, 2)));
        markers_done(&mut t);
        assert!(matches!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 6, &mut alloc),
            Err(TxnError::ProducerFenced { .. })
        ));
    }

    #[test]
    fn an_exhausted_epoch_moves_to_a_new_producer_id() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        let mut meta = t.get("tx").unwrap().clone();
        meta.producer_epoch = EPOCH_EXHAUSTED;
        t.load("tx", Some(meta));
        let p = init(&mut t, &mut alloc, None);
        assert_eq!(p, pe(1002, 0));
        // TV2: the transaction that exhausts the epoch completes under a new producer id.
        let mut meta = t.get("tx").unwrap().clone();
        meta.producer_epoch = EPOCH_EXHAUSTED;
        t.load("tx", Some(meta));
        add(
            &mut t,
            "tx",
            1002,
            EPOCH_EXHAUSTED,
            &[tp("a", 0)],
            TxnVersion::V2,
            1,
        );
        let after = {
            let d = t
                .end_txn(
                    "tx",
                    pe(1002, EPOCH_EXHAUSTED),
                    true,
                    TxnVersion::V2,
                    2,
                    &mut alloc,
                )
                .unwrap();
            write(&mut t, d)
        };
        assert_eq!(after, Some(pe(1003, 0)));
        markers_done(&mut t);
        let m = t.get("tx").unwrap();
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.prev_producer_id),
            (1003, 0, 1002)
        );
        // The retry of that EndTxn with the old id and epoch is recognised.
        assert_eq!(
            t.end_txn(
                "tx",
                pe(1002, EPOCH_EXHAUSTED),
                true,
                TxnVersion::V2,
                3,
                &mut alloc
            ),
            Ok(Decision::Answer(Some(pe(1003, 0))))
        );
    }

    #[test]
    fn kip_360_recovery_bumps_once_and_a_retry_gets_the_same_epoch() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        let me = pe(1001, 0);
        let p = init(&mut t, &mut alloc, Some(me));
        assert_eq!(p.epoch, 1);
        assert_eq!(
            init(&mut t, &mut alloc, Some(me)).epoch,
            1,
            "a retry: no second bump"
        );
        let stranger = pe(77, 0);
        assert!(matches!(
            t.init_producer_id("tx", 60_000, Some(stranger), 0, SETTINGS, &mut alloc),
            Err(TxnError::ProducerFenced { .. })
        ));
        let stale = pe(1001, 5);
        assert!(matches!(
            t.init_producer_id("tx", 60_000, Some(stale), 0, SETTINGS, &mut alloc),
            Err(TxnError::ProducerFenced { .. })
        ));
    }

    #[test]
    fn a_fence_whose_abort_was_not_written_fences_again_at_a_bumped_epoch() {
        let tv1 = TxnSettings {
            cluster_version: TxnVersion::V0,
            ..SETTINGS
        };
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 1);
        for attempt in 0..2 {
            let r = t
                .init_producer_id("tx", 60_000, None, 2, tv1, &mut alloc)
                .unwrap();
            let InitProducerId::FenceOngoing(FencedAbort(abort)) = r else {
                panic!("{r:?}")
            };
            // Epoch 0 is the zombie's: every fence's abort is written above it.
            assert_eq!(abort.to.producer_epoch, 1, "attempt {attempt}");
            if attempt == 0 {
                t.abandon(&abort);
                assert_eq!(t.get("tx").unwrap().state, TxnState::Ongoing);
            } else {
                t.complete(&abort);
            }
        }
        assert!(matches!(
            t.add_partitions("tx", 1001, 0, &[tp("a", 1)], TxnVersion::V0, 3),
            Err(TxnError::ProducerFenced { .. }) | Err(TxnError::ConcurrentTransactions)
        ));
    }

    #[test]
    fn a_timed_out_transaction_is_fenced_and_aborted() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 1000);
        assert!(
            t.abort_timed_out(61_000, SETTINGS).is_empty(),
            "not past 60 s yet"
        );
        let aborts = t.abort_timed_out(61_001, SETTINGS);
        assert_eq!(aborts.len(), 1);
        assert_eq!(aborts[0].0.to.producer_epoch, 1);
        assert!(
            t.abort_timed_out(61_002, SETTINGS).is_empty(),
            "pending: once"
        );
        t.complete(&aborts[0].0);
        markers_done(&mut t);
        assert_eq!(t.get("tx").unwrap().state, TxnState::CompleteAbort);
        assert!(matches!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 62_000, &mut alloc),
            Err(TxnError::ProducerFenced { .. })
        ));
    }

    /// TV2: the coordinator aborts a timed-out transaction (one epoch bump) while the
    /// producer's commit is on its way; the commit arrives at the epoch before the bump, which
    /// looks like a retry. It waits while the abort's markers go out and is then fenced
    /// (Kafka's answer since KAFKA-20785), never INVALID_TXN_STATE; a retried abort is fine.
    #[test]
    fn a_commit_racing_a_timeout_abort_is_fenced_at_transaction_version_2() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V2, 1000);
        let aborts = t.abort_timed_out(61_001, SETTINGS);
        assert_eq!(aborts[0].0.to.producer_epoch, 1, "one bump");
        t.complete(&aborts[0].0);
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 61_002, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        markers_done(&mut t);
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V2, 61_003, &mut alloc),
            Err(TxnError::ProducerFenced { got: 0, current: 1 })
        );
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), false, TxnVersion::V2, 61_004, &mut alloc),
            Ok(Decision::Answer(Some(pe(1001, 1))))
        );
    }

    #[test]
    fn an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id() {
        const EXPIRATION: i64 = 604_800_000;
        let (mut t, mut alloc) = (Txns::default(), ids());
        let first = init(&mut t, &mut alloc, None);
        assert!(
            t.expire(EXPIRATION - 1, EXPIRATION).is_empty(),
            "not idle long enough"
        );
        let dead = t.expire(EXPIRATION, EXPIRATION);
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].to.state, TxnState::Dead);
        assert!(t.expire(EXPIRATION, EXPIRATION).is_empty(), "pending: once");
        assert_eq!(
            t.init_producer_id("tx", 60_000, None, EXPIRATION, SETTINGS, &mut alloc),
            Err(TxnError::ConcurrentTransactions)
        );
        // Not written: the id stays and expires again next time.
        t.abandon(&dead[0]);
        assert!(t.get("tx").is_some());
        let dead = t.expire(EXPIRATION + 1, EXPIRATION);
        t.complete(&dead[0]);
        assert!(t.get("tx").is_none() && t.iter().next().is_none());
        let again = init(&mut t, &mut alloc, None);
        assert_ne!(again.producer_id, first.producer_id);
        assert_eq!(again.epoch, 0);
        // An open transaction does not expire, however old.
        add(
            &mut t,
            "tx",
            again.producer_id,
            0,
            &[tp("a", 0)],
            TxnVersion::V0,
            1,
        );
        assert!(t.expire(i64::MAX, EXPIRATION).is_empty());
    }

    #[test]
    fn verification_answers_per_partition_and_writes_nothing() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        init(&mut t, &mut alloc, None);
        add(&mut t, "tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 1);
        let r = t.verify_partitions("tx", 1001, 0, &[tp("a", 0), tp("a", 1)]);
        assert_eq!(
            r,
            vec![
                (tp("a", 0), Ok(())),
                (tp("a", 1), Err(TxnError::TransactionAbortable))
            ]
        );
        let r = t.verify_partitions("tx", 1001, 3, &[tp("a", 0)]);
        assert!(matches!(r[0].1, Err(TxnError::ProducerFenced { .. })));
        let r = t.verify_partitions("nope", 1001, 0, &[tp("a", 0)]);
        assert!(matches!(
            r[0].1,
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
    }

    #[test]
    fn bad_requests_are_refused_before_anything_changes() {
        let (mut t, mut alloc) = (Txns::default(), ids());
        assert_eq!(
            t.init_producer_id("", 1, None, 0, SETTINGS, &mut alloc),
            Err(TxnError::InvalidRequest)
        );
        assert_eq!(
            t.init_producer_id("tx", 0, None, 0, SETTINGS, &mut alloc),
            Err(TxnError::InvalidTransactionTimeout(0))
        );
        assert_eq!(
            t.init_producer_id("tx", 900_001, None, 0, SETTINGS, &mut alloc),
            Err(TxnError::InvalidTransactionTimeout(900_001))
        );
        assert!(t.get("tx").is_none());
        init(&mut t, &mut alloc, None);
        assert_eq!(
            t.end_txn("tx", pe(1001, 0), true, TxnVersion::V0, 0, &mut alloc),
            Err(TxnError::InvalidTxnState("no transaction is open"))
        );
        // A write that failed leaves the state as it was.
        let Decision::Write(transit, ()) = t
            .add_partitions("tx", 1001, 0, &[tp("a", 0)], TxnVersion::V0, 1)
            .unwrap()
        else {
            panic!()
        };
        t.abandon(&transit);
        assert_eq!(t.get("tx").unwrap().state, TxnState::Empty);
    }

    #[test]
    fn states_round_trip_their_ids_and_names() {
        for id in 0..=7 {
            let s = TxnState::from_id(id).unwrap();
            assert_eq!(s.id(), id);
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
    }

    #[test]
    fn the_coordinator_partition_is_javas_string_hash() {
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        assert_eq!(partition_for("", 50), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Kafka's abs makes it 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }
}
