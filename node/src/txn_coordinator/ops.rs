//! The client requests the coordinator decides: InitProducerId with a transactional id,
//! AddPartitionsToTxn, EndTxn. Each decides with the state machine, writes the transit, and
//! answers once it is written; an EndTxn (or a fence) then has its markers sent.

use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::ResponseError;
use transactions::coordinator::{Decision, FencedAbort, InitProducerId, ProducerIdAndEpoch};
use transactions::{TxnError, TxnVersion, Txns};

use super::{markers, owner, refusal, settings, write, TxnHost};
use crate::limits::TXN_CONCURRENT_WAIT_MAX;

/// Kafka's error for a refusal, for a request of `version` whose first version knowing
/// PRODUCER_FENCED is `fenced_since` (older clients get INVALID_PRODUCER_EPOCH).
pub fn txn_error(e: ResponseError, version: i16, fenced_since: i16) -> ResponseError {
    if e == ResponseError::ProducerFenced && version < fenced_since {
        ResponseError::InvalidProducerEpoch
    } else {
        e
    }
}

/// InitProducerId with a transactional id: a producer id and a bumped epoch for the new
/// producer instance (KIP-360: `expected` is the id and epoch of an instance recovering). An
/// open transaction of an older instance is fenced and aborted first: CONCURRENT_TRANSACTIONS,
/// and the client retries.
pub async fn init_producer_id(
    host: Rc<dyn TxnHost>,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<ProducerIdAndEpoch>,
    now: i64,
) -> Result<ProducerIdAndEpoch, ResponseError> {
    let (p, epoch) = owner(&*host, transactional_id)?;
    let settings = settings(&*host);
    let mut allocate = || Some(host.new_producer_id());
    let decided = host
        .txn_coordinator()
        .with(p, epoch, |txns| {
            txns.init_producer_id(
                transactional_id,
                timeout_ms,
                expected,
                now,
                settings,
                &mut allocate,
            )
        })
        .ok_or(ResponseError::NotCoordinator)?
        .map_err(refusal)?;
    match decided {
        InitProducerId::Write(transit, answer) => {
            write(&*host, p, epoch, &transit, now).await?;
            Ok(answer)
        }
        InitProducerId::FenceOngoing(FencedAbort(transit)) => {
            write(&*host, p, epoch, &transit, now).await?;
            markers::spawn(host, p, epoch, transactional_id.to_owned());
            Err(ResponseError::ConcurrentTransactions)
        }
    }
}

/// AddPartitionsToTxn: the partitions join the transaction, which starts with the first of
/// them — a client's (v0-3, `version` V0) or a partition leader's for a transaction version 2
/// produce (v4+ without `verify_only`, V2).
///
/// Met while the previous transaction completes (its markers and CompleteCommit being written:
/// CONCURRENT_TRANSACTIONS), the request is held until that settles, for up to
/// [`TXN_CONCURRENT_WAIT_MAX`], and decided again: a producer starting its next transaction at
/// once gets its answer a few milliseconds later instead of a refusal and its client's backoff
/// (20 ms for librdkafka's AddPartitionsToTxn, 100 ms for a Java produce).
pub async fn add_partitions(
    host: Rc<dyn TxnHost>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    partitions: &[(String, i32)],
    version: TxnVersion,
    now: i64,
) -> Result<(), ResponseError> {
    let (p, epoch) = owner(&*host, transactional_id)?;
    let (decided, now) = held(&*host, p, epoch, now, |txns, now| {
        txns.add_partitions(
            transactional_id,
            producer.producer_id,
            producer.epoch,
            partitions,
            version,
            now,
        )
    })
    .await?;
    match decided {
        Decision::Answer(()) => Ok(()),
        Decision::Write(transit, ()) => write(&*host, p, epoch, &transit, now).await,
    }
}

/// Decides with `decide` on partition `p`'s state; a decision of CONCURRENT_TRANSACTIONS (the
/// producer's previous transaction completing, or a change being written) is taken again each
/// time a transit settles, for up to [`TXN_CONCURRENT_WAIT_MAX`], before it is the answer.
/// Returns the decision with the time it was taken at.
async fn held<T>(
    host: &dyn TxnHost,
    p: i32,
    epoch: i32,
    mut now: i64,
    mut decide: impl FnMut(&mut Txns, i64) -> Result<T, TxnError>,
) -> Result<(T, i64), ResponseError> {
    let deadline = Instant::now() + TXN_CONCURRENT_WAIT_MAX;
    loop {
        let c = host.txn_coordinator();
        let seen = c.settled.generation();
        let decided = c
            .with(p, epoch, |txns| decide(txns, now))
            .ok_or(ResponseError::NotCoordinator)?;
        let now_instant = Instant::now();
        match decided {
            Err(TxnError::ConcurrentTransactions) if now_instant < deadline => {
                let settled = c.settled.changed(seen);
                let expired = glommio::timer::sleep(deadline - now_instant);
                futures_lite::future::or(settled, expired).await;
                now = crate::shard::now_ms();
            }
            Err(e) => return Err(refusal(e)),
            Ok(d) => return Ok((d, now)),
        }
    }
}

