//! `perf` will be the performance lab (not built yet; see the issues): workload files, suites
//! that run ringlog and Apache Kafka side by side, the HTML/Markdown report renderer and
//! recorded baselines.
//!
//! It reads result files written by `ringlog-bench`; it must not measure anything itself.
