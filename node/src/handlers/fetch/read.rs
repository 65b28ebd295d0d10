//! The log read consumers and followers share: a partition's records from the fetch offset up
//! to a bound, as slices of the log's tail and read cache (never copied here).

use iouring_log::{Offset, ReadError, ReadOptions, ReadSlice};
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::ResponseError;

use crate::partition::Partition;
use crate::server::response::{records_placeholder, RECORDS_PLACEHOLDER_MAX};

/// A partition's answer before anything is known: no offsets, no records.
pub(super) fn empty_partition(index: i32) -> PartitionData {
    let mut pd = PartitionData::default();
    pd.partition_index = index;
    pd.high_watermark = -1;
    pd.last_stable_offset = -1;
    pd.log_start_offset = -1;
    pd.preferred_read_replica = BrokerId(-1);
    pd
}

/// Reads records from the fetch offset up to `upto` into `pd`, at most `budget` bytes and the
/// partition's own limit, the first batch whole if `first` (KIP-74).
pub(super) async fn read_records(
    part: &Partition,
    fp: &FetchPartition,
    (budget, first): (usize, bool),
    upto: Offset,
    mut pd: PartitionData,
) -> (PartitionData, Vec<ReadSlice>) {
    let limit = (fp.partition_max_bytes.max(0) as usize)
        .min(budget)
        .min(RECORDS_PLACEHOLDER_MAX);
    let opts = ReadOptions {
        max_bytes: limit,
        max_offset: Some(upto),
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
            tracing::error!(topic = %part.topic, partition = fp.partition, error = %e, "read failed");
            pd.error_code = ResponseError::KafkaStorageError.code();
            (pd, Vec::new())
        }
    }
}
