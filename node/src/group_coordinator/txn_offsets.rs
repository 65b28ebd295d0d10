//! Transactional offset commits (TxnOffsetCommit, Kafka's consume-transform-produce): the
//! offsets are written to `__consumer_offsets` in the producer's transaction and stay pending
//! — not visible to OffsetFetch, which answers UNSTABLE_OFFSET_COMMIT for them when asked
//! for stable offsets (KIP-447) — until the transaction's marker reaches that partition: a
//! COMMIT makes them the group's committed offsets, an ABORT drops them. A load replays the
//! same way: transactional offset records are pending until their marker.

use kafka_protocol::ResponseError;

use super::coordinator::{partition_for, Coordinator};
use super::host::Host;
use super::membership::Caller;
use super::offsets::{checked_offsets, write_checked};
use super::records::OffsetValue;
use crate::partition::internal::InTransaction;

pub(super) use super::coordinator::PendingTxnOffsets as Pending;

impl Coordinator {
    /// TxnOffsetCommit: `offsets` of `group` written in `txn`'s transaction, pending until its
    /// marker. A member of a live group is checked as for OffsetCommit (generation, member id,
    /// instance id); a caller naming no generation is not (Kafka's rule for transactional
    /// commits of groups managed elsewhere).
    pub async fn txn_commit(
        &self,
        host: &dyn Host,
        group: &str,
        txn: InTransaction,
        who: Caller<'_>,
        offsets: Vec<(String, i32, OffsetValue)>,
        now: i64,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let p = self.locate(host, group)?;
        if who.generation >= 0 {
            let checked = self.with_group(group, None, |g| g.check_commit(who, now));
            checked.ok_or(ResponseError::IllegalGeneration)??;
        }
        let checked = checked_offsets(host, group, offsets);
        let (results, written) = write_checked(host, p, checked, Some(txn), now).await;
        if !written.is_empty() {
            let mut pending = self.txn_offsets.borrow_mut();
            let entry = pending
                .entry((group.to_owned(), txn.producer_id))
                .or_default();
            for (topic, partition, value) in written {
                entry.insert((topic, partition), value);
            }
        }
        Ok(results)
    }

    /// The marker of `producer_id`'s transaction reached `__consumer_offsets` partition `p`
    /// (of `partitions`): its pending offsets there become committed (`commit`) or go.
    pub fn complete_txn(&self, p: i32, partitions: i32, producer_id: i64, commit: bool, now: i64) {
        let mut pending = self.txn_offsets.borrow_mut();
        let mut groups = self.groups.borrow_mut();
        settle(
            &mut pending,
            producer_id,
            commit,
            |group| partition_for(group, partitions) == p,
            |group, tp, v| {
                groups
                    .entry(group.to_owned())
                    .or_insert_with(|| super::membership::Group::new(group.to_owned(), now))
                    .offsets
                    .insert(tp, v);
            },
        );
    }

    /// Whether `group` has an offset of `tp` pending in a transaction.
    pub fn has_pending_offset(&self, group: &str, tp: &(String, i32)) -> bool {
        self.txn_offsets
            .borrow()
            .range((group.to_owned(), i64::MIN)..=(group.to_owned(), i64::MAX))
            .any(|(_, offsets)| offsets.contains_key(tp))
    }
}

/// Settles the pending offsets of `producer_id` in the groups `ours` accepts: committed
/// through `apply` when `commit`, dropped otherwise.
pub(super) fn settle(
    pending: &mut Pending,
    producer_id: i64,
    commit: bool,
    ours: impl Fn(&str) -> bool,
    mut apply: impl FnMut(&str, (String, i32), OffsetValue),
) {
    let keys: Vec<(String, i64)> = pending
        .keys()
        .filter(|(g, pid)| *pid == producer_id && ours(g))
        .cloned()
        .collect();
    for key in keys {
        let offsets = pending.remove(&key).unwrap_or_default();
        if commit {
            for (tp, v) in offsets {
                apply(&key.0, tp, v);
            }
        }
    }
}
