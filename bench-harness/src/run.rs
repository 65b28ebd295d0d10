//! One benchmark run: create fresh topics, start producers and consumers on threads, sample
//! throughput once a second, merge the histograms, and build the result JSON with OpenMessaging
//! Benchmark's field names plus ringlog's additions (CPU seconds per GB, machine, versions).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use crate::client::ClientError;
use crate::cluster::{create_topics, discover, Cluster};
use crate::consumer::{assign, Assigned, ConsumerTask, GroupSpec};
use crate::producer::ProducerTask;
use crate::stats::{Counters, Histograms};
use crate::workload::ConsumerAssignment;
use crate::workload::Workload;

pub struct RunOptions {
    pub bootstrap: String,
    pub target: String,
    /// The broker's processes (every node of a cluster); their CPU time is summed.
    pub broker_pids: Vec<u32>,
    /// Print a progress line every second to stderr.
    pub progress: bool,
    /// After writing a catch-up read's backlog, sync and drop the kernel's page cache (root):
    /// the consumers then read what the broker has not kept in its own memory from the device.
    pub drop_caches: bool,
}

/// `sync`, then `echo 3 > /proc/sys/vm/drop_caches`.
fn drop_page_cache() -> Result<(), ClientError> {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        ClientError::Broker(format!(
            "--drop-caches: writing /proc/sys/vm/drop_caches (needs root): {e}"
        ))
    })
}

/// Watches a catch-up read: the seconds from `start` until the consumers are within one second
/// of production of the head (backlog at most `slack` messages), polled every 10 ms.
fn watch_drain(
    counters: Arc<Counters>,
    backlog: Backlog,
    slack: u64,
    start: Instant,
    end: Instant,
) -> std::thread::JoinHandle<Option<f64>> {
    std::thread::spawn(move || {
        while Instant::now() < end {
            let (p, c) = (
                Counters::get(&counters.acked_messages),
                Counters::get(&counters.consumed_messages),
            );
            if backlog.at(p, c) <= slack as i64 {
                return Some(start.elapsed().as_secs_f64());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    })
}

fn proc_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

/// A `/proc/PID/status` memory line (`VmRSS`, `VmHWM`) in bytes.
fn proc_memory_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A memory figure of every process in `pids`, summed, in MB; `None` if one is unreadable.
fn procs_memory_mb(pids: &[u32], field: &str) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let bytes: Option<u64> = pids.iter().map(|&p| proc_memory_bytes(p, field)).sum();
    bytes.map(|b| b as f64 / 1e6)
}

/// The CPU seconds of every process in `pids`, summed; `None` if there are none or one is gone.
fn procs_cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|&p| proc_cpu_seconds(p)).sum()
}

/// OMB's catch-up read: before the test, the producers write `consumerBacklogSizeGB` as fast as
/// they can (nothing consumes, nothing is measured); the consumers then start at the beginning
/// of the partitions, that many bytes behind, while the producers go on at the workload's rate.
fn fill_backlog(
    w: &Arc<Workload>,
    cluster: &Arc<Cluster>,
    topics: &[String],
    progress: bool,
) -> Result<u64, ClientError> {
    let target = (w.consumer_backlog_size_gb * 1e9) as u64;
    let counters = Arc::new(Counters::default());
    let histograms = Arc::new(Histograms::default());
    let stop: Arc<AtomicBool> = Arc::default();
    let start = Instant::now();
    // Never measured; an hour at most.
    let end = start + Duration::from_secs(3600);
    let mut threads = Vec::new();
    for topic in topics {
        for _ in 0..w.producers_per_topic {
            let t = ProducerTask {
                workload: w.clone(),
                cluster: cluster.clone(),
                topic: topic.clone(),
                rate: 0.0,
                start,
                measure_from: end,
                end,
                counters: counters.clone(),
                histograms: histograms.clone(),
                stop: stop.clone(),
            };
            threads.push(std::thread::spawn(move || t.run()));
        }
    }
    let mut last = Instant::now();
    while Counters::get(&counters.acked_bytes) < target && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        if progress && last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            eprintln!(
                "[backlog] {:.2} of {:.2} GB written",
                Counters::get(&counters.acked_bytes) as f64 / 1e9,
                target as f64 / 1e9
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("backlog producer thread")?;
    }
    // Refused batches (a leader just elected, say) are not in the backlog: it is counted from
    // acknowledged bytes, so it is still the size asked for.
    let errors = Counters::get(&counters.errors);
    if errors > 0 {
        eprintln!(
            "[backlog] {errors} produce requests refused while writing it: {:?}",
            counters.error_kinds.lock().expect("error kinds lock")
        );
    }
    Ok(Counters::get(&counters.acked_messages))
}

/// One run at the workload's producer rate on fresh topics (`findSustainableRate` is
/// `sustainable::find_and_measure`'s, which calls this for each trial).
pub fn run(workload: Workload, opts: &RunOptions) -> Result<Value, ClientError> {
    run_fixed(workload, opts).map(|(result, _)| result)
}

