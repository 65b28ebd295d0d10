//! What a shard counts while it serves: requests and their latency per API, bytes in and out,
//! connections accepted. Shard-local cells, no locks and no atomics: the endpoint reads them
//! through a report the shard builds when asked (`report.rs`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::limits::REQUEST_LATENCY_MAX_US;
use crate::limits::REQUEST_LATENCY_WINDOW;
use crate::limits::STALL_THRESHOLDS;

/// Quantiles reported for each API's latency (a Prometheus summary).
pub const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];

/// Latencies recorded on one shard (one API's requests, or the stall probe's lateness): a
/// count, a sum and the histograms of the last two windows.
struct ApiStats {
    count: u64,
    sum_us: u64,
    /// Latencies (µs) of the current window and of the one before it.
    current: Histogram<u64>,
    previous: Histogram<u64>,
    window_start: Instant,
}

impl ApiStats {
    fn new(now: Instant) -> ApiStats {
        let h = || {
            Histogram::new_with_bounds(1, REQUEST_LATENCY_MAX_US, 2)
                .expect("1 µs to 10 min at 2 significant figures is a valid histogram")
        };
        ApiStats {
            count: 0,
            sum_us: 0,
            current: h(),
            previous: h(),
            window_start: now,
        }
    }

    /// Moves to a new window if the current one is over (an idle API's old windows are
    /// dropped: after two idle windows nothing is left).
    fn rotate(&mut self, now: Instant) {
        let age = now.saturating_duration_since(self.window_start);
        if age < REQUEST_LATENCY_WINDOW {
            return;
        }
        if age >= 2 * REQUEST_LATENCY_WINDOW {
            self.previous.reset();
        } else {
            std::mem::swap(&mut self.previous, &mut self.current);
        }
        self.current.reset();
        self.window_start = now;
    }

    fn record(&mut self, latency: Duration, now: Instant) {
        self.rotate(now);
        let us = (latency.as_micros() as u64).clamp(1, REQUEST_LATENCY_MAX_US);
        self.count += 1;
        self.sum_us += us;
        self.current
            .record(us)
            .expect("clamped into the histogram's range");
    }

    /// `(quantile, seconds)` over the last one to two windows; `None` when nothing came in.
    fn quantiles(&mut self, now: Instant) -> Vec<(f64, Option<f64>)> {
        self.rotate(now);
        let mut window = self.previous.clone();
        window
            .add(&self.current)
            .expect("histograms of one shape add");
        QUANTILES
            .iter()
            .map(|&q| {
                let v = (!window.is_empty()).then(|| window.value_at_quantile(q) as f64 / 1e6);
                (q, v)
            })
            .collect()
    }
}

/// The stall probe's figures as reported.
#[derive(Debug, Clone, Default)]
pub struct StallReport {
    /// `(quantile, seconds)` of the probe's lateness over the last one to two windows.
    pub lateness: Vec<(f64, Option<f64>)>,
    /// Probe runs at least each of [`STALL_THRESHOLDS`] late, since the broker started.
    pub stalls: [u64; STALL_THRESHOLDS.len()],
    /// The latest the probe ever ran.
    pub longest: Duration,
}

/// One API's figures as reported.
#[derive(Debug, Clone)]
pub struct ApiReport {
    pub api_key: i16,
    /// Requests since the broker started.
    pub count: u64,
    /// Their latency summed, in seconds.
    pub sum_seconds: f64,
    /// `(quantile, seconds)` over the last one to two [`REQUEST_LATENCY_WINDOW`]s; `None` when no
    /// request came in that time.
    pub quantiles: Vec<(f64, Option<f64>)>,
}

