//! Rendering results: SVG charts inside one self-contained HTML page, and a Markdown table.

use std::fmt::Write;

use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
}

/// One result file, with what the report needs pulled out.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub path: String,
    pub workload: String,
    pub driver: String,
    pub publish_rate: Vec<f64>,
    pub consume_rate: Vec<f64>,
    /// `(percentile, milliseconds)` of publish latency, increasing.
    pub publish_quantiles: Vec<(f64, f64)>,
    pub end_to_end_quantiles: Vec<(f64, f64)>,
    pub raw: Value,
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn series(v: &Value, key: &str) -> Vec<f64> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn quantiles(v: &Value, key: &str) -> Vec<(f64, f64)> {
    let mut q: Vec<(f64, f64)> = v
        .get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    q.sort_by(|a, b| a.0.total_cmp(&b.0));
    q
}

impl RunResult {
    pub fn parse(path: &str, text: &str) -> Result<RunResult, ReportError> {
        let err = |reason: String| ReportError::Input {
            path: path.to_owned(),
            reason,
        };
        let raw: Value = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        let s = |k: &str| {
            raw.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| err(format!("missing '{k}'")))
        };
        Ok(RunResult {
            path: path.to_owned(),
            workload: s("workload")?,
            driver: s("driver")?,
            publish_rate: series(&raw, "publishRate"),
            consume_rate: series(&raw, "consumeRate"),
            publish_quantiles: quantiles(&raw, "aggregatedPublishLatencyQuantiles"),
            end_to_end_quantiles: quantiles(&raw, "aggregatedEndToEndLatencyQuantiles"),
            raw,
        })
    }

    pub fn load(path: &str) -> Result<RunResult, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|e| ReportError::Input {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        RunResult::parse(path, &text)
    }

    pub fn mean_publish_rate(&self) -> f64 {
        self.publish_rate.iter().sum::<f64>() / self.publish_rate.len().max(1) as f64
    }

    pub fn metric(&self, key: &str) -> Option<f64> {
        num(&self.raw, key)
    }
}

/// Rows of the comparison table: (label, result key, lower is better).
pub const TABLE: &[(&str, &str, bool)] = &[
    (
        "highest sustainable rate (msg/s)",
        "maxSustainableRate",
        false,
    ),
    (
        "publish latency p50 (ms)",
        "aggregatedPublishLatency50pct",
        true,
    ),
    (
        "publish latency p99 (ms)",
        "aggregatedPublishLatency99pct",
        true,
    ),
    (
        "publish latency p99.9 (ms)",
        "aggregatedPublishLatency999pct",
        true,
    ),
    (
        "publish latency max (ms)",
        "aggregatedPublishLatencyMax",
        true,
    ),
    (
        "publish delay p99.9 (µs)",
        "aggregatedPublishDelayLatency999pct",
        true,
    ),
    (
        "end-to-end p50 (ms)",
        "aggregatedEndToEndLatency50pct",
        true,
    ),
    (
        "end-to-end p99.9 (ms)",
        "aggregatedEndToEndLatency999pct",
        true,
    ),
    (
        "catch-up: seconds to drain the backlog",
        "catchUpDrainSeconds",
        true,
    ),
    (
        "catch-up: read rate while draining (MB/s)",
        "catchUpReadMBps",
        false,
    ),
    ("broker CPU s/GB", "brokerCpuSecondsPerGB", true),
    ("broker RSS at the end (MB)", "brokerRssMB", true),
    ("broker peak RSS (MB)", "brokerPeakRssMB", true),
    ("harness CPU s/GB", "harnessCpuSecondsPerGB", true),
];

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
        None => "—".into(),
    }
}

