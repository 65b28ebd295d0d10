//! Moving a partition's replicas (Kafka's KIP-455), as pure functions of its committed state,
//! the live replicas and the topic's `min.insync.replicas`. The controller commits what they
//! return by compare-and-swap on the partition epoch, like every other change.
//!
//! The steps, Kafka's:
//! 1. [`reassign`]: `replicas` becomes target ++ (current − target); `adding` = target −
//!    current, `removing` = current − target. The ISR does not change: the adding replicas
//!    start as followers (from the leader's log start) and join the ISR by the usual rule, once
//!    caught up, through the leader's ISR changes.
//! 2. [`complete`]: once every adding replica is in the ISR, one change drops `removing` from
//!    the replicas, the ISR and the ELR and, if the leader is being removed, elects one from the
//!    new ISR (next leader epoch). It waits while that would leave the ISR below
//!    `min.insync.replicas` (or the target's size, if smaller) or no live replica could lead:
//!    a move never shrinks the ISR on its own.
//! 3. [`cancel`]: back to the replicas before the move (`replicas` − `adding`, in the order the
//!    move left them, as Kafka's KRaft controller reverts); the adding
//!    replicas leave the ISR. Refused when no original replica is in sync (the data is only on
//!    replicas the cancel would drop): move to another set instead.
//!
//! A new reassignment while one is in progress starts from the current replicas (adding ones
//! included), as Kafka's does: adding replicas the new target leaves out become removing ones.
//! Every function keeps the one rule replication rests on: the new ISR is a non-empty subset
//! of the old one, or the old one plus caught-up replicas, so it holds every committed record.
//!
//! A change that removes a replica bumps the leader epoch (as Kafka's KRaft controller does):
//! a fetch the removed replica sent before it learnt of its removal carries the old epoch and
//! is fenced, so if the replica is added again (its log deleted, fetching from scratch) no
//! stale fetch of its deleted log can count it as caught up.

use std::collections::BTreeSet;

use iouring_log::LeaderEpoch;

use crate::types::{PartitionState, ReplicaId};

/// Why a reassignment or its cancellation was refused (Kafka's error codes in brackets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignError {
    /// A cancellation of a partition that is not moving (NO_REASSIGNMENT_IN_PROGRESS).
    #[error("no reassignment is in progress")]
    NoReassignmentInProgress,
    /// The target itself is unusable (INVALID_REPLICA_ASSIGNMENT).
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// Cancelling would leave no replica that holds the committed records
    /// (INVALID_REPLICA_ASSIGNMENT).
    #[error("cannot cancel: {0}")]
    CannotRevert(String),
}

/// Whether a move is in progress.
pub fn is_reassigning(state: &PartitionState) -> bool {
    !state.adding.is_empty() || !state.removing.is_empty()
}

/// The replicas before the move in progress (all of them when none is).
pub fn original_replicas(state: &PartitionState) -> Vec<ReplicaId> {
    state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.adding.contains(r))
        .collect()
}

/// The replicas the move in progress ends with (all of them when none is).
pub fn target_replicas(state: &PartitionState) -> Vec<ReplicaId> {
    state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.removing.contains(r))
        .collect()
}

/// Starts moving `state` to `target` (the preferred leader first), completing at once what
/// needs no new replica to catch up (a pure removal or reorder). `None`: already there, nothing
/// to do. The caller has checked that every target replica names a node of the cluster.
pub fn reassign(
    state: &PartitionState,
    target: &[ReplicaId],
    live: &BTreeSet<ReplicaId>,
    min_insync: usize,
) -> Result<Option<PartitionState>, ReassignError> {
    if target.is_empty() {
        return Err(ReassignError::InvalidReplicaAssignment(
            "the target has no replica".into(),
        ));
    }
    let unique: BTreeSet<ReplicaId> = target.iter().copied().collect();
    if unique.len() != target.len() {
        return Err(ReassignError::InvalidReplicaAssignment(format!(
            "the target {target:?} names a replica twice"
        )));
    }
    if !is_reassigning(state) && state.replicas == target {
        return Ok(None);
    }
    let current = &state.replicas;
    let mut next = state.clone();
    next.replicas = target
        .iter()
        .copied()
        .chain(current.iter().copied().filter(|r| !unique.contains(r)))
        .collect();
    next.adding = unique
        .iter()
        .copied()
        .filter(|r| !current.contains(r))
        .collect();
    next.removing = current
        .iter()
        .copied()
        .filter(|r| !unique.contains(r))
        .collect();
    next.partition_epoch += 1;
    Ok(Some(complete(&next, live, min_insync).unwrap_or(next)))
}

