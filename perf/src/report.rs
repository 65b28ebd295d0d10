//! Rendering results: charts drawn with `plotters` as SVG inside one self-contained HTML page
//! (labelled ticks, a legend on every chart, one set of charts per workload, latency on
//! HdrHistogram's percentile axis), and a Markdown table.

use std::fmt::Write;

use plotters::coord::Shift;
use plotters::prelude::*;
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
        "end-to-end p99 (ms)",
        "aggregatedEndToEndLatency99pct",
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
    for w in &workloads {
        let settings: Vec<String> = [
            ("topic configs", "topicConfig"),
            ("broker properties, both brokers", "brokerConfig"),
        ]
        .iter()
        .filter_map(|(label, key)| {
            let r = order.iter().find(|r| r.workload == *w)?;
            let map = r.raw.get(*key)?.as_object().filter(|m| !m.is_empty())?;
            let kv: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("`{k}={}`", v.as_str().unwrap_or_default()))
                .collect();
            Some(format!("{label} {}", kv.join(", ")))
        })
        .collect();
        if !settings.is_empty() {
            writeln!(out, "\n{w}: {}.", settings.join("; ")).ok();
        }
    }
    out.push_str(&floor_markdown(&order));
    out
}

/// The driver name of `ringlog-bench null-broker` results: the floor.
pub const FLOOR_DRIVER: &str = "null";

/// Latencies a broker's own share is stated for: (label, result key).
const OWN_SHARE: &[(&str, &str)] = &[
    ("publish p99", "aggregatedPublishLatency99pct"),
    ("publish p99.9", "aggregatedPublishLatency999pct"),
    ("end-to-end p99", "aggregatedEndToEndLatency99pct"),
    ("end-to-end p99.9", "aggregatedEndToEndLatency999pct"),
];

/// Each broker's own share of the tail percentiles: its figure minus the null broker's in the
/// same workload (empty when no workload has a null-broker result).
fn floor_markdown(order: &[&RunResult]) -> String {
    let mut out = String::new();
    for floor in order.iter().filter(|r| r.driver == FLOOR_DRIVER) {
        let brokers: Vec<&&RunResult> = order
            .iter()
            .filter(|r| r.workload == floor.workload && r.driver != FLOOR_DRIVER)
            .collect();
        if brokers.is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push_str(
                "\nThe broker's own share (ms): its figure minus the null broker's (the client, \
                 network and machine floor) in the same workload.\n\n",
            );
            let labels: Vec<&str> = OWN_SHARE.iter().map(|(l, _)| *l).collect();
            writeln!(out, "| workload | broker | {} |", labels.join(" | ")).ok();
            writeln!(out, "|---|---|{}", "---|".repeat(OWN_SHARE.len())).ok();
        }
        for b in brokers {
            let cells: Vec<String> = OWN_SHARE
                .iter()
                .map(|(_, key)| match (b.metric(key), floor.metric(key)) {
                    (Some(v), Some(f)) => {
                        format!("{:.3} ({} − {})", v - f, fmt(Some(v)), fmt(Some(f)))
                    }
                    _ => "—".into(),
                })
                .collect();
            writeln!(
                out,
                "| {} | {} | {} |",
                b.workload,
                b.driver,
                cells.join(" | ")
            )
            .ok();
        }
    }
    out
}

/// The device floor measured by `scripts/bench/device-floor.sh` (its JSON), as a Markdown
/// paragraph.
pub fn device_floor_markdown(path: &str, v: &Value) -> Result<String, ReportError> {
    let err = |reason: String| ReportError::Input {
        path: path.to_owned(),
        reason,
    };
    let pct = |key: &str| -> Result<[f64; 3], ReportError> {
        let m = v.get(key).ok_or_else(|| err(format!("no {key}")))?;
        let mut out = [0.0; 3];
        for (i, p) in ["50", "99", "99.9"].iter().enumerate() {
            out[i] = num(m, p).ok_or_else(|| err(format!("no {key}.{p}")))?;
        }
        Ok(out)
    };
    let (w, s) = (pct("writeLatencyMs")?, pct("writeSyncLatencyMs")?);
    Ok(format!(
        "\nThe device floor (fio, {} B O_DIRECT sequential writes at {:.0} MB/s, one in flight, over \
         written blocks, {} s each): a write p50 / p99 / p99.9 {:.3} / {:.3} / {:.3} ms; a write \
         with its cache flush (O_DSYNC, what flush.messages=1 waits for) {:.3} / {:.3} / {:.3} ms.\n",
        num(v, "blockSize").unwrap_or(0.0),
        num(v, "rateBytesPerSecond").unwrap_or(0.0) / 1e6,
        num(v, "seconds").unwrap_or(0.0),
        w[0], w[1], w[2], s[0], s[1], s[2],
    ))
}

