//! A scrape's text from the shards' reports: every metric family ringlog exposes, with
//! Kafka's vocabulary in names and labels (`request="Produce"`, log end offset, high
//! watermark, log start offset, consumer group lag).

use crate::ids::NodeId;
use std::collections::HashMap;

use kafka_protocol::messages::ApiKey;

use super::exposition::{Exposition, Kind, Sample};
use super::process::ProcessFacts;
use super::report::{PartitionReport, ShardReport};
use crate::limits::STALL_THRESHOLDS;
use iouring_log::limits::SLOW_IO_THRESHOLDS;
use iouring_log::{IoTimes, ShardIoTimes};

/// What the endpoint knows of the node itself.
pub struct NodeFacts {
    pub node_id: NodeId,
    /// `queued.max.request.bytes` (`None`: unbounded).
    pub request_budget_capacity: Option<usize>,
    pub request_budget_available: usize,
    pub request_budget_waiting: usize,
    /// Each client quota entity's measured rate, per quota (`quotas/usage.rs`).
    pub quota_rates: Vec<(crate::quotas::QuotaKey, String, f64)>,
    pub process: ProcessFacts,
}

/// Kafka's name of an API (`Produce`, `Fetch`, …), as in its `request` label.
fn api_name(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(api) => format!("{api:?}"),
        Err(()) => format!("Unknown{key}"),
    }
}

fn shard_label(shard: usize) -> Vec<(&'static str, String)> {
    vec![("shard", shard.to_string())]
}

fn partition_labels(p: &PartitionReport) -> Vec<(&'static str, String)> {
    vec![
        ("topic", p.topic.clone()),
        ("partition", p.partition.to_string()),
    ]
}

/// Families with one sample per shard: name, type, help, the figure.
type ShardFigure = (&'static str, Kind, &'static str, fn(&ShardReport) -> f64);