/// Completes the move in progress if every adding replica is in the ISR and the ISR left
/// after dropping the removing replicas is large enough and has a live replica to lead it.
/// `None`: nothing to complete yet.
pub fn complete(
    state: &PartitionState,
    live: &BTreeSet<ReplicaId>,
    min_insync: usize,
) -> Option<PartitionState> {
    if !is_reassigning(state) || !state.adding.is_subset(&state.isr) {
        return None;
    }
    let target = target_replicas(state);
    let isr: BTreeSet<ReplicaId> = state.isr.difference(&state.removing).copied().collect();
    if isr.is_empty() || isr.len() < min_insync.min(target.len()) {
        return None;
    }
    let leader = match state.leader {
        Some(l) if isr.contains(&l) => Some(l),
        _ => Some(
            target
                .iter()
                .copied()
                .find(|r| isr.contains(r) && live.contains(r))?,
        ),
    };
    let mut next = settled(state, target, isr, leader, &state.removing);
    if next.isr.len() >= min_insync {
        next.elr.clear();
    }
    Some(next)
}

/// `state` with no move in progress: on `replicas`, with `isr` and `leader`, the `dropped`
/// replicas out of the ELR too; the next partition epoch, and the next leader epoch when the
/// leader changes or a replica was dropped (its stale fetches are fenced).
fn settled(
    state: &PartitionState,
    replicas: Vec<ReplicaId>,
    isr: BTreeSet<ReplicaId>,
    leader: Option<ReplicaId>,
    dropped: &BTreeSet<ReplicaId>,
) -> PartitionState {
    let mut next = state.clone();
    next.elr = state.elr.difference(dropped).copied().collect();
    next.replicas = replicas;
    next.isr = isr;
    next.adding.clear();
    next.removing.clear();
    next.leader = leader;
    if leader != state.leader || !dropped.is_empty() {
        next.leader_epoch = LeaderEpoch(state.leader_epoch.0 + 1);
    }
    next.partition_epoch += 1;
    next
}