/// Series colours, one per result, in the order the results are given.
const COLORS: &[RGBColor] = &[
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
];
const CHART: (u32, u32) = (900, 380);
/// The highest percentile a percentile chart shows: 99.999 % (x = 1/(1-p) = 100 000).
const PERCENTILE_X_MAX: f64 = 1e5;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// The workloads of `results` in first-seen order, each with its results (and their index in
/// `results`, which picks their colour).
fn by_workload(results: &[RunResult]) -> Vec<(&str, Vec<(usize, &RunResult)>)> {
    let mut out: Vec<(&str, Vec<(usize, &RunResult)>)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match out.iter_mut().find(|(w, _)| *w == r.workload) {
            Some((_, rs)) => rs.push((i, r)),
            None => out.push((r.workload.as_str(), vec![(i, r)])),
        }
    }
    out
}

/// A drawing error of the SVG backend.
type ChartError = plotters::drawing::DrawingAreaErrorKind<std::io::Error>;

/// Renders a chart into an SVG string; a drawing error becomes a note in the page.
fn svg_chart(
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ChartError>,
) -> String {
    let mut out = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut out, CHART).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present())
    };
    match result {
        Ok(()) => out,
        Err(e) => format!("<p>chart not drawn: {}</p>", escape(&e.to_string())),
    }
}

/// Published (solid) and consumed (dashed) messages per second over the run, one chart per
/// workload, every result of the workload on it.
pub fn throughput_svg(workload: &str, results: &[(usize, &RunResult)]) -> String {
    let seconds_per_sample = |r: &RunResult| r.metric("sampleRateSeconds").unwrap_or(1.0);
    let max_x = results
        .iter()
        .map(|(_, r)| r.publish_rate.len().max(r.consume_rate.len()) as f64 * seconds_per_sample(r))
        .fold(1.0f64, f64::max);
    let max_y = results
        .iter()
        .flat_map(|(_, r)| r.publish_rate.iter().chain(&r.consume_rate))
        .fold(1.0f64, |a, b| a.max(*b))
        * 1.1;
    svg_chart(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(format!("{workload}: throughput"), ("sans-serif", 18))
            .margin(12)
            .margin_right(36)
            .x_label_area_size(44)
            .y_label_area_size(78)
            .build_cartesian_2d(0f64..max_x, 0f64..max_y)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the measurement began")
            .y_desc("messages per second")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        for &(i, r) in results {
            let c = color(i);
            let step = seconds_per_sample(r);
            let points = |series: &[f64]| -> Vec<(f64, f64)> {
                series
                    .iter()
                    .enumerate()
                    .map(|(x, y)| (x as f64 * step, *y))
                    .collect()
            };
            chart
                .draw_series(LineSeries::new(points(&r.publish_rate), c.stroke_width(2)))?
                .label(format!("{}: published", r.driver))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(DashedLineSeries::new(
                    points(&r.consume_rate),
                    6,
                    4,
                    c.stroke_width(2),
                ))?
                .label(format!("{}: consumed", r.driver))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
    })
}

/// x of percentile `p` (0–100) on the HdrHistogram axis: 1/(1-p), so 90 %, 99 %, 99.9 % …
/// are evenly spaced on a log scale.
fn percentile_x(p: f64) -> f64 {
    (1.0 / (1.0 - p / 100.0)).min(PERCENTILE_X_MAX)
}

