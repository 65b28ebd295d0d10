//! Maximum *sustainable* throughput, as the OpenMessaging Benchmark means it: the highest publish
//! rate at which the consumers keep up, not the highest rate producers can push while the
//! consumers fall ever further behind.
//!
//! The search runs short trials, each on fresh topics deleted afterwards (so no trial's backlog
//! reaches the next, and the disk keeps only one trial's data): first one as fast as the
//! producers can go, which bounds the answer from above, then fixed-rate trials bisecting
//! between the highest rate found sustainable and the lowest found not, until they are within
//! [`RESOLUTION`] of each other or [`TRIALS_MAX`] trials have run. The workload is then run at
//! the highest sustainable rate for its own warm-up and test duration; if that longer run does
//! not hold the rate (a noisy machine), it is run again [`FALLBACK_STEP`] lower, at most
//! [`FALLBACKS_MAX`] times. The last run is the result, with the trials and runs alongside.
//!
//! A trial at target rate `r` is sustainable when, over its measured seconds,
//! - the producers published at least [`PUBLISH_KEPT_UP`] of `r` (a broker that cannot take
//!   `r` makes open-loop producers fall behind their schedule), and
//! - the consumers ended at most [`BACKLOG_SECONDS_MAX`] seconds of production behind, and their
//!   backlog grew by less than [`BACKLOG_GROWTH_SECONDS_MAX`] seconds of production from the
//!   first measured second to the last (consumers reading slower than producers publish fall
//!   further behind every second, however short the trial).
//!
//! Errors do not decide it by themselves: a produce refused loses its records from the
//! published count and a failed fetch slows the consumers, which the two rules see; Kafka
//! answers a few requests right after a topic is created with NOT_LEADER_OR_FOLLOWER, which
//! says nothing about the rate. A trial's errors and their kinds are kept in the result.

use serde_json::{json, Value};

use crate::client::ClientError;
use crate::cluster::delete_topics;
use crate::run::{run_fixed, RunOptions};
use crate::workload::Workload;

/// Trials at most, the unbounded one included.
pub const TRIALS_MAX: usize = 10;
/// The search stops when the lowest unsustainable rate is within this fraction above the
/// highest sustainable one.
pub const RESOLUTION: f64 = 0.05;
/// How much lower the measured run is repeated when it did not hold its rate, and how often.
pub const FALLBACK_STEP: f64 = 0.1;
pub const FALLBACKS_MAX: usize = 2;
/// Warm-up and measured seconds of a trial.
pub const TRIAL_WARMUP_SECONDS: f64 = 3.0;
pub const TRIAL_MEASURE_SECONDS: f64 = 10.0;
/// Fraction of the target rate the producers must reach.
pub const PUBLISH_KEPT_UP: f64 = 0.95;
/// Consumers' backlog at a trial's end, in seconds of production at the target rate.
pub const BACKLOG_SECONDS_MAX: f64 = 1.0;
/// Growth of the consumers' backlog over a trial's measured seconds, in seconds of production.
pub const BACKLOG_GROWTH_SECONDS_MAX: f64 = 0.5;

/// What one trial showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// Messages per second asked of the producers; 0 = as fast as they can.
    pub target_rate: f64,
    pub publish_rate: f64,
    pub consume_rate: f64,
    /// Messages the consumers were behind at the last measured second.
    pub backlog_end: i64,
    /// Last measured second's backlog less the first's.
    pub backlog_growth: i64,
    pub errors: u64,
    /// Kafka error name → count, as the run's `errorKinds`.
    pub error_kinds: Value,
    pub sustainable: bool,
}

impl Trial {
    /// Judges a run's result at `target_rate` (see the module doc). An unbounded trial (0) is
    /// judged at the rate it published.
    pub fn judge(target_rate: f64, result: &Value) -> Trial {
        let series = |k: &str| -> Vec<f64> {
            result[k]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (publish, consume, backlog) = (
            series("publishRate"),
            series("consumeRate"),
            series("backlog"),
        );
        let publish_rate = mean(&publish);
        let backlog_end = backlog.last().copied().unwrap_or(0.0) as i64;
        let backlog_growth = backlog_end - backlog.first().copied().unwrap_or(0.0) as i64;
        let errors = result["errors"].as_u64().unwrap_or(0);
        let rate = if target_rate > 0.0 {
            target_rate
        } else {
            publish_rate
        };
        let sustainable = !publish.is_empty()
            && publish_rate >= PUBLISH_KEPT_UP * rate
            && (backlog_end as f64) <= BACKLOG_SECONDS_MAX * rate
            && (backlog_growth as f64) < BACKLOG_GROWTH_SECONDS_MAX * rate;
        Trial {
            target_rate,
            publish_rate,
            consume_rate: mean(&consume),
            backlog_end,
            backlog_growth,
            errors,
            error_kinds: result["errorKinds"].clone(),
            sustainable,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "targetRate": self.target_rate,
            "publishRate": self.publish_rate,
            "consumeRate": self.consume_rate,
            "backlogEnd": self.backlog_end,
            "backlogGrowth": self.backlog_growth,
            "errors": self.errors,
            "errorKinds": self.error_kinds,
            "sustainable": self.sustainable,
        })
    }
}

