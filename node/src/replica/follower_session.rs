//! A follower fetcher's side of its incremental fetch session with a leader shard (KIP-227):
//! what the leader's session holds for each partition (what was last sent), which partitions
//! the next request must send or forget, and the partitions left out for a while after the
//! leader refused them.
//!
//! Contract: every partition the leader's session holds is one the follower still fetches —
//! a partition no longer followed, or one left out after a refusal, is sent as forgotten in
//! the next request (with the topic id it was sent under, so a deleted topic's partitions are
//! forgotten too). A leader answers a partition in error at once, so one kept in its session
//! would end every long poll at once: the follower and the leader would trade empty requests
//! and the same error as fast as the network allows.

use std::collections::BTreeMap;
use std::time::Instant;

use iouring_log::LeaderEpoch;
use kafka_protocol::messages::fetch_request::FetchPartition;

/// A partition: (topic, index).
pub type Key = (String, i32);

/// A followed partition's fetch state for the next request.
pub struct Candidate {
    pub key: Key,
    pub topic_id: uuid::Uuid,
    pub leader_epoch: LeaderEpoch,
    pub fetch: FetchPartition,
}

/// What the next request carries: the partitions to send (all on a full fetch, those whose
/// fetch state changed on an incremental one), and those to forget, each with its topic id.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub send: Vec<(uuid::Uuid, FetchPartition)>,
    pub forget: Vec<(uuid::Uuid, i32)>,
}

#[derive(Default)]
pub struct FollowerSession {
    pub id: i32,
    /// The next request's epoch: 0 asks for a new session (a full fetch).
    pub epoch: i32,
    /// What the leader's session holds: each partition's topic id and last sent state.
    sent: BTreeMap<Key, (uuid::Uuid, FetchPartition)>,
    /// Partitions the leader refused, left out of requests until the time passes or the
    /// partition's leader epoch changes (Kafka's followers delay a partition in error
    /// `replica.fetch.backoff.ms` the same way). Kept across session resets.
    delayed: BTreeMap<Key, (Instant, LeaderEpoch)>,
}

impl FollowerSession {
    /// Starts over with a new session (a full fetch next); delays stay.
    pub fn reset(&mut self) {
        self.id = 0;
        self.epoch = 0;
        self.sent.clear();
    }

    /// The leader refused `key` (an error): leave it out until `until`, or until it is
    /// followed at another leader epoch than `epoch`.
    pub fn delay(&mut self, key: &Key, epoch: LeaderEpoch, until: Instant) {
        self.delayed.insert(key.clone(), (until, epoch));
    }

    /// When the first delay left out of the last plan ends: the request's long poll should not
    /// outlast it, or the partition waits for the poll too.
    pub fn delays_end(&self) -> Option<Instant> {
        self.delayed.values().map(|&(until, _)| until).min()
    }

