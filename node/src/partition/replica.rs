//! A partition's replica role on this shard, driven by the metadata snapshots: the only replica
//! (replication factor 1), the leader (the `replication` crate's [`LeaderState`]: follower log
//! ends, ISR, high watermark) or a follower ([`FollowerState`]), or a replica with no leader to
//! follow (offline).
//!
//! Contract: the high watermark consumers read below and `acks=all` waits for comes from here;
//! every change that may move it (a follower's fetch, a committed ISR, a role change) notifies
//! the partition's own signal, which produce waits and long-polling fetches watch.

use iouring_log::{LeaderEpoch, Offset};
use kafka_protocol::ResponseError;
use replication::follower::{FollowerAction, FollowerState};
use replication::leader::{AckState, FetchAnswer, FollowerFetch, LeaderConfig, LeaderState};
use replication::{IsrChange, PartitionState, ReplicaId};

use super::append::Refused;
use super::Partition;
use crate::limits::ISR_CHANGE_RETRY_MS;

pub enum Role {
    /// The only replica: the high watermark is the written end.
    Single,
    Leader(Box<LeaderState>),
    Follower(FollowerState),
    /// A replica whose partition has no leader now: it neither serves nor fetches.
    Offline {
        high_watermark: Offset,
    },
}

/// What a role change needs beyond the partition state: this node and the leader's settings.
#[derive(Debug, Clone, Copy)]
pub struct RoleContext {
    pub me: ReplicaId,
    pub now_ms: i64,
    pub replica_lag_max_ms: i64,
}

impl Partition {
    /// Leads the partition (the only replica, or the replicated leader): produce and consumer
    /// fetches are served here.
    pub fn is_leader(&self) -> bool {
        matches!(*self.role.borrow(), Role::Single | Role::Leader(_))
    }

    /// Whether `replica` is in the ISR this leader holds (false when not leading).
    pub fn leads_in_sync(&self, replica: ReplicaId) -> bool {
        match &*self.role.borrow() {
            Role::Leader(l) => l.isr().contains(&replica),
            _ => false,
        }
    }

    /// The log end offset `replica` last fetched from, as this leader knows it.
    pub fn follower_log_end(&self, replica: ReplicaId) -> Option<Offset> {
        match &*self.role.borrow() {
            Role::Leader(l) => l.follower_log_end(replica),
            _ => None,
        }
    }

    /// The leader this replica follows (node) and the epoch it believes current.
    pub fn following(&self) -> Option<(ReplicaId, LeaderEpoch)> {
        match &*self.role.borrow() {
            Role::Follower(f) => Some((f.leader(), f.leader_epoch())),
            _ => None,
        }
    }

    /// Follows the committed partition state `state` (replicated partitions) or is the only
    /// replica (`None`). Returns whether the role changed.
    pub fn apply_state(&self, state: Option<&PartitionState>, cx: RoleContext) -> bool {
        let Some(state) = state else {
            let single = matches!(*self.role.borrow(), Role::Single);
            *self.role.borrow_mut() = Role::Single;
            return !single;
        };
        let hw = self.high_watermark();
        let mut role = self.role.borrow_mut();
        let changed = match (&mut *role, state.leader) {
            (Role::Leader(l), Some(leader))
                if leader == cx.me && l.epoch() == state.leader_epoch =>
            {
                l.on_committed(state, cx.now_ms);
                false
            }
            (_, Some(leader)) if leader == cx.me => {
                let config = LeaderConfig {
                    min_insync: self.min_insync_replicas(),
                    replica_lag_max_ms: cx.replica_lag_max_ms,
                    isr_change_retry_ms: ISR_CHANGE_RETRY_MS,
                };
                let log_end = self.log.log_end_offset();
                let written = self.log.written_end_offset();
                let mut l = LeaderState::new(cx.me, state, log_end, written, hw, cx.now_ms, config);
                if let Role::Leader(previous) = &*role {
                    l.continue_run(previous);
                }
                *role = Role::Leader(Box::new(l));
                true
            }
            (Role::Follower(f), Some(leader))
                if f.leader() == leader && f.leader_epoch() == state.leader_epoch =>
            {
                false
            }
            (_, Some(leader)) => {
                *role = Role::Follower(FollowerState::new(cx.me, leader, state.leader_epoch, hw));
                true
            }
            (Role::Offline { .. }, None) => false,
            (_, None) => {
                *role = Role::Offline { high_watermark: hw };
                true
            }
        };
        drop(role);
        self.notify.notify_all();
        changed
    }

