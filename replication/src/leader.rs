//! The leader's side of a partition: what its followers have (their log end offsets, learnt from
//! their fetches), the ISR and the changes it proposes, the high watermark, and whether an
//! `acks=all` produce may be accepted or answered.
//!
//! Contract (Kafka's):
//! - A follower's fetch offset is its log end offset. A fetch whose `last_fetched_epoch` does not
//!   end where the leader's log has that epoch ending gets `Diverging` instead of records; one
//!   from an older leader epoch is fenced, one from a newer epoch is told the leader does not
//!   know it yet.
//! - The high watermark is the lowest log end over the ISR, counting the leader's *written* end,
//!   frozen while the ISR is below `min.insync.replicas`; it never moves backwards.
//! - The ISR changes only through the controller: the leader proposes one change at a time
//!   ([`LeaderState::isr_proposal`]) and applies what the controller committed. A follower leaves
//!   when it has not caught up for `replica.lag.time.max.ms`, and comes back once its log end has
//!   reached the high watermark. While an addition is pending, the high watermark already waits
//!   for the added replica (Kafka's "maximal ISR"), so it is never counted as in sync too early.

use std::collections::{BTreeMap, BTreeSet};

use iouring_log::LeaderEpochCache;
use iouring_log::{LeaderEpoch, Offset};

use crate::high_watermark::{candidate, HighWatermark};
use crate::types::{IsrChange, PartitionState, ReplicaId};

/// The leader's settings for a partition.
#[derive(Debug, Clone, Copy)]
pub struct LeaderConfig {
    /// `min.insync.replicas`.
    pub min_insync: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_max_ms: i64,
    /// How long a proposed ISR change waits for the controller's answer (a newer committed
    /// state) before it is sent again (a lost request or answer).
    pub isr_change_retry_ms: i64,
}

/// An ISR change sent to the controller and not known to be settled yet: until a committed
/// state newer than the one it was made against arrives, any copy of it may still apply, so
/// the high watermark waits for the replicas it adds.
#[derive(Debug, Clone)]
struct Pending {
    change: IsrChange,
    sent_ms: i64,
}

/// A follower's fetch, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    pub replica: ReplicaId,
    /// The follower's log end offset.
    pub fetch_offset: Offset,
    /// The epoch of the follower's last record (`None`: an empty log).
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// The leader epoch the follower believes current.
    pub current_leader_epoch: LeaderEpoch,
    /// The follower's broker epoch (Fetch's `ReplicaEpoch`), sent only while it holds its own
    /// lease on the cluster metadata (`None`: it cannot reach the metadata store; a negative
    /// epoch: leased, epoch not known, as in a Fetch older than v15).
    pub broker_epoch: Option<i64>,
}

/// The leader's answer to a follower's fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchAnswer {
    /// Records from `fetch_offset` on may be sent; the leader's high watermark.
    Records { high_watermark: Offset },
    /// The follower's log diverges: `epoch` (the largest the leader has at or below the
    /// follower's last one; `None` if it has none) ends at `end_offset` in the leader's log.
    Diverging {
        epoch: Option<LeaderEpoch>,
        end_offset: Offset,
    },
    /// The follower is ahead of the leader's log end (`log_end_offset`).
    OffsetOutOfRange { log_end_offset: Offset },
    /// The follower asks for offsets below the leader's log start (`log_start_offset`): what
    /// it lacks was deleted on the leader (retention, DeleteRecords) — a replica added by a
    /// move, or one down for longer than the retention. The leader's read answers it
    /// (OFFSET_OUT_OF_RANGE with its log start offset), not [`LeaderState::on_fetch`].
    BelowLogStart { log_start_offset: Offset },
    /// The follower's leader epoch is older than the leader's (FENCED_LEADER_EPOCH).
    FencedLeaderEpoch,
    /// The follower's leader epoch is newer: this replica is no longer the leader it knows
    /// (UNKNOWN_LEADER_EPOCH).
    UnknownLeaderEpoch,
    /// Not a replica of the partition (NOT_LEADER_OR_FOLLOWER).
    NotAReplica,
}

/// Whether an `acks=all` produce that appended up to `end` may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckState {
    Ready,
    Waiting,
    /// The ISR shrank below `min.insync.replicas` while it waited
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    NotEnoughReplicasAfterAppend,
}

