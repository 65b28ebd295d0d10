//! `ringlog-bench`: not runnable yet — the drivers are being built (see the issues). It checks a
//! workload file and says so.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, cmd, path] = args.as_slice() else {
        eprintln!("usage: ringlog-bench check WORKLOAD.yaml");
        return ExitCode::from(2);
    };
    if cmd != "check" {
        eprintln!("ringlog-bench: '{cmd}' is not built yet; only 'check WORKLOAD.yaml' is");
        return ExitCode::from(2);
    }
    match bench_harness::workload::Workload::load(std::path::Path::new(path)) {
        Ok(w) => {
            println!(
                "{}: valid ({} topic(s) x {} partitions, {} B messages)",
                w.name, w.topics, w.partitions_per_topic, w.message_size
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringlog-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
