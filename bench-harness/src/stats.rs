//! What a run measures: HdrHistograms of publish latency, publish delay (intended vs actual send
//! time, so coordinated omission shows) and end-to-end latency, all in microseconds, and
//! counters sampled once per interval for throughput and backlog.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;

/// Highest latency recorded: 10 minutes in microseconds.
pub const LATENCY_US_MAX: u64 = 600_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Counters shared by all worker threads.
#[derive(Default)]
pub struct Counters {
    pub sent_messages: AtomicU64,
    pub acked_messages: AtomicU64,
    pub acked_bytes: AtomicU64,
    pub errors: AtomicU64,
    pub consumed_messages: AtomicU64,
    pub consumed_bytes: AtomicU64,
    /// Kafka error code (or "undecodable batch") → how often, for the result file.
    pub error_kinds: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Counters {
    /// Counts one error and what it was.
    pub fn error(&self, kind: impl Into<String>) {
        self.errors_of(kind, 1);
    }

    /// Counts `n` errors of one kind.
    pub fn errors_of(&self, kind: impl Into<String>, n: u64) {
        if n == 0 {
            return;
        }
        Counters::add(&self.errors, n);
        *self
            .error_kinds
            .lock()
            .expect("error kinds lock")
            .entry(kind.into())
            .or_default() += n;
    }

    /// The name of a Kafka error code, for `error`.
    pub fn code_name(api: &str, code: i16) -> String {
        let name = kafka_protocol::ResponseError::try_from_code(code)
            .map_or_else(|| format!("error {code}"), |e| format!("{e:?}"));
        format!("{api}: {name}")
    }

    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// The histograms of a run, merged from every thread when it ends.
pub struct Histograms {
    pub publish_latency_us: Mutex<Histogram<u64>>,
    pub publish_delay_us: Mutex<Histogram<u64>>,
    pub end_to_end_us: Mutex<Histogram<u64>>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            publish_latency_us: Mutex::new(histogram()),
            publish_delay_us: Mutex::new(histogram()),
            end_to_end_us: Mutex::new(histogram()),
        }
    }
}

impl Histograms {
    pub fn merge(target: &Mutex<Histogram<u64>>, local: &Histogram<u64>) {
        target
            .lock()
            .expect("histogram lock")
            .add(local)
            .expect("same bounds");
    }
}

/// Records a value, clamped into the histogram's range.
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, LATENCY_US_MAX));
}
