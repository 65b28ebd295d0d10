//! The controller's decisions about one partition, as pure functions of its committed state,
//! the set of live replicas (those whose broker holds a session) and the topic's
//! `min.insync.replicas`. The store that persists them (etcd, with every write fenced) is not
//! here.
//!
//! Rules (Kafka 4.x's, with KIP-966's eligible leader replicas):
//! - The high watermark moves only while the ISR has at least `min.insync.replicas` members
//!   (the leader's side, [`crate::leader`]). So a replica that leaves the ISR while the ISR is
//!   below that size still holds every committed record: it joins the ELR. The ELR is emptied
//!   whenever the ISR is back at `min.insync.replicas`.
//! - A replica whose session is lost leaves the ISR, the last member too (the ISR may be empty;
//!   that member is then in the ELR and is elected again when it comes back).
//! - A leader is chosen from the live ISR members, else from the live ELR members (the one
//!   chosen becomes the whole ISR); with `unclean` allowed and neither, any live replica, whose
//!   log then becomes the truth.
//! - A replica that restarted after an unclean shutdown that may have lost written but
//!   unflushed records (power loss) leaves the ISR and the ELR at once — unless no other
//!   replica holds the data, in which case its log is the only copy left.
//! - A replica that comes back does not rejoin the ISR here: the leader proposes it once it has
//!   caught up ([`apply_isr_change`]).
//! - Every change bumps the partition epoch; a leader change bumps the leader epoch.

use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpoch;

use crate::types::{IsrChange, PartitionState, ReplicaId};

/// Why an ISR change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsrChangeError {
    #[error("leader {leader} is not the leader of epoch {epoch:?}")]
    FencedLeaderEpoch {
        leader: ReplicaId,
        epoch: LeaderEpoch,
    },
    #[error("partition epoch {got} is stale; the current one is {current}")]
    StalePartitionEpoch { got: i32, current: i32 },
    #[error("invalid ISR: {0}")]
    InvalidIsr(String),
    /// A replica the change adds is registered under another broker epoch than the one it
    /// fetched with: the leader's knowledge of it comes from a previous process (Kafka's
    /// INELIGIBLE_REPLICA, KIP-903).
    #[error("ineligible replica: {0}")]
    IneligibleReplica(String),
}

/// The first replica, in preference order, that is in `candidates` and live.
fn first_eligible(
    state: &PartitionState,
    candidates: &BTreeSet<ReplicaId>,
    live: &BTreeSet<ReplicaId>,
) -> Option<ReplicaId> {
    state
        .replicas
        .iter()
        .copied()
        .find(|r| candidates.contains(r) && live.contains(r))
}

/// `state` with a new ISR (`removed` leaving it) and the ELR that follows.
fn shrink(
    state: &PartitionState,
    removed: &BTreeSet<ReplicaId>,
    min_insync: usize,
) -> (BTreeSet<ReplicaId>, BTreeSet<ReplicaId>) {
    let isr: BTreeSet<ReplicaId> = state.isr.difference(removed).copied().collect();
    let elr = if isr.len() >= min_insync {
        BTreeSet::new()
    } else {
        let left = state.isr.intersection(removed).copied();
        state.elr.iter().copied().chain(left).collect()
    };
    (isr, elr)
}

/// Chooses a leader when the current one is gone: `(leader, isr, elr)`.
fn elect(
    state: &PartitionState,
    isr: BTreeSet<ReplicaId>,
    elr: BTreeSet<ReplicaId>,
    live: &BTreeSet<ReplicaId>,
    unclean: bool,
) -> (Option<ReplicaId>, BTreeSet<ReplicaId>, BTreeSet<ReplicaId>) {
    if let Some(l) = first_eligible(state, &isr, live) {
        return (Some(l), isr, elr);
    }
    if let Some(l) = first_eligible(state, &elr, live) {
        let mut elr = elr;
        elr.remove(&l);
        return (Some(l), BTreeSet::from([l]), elr);
    }
    let all: BTreeSet<ReplicaId> = state.replicas.iter().copied().collect();
    match unclean.then(|| first_eligible(state, &all, live)).flatten() {
        // An unclean leader's log becomes the truth: it alone is in sync.
        Some(l) => (Some(l), BTreeSet::from([l]), BTreeSet::new()),
        None => (None, isr, elr),
    }
}