const SHARD_FAMILIES: &[ShardFigure] = &[
    (
        "ringlog_log_cleanings_total",
        Kind::Counter,
        "Cleanings of compacted logs by the shard's log cleaner.",
        |r| r.cleaner.0 as f64,
    ),
    (
        "ringlog_log_cleaner_bytes_before_total",
        Kind::Counter,
        "Bytes of the segments the cleaner rewrote, before cleaning.",
        |r| r.cleaner.1 as f64,
    ),
    (
        "ringlog_log_cleaner_bytes_after_total",
        Kind::Counter,
        "Bytes of the segments the cleaner wrote in their place.",
        |r| r.cleaner.2 as f64,
    ),
    (
        "ringlog_network_received_bytes_total",
        Kind::Counter,
        "Request bytes read from clients (size prefixes included).",
        |r| r.bytes_received as f64,
    ),
    (
        "ringlog_network_sent_bytes_total",
        Kind::Counter,
        "Response bytes written to clients (size prefixes and record bytes included).",
        |r| r.bytes_sent as f64,
    ),
    (
        "ringlog_connections",
        Kind::Gauge,
        "Client connections open.",
        |r| r.connections_open as f64,
    ),
    (
        "ringlog_connections_accepted_total",
        Kind::Counter,
        "Client connections accepted.",
        |r| r.connections_accepted as f64,
    ),
    (
        "ringlog_io_uring_file_reads_total",
        Kind::Counter,
        "File reads the shard submitted to io_uring.",
        |r| r.executor.file_reads as f64,
    ),
    (
        "ringlog_io_uring_file_read_bytes_total",
        Kind::Counter,
        "Bytes read by the shard's io_uring file reads.",
        |r| r.executor.file_read_bytes as f64,
    ),
    (
        "ringlog_io_uring_file_writes_total",
        Kind::Counter,
        "File writes the shard submitted to io_uring (busy partitions' O_DIRECT appends, zero fill, index and checkpoint files).",
        |r| r.executor.file_writes as f64,
    ),
    (
        "ringlog_page_cache_file_writes_total",
        Kind::Counter,
        "Segment file writes the shard made through the page cache (quiet partitions' appends).",
        |r| r.page_cache_writes.0 as f64,
    ),
    (
        "ringlog_page_cache_file_written_bytes_total",
        Kind::Counter,
        "Bytes of the shard's segment file writes through the page cache.",
        |r| r.page_cache_writes.1 as f64,
    ),
    (
        "ringlog_io_uring_file_written_bytes_total",
        Kind::Counter,
        "Bytes written by the shard's io_uring file writes.",
        |r| r.executor.file_written_bytes as f64,
    ),
    (
        "ringlog_shard_busy_seconds_total",
        Kind::Counter,
        "Time the shard's executor spent running tasks and polling I/O.",
        |r| r.executor.busy.as_secs_f64(),
    ),
    (
        "ringlog_shard_tasks_executed_total",
        Kind::Counter,
        "Tasks the shard's executor ran.",
        |r| r.executor.tasks_executed as f64,
    ),
    (
        "ringlog_read_cache_budget_bytes",
        Kind::Gauge,
        "The shard's share of log.read.cache.bytes.",
        |r| r.read_cache.budget_bytes as f64,
    ),
    (
        "ringlog_read_cache_bytes",
        Kind::Gauge,
        "Segment file chunks the shard's read cache holds.",
        |r| r.read_cache.used_bytes as f64,
    ),
    (
        "ringlog_read_cache_hits_total",
        Kind::Counter,
        "Reads of segment files served from the read cache.",
        |r| r.read_cache.hits as f64,
    ),
    (
        "ringlog_read_cache_misses_total",
        Kind::Counter,
        "Reads of segment files the read cache did not hold: read from the file (O_DIRECT, or through the page cache for chunks written through it).",
        |r| r.read_cache.misses as f64,
    ),
    (
        "ringlog_read_cache_page_cache_reads_total",
        Kind::Counter,
        "File reads of the read cache (misses and read-ahead) that went through the page cache: chunks a quiet partition wrote through it.",
        |r| r.read_cache.page_cache_reads as f64,
    ),
    (
        "ringlog_read_cache_evictions_total",
        Kind::Counter,
        "Chunks evicted from the read cache.",
        |r| r.read_cache.evicted as f64,
    ),
    (
        "ringlog_read_cache_read_ahead_total",
        Kind::Counter,
        "Chunks the read cache read ahead of a consumer.",
        |r| r.read_cache.read_ahead as f64,
    ),
    (
        "ringlog_read_cache_read_ahead_evicted_unread_total",
        Kind::Counter,
        "Read-ahead chunks evicted before a fetch read them (device reads wasted). Read-ahead takes at most half the budget and its unread chunks are evicted last, so this stays 0 unless they went unread for 10 s.",
        |r| r.read_cache.read_ahead_evicted_unread as f64,
    ),
    (
        "ringlog_read_cache_read_ahead_expired_unread_total",
        Kind::Counter,
        "Read-ahead chunks no fetch read within 10 s (their consumer went away); they stop holding read-ahead room.",
        |r| r.read_cache.read_ahead_expired_unread as f64,
    ),
    (
        "ringlog_read_gate_reads_total",
        Kind::Counter,
        "O_DIRECT segment reads of the read cache admitted to the device (at most a few MiB in flight a shard, a fetch's reads before read-ahead).",
        |r| r.read_gate.reads as f64,
    ),
    (
        "ringlog_read_gate_read_bytes_total",
        Kind::Counter,
        "Bytes of the O_DIRECT segment reads admitted to the device.",
        |r| r.read_gate.read_bytes as f64,
    ),
    (
        "ringlog_read_gate_waits_total",
        Kind::Counter,
        "O_DIRECT segment reads that waited for room at the device (the shard's reads in flight were at the bound).",
        |r| r.read_gate.waited as f64,
    ),
    (
        "ringlog_read_gate_wait_seconds_total",
        Kind::Counter,
        "Time O_DIRECT segment reads waited for room at the device, summed.",
        |r| r.read_gate.wait_nanos as f64 / 1e9,
    ),
    (
        "ringlog_read_gate_in_flight_max_bytes",
        Kind::Gauge,
        "The most O_DIRECT read bytes the shard had in flight at once since it started (the bound, or one larger read alone).",
        |r| r.read_gate.in_flight_max as f64,
    ),
    (
        "ringlog_reassignments_in_progress",
        Kind::Gauge,
        "Partitions the shard leads whose replicas are moving (AlterPartitionReassignments).",
        |r| r.moves.reassigning as f64,
    ),
    (
        "ringlog_reassignment_adding_replicas",
        Kind::Gauge,
        "Replicas on the shard that a move is adding (catching up, not in the ISR yet).",
        |r| r.moves.adding_here as f64,
    ),
    (
        "ringlog_reassignment_bytes_left",
        Kind::Gauge,
        "Bytes the replicas being added to partitions the shard leads still have to copy (estimated from offsets and the leader's bytes per offset).",
        |r| r.moves.bytes_left as f64,
    ),
    (
        "ringlog_replication_throttled_leader_bytes_total",
        Kind::Counter,
        "Bytes the shard sent as leader to out-of-sync followers of throttled replicas (leader.replication.throttled.replicas).",
        |r| r.moves.throttled_leader_bytes as f64,
    ),
    (
        "ringlog_replication_throttled_follower_bytes_total",
        Kind::Counter,
        "Bytes the shard fetched as an out-of-sync follower of throttled replicas (follower.replication.throttled.replicas).",
        |r| r.moves.throttled_follower_bytes as f64,
    ),
    (
        "ringlog_replication_throttle_leader_rate_bytes",
        Kind::Gauge,
        "leader.replication.throttled.rate in force on the shard's broker (-1: unlimited).",
        |r| r.moves.leader_rate.map_or(-1.0, |v| v as f64),
    ),
    (
        "ringlog_replication_throttle_follower_rate_bytes",
        Kind::Gauge,
        "follower.replication.throttled.rate in force on the shard's broker (-1: unlimited).",
        |r| r.moves.follower_rate.map_or(-1.0, |v| v as f64),
    ),
    (
        "ringlog_replication_throttle_held_back_total",
        Kind::Counter,
        "Times a throttled partition was left out of a fetch answer or request because its throttle budget was spent.",
        |r| r.moves.held_back as f64,
    ),
    (
        "ringlog_tail_bytes",
        Kind::Gauge,
        "Memory the in-memory tails of the shard's active segments hold.",
        |r| r.tail_bytes as f64,
    ),
];

