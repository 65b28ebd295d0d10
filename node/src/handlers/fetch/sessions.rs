//! Incremental fetch sessions (Kafka's KIP-227), one cache per shard (each shard is a broker).
//!
//! A fetcher that names many partitions sends them once: the first request (session epoch 0)
//! creates a session holding every partition and its fetch position; later requests (epochs
//! 1, 2, …) name only the partitions whose position changed (and those to forget), and the
//! response carries only the partitions with something new — records, a moved high watermark
//! or log start offset, an error, a divergence. Epoch -1 closes the session (or fetches without
//! one). Pure bookkeeping, no I/O: the Fetch handler reads the logs. The session also tracks
//! which partitions need reading ([`Moved`]): a partition whose last answer found nothing new
//! and was told stays unmarked until its progress signal moves (or the fetcher asks it
//! differently), so a request over a thousand quiet partitions reads, and answers, only those
//! that moved.
//!
//! Contract (Kafka's `FetchManager`):
//! - an unknown session id gets FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
//!   INVALID_FETCH_SESSION_EPOCH, both at the top level and with no partitions; the session
//!   stays as it was (the fetcher starts a new one);
//! - a session created by a request naming topics by id (v13+) takes only such requests, and the
//!   other way round (FETCH_SESSION_TOPIC_ID_ERROR);
//! - at most [`FETCH_SESSIONS_MAX`] sessions per shard; when full, the least recently used one
//!   idle for [`FETCH_SESSION_EVICTION_IDLE`] makes room, else the request is served without a
//!   session (session id 0), as Kafka does.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use iouring_log::Moved;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::TopicName;
use kafka_protocol::ResponseError;

use crate::limits::{FETCH_SESSIONS_MAX, FETCH_SESSION_EVICTION_IDLE};

/// A partition of a fetch: its topic as the request named it, and where to read.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub topic: TopicName,
    pub topic_id: uuid::Uuid,
    pub fetch: FetchPartition,
}

impl Wanted {
    fn key(&self) -> (TopicName, uuid::Uuid, i32) {
        (self.topic.clone(), self.topic_id, self.fetch.partition)
    }
}

/// What the last response told the fetcher about a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// What the session knows of one partition besides its [`Wanted`].
#[derive(Default)]
struct Slot {
    sent: Option<Sent>,
}

type Key = (TopicName, uuid::Uuid, i32);

struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    by_topic_id: bool,
    /// The partitions in the session's order, shared with the requests reading them (a
    /// request of a thousand partitions does not copy them).
    wanted: Rc<Vec<Wanted>>,
    /// Per partition, in the same order.
    slots: Vec<Slot>,
    /// Each partition's position in `wanted`.
    index: HashMap<Key, usize>,
    /// The session's topics, each once, in the order first named.
    topics: Rc<Vec<SessionTopic>>,
    /// The partitions (by position in `wanted`) to read at the next request: their answer
    /// is not known to be told and unchanged. Replaced when positions shift (forgetting).
    moved: Rc<Moved>,
    last_used: Instant,
}

/// A topic of a session as its requests name it.
pub type SessionTopic = (TopicName, uuid::Uuid);

impl Session {
    fn new(by_topic_id: bool, partitions: Vec<(Wanted, Sent)>, now: Instant) -> Self {
        let (wanted, slots): (Vec<Wanted>, Vec<Slot>) = partitions
            .into_iter()
            .map(|(w, sent)| (w, Slot { sent: Some(sent) }))
            .unzip();
        let mut session = Session {
            next_epoch: 1,
            by_topic_id,
            wanted: Rc::new(wanted),
            slots,
            index: HashMap::new(),
            topics: Rc::default(),
            moved: Rc::default(),
            last_used: now,
        };
        session.reindex();
        session
    }

    /// After positions shifted: the index, the topics, and every partition to be read.
    fn reindex(&mut self) {
        self.index = self
            .wanted
            .iter()
            .enumerate()
            .map(|(i, w)| (w.key(), i))
            .collect();
        let mut topics: Vec<SessionTopic> = Vec::new();
        for w in self.wanted.iter() {
            add_topic(&mut topics, w);
        }
        self.topics = Rc::new(topics);
        self.moved = Rc::default();
        self.moved.mark_all(self.wanted.len() as u32);
    }

