//! `perf` is the performance lab: it turns `ringlog-bench` result files (JSON with
//! OpenMessaging Benchmark's field names) into one HTML report — throughput over time, latency
//! percentile curves on a log axis as HdrHistogram plots them, side-by-side tables with ratios
//! — and a Markdown summary for the README.
//!
//! It reads result files; it must not measure anything itself. Not built yet: suites that start
//! ringlog and Apache Kafka and run several workloads in one go, and recorded baselines.

pub mod report;