// The read-ahead help texts above say "10 s".
const _: () = assert!(iouring_log::limits::READ_AHEAD_UNREAD_TTL.as_secs() == 10);

/// The scrape's text. `reports[i]` is shard `i`'s report, `None` when it did not answer.
pub fn render(reports: &[Option<ShardReport>], node: &NodeFacts) -> String {
    let mut e = Exposition::default();
    let up: Vec<&ShardReport> = reports.iter().flatten().collect();
    e.family(
        "ringlog_build_info",
        Kind::Gauge,
        "The broker's version and node id (always 1).",
        vec![Sample::new(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("node_id", node.node_id.to_string()),
            ],
            1.0,
        )],
    );
    e.family(
        "ringlog_shard_up",
        Kind::Gauge,
        "1 if the shard answered this scrape in time, 0 if not (its figures are missing).",
        reports
            .iter()
            .enumerate()
            .map(|(i, r)| Sample::new(shard_label(i), f64::from(u8::from(r.is_some())))),
    );
    process_families(&mut e, &node.process);
    request_families(&mut e, &up);
    stall_families(&mut e, &up);
    memory_families(&mut e, node);
    quota_families(&mut e, node);
    for &(name, kind, help, figure) in SHARD_FAMILIES {
        e.family(
            name,
            kind,
            help,
            up.iter()
                .map(|r| Sample::new(shard_label(r.shard), figure(r))),
        );
    }
    partition_families(&mut e, &up);
    group_families(&mut e, &up);
    e.family(
        "ringlog_transactional_ids",
        Kind::Gauge,
        "Transactional ids the shard coordinates, by state (Ongoing, PrepareCommit, CompleteCommit, …).",
        up.iter().flat_map(|r| {
            r.transactional_ids.iter().map(|(state, n)| {
                let mut labels = shard_label(r.shard);
                labels.push(("state", (*state).to_string()));
                Sample::new(labels, *n as f64)
            })
        }),
    );
    e.finish()
}

fn process_families(e: &mut Exposition, p: &ProcessFacts) {
    let one = |v: Option<f64>| v.map(|v| Sample::new(Vec::new(), v));
    e.family(
        "process_cpu_seconds_total",
        Kind::Counter,
        "User and system CPU time of the broker process.",
        one(p.cpu_seconds),
    );
    e.family(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory of the broker process.",
        one(p.resident_bytes.map(|v| v as f64)),
    );
    e.family(
        "process_open_fds",
        Kind::Gauge,
        "Open file descriptors of the broker process.",
        one(p.open_fds.map(|v| v as f64)),
    );
    e.family(
        "process_start_time_seconds",
        Kind::Gauge,
        "When the broker process started, in seconds since the Unix epoch.",
        one(p.start_time_seconds),
    );
}