/// The bisection's state: the highest rate found sustainable (0: none yet) and the lowest
/// found not (or the unbounded trial's publish rate, which no rate can exceed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bracket {
    pub sustainable: f64,
    pub unsustainable: f64,
}

impl Bracket {
    /// After the unbounded trial: nothing is known sustainable yet (a few seconds as fast as
    /// the producers go is no proof of a rate held on schedule), and no rate above what it
    /// published can be.
    pub fn after_unbounded(t: &Trial) -> Bracket {
        Bracket {
            sustainable: 0.0,
            unsustainable: t.publish_rate,
        }
    }

    /// The next rate to try: 80 % of the lowest unsustainable rate until one is sustainable,
    /// then the middle of the bracket.
    pub fn next_rate(&self) -> f64 {
        if self.sustainable == 0.0 {
            0.8 * self.unsustainable
        } else {
            (self.sustainable + self.unsustainable) / 2.0
        }
    }

    pub fn record(&mut self, t: &Trial) {
        if t.sustainable {
            self.sustainable = self.sustainable.max(t.target_rate);
        } else {
            self.unsustainable = self.unsustainable.min(t.target_rate);
        }
    }

    pub fn done(&self) -> bool {
        self.sustainable > 0.0 && self.unsustainable <= self.sustainable * (1.0 + RESOLUTION)
    }
}

fn trial_workload(w: &Workload, rate: f64) -> Workload {
    let mut t = w.clone();
    t.name = format!("{}-trial", w.name);
    t.find_sustainable_rate = false;
    t.producer_rate = rate.round() as u64;
    t.warmup_duration_minutes = TRIAL_WARMUP_SECONDS / 60.0;
    t.test_duration_minutes = TRIAL_MEASURE_SECONDS / 60.0;
    t
}

fn run_trial(w: &Workload, rate: f64, opts: &RunOptions) -> Result<Trial, ClientError> {
    let quiet = RunOptions {
        bootstrap: opts.bootstrap.clone(),
        target: opts.target.clone(),
        broker_pids: opts.broker_pids.clone(),
        progress: false,
        drop_caches: false,
    };
    let (result, topics) = run_fixed(trial_workload(w, rate), &quiet)?;
    delete_topics(&opts.bootstrap, &topics)?;
    let t = Trial::judge(rate.round(), &result);
    if opts.progress {
        eprintln!(
            "[search] target {:>9.0} msg/s: published {:>9.0}, consumed {:>9.0}, backlog {:>9} (grew {:>9}), errors {} {}: {}",
            t.target_rate,
            t.publish_rate,
            t.consume_rate,
            t.backlog_end,
            t.backlog_growth,
            t.errors,
            if t.errors > 0 { t.error_kinds.to_string() } else { String::new() },
            if t.sustainable { "sustainable" } else { "not sustainable" }
        );
    }
    Ok(t)
}

