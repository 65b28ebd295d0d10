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

/// Producer ids are `sequence × PRODUCER_ID_NODE_SLOTS + node.id mod PRODUCER_ID_NODE_SLOTS`:
/// nodes never hand out the same id (node ids below this bound), and a node's sequence starts
/// at its start time in ms × 256, above what it handed out before a restart. (Kafka allocates
/// blocks through its controller.)
pub const PRODUCER_ID_NODE_SLOTS: i64 = 1 << 16;
/// Milliseconds since the Unix epoch the producer id sequences count from (2023-11-14).
pub const PRODUCER_ID_EPOCH_MS: i64 = 1_700_000_000_000;

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

// ---- A dead node found by its listener (`metadata/etcd/liveness.rs`) ----

/// How often each node is probed.
pub const LIVENESS_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// How long a probe's connect may take (the control-plane thread waits for it).
pub const LIVENESS_CONNECT_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a node whose connect timed out (cut off, or a far host) is left alone: probes must
/// not hold up the control plane for a node that does not answer.
pub const LIVENESS_UNANSWERED_PAUSE: Duration = Duration::from_secs(1);

/// How long a node must refuse, at least two probes in a row, to count as gone.
pub const LIVENESS_REFUSED_FOR: Duration = Duration::from_millis(100);

/// Refusals in a row (at least [`LIVENESS_REFUSED_FOR`] apart) that count a node as gone.
pub const LIVENESS_REFUSALS: u32 = 2;

// ---- etcd ----

/// How often the clients ping an idle connection (HTTP/2 keep-alive). etcd's server allows a
/// ping every `--grpc-keepalive-min-time` (5 s by default) and closes the connection of a
/// client that pings more often ("too many pings"), cancelling every call on it: with a 1 s
/// ping the connections were reset every few seconds (the controller candidates' campaigns
/// resigned and written again each time, etcd fsyncing its log for each).
pub const ETCD_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// How long a failed campaign call waits before the next.
pub const CONTROLLER_CAMPAIGN_RETRY: Duration = Duration::from_millis(500);

/// First pause after etcd failed to answer (doubled after each failure).
pub const ETCD_RETRY_BACKOFF_MIN: Duration = Duration::from_millis(500);

/// Longest pause after etcd failed to answer.
pub const ETCD_RETRY_BACKOFF_MAX: Duration = Duration::from_secs(8);

// ---- Placement ----

/// Kafka's practical bound; more replicas only multiply the fetch traffic.
/// Client quotas (`quotas/usage.rs`): a quota's rate is measured over this many samples
/// (Kafka's `quota.window.num`) ...
pub const QUOTA_WINDOW_SAMPLES: usize = 11;
/// ... each this long (Kafka's `quota.window.size.seconds`, 1).
pub const QUOTA_SAMPLE_MS: i64 = 1_000;
/// What a client may send at once against a byte-rate or request-time quota: this much of
/// its quota (a token bucket's depth, `quotas/usage.rs`).
pub const QUOTA_BURST_MS: i64 = 1_000;
/// The longest a client over its quota is held at once (the whole window).
pub const QUOTA_THROTTLE_MAX_MS: i64 = QUOTA_WINDOW_SAMPLES as i64 * QUOTA_SAMPLE_MS;

pub const REPLICATION_FACTOR_MAX: usize = 10;

// ---- The control plane ----

/// How often other nodes' changes are looked for (and, in a cluster, the listeners of nodes
/// that may be dead probed: `etcd::liveness`).
pub const METADATA_POLL_INTERVAL: Duration = Duration::from_millis(25);

/// How often the elected controller looks for leaders to move when nothing changed (an ISR
/// member back in sync, a preferred leader to restore): the pass reads every partition.
pub const CONTROLLER_ELECTION_INTERVAL: Duration = Duration::from_millis(100);

// ---- Metrics ----

/// A latency window's length: quantiles cover the last one to two windows.
pub const REQUEST_LATENCY_WINDOW: Duration = Duration::from_secs(60);

/// Latencies above this (in microseconds: 10 minutes) are recorded as this.
pub const REQUEST_LATENCY_MAX_US: u64 = 600_000_000;