fn request_families(e: &mut Exposition, up: &[&ShardReport]) {
    let mut counts = Vec::new();
    let mut latency = Vec::new();
    for r in up {
        for a in &r.apis {
            let labels = vec![
                ("shard", r.shard.to_string()),
                ("request", api_name(a.api_key)),
            ];
            counts.push(Sample::new(labels.clone(), a.count as f64));
            for (q, v) in &a.quantiles {
                let mut l = labels.clone();
                l.push(("quantile", q.to_string()));
                latency.push(Sample::new(l, v.unwrap_or(f64::NAN)));
            }
            latency.push(Sample {
                suffix: "_sum",
                labels: labels.clone(),
                value: a.sum_seconds,
            });
            latency.push(Sample {
                suffix: "_count",
                labels,
                value: a.count as f64,
            });
        }
    }
    e.family(
        "ringlog_requests_total",
        Kind::Counter,
        "Requests served, per API (Kafka's RequestsPerSec).",
        counts,
    );
    e.family(
        "ringlog_request_latency_seconds",
        Kind::Summary,
        "Time from a request read to its response written, per API (Kafka's TotalTimeMs); quantiles over the last 60 to 120 seconds, NaN when no request came in that time.",
        latency,
    );
}

/// The stall probe and the task queues' runtime: where a shard's time went, and how long a
/// task that was due waited.
fn stall_families(e: &mut Exposition, up: &[&ShardReport]) {
    let mut lateness = Vec::new();
    let mut stalls = Vec::new();
    let mut longest = Vec::new();
    let mut queues = Vec::new();
    for r in up {
        for (q, v) in &r.stalls.lateness {
            let mut l = shard_label(r.shard);
            l.push(("quantile", q.to_string()));
            lateness.push(Sample::new(l, v.unwrap_or(f64::NAN)));
        }
        for (threshold, count) in STALL_THRESHOLDS.iter().zip(r.stalls.stalls) {
            let mut l = shard_label(r.shard);
            l.push(("longer_than", format!("{}", threshold.as_secs_f64())));
            stalls.push(Sample::new(l, count as f64));
        }
        longest.push(Sample::new(
            shard_label(r.shard),
            r.stalls.longest.as_secs_f64(),
        ));
        for (name, busy) in &r.task_queues {
            let mut l = shard_label(r.shard);
            l.push(("queue", (*name).to_owned()));
            queues.push(Sample::new(l, busy.as_secs_f64()));
        }
    }
    e.family(
        "ringlog_shard_stall_probe_lateness_seconds",
        Kind::Summary,
        "How late the shard's stall probe ran after it was due (every 10 ms): time a due task could not run (another task running, a blocking call, the thread preempted, the reactor waking late); quantiles over the last 60 to 120 seconds.",
        lateness,
    );
    e.family(
        "ringlog_shard_stalls_total",
        Kind::Counter,
        "Stall probe runs at least longer_than seconds late.",
        stalls,
    );
    e.family(
        "ringlog_shard_stall_longest_seconds",
        Kind::Gauge,
        "The latest the stall probe ran since the broker started.",
        longest,
    );
    io_time_families(e, up, IoFamily::DATA_WRITES);
    io_time_families(e, up, IoFamily::SYNCS);
    io_time_families(e, up, IoFamily::SEALS);
    e.family(
        "ringlog_shard_task_queue_busy_seconds_total",
        Kind::Counter,
        "Time the shard's executor ran tasks of each task queue (requests, maintenance, log-cleaner, stall-probe).",
        queues,
    );
}

/// One kind of log I/O whose times the shards count ([`ShardIoTimes`]), and how it is named.
struct IoFamily {
    /// `ringlog_log_<prefix>…`: `data_write`, `sync`, `seal`.
    prefix: &'static str,
    /// What one operation is, for the help texts.
    what: &'static str,
    pick: fn(&ShardIoTimes) -> &IoTimes,
}