    /// Applies an incremental request: new positions, new partitions, forgotten ones.
    fn apply(&mut self, partitions: &[Wanted], forgotten: &[Key]) {
        if partitions.is_empty() && forgotten.is_empty() {
            return;
        }
        let wanted = Rc::make_mut(&mut self.wanted);
        for w in partitions {
            match self.index.get(&w.key()) {
                Some(&i) => {
                    wanted[i] = w.clone();
                    // Asked differently: read it again.
                    self.moved.mark(i as u32);
                }
                None => {
                    let i = wanted.len();
                    self.index.insert(w.key(), i);
                    add_topic(Rc::make_mut(&mut self.topics), w);
                    wanted.push(w.clone());
                    self.slots.push(Slot::default());
                    self.moved.mark(i as u32);
                }
            }
        }
        if !forgotten.is_empty() {
            let keep: Vec<bool> = wanted
                .iter()
                .map(|w| !forgotten.contains(&w.key()))
                .collect();
            let mut kept = keep.iter();
            wanted.retain(|_| kept.next().is_some_and(|&k| k));
            let mut kept = keep.iter();
            self.slots.retain(|_| kept.next().is_some_and(|&k| k));
            self.reindex();
        }
    }
}

/// Adds `w`'s topic to `topics` unless it is there.
fn add_topic(topics: &mut Vec<SessionTopic>, w: &Wanted) {
    if !topics
        .iter()
        .any(|(t, id)| *t == w.topic && *id == w.topic_id)
    {
        topics.push((w.topic.clone(), w.topic_id));
    }
}

/// How this request is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Context {
    /// Every partition of the request, no session (epoch -1, or v4–v6).
    Sessionless,
    /// Every partition of the request; a session is created from them when the response is
    /// made (epoch 0).
    Full,
    /// The session's partitions; only the changed ones are answered.
    Incremental { session_id: i32 },
    /// Refused at the top level with this error.
    Error(ResponseError),
}

#[derive(Default)]
pub struct FetchSessions {
    sessions: HashMap<i32, Session>,
    last_id: i32,
}

/// A fetch request's session fields and partitions.
pub struct SessionRequest<'a> {
    pub session_id: i32,
    pub epoch: i32,
    pub by_topic_id: bool,
    pub partitions: &'a [Wanted],
    /// `(topic, topic id, partition)` to drop from the session.
    pub forgotten: &'a [(TopicName, uuid::Uuid, i32)],
}

/// An incremental response being made in a session (see [`FetchSessions::answering`]).
pub struct Answering<'a> {
    session: &'a mut Session,
}

impl Answering<'_> {
    /// Whether the response must carry the partition at `index` in the session, given what it
    /// would say; records it as sent if so.
    pub fn must_answer(&mut self, index: usize, (now, has_news): (Sent, bool)) -> bool {
        let Some(slot) = self.session.slots.get_mut(index) else {
            return true;
        };
        let answer = has_news || slot.sent != Some(now);
        if answer {
            slot.sent = Some(now);
        }
        answer
    }
}

impl FetchSessions {
    /// Decides how `req` is served and, for an incremental request, applies its changes to the
    /// session. Returns the context and the partitions to read, in order.
    pub fn begin(&mut self, req: &SessionRequest<'_>, now: Instant) -> (Context, Rc<Vec<Wanted>>) {
        if req.epoch == -1 || req.epoch == 0 {
            if req.session_id != 0 {
                self.sessions.remove(&req.session_id);
            }
            let context = if req.epoch == 0 {
                Context::Full
            } else {
                Context::Sessionless
            };
            return (context, Rc::new(req.partitions.to_vec()));
        }
        let refused = |e| (Context::Error(e), Rc::default());
        let Some(session) = self.sessions.get_mut(&req.session_id) else {
            return refused(ResponseError::FetchSessionIdNotFound);
        };
        if session.next_epoch != req.epoch {
            return refused(ResponseError::InvalidFetchSessionEpoch);
        }
        if session.by_topic_id != req.by_topic_id {
            return refused(ResponseError::FetchSessionTopicIdError);
        }
        session.apply(req.partitions, req.forgotten);
        session.next_epoch = next_epoch(session.next_epoch);
        session.last_used = now;
        (
            Context::Incremental {
                session_id: req.session_id,
            },
            session.wanted.clone(),
        )
    }