/// How long a scrape waits for the shards' reports.
pub const SCRAPE_SHARD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a scraper may take to send its request or read the answer.
pub const METRICS_CLIENT_IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the accept loop looks at the stop flag.
pub const METRICS_ACCEPT_POLL: Duration = Duration::from_millis(100);

/// The longest request head read.
pub const METRICS_REQUEST_HEAD_MAX: usize = 8192;

// ---- Requests ----

/// Kafka's `max.request.partition.size.limit` default.
pub const DESCRIBE_TOPIC_PARTITIONS_MAX: i32 = 2000;

/// How often a replica's shard is asked again while it does not list the topic yet.
pub const TOPIC_PROPAGATION_ASK_AGAIN: Duration = Duration::from_millis(5);

// ---- Shards ----

/// The cleaner's share of the shard against the default queue's 1000.
pub const LOG_CLEANER_SHARES: usize = 100;

/// `log.read.cache.bytes` = -1: this much per shard, and at most a quarter of the memory the
/// node may use. Not more by default: while the cache grows, every megabyte it keeps makes the
/// tail take fresh memory for its next chunk (page faults, zeroing, unregistered writes), and
/// broker CPU at 50 000 msg/s is higher for as long as that lasts — 45 % when first measured,
/// 18–21 % on 2026-12-02 (a growing 3 GiB per shard: 7.0–7.7 vs 5.4–6.5 CPU-s/GB with 128 MiB;
/// once full it recycles at no cost). Backing those chunks with transparent huge pages made
/// it worse (10.7–12.0 CPU-s/GB, p99.9 37–72 ms: each fault zeroes 2 MiB inline).
pub const READ_CACHE_AUTO_PER_SHARD: u64 = 256 << 20;

// ---- Replication ----

/// How often an unanswered ISR change is proposed again.
pub const ISR_CHANGE_RETRY_MS: i64 = 2_000;

/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default.
pub const HW_CHECKPOINT_INTERVAL_MS: i64 = 5_000;

/// How long a fetcher waits before trying its leader again after a failure.
pub const FOLLOWER_FETCH_RETRY_DELAY: Duration = Duration::from_millis(100);

/// The longest a follower leaves its throttled partitions out of its fetches when its
/// `follower.replication.throttled.rate` budget is spent (it looks again then; a budget of 0
/// bytes/s holds them back for good, a second at a time).
pub const FOLLOWER_THROTTLE_WAIT_MAX: Duration = Duration::from_secs(1);

/// A replication throttle budget this close to refilled counts as refilled (the overdraft it
/// allows is this much of the rate, ~1 % of a second's budget).
pub const THROTTLE_WAIT_SLACK: Duration = Duration::from_millis(10);

// ---- Security ----

/// At most this many failed authentications are logged per window on a shard.
pub const AUTH_FAILURE_LOG_BURST: u32 = 10;

pub const AUTH_FAILURE_LOG_WINDOW: Duration = Duration::from_secs(10);

// ---- Consumer groups ----

/// The most memory a consumer group member's `SubscribedTopicRegex` may compile to (larger:
/// INVALID_REGULAR_EXPRESSION).
pub const GROUP_REGEX_BYTES_MAX: usize = 1 << 20;

/// The session a consumer-protocol member gets when its coordinator loads the group (Kafka's
/// `group.consumer.session.timeout.ms` default): a member that does not heartbeat the new
/// coordinator within it is fenced.
pub const CONSUMER_LOAD_SESSION_MS: i32 = 45_000;

/// Kafka's `offsets.commit.timeout.ms` default: how long a group write waits for the ISR.
pub const OFFSET_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a transaction coordinator waits for a `__transaction_state` write to reach every
/// in-sync replica before it answers COORDINATOR_NOT_AVAILABLE (and the client retries).
pub const TXN_STATE_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The first wait before a transaction marker a leader could not take is sent again; it
/// doubles up to [`TXN_MARKER_RETRY_MAX`].
pub const TXN_MARKER_RETRY_MIN: Duration = Duration::from_millis(20);
pub const TXN_MARKER_RETRY_MAX: Duration = Duration::from_secs(1);
/// How long one WriteTxnMarkers call (connection included) may take before the leader is
/// taken as unreachable and asked again (a paused node accepts and never answers).
pub const TXN_MARKER_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a partition leader waits for the coordinator's answer to a transactional produce's
/// verification (KIP-890) before answering the produce with a retriable error.
pub const TXN_VERIFY_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request adding partitions to a transaction (or ending one) waits for the producer's previous
/// transaction to complete (its markers and completion written) before it is answered
/// CONCURRENT_TRANSACTIONS (`txn_coordinator/ops.rs`).
pub const TXN_CONCURRENT_WAIT_MAX: Duration = Duration::from_millis(100);

