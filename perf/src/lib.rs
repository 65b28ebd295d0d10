//! `perf` is the performance lab: it turns `ringlog-bench` result files (JSON with
//! OpenMessaging Benchmark's field names) into one HTML report — throughput over time, latency
//! percentile curves on a log axis as HdrHistogram plots them, side-by-side tables with ratios
//! — and a Markdown summary for the results folder's README.
//!
//! It reads result files; it must not measure anything itself. The suite that starts ringlog
//! and Apache Kafka and runs workloads against both is `scripts/bench/perf-suite.sh`; its committed
//! results are under `perf/results/`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod report;