/// The percentile a point of the HdrHistogram axis stands for: "99.9%".
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let s = format!("{p:.5}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// Latency by percentile, HdrHistogram's way: x is 1/(1-p) on a log axis labelled 0 %, 90 %,
/// 99 %, 99.9 % …; y is milliseconds on a log axis. One chart per workload and kind of
/// latency, every result of the workload on it. The maximum (100 %) is not on this axis: it is
/// in the table.
pub fn percentile_svg(
    title: &str,
    results: &[(usize, &RunResult)],
    pick: fn(&RunResult) -> &Vec<(f64, f64)>,
) -> String {
    let points = |r: &RunResult| -> Vec<(f64, f64)> {
        pick(r)
            .iter()
            .filter(|(p, v)| *p < 100.0 && *v > 0.0)
            .map(|(p, v)| (percentile_x(*p), *v))
            .collect()
    };
    let all: Vec<(f64, f64)> = results.iter().flat_map(|(_, r)| points(r)).collect();
    if all.is_empty() {
        return format!("<p>{}: no latency recorded</p>", escape(title));
    }
    let (min_v, max_v) = all
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), (_, v)| (a.min(*v), b.max(*v)));
    let y_range = 10f64.powf(min_v.log10().floor())
        ..10f64.powf(max_v.log10().ceil().max(min_v.log10().floor() + 1.0));
    let max_x = all.iter().map(|(x, _)| *x).fold(100.0f64, f64::max);
    let x_range = 1f64..10f64.powf(max_x.log10().ceil());
    svg_chart(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .margin_right(36)
            .x_label_area_size(44)
            .y_label_area_size(78)
            .build_cartesian_2d(x_range.log_scale(), y_range.log_scale())?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("milliseconds")
            .x_label_formatter(&|x| percentile_label(*x))
            .y_label_formatter(&|v| {
                if *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v}")
                }
            })
            .draw()?;
        for &(i, r) in results {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(points(r), c.stroke_width(2)))?
                .label(r.driver.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
    })
}

/// The whole report page: the results side by side, then for each workload its throughput
/// chart and its publish and end-to-end latency percentile charts.
pub fn html(results: &[RunResult], title: &str) -> String {
    let mut legend = String::new();
    for (i, r) in results.iter().enumerate() {
        let c = color(i);
        write!(
            legend,
            "<li><span style='color:rgb({},{},{})'>■</span> {} — {} (<code>{}</code>)</li>",
            c.0,
            c.1,
            c.2,
            escape(&r.driver),
            escape(&r.workload),
            escape(&r.path)
        )
        .ok();
    }
    let table = markdown_to_html(&markdown(results));
    let mut charts = String::new();
    for (workload, rs) in by_workload(results) {
        write!(
            charts,
            "<h2>{w}</h2>{tp}{pl}{e2e}",
            w = escape(workload),
            tp = throughput_svg(workload, &rs),
            pl = percentile_svg(
                &format!("{workload}: publish latency by percentile"),
                &rs,
                |r| &r.publish_quantiles
            ),
            e2e = percentile_svg(
                &format!("{workload}: end-to-end latency by percentile"),
                &rs,
                |r| &r.end_to_end_quantiles
            ),
        )
        .ok();
    }
    format!(
        "<!doctype html><html><head><meta charset='utf-8'><title>{t}</title>\
         <style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child{{text-align:left}}svg{{display:block;margin:1em 0}}</style>\
         </head><body><h1>{t}</h1><ul>{legend}</ul>\
         <h2>Results side by side (ratios to the first of each workload)</h2>{table}\
         {charts}</body></html>",
        t = escape(title),
    )
}

fn markdown_to_html(md: &str) -> String {
    let mut out = String::from("<table>");
    let mut notes = String::new();
    for (i, line) in md.lines().enumerate() {
        if i == 1 || line.is_empty() {
            continue;
        }
        if !line.starts_with('|') {
            // The notes under the table (each workload's settings).
            write!(notes, "<p>{}</p>", escape(line)).ok();
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
    out.push_str(&notes);
    out
}
