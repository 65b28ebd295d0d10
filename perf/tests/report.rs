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
    let page = html(&[r, other], "test <report>");
    assert!(page.starts_with("<!doctype html>") && page.contains("test &lt;report&gt;"));
    assert_eq!(
        page.matches("<svg").count(),
        3,
        "throughput, publish and end-to-end charts"
    );
    assert!(page.contains("<polyline"));
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