/// What the leader must do after the controller answered a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StillLeader {
    Yes,
    /// The committed state has another leader or epoch: step down.
    No,
}

#[derive(Debug, Clone, Copy)]
struct Progress {
    /// `None` until the follower's first fetch in this leader epoch.
    log_end: Option<Offset>,
    last_caught_up_ms: i64,
    last_fetch_ms: i64,
    /// The last fetch that came while the follower could not confirm its own lease.
    last_unleased_fetch_ms: Option<i64>,
    /// The broker epoch of the follower's last leased fetch: which registration of its broker
    /// the leader's knowledge of it comes from.
    broker_epoch: Option<i64>,
    /// The leader's log end when the follower's previous fetch arrived.
    leader_end_at_last_fetch: Offset,
}

pub struct LeaderState {
    me: ReplicaId,
    epoch: LeaderEpoch,
    /// The first epoch of this replica's unbroken run as leader: an epoch bumped for it alone
    /// (a replica removed by a move) continues the run, its log untouched in between.
    run_start: LeaderEpoch,
    partition_epoch: i32,
    replicas: Vec<ReplicaId>,
    isr: BTreeSet<ReplicaId>,
    pending: Option<Pending>,
    /// No new ISR change before this time: the last one was refused (a controller that does
    /// not see the follower live yet would otherwise be asked again at once, every tick).
    next_proposal_ms: i64,
    followers: BTreeMap<ReplicaId, Progress>,
    high_watermark: HighWatermark,
    /// The log end offset when this replica became leader: the first offset of its epoch. A
    /// leader elected cleanly holds every committed record below it, while its high watermark
    /// may still lag (it learns the true one only as followers fetch), so a follower rejoins
    /// the ISR only once it has reached this offset too (Kafka's `isFollowerInSync`).
    epoch_start: Offset,
    written_end: Offset,
    config: LeaderConfig,
}

impl LeaderState {
    /// Becomes leader of `state` (whose leader must be `me`) with the local log ending at
    /// `log_end` (its new leader epoch starts there), written up to `written_end`, and the high
    /// watermark last known (from the checkpoint or as a follower).
    pub fn new(
        me: ReplicaId,
        state: &PartitionState,
        log_end: Offset,
        written_end: Offset,
        high_watermark: Offset,
        now_ms: i64,
        config: LeaderConfig,
    ) -> LeaderState {
        assert_eq!(
            state.leader,
            Some(me),
            "becoming leader of a state led by another"
        );
        let followers = state
            .replicas
            .iter()
            .filter(|r| **r != me)
            .map(|&r| {
                let p = Progress {
                    log_end: None,
                    last_caught_up_ms: now_ms,
                    last_fetch_ms: now_ms,
                    last_unleased_fetch_ms: None,
                    broker_epoch: None,
                    leader_end_at_last_fetch: written_end,
                };
                (r, p)
            })
            .collect();
        LeaderState {
            me,
            epoch: state.leader_epoch,
            run_start: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            replicas: state.replicas.clone(),
            isr: state.isr.clone(),
            pending: None,
            next_proposal_ms: i64::MIN,
            followers,
            high_watermark: HighWatermark::new(high_watermark.min(written_end)),
            epoch_start: log_end,
            written_end,
            config,
        }
    }

    /// What `replica` last fetched from (its log end offset), if it fetched since this
    /// replica became leader.
    pub fn follower_log_end(&self, replica: ReplicaId) -> Option<Offset> {
        self.followers.get(&replica).and_then(|p| p.log_end)
    }

    pub fn epoch(&self) -> LeaderEpoch {
        self.epoch
    }

    /// Continues `previous`'s run as leader if this epoch follows its epoch directly (no other
    /// leader can have held an epoch in between): appends made in the run are still in the
    /// log, so an `acks=all` produce waiting since then may still be answered.
    pub fn continue_run(&mut self, previous: &LeaderState) {
        if previous.me == self.me && previous.epoch.0 + 1 == self.epoch.0 {
            self.run_start = previous.run_start;
        }
    }

    /// Whether this replica has led without a break since `epoch` (see [`Self::continue_run`]).
    pub fn led_since(&self, epoch: LeaderEpoch) -> bool {
        self.run_start <= epoch && epoch <= self.epoch
    }