    /// The session's bookkeeping for an incremental response to a request that read `wanted`
    /// (as [`FetchSessions::begin`] returned it); `None` when the session is gone or its
    /// partitions changed meanwhile (closed, or changed by a request on another connection
    /// while this one long-polled): answer every partition then.
    pub fn answering(
        &mut self,
        session_id: i32,
        wanted: &Rc<Vec<Wanted>>,
    ) -> Option<Answering<'_>> {
        self.sessions
            .get_mut(&session_id)
            .filter(|session| Rc::ptr_eq(&session.wanted, wanted))
            .map(|session| Answering { session })
    }

    /// The session's record of partitions to read and its topics, for a request that read
    /// `wanted` (as [`FetchSessions::begin`] returned it); `None` as for
    /// [`FetchSessions::answering`].
    pub fn moved(
        &self,
        session_id: i32,
        wanted: &Rc<Vec<Wanted>>,
    ) -> Option<(Rc<Moved>, Rc<Vec<SessionTopic>>)> {
        self.sessions
            .get(&session_id)
            .filter(|session| Rc::ptr_eq(&session.wanted, wanted))
            .map(|session| (session.moved.clone(), session.topics.clone()))
    }

    /// Creates a session for a full request's partitions (what each response said is `sent`);
    /// its id, or 0 when no room is left.
    pub fn create(
        &mut self,
        by_topic_id: bool,
        partitions: Vec<(Wanted, Sent)>,
        now: Instant,
    ) -> i32 {
        if self.sessions.len() >= FETCH_SESSIONS_MAX && !self.evict_one(now) {
            return 0;
        }
        let id = loop {
            self.last_id = if self.last_id == i32::MAX {
                1
            } else {
                self.last_id + 1
            };
            if !self.sessions.contains_key(&self.last_id) {
                break self.last_id;
            }
        };
        self.sessions
            .insert(id, Session::new(by_topic_id, partitions, now));
        id
    }

    fn evict_one(&mut self, now: Instant) -> bool {
        let idle = self
            .sessions
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_used) >= FETCH_SESSION_EVICTION_IDLE)
            .min_by_key(|(_, s)| s.last_used)
            .map(|(&id, _)| id);
        idle.is_some_and(|id| self.sessions.remove(&id).is_some())
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

