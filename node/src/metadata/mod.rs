//! Cluster metadata: topics, their partitions' owning shards and leader epochs, per-topic
//! configs. One control-plane thread owns and changes it ([`controller`]); it persists through
//! a [`store::MetadataStore`] (the [`embedded`] JSON file for a single node) and pushes
//! immutable [`Snapshot`]s to every shard, which answer Metadata requests from them.

pub mod controller;
pub mod elections;
pub mod embedded;
pub mod etcd;
pub mod lease;
pub mod moves;
pub mod names;
pub mod placement;
pub mod planner;
pub mod snapshot;
pub mod store;

pub use controller::{Command, Controller, SnapshotUpdate};
pub use names::{is_internal, validate_topic_name, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
pub use snapshot::{Leader, PartitionMeta, Slot, Snapshot, TopicMeta};