/// [`run`], also returning the topics it created.
pub(crate) fn run_fixed(
    workload: Workload,
    opts: &RunOptions,
) -> Result<(Value, Vec<String>), ClientError> {
    let w = Arc::new(workload);
    let suffix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let topics: Vec<String> = (0..w.topics)
        .map(|i| format!("{}-{i}-{suffix}", w.name))
        .collect();
    create_topics(
        &opts.bootstrap,
        &topics,
        (w.partitions_per_topic, w.replication_factor),
        &w.topic_config,
    )?;
    let cluster = Arc::new(discover(&opts.bootstrap, &topics, w.partitions_per_topic)?);
    let backlog_messages = if w.consumer_backlog_size_gb > 0.0 {
        fill_backlog(&w, &cluster, &topics, opts.progress)?
    } else {
        0
    };
    if backlog_messages > 0 && opts.drop_caches {
        drop_page_cache()?;
    }
    let counters = Arc::new(Counters::default());
    let histograms = Arc::new(Histograms::default());
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(w.warmup_duration_minutes * 60.0);
    let end = measure_from + Duration::from_secs_f64(w.test_duration_minutes * 60.0);
    let broker_cpu0 = procs_cpu_seconds(&opts.broker_pids);
    let own_pid = std::process::id();
    let harness_cpu0 = proc_cpu_seconds(own_pid);
    let mut threads = Vec::new();
    let producers = w.topics * w.producers_per_topic;
    let rate = if w.producer_rate == 0 {
        0.0
    } else {
        w.producer_rate as f64 / producers as f64
    };
    for topic in &topics {
        for _ in 0..w.producers_per_topic {
            let t = ProducerTask {
                workload: w.clone(),
                cluster: cluster.clone(),
                topic: topic.clone(),
                rate,
                start,
                measure_from,
                end,
                counters: counters.clone(),
                histograms: histograms.clone(),
                stop: Arc::default(),
            };
            threads.push(std::thread::spawn(move || t.run()));
        }
        for sub in 0..w.subscriptions_per_topic {
            let tasks: Vec<(Assigned, Option<GroupSpec>)> = match w.consumer_assignment {
                ConsumerAssignment::Partitions => assign(
                    topic,
                    w.partitions_per_topic,
                    w.consumer_per_subscription,
                    &cluster.leaders,
                )
                .into_iter()
                .map(|a| (a, None))
                .collect(),
                ConsumerAssignment::Group => {
                    let spec = GroupSpec {
                        bootstrap: opts.bootstrap.clone(),
                        group: format!("{topic}-sub-{sub}"),
                        topic: topic.clone(),
                        partitions: w.partitions_per_topic,
                        leaders: cluster.leaders.clone(),
                    };
                    (0..w.consumer_per_subscription)
                        .map(|_| (Vec::new(), Some(spec.clone())))
                        .collect()
                }
            };
            for (assigned, group) in tasks {
                let t = ConsumerTask {
                    assigned,
                    group,
                    measure_from,
                    end: end + Duration::from_secs(2),
                    counters: counters.clone(),
                    histograms: histograms.clone(),
                };
                threads.push(std::thread::spawn(move || t.run()));
            }
        }
    }
    // Sampled over the measured interval only; consumers then get 2 s more to drain.
    let backlog = Backlog {
        initial: backlog_messages,
        subscriptions: u64::from(w.subscriptions_per_topic),
    };
    let drain = (backlog_messages > 0).then(|| {
        let slack = w.producer_rate.max(1) * backlog.subscriptions;
        watch_drain(counters.clone(), backlog, slack, start, end)
    });
    let series = sample_until(&counters, backlog, start, measure_from, end, opts.progress);
    for t in threads {
        t.join().expect("worker thread")?;
    }
    let drain_seconds = drain.and_then(|t| t.join().expect("drain watcher"));
    let secs = end.duration_since(measure_from).as_secs_f64();
    let cpu = |pids: &[u32], before: Option<f64>| match (procs_cpu_seconds(pids), before) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    let acked_gb = Counters::get(&counters.acked_bytes) as f64 / 1e9;
    let per_gb = |s: Option<f64>| s.map(|s| s / acked_gb.max(1e-9));
    let mut result = Map::new();
    result.insert("workload".into(), json!(w.name));
    result.insert("driver".into(), json!(opts.target));
    result.insert("messageSize".into(), json!(w.message_size));
    result.insert("topicConfig".into(), json!(w.topic_config));
    result.insert("brokerConfig".into(), json!(w.broker_config));
    result.insert("topics".into(), json!(w.topics));
    result.insert("partitions".into(), json!(w.partitions_per_topic));
    result.insert("producersPerTopic".into(), json!(w.producers_per_topic));
    result.insert(
        "consumersPerTopic".into(),
        json!(w.subscriptions_per_topic * w.consumer_per_subscription),
    );
    result.insert("publishRate".into(), json!(series.publish_rate));
    result.insert("consumeRate".into(), json!(series.consume_rate));
    result.insert("backlog".into(), json!(series.backlog));
    result.insert("sampleRateSeconds".into(), json!(1));
    if backlog_messages > 0 {
        // The backlog read once per subscription, over the seconds it took to catch up.
        let backlog_bytes =
            backlog_messages as f64 * w.message_size as f64 * f64::from(w.subscriptions_per_topic);
        result.insert("catchUpDrainSeconds".into(), json!(drain_seconds));
        result.insert(
            "catchUpReadMBps".into(),
            json!(drain_seconds.map(|s| backlog_bytes / 1e6 / s)),
        );
        result.insert("pageCacheDropped".into(), json!(opts.drop_caches));
    }
    insert_latency(
        &mut result,
        "aggregatedPublishLatency",
        &histograms.publish_latency_us.lock().expect("lock"),
        1000.0,
    );
    insert_latency(
        &mut result,
        "aggregatedPublishDelayLatency",
        &histograms.publish_delay_us.lock().expect("lock"),
        1.0,
    );
    insert_latency(
        &mut result,
        "aggregatedEndToEndLatency",
        &histograms.end_to_end_us.lock().expect("lock"),
        1000.0,
    );
    result.insert("measuredSeconds".into(), json!(secs));
    result.insert("errors".into(), json!(Counters::get(&counters.errors)));
    result.insert(
        "errorKinds".into(),
        json!(*counters.error_kinds.lock().expect("error kinds lock")),
    );
    result.insert(
        "brokerCpuSecondsPerGB".into(),
        json!(per_gb(cpu(&opts.broker_pids, broker_cpu0))),
    );
    // Resident memory at the end of the run, and the most the broker ever had resident.
    result.insert(
        "brokerRssMB".into(),
        json!(procs_memory_mb(&opts.broker_pids, "VmRSS:")),
    );
    result.insert(
        "brokerPeakRssMB".into(),
        json!(procs_memory_mb(&opts.broker_pids, "VmHWM:")),
    );
    result.insert(
        "harnessCpuSecondsPerGB".into(),
        json!(per_gb(cpu(&[own_pid], harness_cpu0))),
    );
    result.insert(
        "workloadDefinition".into(),
        serde_json::to_value(w.as_ref()).expect("workload serialises"),
    );
    Ok((Value::Object(result), topics))
}