/// The next state, or `None` when nothing changed.
fn next_state(
    state: &PartitionState,
    leader: Option<ReplicaId>,
    isr: BTreeSet<ReplicaId>,
    elr: BTreeSet<ReplicaId>,
) -> Option<PartitionState> {
    if leader == state.leader && isr == state.isr && elr == state.elr {
        return None;
    }
    let mut next = state.clone();
    if leader != state.leader {
        next.leader = leader;
        next.leader_epoch = LeaderEpoch(state.leader_epoch.0 + 1);
    }
    next.isr = isr;
    next.elr = elr;
    next.partition_epoch += 1;
    Some(next)
}

/// The state after `lost` lost its session (crashed, paused past its lease, cut off); `None`
/// when nothing changes.
pub fn on_replica_lost(
    state: &PartitionState,
    lost: ReplicaId,
    live: &BTreeSet<ReplicaId>,
    min_insync: usize,
    unclean: bool,
) -> Option<PartitionState> {
    if !state.replicas.contains(&lost) {
        return None;
    }
    without(state, lost, live, min_insync, unclean, true)
}

/// `state` once `gone` left the ISR (into the ELR when `still_eligible` and the ISR is small),
/// with a new leader if it led or none did.
fn without(
    state: &PartitionState,
    gone: ReplicaId,
    live: &BTreeSet<ReplicaId>,
    min_insync: usize,
    unclean: bool,
    still_eligible: bool,
) -> Option<PartitionState> {
    let (isr, mut elr) = shrink(state, &BTreeSet::from([gone]), min_insync);
    if !still_eligible {
        elr.remove(&gone);
    }
    let (leader, isr, elr) = if state.leader == Some(gone) || state.leader.is_none() {
        elect(state, isr, elr, live, unclean)
    } else {
        (state.leader, isr, elr)
    };
    next_state(state, leader, isr, elr)
}

/// The state after `restarted` registered again following an unclean shutdown in which it may
/// have lost records it had written but not flushed (its machine lost power): it no longer
/// counts as holding them, so it leaves the ISR and the ELR — unless no other replica holds
/// the partition's data. `None` when nothing changes.
pub fn on_replica_lost_unflushed(
    state: &PartitionState,
    restarted: ReplicaId,
    live: &BTreeSet<ReplicaId>,
    min_insync: usize,
) -> Option<PartitionState> {
    let holders: BTreeSet<ReplicaId> = state.isr.union(&state.elr).copied().collect();
    if !holders.contains(&restarted) || holders.len() == 1 {
        return on_replica_back(state, restarted, live);
    }
    without(state, restarted, live, min_insync, false, false)
}

/// The state after `back` registered again; `None` when nothing changes. An offline partition
/// whose ISR (or, failing that, ELR) holds `back` is led by it again.
pub fn on_replica_back(
    state: &PartitionState,
    back: ReplicaId,
    live: &BTreeSet<ReplicaId>,
) -> Option<PartitionState> {
    if state.leader.is_some() || !live.contains(&back) {
        return None;
    }
    let (leader, isr, elr) = elect(state, state.isr.clone(), state.elr.clone(), live, false);
    next_state(state, leader, isr, elr)
}

/// Moves leadership to the preferred replica (the first) if it is live and in the ISR; not
/// while the partition's replicas are moving (the move elects a leader when it completes).
pub fn preferred_leader_election(
    state: &PartitionState,
    live: &BTreeSet<ReplicaId>,
) -> Option<PartitionState> {
    if crate::reassignment::is_reassigning(state) {
        return None;
    }
    let preferred = *state.replicas.first()?;
    let eligible = state.isr.contains(&preferred) && live.contains(&preferred);
    if !eligible || state.leader == Some(preferred) {
        return None;
    }
    next_state(state, Some(preferred), state.isr.clone(), state.elr.clone())
}