impl IoFamily {
    const DATA_WRITES: IoFamily = IoFamily {
        prefix: "data_write",
        what:
            "Data writes to segment files (an acks=1 produce waits for the one covering its bytes)",
        pick: |t| &t.data_writes,
    };
    const SYNCS: IoFamily = IoFamily {
        prefix: "sync",
        what: "fdatasyncs of segment files (a produce under flush.messages=1 waits for one)",
        pick: |t| &t.syncs,
    };
    const SEALS: IoFamily = IoFamily {
        prefix: "seal",
        what: "Seals of rolled segments, from the roll until the seal finished (writes drained, file trimmed and synced, indexes written; flushed offsets after a roll wait for it up to that sync)",
        pick: |t| &t.seals,
    };
}

fn io_time_families(e: &mut Exposition, up: &[&ShardReport], kind: IoFamily) {
    let per_shard = |f: fn(&IoTimes) -> f64| -> Vec<Sample> {
        up.iter()
            .map(|r| Sample::new(shard_label(r.shard), f((kind.pick)(&r.log_io))))
            .collect()
    };
    let p = kind.prefix;
    e.family(
        &format!("ringlog_log_{p}s_total"),
        Kind::Counter,
        &format!("{}.", kind.what),
        per_shard(|t| t.count as f64),
    );
    e.family(
        &format!("ringlog_log_{p}_seconds_total"),
        Kind::Counter,
        "Time they took, each from its call to its completion, summed.",
        per_shard(|t| t.total.as_secs_f64()),
    );
    e.family(
        &format!("ringlog_log_{p}_longest_seconds"),
        Kind::Gauge,
        "The longest one since the broker started.",
        per_shard(|t| t.longest.as_secs_f64()),
    );
    let mut slow = Vec::new();
    for r in up {
        let times = (kind.pick)(&r.log_io);
        for (threshold, n) in SLOW_IO_THRESHOLDS.iter().zip(times.slow) {
            let mut l = shard_label(r.shard);
            l.push(("longer_than", format!("{}", threshold.as_secs_f64())));
            slow.push(Sample::new(l, n as f64));
        }
    }
    e.family(
        &format!("ringlog_log_slow_{p}s_total"),
        Kind::Counter,
        "Those that took at least longer_than seconds (the device floor of a 16 KiB write is ~0.2 ms at p99, of an fdatasync ~0.2-0.5 ms).",
        slow,
    );
}

fn quota_families(e: &mut Exposition, node: &NodeFacts) {
    use crate::quotas::QuotaKey;
    e.family(
        "ringlog_client_quota_rate",
        Kind::Gauge,
        "Each client quota entity's use on this node over the quota window, in the quota's unit: bytes/s (producer_byte_rate, consumer_byte_rate), percent of a shard (request_percentage), partitions/s (controller_mutation_rate).",
        node.quota_rates
            .iter()
            .map(|(key, entity, rate)| {
                let value = match key {
                    QuotaKey::RequestPercentage => rate / 1e7,
                    _ => *rate,
                };
                Sample::new(
                    vec![("quota", key.name().to_owned()), ("entity", entity.clone())],
                    value,
                )
            })
            .collect::<Vec<_>>(),
    );
}

fn memory_families(e: &mut Exposition, node: &NodeFacts) {
    let one = |v: f64| vec![Sample::new(Vec::new(), v)];
    if let Some(cap) = node.request_budget_capacity {
        e.family(
            "ringlog_request_budget_bytes",
            Kind::Gauge,
            "queued.max.request.bytes: memory all connections may hold in request frames (absent when unbounded).",
            one(cap as f64),
        );
        e.family(
            "ringlog_request_budget_available_bytes",
            Kind::Gauge,
            "Request budget not held by any request.",
            one(node.request_budget_available as f64),
        );
    }
    e.family(
        "ringlog_request_budget_waiting_connections",
        Kind::Gauge,
        "Connections waiting for request budget before reading their next request.",
        one(node.request_budget_waiting as f64),
    );
}

/// Gauges with one sample per replica: name, help, the figure (`None`: not reported).
type PartitionFigure = (
    &'static str,
    &'static str,
    fn(&PartitionReport) -> Option<f64>,
);

