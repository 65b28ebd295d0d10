//! `bench-harness` is the load generator `ringlog-bench`: a lean Kafka-protocol producer and
//! consumer driver for any Kafka-compatible broker (ringlog, Apache Kafka), OpenMessaging
//! Benchmark-shaped workloads, HdrHistogram recording and result JSON with OMB's field names.
//!
//! It talks to brokers only over the Kafka protocol; it must not link the broker's crates.
//! Not built yet: consumer groups in the driver, the HTML report (that is `perf`).

pub mod client;
pub mod cluster;
pub mod consumer;
pub mod partitioner;
pub mod producer;
pub mod run;
pub mod stats;
pub mod workload;
