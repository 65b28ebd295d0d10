//! Sending a prepared transaction's markers and completing it; aborting transactions open past
//! their timeout.
//!
//! A prepared transaction (PrepareCommit / PrepareAbort written) has one marker per partition
//! to write. They are sent to each partition's leader shard, one WriteTxnMarkers per leader,
//! until every partition answers written (or its topic is gone); a leader that cannot take a
//! marker now (moving, too few replicas, unreachable) is asked again with a doubling wait.
//! Then CompleteCommit / CompleteAbort is written. The task gives up when its partition of
//! `__transaction_state` is no longer loaded at the same coordinator epoch — the new owner
//! resends what its replay finds prepared — when a partition answers that a newer producer or
//! coordinator epoch passed (this coordinator is stale), or when the node stops.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::ResponseError;

use super::host::MarkerRequest;
use super::{settings, write, TxnHost};
use crate::limits::{TXN_MARKER_RETRY_MAX, TXN_MARKER_RETRY_MIN};
use crate::metadata::{Leader, Slot, TRANSACTION_STATE_TOPIC};
use crate::shard::now_ms;

/// Sends the markers of `transactional_id` (prepared in partition `p` at `coordinator_epoch`)
/// and completes it, in the background.
pub(super) fn spawn(
    host: Rc<dyn TxnHost>,
    p: i32,
    coordinator_epoch: i32,
    transactional_id: String,
) {
    glommio::spawn_local(async move {
        complete(&*host, p, coordinator_epoch, &transactional_id).await;
    })
    .detach();
}

/// What one round of sending left to do.
enum Round {
    /// Nothing: completed, or not ours to complete any more.
    Done,
    /// Some markers (or the completion) could not be written: again after a wait.
    Again,
}

async fn complete(host: &dyn TxnHost, p: i32, coordinator_epoch: i32, id: &str) {
    let mut wait = TXN_MARKER_RETRY_MIN;
    loop {
        if host.txn_stop().is_stopping() {
            return;
        }
        match round(host, p, coordinator_epoch, id).await {
            Round::Done => return,
            Round::Again => {
                glommio::timer::sleep(wait).await;
                wait = (wait * 2).min(TXN_MARKER_RETRY_MAX);
            }
        }
    }
}

async fn round(host: &dyn TxnHost, p: i32, coordinator_epoch: i32, id: &str) -> Round {
    let c = host.txn_coordinator();
    let Some(Some(markers)) = c.with(p, coordinator_epoch, |t| t.markers(id)) else {
        return Round::Done;
    };
    let now = now_ms();
    if markers.partitions.is_empty() {
        let Some(Some(transit)) = c.with(p, coordinator_epoch, |t| t.completion(id, now)) else {
            return Round::Done;
        };
        return match write(host, p, coordinator_epoch, &transit, now).await {
            Ok(()) => Round::Done,
            Err(ResponseError::NotCoordinator) => Round::Done,
            Err(_) => Round::Again,
        };
    }
    let snapshot = host.txn_snapshot();
    // The shard's metadata may still be the one before the snapshot that made it coordinator
    // (a load runs while that snapshot is applied): a partition missing from an older one may
    // be of a topic created since, not a deleted one. Only metadata showing this shard leading
    // the partition at the coordinator epoch is new enough to tell.
    let current = snapshot
        .partition(TRANSACTION_STATE_TOPIC, p)
        .is_some_and(|m| {
            m.leader_epoch.0 == coordinator_epoch && m.is_led_by(host.txn_node(), host.txn_shard())
        });
    if !current {
        return Round::Again;
    }
    let mut by_leader: BTreeMap<Slot, Vec<(String, i32)>> = BTreeMap::new();
    let mut written = Vec::new();
    let mut unled = false;
    for tp in markers.partitions {
        match snapshot.partition(&tp.0, tp.1) {
            // The topic (or partition) was deleted: nothing to mark (Kafka drops it too).
            None => written.push(tp),
            Some(meta) => {
                let node = match meta.leader {
                    // A single node's partitions name no node: this one.
                    Leader::Local => Some(host.txn_node()),
                    Leader::Node(n) => Some(n),
                    Leader::Offline => None,
                };
                match node {
                    Some(node) => by_leader
                        .entry(Slot {
                            node,
                            shard: meta.shard,
                        })
                        .or_default()
                        .push(tp),
                    None => unled = true,
                }
            }
        }
    }
    let sends = by_leader.into_iter().map(|(slot, partitions)| {
        let request = MarkerRequest {
            producer_id: markers.producer_id,
            producer_epoch: markers.epoch,
            commit: markers.commit,
            coordinator_epoch,
            version: markers.version,
            partitions,
        };
        host.write_markers(slot, request)
    });
    let mut again = unled;
    for answer in futures_util::future::join_all(sends).await {
        match answer {
            Ok(list) => {
                for (tp, error) in list {
                    match error {
                        None => written.push(tp),
                        Some(
                            e @ (ResponseError::InvalidProducerEpoch
                            | ResponseError::TransactionCoordinatorFenced),
                        ) => {
                            // A newer producer or coordinator epoch passed this partition: this
                            // coordinator's view is stale; its successor completes it.
                            tracing::warn!(transactional_id = id, topic = %tp.0, partition = tp.1, error = ?e, "marker refused; this coordinator stops sending");
                            return Round::Done;
                        }
                        Some(e) => {
                            tracing::debug!(transactional_id = id, topic = %tp.0, partition = tp.1, error = ?e, "marker not written yet");
                            again = true;
                        }
                    }
                }
            }
            Err(why) => {
                tracing::debug!(transactional_id = id, error = %why, "markers not sent");
                again = true;
            }
        }
    }
    for tp in written {
        let completion = c
            .with(p, coordinator_epoch, |t| t.marker_written(id, &tp, now))
            .flatten();
        if let Some(transit) = completion {
            return match write(host, p, coordinator_epoch, &transit, now).await {
                Ok(()) | Err(ResponseError::NotCoordinator) => Round::Done,
                Err(_) => Round::Again,
            };
        }
    }
    if again {
        Round::Again
    } else {
        Round::Done
    }
}