const PARTITION_FAMILIES: &[PartitionFigure] = &[
    (
        "ringlog_partition_leader",
        "1 if this node's replica leads the partition, 0 if it follows.",
        |p| Some(f64::from(u8::from(p.leader))),
    ),
    (
        "ringlog_partition_log_start_offset",
        "The replica's log start offset (Kafka's LogStartOffset).",
        |p| Some(p.log_start_offset as f64),
    ),
    (
        "ringlog_partition_log_end_offset",
        "The replica's log end offset (Kafka's LogEndOffset).",
        |p| Some(p.log_end_offset as f64),
    ),
    (
        "ringlog_partition_high_watermark",
        "The replica's high watermark: consumers read below it.",
        |p| Some(p.high_watermark as f64),
    ),
    (
        "ringlog_partition_size_bytes",
        "Bytes in the replica's log segments (Kafka's Size).",
        |p| Some(p.size_bytes as f64),
    ),
    (
        "ringlog_partition_replicas",
        "Replicas of the partition (reported by its leader).",
        |p| p.leader.then_some(p.replicas as f64),
    ),
    (
        "ringlog_partition_in_sync_replicas",
        "In-sync replicas of the partition, the leader included (reported by its leader).",
        |p| p.leader.then_some(p.in_sync_replicas as f64),
    ),
    (
        "ringlog_partition_last_stable_offset",
        "The last stable offset: read_committed consumers read below it (reported by its leader).",
        |p| p.leader.then_some(p.last_stable_offset as f64),
    ),
    (
        "ringlog_partition_last_stable_offset_lag",
        "High watermark minus last stable offset: what open transactions hold back from read_committed consumers (Kafka's LastStableOffsetLag; reported by its leader).",
        |p| p.leader.then_some((p.high_watermark - p.last_stable_offset).max(0) as f64),
    ),
    (
        "ringlog_partition_open_transactions",
        "Transactions with data in the partition and no marker yet (reported by its leader).",
        |p| p.leader.then_some(p.open_transactions as f64),
    ),
];

/// Gauges counting a shard's replicas: name, help, which replicas count.
type PartitionCount = (&'static str, &'static str, fn(&PartitionReport) -> bool);

const PARTITION_COUNTS: &[PartitionCount] = &[
    (
        "ringlog_leader_partitions",
        "Partitions the shard leads (Kafka's LeaderCount).",
        |p| p.leader,
    ),
    (
        "ringlog_under_replicated_partitions",
        "Partitions the shard leads with fewer in-sync replicas than replicas (Kafka's UnderReplicatedPartitions).",
        |p| p.leader && p.in_sync_replicas < p.replicas,
    ),
    (
        "ringlog_offline_log_partitions",
        "Replicas whose log failed (an I/O error) and serve nothing until reopened.",
        |p| p.offline,
    ),
];

fn partition_families(e: &mut Exposition, up: &[&ShardReport]) {
    for &(name, help, figure) in PARTITION_FAMILIES {
        let samples = up
            .iter()
            .flat_map(|r| &r.partitions)
            .filter_map(|p| figure(p).map(|v| Sample::new(partition_labels(p), v)));
        e.family(name, Kind::Gauge, help, samples);
    }
    for &(name, help, counted) in PARTITION_COUNTS {
        let samples = up.iter().map(|r| {
            let n = r.partitions.iter().filter(|p| counted(p)).count();
            Sample::new(shard_label(r.shard), n as f64)
        });
        e.family(name, Kind::Gauge, help, samples);
    }
}