/// Why an election an operator asked for (Kafka's ElectLeaders) was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// The partition already has the leader asked for (ELECTION_NOT_NEEDED).
    #[error("election not needed: {0}")]
    NotNeeded(&'static str),
    /// The preferred replica is not live or not in the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
    #[error("the preferred leader {0} is not live or not in the ISR")]
    PreferredNotAvailable(ReplicaId),
    /// No live replica may lead (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    #[error("no live replica to elect")]
    NoneEligible,
}

/// An operator's preferred election (ElectLeaders PREFERRED): leadership to the first replica,
/// which must be live and in the ISR. Unlike the controller's own preferred elections it runs
/// during a move too (the operator asked).
pub fn elect_preferred(
    state: &PartitionState,
    live: &BTreeSet<ReplicaId>,
) -> Result<PartitionState, ElectionError> {
    let preferred = *state.replicas.first().ok_or(ElectionError::NoneEligible)?;
    if state.leader == Some(preferred) {
        return Err(ElectionError::NotNeeded("the preferred replica leads"));
    }
    if !state.isr.contains(&preferred) || !live.contains(&preferred) {
        return Err(ElectionError::PreferredNotAvailable(preferred));
    }
    next_state(state, Some(preferred), state.isr.clone(), state.elr.clone())
        .ok_or(ElectionError::NotNeeded("the preferred replica leads"))
}

/// An operator's unclean election (ElectLeaders UNCLEAN): for a partition with no leader, a
/// live ISR or ELR member if there is one, else any live replica, whose log becomes the truth
/// (records only the lost replicas held are gone, as in Kafka). A partition with a leader needs
/// none.
pub fn elect_unclean(
    state: &PartitionState,
    live: &BTreeSet<ReplicaId>,
) -> Result<PartitionState, ElectionError> {
    if state.leader.is_some() {
        return Err(ElectionError::NotNeeded("the partition has a leader"));
    }
    let (leader, isr, elr) = elect(state, state.isr.clone(), state.elr.clone(), live, true);
    if leader.is_none() {
        return Err(ElectionError::NoneEligible);
    }
    next_state(state, leader, isr, elr).ok_or(ElectionError::NoneEligible)
}

/// The state to commit after refusing an ISR change as invalid: the same, with the next
/// partition epoch. A copy of the refused change still in flight (a retry) is then stale and can
/// never apply, and the leader, seeing the newer epoch, knows its change is settled.
pub fn fence_isr_proposals(state: &PartitionState) -> PartitionState {
    let mut next = state.clone();
    next.partition_epoch += 1;
    next
}