    /// The high watermark: consumers read below it, `acks=all` waits for it. The only
    /// replica's is its written end; a leader's the lowest log end over the ISR (its own
    /// counting written bytes only); a follower's the leader's, up to its own log end.
    pub fn high_watermark(&self) -> Offset {
        let written = self.log.written_end_offset();
        match &mut *self.role.borrow_mut() {
            Role::Single => written,
            Role::Leader(l) => {
                l.on_written(written);
                l.high_watermark()
            }
            Role::Follower(f) => f.high_watermark(),
            Role::Offline { high_watermark } => *high_watermark,
        }
    }

    /// Whether this leader's in-sync followers, fetching within `window_ms` without a lease
    /// of their own, show that none of them can have been elected instead
    /// ([`LeaderState::followers_share_the_outage`]); the only replica always may lead.
    /// Consulted while the node cannot confirm its lease.
    pub fn followers_share_the_outage(&self, now_ms: i64, window_ms: i64) -> bool {
        match &*self.role.borrow() {
            Role::Single => true,
            Role::Leader(l) => l.followers_share_the_outage(now_ms, window_ms),
            _ => false,
        }
    }

    /// The replicas in sync with this leader, itself included.
    pub fn in_sync_replicas(&self) -> usize {
        match &*self.role.borrow() {
            Role::Leader(l) => l.isr().len(),
            _ => 1,
        }
    }

    /// A follower's fetch reached this leader: learns its log end, answers what to send.
    pub fn on_follower_fetch(&self, fetch: FollowerFetch, now_ms: i64) -> FetchAnswer {
        let before = self.high_watermark();
        // The log end offset, written or not: followers read up to it (see `Partition::appended`).
        let log_end = self.log.log_end_offset();
        let answer = match &mut *self.role.borrow_mut() {
            Role::Leader(l) => self
                .log
                .with_leader_epochs(|epochs| l.on_fetch(fetch, epochs, log_end, now_ms)),
            _ => FetchAnswer::NotAReplica,
        };
        if self.high_watermark() > before {
            self.notify.notify_all();
        }
        answer
    }

    /// The ISR change to propose to the controller now, if any (leaders only).
    pub fn isr_proposal(&self, now_ms: i64) -> Option<IsrChange> {
        match &mut *self.role.borrow_mut() {
            Role::Leader(l) => l.isr_proposal(now_ms),
            _ => None,
        }
    }

    /// What a follower does with the leader's answer (truncate a diverging log, wait for
    /// metadata); `Append` when not a follower any more (the caller checks its role first).
    pub fn follower_action(&self, answer: FetchAnswer) -> FollowerAction {
        let log_end = self.log.log_end_offset();
        match &mut *self.role.borrow_mut() {
            Role::Follower(f) => self
                .log
                .with_leader_epochs(|epochs| f.on_answer(answer, epochs, log_end)),
            _ => FollowerAction::AwaitMetadata,
        }
    }

    /// A follower's log was emptied to start at `start`.
    pub(super) fn on_follower_restarted(&self, start: Offset) {
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_restarted(start);
        }
    }

    /// A follower's appends are written; the leader's high watermark was `leader_hw`.
    pub fn on_follower_appended(&self, leader_hw: Offset) {
        let end = self.log.written_end_offset();
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_appended(leader_hw, end);
        }
    }

    /// Waits until the high watermark reaches `end` (`acks=all` on a replicated leader):
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below `min.insync.replicas`
    /// meanwhile, NOT_LEADER_OR_FOLLOWER when this replica stopped leading in `epoch` (the
    /// epoch the records were appended in: leading again later, its log may have been
    /// truncated below `end` and refilled with another leader's records).
    pub async fn wait_replicated(&self, end: Offset, epoch: LeaderEpoch) -> Result<(), Refused> {
        let lost = || {
            Refused::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "{}-{} lost its leadership (epoch {}) before offset {end} was replicated",
                    self.topic, self.index, epoch.0
                ),
            )
        };
        loop {
            let seen = self.notify.generation();
            let written = self.log.written_end_offset();
            let state = match &mut *self.role.borrow_mut() {
                Role::Single => return Ok(()),
                // A leader epoch bumped for a replica a move removed continues the run.
                Role::Leader(l) if l.led_since(epoch) => {
                    l.on_written(written);
                    l.ack_state(end)
                }
                Role::Leader(_) | Role::Follower(_) | Role::Offline { .. } => return Err(lost()),
            };
            match state {
                AckState::Ready => return Ok(()),
                AckState::NotEnoughReplicasAfterAppend => {
                    return Err(Refused::new(
                        ResponseError::NotEnoughReplicasAfterAppend,
                        format!(
                            "{}-{}: the ISR fell below min.insync.replicas {} before offset {end} was replicated",
                            self.topic, self.index, self.min_insync_replicas()
                        ),
                    ))
                }
                AckState::Waiting => self.notify.changed(seen).await,
            }
        }
    }
}
