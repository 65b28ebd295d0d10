//! Tests of a partition's transactions (`txns.rs`) and the leader's markers (`append.rs`):
//! the LSO, aborted transactions indexed, fencing, the snapshot and replay, a follower.

use iouring_log::fault_injection::FaultyIo;
use iouring_log::{AbortedTxnEntry, LeaderEpoch, LogConfig, Offset, ReadOptions};
use kafka_protocol::ResponseError;
use replication::ReplicaId;

use super::append::tests::{batch, open_partition, run, tmpdir, txn_batch};
use super::append::Appended;
use super::replica::RoleContext;
use super::txns::{TxnMarker, TxnStart};
use super::Partition;

const P: i64 = 7;
const Q: i64 = 8;

fn single(part: &Partition) {
    let cx = RoleContext {
        me: ReplicaId(1),
        now_ms: 0,
        replica_lag_max_ms: 10_000,
    };
    part.apply_state(None, cx);
}

async fn append(part: &Partition, bytes: &[u8]) -> Appended {
    let a = part.append(bytes).await.unwrap();
    part.wait_acknowledgeable(&a).await.unwrap();
    a
}

/// A marker of a transaction version 0/1 transaction (WriteTxnMarkers v1).
fn legacy_marker(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch,
        commit,
        coordinator_epoch,
        version: transactions::TxnVersion::V0,
    }
}

async fn marker(part: &Partition, pid: i64, commit: bool, coordinator_epoch: i32) -> Offset {
    let a = part
        .append_marker(
            &legacy_marker(pid, 0, commit, coordinator_epoch),
            LeaderEpoch(0),
            0,
        )
        .await
        .unwrap();
    part.wait_acknowledgeable(&a).await.unwrap();
    a.base_offset
}

/// Everything in `part`'s log from offset 0, as a follower's fetch would carry it.
async fn log_bytes(part: &Partition) -> Vec<u8> {
    let opts = ReadOptions {
        max_bytes: 1 << 20,
        max_offset: None,
        min_one_batch: true,
    };
    let r = part.log.read(Offset(0), opts).await.unwrap();
    iouring_log::read_slices_to_vec(&r.slices).await.unwrap()
}

/// A transactional batch is never below the last stable offset before its transaction is
/// recorded: the LSO is held at the log end while the batch is appended, so a read_committed
/// fetch in between (the batch written and the high watermark past it) does not read it as
/// committed. (It once did: found by the cluster checker's concurrent readers.)
#[test]
fn a_transactional_batch_being_appended_is_never_below_the_lso() {
    run(LogConfig::default(), |_io, part| {
        Box::pin(async move {
            single(&part);
            // Offset 0 holds the harness's record.
            let done = std::rc::Rc::new(std::cell::Cell::new(false));
            let appending = glommio::spawn_local({
                let (part, done) = (part.clone(), done.clone());
                async move {
                    // The first batch of a new leader epoch: its append writes the leader
                    // epoch checkpoint after the batch is in the log (as the first append to
                    // a new partition, or after a leader change, does).
                    let bytes = txn_batch(P, 0, 0, 2);
                    let header = iouring_log::BatchHeader::parse(&bytes).unwrap();
                    let a = part
                        .append_as_leader(&bytes, &header, LeaderEpoch(1), 0, TxnStart::Unchecked)
                        .await
                        .unwrap();
                    done.set(true);
                    a
                }
            });
            let mut seen = Vec::new();
            while !done.get() {
                futures_lite::future::yield_now().await;
                seen.push((part.high_watermark(), part.last_stable_offset()));
            }
            let a = appending.await;
            assert_eq!(a.base_offset, Offset(1));
            let above = seen.iter().find(|&&(_, lso)| lso > Offset(1));
            assert!(
                above.is_none(),
                "(high watermark, LSO) {above:?} while the batch at 1 was appended ({} looks)",
                seen.len()
            );
            assert_eq!(part.last_stable_offset(), Offset(1));
        })
    });
}