/// Cancels the move in progress: back to the replicas it started from; the adding replicas
/// leave the ISR and the ELR, and if one of them led, a live original in-sync replica leads.
pub fn cancel(
    state: &PartitionState,
    live: &BTreeSet<ReplicaId>,
) -> Result<PartitionState, ReassignError> {
    if !is_reassigning(state) {
        return Err(ReassignError::NoReassignmentInProgress);
    }
    let original = original_replicas(state);
    let isr: BTreeSet<ReplicaId> = state.isr.difference(&state.adding).copied().collect();
    if isr.is_empty() {
        return Err(ReassignError::CannotRevert(format!(
            "no replica of the original set {original:?} is in sync; reassign to a new set instead"
        )));
    }
    let leader = match state.leader {
        Some(l) if isr.contains(&l) => Some(l),
        _ => original
            .iter()
            .copied()
            .find(|r| isr.contains(r) && live.contains(r)),
    };
    Ok(settled(state, original, isr, leader, &state.adding))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ids: &[i32]) -> BTreeSet<ReplicaId> {
        ids.iter().map(|&i| ReplicaId(i)).collect()
    }

    fn v(ids: &[i32]) -> Vec<ReplicaId> {
        ids.iter().map(|&i| ReplicaId(i)).collect()
    }

    fn state(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionState {
        PartitionState {
            replicas: v(replicas),
            isr: r(isr),
            elr: BTreeSet::new(),
            leader: Some(ReplicaId(leader)),
            leader_epoch: LeaderEpoch(5),
            partition_epoch: 10,
            adding: BTreeSet::new(),
            removing: BTreeSet::new(),
        }
    }

    #[test]
    fn a_move_adds_first_and_removes_once_the_new_replicas_are_in_sync() {
        let live = r(&[1, 2, 3, 4]);
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let moving = reassign(&s, &v(&[4, 2, 3]), &live, 2).unwrap().unwrap();
        assert_eq!(moving.replicas, v(&[4, 2, 3, 1]));
        assert_eq!(
            (moving.adding.clone(), moving.removing.clone()),
            (r(&[4]), r(&[1]))
        );
        assert_eq!(
            moving.isr,
            r(&[1, 2, 3]),
            "the ISR does not change at the start"
        );
        assert_eq!(moving.partition_epoch, 11);
        assert!(
            complete(&moving, &live, 2).is_none(),
            "4 is not in sync yet"
        );
        let mut caught_up = moving.clone();
        caught_up.isr.insert(ReplicaId(4));
        let done = complete(&caught_up, &live, 2).unwrap();
        assert_eq!(done.replicas, v(&[4, 2, 3]));
        assert_eq!(done.isr, r(&[2, 3, 4]));
        assert!(done.adding.is_empty() && done.removing.is_empty());
        // The leader was removed: the first target replica in sync leads, a new epoch.
        assert_eq!(
            (done.leader, done.leader_epoch),
            (Some(ReplicaId(4)), LeaderEpoch(6))
        );
    }

    #[test]
    fn a_move_never_completes_into_an_isr_below_min_insync() {
        let live = r(&[1, 2, 3, 4]);
        // 3 lags (out of the ISR): dropping 1 would leave {2, 4}... fine at min 2, not at 3.
        let mut s = reassign(&state(&[1, 2, 3], &[1, 2], 1), &v(&[2, 3, 4]), &live, 3)
            .unwrap()
            .unwrap();
        s.isr.insert(ReplicaId(4));
        assert!(complete(&s, &live, 3).is_none());
        assert!(complete(&s, &live, 2).is_some());
        // No live replica of the new ISR to lead: wait.
        assert!(complete(&s, &r(&[1, 3]), 2).is_none());
    }

    #[test]
    fn pure_removals_and_reorders_complete_at_once() {
        let live = r(&[1, 2, 3]);
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let shrunk = reassign(&s, &v(&[2, 3]), &live, 2).unwrap().unwrap();
        assert_eq!(
            (shrunk.replicas.clone(), shrunk.isr.clone()),
            (v(&[2, 3]), r(&[2, 3]))
        );
        assert_eq!(shrunk.leader, Some(ReplicaId(2)));
        let reordered = reassign(&s, &v(&[3, 1, 2]), &live, 2).unwrap().unwrap();
        assert_eq!(reordered.replicas, v(&[3, 1, 2]));
        assert_eq!(reordered.leader, Some(ReplicaId(1)), "the leader stays");
        assert_eq!(
            reordered.leader_epoch, s.leader_epoch,
            "no replica left: same epoch"
        );
        assert_eq!(
            shrunk.leader_epoch,
            LeaderEpoch(6),
            "a replica left: next epoch"
        );
        assert!(reassign(&s, &v(&[1, 2, 3]), &live, 2).unwrap().is_none());
    }

    #[test]
    fn cancel_goes_back_to_the_original_replicas() {
        let live = r(&[1, 2, 3, 4]);
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let mut moving = reassign(&s, &v(&[4, 2, 3]), &live, 2).unwrap().unwrap();
        moving.isr.insert(ReplicaId(4));
        moving.leader = Some(ReplicaId(4)); // say it had been elected meanwhile
        let back = cancel(&moving, &live).unwrap();
        // The original set, in the order the move left it (Kafka's KRaft revert does the same).
        assert_eq!(
            (back.replicas.clone(), back.isr.clone()),
            (v(&[2, 3, 1]), r(&[1, 2, 3]))
        );
        assert_eq!(back.leader, Some(ReplicaId(2)));
        assert_eq!(
            back.leader_epoch,
            LeaderEpoch(6),
            "the adding replica left: next epoch"
        );
        assert!(back.adding.is_empty() && back.removing.is_empty());
        assert_eq!(
            cancel(&back, &live),
            Err(ReassignError::NoReassignmentInProgress)
        );
        // Only the new replica holds the data: no way back.
        let mut lost = moving.clone();
        lost.isr = r(&[4]);
        assert!(matches!(
            cancel(&lost, &live),
            Err(ReassignError::CannotRevert(_))
        ));
    }

    #[test]
    fn a_new_target_during_a_move_starts_from_the_current_replicas() {
        let live = r(&[1, 2, 3, 4, 5]);
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let first = reassign(&s, &v(&[4, 2, 3]), &live, 2).unwrap().unwrap();
        let second = reassign(&first, &v(&[5, 2, 3]), &live, 2).unwrap().unwrap();
        assert_eq!(second.adding, r(&[5]));
        assert_eq!(second.removing, r(&[1, 4]));
        assert_eq!(second.replicas, v(&[5, 2, 3, 4, 1]));
    }

    #[test]
    fn bad_targets_are_refused() {
        let s = state(&[1, 2, 3], &[1, 2, 3], 1);
        let live = r(&[1, 2, 3]);
        assert!(reassign(&s, &[], &live, 2).is_err());
        assert!(reassign(&s, &v(&[1, 1]), &live, 2).is_err());
    }
}
