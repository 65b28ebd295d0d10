//! A consumer's incremental fetch in a session (KIP-227): reads only the session's partitions
//! marked as moved — asked at a new position, new to the session, or whose progress signal
//! moved since their last answer was told — and answers those with something to say. The
//! session's record ([`Moved`]) is subscribed once to each partition's progress, so a request
//! over a thousand quiet partitions costs what moved, not what the session holds, and a long
//! poll waits on that one record instead of registering on every partition.
//!
//! The marks a request takes are its to settle: a partition with nothing to read (the fetch
//! position at the high watermark) whose answer was told or unchanged is left unmarked; one
//! answered with records, an error or a divergence, or left with records unread because the
//! response was full, is marked again (its next answer is not known); if the request ends
//! without answering (the connection closed) or the session changed under it, all it took are
//! marked again.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use iouring_log::Moved;
use iouring_log::ReadSlice;
use kafka_protocol::messages::fetch_response::FetchResponse;

use super::sessions::{SessionTopic, Wanted};
use super::{push_answer, read_wanted, told, topic_name, FetchOrigin, Fetcher, PartitionRead};
use crate::handlers::authorized::authorized;
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::ShardCtx;

/// An incremental fetch of a consumer's session, served from its record of what moved.
pub(super) struct Incremental<'a> {
    pub session_id: i32,
    /// The consumer and its isolation level.
    pub origin: FetchOrigin,
    /// The session's partitions as `FetchSessions::begin` returned them.
    pub wanted: &'a Rc<Vec<Wanted>>,
    pub moved: Rc<Moved>,
    /// Each topic of the session with its name ([`readable`]).
    pub topics: Vec<(SessionTopic, Rc<str>)>,
}

/// The session's topics with their names when every one is known (by id from v13) and the
/// client may read it; `None` otherwise (the request is then served by reading every
/// partition, which answers the errors).
pub(super) fn readable(
    ctx: &ShardCtx,
    client: &Client,
    topics: &[SessionTopic],
    by_topic_id: bool,
) -> Option<Vec<(SessionTopic, Rc<str>)>> {
    topics
        .iter()
        .map(|(topic, id)| {
            let name = topic_name(ctx, (topic, *id), by_topic_id)?;
            authorized(ctx, client, Operation::Read, ResourceType::Topic, &name)
                .then(|| ((topic.clone(), *id), name))
        })
        .collect()
}

/// The marks a request took and has not settled: marked again if it ends without settling.
struct Taken {
    moved: Rc<Moved>,
    tokens: Vec<u32>,
}

impl Drop for Taken {
    fn drop(&mut self) {
        for &t in &self.tokens {
            self.moved.mark(t);
        }
    }
}

impl Incremental<'_> {
    /// Reads what moved until `min_bytes` are read, `deadline` passes, an answer carries an
    /// error or the shard stops; the response and the record bytes of its partitions.
    pub(super) async fn serve(
        &self,
        ctx: &ShardCtx,
        (max_bytes, min_bytes, version): (usize, usize, i16),
        deadline: Instant,
    ) -> (FetchResponse, Vec<Vec<ReadSlice>>) {
        let mut taken = Taken {
            moved: self.moved.clone(),
            tokens: Vec::new(),
        };
        // By position in the session, so the response follows its order.
        let mut reads: BTreeMap<usize, PartitionRead> = BTreeMap::new();
        loop {
            let seen = self.moved.signal().generation();
            let moved = self.moved.take();
            taken.tokens.extend_from_slice(&moved);
            let mut total: usize = reads.values().map(PartitionRead::bytes).sum();
            let mut errors = reads.values().any(|r| r.data.error_code != 0);
            for token in moved {
                let i = token as usize;
                let Some(w) = self.wanted.get(i) else {
                    continue;
                };
                let before = reads.remove(&i).map_or(0, |r| r.bytes());
                total -= before;
                let name = self
                    .topics
                    .iter()
                    .find(|((t, id), _)| *t == w.topic && *id == w.topic_id)
                    .map(|(_, name)| name.clone());
                let fetcher = Fetcher {
                    origin: self.origin,
                    first: total == 0,
                    version,
                };
                let budget = max_bytes.saturating_sub(total);
                let read = read_wanted(
                    ctx,
                    w,
                    (name.as_deref(), true),
                    (budget, fetcher),
                    Some((&self.moved, token)),
                )
                .await;
                total += read.bytes();
                errors |= read.data.error_code != 0;
                reads.insert(i, read);
            }
            let now = Instant::now();
            if total >= min_bytes || now >= deadline || errors || ctx.stop().is_stopping() {
                return self.respond(ctx, reads, taken);
            }
            // Nothing to answer yet: wait until a partition of the session moves.
            let wait = self.moved.signal().changed(seen);
            let timeout = async {
                glommio::timer::sleep(deadline - now).await;
            };
            futures_lite::future::or(wait, timeout).await;
        }
    }

    /// The response: the partitions read that have something to tell; settles the marks
    /// taken.
    fn respond(
        &self,
        ctx: &ShardCtx,
        reads: BTreeMap<usize, PartitionRead>,
        mut taken: Taken,
    ) -> (FetchResponse, Vec<Vec<ReadSlice>>) {
        let mut resp = FetchResponse::default();
        resp.session_id = self.session_id;
        let mut records = Vec::new();
        let mut again = Vec::new();
        {
            let mut sessions = ctx.fetch_sessions().borrow_mut();
            let mut answering = sessions.answering(self.session_id, self.wanted);
            if answering.is_some() {
                taken.tokens.clear();
            }
            for (i, PartitionRead { data, slices, .. }) in reads {
                let (sent, news) = told(&data, &slices);
                let answer = match answering.as_mut() {
                    Some(a) => a.must_answer(i, (sent, news)),
                    // The session is gone or changed under this request: answer all read.
                    None => true,
                };
                // Records, an error, or records left unread (the response was full): its next
                // answer is not known, read it again.
                let w = &self.wanted[i];
                if news || w.fetch.fetch_offset < data.high_watermark {
                    again.push(i as u32);
                }
                if !answer {
                    continue;
                }
                push_answer(&mut resp, w, data);
                if !slices.is_empty() {
                    records.push(slices);
                }
            }
        }
        for t in again {
            self.moved.mark(t);
        }
        (resp, records)
    }
}