/// The shard's counters.
#[derive(Default)]
pub struct ShardMetrics {
    apis: RefCell<BTreeMap<i16, ApiStats>>,
    bytes_received: Cell<u64>,
    bytes_sent: Cell<u64>,
    connections_accepted: Cell<u64>,
    /// Logs cleaned, and their cleaned segments' bytes before and after.
    cleanings: Cell<u64>,
    cleaned_bytes_before: Cell<u64>,
    cleaned_bytes_after: Cell<u64>,
    /// Totals of glommio's executor and I/O statistics (which glommio resets each time they
    /// are read).
    executor: Cell<ExecutorTotals>,
    /// The stall probe's lateness (`shard/stall_probe.rs`); `None` until its first run.
    stall_probe: RefCell<Option<ApiStats>>,
    stalls: [Cell<u64>; STALL_THRESHOLDS.len()],
    stall_longest: Cell<Duration>,
    /// The shard's task queues by name, with the time each ran tasks since the broker started
    /// (glommio's per-queue runtime, which it resets each time it is read).
    task_queues: RefCell<Vec<(&'static str, glommio::TaskQueueHandle, Duration)>>,
}

/// The shard's executor since it started: io_uring file operations, time spent running
/// tasks (glommio's total runtime, polling I/O included), tasks run.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExecutorTotals {
    pub file_reads: u64,
    pub file_read_bytes: u64,
    pub file_writes: u64,
    pub file_written_bytes: u64,
    pub busy: Duration,
    pub tasks_executed: u64,
}

impl ShardMetrics {
    /// A request of `api_key` answered (its response written, or handled when none is due)
    /// `latency` after its frame was read.
    pub fn record_request(&self, api_key: i16, latency: Duration, now: Instant) {
        let mut apis = self.apis.borrow_mut();
        let stats = apis.entry(api_key).or_insert_with(|| ApiStats::new(now));
        stats.record(latency, now);
    }

    /// Reports the runtime of task queue `handle` as `name`.
    pub fn watch_task_queue(&self, name: &'static str, handle: glommio::TaskQueueHandle) {
        self.task_queues
            .borrow_mut()
            .push((name, handle, Duration::ZERO));
    }

    /// Adds each watched queue's runtime since the last call (`delta(handle)`) and returns
    /// the totals by name.
    pub fn add_task_queue_runtimes(
        &self,
        delta: impl Fn(glommio::TaskQueueHandle) -> Duration,
    ) -> Vec<(&'static str, Duration)> {
        let mut queues = self.task_queues.borrow_mut();
        queues
            .iter_mut()
            .map(|(name, handle, total)| {
                *total += delta(*handle);
                (*name, *total)
            })
            .collect()
    }

    /// The stall probe ran `lateness` after it was due.
    pub fn record_stall_probe(&self, lateness: Duration, now: Instant) {
        self.stall_probe
            .borrow_mut()
            .get_or_insert_with(|| ApiStats::new(now))
            .record(lateness, now);
        for (threshold, count) in STALL_THRESHOLDS.iter().zip(&self.stalls) {
            if lateness >= *threshold {
                count.set(count.get() + 1);
            }
        }
        self.stall_longest
            .set(self.stall_longest.get().max(lateness));
    }

    pub fn stall_report(&self, now: Instant) -> StallReport {
        StallReport {
            lateness: self
                .stall_probe
                .borrow_mut()
                .as_mut()
                .map(|s| s.quantiles(now))
                .unwrap_or_default(),
            stalls: std::array::from_fn(|i| self.stalls[i].get()),
            longest: self.stall_longest.get(),
        }
    }

    pub fn received(&self, bytes: usize) {
        self.bytes_received
            .set(self.bytes_received.get() + bytes as u64);
    }

    pub fn sent(&self, bytes: usize) {
        self.bytes_sent.set(self.bytes_sent.get() + bytes as u64);
    }

    pub fn connection_accepted(&self) {
        self.connections_accepted
            .set(self.connections_accepted.get() + 1);
    }

    pub fn log_cleaned(&self, bytes_before: u64, bytes_after: u64) {
        self.cleanings.set(self.cleanings.get() + 1);
        self.cleaned_bytes_before
            .set(self.cleaned_bytes_before.get() + bytes_before);
        self.cleaned_bytes_after
            .set(self.cleaned_bytes_after.get() + bytes_after);
    }

    /// `(cleanings, bytes before, bytes after)` of the shard's log cleaner so far.
    pub fn cleaner(&self) -> (u64, u64, u64) {
        (
            self.cleanings.get(),
            self.cleaned_bytes_before.get(),
            self.cleaned_bytes_after.get(),
        )
    }