/// A leader's transactions: the LSO waits for the earliest open one, a commit and an abort
/// close them, the abort is indexed; markers of an older coordinator are refused; the state
/// rebuilt from the snapshot and the log is the same; a follower fed the leader's bytes
/// ends with the same state.
#[test]
fn markers_close_transactions_move_the_lso_and_index_aborts() {
    run(LogConfig::default(), |_io, part| {
        Box::pin(async move {
            single(&part);
            // Offset 0 holds the harness's record.
            let p = append(&part, &txn_batch(P, 0, 0, 2)).await;
            let q = append(&part, &txn_batch(Q, 0, 0, 2)).await;
            append(&part, &batch(-1, 0, 1)).await;
            assert_eq!((p.base_offset, q.base_offset), (Offset(1), Offset(3)));
            assert_eq!(part.high_watermark(), Offset(6));
            assert_eq!(part.last_stable_offset(), Offset(1));
            assert!(part.has_open_transaction(P));

            assert_eq!(marker(&part, P, true, 1).await, Offset(6));
            assert_eq!(part.last_stable_offset(), Offset(3), "Q is still open");
            part.snapshot_producers(0, true).await.unwrap();
            assert_eq!(marker(&part, Q, false, 1).await, Offset(7));
            assert_eq!(part.last_stable_offset(), Offset(8));
            let aborted = vec![AbortedTxnEntry {
                producer_id: Q,
                first_offset: Offset(3),
                last_offset: Offset(7),
                last_stable_offset: Offset(8),
            }];
            assert_eq!(part.aborted_transactions(Offset(0), Offset(8)), aborted);
            assert_eq!(part.aborted_transactions(Offset(8), Offset(8)), vec![]);

            // A zombie coordinator's marker.
            let stale = part
                .append_marker(&legacy_marker(Q, 0, true, 0), LeaderEpoch(0), 0)
                .await
                .unwrap_err();
            assert_eq!(stale.error, ResponseError::TransactionCoordinatorFenced);

            // Rebuilt from the snapshot (Q open at 7) and the marker after it.
            part.restore_producers().await.unwrap();
            assert_eq!(part.last_stable_offset(), Offset(8));
            assert_eq!(part.aborted_transactions(Offset(0), Offset(8)), aborted);
            assert!(part.open_transactions().is_empty());

            // A follower takes the same bytes and ends in the same state.
            let dir = tmpdir();
            let follower = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
            let bytes = log_bytes(&part).await;
            let end = follower.append_as_follower(&bytes, 0).await.unwrap();
            assert_eq!(end, Offset(8));
            assert_eq!(follower.aborted_transactions(Offset(0), Offset(8)), aborted);
            follower.log.close().await.unwrap();
            let files: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".txnindex"))
                .collect();
            assert_eq!(files, vec![format!("{:020}.txnindex", 0)]);
        })
    });
}

/// A transaction left open by a crash before its marker holds the LSO after the restart
/// (the state is rebuilt from the log), and its batches of an older producer epoch are
/// refused once a marker at a newer one fenced them.
#[test]
fn an_open_transaction_survives_a_restart_and_fences_older_epochs() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            let dir = tmpdir();
            let part = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
            single(&part);
            append(&part, &batch(-1, 0, 1)).await;
            append(&part, &txn_batch(P, 0, 0, 3)).await;
            part.log.close().await.unwrap();
            drop(part);
            let part = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
            single(&part);
            part.restore_producers().await.unwrap();
            assert_eq!(part.last_stable_offset(), Offset(1));
            assert_eq!(part.open_transactions(), vec![(P, Offset(1))]);
            // The coordinator aborts it at a bumped epoch (a fence or a timeout).
            let a = part
                .append_marker(&legacy_marker(P, 1, false, 0), LeaderEpoch(0), 0)
                .await
                .unwrap();
            part.wait_acknowledgeable(&a).await.unwrap();
            assert_eq!(part.last_stable_offset(), Offset(5));
            let zombie = part.append(&txn_batch(P, 0, 3, 1)).await.unwrap_err();
            assert_eq!(zombie.error, ResponseError::InvalidProducerEpoch);
            part.log.close().await.unwrap();
        })
        .expect("executor (ulimit -l >= 512 KiB?)")
        .join()
        .unwrap();
}