    /// The next request from the followed partitions' states (`followed`: every partition
    /// this fetcher follows on its leader, each once). Records what the leader's session
    /// will hold once it is answered.
    pub fn plan(&mut self, followed: Vec<Candidate>, now: Instant) -> Plan {
        let full = self.epoch == 0;
        if full {
            self.sent.clear();
        }
        let mut plan = Plan::default();
        let mut fetched = std::collections::BTreeSet::new();
        let mut delayed = BTreeMap::new();
        for c in followed {
            if let Some(&(until, epoch)) = self.delayed.get(&c.key) {
                if now < until && epoch == c.leader_epoch {
                    delayed.insert(c.key, (until, epoch));
                    continue;
                }
            }
            fetched.insert(c.key.clone());
            let same = self
                .sent
                .get(&c.key)
                .is_some_and(|(id, fp)| *id == c.topic_id && *fp == c.fetch);
            if !full && same {
                continue;
            }
            let partition = c.key.1;
            if let Some((old, _)) = self.sent.insert(c.key, (c.topic_id, c.fetch.clone())) {
                // The topic was deleted and created again under the same name.
                if old != c.topic_id {
                    plan.forget.push((old, partition));
                }
            }
            plan.send.push((c.topic_id, c.fetch));
        }
        // Delays of partitions no longer followed, or ended, go.
        self.delayed = delayed;
        let gone: Vec<Key> = self
            .sent
            .keys()
            .filter(|k| !fetched.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some((id, _)) = self.sent.remove(&key) {
                plan.forget.push((id, key.1));
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TOPIC: uuid::Uuid = uuid::Uuid::from_u128(7);

    fn followed(partitions: &[(i32, i64)], epoch: i32) -> Vec<Candidate> {
        partitions
            .iter()
            .map(|&(p, offset)| {
                let mut fetch = FetchPartition::default();
                fetch.partition = p;
                fetch.fetch_offset = offset;
                fetch.current_leader_epoch = epoch;
                Candidate {
                    key: ("t".to_owned(), p),
                    topic_id: TOPIC,
                    leader_epoch: LeaderEpoch(epoch),
                    fetch,
                }
            })
            .collect()
    }

    fn sent(plan: &Plan) -> Vec<i32> {
        plan.send.iter().map(|(_, fp)| fp.partition).collect()
    }

    /// Turns a planned request into an open session, as an answer with a session id does.
    fn answered(s: &mut FollowerSession) {
        s.id = 1;
        s.epoch += 1;
    }

    #[test]
    fn an_incremental_request_sends_what_changed_and_forgets_what_is_no_longer_followed() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        let plan = s.plan(followed(&[(0, 5), (1, 5), (2, 5)], 3), now);
        assert_eq!(sent(&plan), [0, 1, 2]);
        answered(&mut s);
        let plan = s.plan(followed(&[(0, 5), (1, 9)], 3), now);
        assert_eq!(sent(&plan), [1]);
        assert_eq!(plan.forget, [(TOPIC, 2)]);
        answered(&mut s);
        let plan = s.plan(followed(&[(0, 5), (1, 9)], 3), now);
        assert_eq!(
            plan,
            Plan::default(),
            "nothing changed: an empty incremental request"
        );
    }

    #[test]
    fn a_refused_partition_is_forgotten_for_its_delay_then_sent_whole() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        answered(&mut s);
        let key = ("t".to_owned(), 1);
        s.delay(&key, LeaderEpoch(3), now + Duration::from_millis(100));
        let plan = s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        assert_eq!(
            plan.forget,
            [(TOPIC, 1)],
            "out of the leader's session while delayed"
        );
        assert_eq!(s.delays_end(), Some(now + Duration::from_millis(100)));
        answered(&mut s);
        let plan = s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        assert_eq!(plan, Plan::default());
        answered(&mut s);
        let later = now + Duration::from_millis(100);
        let plan = s.plan(followed(&[(0, 5), (1, 5)], 3), later);
        assert_eq!(sent(&plan), [1], "back once the delay passed");
        assert_eq!(s.delays_end(), None);
    }

    #[test]
    fn a_new_leader_epoch_ends_a_delay() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        s.delay(
            &("t".to_owned(), 0),
            LeaderEpoch(3),
            now + Duration::from_secs(9),
        );
        assert!(s.plan(followed(&[(0, 5)], 3), now).send.is_empty());
        answered(&mut s);
        assert_eq!(sent(&s.plan(followed(&[(0, 5)], 4), now)), [0]);
    }

    /// The wedged-node loop (2026-12-05): a partition refused just as this shard stopped
    /// following it on that leader stayed in the leader's session — answered in error at once
    /// on every request — because the refusal had taken it out of what was sent, so nothing
    /// forgot it.
    #[test]
    fn a_partition_refused_as_it_stops_being_followed_is_forgotten() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        answered(&mut s);
        s.delay(
            &("t".to_owned(), 1),
            LeaderEpoch(3),
            now + Duration::from_millis(100),
        );
        let plan = s.plan(followed(&[(0, 5)], 3), now);
        assert_eq!(plan.forget, [(TOPIC, 1)]);
        answered(&mut s);
        assert_eq!(s.plan(followed(&[(0, 5)], 3), now), Plan::default());
    }

    #[test]
    fn a_topic_created_again_under_its_name_forgets_the_old_topic_id() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        s.plan(followed(&[(0, 5)], 3), now);
        answered(&mut s);
        let mut again = followed(&[(0, 0)], 1);
        again[0].topic_id = uuid::Uuid::from_u128(8);
        let plan = s.plan(again, now);
        assert_eq!(sent(&plan), [0]);
        assert_eq!(plan.send[0].0, uuid::Uuid::from_u128(8));
        assert_eq!(plan.forget, [(TOPIC, 0)]);
    }

    #[test]
    fn a_full_fetch_sends_every_partition_not_delayed() {
        let now = Instant::now();
        let mut s = FollowerSession::default();
        s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        answered(&mut s);
        s.delay(
            &("t".to_owned(), 0),
            LeaderEpoch(3),
            now + Duration::from_millis(100),
        );
        s.reset();
        let plan = s.plan(followed(&[(0, 5), (1, 5)], 3), now);
        assert_eq!(sent(&plan), [1]);
        assert!(
            plan.forget.is_empty(),
            "a new session holds nothing to forget"
        );
    }
}
