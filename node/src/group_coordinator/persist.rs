//! Writing the coordinator's records into its `__consumer_offsets` partition through the
//! partition's produce path: ordered append, then the wait until written (a commit survives
//! `kill -9` once acknowledged; like Kafka, no fsync per commit — `log.flush.*` applies).

use bytes::{Bytes, BytesMut};
use iouring_log::LeaderEpoch;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

use super::host::Host;
use super::records::RecordKey;
use crate::limits::OFFSET_COMMIT_TIMEOUT;
use crate::metadata::OFFSETS_TOPIC;

/// Records to append: `(key, value)`, a `None` value being a tombstone.
pub(super) type KeyValues = Vec<(Bytes, Option<Bytes>)>;

/// Tombstones for the given offsets of `group` (and its metadata when `group_too`).
pub(super) fn tombstones(
    group: &str,
    partitions: impl Iterator<Item = (String, i32)>,
    group_too: bool,
) -> KeyValues {
    let mut out: KeyValues = partitions
        .map(|(topic, partition)| {
            let key = RecordKey::Offset {
                group: group.to_owned(),
                topic,
                partition,
            };
            (key.encode(), None)
        })
        .collect();
    if group_too {
        out.push((RecordKey::Group(group.to_owned()).encode(), None));
    }
    out
}

/// Appends coordinator records to partition `p` of `__consumer_offsets` and waits until they
/// are written to the segment file: a commit survives the broker being killed once it is
/// acknowledged (not a machine crash: like Kafka, no fsync per commit; `log.flush.*` applies).
pub(super) async fn append(
    host: &dyn Host,
    p: i32,
    records: KeyValues,
    now: i64,
) -> Result<(), ResponseError> {
    let part = host
        .offsets_partition(p)
        .ok_or(ResponseError::NotCoordinator)?;
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: now,
            key: Some(key),
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).map_err(|e| {
        tracing::error!(error = %e, "encoding __consumer_offsets records");
        ResponseError::UnknownServerError
    })?;
    let header = iouring_log::BatchHeader::parse(&buf).map_err(|e| {
        tracing::error!(error = %e, "encoded __consumer_offsets batch");
        ResponseError::UnknownServerError
    })?;
    let epoch = host
        .snapshot()
        .partition(OFFSETS_TOPIC, p)
        .map_or(LeaderEpoch(0), |m| m.leader_epoch);
    let mut appended = part
        .append_as_leader(&buf, &header, epoch, now)
        .await
        .map_err(|refused| {
            tracing::error!(partition = p, error = %refused.message, "appending to __consumer_offsets");
            match refused.error {
                ResponseError::RecordListTooLarge | ResponseError::MessageTooLarge => {
                    ResponseError::InvalidCommitOffsetSize
                }
                _ => ResponseError::UnknownServerError,
            }
        })?;
    // As Kafka's group coordinator: acks=all (every in-sync replica of the offsets partition),
    // bounded like its offset.commit.timeout.ms.
    appended.replicated = Some(epoch);
    let done = async { Some(part.wait_acknowledgeable(&appended).await) };
    let timeout = async {
        glommio::timer::sleep(OFFSET_COMMIT_TIMEOUT).await;
        None
    };
    match futures_lite::future::or(done, timeout).await {
        Some(Ok(())) => Ok(()),
        Some(Err(refused)) => {
            tracing::warn!(partition = p, error = %refused.message, "writing __consumer_offsets");
            Err(match refused.error {
                ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
                ResponseError::NotEnoughReplicas | ResponseError::NotEnoughReplicasAfterAppend => {
                    ResponseError::CoordinatorNotAvailable
                }
                _ => ResponseError::UnknownServerError,
            })
        }
        None => Err(ResponseError::RequestTimedOut),
    }
}