    pub fn high_watermark(&self) -> Offset {
        self.high_watermark.get()
    }

    pub fn isr(&self) -> &BTreeSet<ReplicaId> {
        &self.isr
    }

    /// Whether every other in-sync replica fetched from this leader, in its epoch, within
    /// `window_ms` before `now_ms`, while itself unable to confirm its lease on the cluster
    /// metadata. Then the metadata store is out of reach for all of them too: etcd is down
    /// or they are cut off with this leader, and the controller can elect none of them (only
    /// an in-sync replica may be elected, unclean election aside). A leader that cannot
    /// confirm its own lease keeps taking writes only while this holds — or while it is the
    /// only in-sync replica, which no other replica can replace. A fetch that waited in a
    /// socket while this leader was paused was sent while its follower held its lease: it
    /// confirms nothing.
    pub fn followers_share_the_outage(&self, now_ms: i64, window_ms: i64) -> bool {
        self.isr.iter().filter(|r| **r != self.me).all(|r| {
            self.followers.get(r).is_some_and(|p| {
                p.last_unleased_fetch_ms
                    .is_some_and(|at| now_ms - at <= window_ms)
            })
        })
    }

    /// `acks=all` may append only while the ISR holds `min.insync.replicas` (else
    /// NOT_ENOUGH_REPLICAS before appending).
    pub fn may_accept_acks_all(&self) -> bool {
        self.isr.len() >= self.config.min_insync
    }

    pub fn ack_state(&self, end: Offset) -> AckState {
        if self.high_watermark.get() >= end {
            AckState::Ready
        } else if !self.may_accept_acks_all() {
            AckState::NotEnoughReplicasAfterAppend
        } else {
            AckState::Waiting
        }
    }

    /// The local log is written up to `written_end`; returns whether the high watermark moved.
    pub fn on_written(&mut self, written_end: Offset) -> bool {
        self.written_end = self.written_end.max(written_end);
        self.update_high_watermark()
    }

    /// Answers a follower's fetch and learns its log end offset. `epochs` and `log_end` are the
    /// leader's log's epoch cache and log end offset (appended).
    pub fn on_fetch(
        &mut self,
        fetch: FollowerFetch,
        epochs: &LeaderEpochCache,
        log_end: Offset,
        now_ms: i64,
    ) -> FetchAnswer {
        if fetch.current_leader_epoch < self.epoch {
            return FetchAnswer::FencedLeaderEpoch;
        }
        if fetch.current_leader_epoch > self.epoch {
            return FetchAnswer::UnknownLeaderEpoch;
        }
        if !self.followers.contains_key(&fetch.replica) {
            return FetchAnswer::NotAReplica;
        }
        if let Some(last) = fetch.last_fetched_epoch {
            match epochs.divergence(last, fetch.fetch_offset, log_end) {
                None => {}
                Some(Some((e, end))) => {
                    return FetchAnswer::Diverging {
                        epoch: Some(e),
                        end_offset: end.min(fetch.fetch_offset),
                    }
                }
                Some(None) => {
                    let start = epochs.entries().first().map_or(Offset(0), |&(_, s)| s);
                    return FetchAnswer::Diverging {
                        epoch: None,
                        end_offset: start,
                    };
                }
            }
        }
        if fetch.fetch_offset > log_end {
            return FetchAnswer::OffsetOutOfRange {
                log_end_offset: log_end,
            };
        }
        let p = self
            .followers
            .get_mut(&fetch.replica)
            .expect("checked above");
        if fetch.fetch_offset >= log_end {
            p.last_caught_up_ms = now_ms;
        } else if fetch.fetch_offset >= p.leader_end_at_last_fetch {
            p.last_caught_up_ms = p.last_caught_up_ms.max(p.last_fetch_ms);
        }
        p.log_end = Some(fetch.fetch_offset);
        p.last_fetch_ms = now_ms;
        match fetch.broker_epoch {
            Some(e) => p.broker_epoch = Some(e),
            None => p.last_unleased_fetch_ms = Some(now_ms),
        }
        p.leader_end_at_last_fetch = log_end;
        self.update_high_watermark();
        FetchAnswer::Records {
            high_watermark: self.high_watermark.get(),
        }
    }

