//! Where a topic's partitions live: spread over the node's shards round-robin, partition `p`
//! on shard `p % shards` (each shard is a broker endpoint of its own).

use iouring_log::LeaderEpoch;

use super::snapshot::PartitionMeta;

/// Partitions `from..to` of a topic, placed on `shards` shards.
pub fn place_partitions(from: i32, to: i32, shards: usize) -> Vec<PartitionMeta> {
    (from..to)
        .map(|p| PartitionMeta {
            shard: p as usize % shards,
            leader_epoch: LeaderEpoch(0),
        })
        .collect()
}
