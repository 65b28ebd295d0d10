//! Moving one member from its current assignment towards its target (Kafka's
//! `CurrentAssignmentBuilder`): partitions to give up are revoked first — the member stays at
//! its epoch until it says it no longer owns them — and a partition is given only once no other
//! member owns it.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{Assignment, CurrentAssignment, MemberState};

/// What the member said it owns (`None`: the heartbeat did not say).
pub(super) type Owned<'a> = Option<&'a Assignment>;

/// Whether `owned` still holds any of `partitions` (not knowing counts as holding).
fn owns_any(owned: Owned<'_>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        partitions
            .get(t)
            .is_some_and(|revoking| ps.iter().any(|p| revoking.contains(p)))
    })
}

/// Whether `owned` is within `assigned` (a member coming back with its previous epoch after a
/// lost answer is accepted only then).
pub(super) fn is_subset(owned: Owned<'_>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(t, ps)| {
        ps.is_empty()
            || assigned
                .get(t)
                .is_some_and(|a| ps.iter().all(|p| a.contains(p)))
    })
}

/// The member's next assignment. `owner_of(t, p)` is the member owning a partition, if any.
pub(super) fn reconcile(
    member_id: &str,
    current: &CurrentAssignment,
    target_epoch: i32,
    target: &Assignment,
    owned: Owned<'_>,
    owners: &BTreeMap<(Uuid, i32), String>,
) -> CurrentAssignment {
    if current.state == MemberState::Stable && current.member_epoch == target_epoch {
        return current.clone();
    }
    let next = |epoch: i32, assigned: &Assignment| {
        compute(
            member_id,
            current,
            epoch,
            assigned,
            target_epoch,
            target,
            owned,
            owners,
        )
    };
    match current.state {
        MemberState::Stable => next(current.member_epoch, &current.assigned),
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &current.pending_revocation) {
                current.clone()
            } else {
                next(current.member_epoch + 1, &current.assigned)
            }
        }
        MemberState::UnreleasedPartitions | MemberState::Unknown => {
            next(current.member_epoch, &current.assigned)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn compute(
    member_id: &str,
    current: &CurrentAssignment,
    epoch: i32,
    assigned_now: &Assignment,
    target_epoch: i32,
    target: &Assignment,
    owned: Owned<'_>,
    owners: &BTreeMap<(Uuid, i32), String>,
) -> CurrentAssignment {
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut pending = Assignment::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<Uuid> =
        target.keys().chain(assigned_now.keys()).copied().collect();
    let empty = Default::default();
    for t in topics {
        let want = target.get(&t).unwrap_or(&empty);
        let have = assigned_now.get(&t).unwrap_or(&empty);
        let keep: std::collections::BTreeSet<i32> = have.intersection(want).copied().collect();
        let revoke: std::collections::BTreeSet<i32> = have.difference(&keep).copied().collect();
        let mut give: std::collections::BTreeSet<i32> = want.difference(&keep).copied().collect();
        let before = give.len();
        give.retain(|p| !matches!(owners.get(&(t, *p)), Some(o) if o != member_id));
        unreleased |= give.len() != before;
        if !keep.is_empty() {
            assigned.insert(t, keep);
        }
        if !revoke.is_empty() {
            revoking.insert(t, revoke);
        }
        if !give.is_empty() {
            pending.insert(t, give);
        }
    }
    // The previous epoch is the one the member had — kept when the epoch does not move
    // (Kafka overwrites it then too, and a member that lost two answers in a row while
    // waiting for unreleased partitions is fenced until its session ends).
    let with =
        |member_epoch: i32, state: MemberState, assigned: Assignment, revoking: Assignment| {
            let previous_member_epoch = if member_epoch == current.member_epoch {
                current.previous_member_epoch
            } else {
                current.member_epoch
            };
            CurrentAssignment {
                member_epoch,
                previous_member_epoch,
                state,
                assigned,
                pending_revocation: revoking,
            }
        };
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        return with(epoch, MemberState::UnrevokedPartitions, assigned, revoking);
    }
    for (t, ps) in pending {
        assigned.entry(t).or_default().extend(ps);
    }
    let state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    with(target_epoch, state, assigned, Assignment::new())
}
