//! The follower's side of a partition: what to fetch next from the leader, and what to do with
//! the answer — append, truncate a diverging log, or wait for newer metadata.
//!
//! Contract (Kafka's, KIP-101/279/320):
//! - A fetch carries the follower's log end offset, the epoch of its last record and the leader
//!   epoch it believes current.
//! - On `Diverging { epoch, end_offset }` the follower truncates to the lower of `end_offset`
//!   and where that epoch (or the largest it has below it) ends in its own log, then fetches
//!   again: no replica keeps records the leader does not have.
//! - Its high watermark is the lower of the leader's and its own log end, and never moves back.

use iouring_log::LeaderEpochCache;
use iouring_log::{LeaderEpoch, Offset};

use crate::high_watermark::HighWatermark;
use crate::leader::{FetchAnswer, FollowerFetch};
use crate::types::ReplicaId;

/// What the follower must do with the leader's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerAction {
    /// Append the records the leader sent from the fetch offset.
    Append,
    /// Truncate the log to this offset, then fetch again.
    TruncateTo(Offset),
    /// Empty the log and start it at this offset, then fetch from there: everything below it
    /// is gone from the leader (Kafka's `truncateFullyAndStartAt`).
    StartAt(Offset),
    /// The leader and this follower disagree on who leads: wait for newer metadata.
    AwaitMetadata,
}

pub struct FollowerState {
    me: ReplicaId,
    leader: ReplicaId,
    leader_epoch: LeaderEpoch,
    high_watermark: HighWatermark,
}

impl FollowerState {
    pub fn new(
        me: ReplicaId,
        leader: ReplicaId,
        leader_epoch: LeaderEpoch,
        high_watermark: Offset,
    ) -> FollowerState {
        FollowerState {
            me,
            leader,
            leader_epoch,
            high_watermark: HighWatermark::new(high_watermark),
        }
    }

    pub fn leader(&self) -> ReplicaId {
        self.leader
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    pub fn high_watermark(&self) -> Offset {
        self.high_watermark.get()
    }

    /// The next fetch, from the follower's log end offset and the epoch of its last record,
    /// with the broker epoch of the follower's registration while it holds its lease on the
    /// cluster metadata.
    pub fn next_fetch(
        &self,
        log_end: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        broker_epoch: Option<i64>,
    ) -> FollowerFetch {
        FollowerFetch {
            replica: self.me,
            fetch_offset: log_end,
            last_fetched_epoch,
            current_leader_epoch: self.leader_epoch,
            broker_epoch,
        }
    }

    /// What to do with the leader's answer; `epochs` and `log_end` are the follower's own.
    pub fn on_answer(
        &mut self,
        answer: FetchAnswer,
        epochs: &LeaderEpochCache,
        log_end: Offset,
    ) -> FollowerAction {
        match answer {
            FetchAnswer::Records { .. } => FollowerAction::Append,
            FetchAnswer::Diverging { epoch, end_offset } => {
                let own_end = epoch
                    .and_then(|e| epochs.end_offset_for(e, log_end))
                    .map_or(Offset(0), |(_, end)| end);
                FollowerAction::TruncateTo(end_offset.min(own_end).min(log_end))
            }
            FetchAnswer::OffsetOutOfRange { log_end_offset } => {
                FollowerAction::TruncateTo(log_end_offset.min(log_end))
            }
            // The log start moved past this log's end: nothing here is still on the leader.
            // Otherwise (it moved meanwhile, or not that far) fetch again from the log end.
            FetchAnswer::BelowLogStart { log_start_offset } if log_start_offset > log_end => {
                FollowerAction::StartAt(log_start_offset)
            }
            FetchAnswer::BelowLogStart { .. } => FollowerAction::TruncateTo(log_end),
            FetchAnswer::FencedLeaderEpoch
            | FetchAnswer::UnknownLeaderEpoch
            | FetchAnswer::NotAReplica => FollowerAction::AwaitMetadata,
        }
    }

    /// The log was emptied and starts at `start` ([`FollowerAction::StartAt`]): the high
    /// watermark, below it, moves up to it.
    pub fn on_restarted(&mut self, start: Offset) {
        self.high_watermark.advance_to(start);
    }

    /// After appending: the follower's log ends at `log_end`; the leader said `leader_hw`.
    pub fn on_appended(&mut self, leader_hw: Offset, log_end: Offset) {
        self.high_watermark.advance_to(leader_hw.min(log_end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(pairs: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::default();
        for &(e, o) in pairs {
            c.assign(LeaderEpoch(e), Offset(o));
        }
        c
    }

    #[test]
    fn a_log_ending_below_the_leaders_start_starts_again_there() {
        let mut f = FollowerState::new(ReplicaId(4), ReplicaId(1), LeaderEpoch(3), Offset(0));
        let own = epochs(&[(1, 0)]);
        let below = FetchAnswer::BelowLogStart {
            log_start_offset: Offset(500),
        };
        assert_eq!(
            f.on_answer(below, &own, Offset(0)),
            FollowerAction::StartAt(Offset(500))
        );
        assert_eq!(
            f.on_answer(below, &own, Offset(120)),
            FollowerAction::StartAt(Offset(500))
        );
        // The start was already reached (an answer from before a restart): fetch on.
        assert_eq!(
            f.on_answer(below, &own, Offset(500)),
            FollowerAction::TruncateTo(Offset(500))
        );
        f.on_restarted(Offset(500));
        assert_eq!(f.high_watermark(), Offset(500));
    }

    #[test]
    fn diverging_truncates_to_the_lower_end_of_the_epoch() {
        let mut f = FollowerState::new(ReplicaId(2), ReplicaId(1), LeaderEpoch(3), Offset(0));
        // The follower wrote epoch 2 records from 50 to 70; the leader's epoch 1 ends at 50.
        let own = epochs(&[(1, 0), (2, 50)]);
        let answer = FetchAnswer::Diverging {
            epoch: Some(LeaderEpoch(1)),
            end_offset: Offset(50),
        };
        assert_eq!(
            f.on_answer(answer, &own, Offset(70)),
            FollowerAction::TruncateTo(Offset(50))
        );
        // The leader's epoch ends later than the follower's own copy of it: keep only what the
        // follower has.
        let answer = FetchAnswer::Diverging {
            epoch: Some(LeaderEpoch(2)),
            end_offset: Offset(90),
        };
        let own = epochs(&[(1, 0), (2, 50), (3, 60)]);
        assert_eq!(
            f.on_answer(answer, &own, Offset(70)),
            FollowerAction::TruncateTo(Offset(60))
        );
    }

    #[test]
    fn high_watermark_follows_the_leader_up_to_its_own_end() {
        let mut f = FollowerState::new(ReplicaId(2), ReplicaId(1), LeaderEpoch(3), Offset(5));
        f.on_appended(Offset(100), Offset(40));
        assert_eq!(f.high_watermark(), Offset(40));
        f.on_appended(Offset(30), Offset(40));
        assert_eq!(f.high_watermark(), Offset(40), "never back");
        let fetch = f.next_fetch(Offset(40), Some(LeaderEpoch(3)), Some(7));
        assert_eq!(
            (fetch.fetch_offset, fetch.current_leader_epoch),
            (Offset(40), LeaderEpoch(3))
        );
    }
}