    /// The ISR the high watermark waits for: the committed ISR plus any pending addition.
    fn maximal_isr(&self) -> BTreeSet<ReplicaId> {
        let mut isr = self.isr.clone();
        if let Some(p) = &self.pending {
            isr.extend(p.change.new_isr.iter().copied());
        }
        isr
    }

    fn update_high_watermark(&mut self) -> bool {
        let ends: Vec<Option<Offset>> = self
            .maximal_isr()
            .iter()
            .map(|r| {
                if *r == self.me {
                    Some(self.written_end)
                } else {
                    self.followers.get(r).and_then(|p| p.log_end)
                }
            })
            .collect();
        // Frozen below min.insync counts the committed ISR, not the maximal one.
        if self.isr.len() < self.config.min_insync {
            return false;
        }
        match candidate(&ends, 1) {
            Some(c) => self.high_watermark.advance_to(c),
            None => false,
        }
    }

    /// The ISR change to send to the controller now, if any. One change at a time: a pending
    /// one is sent again when unanswered for `isr_change_retry_ms`. Otherwise: shrink out
    /// followers that have not caught up for `replica.lag.time.max.ms`, else add followers whose
    /// log end has reached the high watermark.
    pub fn isr_proposal(&mut self, now_ms: i64) -> Option<IsrChange> {
        if let Some(p) = &mut self.pending {
            if now_ms - p.sent_ms < self.config.isr_change_retry_ms {
                return None;
            }
            p.sent_ms = now_ms;
            return Some(p.change.clone());
        }
        if now_ms < self.next_proposal_ms {
            return None;
        }
        let lag = self.config.replica_lag_max_ms;
        let lagging: Vec<ReplicaId> = self
            .isr
            .iter()
            .filter(|r| **r != self.me)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_some_and(|p| now_ms - p.last_caught_up_ms > lag)
            })
            .copied()
            .collect();
        let hw = self.high_watermark.get();
        let caught_up: Vec<ReplicaId> = self
            .replicas
            .iter()
            .filter(|r| **r != self.me && !self.isr.contains(r))
            .filter(|r| {
                self.followers.get(r).is_some_and(|p| {
                    p.log_end.is_some_and(|e| e >= hw && e >= self.epoch_start)
                        && now_ms - p.last_caught_up_ms <= lag
                })
            })
            .copied()
            .collect();
        let mut new_isr = self.isr.clone();
        let mut broker_epochs = BTreeMap::new();
        if !lagging.is_empty() {
            lagging.iter().for_each(|r| {
                new_isr.remove(r);
            });
        } else if !caught_up.is_empty() {
            for r in caught_up {
                let epoch = self.followers.get(&r).and_then(|p| p.broker_epoch);
                if let Some(e) = epoch.filter(|e| *e >= 0) {
                    broker_epochs.insert(r, e);
                }
                new_isr.insert(r);
            }
        } else {
            return None;
        }
        let change = IsrChange {
            leader: self.me,
            leader_epoch: self.epoch,
            partition_epoch: self.partition_epoch,
            new_isr,
            broker_epochs,
        };
        self.pending = Some(Pending {
            change: change.clone(),
            sent_ms: now_ms,
        });
        Some(change)
    }

    /// The controller committed `state` (after this leader's change or any other): applies its
    /// ISR and epoch if this replica still leads it. A state newer than the one the pending
    /// change was made against settles that change: applied (its ISR is in `state`) or refused
    /// for good (stale against `state`; the controller fences a refused change by committing
    /// a new partition epoch, [`crate::controller::fence_isr_proposals`]).
    pub fn on_committed(&mut self, state: &PartitionState, now_ms: i64) -> StillLeader {
        if state.leader != Some(self.me) || state.leader_epoch != self.epoch {
            return StillLeader::No;
        }
        if state.partition_epoch > self.partition_epoch {
            // A move added replicas (they fetch from nothing known yet) or removed some.
            self.followers
                .retain(|r, _| state.replicas.contains(r) && *r != self.me);
            for &r in state.replicas.iter().filter(|r| **r != self.me) {
                self.followers.entry(r).or_insert(Progress {
                    log_end: None,
                    last_caught_up_ms: now_ms,
                    last_fetch_ms: now_ms,
                    last_unleased_fetch_ms: None,
                    broker_epoch: None,
                    leader_end_at_last_fetch: self.written_end,
                });
            }
            self.replicas = state.replicas.clone();
            // Followers the controller took out (their node lost its session, or a refused
            // change) must fetch again before they count as caught up: what the leader knew of
            // them may be stale.
            for r in self.isr.difference(&state.isr) {
                if let Some(p) = self.followers.get_mut(r) {
                    p.log_end = None;
                }
            }
            if let Some(p) = self.pending.take() {
                if p.change.new_isr != state.isr {
                    self.next_proposal_ms = p.sent_ms + self.config.isr_change_retry_ms;
                }
            }
            self.isr = state.isr.clone();
            self.partition_epoch = state.partition_epoch;
            self.update_high_watermark();
        }
        StillLeader::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: LeaderConfig = LeaderConfig {
        min_insync: 2,
        replica_lag_max_ms: 1000,
        isr_change_retry_ms: 100,
    };

    fn state() -> PartitionState {
        PartitionState {
            replicas: vec![ReplicaId(1), ReplicaId(2), ReplicaId(3)],
            isr: [ReplicaId(1), ReplicaId(2), ReplicaId(3)].into(),
            elr: BTreeSet::new(),
            leader: Some(ReplicaId(1)),
            leader_epoch: LeaderEpoch(3),
            partition_epoch: 7,
            adding: BTreeSet::new(),
            removing: BTreeSet::new(),
        }
    }

    /// Replica 1 leading `state`, its log written up to 100, the high watermark last known.
    fn leader_of(state: &PartitionState, high_watermark: i64) -> LeaderState {
        LeaderState::new(
            ReplicaId(1),
            state,
            Offset(100),
            Offset(100),
            Offset(high_watermark),
            0,
            CONFIG,
        )
    }

    fn epochs() -> LeaderEpochCache {
        let mut c = LeaderEpochCache::default();
        c.assign(LeaderEpoch(1), Offset(0));
        c.assign(LeaderEpoch(3), Offset(50));
        c
    }

    fn fetch(r: i32, at: i64, last: i32) -> FollowerFetch {
        FollowerFetch {
            replica: ReplicaId(r),
            fetch_offset: Offset(at),
            last_fetched_epoch: Some(LeaderEpoch(last)),
            current_leader_epoch: LeaderEpoch(3),
            broker_epoch: Some(r.into()),
        }
    }

    /// A committed move adds replica 4 (a follower from nothing known) and later drops 3: the
    /// leader answers 4's fetches, proposes it once caught up, forgets 3. An epoch bumped for
    /// the removal alone continues the leader's run.
    #[test]
    fn a_committed_move_adds_and_removes_followers() {
        let mut l = leader_of(&state(), 100);
        let mut moving = state();
        moving.replicas.push(ReplicaId(4));
        moving.adding = [ReplicaId(4)].into();
        moving.partition_epoch += 1;
        assert_eq!(
            l.on_fetch(fetch(4, 0, 0), &epochs(), Offset(100), 1),
            FetchAnswer::NotAReplica
        );
        assert_eq!(l.on_committed(&moving, 1), StillLeader::Yes);
        assert_eq!(l.follower_log_end(ReplicaId(4)), None);
        for r in [2, 3] {
            l.on_fetch(fetch(r, 100, 3), &epochs(), Offset(100), 2);
        }
        l.on_fetch(fetch(4, 100, 3), &epochs(), Offset(100), 3);
        let change = l.isr_proposal(3).expect("4 caught up");
        assert!(change.new_isr.contains(&ReplicaId(4)));
        let mut done = moving.clone();
        done.replicas = vec![ReplicaId(1), ReplicaId(2), ReplicaId(4)];
        done.isr = done.replicas.iter().copied().collect();
        done.adding.clear();
        done.leader_epoch = LeaderEpoch(4);
        done.partition_epoch += 1;
        let mut next = LeaderState::new(
            ReplicaId(1),
            &done,
            Offset(100),
            Offset(100),
            Offset(100),
            4,
            CONFIG,
        );
        next.continue_run(&l);
        assert!(
            next.led_since(LeaderEpoch(3)),
            "epoch 3 to 4 without another leader"
        );
        assert_eq!(
            next.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 5),
            FetchAnswer::FencedLeaderEpoch,
            "the removed replica's fetch of epoch 3 is fenced"
        );
        let mut later = LeaderState::new(
            ReplicaId(1),
            &at_epoch(&done, 6),
            Offset(100),
            Offset(100),
            Offset(100),
            4,
            CONFIG,
        );
        later.continue_run(&l);
        assert!(
            !later.led_since(LeaderEpoch(3)),
            "epochs 4 and 5 may have had other leaders"
        );
    }

    /// `state` at leader epoch `epoch`.
    fn at_epoch(state: &PartitionState, epoch: i32) -> PartitionState {
        PartitionState {
            leader_epoch: LeaderEpoch(epoch),
            ..state.clone()
        }
    }

    #[test]
    fn high_watermark_is_the_lowest_isr_end_and_never_moves_back() {
        let mut l = leader_of(&state(), 40);
        assert_eq!(l.high_watermark(), Offset(40));
        l.on_fetch(fetch(2, 90, 3), &epochs(), Offset(100), 1);
        assert_eq!(l.high_watermark(), Offset(40), "3's end is unknown yet");
        l.on_fetch(fetch(3, 80, 3), &epochs(), Offset(100), 2);
        assert_eq!(l.high_watermark(), Offset(80));
        assert_eq!(l.ack_state(Offset(81)), AckState::Waiting);
        l.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 3);
        assert_eq!(l.high_watermark(), Offset(90));
        assert_eq!(l.ack_state(Offset(81)), AckState::Ready);
    }

    #[test]
    fn followers_share_the_outage_only_while_every_in_sync_one_fetches_unleased() {
        let unleased = |r, at| FollowerFetch {
            broker_epoch: None,
            ..fetch(r, at, 3)
        };
        let mut l = leader_of(&state(), 40);
        assert!(
            !l.followers_share_the_outage(0, 500),
            "no follower fetched yet"
        );
        l.on_fetch(unleased(2, 90), &epochs(), Offset(100), 100);
        assert!(
            !l.followers_share_the_outage(100, 500),
            "replica 3 has not fetched"
        );
        l.on_fetch(fetch(3, 90, 3), &epochs(), Offset(100), 300);
        assert!(
            !l.followers_share_the_outage(300, 500),
            "replica 3 holds its lease: the controller can reach it"
        );
        l.on_fetch(unleased(3, 90), &epochs(), Offset(100), 300);
        assert!(l.followers_share_the_outage(600, 500));
        assert!(
            !l.followers_share_the_outage(601, 500),
            "replica 2's last unleased fetch is older than the window"
        );
        // A fetch in a newer epoch (a follower that knows a later leader) confirms nothing.
        let mut newer = unleased(2, 90);
        newer.current_leader_epoch = LeaderEpoch(4);
        l.on_fetch(newer, &epochs(), Offset(100), 650);
        assert!(!l.followers_share_the_outage(650, 500));
        l.on_fetch(unleased(2, 90), &epochs(), Offset(100), 650);
        assert!(l.followers_share_the_outage(650, 500));
        // Alone in the ISR: no other replica can be elected.
        let mut alone = state();
        alone.isr = [ReplicaId(1)].into();
        assert!(leader_of(&alone, 40).followers_share_the_outage(0, 500));
    }

    #[test]
    fn diverging_fenced_and_unknown_epochs() {
        let mut l = leader_of(&state(), 0);
        // Epoch 2 never existed here: the follower's epoch-2 records after offset 50 diverge.
        assert_eq!(
            l.on_fetch(fetch(2, 70, 2), &epochs(), Offset(100), 1),
            FetchAnswer::Diverging {
                epoch: Some(LeaderEpoch(1)),
                end_offset: Offset(50)
            }
        );
        let mut old = fetch(2, 70, 3);
        old.current_leader_epoch = LeaderEpoch(2);
        assert_eq!(
            l.on_fetch(old, &epochs(), Offset(100), 1),
            FetchAnswer::FencedLeaderEpoch
        );
        old.current_leader_epoch = LeaderEpoch(4);
        assert_eq!(
            l.on_fetch(old, &epochs(), Offset(100), 1),
            FetchAnswer::UnknownLeaderEpoch
        );
        // Ahead of the leader in the same epoch: that epoch ends earlier here.
        assert_eq!(
            l.on_fetch(fetch(2, 120, 3), &epochs(), Offset(100), 1),
            FetchAnswer::Diverging {
                epoch: Some(LeaderEpoch(3)),
                end_offset: Offset(100)
            }
        );
        let mut no_epoch = fetch(2, 120, 3);
        no_epoch.last_fetched_epoch = None;
        assert_eq!(
            l.on_fetch(no_epoch, &epochs(), Offset(100), 1),
            FetchAnswer::OffsetOutOfRange {
                log_end_offset: Offset(100)
            }
        );
    }

    #[test]
    fn lagging_followers_leave_and_caught_up_ones_return_through_the_controller() {
        let mut l = leader_of(&state(), 0);
        l.on_fetch(fetch(2, 100, 3), &epochs(), Offset(100), 500);
        l.on_fetch(fetch(3, 60, 3), &epochs(), Offset(100), 500);
        assert_eq!(l.isr_proposal(900), None, "nobody lags 1000 ms yet");
        l.on_fetch(fetch(2, 100, 3), &epochs(), Offset(100), 1400);
        let shrink = l
            .isr_proposal(1500)
            .expect("3 has not caught up for 1500 ms");
        assert_eq!(shrink.new_isr, [ReplicaId(1), ReplicaId(2)].into());
        assert_eq!(l.isr_proposal(1500), None, "one change at a time");
        let again = l
            .isr_proposal(1600)
            .expect("unanswered for 100 ms: sent again");
        assert_eq!(again, shrink);
        let mut committed = state();
        committed.isr = shrink.new_isr.clone();
        committed.partition_epoch = 8;
        assert_eq!(l.on_committed(&committed, 0), StillLeader::Yes);
        assert_eq!(l.high_watermark(), Offset(100), "3 no longer holds it back");
        l.on_fetch(fetch(3, 90, 3), &epochs(), Offset(100), 1600);
        assert_eq!(
            l.isr_proposal(1600),
            None,
            "3 reached the high watermark but not where this leader's epoch starts"
        );
        l.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 1600);
        let expand = l.isr_proposal(1600).expect("3 caught up");
        assert_eq!(expand.new_isr.len(), 3);
        assert_eq!(
            expand.broker_epochs,
            [(ReplicaId(3), 3)].into(),
            "the added replica's broker epoch, as it fetched"
        );
        let mut other = committed.clone();
        other.leader = Some(ReplicaId(2));
        other.leader_epoch = LeaderEpoch(4);
        assert_eq!(l.on_committed(&other, 0), StillLeader::No);
    }

    /// The controller takes a dead follower out of the ISR: the leader must not propose it
    /// back on what it knew before (it has to fetch again), and after a refused change it
    /// waits `isr_change_retry_ms` before proposing again.
    #[test]
    fn a_follower_taken_out_by_the_controller_must_fetch_again_to_return() {
        let mut l = leader_of(&state(), 0);
        l.on_fetch(fetch(2, 100, 3), &epochs(), Offset(100), 10);
        l.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 10);
        let mut lost = state();
        lost.isr = [ReplicaId(1), ReplicaId(2)].into();
        lost.partition_epoch = 8;
        l.on_committed(&lost, 0);
        assert_eq!(
            l.isr_proposal(20),
            None,
            "3 was caught up, but before it left"
        );
        l.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 30);
        let expand = l.isr_proposal(30).expect("3 fetched again, caught up");
        assert_eq!(expand.new_isr.len(), 3);
        // Refused (the controller does not see 3 live yet): fenced with a new epoch.
        let mut fenced = lost.clone();
        fenced.partition_epoch = 9;
        l.on_committed(&fenced, 0);
        l.on_fetch(fetch(3, 100, 3), &epochs(), Offset(100), 40);
        assert_eq!(l.isr_proposal(40), None, "not again at once");
        assert!(l.isr_proposal(30 + CONFIG.isr_change_retry_ms).is_some());
    }

    #[test]
    fn frozen_and_not_enough_replicas_below_min_insync() {
        let mut s = state();
        s.isr = [ReplicaId(1)].into();
        let mut l = leader_of(&s, 10);
        assert!(!l.may_accept_acks_all());
        l.on_written(Offset(120));
        assert_eq!(l.high_watermark(), Offset(10));
        assert_eq!(
            l.ack_state(Offset(50)),
            AckState::NotEnoughReplicasAfterAppend
        );
    }
}
