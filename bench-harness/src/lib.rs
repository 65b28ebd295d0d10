//! `bench-harness` is the load generator `ringlog-bench`: a lean Kafka-protocol producer and
//! consumer driver for any Kafka-compatible broker (ringlog, Apache Kafka), OpenMessaging
//! Benchmark-shaped workloads, HdrHistogram recording and result JSON with OMB's field names.
//!
//! It talks to brokers only over the Kafka protocol; it must not link the broker's crates.
//! Consumers read by assigned partitions or, with `consumerAssignment: group`, as members of a
//! consumer group (`group`). `null_broker` is the floor to measure brokers against: a Kafka
//! endpoint that keeps records in memory and does nothing else. The HTML report is `perf`'s job.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod client;
pub mod cluster;
pub mod consumer;
pub mod group;
pub mod null_broker;
pub mod partitioner;
pub mod producer;
pub mod run;
pub mod stats;
pub mod sustainable;
pub mod workload;
