//! Fetch: reads from the logs this shard owns and long-polls until `min_bytes` are available
//! or `max_wait_ms` passes, woken when a partition it read moves (and then re-reading only the
//! partitions that moved). A consumer's incremental fetch in a session reads only the
//! session's partitions that moved since they were last told ([`incremental`]). Record bytes
//! are not copied into the response: they are written to the socket from the read cache's
//! chunks (segment files read with O_DIRECT on the shard's io_uring, never `sendfile` on a
//! helper thread) or from the logs' in-memory tails (see `server::response`).
//!
//! Consumers and followers share this handler and the log read ([`read`]) and nothing else: a
//! consumer reads below the high watermark ([`consumer`]); a follower's fetch is answered by
//! the leader's replica state ([`follower`], on `replica::leader_read`) up to the log end.

mod consumer;
mod follower;
mod incremental;
mod read;
pub mod sessions;

use crate::handlers::authorized::{authorized, on_cluster};
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;
use std::time::{Duration, Instant};

use iouring_log::ReadSlice;
use iouring_log::{AnyChanged, Moved, Notify};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest};
use kafka_protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;

use crate::error::HandlerError;
use crate::limits::FETCH_MAX_WAIT_MS;
use crate::partition::Partition;
use crate::replica::leader_read::Follower;
use crate::server::response::{GapBuf, Outgoing};
use crate::shard::ShardCtx;
use read::empty_partition;
use sessions::{Context, Sent, SessionRequest, Wanted};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: FetchRequest,
    version: i16,
) -> Result<Outgoing, HandlerError> {
    let deadline =
        Instant::now() + Duration::from_millis(req.max_wait_ms.clamp(0, FETCH_MAX_WAIT_MS) as u64);
    let by_topic_id = version >= 13;
    let asked: Vec<Wanted> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Wanted {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                fetch: p.clone(),
            })
        })
        .collect();
    // Sessions exist from v7 on.
    let (context, wanted) = if version >= 7 {
        let forgotten: Vec<(TopicName, uuid::Uuid, i32)> = req
            .forgotten_topics_data
            .iter()
            .flat_map(|f| {
                f.partitions
                    .iter()
                    .map(|&p| (f.topic.clone(), f.topic_id, p))
            })
            .collect();
        let session = SessionRequest {
            session_id: req.session_id,
            epoch: req.session_epoch,
            by_topic_id,
            partitions: &asked,
            forgotten: &forgotten,
        };
        ctx.fetch_sessions()
            .borrow_mut()
            .begin(&session, Instant::now())
    } else {
        (Context::Sessionless, Rc::new(asked))
    };
    if let Context::Error(e) = context {
        let mut resp = FetchResponse::default();
        resp.error_code = e.code();
        return encode_response(&resp, Vec::new(), version);
    }
    let origin = FetchOrigin::of(&req, version);
    let max_bytes = req.max_bytes.max(0) as usize;
    let min_bytes = req.min_bytes.max(0) as usize;
    // A consumer's incremental fetch reads only what moved, while every topic of its session
    // is known and readable (else every partition is read, and its error answered).
    let session = match &context {
        Context::Incremental { session_id } if !origin.is_follower() => ctx
            .fetch_sessions()
            .borrow()
            .moved(*session_id, &wanted)
            .map(|m| (*session_id, m)),
        _ => None,
    };
    if let Some((session_id, (moved, topics))) = &session {
        if let Some(topics) = incremental::readable(ctx, client, topics, by_topic_id) {
            let fetch = incremental::Incremental {
                session_id: *session_id,
                origin,
                wanted: &wanted,
                moved: moved.clone(),
                topics,
            };
            let (mut resp, records) = fetch
                .serve(ctx, (max_bytes, min_bytes, version), deadline)
                .await;
            charge(ctx, client, origin, &mut resp, &records);
            return encode_response(&resp, records, version);
        }
    }
    let names = topic_names(ctx, &wanted, by_topic_id);
    // Consumers need READ on each topic; followers CLUSTER_ACTION on the cluster (Kafka's
    // rules), else every partition is TOPIC_AUTHORIZATION_FAILED.
    let follower_allowed =
        !origin.is_follower() || on_cluster(ctx, client, Operation::ClusterAction);
    // Decided once per topic (consecutive partitions share the name's `Rc`).
    let mut allowed: Vec<bool> = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let same_topic = i > 0
            && match (&names[i - 1], n) {
                (Some(a), Some(b)) => Rc::ptr_eq(a, b),
                _ => false,
            };
        let ok = if same_topic {
            allowed[i - 1]
        } else {
            follower_allowed
                && (origin.is_follower()
                    || n.as_deref().is_none_or(|n| {
                        authorized(ctx, client, Operation::Read, ResourceType::Topic, n)
                    }))
        };
        allowed.push(ok);
    }
    let mut previous = None;
    loop {
        let (read, total, errors) = read_once(
            ctx,
            (&wanted, &names, &allowed),
            origin,
            (max_bytes, version),
            previous.take(),
        )
        .await;
        let now = Instant::now();
        if total >= min_bytes || now >= deadline || errors || ctx.stop().is_stopping() {
            let (mut resp, records) = respond(ctx, (&context, by_topic_id), &wanted, read);
            charge(ctx, client, origin, &mut resp, &records);
            // Every partition was read and answered here, none told through the session's
            // record of what moved: the next incremental request reads them all.
            if let Some((_, (moved, _))) = &session {
                moved.mark_all(wanted.len() as u32);
            }
            return encode_response(&resp, records, version);
        }
        // Nothing to answer yet: wait for any partition read to move past what this pass saw;
        // the next pass re-reads only those that moved.
        let wait = AnyChanged::new(
            read.iter()
                .flat_map(PartitionRead::signals)
                .cloned()
                .collect(),
        );
        let timeout = async {
            glommio::timer::sleep(deadline - now).await;
        };
        futures_lite::future::or(wait, timeout).await;
        previous = Some(read);
    }
}