/// The transits `decide` makes on each loaded partition, with the partition and its
/// coordinator epoch.
fn each_partition(
    host: &dyn TxnHost,
    mut decide: impl FnMut(&mut transactions::Txns) -> Vec<transactions::Transit>,
) -> Vec<(i32, i32, transactions::Transit)> {
    let c = host.txn_coordinator();
    let mut parts = c.partitions.borrow_mut();
    parts
        .iter_mut()
        .flat_map(|(&p, o)| {
            let epoch = o.coordinator_epoch;
            decide(&mut o.txns)
                .into_iter()
                .map(move |t| (p, epoch, t))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Removes the transactional ids of every loaded partition idle longer than
/// `transactional.id.expiration.ms`: a tombstone written for each (acks=all), then the id
/// forgotten; one whose tombstone is not written stays and is tried again next time.
pub fn expire_transactional_ids(host: Rc<dyn TxnHost>, now: i64) {
    let expiration_ms = host.txn_settings().id_expiration_ms;
    for (p, epoch, transit) in each_partition(&*host, |t| t.expire(now, expiration_ms)) {
        let host = host.clone();
        glommio::spawn_local(async move {
            match write(&*host, p, epoch, &transit, now).await {
                Ok(()) => tracing::info!(transactional_id = %transit.transactional_id, "transactional id expired"),
                Err(e) => tracing::debug!(transactional_id = %transit.transactional_id, error = %e, "transactional id not expired yet"),
            }
        })
        .detach();
    }
}

/// Aborts the transactions of every loaded partition open longer than their timeout: each
/// fenced (epoch bumped), PrepareAbort written, markers sent, completed.
pub fn abort_timed_out(host: Rc<dyn TxnHost>, now: i64) {
    let settings = settings(&*host);
    let due = each_partition(&*host, |t| {
        let aborts = t.abort_timed_out(now, settings);
        aborts.into_iter().map(|f| f.0).collect()
    });
    for (p, epoch, transit) in due {
        let host = host.clone();
        glommio::spawn_local(async move {
            let id = transit.transactional_id.clone();
            tracing::info!(transactional_id = %id, "aborting a transaction open past its timeout");
            if write(&*host, p, epoch, &transit, now).await.is_ok() {
                complete(&*host, p, epoch, &id).await;
            }
        })
        .detach();
    }
}