/// A Markdown table of the results side by side, results of the same workload next to each
/// other, each with its ratio to the first result of that workload.
pub fn markdown(results: &[RunResult]) -> String {
    let mut order: Vec<&RunResult> = results.iter().collect();
    let workloads: Vec<&str> = results.iter().fold(Vec::new(), |mut acc, r| {
        if !acc.contains(&r.workload.as_str()) {
            acc.push(r.workload.as_str());
        }
        acc
    });
    order.sort_by_key(|r| workloads.iter().position(|w| *w == r.workload));
    let base_of = |r: &RunResult| order.iter().find(|b| b.workload == r.workload).copied();
    let mut out = String::new();
    let names: Vec<String> = order
        .iter()
        .map(|r| format!("{} ({})", r.driver, r.workload))
        .collect();
    writeln!(out, "| metric | {} |", names.join(" | ")).ok();
    writeln!(out, "|---|{}", "---|".repeat(order.len())).ok();
    let row = |label: &str, value: &dyn Fn(&RunResult) -> Option<f64>| {
        let cells: Vec<String> = order
            .iter()
            .map(|r| {
                let base = base_of(r).filter(|b| !std::ptr::eq(*b, *r));
                match (value(r), base.and_then(value)) {
                    (Some(v), Some(b)) if b != 0.0 => format!("{} ({:.2}×)", fmt(Some(v)), v / b),
                    (v, _) => fmt(v),
                }
            })
            .collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    out.push_str(&row("publish rate (msg/s)", &|r| {
        Some(r.mean_publish_rate())
    }));
    for (label, key, _) in TABLE {
        // Rows no result has (catch-up figures of a run without a backlog) are left out.
        if order.iter().any(|r| r.metric(key).is_some()) {
            out.push_str(&row(label, &|r| r.metric(key)));
        }
    }
    out
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];
const W: f64 = 640.0;
const H: f64 = 300.0;
const PAD: f64 = 50.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Throughput over time: one polyline per result.
pub fn throughput_svg(results: &[RunResult]) -> String {
    let max_y = results
        .iter()
        .flat_map(|r| r.publish_rate.iter().chain(&r.consume_rate))
        .fold(1.0f64, |a, b| a.max(*b));
    let max_x = results
        .iter()
        .map(|r| r.publish_rate.len())
        .max()
        .unwrap_or(1)
        .max(2) as f64
        - 1.0;
    let mut svg = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}'>");
    axes(&mut svg, "seconds", "msg/s", &format!("{max_y:.0}"));
    for (i, r) in results.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        for (series, dash) in [
            (&r.publish_rate, ""),
            (&r.consume_rate, " stroke-dasharray='4 3'"),
        ] {
            let pts: Vec<String> = series
                .iter()
                .enumerate()
                .map(|(x, y)| {
                    format!(
                        "{:.1},{:.1}",
                        PAD + x as f64 / max_x * (W - 2.0 * PAD),
                        H - PAD - y / max_y * (H - 2.0 * PAD)
                    )
                })
                .collect();
            write!(
                svg,
                "<polyline fill='none' stroke='{c}' stroke-width='1.5'{dash} points='{}'/>",
                pts.join(" ")
            )
            .ok();
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Latency by percentile, HdrHistogram style: x is 1/(1-p) on a log axis (90%, 99%, 99.9% …
/// evenly spaced), y is milliseconds on a log axis.
pub fn percentile_svg(results: &[RunResult], pick: fn(&RunResult) -> &Vec<(f64, f64)>) -> String {
    let x_of = |p: f64| (1.0 / (1.0 - (p / 100.0).min(0.99999))).log10();
    let all: Vec<(f64, f64)> = results
        .iter()
        .flat_map(|r| pick(r).iter().copied())
        .filter(|(_, v)| *v > 0.0)
        .collect();
    let (min_v, max_v) = all
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), (_, v)| (a.min(*v), b.max(*v)));
    let (ly0, ly1) = (
        min_v.max(1e-3).log10().floor(),
        max_v
            .max(1e-3)
            .log10()
            .ceil()
            .max(min_v.max(1e-3).log10().floor() + 1.0),
    );
    let max_x = 5.0;
    let mut svg = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}'>");
    axes(
        &mut svg,
        "percentile (90, 99, 99.9, 99.99, 99.999)",
        "ms (log)",
        &format!("{}", 10f64.powf(ly1)),
    );
    for (i, r) in results.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = pick(r)
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(p, v)| {
                let x = PAD + x_of(*p).min(max_x) / max_x * (W - 2.0 * PAD);
                let y = H - PAD - (v.log10() - ly0) / (ly1 - ly0) * (H - 2.0 * PAD);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        write!(
            svg,
            "<polyline fill='none' stroke='{c}' stroke-width='1.5' points='{}'/>",
            pts.join(" ")
        )
        .ok();
    }
    svg.push_str("</svg>");
    svg
}

fn axes(svg: &mut String, x_label: &str, y_label: &str, y_max: &str) {
    write!(
        svg,
        "<line x1='{PAD}' y1='{b}' x2='{r}' y2='{b}' stroke='#333'/><line x1='{PAD}' y1='{PAD}' x2='{PAD}' y2='{b}' stroke='#333'/>\
         <text x='{cx}' y='{ty}' font-size='12' text-anchor='middle'>{}</text>\
         <text x='12' y='{cy}' font-size='12' transform='rotate(-90 12 {cy})' text-anchor='middle'>{}</text>\
         <text x='{PAD}' y='{top}' font-size='11'>{}</text>",
        escape(x_label),
        escape(y_label),
        escape(y_max),
        b = H - PAD,
        r = W - PAD,
        cx = W / 2.0,
        ty = H - 15.0,
        cy = H / 2.0,
        top = PAD - 8.0,
    )
    .ok();
}

/// The whole report page.
pub fn html(results: &[RunResult], title: &str) -> String {
    let mut legend = String::new();
    for (i, r) in results.iter().enumerate() {
        write!(
            legend,
            "<li><span style='color:{}'>■</span> {} — {} (<code>{}</code>)</li>",
            COLORS[i % COLORS.len()],
            escape(&r.driver),
            escape(&r.workload),
            escape(&r.path)
        )
        .ok();
    }
    let table = markdown_to_html(&markdown(results));
    format!(
        "<!doctype html><html><head><meta charset='utf-8'><title>{t}</title>\
         <style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child{{text-align:left}}</style>\
         </head><body><h1>{t}</h1><ul>{legend}</ul>\
         <h2>Results side by side (ratios to the first)</h2>{table}\
         <h2>Throughput over time (solid: published, dashed: consumed)</h2>{tp}\
         <h2>Publish latency by percentile</h2>{pl}\
         <h2>End-to-end latency by percentile</h2>{e2e}\
         </body></html>",
        t = escape(title),
        tp = throughput_svg(results),
        pl = percentile_svg(results, |r| &r.publish_quantiles),
        e2e = percentile_svg(results, |r| &r.end_to_end_quantiles),
    )
}

fn markdown_to_html(md: &str) -> String {
    let mut out = String::from("<table>");
    for (i, line) in md.lines().enumerate() {
        if i == 1 {
            continue;
        }
        let tag = if i == 0 { "th" } else { "td" };
        out.push_str("<tr>");
        for cell in line.trim_matches('|').split('|') {
            write!(out, "<{tag}>{}</{tag}>", escape(cell.trim())).ok();
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}
