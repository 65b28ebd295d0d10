//! Taking over a `__transaction_state` partition: every record replayed (the latest per
//! transactional id winning), then the markers of the transactions found prepared sent again
//! (Kafka's coordinator resends them the same way after a failover).

use std::rc::Rc;

use transactions::{records, Txns};

use super::{markers, Owned, TxnHost};
use crate::partition::internal::replay_records;
use crate::partition::Partition;

/// Replays partition `part` of `__transaction_state`, led here at `coordinator_epoch`. Until
/// it finishes, requests for its transactional ids get COORDINATOR_LOAD_IN_PROGRESS.
pub async fn load_partition(host: Rc<dyn TxnHost>, part: &Partition, coordinator_epoch: i32) {
    let p = part.index;
    let c = host.txn_coordinator();
    c.partitions.borrow_mut().remove(&p);
    c.loading.borrow_mut().insert(p);
    let mut txns = Txns::default();
    let mut skipped = 0usize;
    let count = replay_records(part, |r| {
        if r.control {
            return;
        }
        let Some(key) = r.key else {
            skipped += 1;
            return;
        };
        match records::decode_key(&key) {
            Ok(Some(id)) => match r.value.as_deref().map(records::decode_value) {
                None => txns.load(&id, None),
                Some(Ok(meta)) => txns.load(&id, Some(meta)),
                Some(Err(e)) => {
                    tracing::warn!(partition = p, offset = r.offset, error = %e, "skipped __transaction_state record");
                    skipped += 1;
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(partition = p, offset = r.offset, error = %e, "skipped __transaction_state record");
                skipped += 1;
            }
        }
    })
    .await;
    if !c.loading.borrow_mut().remove(&p) {
        return; // unloaded meanwhile
    }
    let prepared: Vec<String> = txns
        .iter()
        .filter(|(_, m)| m.state.is_prepare())
        .map(|(id, _)| id.to_owned())
        .collect();
    let ids = txns.iter().count();
    c.partitions.borrow_mut().insert(
        p,
        Owned {
            txns,
            coordinator_epoch,
        },
    );
    if count > 0 {
        tracing::info!(
            partition = p,
            coordinator_epoch,
            records = count,
            skipped,
            transactional_ids = ids,
            prepared = prepared.len(),
            "loaded __transaction_state partition"
        );
    }
    for id in prepared {
        markers::spawn(host.clone(), p, coordinator_epoch, id);
    }
}