/// A consumer's fetch counts against its `consumer_byte_rate` quota (followers' fetches have
/// replication quotas of their own): the answer carries the throttle, and the connection waits
/// it out before reading the consumer's next request.
fn charge(
    ctx: &ShardCtx,
    client: &Client,
    origin: FetchOrigin,
    resp: &mut FetchResponse,
    records: &[Vec<ReadSlice>],
) {
    if origin.is_follower() {
        return;
    }
    let bytes: usize = records.iter().flatten().map(ReadSlice::len).sum();
    let throttle = ctx.charge_quota(
        client,
        crate::quotas::QuotaKey::ConsumerByteRate,
        bytes as f64,
    );
    resp.throttle_time_ms = resp.throttle_time_ms.max(throttle as i32);
}

fn encode_response(
    resp: &FetchResponse,
    records: Vec<Vec<ReadSlice>>,
    version: i16,
) -> Result<Outgoing, HandlerError> {
    let mut body = GapBuf::default();
    resp.encode(&mut body, version)
        .map_err(|e| HandlerError::Encode(e.to_string()))?;
    Ok(Outgoing::from_gaps(body, records))
}

/// A fetch's partitions, each one's topic name (`None`: an unknown topic id) and whether the
/// client may read it.
type Asked<'a> = (&'a [Wanted], &'a [Option<Rc<str>>], &'a [bool]);

/// One partition's answer, in the order of the partitions read.
struct PartitionRead {
    data: PartitionData,
    slices: Vec<ReadSlice>,
    /// The served partition's progress signal and its generation before it was read: what a
    /// long poll waits on.
    progress: Option<(Rc<Notify>, u64)>,
    /// For a follower's read, the partition's appended signal and its generation before it
    /// was read: followers read up to the log end offset, so an append is news to them.
    appended: Option<(Rc<Notify>, u64)>,
}

impl PartitionRead {
    /// Whether its partition's progress (or, for a follower, appended) signal moved since it
    /// was read (or it has none): a pass after a long-poll wake-up reads again only these.
    fn moved(&self) -> bool {
        self.progress.is_none()
            || self
                .signals()
                .any(|(notify, seen)| notify.generation() != *seen)
    }

    /// The signals a long poll waits on for this partition, each with the generation seen.
    fn signals(&self) -> impl Iterator<Item = &(Rc<Notify>, u64)> {
        self.progress.iter().chain(&self.appended)
    }

    fn bytes(&self) -> usize {
        self.slices.iter().map(ReadSlice::len).sum()
    }
}

