//! Leader elections an operator asks for (Kafka's ElectLeaders, `kafka-leader-election`): the
//! preferred replica back to leadership, or an unclean election for a partition left with no
//! leader. The rules are the `replication` crate's ([`elect_preferred`], [`elect_unclean`]);
//! the control plane saves what changed in one compare-and-swap.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use replication::controller::{elect_preferred, elect_unclean, ElectionError};
use replication::ReplicaId;

use super::snapshot::Snapshot;
use crate::error::Refused;

/// Kafka's election types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

impl ElectionType {
    /// From ElectLeaders' `ElectionType` (0 preferred, 1 unclean).
    pub fn from_wire(t: i8) -> Option<ElectionType> {
        match t {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// A partition, `(topic, index)`.
pub type Key = (String, i32);

/// Each partition's outcome, in order.
pub type Outcomes = Vec<(Key, Result<(), Refused>)>;

/// Runs `kind` elections on `partitions` (`None`: every partition, and those needing none are
/// left out of the answer, as Kafka does); the outcomes and whether anything changed.
pub fn apply_elections(
    snapshot: &mut Snapshot,
    kind: ElectionType,
    partitions: Option<&[Key]>,
    live: &BTreeSet<ReplicaId>,
) -> (Outcomes, bool) {
    let all = partitions.is_none();
    let keys: Vec<Key> = match partitions {
        Some(p) => p.to_vec(),
        None => snapshot
            .topics
            .values()
            .flat_map(|t| (0..t.partitions.len() as i32).map(|p| (t.name.clone(), p)))
            .collect(),
    };
    let mut changed = false;
    let mut out = Vec::new();
    for key in keys {
        let outcome = elect_one(snapshot, &key, kind, live);
        changed |= outcome.is_ok();
        let not_needed = matches!(&outcome, Err(r) if r.error == ResponseError::ElectionNotNeeded);
        if !(all && not_needed) {
            out.push((key, outcome));
        }
    }
    (out, changed)
}

fn elect_one(
    snapshot: &mut Snapshot,
    (topic, p): &Key,
    kind: ElectionType,
    live: &BTreeSet<ReplicaId>,
) -> Result<(), Refused> {
    let meta = snapshot
        .topics
        .get_mut(topic)
        .and_then(|t| t.partitions.get_mut(usize::try_from(*p).ok()?))
        .ok_or_else(|| {
            Refused::new(
                ResponseError::UnknownTopicOrPartition,
                format!("{topic}-{p} does not exist"),
            )
        })?;
    if !meta.is_replicated() {
        return Err(Refused::new(
            ResponseError::ElectionNotNeeded,
            format!("{topic}-{p} has one replica"),
        ));
    }
    let state = meta.state();
    let next = match kind {
        ElectionType::Preferred => elect_preferred(&state, live),
        ElectionType::Unclean => elect_unclean(&state, live),
    }
    .map_err(|e| {
        let code = match e {
            ElectionError::NotNeeded(_) => ResponseError::ElectionNotNeeded,
            ElectionError::PreferredNotAvailable(_) => ResponseError::PreferredLeaderNotAvailable,
            ElectionError::NoneEligible => ResponseError::EligibleLeadersNotAvailable,
        };
        Refused::new(code, format!("{topic}-{p}: {e}"))
    })?;
    tracing::info!(topic, partition = p, ?kind, leader = ?next.leader.map(|r| r.0), leader_epoch = next.leader_epoch.0, "leader elected on request");
    meta.apply_state(&next);
    Ok(())
}
