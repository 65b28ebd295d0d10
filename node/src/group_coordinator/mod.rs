//! The group coordinator (Kafka's classic group protocol and the consumer protocol of KIP-848,
//! with online migration of groups between them) and committed offsets.
//!
//! Owns: the groups whose `__consumer_offsets` partition this shard leads — the coordinator of
//! group `g` is the shard leading partition `abs(javaHashCode(g)) % partitions`, as in Kafka —
//! their membership state machines ([`membership::Group`]; a consumer-protocol group's is
//! [`consumer::ConsumerGroup`], kept in the same `Group` beside its offsets) and committed offsets, and the
//! records that persist them in that partition ([`records`]), replayed into memory when the shard
//! opens it. Must not touch: partitions of other shards, or any group another shard coordinates
//! (those requests get NOT_COORDINATOR). It uses its shard only through [`Host`], and is told
//! the time.
//!
//! `__consumer_offsets` is never cleaned by a compactor here: it keeps every record (time and
//! size retention are off for it) and a load replays them all, the latest record per key
//! winning.

pub mod consumer;
mod consumer_ops;
mod coordinator;
pub mod host;
pub mod join;
mod load;
pub mod membership;
mod migration;
mod offsets;
mod persist;
pub mod records;
mod txn_offsets;

pub use consumer_ops::topic_index;
pub use coordinator::{partition_for, Coordinator, GroupSummary, ListedGroup};
pub use host::Host;