/// The search, then the measured run at the highest sustainable rate (see the module doc).
pub fn find_and_measure(w: Workload, opts: &RunOptions) -> Result<Value, ClientError> {
    let ceiling = run_trial(&w, 0.0, opts)?;
    let mut bracket = Bracket::after_unbounded(&ceiling);
    let mut trials = vec![ceiling];
    while !bracket.done() && trials.len() < TRIALS_MAX {
        let t = run_trial(&w, bracket.next_rate().round(), opts)?;
        bracket.record(&t);
        trials.push(t);
    }
    if bracket.sustainable == 0.0 {
        return Err(ClientError::Broker(format!(
            "no sustainable rate found in {} trials (the lowest tried, {:.0} msg/s, was not)",
            trials.len(),
            bracket.unsustainable
        )));
    }
    let mut rate = bracket.sustainable.round();
    let mut measured_runs = Vec::new();
    let (mut result, held) = loop {
        if opts.progress {
            eprintln!("[search] highest sustainable rate {rate:.0} msg/s; measuring at it");
        }
        let mut measured = w.clone();
        measured.producer_rate = rate as u64;
        measured.find_sustainable_rate = false;
        let (result, _) = run_fixed(measured, opts)?;
        let held = Trial::judge(rate, &result);
        measured_runs.push(held.to_json());
        if held.sustainable || measured_runs.len() > FALLBACKS_MAX {
            break (result, held.sustainable);
        }
        if opts.progress {
            eprintln!(
                "[search] {rate:.0} msg/s not held for the whole run (published {:.0}, backlog {}); again {:.0} % lower",
                held.publish_rate,
                held.backlog_end,
                FALLBACK_STEP * 100.0
            );
        }
        rate = (rate * (1.0 - FALLBACK_STEP)).round();
    };
    let obj = result.as_object_mut().expect("a result is an object");
    obj.insert("maxSustainableRate".into(), json!(rate));
    obj.insert("sustainableAtMeasuredRate".into(), json!(held));
    obj.insert(
        "sustainableRateSearch".into(),
        Value::Array(trials.iter().map(Trial::to_json).collect()),
    );
    obj.insert(
        "sustainableMeasuredRuns".into(),
        Value::Array(measured_runs),
    );
    obj.insert(
        "workloadDefinition".into(),
        serde_json::to_value(&w).expect("workload serialises"),
    );
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(publish: &[f64], consume: &[f64], backlog: &[i64]) -> Value {
        json!({ "publishRate": publish, "consumeRate": consume, "backlog": backlog, "errors": 0 })
    }

    #[test]
    fn a_trial_is_sustainable_only_when_both_sides_keep_up() {
        let kept = result(
            &[1000.0; 8],
            &[1000.0; 8],
            &[200, 150, 300, 250, 200, 100, 300, 250],
        );
        assert!(Trial::judge(1000.0, &kept).sustainable);
        // Producers fell behind their schedule.
        let slow = result(&[900.0; 8], &[900.0; 8], &[100; 8]);
        assert!(!Trial::judge(1000.0, &slow).sustainable);
        // Consumers fell further behind every second.
        let growing = result(
            &[1000.0; 8],
            &[900.0; 8],
            &[100, 200, 300, 400, 500, 600, 700, 800],
        );
        let t = Trial::judge(1000.0, &growing);
        assert!(!t.sustainable);
        assert_eq!(t.backlog_growth, 700);
        // Consumers steady but far behind.
        let behind = result(&[1000.0; 8], &[1000.0; 8], &[5000; 8]);
        assert!(!Trial::judge(1000.0, &behind).sustainable);
        // Errors alone do not (their effect on the rates does).
        let mut errs = kept.clone();
        errs["errors"] = json!(3);
        assert!(Trial::judge(1000.0, &errs).sustainable);
        // An unbounded trial is judged at what it published.
        let unbounded = result(&[5000.0; 8], &[5000.0; 8], &[1000; 8]);
        let t = Trial::judge(0.0, &unbounded);
        assert!(t.sustainable);
        // ...but only bounds the search from above.
        assert_eq!(
            Bracket::after_unbounded(&t),
            Bracket {
                sustainable: 0.0,
                unsustainable: 5000.0
            }
        );
    }

    #[test]
    fn the_bisection_converges_on_the_boundary() {
        // A broker that sustains up to 61 000 msg/s and takes 100 000 unbounded.
        let boundary = 61_000.0;
        let trial = |rate: f64| Trial {
            target_rate: rate,
            publish_rate: rate.min(100_000.0),
            consume_rate: rate.min(boundary),
            backlog_end: 0,
            backlog_growth: 0,
            errors: 0,
            error_kinds: Value::Null,
            sustainable: rate <= boundary,
        };
        let ceiling = Trial {
            sustainable: false,
            ..trial(0.0)
        };
        let mut b = Bracket::after_unbounded(&Trial {
            publish_rate: 100_000.0,
            ..ceiling
        });
        let mut n = 1;
        while !b.done() && n < TRIALS_MAX {
            b.record(&trial(b.next_rate()));
            n += 1;
        }
        assert!(b.done(), "{b:?} after {n} trials");
        assert!(b.sustainable <= boundary && b.sustainable >= boundary / (1.0 + RESOLUTION));
        assert!(b.unsustainable > boundary);
    }
}
