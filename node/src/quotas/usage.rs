//! How much of a quota an entity used, and how long it is held when it used too much.
//!
//! **Throttling** is a token bucket (as Kafka's `controller_mutation_rate`, KIP-599): an
//! entity's allowance fills at its quota per second up to a burst — one second's worth for the
//! byte rates and `request_percentage`, the whole quota window (`quota.window.num` ×
//! `quota.window.size.seconds`, 11 s) for topic mutations — each request takes what it used,
//! and a client whose allowance is below zero is held until it is back at zero:
//! `-allowance / quota`. Kafka throttles byte rates by a rate sampled over the whole window
//! instead, which lets a client send ten seconds' worth at once when it starts and again each
//! time a busy sample leaves the window: a flooder's bursts of several megabytes then reach every
//! other tenant's latency. The bucket holds the same long-run rate without them.
//!
//! **Reported rate** (metrics): Kafka's `SampledStat` `Rate` over the same window — what the
//! samples hold over the time they span, never less than all but one sample's length.
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

    /// Drops samples started more than the whole window ago (Kafka's `purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: i64) {
        let horizon = now_ms - QUOTA_WINDOW_SAMPLES as i64 * QUOTA_SAMPLE_MS;
        self.samples.retain(|(start, _)| *start >= horizon);
    }
}

/// An entity's allowance (in the quota's unit): filled at the quota per second up to its burst,
/// taken by each request.
#[derive(Debug, Clone)]
pub struct Bucket {
    allowance: f64,
    at_ms: i64,
}

impl Bucket {
    /// A full bucket at `now_ms`.
    pub fn full(quota: f64, burst_ms: i64, now_ms: i64) -> Bucket {
        Bucket {
            allowance: quota * burst_ms as f64 / 1000.0,
            at_ms: now_ms,
        }
    }

    /// Takes `amount` at `now_ms`; how long (ms) the client is held for the allowance to be
    /// back at zero (0 while it is not below).
    pub fn take(&mut self, now_ms: i64, quota: f64, burst_ms: i64, amount: f64) -> u32 {
        if quota <= 0.0 {
            return 0;
        }
        let capacity = quota * burst_ms as f64 / 1000.0;
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.allowance = (self.allowance + elapsed * quota).min(capacity);
        self.at_ms = self.at_ms.max(now_ms);
        self.allowance -= amount;
        if self.allowance >= 0.0 {
            return 0;
        }
        let ms = -self.allowance / quota * 1000.0;
        ms.min(QUOTA_THROTTLE_MAX_MS as f64).ceil() as u32
    }
}

/// One entity's use of one quota: its bucket and its sampled rate.
#[derive(Debug)]
struct Usage {
    bucket: Bucket,
    window: Window,
}

/// The node's usage of every quota that applies to a client, by quota and entity. An entity's
/// entry stays when its quota is removed (a few dozen bytes per entity ever given a quota; the
/// entity, if given one again, goes on from its bucket).
#[derive(Debug, Default)]
pub struct QuotaUsage {
    usage: Mutex<HashMap<(QuotaKey, String), Usage>>,
}

impl QuotaUsage {
    /// Counts `amount` of `key` against `entity`'s quota of `quota` per second; the throttle
    /// time it leads to (0 within the quota).
    pub fn charge(&self, key: QuotaKey, entity: &str, quota: f64, amount: f64, now_ms: i64) -> u32 {
        let burst_ms = key.burst_ms();
        let mut usage = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        let u = usage
            .entry((key, entity.to_owned()))
            .or_insert_with(|| Usage {
                bucket: Bucket::full(quota, burst_ms, now_ms),
                window: Window::default(),
            });
        u.window.record(now_ms, amount);
        u.bucket.take(now_ms, quota, burst_ms, amount)
    }

    /// The rate (per second) of every entity's quota at `now_ms`, for the metrics endpoint.
    pub fn rates(&self, now_ms: i64) -> Vec<(QuotaKey, String, f64)> {
        let mut usage = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        usage
            .iter_mut()
            .map(|((k, e), u)| (*k, e.clone(), u.window.rate(now_ms).0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_of_a_steady_client_is_what_it_sends_over_the_window() {
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
    }

    #[test]
    fn a_first_burst_is_measured_over_the_whole_window_and_old_samples_go() {
        let mut w = Window::default();
        w.record(0, 5000.0);
        // 5000 over (at least) 10 s: 500 a second.
        assert!((w.rate(10).0 - 500.0).abs() < 1.0);
        // Eleven seconds later the burst is out of the window.
        assert_eq!(w.rate(12_500).0, 0.0);
    }

    #[test]
    fn a_bucket_holds_a_flooder_to_its_quota_with_one_seconds_burst() {
        // 1000 a second, a 1 s burst: a client sending 500 every 100 ms (5000 a second).
        let mut b = Bucket::full(1000.0, 1000, 0);
        let (mut t, mut sent) = (0, 0.0);
        while t < 60_000 {
            let held = b.take(t, 1000.0, 1000, 500.0);
            sent += 500.0;
            // The client waits out what it is told (the muted connection).
            t += i64::from(held).max(100);
        }
        // Over a minute: the quota, plus at most the burst.
        assert!((60_000.0..=61_500.0).contains(&sent), "{sent}");
        // An idle client refills to the burst, not beyond it.
        let mut b = Bucket::full(1000.0, 1000, 0);
        assert_eq!(b.take(100_000, 1000.0, 1000, 1000.0), 0);
        assert_eq!(b.take(100_000, 1000.0, 1000, 500.0), 500);
    }

    #[test]
    fn a_node_counts_one_entity_once_across_its_shards() {
        let usage = QuotaUsage::default();
        let k = QuotaKey::ProducerByteRate;
        // Two shards each see 1000 every 100 ms against 10 000 a second: together twice over.
        let mut throttle = 0;
        for i in 0..50 {
            let t = i * 100;
            usage.charge(k, "user=a", 10_000.0, 1000.0, t);
            throttle = usage.charge(k, "user=a", 10_000.0, 1000.0, t);
        }
        assert!(throttle > 2_000, "{throttle}");
        // Another entity is counted apart.
        assert_eq!(usage.charge(k, "user=b", 10_000.0, 1000.0, 5_000), 0);
        let rates = usage.rates(5_000);
        assert!(
            rates.iter().any(|(_, e, r)| e == "user=a" && *r > 9_000.0),
            "{rates:?}"
        );
    }
}
