//! How much of a quota an entity used, Kafka's way (`SampledStat` `Rate` over
//! `quota.window.num` samples of `quota.window.size.seconds`): the rate is what the samples
//! hold over the time they span — never less than all but one sample's length, so a first burst
//! is measured over the whole window, not over its own few milliseconds — and a client over its
//! quota is throttled for as long as it takes its rate to fall back to the quota:
//! `(rate - quota) / quota × window`.
//!
//! One [`QuotaUsage`] serves every shard of a node (a mutex over the entities with quotas, taken
//! only for clients that have one): a client's usage on all the node's shards counts against one
//! quota, so connecting to more shards does not multiply it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::limits::{QUOTA_SAMPLE_MS, QUOTA_THROTTLE_MAX_MS, QUOTA_WINDOW_SAMPLES};

use super::QuotaKey;

/// One entity's samples of one quota: `(start ms, amount)`, oldest first.
#[derive(Debug, Default, Clone)]
pub struct Window {
    samples: Vec<(i64, f64)>,
}

impl Window {
    /// Counts `amount` at `now_ms`.
    pub fn record(&mut self, now_ms: i64, amount: f64) {
        self.purge(now_ms);
        match self.samples.last_mut() {
            Some((start, v)) if now_ms < *start + QUOTA_SAMPLE_MS => *v += amount,
            _ => {
                if self.samples.len() == QUOTA_WINDOW_SAMPLES {
                    self.samples.remove(0);
                }
                self.samples.push((now_ms, amount));
            }
        }
    }

    /// The rate per second at `now_ms` and the window it was measured over (ms).
    pub fn rate(&mut self, now_ms: i64) -> (f64, i64) {
        self.purge(now_ms);
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        let oldest = self.samples.first().map_or(now_ms, |(s, _)| *s);
        let min_ms = (QUOTA_WINDOW_SAMPLES as i64 - 1) * QUOTA_SAMPLE_MS;
        let elapsed = (now_ms - oldest).max(min_ms).max(1);
        (total * 1000.0 / elapsed as f64, elapsed)
    }

    /// How long (ms) a client at this rate is held to bring it back to `quota` per second.
    pub fn throttle_ms(&mut self, now_ms: i64, quota: f64) -> u32 {
        let (rate, window) = self.rate(now_ms);
        if rate <= quota || quota <= 0.0 {
            return 0;
        }
        let ms = (rate - quota) / quota * window as f64;
        ms.min(QUOTA_THROTTLE_MAX_MS as f64) as u32
    }

    /// Drops samples started more than the whole window ago (Kafka's `purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: i64) {
        let horizon = now_ms - QUOTA_WINDOW_SAMPLES as i64 * QUOTA_SAMPLE_MS;
        self.samples.retain(|(start, _)| *start >= horizon);
    }
}

/// The node's usage of every quota that applies to a client, by quota and entity.
#[derive(Debug, Default)]
pub struct QuotaUsage {
    windows: Mutex<HashMap<(QuotaKey, String), Window>>,
}

impl QuotaUsage {
    /// Counts `amount` of `key` against `entity`'s quota of `quota` per second; the throttle
    /// time it leads to (0 within the quota).
    pub fn charge(&self, key: QuotaKey, entity: &str, quota: f64, amount: f64, now_ms: i64) -> u32 {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let w = match windows.get_mut(&(key, entity.to_owned())) {
            Some(w) => w,
            None => windows.entry((key, entity.to_owned())).or_default(),
        };
        w.record(now_ms, amount);
        w.throttle_ms(now_ms, quota)
    }

    /// The rate (per second) of every entity's quota at `now_ms`, for the metrics endpoint.
    pub fn rates(&self, now_ms: i64) -> Vec<(QuotaKey, String, f64)> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows
            .iter_mut()
            .map(|((k, e), w)| (*k, e.clone(), w.rate(now_ms).0))
            .collect()
    }

    /// Forgets entities no longer in `keep` (their quota was removed).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows.retain(|(_, e), _| keep(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_client_at_twice_its_quota_is_held_for_its_excess() {
        let mut w = Window::default();
        // 2000 units a second for 20 s against a quota of 1000.
        let mut t = 0;
        for _ in 0..200 {
            w.record(t, 200.0);
            t += 100;
        }
        let (rate, window) = w.rate(t);
        assert!((rate - 2000.0).abs() < 200.0, "{rate}");
        assert!((10_000..=11_000).contains(&window), "{window}");
        let ms = w.throttle_ms(t, 1000.0);
        assert!((9_000..=11_000).contains(&ms), "{ms}");
        assert_eq!(w.throttle_ms(t, 4000.0), 0);
    }

    #[test]
    fn a_first_burst_is_measured_over_the_whole_window_and_old_samples_go() {
        let mut w = Window::default();
        w.record(0, 5000.0);
        // 5000 over (at least) 10 s: 500 a second.
        assert!((w.rate(10).0 - 500.0).abs() < 1.0);
        assert_eq!(w.throttle_ms(10, 1000.0), 0);
        assert!(w.throttle_ms(10, 100.0) > 0);
        // Eleven seconds later the burst is out of the window.
        assert_eq!(w.rate(12_500).0, 0.0);
    }

    #[test]
    fn a_node_counts_one_entity_once_across_its_shards() {
        let usage = QuotaUsage::default();
        let k = QuotaKey::ProducerByteRate;
        // Two shards each see half of 20 000 bytes/s for 11 s against 10 000: together over.
        let mut throttle = 0;
        for i in 0..110 {
            let t = i * 100;
            usage.charge(k, "user=a", 10_000.0, 1000.0, t);
            throttle = usage.charge(k, "user=a", 10_000.0, 1000.0, t);
        }
        assert!(throttle > 5_000, "{throttle}");
        // Another entity is counted apart.
        assert_eq!(usage.charge(k, "user=b", 10_000.0, 1000.0, 11_000), 0);
    }
}