/// The response from what was read: every partition for a full or sessionless fetch (a full
/// one creating the session), only those with news for an incremental one.
fn respond(
    ctx: &ShardCtx,
    (context, by_topic_id): (&Context, bool),
    wanted: &Rc<Vec<Wanted>>,
    read: Vec<PartitionRead>,
) -> (FetchResponse, Vec<Vec<ReadSlice>>) {
    let mut resp = FetchResponse::default();
    let mut records = Vec::new();
    let mut sessions = ctx.fetch_sessions().borrow_mut();
    let mut answering = match context {
        Context::Incremental { session_id } => sessions.answering(*session_id, wanted),
        _ => None,
    };
    let mut sent_all = Vec::new();
    for (i, (w, r)) in wanted.iter().zip(read).enumerate() {
        let PartitionRead { data, slices, .. } = r;
        let (sent, news) = told(&data, &slices);
        let answer = match (context, answering.as_mut()) {
            (Context::Incremental { .. }, Some(a)) => a.must_answer(i, (sent, news)),
            (Context::Full, _) => {
                sent_all.push((w.clone(), sent));
                true
            }
            _ => true,
        };
        if !answer {
            continue;
        }
        push_answer(&mut resp, w, data);
        if !slices.is_empty() {
            records.push(slices);
        }
    }
    resp.session_id = match context {
        Context::Incremental { session_id } => *session_id,
        Context::Full => {
            let partitions = sent_all.len();
            let id = sessions.create(by_topic_id, sent_all, Instant::now());
            tracing::debug!(session_id = id, partitions, "fetch session created");
            id
        }
        Context::Sessionless | Context::Error(_) => 0,
    };
    (resp, records)
}

/// What an answer tells the fetcher (the offsets a session remembers) and whether it has news
/// that must be answered whatever the session remembers (records, an error, a divergence).
fn told(data: &PartitionData, slices: &[ReadSlice]) -> (Sent, bool) {
    let sent = Sent {
        high_watermark: data.high_watermark,
        last_stable_offset: data.last_stable_offset,
        log_start_offset: data.log_start_offset,
    };
    let news =
        !slices.is_empty() || data.error_code != 0 || data.diverging_epoch != Default::default();
    (sent, news)
}

/// Adds a partition's answer to the response, under its topic (the last one when it is the
/// same).
fn push_answer(resp: &mut FetchResponse, w: &Wanted, data: PartitionData) {
    let same_topic = resp
        .responses
        .last()
        .is_some_and(|t: &FetchableTopicResponse| t.topic == w.topic && t.topic_id == w.topic_id);
    if !same_topic {
        let mut tr = FetchableTopicResponse::default();
        tr.topic = w.topic.clone();
        tr.topic_id = w.topic_id;
        resp.responses.push(tr);
    }
    resp.responses
        .last_mut()
        .expect("pushed above")
        .partitions
        .push(data);
}

/// Each wanted partition's topic name, resolved once per request (not per long-poll pass) and
/// shared by consecutive partitions of one topic: from v13 topics are named by id.
fn topic_names(ctx: &ShardCtx, wanted: &[Wanted], by_topic_id: bool) -> Vec<Option<Rc<str>>> {
    let mut names: Vec<Option<Rc<str>>> = Vec::with_capacity(wanted.len());
    for (i, w) in wanted.iter().enumerate() {
        let same_topic = i > 0 && {
            let before = &wanted[i - 1];
            if by_topic_id {
                before.topic_id == w.topic_id
            } else {
                before.topic == w.topic
            }
        };
        let name = if same_topic {
            names[i - 1].clone()
        } else {
            topic_name(ctx, (&w.topic, w.topic_id), by_topic_id)
        };
        names.push(name);
    }
    names
}

/// A topic's name as the request names it, or by its id from v13 (`None`: an unknown id).
fn topic_name(
    ctx: &ShardCtx,
    (topic, id): (&TopicName, uuid::Uuid),
    by_topic_id: bool,
) -> Option<Rc<str>> {
    if by_topic_id {
        ctx.topic_name_of(id).map(Rc::from)
    } else {
        Some(Rc::from(topic.0.as_str()))
    }
}

/// One pass over the fetch's partitions: `(answers, record bytes, any error)`. With the
/// answers of the pass before a long-poll wake-up (`previous`), only the partitions whose
/// progress moved since are read again and the others' answers kept: a consumer of a thousand
/// quiet partitions is woken by each append to any of them, and re-reading all of them on
/// every wake-up was what kept a node of 10 000 partitions busy. (A pass that met an error
/// answered at once, so no answer carried over holds one.)
async fn read_once(
    ctx: &ShardCtx,
    (wanted, names, allowed): Asked<'_>,
    origin: FetchOrigin,
    (max_bytes, version): (usize, i16),
    previous: Option<Vec<PartitionRead>>,
) -> (Vec<PartitionRead>, usize, bool) {
    let mut kept: Vec<Option<PartitionRead>> = previous
        .map(|p| p.into_iter().map(|r| (!r.moved()).then_some(r)).collect())
        .unwrap_or_default();
    let kept_bytes: usize = kept.iter().flatten().map(PartitionRead::bytes).sum();
    let mut out = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    let mut errors = false;
    for (i, ((w, name), &allowed)) in wanted.iter().zip(names).zip(allowed).enumerate() {
        if let Some(r) = kept.get_mut(i).and_then(Option::take) {
            out.push(r);
            continue;
        }
        let budget = max_bytes.saturating_sub(total + kept_bytes);
        let fetcher = Fetcher {
            origin,
            first: total + kept_bytes == 0,
            version,
        };
        let read = read_wanted(ctx, w, (name.as_deref(), allowed), (budget, fetcher), None).await;
        errors |= read.data.error_code != 0;
        total += read.bytes();
        out.push(read);
    }
    (out, total + kept_bytes, errors)
}

