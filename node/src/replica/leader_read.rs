//! The leader's side of a follower's fetch of one partition: the follower's fetch offset is
//! its written log end, which the leader's state ([`Partition::on_follower_fetch`], the
//! `replication` crate's rules) counts toward the ISR and the high watermark; the answer says
//! whether to send records — up to the log end offset, written here or not, as Kafka's
//! leaders send what is in their page cache — a divergence to truncate to, or an error.
//!
//! Sending records a crash here could still take back is safe: the high watermark counts only
//! what this leader has written, so such records are never acknowledged nor shown to a
//! consumer, and a follower holding them keeps them only if it is elected (they were never
//! acknowledged), else truncates them as any uncommitted suffix (`DivergingEpoch`).

use iouring_log::{LeaderEpoch, Offset};
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::ResponseError;
use replication::leader::{FetchAnswer, FollowerFetch};
use replication::ReplicaId;

use crate::partition::Partition;

/// A follower fetching: its Kafka broker id, and its broker epoch (`ReplicaState.ReplicaEpoch`)
/// — sent only while it holds its lease on the cluster metadata; `Some(-1)` before Fetch v15
/// (leased, epoch unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follower {
    pub broker: i32,
    pub broker_epoch: Option<i64>,
}

/// What the leader answers a follower's fetch of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderAnswer {
    /// Records from the fetch offset up to `upto` (the log end offset).
    Records {
        upto: Offset,
        high_watermark: Offset,
        log_start_offset: Offset,
    },
    /// No records: the follower's log diverges from this one; it truncates to where the
    /// last epoch it has ends here.
    Diverging {
        epoch: Option<LeaderEpoch>,
        end_offset: Offset,
        high_watermark: Offset,
    },
    /// Refused with Kafka's error; OFFSET_OUT_OF_RANGE carries this log's end offset.
    Refused {
        error: ResponseError,
        log_end_offset: Option<Offset>,
    },
}

/// Answers `follower`'s fetch `fp` of `part`, which this shard leads.
pub fn answer(
    part: &Partition,
    fp: &FetchPartition,
    follower: Follower,
    now_ms: i64,
) -> LeaderAnswer {
    let fetch = FollowerFetch {
        replica: ReplicaId::from(crate::ids::node_of(follower.broker)),
        fetch_offset: Offset(fp.fetch_offset),
        last_fetched_epoch: (fp.last_fetched_epoch >= 0)
            .then_some(LeaderEpoch(fp.last_fetched_epoch)),
        current_leader_epoch: LeaderEpoch(fp.current_leader_epoch),
        broker_epoch: follower.broker_epoch,
    };
    match part.on_follower_fetch(fetch, now_ms) {
        FetchAnswer::Records { high_watermark } => LeaderAnswer::Records {
            upto: part.log.log_end_offset(),
            high_watermark,
            log_start_offset: part.log.log_start_offset(),
        },
        FetchAnswer::Diverging { epoch, end_offset } => LeaderAnswer::Diverging {
            epoch,
            end_offset,
            high_watermark: part.high_watermark(),
        },
        FetchAnswer::OffsetOutOfRange { log_end_offset } => LeaderAnswer::Refused {
            error: ResponseError::OffsetOutOfRange,
            log_end_offset: Some(log_end_offset),
        },
        // The read answers a fetch below the log start (with the log start offset); the
        // replica state never does.
        FetchAnswer::BelowLogStart { .. } => LeaderAnswer::Refused {
            error: ResponseError::OffsetOutOfRange,
            log_end_offset: None,
        },
        FetchAnswer::FencedLeaderEpoch => LeaderAnswer::Refused {
            error: ResponseError::FencedLeaderEpoch,
            log_end_offset: None,
        },
        FetchAnswer::UnknownLeaderEpoch => LeaderAnswer::Refused {
            error: ResponseError::UnknownLeaderEpoch,
            log_end_offset: None,
        },
        FetchAnswer::NotAReplica => LeaderAnswer::Refused {
            error: ResponseError::NotLeaderOrFollower,
            log_end_offset: None,
        },
    }
}
