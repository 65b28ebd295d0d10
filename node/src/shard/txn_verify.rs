//! A partition leader's (or group coordinator's) calls to a transaction coordinator (KIP-890).
//! Part 1: before a client's transactional batch may start a transaction on a partition this
//! shard leads, the transactional id's coordinator confirms that the partition is in the
//! producer's ongoing transaction (AddPartitionsToTxn v5 with `verify_only`, over the
//! inter-broker listener; answered here directly when this shard is the coordinator). A batch
//! the coordinator does not confirm is refused, so a late or stray write never opens a
//! transaction no marker will close (a hanging transaction that holds the partition's last
//! stable offset back). Part 2 (transaction version 2: Produce v12+, TxnOffsetCommit v5+): the
//! same call without `verify_only` adds the partition to the transaction — the client sends no
//! AddPartitionsToTxn or AddOffsetsToTxn of its own.

use std::rc::Rc;

use futures_util::FutureExt;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use transactions::coordinator::ProducerIdAndEpoch;

use super::ShardCtx;
use crate::limits::TXN_VERIFY_CALL_TIMEOUT;
use crate::metadata::{Leader, Slot, TRANSACTION_STATE_TOPIC};
use crate::txn_coordinator::{self, TxnCheck, TxnHost, Verdicts};

impl ShardCtx {
    /// Asks `transactional_id`'s coordinator whether `partitions` are in the producer's
    /// ongoing transaction, or to add them ([`TxnCheck`]). A coordinator that cannot be found
    /// or reached answers every partition COORDINATOR_NOT_AVAILABLE or NETWORK_EXCEPTION
    /// (retriable).
    pub async fn check_in_transaction(
        self: &Rc<Self>,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: Vec<(String, i32)>,
        check: TxnCheck,
    ) -> Verdicts {
        let all = |e: ResponseError, partitions: Vec<(String, i32)>| -> Verdicts {
            partitions.into_iter().map(|tp| (tp, Some(e))).collect()
        };
        let Some(slot) = self.txn_coordinator_slot(transactional_id) else {
            return all(ResponseError::CoordinatorNotAvailable, partitions);
        };
        if slot.node == self.config.node_id && slot.shard == self.shard {
            let host: Rc<dyn TxnHost> = self.clone();
            return txn_coordinator::check_partitions(
                host,
                transactional_id,
                producer,
                partitions,
                check,
            )
            .await;
        }
        let request = check_request(transactional_id, producer, &partitions, check);
        let call = self
            .inter_broker_call::<_, AddPartitionsToTxnResponse>(
                slot,
                ApiKey::AddPartitionsToTxn,
                5,
                &request,
            )
            .map(|r| r.map_err(|e| (ResponseError::NetworkException, e)));
        let expired = async {
            glommio::timer::sleep(TXN_VERIFY_CALL_TIMEOUT).await;
            Err((
                ResponseError::NetworkException,
                format!("{slot:?} did not answer within {TXN_VERIFY_CALL_TIMEOUT:?}"),
            ))
        };
        match futures_lite::future::or(call, expired).await {
            Err((e, why)) => {
                tracing::debug!(transactional_id, error = %why, "transaction verification");
                all(e, partitions)
            }
            // Kafka's leader takes a refused cluster action for INVALID_TXN_STATE.
            Ok(resp) if resp.error_code == ResponseError::ClusterAuthorizationFailed.code() => {
                all(ResponseError::InvalidTxnState, partitions)
            }
            Ok(resp) if resp.error_code != 0 => all(
                ResponseError::try_from_code(resp.error_code)
                    .unwrap_or(ResponseError::UnknownServerError),
                partitions,
            ),
            Ok(resp) => verdicts_of(resp, partitions),
        }
    }

    /// The shard leading `transactional_id`'s `__transaction_state` partition, if any.
    fn txn_coordinator_slot(&self, transactional_id: &str) -> Option<Slot> {
        let snapshot = self.txn_snapshot();
        let count = snapshot
            .topics
            .get(TRANSACTION_STATE_TOPIC)?
            .partitions
            .len() as i32;
        if count == 0 {
            return None;
        }
        let p = transactions::partition_for(transactional_id, count);
        let meta = snapshot.partition(TRANSACTION_STATE_TOPIC, p)?;
        let node = match meta.leader {
            Leader::Local => self.config.node_id,
            Leader::Node(n) => n,
            Leader::Offline => return None,
        };
        Some(Slot {
            node,
            shard: meta.shard,
        })
    }
}

fn check_request(
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    partitions: &[(String, i32)],
    check: TxnCheck,
) -> AddPartitionsToTxnRequest {
    let topics = super::super::handlers::by_topic(partitions.iter().cloned())
        .into_iter()
        .map(|(topic, ps)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(ps)
        })
        .collect();
    AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.epoch)
            .with_verify_only(check == TxnCheck::Verify)
            .with_topics(topics),
    ])
}

/// Each asked partition's verdict from the coordinator's answer; one it did not answer gets
/// NETWORK_EXCEPTION (asked again by the producer's retry).
fn verdicts_of(resp: AddPartitionsToTxnResponse, partitions: Vec<(String, i32)>) -> Verdicts {
    let mut answered = std::collections::HashMap::new();
    for txn in resp.results_by_transaction {
        for t in txn.topic_results {
            for p in t.results_by_partition {
                let e = ResponseError::try_from_code(p.partition_error_code);
                answered.insert((t.name.0.to_string(), p.partition_index), e);
            }
        }
    }
    partitions
        .into_iter()
        .map(|tp| {
            let e = answered
                .remove(&tp)
                .unwrap_or(Some(ResponseError::NetworkException));
            (tp, e)
        })
        .collect()
}
