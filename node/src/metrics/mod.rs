//! Metrics: what each shard counts while it serves (requests and their latency per API, bytes
//! in and out, connections: `recorder.rs`), what it reads of its partitions, groups, caches
//! and io_uring when a scrape asks (`report.rs`), and the Prometheus endpoint
//! (`metrics.listen`, `endpoint.rs`) that asks every shard over a channel and writes the text
//! format (`render.rs`, `exposition.rs`).
//!
//! Shards record into their own cells: no locks and no atomics on the data path. This module
//! reads broker state and never changes it; it owns no data and no request handling.

pub mod endpoint;
pub mod exposition;
pub mod process;
pub mod recorder;
pub mod render;
pub mod report;