/// Reads one wanted partition under its topic's name (`None`: an unknown topic id) if the
/// fetcher may read the topic, with `budget` bytes left in the response; `watch`: subscribe
/// the session's record of what moved to the partition's progress first.
async fn read_wanted(
    ctx: &ShardCtx,
    w: &Wanted,
    (name, allowed): (Option<&str>, bool),
    (budget, fetcher): (usize, Fetcher),
    watch: Option<(&Rc<Moved>, u32)>,
) -> PartitionRead {
    let index = w.fetch.partition;
    let served = name.map(|name| (name, ctx.partition(name, index)));
    let (data, slices, progress, appended) = match served {
        _ if !allowed => {
            let mut data = empty_partition(index);
            data.error_code = ResponseError::TopicAuthorizationFailed.code();
            (data, Vec::new(), None, None)
        }
        Some((_, Some(part))) => {
            if let Some((moved, token)) = watch {
                moved.watch(token, part.progress());
            }
            let progress = (part.progress().clone(), part.progress().generation());
            let appended = fetcher
                .origin
                .is_follower()
                .then(|| (part.appended().clone(), part.appended().generation()));
            let (data, slices) = read_partition(ctx, &part, &w.fetch, budget, fetcher).await;
            (data, slices, Some(progress), appended)
        }
        Some((name, None)) => {
            let mut data = empty_partition(index);
            data.error_code = ctx.not_served(name, index).code();
            (data, Vec::new(), None, None)
        }
        None => {
            let mut data = empty_partition(index);
            data.error_code = ResponseError::UnknownTopicId.code();
            (data, Vec::new(), None, None)
        }
    };
    PartitionRead {
        data,
        slices,
        progress,
        appended,
    }
}

/// Who fetches: a consumer, or a follower replicating this broker's partitions (replica id
/// >= 0: its broker id, in `ReplicaState` from v15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchOrigin {
    Consumer(Isolation),
    Follower(Follower),
}

/// A consumer's `isolation_level` (v4+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Records below the high watermark.
    ReadUncommitted,
    /// Records below the last stable offset, with the aborted transactions among them.
    ReadCommitted,
}

impl FetchOrigin {
    fn of(req: &FetchRequest, version: i16) -> FetchOrigin {
        let (id, broker_epoch) = if version >= 15 {
            let epoch = req.replica_state.replica_epoch;
            // Our followers send their broker epoch only while they hold their lease.
            (
                req.replica_state.replica_id.0,
                (epoch >= 0).then_some(epoch),
            )
        } else {
            (req.replica_id.0, Some(-1))
        };
        if id < 0 {
            FetchOrigin::Consumer(if version >= 4 && req.isolation_level == 1 {
                Isolation::ReadCommitted
            } else {
                Isolation::ReadUncommitted
            })
        } else {
            FetchOrigin::Follower(Follower {
                broker: id,
                broker_epoch,
            })
        }
    }

    fn is_follower(self) -> bool {
        matches!(self, FetchOrigin::Follower(_))
    }
}

/// Who fetches, and whether this partition is the first of the response (KIP-74: its first
/// batch is sent whole).
#[derive(Clone, Copy)]
struct Fetcher {
    origin: FetchOrigin,
    first: bool,
    version: i16,
}

/// Reads `part`, which this shard leads, for one partition of a fetch.
async fn read_partition(
    ctx: &ShardCtx,
    part: &Partition,
    fp: &FetchPartition,
    budget: usize,
    fetcher: Fetcher,
) -> (PartitionData, Vec<ReadSlice>) {
    match fetcher.origin {
        FetchOrigin::Follower(follower) => {
            let quotas = ctx.replication_quotas();
            follower::read(part, fp, follower, (budget, fetcher.first), quotas).await
        }
        FetchOrigin::Consumer(isolation) => {
            let how = (budget, fetcher.first, isolation);
            consumer::read(ctx, part, fp, how, fetcher.version).await
        }
    }
}