fn group_families(e: &mut Exposition, up: &[&ShardReport]) {
    // Consumers read up to the high watermark: lag is measured from it, as Kafka's
    // ConsumerGroupCommand does. Only partitions led on this node are known here.
    let high_watermarks: HashMap<(&str, i32), i64> = up
        .iter()
        .flat_map(|r| &r.partitions)
        .filter(|p| p.leader)
        .map(|p| ((p.topic.as_str(), p.partition), p.high_watermark))
        .collect();
    let groups: Vec<_> = up.iter().flat_map(|r| &r.groups).collect();
    e.family(
        "ringlog_consumer_group_members",
        Kind::Gauge,
        "Members of each group this node coordinates.",
        groups
            .iter()
            .map(|g| Sample::new(vec![("group", g.group.clone())], g.members as f64)),
    );
    e.family(
        "ringlog_consumer_group_state",
        Kind::Gauge,
        "1 for each group's state (Empty, PreparingRebalance, CompletingRebalance, Stable).",
        groups.iter().map(|g| {
            Sample::new(
                vec![("group", g.group.clone()), ("state", g.state.to_owned())],
                1.0,
            )
        }),
    );
    let committed: Vec<_> = groups
        .iter()
        .flat_map(|g| g.committed.iter().map(move |c| (g.group.as_str(), c)))
        .collect();
    let labels = |group: &str, topic: &str, partition: i32| {
        vec![
            ("group", group.to_owned()),
            ("topic", topic.to_owned()),
            ("partition", partition.to_string()),
        ]
    };
    e.family(
        "ringlog_consumer_group_committed_offset",
        Kind::Gauge,
        "Each group's committed offset per partition.",
        committed
            .iter()
            .map(|(g, (t, p, o))| Sample::new(labels(g, t, *p), *o as f64)),
    );
    e.family(
        "ringlog_consumer_group_lag",
        Kind::Gauge,
        "High watermark minus the committed offset, per group and partition (partitions led on this node only).",
        committed.iter().filter_map(|(g, (t, p, o))| {
            let hw = high_watermarks.get(&(t.as_str(), *p))?;
            Some(Sample::new(labels(g, t, *p), (hw - o).max(0) as f64))
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::super::recorder::ApiReport;
    use super::super::report::GroupReport;
    use super::*;

    fn partition(topic: &str, partition: i32, leader: bool, hw: i64) -> PartitionReport {
        PartitionReport {
            topic: topic.into(),
            partition,
            leader,
            log_start_offset: 0,
            log_end_offset: hw + 1,
            high_watermark: hw,
            size_bytes: 100,
            replicas: 3,
            in_sync_replicas: if leader { 2 } else { 0 },
            offline: false,
            last_stable_offset: hw - 2,
            open_transactions: 1,
        }
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            node_id: NodeId(1),
            request_budget_capacity: Some(1024),
            request_budget_available: 1000,
            request_budget_waiting: 0,
            quota_rates: vec![(
                crate::quotas::QuotaKey::RequestPercentage,
                "user=a".into(),
                2.5e7,
            )],
            process: ProcessFacts::default(),
        }
    }

    #[test]
    fn lag_comes_from_the_leaders_high_watermark() {
        let r0 = ShardReport {
            shard: 0,
            partitions: vec![partition("t", 0, true, 10), partition("t", 1, false, 7)],
            groups: vec![GroupReport {
                group: "g".into(),
                state: "Stable",
                members: 2,
                committed: vec![("t".into(), 0, 4), ("t".into(), 1, 3)],
            }],
            transactional_ids: vec![("Ongoing", 3)],
            apis: vec![ApiReport {
                api_key: 0,
                count: 3,
                sum_seconds: 0.003,
                quantiles: vec![(0.5, Some(0.001)), (0.99, None)],
            }],
            ..Default::default()
        };
        let text = render(&[Some(r0), None], &facts());
        assert!(
            text.contains(
                "ringlog_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 6\n"
            ),
            "{text}"
        );
        // Partition 1 is led elsewhere: its lag is not known here.
        assert!(
            !text.contains("ringlog_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"1\"}")
        );
        assert!(text.contains(
            "ringlog_consumer_group_committed_offset{group=\"g\",topic=\"t\",partition=\"1\"} 3\n"
        ));
        assert!(text.contains("ringlog_shard_up{shard=\"0\"} 1\nringlog_shard_up{shard=\"1\"} 0\n"));
        assert!(text.contains("ringlog_under_replicated_partitions{shard=\"0\"} 1\n"));
        assert!(text.contains("ringlog_requests_total{shard=\"0\",request=\"Produce\"} 3\n"));
        assert!(text.contains("ringlog_request_latency_seconds{shard=\"0\",request=\"Produce\",quantile=\"0.99\"} NaN\n"));
        assert!(text.contains(
            "ringlog_request_latency_seconds_count{shard=\"0\",request=\"Produce\"} 3\n"
        ));
        assert!(text.contains("ringlog_request_budget_bytes 1024\n"));
        assert!(text
            .contains("ringlog_partition_last_stable_offset_lag{topic=\"t\",partition=\"0\"} 2\n"));
        assert!(
            !text.contains("ringlog_partition_last_stable_offset_lag{topic=\"t\",partition=\"1\"}")
        );
        assert!(text.contains("ringlog_transactional_ids{shard=\"0\",state=\"Ongoing\"} 3\n"));
        // Every family once: each TYPE line names a distinct family.
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut distinct = types.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(types.len(), distinct.len());
    }
}
