//! Follower fetchers: one task per (this shard, leader shard) pair, pulling every partition
//! this shard follows there with Kafka's Fetch (v15: `ReplicaState`, topic ids,
//! `LastFetchedEpoch`) over one incremental fetch session (KIP-227).
//!
//! Contract: a follower appends the leader's batches verbatim (offsets, epochs, CRCs kept),
//! rebuilds idempotent producer state from them, and fetches on only once they are written —
//! its next fetch offset is what the leader counts as in sync, so `acks=all` never counts a
//! follower's unwritten bytes — except below the leader's last answered high watermark of the
//! same epoch, where the leader counts no fetch offset ([`written_where_counted`]: a catching-up
//! replica's fetches and writes overlap). A diverging log (`DivergingEpoch`) is truncated before fetching
//! on. A task ends when this shard follows nothing on its leader shard any more. It never
//! asks again at once after an answer that came before its long poll's end with progress on
//! no partition (a partition in error is answered at once: it is left out for a while, see
//! [`super::follower_session`]). The log changes themselves are the partition's follower
//! half ([`Partition::append_as_follower`] and its neighbours in `partition/append.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use iouring_log::{Durability, LeaderEpoch, Offset};
use kafka_client::async_glommio::Connection;
use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchRequest, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::fetch_response::{FetchResponse, PartitionData};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use replication::follower::FollowerAction;
use replication::leader::FetchAnswer;

use super::follower_session::{Candidate, FollowerSession};
use crate::limits::FOLLOWER_FETCH_RETRY_DELAY;
use crate::limits::FOLLOWER_FETCH_TIMEOUT_MARGIN;
use crate::limits::FOLLOWER_THROTTLE_WAIT_MAX;
use crate::metadata::Slot;
use crate::partition::Partition;
use crate::shard::{now_ms, ShardCtx};

/// The Fetch version followers send (the first with `ReplicaState`).
const FETCH_VERSION: i16 = 15;

/// Starts a fetcher for every leader shard this shard follows a partition on and has none yet.
pub fn start_fetchers(ctx: &Rc<ShardCtx>) {
    for slot in followed_leaders(ctx) {
        if ctx.fetchers().borrow_mut().insert(slot) {
            tracing::info!(
                shard = ctx.shard(),
                leader_node = %slot.node,
                leader_shard = slot.shard,
                "starting follower fetcher"
            );
            glommio::spawn_local(run_fetcher(ctx.clone(), slot)).detach();
        }
    }
}

/// The leader shards of the partitions this shard follows.
fn followed_leaders(ctx: &ShardCtx) -> BTreeSet<Slot> {
    let snapshot = ctx.snapshot().clone();
    ctx.with_replicas(|replicas| {
        replicas
            .filter(|p| p.following().is_some())
            .filter_map(|p| snapshot.partition(&p.topic, p.index))
            .filter_map(|m| {
                m.leader.node().map(|node| Slot {
                    node,
                    shard: m.shard,
                })
            })
            .collect()
    })
}

/// A followed partition: its replica here and its topic id.
struct Followed {
    part: Rc<Partition>,
    topic_id: uuid::Uuid,
    leader_epoch: LeaderEpoch,
}

/// The partitions this shard follows on `leader`, by (topic, partition).
fn followed_on(ctx: &ShardCtx, leader: Slot) -> BTreeMap<(String, i32), Followed> {
    let snapshot = ctx.snapshot().clone();
    ctx.with_replicas(|replicas| {
        replicas
            .filter_map(|p| {
                let (_, epoch) = p.following()?;
                let topic = snapshot.topics.get(&p.topic)?;
                let meta = topic.partitions.get(usize::try_from(p.index).ok()?)?;
                let here = meta.leader.node() == Some(leader.node) && meta.shard == leader.shard;
                here.then(|| {
                    let f = Followed {
                        part: p.clone(),
                        topic_id: topic.id,
                        leader_epoch: epoch,
                    };
                    ((p.topic.clone(), p.index), f)
                })
            })
            .collect()
    })
}

