//! Percentile math of the recording histograms against known inputs, merging, and the result
//! JSON round trip.

use bench_harness::stats::{histogram, record, Histograms};

#[test]
fn percentiles_of_known_inputs() {
    let mut h = histogram();
    for us in 1..=10_000u64 {
        record(&mut h, us);
    }
    let within = |got: u64, want: u64| (got as f64 - want as f64).abs() / want as f64 <= 0.001;
    assert!(
        within(h.value_at_quantile(0.5), 5_000),
        "p50 {}",
        h.value_at_quantile(0.5)
    );
    assert!(
        within(h.value_at_quantile(0.99), 9_900),
        "p99 {}",
        h.value_at_quantile(0.99)
    );
    assert!(within(h.value_at_quantile(0.999), 9_990));
    assert!(within(h.max(), 10_000));
    assert!((h.mean() - 5_000.5).abs() < 5.0);
    record(&mut h, 0);
    assert_eq!(h.min(), 1, "values are clamped into the histogram's range");
}

#[test]
fn merging_thread_histograms_adds_counts() {
    let all = Histograms::default();
    for part in 0..4u64 {
        let mut h = histogram();
        for us in 0..1000u64 {
            record(&mut h, part * 1000 + us + 1);
        }
        Histograms::merge(&all.publish_latency_us, &h);
    }
    let merged = all.publish_latency_us.lock().unwrap();
    assert_eq!(merged.len(), 4000);
    assert!((merged.value_at_quantile(0.5) as f64 - 2000.0).abs() <= 2.0);
}

#[test]
fn result_json_round_trips() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../perf/tests/fixtures/ringlog-quickstart.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let again: serde_json::Value =
        serde_json::from_str(&serde_json::to_string_pretty(&v).unwrap()).unwrap();
    assert_eq!(v, again);
    for key in [
        "publishRate",
        "consumeRate",
        "backlog",
        "aggregatedPublishLatency999pct",
        "aggregatedPublishDelayLatency99pct",
        "aggregatedEndToEndLatencyQuantiles",
        "brokerCpuSecondsPerGB",
        "workloadDefinition",
    ] {
        assert!(v.get(key).is_some(), "result has {key}");
    }
    let w: bench_harness::workload::Workload =
        serde_json::from_value(v["workloadDefinition"].clone()).unwrap();
    assert_eq!(w.name, "quickstart-1kb");
}
