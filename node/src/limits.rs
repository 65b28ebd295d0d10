//! Every bound and timeout of the broker in one place (the log's own are in
//! `iouring_log::limits`).
//!
//! Arithmetic behind the numbers:
//! - A connection reads at most [`PIPELINE_REQUESTS_MAX`] requests ahead of its answers, each at
//!   most `socket.request.max.bytes`; what all connections of the node hold in request frames is
//!   bounded by `queued.max.request.bytes` (the request budget; one request alone may exceed
//!   it). Beyond that, a connection holds its read buffer of [`READ_CHUNK_BYTES`] (what one
//!   `recv` asks for), and each thread keeps at most [`FRAME_POOL_BYTES_MAX`] of idle frame
//!   buffers: 100 000 connections hold 6.4 GB of read buffers, 1 000 hold 64 MiB.
//! - A fetch response carries at most [`RECORDS_PLACEHOLDER_MAX`] of records per partition (the
//!   static placeholder region the encoder points into).
//! - Idempotent producer state is [`BATCHES_PER_PRODUCER`] batches for each of at most
//!   [`PRODUCERS_MAX`] producers per partition: 50 000 small entries at most.
//! - The shard loop wakes every [`MAINTENANCE_INTERVAL`] for retention, `flush.ms`, checkpoints
//!   and producer snapshots; [`PRODUCER_SNAPSHOT_INTERVAL_MS`] and the retention interval are
//!   multiples of it in practice.

use std::time::Duration;

/// Requests of one connection read but not yet answered (Kafka clients keep up to 5 in flight
/// by default; librdkafka without idempotence many more). Beyond this the connection reads
/// nothing until an answer is written: TCP pushes back on the client.
pub const PIPELINE_REQUESTS_MAX: usize = 32;

/// Bytes asked of a socket at once: the size of a connection's read buffer.
pub const READ_CHUNK_BYTES: usize = 64 << 10;

/// Request frames at least this large are read into their own pooled, 4 KiB-aligned buffer
/// (their body straight from the socket); smaller ones are copied out of the read buffer.
pub const LARGE_FRAME_MIN_BYTES: usize = 16 << 10;

/// Largest frame buffer a thread keeps for reuse; larger ones are freed.
pub const FRAME_POOL_BUFFER_MAX_BYTES: usize = 8 << 20;

/// Idle frame buffers (and connections' read buffers) a thread keeps for reuse.
pub const FRAME_POOL_BYTES_MAX: usize = 32 << 20;

const _: () =
    assert!(READ_CHUNK_BYTES.is_power_of_two() && LARGE_FRAME_MIN_BYTES.is_power_of_two());
const _: () = assert!(LARGE_FRAME_MIN_BYTES + 4 <= READ_CHUNK_BYTES);
const _: () = assert!(LARGE_FRAME_MIN_BYTES.is_multiple_of(4096));

/// Largest records part of one partition in a fetch response.
pub const RECORDS_PLACEHOLDER_MAX: usize = 64 << 20;

/// Longest fetch long poll accepted (Kafka clients use at most a few seconds).
pub const FETCH_MAX_WAIT_MS: i32 = 60_000;

/// Longest a produce waits for its records to be written (or flushed), whatever the request's
/// `timeout_ms` says.
pub const PRODUCE_ACK_TIMEOUT_MAX_MS: i32 = 120_000;

/// Incremental fetch sessions kept per shard (Kafka's
/// `max.incremental.fetch.session.cache.slots`, 1000).
pub const FETCH_SESSIONS_MAX: usize = 1000;

/// How long a fetch session must go unused before a new one may evict it (Kafka's
/// `min.incremental.fetch.session.eviction.ms`, 120 s).
pub const FETCH_SESSION_EVICTION_IDLE: Duration = Duration::from_secs(120);

/// Longest one etcd call may take before the control plane treats etcd as unreachable.
pub const ETCD_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Response pieces (encoded bytes, tail slices, cached file chunks) one `sendmsg` carries at
/// most; they are sent from their own buffers, never copied.
pub const SEND_PIECES_MAX: usize = 64;

/// Connections a shard's listening socket queues before they are accepted (glommio's own
/// `bind` used 1024; the kernel caps it at `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 1024;

/// Batches remembered per idempotent producer (Kafka's five in-flight batches).
pub const BATCHES_PER_PRODUCER: usize = 5;

/// Idempotent producers tracked per partition; the least recently used is forgotten beyond.
pub const PRODUCERS_MAX: usize = 10_000;

/// Least time between two periodic snapshots of one partition's producer state.
pub const PRODUCER_SNAPSHOT_INTERVAL_MS: i64 = 10_000;

/// Longest topic name (Kafka's).
pub const TOPIC_NAME_MAX: usize = 249;

/// Most partitions of one topic.
pub const PARTITIONS_MAX: i32 = 10_000;