async fn run_fetcher(ctx: Rc<ShardCtx>, leader: Slot) {
    let mut conn: Option<Connection> = None;
    let mut refused: Option<String> = None;
    let mut session = FollowerSession::default();
    // Per followed partition: the leader epoch and high watermark of the last answer.
    let mut leader_hw: HashMap<(String, i32), (LeaderEpoch, Offset)> = HashMap::new();
    loop {
        if ctx.stop().is_stopping() {
            break;
        }
        let followed = followed_on(&ctx, leader);
        if followed.is_empty() {
            break;
        }
        if conn.is_none() {
            match connect(&ctx, leader).await {
                Ok(c) => {
                    conn = Some(c);
                    refused = None;
                }
                Err(ConnectError::Refused(e)) => {
                    // TLS or SASL refused this broker: a configuration fault an operator must
                    // see, once for each new reason (retries repeat it every FOLLOWER_FETCH_RETRY_DELAY).
                    if refused.as_deref() != Some(e.as_str()) {
                        tracing::warn!(shard = ctx.shard(), leader = ?leader, error = %e, "the leader refused this follower's authentication (inter-broker TLS or SASL)");
                        refused = Some(e);
                    }
                    glommio::timer::sleep(FOLLOWER_FETCH_RETRY_DELAY).await;
                    continue;
                }
                Err(ConnectError::Other(e)) => {
                    tracing::debug!(shard = ctx.shard(), leader = ?leader, error = %e, "follower fetcher cannot connect");
                    glommio::timer::sleep(FOLLOWER_FETCH_RETRY_DELAY).await;
                    continue;
                }
            }
        }
        leader_hw.retain(|key, _| followed.contains_key(key));
        written_where_counted(&ctx, &followed, &leader_hw).await;
        let throttled = hold_back_throttled(&ctx, &followed, &mut session);
        let request = build_request(&ctx, &followed, &mut session);
        let asked_at = Instant::now();
        let c = conn.as_mut().expect("connected above");
        let wait = Duration::from_millis(request.max_wait_ms as u64);
        let call = async {
            Some(
                c.call::<_, FetchResponse>(ApiKey::Fetch, FETCH_VERSION, &request)
                    .await,
            )
        };
        let timeout = async {
            glommio::timer::sleep(wait + FOLLOWER_FETCH_TIMEOUT_MARGIN).await;
            None
        };
        let response = match futures_lite::future::or(call, timeout).await {
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                tracing::debug!(shard = ctx.shard(), leader = ?leader, error = %e, "follower fetch failed");
                conn = None;
                session.reset();
                glommio::timer::sleep(FOLLOWER_FETCH_RETRY_DELAY).await;
                continue;
            }
            None => {
                tracing::warn!(shard = ctx.shard(), leader = ?leader, "follower fetch timed out");
                conn = None;
                session.reset();
                continue;
            }
        };
        if response.error_code != 0 {
            // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...: start a new session.
            tracing::debug!(
                shard = ctx.shard(),
                error = response.error_code,
                "follower fetch session reset"
            );
            session.reset();
            glommio::timer::sleep(FOLLOWER_FETCH_RETRY_DELAY).await;
            continue;
        }
        if session.epoch == 0 {
            session.id = response.session_id;
        }
        session.epoch = if session.id == 0 {
            0
        } else {
            next_epoch(session.epoch)
        };
        let by_id: HashMap<(uuid::Uuid, i32), &(String, i32)> = followed
            .iter()
            .map(|(k, f)| ((f.topic_id, k.1), k))
            .collect();
        // A partition in error is left out for FOLLOWER_FETCH_RETRY_DELAY (the leader answers an error at
        // once). No progress on any partition in an answer that came before the long poll's
        // end: pause before asking again, whatever the reason.
        let (mut progressed, mut unknown) = (false, false);
        for topic in response.responses {
            for pd in topic.partitions {
                let Some(&key) = by_id.get(&(topic.topic_id, pd.partition_index)) else {
                    unknown = true;
                    continue;
                };
                let f = &followed[key];
                if throttled.contains(key) {
                    let bytes = pd.records.as_ref().map_or(0, |r| r.len());
                    let quotas = ctx.replication_quotas();
                    quotas.follower.borrow_mut().record(bytes, Instant::now());
                }
                let hw = Offset(pd.high_watermark);
                match apply_answer(&ctx, f, pd).await {
                    Applied::Progressed => {
                        progressed = true;
                        leader_hw.insert(key.clone(), (f.leader_epoch, hw));
                    }
                    Applied::Again => {}
                    Applied::Refused => {
                        session.delay(
                            key,
                            f.leader_epoch,
                            Instant::now() + FOLLOWER_FETCH_RETRY_DELAY,
                        );
                    }
                }
            }
        }
        if unknown {
            // The leader's session holds partitions this fetcher does not follow: start a
            // new one, holding exactly what it follows.
            tracing::debug!(shard = ctx.shard(), leader = ?leader, "follower fetch answered partitions not followed; new fetch session");
            session.reset();
        }
        if !progressed && asked_at.elapsed() < wait {
            // Not past the end of a delay, though: a partition held back by the replication
            // throttle is due again then (a full pause each time cost a throttled move a fifth
            // of its rate).
            let pause = session
                .delays_end()
                .map_or(FOLLOWER_FETCH_RETRY_DELAY, |end| {
                    end.saturating_duration_since(Instant::now())
                        .min(FOLLOWER_FETCH_RETRY_DELAY)
                });
            glommio::timer::sleep(pause).await;
        }
    }
    ctx.fetchers().borrow_mut().remove(&leader);
    tracing::info!(shard = ctx.shard(), leader = ?leader, "follower fetcher stopped");
}