/// OMB's latency fields: Avg, 50pct … 9999pct, Max, and a quantile map, in `unit` (1000 for ms
/// from microseconds, 1 for microseconds as OMB's publish delay).
fn insert_latency(out: &mut Map<String, Value>, prefix: &str, h: &Histogram<u64>, unit: f64) {
    let q = |p: f64| h.value_at_quantile(p) as f64 / unit;
    out.insert(format!("{prefix}Avg"), json!(h.mean() / unit));
    for (name, p) in [
        ("50pct", 0.5),
        ("75pct", 0.75),
        ("95pct", 0.95),
        ("99pct", 0.99),
        ("999pct", 0.999),
        ("9999pct", 0.9999),
    ] {
        out.insert(format!("{prefix}{name}"), json!(q(p)));
    }
    out.insert(format!("{prefix}Max"), json!(h.max() as f64 / unit));
    let quantiles: Map<String, Value> = h
        .iter_quantiles(1)
        .map(|v| {
            (
                format!("{:.6}", v.quantile_iterated_to() * 100.0),
                json!(v.value_iterated_to() as f64 / unit),
            )
        })
        .collect();
    out.insert(format!("{prefix}Quantiles"), Value::Object(quantiles));
    out.insert(format!("{prefix}Count"), json!(h.len()));
}

struct Series {
    publish_rate: Vec<f64>,
    consume_rate: Vec<f64>,
    backlog: Vec<i64>,
}

/// What the consumers still have to read, as OMB counts it: every message published (before the
/// test, for a catch-up read, and during it) once per subscription, less those consumed.
#[derive(Clone, Copy)]
struct Backlog {
    initial: u64,
    subscriptions: u64,
}

impl Backlog {
    fn at(self, published: u64, consumed: u64) -> i64 {
        ((self.initial + published) * self.subscriptions) as i64 - consumed as i64
    }
}

fn sample_until(
    c: &Counters,
    backlog: Backlog,
    start: Instant,
    measure_from: Instant,
    end: Instant,
    progress: bool,
) -> Series {
    let mut s = Series {
        publish_rate: Vec::new(),
        consume_rate: Vec::new(),
        backlog: Vec::new(),
    };
    let (mut last_p, mut last_c) = (0u64, 0u64);
    let mut tick = start;
    while tick < end {
        tick += Duration::from_secs(1);
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        let (p, cons) = (
            Counters::get(&c.acked_messages),
            Counters::get(&c.consumed_messages),
        );
        if tick > measure_from {
            s.publish_rate.push((p - last_p) as f64);
            s.consume_rate.push((cons - last_c) as f64);
            s.backlog.push(backlog.at(p, cons));
        }
        if progress {
            let phase = if tick <= measure_from {
                "warm-up"
            } else {
                "measuring"
            };
            let left = end.saturating_duration_since(tick).as_secs();
            eprintln!("[{phase}] {:>9.0} msg/s published, {:>9.0} msg/s consumed, backlog {:>9}, {left:>4} s left", (p - last_p) as f64, (cons - last_c) as f64, backlog.at(p, cons));
        }
        (last_p, last_c) = (p, cons);
    }
    s
}
