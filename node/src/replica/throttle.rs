//! Replication throttles (Kafka's `*.replication.throttled.rate` and
//! `*.replication.throttled.replicas`): a byte budget per shard (a shard is a Kafka broker) for
//! each side of replication, spent only on throttled replicas that are out of sync — replicas a
//! move adds, or that fell behind — so in-sync followers, and so `acks=all` producers, never
//! wait for it. Kafka's semantics: the leader leaves a throttled partition out of its answer
//! while its budget is spent; the follower leaves it out of its request.
//!
//! The budget is a token bucket refilled at the rate, holding at most one second of it: over
//! any stretch the bytes sent stay within rate × time + one second's worth (Kafka measures a
//! rate over a window of samples, to the same effect). Time comes in as an [`Instant`].

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::limits::THROTTLE_WAIT_SLACK;

/// Which sides of replication throttle a partition on this shard (its topic's throttled
/// replica lists name this shard's broker for it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttled {
    /// As leader: answers to out-of-sync followers are budgeted.
    pub leader: bool,
    /// As follower: this replica's fetches are budgeted while it is out of sync.
    pub follower: bool,
}

/// One side's byte budget.
#[derive(Debug)]
pub struct ByteRate {
    /// Bytes per second; `None`: unlimited.
    rate: Option<u64>,
    /// Bytes that may still go out now (negative: owed).
    allowance: f64,
    refilled: Instant,
    /// Bytes sent under this budget, ever (the metrics' counter).
    total: u64,
}

impl ByteRate {
    pub fn new(now: Instant) -> ByteRate {
        ByteRate {
            rate: None,
            allowance: 0.0,
            refilled: now,
            total: 0,
        }
    }

    /// Sets the rate (a changed rate starts from an empty bucket: no burst on a new limit).
    pub fn set_rate(&mut self, rate: Option<u64>, now: Instant) {
        if rate != self.rate {
            self.rate = rate;
            self.allowance = 0.0;
            self.refilled = now;
        }
    }

    pub fn rate(&self) -> Option<u64> {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        let Some(rate) = self.rate else {
            return;
        };
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.allowance = (self.allowance + elapsed * rate as f64).min(rate as f64);
        self.refilled = now;
    }

    /// How long until the budget allows sending again; `None`: it allows it now.
    pub fn wait(&mut self, now: Instant) -> Option<Duration> {
        let rate = self.rate?;
        self.refill(now);
        if self.allowance >= 0.0 {
            return None;
        }
        if rate == 0 {
            return Some(Duration::from_secs(1));
        }
        let wait = Duration::from_secs_f64(-self.allowance / rate as f64);
        // A few milliseconds short is as good as refilled: waiting them out costs a round
        // trip of its own (the timers' resolution and a fetch's long poll are milliseconds).
        (wait > THROTTLE_WAIT_SLACK).then_some(wait)
    }

    /// Spends `bytes` (sent or fetched).
    pub fn record(&mut self, bytes: usize, now: Instant) {
        self.total += bytes as u64;
        if self.rate.is_some() {
            self.refill(now);
            self.allowance -= bytes as f64;
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }
}

/// A shard's two budgets.
pub struct ReplicationQuotas {
    pub leader: RefCell<ByteRate>,
    pub follower: RefCell<ByteRate>,
    /// Throttled partitions left out of an answer or a request because a budget was spent.
    pub held_back: Cell<u64>,
}

impl Default for ReplicationQuotas {
    fn default() -> Self {
        let now = Instant::now();
        ReplicationQuotas {
            leader: RefCell::new(ByteRate::new(now)),
            follower: RefCell::new(ByteRate::new(now)),
            held_back: Cell::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_holds_its_rate_with_one_second_of_burst() {
        let t0 = Instant::now();
        let mut b = ByteRate::new(t0);
        assert_eq!(b.wait(t0), None, "unlimited");
        b.set_rate(Some(1000), t0);
        // Sending 1 MB chunks whenever allowed for 10 s: about 10 000 bytes + one chunk.
        let mut sent = 0;
        let mut now = t0;
        while now < t0 + Duration::from_secs(10) {
            match b.wait(now) {
                None => {
                    b.record(500, now);
                    sent += 500;
                }
                Some(w) => now += w.max(Duration::from_millis(1)),
            }
        }
        assert!((10_000..=11_500).contains(&sent), "{sent}");
        assert_eq!(b.total(), sent as u64);
        // Idle for a minute: at most one second's worth is saved up.
        let later = now + Duration::from_secs(60);
        b.record(1000, later);
        assert!(b.wait(later).is_none());
        b.record(100, later);
        assert!(
            b.wait(later).is_some(),
            "100 bytes owed at 1000 B/s: 100 ms to wait"
        );
    }

    #[test]
    fn a_zero_rate_holds_everything_back() {
        let t0 = Instant::now();
        let mut b = ByteRate::new(t0);
        b.set_rate(Some(0), t0);
        b.record(1, t0);
        assert!(b.wait(t0 + Duration::from_secs(5)).is_some());
    }
}