/// Each partition's answer to a verification: `None` when it is in the transaction.
pub type Verdicts = Vec<((String, i32), Option<ResponseError>)>;

/// What a partition leader (or group coordinator) asks of the coordinator (KIP-890).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnCheck {
    /// Whether the partitions are in the ongoing transaction (nothing written).
    Verify,
    /// Add them to it (transaction version 2), written before the answer.
    Add,
}

/// AddPartitionsToTxn v4+ as the coordinator answers it, whether it came over the wire or from
/// a leader on this shard: [`verify_partitions`] or [`add_partitions`] at transaction version
/// 2, every partition's verdict.
pub async fn check_partitions(
    host: Rc<dyn TxnHost>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    partitions: Vec<(String, i32)>,
    check: TxnCheck,
) -> Verdicts {
    let refused = match check {
        TxnCheck::Verify => {
            match verify_partitions(&*host, transactional_id, producer, &partitions) {
                Ok(verdicts) => return verdicts,
                Err(e) => Some(e),
            }
        }
        TxnCheck::Add => {
            let now = crate::shard::now_ms();
            add_partitions(
                host,
                transactional_id,
                producer,
                &partitions,
                TxnVersion::V2,
                now,
            )
            .await
            .err()
        }
    };
    partitions.into_iter().map(|tp| (tp, refused)).collect()
}

/// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1, a partition leader asking before
/// a transactional batch may start a transaction there): each partition's answer — none when
/// it is in the producer's ongoing transaction, TRANSACTION_ABORTABLE when not;
/// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED or CONCURRENT_TRANSACTIONS for all of them
/// (Kafka's `handleVerifyPartitionsInTransaction`). Nothing is written.
pub fn verify_partitions(
    host: &dyn TxnHost,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    partitions: &[(String, i32)],
) -> Result<Verdicts, ResponseError> {
    let (p, epoch) = owner(host, transactional_id)?;
    let answers = host
        .txn_coordinator()
        .with(p, epoch, |txns| {
            txns.verify_partitions(
                transactional_id,
                producer.producer_id,
                producer.epoch,
                partitions,
            )
        })
        .ok_or(ResponseError::NotCoordinator)?;
    Ok(answers
        .into_iter()
        .map(|(tp, r)| (tp, r.err().map(refusal)))
        .collect())
}

/// AddOffsetsToTxn: the `__consumer_offsets` partition of `group` (one of `offsets_partitions`)
/// joins the transaction, so that its TxnOffsetCommit records get the transaction's marker.
pub async fn add_offsets(
    host: Rc<dyn TxnHost>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    group: &str,
    offsets_partitions: i32,
    now: i64,
) -> Result<(), ResponseError> {
    let p = crate::group_coordinator::partition_for(group, offsets_partitions);
    let partition = (crate::metadata::OFFSETS_TOPIC.to_owned(), p);
    add_partitions(
        host,
        transactional_id,
        producer,
        &[partition],
        TxnVersion::V0,
        now,
    )
    .await
}

/// EndTxn: the transaction is prepared to commit or abort, answered once that is written; its
/// markers are then sent and its completion written in the background (the producer's next
/// transaction waits on CONCURRENT_TRANSACTIONS until then). Met while the previous
/// transaction still completes (a TV2 producer ending an empty transaction, or an EndTxn
/// retried), it is held as an add is ([`held`]). With `version` V2 (EndTxn v5+)
/// the transaction ends with an epoch bump: the answer is the producer id and epoch the
/// producer goes on with.
pub async fn end_txn(
    host: Rc<dyn TxnHost>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    commit: bool,
    version: TxnVersion,
    now: i64,
) -> Result<Option<ProducerIdAndEpoch>, ResponseError> {
    let (p, epoch) = owner(&*host, transactional_id)?;
    let mut allocate = || Some(host.new_producer_id());
    let (decided, now) = held(&*host, p, epoch, now, |txns, now| {
        let decided = txns.end_txn(
            transactional_id,
            producer,
            commit,
            version,
            now,
            &mut allocate,
        );
        if let Err(e @ TxnError::InvalidTxnState(_)) = &decided {
            let state = txns
                .get(transactional_id)
                .map(|m| (m.state, m.producer_epoch));
            tracing::warn!(transactional_id, commit, producer_id = producer.producer_id, producer_epoch = producer.epoch, ?state, error = %e, "EndTxn refused");
        }
        decided
    })
    .await?;
    match decided {
        Decision::Answer(next) => Ok(next),
        Decision::Write(transit, next) => {
            write(&*host, p, epoch, &transit, now).await?;
            markers::spawn(host, p, epoch, transactional_id.to_owned());
            Ok(next)
        }
    }
}