/// Partitions one maintenance tick visits at most: a shard with more spreads a pass over
/// several ticks (10 000 partitions on two shards: every partition each second), so its
/// periodic work does not grow with the partition count.
pub const MAINTENANCE_PARTITIONS_PER_TICK: usize = 500;

/// How often a shard runs retention, `flush.ms`, checkpoints and producer snapshots.
pub const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(100);

/// The maintenance task queue's share of the shard against the request queue's 1000
/// (glommio's default queue): retention, flushes, checkpoints and the group ticker.
pub const MAINTENANCE_SHARES: usize = 100;

/// The stall probe's share: it runs microseconds, a high share keeps it first when due.
pub const STALL_PROBE_SHARES: usize = 1000;

/// How often the shard's stall probe asks to run (`shard/stall_probe.rs`): 100 wake-ups a
/// second, each a few microseconds of CPU.
pub const STALL_PROBE_INTERVAL: Duration = Duration::from_millis(10);

/// A stall probe run this late counts as a stall of each length it passes
/// (`ringlog_shard_stalls_total{longer_than=...}`).
pub const STALL_THRESHOLDS: [Duration; 3] = [
    Duration::from_millis(1),
    Duration::from_millis(5),
    Duration::from_millis(20),
];

/// How often a shard looks at the process-wide stop flag.
pub const STOP_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How often a stopping shard checks whether its connections have finished.
pub const DRAIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How long a stopping shard waits for its connections' requests before closing its logs.
pub const DRAIN_MAX: Duration = Duration::from_secs(15);

/// A request still unanswered after this is logged as a warning (once): more than any produce
/// timeout or fetch wait the clients we test ask for, and less than librdkafka's 60 s
/// `socket.timeout.ms`, after which the client gives up on the connection.
pub const SLOW_ANSWER_WARN: Duration = Duration::from_secs(45);

/// A shard that has not applied a new metadata snapshot after this is logged as a warning (once
/// per snapshot): the control plane waits for every shard before it takes its next command.
/// Applying one opens or closes logs (a few seconds for thousands of partitions on a slow disk).
pub const SLOW_SNAPSHOT_APPLY_WARN: Duration = Duration::from_secs(10);

/// Pause after a failed `accept` before the next.
pub const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(10);

/// How often the group coordinator checks session timeouts, rebalance deadlines and offset
/// retention.
pub const GROUP_TICK_INTERVAL: Duration = Duration::from_millis(20);

/// glommio's registered I/O arena per shard: the logs' tail chunks come from it.
pub const SHARD_IO_MEMORY_BYTES: usize = 64 << 20;

/// Read and write timeout of the blocking admin client's socket, and the timeout it asks the
/// broker to apply to admin requests.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

const _: () = assert!(RECORDS_PLACEHOLDER_MAX >= READ_CHUNK_BYTES);
const _: () = assert!(PRODUCER_SNAPSHOT_INTERVAL_MS >= MAINTENANCE_INTERVAL.as_millis() as i64);
const _: () = assert!(GROUP_TICK_INTERVAL.as_millis() < MAINTENANCE_INTERVAL.as_millis());

/// How often a shard tries to reopen a log that failed (a full disk, say), so that writes
/// resume without a restart.
pub const LOG_REOPEN_INTERVAL: Duration = Duration::from_secs(5);

/// Free space a failed log's file system must have before the log is reopened: two segment
/// preallocation steps (`iouring_log::limits::PREALLOCATE_MIN_BYTES`) and room for the
/// checkpoints, so a reopened log can take writes at once.
pub const LOG_REOPEN_MIN_FREE_BYTES: u64 = 16 << 20;

/// Open files the broker asks for at start (`RLIMIT_NOFILE`; Kafka's documentation asks for
/// 100 000 or more): an active segment keeps its file open for writes, and the read cache up to
/// `iouring_log::limits::READ_FILES_MAX` per shard for reads, so 10 000 partitions need
/// well over 10 000.
pub const OPEN_FILES_WANTED: u64 = 1 << 20;

/// Record slices of a fetch response whose file reads run ahead of the one being written (each
/// holds the read cache's 1 MiB chunks it covers until written): enough to keep the device busy
/// for a catch-up read of a few partitions, a bound for a fetch of thousands.
pub const FETCH_READS_AHEAD_SLICES: usize = 16;

/// Logs a shard opens (at start, for new partitions) or closes (at stop) at once: each waits on
/// a few small reads or fsyncs, so one at a time leaves the device idle (10 000 partitions: 25 s
/// to start, more than the 30 s a stop may take).
pub const LOG_OPEN_CLOSE_CONCURRENCY: usize = 64;

/// Bytes of a TLS connection's response copied at a time into its TLS stream: small parts share
/// TLS records (16 KiB each at most) instead of taking one each.
pub const TLS_COPY_BYTES: usize = 64 << 10;

/// A TLS handshake not finished in this time closes the connection.
pub const TLS_HANDSHAKE_MAX: Duration = Duration::from_secs(10);