/// Waits, partition by partition, until what was appended is written — unless its end is
/// below the high watermark the leader answered last in the same leader epoch. The next fetch
/// offset is the log end, and a leader counts a follower's fetch offset only at or past its
/// high watermark (to take it into the ISR, then to move the high watermark), which unwritten
/// records must never be; a leader's high watermark never goes back within its epoch. Below
/// it (a replica catching up: a move's new one, one back from a restart), the next fetch goes
/// out while the disk writes the last answer.
async fn written_where_counted(
    ctx: &ShardCtx,
    followed: &BTreeMap<(String, i32), Followed>,
    leader_hw: &HashMap<(String, i32), (LeaderEpoch, Offset)>,
) {
    for (key, f) in followed {
        let log = &f.part.log;
        let end = log.log_end_offset();
        if log.written_end_offset() >= end {
            continue;
        }
        let uncounted = leader_hw
            .get(key)
            .is_some_and(|&(epoch, hw)| epoch == f.leader_epoch && end < hw);
        if uncounted {
            continue;
        }
        if let Err(e) = log.wait_for(Durability::Written, end).await {
            // The log failed: its next append refuses, and the fetcher leaves it out then.
            tracing::error!(shard = ctx.shard(), topic = %key.0, partition = key.1, error = %e, "follower write failed");
        }
    }
}

