//! `ringlog-perf report RESULT.json... --html OUT.html [--markdown OUT.md]`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ringlog-perf report RESULT.json... --html OUT.html [--markdown OUT.md] [--title TITLE] [--device-floor DEVICE-FLOOR.json]";
    if args.first().map(String::as_str) != Some("report") {
        eprintln!("{usage}");
        return ExitCode::from(2);
    }
    let (mut files, mut html, mut md, mut title, mut device) = (
        Vec::new(),
        None,
        None,
        "ringlog benchmark report".to_owned(),
        None,
    );
    let mut it = args.into_iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--html" => html = it.next(),
            "--markdown" => md = it.next(),
            "--title" => title = it.next().unwrap_or(title),
            "--device-floor" => device = it.next(),
            _ => files.push(a),
        }
    }
    let (Some(html), false) = (html, files.is_empty()) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let mut results = Vec::new();
    for f in &files {
        match perf::report::RunResult::load(f) {
            Ok(r) => results.push(r),
            Err(e) => {
                eprintln!("ringlog-perf: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let device_floor = match device.as_deref().map(load_device_floor).transpose() {
        Ok(d) => d.unwrap_or_default(),
        Err(e) => {
            eprintln!("ringlog-perf: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(&html, perf::report::html(&results, &title)) {
        eprintln!("ringlog-perf: writing {html}: {e}");
        return ExitCode::FAILURE;
    }
    let summary = perf::report::markdown(&results) + &device_floor;
    if let Some(md) = md {
        if let Err(e) = std::fs::write(&md, &summary) {
            eprintln!("ringlog-perf: writing {md}: {e}");
            return ExitCode::FAILURE;
        }
    }
    print!("{summary}");
    println!("HTML report: {html}");
    ExitCode::SUCCESS
}

/// The device floor paragraph from `scripts/bench/device-floor.sh`'s JSON.
fn load_device_floor(path: &str) -> Result<String, perf::report::ReportError> {
    let input = |reason: String| perf::report::ReportError::Input {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| input(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| input(e.to_string()))?;
    perf::report::device_floor_markdown(path, &v)
}