/// Kafka's `nextEpoch`: wraps from `i32::MAX` to 1 (0 and -1 are reserved).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn wanted(topic: &str, p: i32, offset: i64) -> Wanted {
        let mut fetch = FetchPartition::default();
        fetch.partition = p;
        fetch.fetch_offset = offset;
        Wanted {
            topic: TopicName(StrBytes::from_string(topic.into())),
            topic_id: uuid::Uuid::nil(),
            fetch,
        }
    }

    fn req<'a>(id: i32, epoch: i32, parts: &'a [Wanted]) -> SessionRequest<'a> {
        SessionRequest {
            session_id: id,
            epoch,
            by_topic_id: false,
            partitions: parts,
            forgotten: &[],
        }
    }

    const SENT: Sent = Sent {
        high_watermark: 10,
        last_stable_offset: 10,
        log_start_offset: 0,
    };

    #[test]
    fn a_session_lives_through_epochs_and_answers_only_changes() {
        let now = Instant::now();
        let mut s = FetchSessions::default();
        let all = [wanted("a", 0, 5), wanted("a", 1, 7)];
        let (ctx, parts) = s.begin(&req(0, 0, &all), now);
        assert_eq!((ctx, parts.len()), (Context::Full, 2));
        let id = s.create(
            false,
            parts.iter().map(|w| (w.clone(), SENT)).collect(),
            now,
        );
        assert!(id > 0);
        // Epoch 1 names only partition 1's new position; both stay in the session.
        let moved = [wanted("a", 1, 9)];
        let (ctx, parts) = s.begin(&req(id, 1, &moved), now);
        assert_eq!(ctx, Context::Incremental { session_id: id });
        let offsets: Vec<i64> = parts.iter().map(|w| w.fetch.fetch_offset).collect();
        assert_eq!(offsets, vec![5, 9]);
        assert!(
            !s.answering(id, &parts)
                .unwrap()
                .must_answer(0, (SENT, false)),
            "nothing new"
        );
        assert!(
            s.answering(id, &parts)
                .unwrap()
                .must_answer(1, (SENT, true)),
            "records"
        );
        let moved_hw = Sent {
            high_watermark: 11,
            ..SENT
        };
        assert!(
            s.answering(id, &parts)
                .unwrap()
                .must_answer(0, (moved_hw, false)),
            "the high watermark moved"
        );
        assert!(
            !s.answering(id, &parts)
                .unwrap()
                .must_answer(0, (moved_hw, false)),
            "and was told"
        );
        // A wrong epoch or id is refused and changes nothing.
        assert_eq!(
            s.begin(&req(id, 1, &[]), now).0,
            Context::Error(ResponseError::InvalidFetchSessionEpoch)
        );
        assert_eq!(
            s.begin(&req(id + 1, 2, &[]), now).0,
            Context::Error(ResponseError::FetchSessionIdNotFound)
        );
        // Forgetting a partition; then epoch -1 closes the session.
        let forget = [(
            TopicName(StrBytes::from_static_str("a")),
            uuid::Uuid::nil(),
            0,
        )];
        let r = SessionRequest {
            forgotten: &forget,
            ..req(id, 2, &[])
        };
        let (_, parts) = s.begin(&r, now);
        assert_eq!(parts.len(), 1);
        assert_eq!(s.begin(&req(id, -1, &all), now).0, Context::Sessionless);
        assert!(s.is_empty());
        let mut by_id = req(0, 0, &all);
        by_id.by_topic_id = true;
        s.begin(&by_id, now);
        let id = s.create(true, vec![], now);
        assert_eq!(
            s.begin(&req(id, 1, &[]), now).0,
            Context::Error(ResponseError::FetchSessionTopicIdError)
        );
    }

    #[test]
    fn the_session_marks_what_must_be_read_again() {
        let now = Instant::now();
        let mut s = FetchSessions::default();
        let all = [wanted("a", 0, 5), wanted("a", 1, 7), wanted("b", 0, 1)];
        let id = s.create(false, all.iter().map(|w| (w.clone(), SENT)).collect(), now);
        let (_, first) = s.begin(&req(id, 1, &[]), now);
        let (moved, topics) = s.moved(id, &first).unwrap();
        assert_eq!(
            moved.take(),
            vec![0, 1, 2],
            "a new session reads everything"
        );
        assert_eq!(topics.len(), 2, "a and b, once each");
        // Epoch 2 names nothing new: nothing to read.
        let (_, parts) = s.begin(&req(id, 2, &[]), now);
        assert!(Rc::ptr_eq(&parts, &first));
        assert!(moved.take().is_empty());
        // Epoch 3 moves a-1 and adds c-0: those two.
        let (_, parts) = s.begin(&req(id, 3, &[wanted("a", 1, 8), wanted("c", 0, 0)]), now);
        assert!(
            s.moved(id, &first).is_none(),
            "a stale request may not use the record"
        );
        let (same, topics) = s.moved(id, &parts).unwrap();
        assert!(Rc::ptr_eq(&same, &moved), "positions did not shift");
        assert_eq!(moved.take(), vec![1, 3]);
        assert_eq!(topics.len(), 3);
        // Epoch 4 forgets b-0: positions shift, a new record marks everything.
        let forget = [(
            TopicName(StrBytes::from_static_str("b")),
            uuid::Uuid::nil(),
            0,
        )];
        let r = SessionRequest {
            forgotten: &forget,
            ..req(id, 4, &[])
        };
        let (_, parts) = s.begin(&r, now);
        let (fresh, topics) = s.moved(id, &parts).unwrap();
        assert!(!Rc::ptr_eq(&fresh, &moved));
        assert_eq!(fresh.take(), vec![0, 1, 2]);
        assert_eq!(topics.len(), 2, "b is gone");
        // The index follows the forgetting: a new position for a-1 updates it, no duplicate.
        let (_, parts) = s.begin(&req(id, 5, &[wanted("a", 1, 9)]), now);
        let offsets: Vec<i64> = parts.iter().map(|w| w.fetch.fetch_offset).collect();
        assert_eq!(offsets, vec![5, 9, 0]);
        assert_eq!(fresh.take(), vec![1]);
    }

    #[test]
    fn a_full_cache_evicts_only_sessions_idle_long_enough() {
        let start = Instant::now();
        let mut s = FetchSessions::default();
        for _ in 0..FETCH_SESSIONS_MAX {
            assert!(s.create(false, vec![], start) > 0);
        }
        assert_eq!(
            s.create(false, vec![], start),
            0,
            "full, nobody idle: no session"
        );
        let later = start + FETCH_SESSION_EVICTION_IDLE;
        assert!(s.create(false, vec![], later) > 0, "an idle one made room");
        assert_eq!(s.len(), FETCH_SESSIONS_MAX);
    }

    #[test]
    fn epochs_wrap_past_the_maximum_to_one() {
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(1), 2);
    }
}
