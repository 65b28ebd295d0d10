//! The report renders from a stored result file (written by a real ringlog-bench run).

use perf::report::{html, markdown, RunResult};

fn fixture() -> RunResult {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ringlog-quickstart.json"
    );
    RunResult::load(path).unwrap()
}

#[test]
fn renders_html_and_markdown_from_a_stored_result() {
    let r = fixture();
    assert_eq!(
        (r.workload.as_str(), r.driver.as_str()),
        ("quickstart-1kb", "ringlog")
    );
    assert!(!r.publish_rate.is_empty() && !r.publish_quantiles.is_empty());
    let mut other = r.clone();
    other.driver = "kafka".into();
    let md = markdown(&[r.clone(), other.clone()]);
    assert!(md.contains("| publish latency p99.9 (ms) |"), "{md}");
    assert!(md.contains("(1.00×)"), "ratios to the first result: {md}");
    let page = html(&[r.clone(), other.clone()], "test <report>");
    assert!(page.starts_with("<!doctype html>") && page.contains("test &lt;report&gt;"));
    assert_eq!(
        page.matches("<svg").count(),
        3,
        "throughput, publish and end-to-end charts of the one workload"
    );
    assert!(!page.contains("chart not drawn"), "{page}");
    // Labelled ticks on HdrHistogram's percentile axis, and a legend on each chart.
    for tick in [">\n90%\n<", ">\n99%\n<", ">\n99.9%\n<"] {
        assert!(page.contains(tick), "tick {tick:?} missing");
    }
    for label in [
        "ringlog: published",
        "kafka: consumed",
        "messages per second",
        "milliseconds",
    ] {
        assert!(page.contains(label), "{label} missing");
    }
    // Another workload gets charts of its own.
    let mut third = r;
    third.workload = "other-workload".into();
    let page = html(&[other, third], "two workloads");
    assert_eq!(page.matches("<svg").count(), 6);
    assert!(page.contains("other-workload: throughput"));
}

#[test]
fn each_workloads_topic_and_broker_settings_are_stated_under_the_table() {
    let mut r = fixture();
    let raw = r.raw.as_object_mut().unwrap();
    raw.insert(
        "topicConfig".into(),
        serde_json::json!({"retention.bytes": "2147483648"}),
    );
    raw.insert(
        "brokerConfig".into(),
        serde_json::json!({"log.retention.check.interval.ms": "5000"}),
    );
    let md = markdown(std::slice::from_ref(&r));
    assert!(
        md.contains("quickstart-1kb: topic configs `retention.bytes=2147483648`; broker properties, both brokers `log.retention.check.interval.ms=5000`."),
        "{md}"
    );
    let page = html(&[r], "settings");
    assert!(
        page.contains("</table><p>quickstart-1kb: topic configs"),
        "{page}"
    );
    // Without settings, nothing under the table.
    assert!(!markdown(&[fixture()]).contains("topic configs"));
}

#[test]
fn bad_result_files_are_refused_with_the_path() {
    let e = RunResult::parse("x.json", "{\"driver\": \"ringlog\"}")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.json") && e.contains("workload"), "{e}");
    assert!(RunResult::parse("y.json", "not json")
        .unwrap_err()
        .to_string()
        .contains("y.json"));
}

#[test]
fn a_brokers_own_share_is_its_figure_minus_the_null_brokers() {
    let r = fixture();
    let mut floor = r.clone();
    floor.driver = "null".into();
    let p99 = r.metric("aggregatedPublishLatency99pct").unwrap();
    floor.raw["aggregatedPublishLatency99pct"] = serde_json::json!(p99 - 0.25);
    let md = markdown(&[r.clone(), floor]);
    assert!(md.contains("The broker's own share"), "{md}");
    assert!(
        md.contains(&format!(
            "| quickstart-1kb | ringlog | 0.250 ({p99:.3} − {:.3})",
            p99 - 0.25
        )),
        "{md}"
    );
    // Without a null-broker result, no such table.
    assert!(!markdown(&[r]).contains("own share"));
}

#[test]
fn the_device_floor_is_stated_from_its_json_and_a_missing_figure_is_named() {
    let v = serde_json::json!({
        "writeLatencyMs": {"50": 0.05, "99": 0.2, "99.9": 0.5},
        "writeSyncLatencyMs": {"50": 0.4, "99": 1.1, "99.9": 2.0},
        "blockSize": 16384, "rateBytesPerSecond": 10000000, "seconds": 15
    });
    let text = perf::report::device_floor_markdown("d.json", &v).unwrap();
    assert!(text.contains("0.050 / 0.200 / 0.500 ms"), "{text}");
    assert!(text.contains("1.100 / 2.000 ms"), "{text}");
    let mut bad = v;
    bad["writeSyncLatencyMs"]
        .as_object_mut()
        .unwrap()
        .remove("99");
    let e = perf::report::device_floor_markdown("d.json", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("d.json") && e.contains("writeSyncLatencyMs.99"),
        "{e}"
    );
}
