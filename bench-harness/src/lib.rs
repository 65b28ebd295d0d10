//! `bench-harness` will be the load generator `ringlog-bench` (not built yet; see the issues):
//! a lean Kafka-protocol producer/consumer driver for any Kafka-compatible broker, OpenMessaging
//! Benchmark-shaped workloads, HdrHistogram recording and result JSON.
//!
//! It talks to brokers only over the Kafka protocol; it must not link the broker's crates.