/// The most memory a ListTransactions id pattern may compile to (a client's pattern must not
/// cost the shard more; larger: INVALID_REGULAR_EXPRESSION).
pub const ID_PATTERN_BYTES_MAX: usize = 1 << 20;

// ---- Waits of the control plane and the etcd client ----

/// Bounds of `broker.session.timeout.ms` (a node's lease on etcd), in ms.
pub const BROKER_SESSION_TIMEOUT_MIN_MS: u64 = 1_000;
pub const BROKER_SESSION_TIMEOUT_MAX_MS: u64 = 600_000;

/// A node restarted right after `kill -9` waits up to `broker.session.timeout.ms` plus this
/// for its predecessor's lease to expire (etcd's expiry is not to the millisecond).
pub const PREDECESSOR_WAIT_MARGIN: Duration = Duration::from_secs(2);

/// How often such a node looks again whether the predecessor's registration is gone.
pub const PREDECESSOR_POLL: Duration = Duration::from_millis(250);

/// Pause before a metadata watch is opened again after etcd refused it.
pub const METADATA_WATCH_RETRY: Duration = Duration::from_millis(200);

/// Pause before a metadata watch that ended (etcd restarted, compacted) is opened again.
pub const METADATA_WATCH_RESTART: Duration = Duration::from_millis(100);

/// Keep-alives sent per lease time to live: a lost one or two still leave the lease held.
pub const LEASE_KEEP_ALIVES_PER_TTL: u32 = 3;

/// The shortest pause between keep-alives, and before a failed keep-alive stream is opened
/// again.
pub const LEASE_KEEP_ALIVE_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// How often a campaigning controller candidate checks whether it should give up.
pub const CONTROLLER_CAMPAIGN_CHECK: Duration = Duration::from_millis(100);

/// How often the control plane looks whether every shard applied a new snapshot.
pub const SNAPSHOT_APPLY_POLL: Duration = Duration::from_millis(1);

/// A follower fetch not answered within its long poll plus this is abandoned (the connection
/// dropped and made again).
pub const FOLLOWER_FETCH_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

// ---- Relations ----

// A liveness probe's connect ends before the next probe is due.
const _: () = assert!(LIVENESS_CONNECT_TIMEOUT.as_nanos() <= LIVENESS_PROBE_INTERVAL.as_nanos());
// A dead node is found (its refusals) well within the shortest lease a node may have.
const _: () = assert!(
    LIVENESS_REFUSED_FOR.as_millis() * (LIVENESS_REFUSALS as u128)
        < BROKER_SESSION_TIMEOUT_MIN_MS as u128
);
// The lease is kept alive faster than the shortest one expires.
const _: () = assert!(
    LEASE_KEEP_ALIVE_MIN_INTERVAL.as_millis() * (LEASE_KEEP_ALIVES_PER_TTL as u128)
        <= BROKER_SESSION_TIMEOUT_MIN_MS as u128
);
// Keep-alives: at least two per lease, so one lost keep-alive never loses the lease.
const _: () = assert!(LEASE_KEEP_ALIVES_PER_TTL >= 2);
// etcd's retry backoff doubles from its minimum up to its maximum.
const _: () = assert!(ETCD_RETRY_BACKOFF_MIN.as_nanos() < ETCD_RETRY_BACKOFF_MAX.as_nanos());
// An unanswered ISR change is proposed again on a maintenance tick, not more often.
const _: () = assert!(ISR_CHANGE_RETRY_MS >= MAINTENANCE_INTERVAL.as_millis() as i64);
// The high watermark checkpoint is written on a maintenance tick.
const _: () = assert!(HW_CHECKPOINT_INTERVAL_MS >= MAINTENANCE_INTERVAL.as_millis() as i64);
// A shard answers a metrics scrape before the client's own I/O timeout ends it.
const _: () = assert!(SCRAPE_SHARD_TIMEOUT.as_nanos() <= METRICS_CLIENT_IO_TIMEOUT.as_nanos());