/// The follower-side replication throttle: the followed partitions the topics'
/// `follower.replication.throttled.replicas` name for this broker and that are out of the ISR;
/// while this shard's follower budget is spent they are left out of requests until it refills
/// (as Kafka's fetcher leaves them out of its fetch session). Returns them: their bytes spend
/// the budget when answered.
fn hold_back_throttled(
    ctx: &ShardCtx,
    followed: &BTreeMap<(String, i32), Followed>,
    session: &mut FollowerSession,
) -> BTreeSet<(String, i32)> {
    if !followed.values().any(|f| f.part.throttled().follower) {
        return BTreeSet::new();
    }
    let snapshot = ctx.snapshot().clone();
    let me = ctx.config().node_id;
    let throttled: BTreeSet<(String, i32)> = followed
        .iter()
        .filter(|(_, f)| f.part.throttled().follower)
        .filter(|(key, _)| {
            snapshot
                .partition(&key.0, key.1)
                .is_some_and(|m| !m.isr.contains(&me))
        })
        .map(|(key, _)| key.clone())
        .collect();
    if throttled.is_empty() {
        return throttled;
    }
    let now = Instant::now();
    let quotas = ctx.replication_quotas();
    if let Some(wait) = quotas.follower.borrow_mut().wait(now) {
        let until = now + wait.min(FOLLOWER_THROTTLE_WAIT_MAX);
        for key in &throttled {
            session.delay(key, followed[key].leader_epoch, until);
        }
        quotas
            .held_back
            .set(quotas.held_back.get() + throttled.len() as u64);
    }
    throttled
}

/// Kafka's `nextEpoch`: wraps from `i32::MAX` to 1.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

enum ConnectError {
    /// The leader's TLS or SASL did not let this broker in.
    Refused(String),
    Other(String),
}

async fn connect(ctx: &ShardCtx, leader: Slot) -> Result<Connection, ConnectError> {
    let addr = ctx
        .peer_addr(leader)
        .ok_or_else(|| ConnectError::Other(format!("node {} is not live", leader.node)))?;
    Connection::connect(
        &addr,
        "ringlog-replica-fetcher",
        &ctx.config().security.inter_broker_client,
    )
    .await
    .map_err(|e| match e {
        kafka_client::ClientError::Authentication(why) => ConnectError::Refused(why),
        other => ConnectError::Other(other.to_string()),
    })
}