/// Applies a leader's ISR change if it was made against the current state (compare-and-swap
/// on the partition epoch) by the current leader, keeps the leader in, and adds only live
/// replicas of the partition, each registered under the broker epoch it fetched with
/// (`broker_epochs`: the live registrations' epochs, where known). Replicas it removes join
/// the ELR when the ISR falls below `min_insync`; replicas it adds leave the ELR. On
/// [`IsrChangeError::InvalidIsr`] or [`IsrChangeError::IneligibleReplica`] the caller commits
/// [`fence_isr_proposals`]; a stale or fenced change needs nothing (the leader learns the
/// newer state).
pub fn apply_isr_change(
    state: &PartitionState,
    change: &IsrChange,
    live: &BTreeSet<ReplicaId>,
    broker_epochs: &BTreeMap<ReplicaId, i64>,
    min_insync: usize,
) -> Result<PartitionState, IsrChangeError> {
    if state.leader != Some(change.leader) || state.leader_epoch != change.leader_epoch {
        return Err(IsrChangeError::FencedLeaderEpoch {
            leader: change.leader,
            epoch: change.leader_epoch,
        });
    }
    if state.partition_epoch != change.partition_epoch {
        return Err(IsrChangeError::StalePartitionEpoch {
            got: change.partition_epoch,
            current: state.partition_epoch,
        });
    }
    if !change.new_isr.contains(&change.leader) {
        return Err(IsrChangeError::InvalidIsr("the leader must stay in".into()));
    }
    if let Some(r) = change.new_isr.iter().find(|r| !state.replicas.contains(r)) {
        return Err(IsrChangeError::InvalidIsr(format!("{r} is not a replica")));
    }
    if let Some(r) = change
        .new_isr
        .difference(&state.isr)
        .find(|r| !live.contains(r))
    {
        return Err(IsrChangeError::InvalidIsr(format!(
            "{r} is not live (no session, or in controlled shutdown)"
        )));
    }
    for r in change.new_isr.difference(&state.isr) {
        let (Some(fetched), Some(registered)) = (change.broker_epochs.get(r), broker_epochs.get(r))
        else {
            continue;
        };
        if fetched != registered {
            return Err(IsrChangeError::IneligibleReplica(format!(
                "{r} fetched as broker epoch {fetched}, registered now as {registered}"
            )));
        }
    }
    let removed: BTreeSet<ReplicaId> = state.isr.difference(&change.new_isr).copied().collect();
    let (_, mut elr) = shrink(state, &removed, min_insync);
    if change.new_isr.len() >= min_insync {
        elr.clear();
    }
    for r in &change.new_isr {
        elr.remove(r);
    }
    let mut next = state.clone();
    next.isr = change.new_isr.clone();
    next.elr = elr;
    next.partition_epoch += 1;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ids: &[i32]) -> BTreeSet<ReplicaId> {
        ids.iter().map(|&i| ReplicaId(i)).collect()
    }

    fn state(isr: &[i32], leader: i32) -> PartitionState {
        PartitionState {
            replicas: vec![ReplicaId(1), ReplicaId(2), ReplicaId(3)],
            isr: r(isr),
            elr: BTreeSet::new(),
            leader: Some(ReplicaId(leader)),
            leader_epoch: LeaderEpoch(5),
            partition_epoch: 10,
            adding: BTreeSet::new(),
            removing: BTreeSet::new(),
        }
    }

    /// Leader 1's change of epoch 5 to `new`, made against `partition_epoch`.
    fn isr_change(new: &[i32], partition_epoch: i32) -> IsrChange {
        IsrChange {
            leader: ReplicaId(1),
            leader_epoch: LeaderEpoch(5),
            partition_epoch,
            new_isr: r(new),
            broker_epochs: BTreeMap::new(),
        }
    }

    #[test]
    fn a_lost_leader_is_replaced_from_the_isr_with_a_new_epoch() {
        let s = state(&[1, 2, 3], 1);
        let next = on_replica_lost(&s, ReplicaId(1), &r(&[2, 3]), 2, false).unwrap();
        assert_eq!(next.leader, Some(ReplicaId(2)));
        assert_eq!(next.leader_epoch, LeaderEpoch(6));
        assert_eq!((next.isr.clone(), next.elr.clone()), (r(&[2, 3]), r(&[])));
        assert_eq!(next.partition_epoch, 11);
        // A follower lost: same leader, same leader epoch.
        let f = on_replica_lost(&next, ReplicaId(3), &r(&[2]), 2, false).unwrap();
        assert_eq!(
            (f.leader, f.leader_epoch),
            (Some(ReplicaId(2)), LeaderEpoch(6))
        );
        assert_eq!(
            (f.isr, f.elr),
            (r(&[2]), r(&[3])),
            "below min ISR: 3 joins the ELR"
        );
    }

    #[test]
    fn the_last_isr_member_goes_to_the_elr_and_leads_again_when_back() {
        let s = state(&[1], 1);
        let next = on_replica_lost(&s, ReplicaId(1), &r(&[2, 3]), 1, false).unwrap();
        assert_eq!((next.leader, next.isr.clone()), (None, r(&[])));
        assert_eq!(next.elr, r(&[1]));
        assert!(on_replica_back(&next, ReplicaId(2), &r(&[2, 3])).is_none());
        let back = on_replica_back(&next, ReplicaId(1), &r(&[1, 2, 3])).unwrap();
        assert_eq!(back.leader, Some(ReplicaId(1)));
        assert_eq!(back.leader_epoch, LeaderEpoch(7));
        assert_eq!((back.isr, back.elr), (r(&[1]), r(&[])));
        // Unclean election takes any live replica and makes it the ISR.
        let unclean = on_replica_lost(&s, ReplicaId(1), &r(&[2, 3]), 1, true).unwrap();
        assert_eq!((unclean.leader, unclean.isr), (Some(ReplicaId(2)), r(&[2])));
    }

    #[test]
    fn an_elr_member_is_elected_when_no_isr_member_is_live() {
        // min.insync.replicas=2: {1,2,3} -> 3 lost -> {1,2} -> 2 lost -> {1}, ELR {2}.
        let s = state(&[1, 2, 3], 1);
        let s = on_replica_lost(&s, ReplicaId(3), &r(&[1, 2]), 2, false).unwrap();
        assert_eq!(s.elr, r(&[]));
        let s = on_replica_lost(&s, ReplicaId(2), &r(&[1]), 2, false).unwrap();
        assert_eq!((s.isr.clone(), s.elr.clone()), (r(&[1]), r(&[2])));
        let s = on_replica_lost(&s, ReplicaId(1), &r(&[]), 2, false).unwrap();
        assert_eq!(
            (s.leader, s.isr.clone(), s.elr.clone()),
            (None, r(&[]), r(&[1, 2]))
        );
        // 3 comes back first: it may miss committed records, so it is not elected.
        assert!(on_replica_back(&s, ReplicaId(3), &r(&[3])).is_none());
        let led = on_replica_back(&s, ReplicaId(2), &r(&[2, 3])).unwrap();
        assert_eq!(led.leader, Some(ReplicaId(2)));
        assert_eq!((led.isr, led.elr), (r(&[2]), r(&[1])));
    }

    #[test]
    fn a_replica_that_lost_unflushed_records_is_no_longer_eligible() {
        let mut s = state(&[1], 1);
        s.leader = None;
        s.isr = r(&[]);
        s.elr = r(&[1, 2]);
        let next = on_replica_lost_unflushed(&s, ReplicaId(1), &r(&[1]), 2).unwrap();
        assert_eq!((next.leader, next.elr.clone()), (None, r(&[2])));
        // The only holder keeps its place: its log is the only copy left.
        s.elr = r(&[1]);
        let only = on_replica_lost_unflushed(&s, ReplicaId(1), &r(&[1]), 2).unwrap();
        assert_eq!((only.leader, only.isr), (Some(ReplicaId(1)), r(&[1])));
        // An in-sync follower that lost records leaves the ISR.
        let f = on_replica_lost_unflushed(&state(&[1, 2, 3], 1), ReplicaId(3), &r(&[1, 2, 3]), 2);
        assert_eq!(f.unwrap().isr, r(&[1, 2]));
    }

    #[test]
    fn isr_changes_are_compare_and_swap_by_the_current_leader() {
        let s = state(&[1, 2], 1);
        let change = isr_change(&[1, 2, 3], 10);
        assert!(matches!(
            apply_isr_change(&s, &change, &r(&[1, 2]), &BTreeMap::new(), 2),
            Err(IsrChangeError::InvalidIsr(_))
        ));
        let next = apply_isr_change(&s, &change, &r(&[1, 2, 3]), &BTreeMap::new(), 2).unwrap();
        assert_eq!(
            (next.isr.clone(), next.partition_epoch),
            (r(&[1, 2, 3]), 11)
        );
        assert!(matches!(
            apply_isr_change(&next, &change, &r(&[1, 2, 3]), &BTreeMap::new(), 2),
            Err(IsrChangeError::StalePartitionEpoch { .. })
        ));
        let zombie = IsrChange {
            leader_epoch: LeaderEpoch(4),
            ..change
        };
        assert!(matches!(
            apply_isr_change(&s, &zombie, &r(&[1, 2, 3]), &BTreeMap::new(), 2),
            Err(IsrChangeError::FencedLeaderEpoch { .. })
        ));
    }

    #[test]
    fn isr_shrinks_below_min_insync_fill_the_elr_and_expansions_empty_it() {
        let s = state(&[1, 2], 1);
        let change = isr_change;
        let shrunk =
            apply_isr_change(&s, &change(&[1], 10), &r(&[1, 2, 3]), &BTreeMap::new(), 2).unwrap();
        assert_eq!(shrunk.elr, r(&[2]));
        let grown = apply_isr_change(
            &shrunk,
            &change(&[1, 3], 11),
            &r(&[1, 2, 3]),
            &BTreeMap::new(),
            2,
        )
        .unwrap();
        assert_eq!((grown.isr, grown.elr), (r(&[1, 3]), r(&[])));
    }

    /// KIP-903: a replica is added only under the registration it fetched with; a fetch of a
    /// broker's previous process (stopped, restarted since) does not put it back in sync.
    #[test]
    fn an_addition_from_a_previous_registration_of_the_broker_is_refused() {
        let s = state(&[1, 2], 1);
        let change = IsrChange {
            broker_epochs: [(ReplicaId(3), 40)].into(),
            ..isr_change(&[1, 2, 3], 10)
        };
        let live = r(&[1, 2, 3]);
        let restarted = [(ReplicaId(2), 30), (ReplicaId(3), 57)].into();
        assert!(matches!(
            apply_isr_change(&s, &change, &live, &restarted, 2),
            Err(IsrChangeError::IneligibleReplica(_))
        ));
        let same = [(ReplicaId(2), 30), (ReplicaId(3), 40)].into();
        let next = apply_isr_change(&s, &change, &live, &same, 2).unwrap();
        assert_eq!(next.isr, r(&[1, 2, 3]));
        // Replicas already in the ISR are not checked again (only additions are).
        let shrink = IsrChange {
            new_isr: r(&[1, 3]),
            broker_epochs: BTreeMap::new(),
            partition_epoch: 11,
            ..change
        };
        assert!(apply_isr_change(&next, &shrink, &live, &restarted, 2).is_ok());
    }

    #[test]
    fn operator_elections_say_why_they_were_not_made() {
        let live = r(&[1, 2, 3]);
        let moved = elect_preferred(&state(&[1, 2, 3], 2), &live).unwrap();
        assert_eq!(
            (moved.leader, moved.leader_epoch),
            (Some(ReplicaId(1)), LeaderEpoch(6))
        );
        assert!(matches!(
            elect_preferred(&moved, &live),
            Err(ElectionError::NotNeeded(_))
        ));
        assert_eq!(
            elect_preferred(&state(&[2, 3], 2), &live),
            Err(ElectionError::PreferredNotAvailable(ReplicaId(1)))
        );
        // Unclean: only without a leader; any live replica then, alone in the ISR.
        assert!(matches!(
            elect_unclean(&state(&[1, 2, 3], 1), &live),
            Err(ElectionError::NotNeeded(_))
        ));
        let mut offline = state(&[], 1);
        offline.leader = None;
        offline.elr = r(&[1]);
        assert_eq!(
            elect_unclean(&offline, &r(&[])),
            Err(ElectionError::NoneEligible)
        );
        let u = elect_unclean(&offline, &r(&[3])).unwrap();
        assert_eq!((u.leader, u.isr), (Some(ReplicaId(3)), r(&[3])));
    }

    #[test]
    fn preferred_leader_comes_back_when_in_sync() {
        let s = state(&[1, 2, 3], 2);
        let next = preferred_leader_election(&s, &r(&[1, 2, 3])).unwrap();
        assert_eq!(next.leader, Some(ReplicaId(1)));
        assert!(preferred_leader_election(&state(&[2, 3], 2), &r(&[1, 2, 3])).is_none());
    }
}
