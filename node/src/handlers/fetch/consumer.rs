//! A consumer's read of one partition this shard leads: fenced by `CurrentLeaderEpoch` (v9+),
//! checked for divergence by `LastFetchedEpoch` (v12+), then records below the high watermark
//! — only what a crash cannot take back — or, for `read_committed`, below the last stable
//! offset, with the aborted transactions overlapping what it read.

use iouring_log::{LeaderEpoch, Offset, ReadSlice};
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, EpochEndOffset, PartitionData};
use kafka_protocol::messages::ProducerId;

use super::read::{empty_partition, read_records};
use super::Isolation;
use crate::partition::Partition;
use crate::shard::ShardCtx;

pub(super) async fn read(
    ctx: &ShardCtx,
    part: &Partition,
    fp: &FetchPartition,
    (budget, first, isolation): (usize, bool, Isolation),
    version: i16,
) -> (PartitionData, Vec<ReadSlice>) {
    let mut pd = empty_partition(fp.partition);
    if version >= 9 {
        if let Err(e) = ctx.check_current_epoch(part, fp.current_leader_epoch) {
            pd.error_code = e.code();
            return (pd, Vec::new());
        }
    }
    let hw = part.high_watermark();
    let lso = part.last_stable_offset();
    pd.high_watermark = hw.0;
    pd.last_stable_offset = lso.0;
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
    match isolation {
        Isolation::ReadUncommitted => read_records(part, fp, (budget, first), hw, pd).await,
        Isolation::ReadCommitted => {
            let (mut pd, slices) = read_records(part, fp, (budget, first), lso, pd).await;
            // Those overlapping the fetch offset up to the LSO: a superset of the read's
            // (Kafka's bound is the read's end), which clients filter by offset anyway.
            let aborted = part.aborted_transactions(Offset(fp.fetch_offset), lso);
            pd.aborted_transactions = Some(
                aborted
                    .into_iter()
                    .map(|a| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(a.producer_id))
                            .with_first_offset(a.first_offset.0)
                    })
                    .collect(),
            );
            (pd, slices)
        }
    }
}
