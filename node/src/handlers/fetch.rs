//! Fetch: reads from the logs this shard owns and long-polls until `min_bytes` are available
//! or `max_wait_ms` passes, woken as soon as anything is appended on the shard. Record bytes
//! are not copied into the response: they are sent from the segment files (`sendfile`) or from
//! the logs' in-memory tails (see `server::response`).

use std::rc::Rc;
use std::time::{Duration, Instant};

use iouring_log::{LeaderEpoch, Offset, ReadError, ReadOptions, ReadSlice};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;

use crate::error::HandlerError;
use crate::limits::FETCH_MAX_WAIT_MS;
use crate::server::response::{records_placeholder, GapBuf, Outgoing, RECORDS_PLACEHOLDER_MAX};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    req: FetchRequest,
    version: i16,
) -> Result<Outgoing, HandlerError> {
    let deadline =
        Instant::now() + Duration::from_millis(req.max_wait_ms.clamp(0, FETCH_MAX_WAIT_MS) as u64);
    loop {
        let seen = ctx.data_arrived.generation();
        let (resp, records, total, errors) = read_once(ctx, &req, version).await;
        let now = Instant::now();
        if total >= req.min_bytes.max(0) as usize
            || now >= deadline
            || errors
            || ctx.stop.is_stopping()
        {
            let mut body = GapBuf::default();
            resp.encode(&mut body, version)
                .map_err(|e| HandlerError::Encode(e.to_string()))?;
            return Ok(Outgoing::from_gaps(body, records));
        }
        let wait = async {
            ctx.data_arrived.changed(seen).await;
        };
        let timeout = async {
            glommio::timer::sleep(deadline - now).await;
        };
        futures_lite::future::or(wait, timeout).await;
    }
}

/// One pass over the requested partitions: the response, the record slices of each non-empty
/// partition in order, the bytes found, and whether any partition had an error.
async fn read_once(
    ctx: &ShardCtx,
    req: &FetchRequest,
    version: i16,
) -> (FetchResponse, Vec<Vec<ReadSlice>>, usize, bool) {
    let mut resp = FetchResponse::default();
    let mut records = Vec::new();
    let mut total = 0usize;
    let mut errors = false;
    let max_bytes = req.max_bytes.max(0) as usize;
    // A follower's fetch (replica id >= 0; in ReplicaState from v15): no partition here has
    // followers yet, so each answers NOT_LEADER_OR_FOLLOWER, as Kafka answers a broker that is
    // not one of a partition's replicas.
    let replica_id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    for topic in &req.topics {
        let mut tr = FetchableTopicResponse::default();
        tr.topic = topic.topic.clone();
        tr.topic_id = topic.topic_id;
        // From v13 topics are named by id.
        let name = if version >= 13 {
            ctx.topic_name_of(topic.topic_id)
        } else {
            Some(topic.topic.0.to_string())
        };
        let refused = match &name {
            None => Some(ResponseError::UnknownTopicId),
            Some(_) if replica_id >= 0 => Some(ResponseError::NotLeaderOrFollower),
            Some(_) => None,
        };
        if let Some(e) = refused {
            for fp in &topic.partitions {
                let mut pd = empty_partition(fp.partition);
                pd.error_code = e.code();
                tr.partitions.push(pd);
            }
            errors = true;
            resp.responses.push(tr);
            continue;
        }
        let name = name.expect("refused above");
        for fp in &topic.partitions {
            let budget = max_bytes.saturating_sub(total);
            let (pd, slices) = read_partition(ctx, &name, fp, budget, total == 0, version).await;
            errors |= pd.error_code != 0;
            let len: usize = slices.iter().map(ReadSlice::len).sum();
            if len > 0 {
                total += len;
                records.push(slices);
            }
            tr.partitions.push(pd);
        }
        resp.responses.push(tr);
    }
    (resp, records, total, errors)
}

/// A partition's answer before anything is known: no offsets, no records.
fn empty_partition(index: i32) -> PartitionData {
    let mut pd = PartitionData::default();
    pd.partition_index = index;
    pd.high_watermark = -1;
    pd.last_stable_offset = -1;
    pd.log_start_offset = -1;
    pd.preferred_read_replica = BrokerId(-1);
    pd
}

async fn read_partition(
    ctx: &ShardCtx,
    topic: &str,
    fp: &FetchPartition,
    budget: usize,
    first: bool,
    version: i16,
) -> (PartitionData, Vec<ReadSlice>) {
    let mut pd = empty_partition(fp.partition);
    let Some(part) = ctx.partition(topic, fp.partition) else {
        let e = ctx.not_served(topic, fp.partition);
        pd.error_code = e.code();
        return (pd, Vec::new());
    };
    if version >= 9 {
        if let Err(e) = ctx.check_current_epoch(&part, fp.current_leader_epoch) {
            pd.error_code = e.code();
            return (pd, Vec::new());
        }
    }
    let hw = part.high_watermark();
    pd.high_watermark = hw.0;
    pd.last_stable_offset = hw.0;
    if version >= 5 {
        pd.log_start_offset = part.log.log_start_offset().0;
    }
    if version >= 12 && fp.last_fetched_epoch >= 0 {
        let last = LeaderEpoch(fp.last_fetched_epoch);
        if let Some(diverging) = part.log.divergence(last, Offset(fp.fetch_offset)) {
            // The fetcher's log diverges from this one: no records, only where to truncate.
            let (epoch, end) = diverging.map_or((-1, -1), |(e, o)| (e.0, o.0));
            pd.diverging_epoch = EpochEndOffset::default()
                .with_epoch(epoch)
                .with_end_offset(end);
            return (pd, Vec::new());
        }
    }
    let limit = (fp.partition_max_bytes.max(0) as usize)
        .min(budget)
        .min(RECORDS_PLACEHOLDER_MAX);
    let opts = ReadOptions {
        max_bytes: limit,
        max_offset: Some(hw),
        min_one_batch: first,
    };
    match part.log.read(Offset(fp.fetch_offset), opts).await {
        Ok(r) => {
            let mut slices = r.slices;
            let len: usize = slices.iter().map(ReadSlice::len).sum();
            if len > RECORDS_PLACEHOLDER_MAX {
                slices.clear();
                pd.error_code = ResponseError::RecordListTooLarge.code();
            }
            let len: usize = slices.iter().map(ReadSlice::len).sum();
            pd.records = Some(records_placeholder(len));
            (pd, slices)
        }
        Err(ReadError::OffsetOutOfRange { .. }) => {
            pd.error_code = ResponseError::OffsetOutOfRange.code();
            (pd, Vec::new())
        }
        Err(e) => {
            tracing::error!(topic, partition = fp.partition, error = %e, "read failed");
            pd.error_code = ResponseError::KafkaStorageError.code();
            (pd, Vec::new())
        }
    }
}
