//! A follower's read of one partition this shard leads: the leader's replica state answers it
//! (`replica::leader_read`); records go up to the log end offset.

use iouring_log::ReadSlice;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{EpochEndOffset, PartitionData};

use super::read::{empty_partition, read_records};
use crate::partition::Partition;
use crate::replica::leader_read::{self, Follower, LeaderAnswer};
use crate::shard::now_ms;

pub(super) async fn read(
    part: &Partition,
    fp: &FetchPartition,
    follower: Follower,
    (budget, first): (usize, bool),
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
            read_records(part, fp, (budget, first), upto, pd).await
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