/// The next fetch: every followed partition not delayed on a full fetch; on an incremental
/// one only those whose fetch state changed since last sent, and those no longer fetched as
/// forgotten.
fn build_request(
    ctx: &ShardCtx,
    followed: &BTreeMap<(String, i32), Followed>,
    session: &mut FollowerSession,
) -> FetchRequest {
    let candidates = followed
        .iter()
        .map(|(key, f)| {
            let log = &f.part.log;
            let mut fp = FetchPartition::default();
            fp.partition = key.1;
            fp.current_leader_epoch = f.leader_epoch.0;
            fp.fetch_offset = log.log_end_offset().0;
            fp.last_fetched_epoch = log.latest_epoch().map_or(-1, |e| e.0);
            fp.log_start_offset = log.log_start_offset().0;
            fp.partition_max_bytes = ctx.config().replica.fetch_max_bytes;
            Candidate {
                key: key.clone(),
                topic_id: f.topic_id,
                leader_epoch: f.leader_epoch,
                fetch: fp,
            }
        })
        .collect();
    let now = Instant::now();
    let plan = session.plan(candidates, now);
    let topics = by_topic(plan.send)
        .map(|(topic_id, partitions)| {
            FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect();
    let forgotten = by_topic(plan.forget)
        .map(|(topic_id, partitions)| {
            ForgottenTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect();
    let mut req = FetchRequest::default();
    req.replica_state = ReplicaState::default()
        .with_replica_id(ctx.broker_id())
        // Kafka's ReplicaEpoch: -1 when unknown (no lease held).
        .with_replica_epoch(ctx.broker_epoch().unwrap_or(-1));
    // A partition left out comes back when its delay ends, not after a whole long poll.
    req.max_wait_ms = session
        .delays_end()
        .map_or(ctx.config().replica.fetch_wait_max_ms, |end| {
            let left = end.saturating_duration_since(now).as_millis().max(1);
            ctx.config()
                .replica
                .fetch_wait_max_ms
                .min(i32::try_from(left).unwrap_or(i32::MAX))
        });
    req.min_bytes = 1;
    req.max_bytes = ctx.config().replica.fetch_max_bytes.saturating_mul(8);
    req.session_id = session.id;
    req.session_epoch = session.epoch;
    req.topics = topics;
    req.forgotten_topics_data = forgotten;
    req
}

/// Runs of the same topic id, in order, each with its items (a request names each topic once
/// with its partitions; the plan lists them by topic).
fn by_topic<T>(items: Vec<(uuid::Uuid, T)>) -> impl Iterator<Item = (uuid::Uuid, Vec<T>)> {
    let mut runs: Vec<(uuid::Uuid, Vec<T>)> = Vec::new();
    for (topic_id, item) in items {
        match runs.last_mut() {
            Some((id, run)) if *id == topic_id => run.push(item),
            _ => runs.push((topic_id, vec![item])),
        }
    }
    runs.into_iter()
}

/// What an answer did for a partition.
enum Applied {
    /// Records appended, or nothing to do (caught up).
    Progressed,
    /// Nothing appended: the partition is no longer followed at that epoch, or its log was
    /// truncated to where it diverged (its next fetch state differs).
    Again,
    /// The leader answered an error: wait (for metadata, mostly) before fetching it again.
    Refused,
}

/// Applies the leader's answer for one partition.
async fn apply_answer(ctx: &ShardCtx, f: &Followed, pd: PartitionData) -> Applied {
    let part = &f.part;
    let Some((_, epoch)) = part.following() else {
        return Applied::Again;
    };
    if epoch != f.leader_epoch {
        return Applied::Again;
    }
    let log_end = part.log.log_end_offset();
    let answer = match ResponseError::try_from_code(pd.error_code) {
        None => {
            let d = &pd.diverging_epoch;
            if d.epoch != -1 || d.end_offset != -1 {
                Some(FetchAnswer::Diverging {
                    epoch: (d.epoch >= 0).then_some(LeaderEpoch(d.epoch)),
                    end_offset: Offset(d.end_offset.max(0)),
                })
            } else {
                None
            }
        }
        Some(ResponseError::OffsetOutOfRange) if pd.log_start_offset > log_end.0 => {
            Some(FetchAnswer::BelowLogStart {
                log_start_offset: Offset(pd.log_start_offset),
            })
        }
        Some(ResponseError::OffsetOutOfRange) => Some(FetchAnswer::OffsetOutOfRange {
            log_end_offset: Offset(pd.high_watermark.max(0)),
        }),
        Some(e) => {
            tracing::debug!(shard = ctx.shard(), topic = %part.topic, partition = part.index, error = ?e, "follower fetch refused; waiting for metadata");
            return Applied::Refused;
        }
    };
    if let Some(answer) = answer {
        match part.follower_action(answer) {
            FollowerAction::TruncateTo(to) if to < log_end => {
                if let Err(e) = part.truncate_diverging(to).await {
                    tracing::error!(topic = %part.topic, partition = part.index, error = %e, "follower truncation failed");
                    return Applied::Refused;
                }
            }
            FollowerAction::StartAt(start) => {
                if let Err(e) = part.restart_at(start, now_ms()).await {
                    tracing::error!(topic = %part.topic, partition = part.index, error = %e, "emptying the follower's log to start at the leader's log start failed");
                    return Applied::Refused;
                }
            }
            FollowerAction::TruncateTo(_)
            | FollowerAction::Append
            | FollowerAction::AwaitMetadata => {}
        }
        return Applied::Again;
    }
    let records = pd.records.unwrap_or_default();
    if let Err(e) = part.append_as_follower(&records, now_ms()).await {
        tracing::error!(topic = %part.topic, partition = part.index, error = %e, "follower append failed");
        return Applied::Refused;
    }
    part.on_follower_appended(Offset(pd.high_watermark));
    if let Err(e) = part
        .follow_log_start(Offset(pd.log_start_offset), now_ms())
        .await
    {
        tracing::error!(topic = %part.topic, partition = part.index, error = %e, "moving the follower's log start offset failed");
    }
    Applied::Progressed
}
