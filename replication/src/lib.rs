//! `replication` owns replica state as pure code — no I/O, no clock, no sockets: the leader's view
//! of its followers ([`leader`]: follower log end offsets, the ISR and its changes, the high
//! watermark, `acks=all` readiness), the follower's side ([`follower`]: what to fetch next, how to
//! resolve a diverging log), and the controller's decisions ([`controller`]: leader election from
//! the ISR or the eligible leader replicas, ISR changes by compare-and-swap on the partition
//! epoch; moving replicas, [`reassignment`]). Time comes in as
//! milliseconds, the logs' ends and epochs as arguments, so a seeded simulation
//! (`tests/simulation.rs`) drives them through delays, drops, duplicates, crashes and partitions.
//!
//! It knows replicas, offsets and leader epochs (Kafka's vocabulary: log end offset, high
//! watermark, ISR, leader epoch, partition epoch). It must not touch sockets, Kafka request
//! encoding, files or a `Log` directly: the broker (`node`) carries requests and drives the log.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod controller;
pub mod follower;
pub mod high_watermark;
pub mod leader;
pub mod reassignment;
pub mod types;

pub use types::{IsrChange, PartitionState, ReplicaId};
