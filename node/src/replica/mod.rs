//! Replication on this node, in one place (Kafka's way: followers pull).
//!
//! - The follower side: [`fetcher`] runs one task per leader shard this shard follows
//!   partitions on, over one incremental fetch session whose follower half is
//!   `follower_session.rs`; the log changes it makes are the partition's follower half
//!   (`Partition::append_as_follower`, `truncate_diverging`, `follow_log_start` in
//!   `partition/append.rs`).
//! - The leader side: [`leader_read`] answers a follower's fetch of one partition (learns its
//!   log end, answers records up to the log end offset, a divergence or an error); the Fetch
//!   handler reads the log for it as for a consumer. [`isr`] sends a leader's ISR changes to the
//!   control plane.
//! - The replica state: each partition's role (only replica, leader, follower, offline) with
//!   its high watermark, `partition/replica.rs`, driving the `replication` crate's state
//!   machines, which hold the rules.
//!
//! - [`throttle`]: the replication throttles' byte budgets, spent only on out-of-sync replicas
//!   the topics' throttled replica lists name.
//!
//! Elections and ISR commits are the control plane's (`metadata/controller.rs`,
//! `metadata/etcd/partitions.rs`); a leader takes writes only under its lease
//! (`metadata/lease.rs`).

pub mod fetcher;
mod follower_session;
pub mod isr;
pub mod leader_read;
pub mod throttle;
