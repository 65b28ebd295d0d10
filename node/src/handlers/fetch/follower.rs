//! A follower's read of one partition this shard leads: the leader's replica state answers it
//! (`replica::leader_read`); records go up to the log end offset. A partition the topic's
//! `leader.replication.throttled.replicas` names for this broker, fetched by a follower out of
//! the ISR, spends this shard's leader budget, and is answered without records while it is
//! spent (Kafka's leader-side replication throttle).

use iouring_log::ReadSlice;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{EpochEndOffset, PartitionData};

use super::read::{empty_partition, read_records};
use crate::partition::Partition;
use crate::replica::leader_read::{self, Follower, LeaderAnswer};
use crate::replica::throttle::ReplicationQuotas;
use crate::shard::now_ms;
use replication::ReplicaId;
use std::time::Instant;

pub(super) async fn read(
    part: &Partition,
    fp: &FetchPartition,
    follower: Follower,
    (budget, first): (usize, bool),
    quotas: &ReplicationQuotas,
) -> (PartitionData, Vec<ReadSlice>) {
    let mut pd = empty_partition(fp.partition);
    match leader_read::answer(part, fp, follower, now_ms()) {
        LeaderAnswer::Records {
            upto,
            high_watermark,
            log_start_offset,
        } => {
            pd.high_watermark = high_watermark.0;
            pd.last_stable_offset = high_watermark.0;
            pd.log_start_offset = log_start_offset.0;
            let replica = ReplicaId::from(crate::ids::node_of(follower.broker));
            let throttled = part.throttled().leader && !part.leads_in_sync(replica);
            if !throttled {
                return read_records(part, fp, (budget, first), upto, pd).await;
            }
            let now = Instant::now();
            if quotas.leader.borrow_mut().wait(now).is_some() {
                quotas.held_back.set(quotas.held_back.get() + 1);
                return (pd, Vec::new());
            }
            let (pd, slices) = read_records(part, fp, (budget, first), upto, pd).await;
            let bytes = slices.iter().map(ReadSlice::len).sum();
            quotas.leader.borrow_mut().record(bytes, Instant::now());
            (pd, slices)
        }
        LeaderAnswer::Diverging {
            epoch,
            end_offset,
            high_watermark,
        } => {
            pd.diverging_epoch = EpochEndOffset::default()
                .with_epoch(epoch.map_or(-1, |e| e.0))
                .with_end_offset(end_offset.0);
            pd.high_watermark = high_watermark.0;
            (pd, Vec::new())
        }
        LeaderAnswer::Refused {
            error,
            log_end_offset,
        } => {
            if let Some(end) = log_end_offset {
                pd.high_watermark = end.0;
            }
            pd.error_code = error.code();
            (pd, Vec::new())
        }
    }
}
