//! Writing the coordinator's records into its `__consumer_offsets` partition through the
//! partition's produce path: ordered append, then the wait until written (a commit survives
//! `kill -9` once acknowledged; like Kafka, no fsync per commit — `log.flush.*` applies).

use iouring_log::LeaderEpoch;
use kafka_protocol::ResponseError;

use super::host::Host;
use super::records::RecordKey;
use crate::limits::OFFSET_COMMIT_TIMEOUT;
use crate::metadata::OFFSETS_TOPIC;

pub(super) use crate::partition::internal::KeyValues;
use crate::partition::internal::{append_keyed_in, InTransaction};

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

/// Appends coordinator records to partition `p` of `__consumer_offsets` and waits until every
/// in-sync replica has them: a commit survives the broker being killed once it is acknowledged
/// (not a machine crash: like Kafka, no fsync per commit; `log.flush.*` applies).
pub(super) async fn append(
    host: &dyn Host,
    p: i32,
    records: KeyValues,
    now: i64,
) -> Result<(), ResponseError> {
    append_in(host, p, records, None, now).await
}

/// [`append`], in a producer's transaction when `txn` is given (TxnOffsetCommit).
pub(super) async fn append_in(
    host: &dyn Host,
    p: i32,
    records: KeyValues,
    txn: Option<InTransaction>,
    now: i64,
) -> Result<(), ResponseError> {
    let part = host
        .offsets_partition(p)
        .ok_or(ResponseError::NotCoordinator)?;
    let epoch = host
        .snapshot()
        .partition(OFFSETS_TOPIC, p)
        .map_or(LeaderEpoch(0), |m| m.leader_epoch);
    // As Kafka's group coordinator: acks=all, bounded like its offset.commit.timeout.ms.
    let written = append_keyed_in(&part, epoch, records, txn, now, OFFSET_COMMIT_TIMEOUT).await;
    written.map_err(|refused| {
        tracing::warn!(partition = p, error = %refused.message, "writing __consumer_offsets");
        match refused.error {
            ResponseError::RecordListTooLarge | ResponseError::MessageTooLarge => {
                ResponseError::InvalidCommitOffsetSize
            }
            ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
            ResponseError::NotEnoughReplicas | ResponseError::NotEnoughReplicasAfterAppend => {
                ResponseError::CoordinatorNotAvailable
            }
            ResponseError::RequestTimedOut => ResponseError::RequestTimedOut,
            // A transaction's records of a fenced producer epoch (TxnOffsetCommit).
            ResponseError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
            _ => ResponseError::UnknownServerError,
        }
    })
}