    pub fn bytes_received(&self) -> u64 {
        self.bytes_received.get()
    }

    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.get()
    }

    pub fn connections_accepted(&self) -> u64 {
        self.connections_accepted.get()
    }

    /// Every API seen so far, with its count, latency sum and windowed quantiles.
    pub fn api_reports(&self, now: Instant) -> Vec<ApiReport> {
        let mut apis = self.apis.borrow_mut();
        apis.iter_mut()
            .map(|(&api_key, stats)| ApiReport {
                api_key,
                count: stats.count,
                sum_seconds: stats.sum_us as f64 / 1e6,
                quantiles: stats.quantiles(now),
            })
            .collect()
    }

    /// Adds what the executor did since the last call (`delta`, glommio's statistics, which
    /// it resets when read) and returns the totals.
    pub fn add_executor(&self, delta: ExecutorTotals) -> ExecutorTotals {
        let mut t = self.executor.get();
        t.file_reads += delta.file_reads;
        t.file_read_bytes += delta.file_read_bytes;
        t.file_writes += delta.file_writes;
        t.file_written_bytes += delta.file_written_bytes;
        t.busy += delta.busy;
        t.tasks_executed += delta.tasks_executed;
        self.executor.set(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_cover_the_last_two_windows() {
        let m = ShardMetrics::default();
        let t0 = Instant::now();
        for ms in 1..=100u64 {
            m.record_request(0, Duration::from_millis(ms), t0);
        }
        let r = &m.api_reports(t0)[0];
        assert_eq!(r.count, 100);
        assert!((r.sum_seconds - 5.05).abs() < 1e-9, "{}", r.sum_seconds);
        let p50 = r.quantiles[0].1.unwrap();
        assert!((0.049..=0.051).contains(&p50), "p50 {p50}");
        let max = r.quantiles[4].1.unwrap();
        assert!((0.099..=0.101).contains(&max), "max {max}");
        // One window later the old latencies still count, with the new ones.
        let t1 = t0 + REQUEST_LATENCY_WINDOW;
        m.record_request(0, Duration::from_secs(2), t1);
        let r = &m.api_reports(t1)[0];
        assert!(r.quantiles[4].1.unwrap() >= 1.99);
        assert!(r.quantiles[0].1.unwrap() < 0.06);
        // Two windows without requests: nothing left to report, the totals stay.
        let r = &m.api_reports(t1 + 2 * REQUEST_LATENCY_WINDOW)[0];
        assert_eq!(r.count, 101);
        assert!(r.quantiles.iter().all(|(_, v)| v.is_none()));
    }

    #[test]
    fn extreme_latencies_are_clamped_not_lost() {
        let m = ShardMetrics::default();
        let now = Instant::now();
        m.record_request(1, Duration::ZERO, now);
        m.record_request(1, Duration::from_secs(3600), now);
        let r = &m.api_reports(now)[0];
        assert_eq!(r.count, 2);
        assert!(r.quantiles[4].1.unwrap() >= 599.0);
    }

    #[test]
    fn the_stall_probe_counts_each_threshold_passed_and_keeps_the_longest() {
        let m = ShardMetrics::default();
        let now = Instant::now();
        assert!(m.stall_report(now).lateness.is_empty(), "no run yet");
        for ms in [0, 2, 7, 30, 3] {
            m.record_stall_probe(Duration::from_millis(ms), now);
        }
        let r = m.stall_report(now);
        // >= 1 ms: 2, 7, 30, 3; >= 5 ms: 7, 30; >= 20 ms: 30.
        assert_eq!(r.stalls, [4, 2, 1]);
        assert_eq!(r.longest, Duration::from_millis(30));
        let max = r
            .lateness
            .iter()
            .find(|(q, _)| *q == 1.0)
            .unwrap()
            .1
            .unwrap();
        assert!((max - 0.030).abs() < 0.001, "{max}");
    }

    #[test]
    fn executor_totals_accumulate() {
        let m = ShardMetrics::default();
        let d = ExecutorTotals {
            file_reads: 2,
            file_read_bytes: 8192,
            file_writes: 1,
            file_written_bytes: 4096,
            busy: Duration::from_millis(5),
            tasks_executed: 7,
        };
        m.add_executor(d);
        let t = m.add_executor(d);
        assert_eq!((t.busy, t.tasks_executed), (Duration::from_millis(10), 14));
        assert_eq!(
            (
                t.file_reads,
                t.file_read_bytes,
                t.file_writes,
                t.file_written_bytes
            ),
            (4, 16384, 2, 8192)
        );
    }
}