/// KIP-890 part 1's guard: under `TxnStart::Verified` a transactional batch may start a
/// transaction only once the coordinator's confirmation was recorded for its producer and
/// epoch; later batches of the open transaction need none; the producer's marker ends the
/// confirmation, so the next transaction's first batch needs a new one.
#[test]
fn a_transaction_starts_only_with_the_coordinators_confirmation() {
    run(LogConfig::default(), |_io, part| {
        Box::pin(async move {
            single(&part);
            let verified = |bytes: Vec<u8>| {
                let part = part.clone();
                async move {
                    let h = iouring_log::BatchHeader::parse(&bytes).unwrap();
                    part.append_as_leader(&bytes, &h, LeaderEpoch(0), 0, TxnStart::Verified)
                        .await
                }
            };
            let first = txn_batch(P, 0, 0, 2);
            let h = iouring_log::BatchHeader::parse(&first).unwrap();
            assert!(part.needs_verification(&h));
            let refused = verified(first.clone()).await.unwrap_err();
            assert_eq!(refused.error, ResponseError::InvalidTxnState);
            assert!(!part.has_open_transaction(P), "nothing appended");

            // Confirmed for another epoch: still refused.
            part.set_verified(P, 1);
            assert!(part.needs_verification(&h));
            assert!(verified(first.clone()).await.is_err());

            part.set_verified(P, 0);
            assert!(!part.needs_verification(&h));
            verified(first).await.unwrap();
            // The open transaction's next batch needs no confirmation of its own.
            let next = txn_batch(P, 0, 2, 1);
            assert!(!part.needs_verification(&iouring_log::BatchHeader::parse(&next).unwrap()));
            verified(next).await.unwrap();
            // A batch at the next epoch (transaction version 2: the producer's next
            // transaction, its marker for this one not here yet) does not join the open one.
            let newer = txn_batch(P, 1, 0, 1);
            assert!(part.needs_verification(&iouring_log::BatchHeader::parse(&newer).unwrap()));
            let refused = verified(newer).await.unwrap_err();
            assert_eq!(refused.error, ResponseError::InvalidTxnState);

            marker(&part, P, true, 1).await;
            let again = txn_batch(P, 0, 3, 1);
            assert!(part.needs_verification(&iouring_log::BatchHeader::parse(&again).unwrap()));
            let refused = verified(again).await.unwrap_err();
            assert_eq!(refused.error, ResponseError::InvalidTxnState);
        })
    });
}

/// Transaction version 2 (KIP-1228): a marker of the producer's previous transaction that
/// arrives late — held in a cut link, delivered once it is back — carries the epoch the open
/// transaction's records have, and is refused (INVALID_PRODUCER_EPOCH) instead of ending it;
/// the same marker sent again with nothing open is accepted (a coordinator's retry), and the
/// open transaction's own marker (one epoch up) closes it.
#[test]
fn a_late_marker_of_the_previous_transaction_is_refused_at_version_2() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            let dir = tmpdir();
            let part = open_partition(dir.path(), LogConfig::default(), FaultyIo::new()).await;
            single(&part);
            let v2 = |producer_epoch, commit| TxnMarker {
                producer_id: P,
                producer_epoch,
                commit,
                coordinator_epoch: 0,
                version: transactions::TxnVersion::V2,
            };
            let write = |m: TxnMarker| {
                let part = &part;
                async move {
                    let a = part.append_marker(&m, LeaderEpoch(0), 0).await?;
                    part.wait_acknowledgeable(&a).await.unwrap();
                    Ok::<_, crate::error::Refused>(a)
                }
            };
            // transaction 1 at epoch 0, committed by its marker at epoch 1
            append(&part, &txn_batch(P, 0, 0, 2)).await;
            write(v2(1, true)).await.unwrap();
            // sent again, nothing open: fine
            write(v2(1, true)).await.unwrap();
            // transaction 2 at epoch 1; transaction 1's marker arrives late
            append(&part, &txn_batch(P, 1, 0, 2)).await;
            let late = write(v2(1, true)).await.unwrap_err();
            assert_eq!(late.error, ResponseError::InvalidProducerEpoch);
            assert_eq!(part.open_transactions(), vec![(P, Offset(4))]);
            // transaction 2's own marker aborts it: its records are in the aborted index
            write(v2(2, false)).await.unwrap();
            assert!(part.open_transactions().is_empty());
            assert_eq!(
                part.aborted_transactions(Offset(0), part.last_stable_offset())
                    .iter()
                    .map(|a| a.first_offset)
                    .collect::<Vec<_>>(),
                vec![Offset(4)]
            );
            part.log.close().await.unwrap();
        })
        .expect("executor (ulimit -l >= 512 KiB?)")
        .join()
        .unwrap();
}
