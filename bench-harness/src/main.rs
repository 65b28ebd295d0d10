//! `ringlog-bench`: runs a workload against any Kafka-compatible bootstrap address and writes
//! the result JSON.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ringlog-bench",
    version,
    about = "Kafka-protocol load generator"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Validate a workload file.
    Check { workload: PathBuf },
    /// Print the broker properties (key=value lines) the workloads' brokers start with
    /// (`brokerConfig`); the workloads must agree, as one broker runs them all.
    BrokerConfig {
        #[arg(required = true)]
        workloads: Vec<PathBuf>,
    },
    /// Run a workload and write the result JSON.
    Run {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        workload: PathBuf,
        /// Result file (JSON, OpenMessaging Benchmark field names).
        #[arg(long)]
        out: PathBuf,
        /// Name of the target in the result (ringlog, kafka, ...).
        #[arg(long, default_value = "ringlog")]
        target: String,
        /// Broker process ids (comma separated: every node of a cluster), for their CPU
        /// seconds per GB, summed.
        #[arg(long, value_delimiter = ',')]
        broker_pid: Vec<u32>,
        /// Override the workload's test duration (minutes), e.g. for a quick run.
        #[arg(long)]
        duration_minutes: Option<f64>,
        #[arg(long)]
        warmup_minutes: Option<f64>,
        /// Catch-up reads: sync and drop the kernel's page cache after writing the backlog
        /// (needs root), so the read phase starts cold.
        #[arg(long)]
        drop_caches: bool,
        /// A Kafka client properties file for TLS and SASL (security.protocol, sasl.mechanism,
        /// sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it.
        #[arg(long = "command-config", value_name = "FILE")]
        command_config: Option<PathBuf>,
    },
    /// Serve a null broker: a Kafka endpoint that answers ApiVersions, Metadata,
    /// CreateTopics, DeleteTopics, Produce and Fetch from memory and does nothing else — the
    /// client + network + machine floor a broker's latency is measured against.
    NullBroker {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:29292")]
        listen: std::net::SocketAddr,
        /// Host given for the broker in Metadata (the listen address's IP by default).
        #[arg(long)]
        advertised_host: Option<String>,
        /// Bytes of records kept over all partitions (the oldest go first; a fetch below
        /// what is kept gets OFFSET_OUT_OF_RANGE).
        #[arg(long, default_value_t = bench_harness::null_broker::RETAINED_BYTES_DEFAULT)]
        retained_bytes: usize,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Commands::NullBroker {
            listen,
            advertised_host,
            retained_bytes,
        } => {
            let opts = bench_harness::null_broker::NullBrokerOptions {
                listen,
                advertised_host,
                retained_bytes_max: retained_bytes,
            };
            match bench_harness::null_broker::serve(&opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ringlog-bench null-broker: listening on {listen}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Commands::Check { workload } => match bench_harness::workload::Workload::load(&workload) {
            Ok(w) => {
                println!("{}: valid", w.name);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ringlog-bench: {e}");
                ExitCode::FAILURE
            }
        },
        Commands::BrokerConfig { workloads } => match broker_config(&workloads) {
            Ok(lines) => {
                for (k, v) in lines {
                    println!("{k}={v}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ringlog-bench: {e}");
                ExitCode::FAILURE
            }
        },
        Commands::Run {
            bootstrap,
            workload,
            out,
            target,
            broker_pid,
            duration_minutes,
            warmup_minutes,
            drop_caches,
            command_config,
        } => {
            if let Some(path) = command_config {
                let security = kafka_client::security::load_properties(&path)
                    .and_then(|p| kafka_client::security::ClientSecurity::from_properties(&p))
                    .map_err(|e| format!("--command-config {}: {e}", path.display()))
                    .and_then(|s| {
                        bench_harness::client::set_security(s).map_err(|e| e.to_string())
                    });
                if let Err(e) = security {
                    eprintln!("ringlog-bench: {e}");
                    return ExitCode::FAILURE;
                }
            }
            let mut w = match bench_harness::workload::Workload::load(&workload) {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("ringlog-bench: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Some(d) = duration_minutes {
                w.test_duration_minutes = d;
            }
            if let Some(d) = warmup_minutes {
                w.warmup_duration_minutes = d;
            }
            if let Err(e) = w.validate() {
                eprintln!("ringlog-bench: {e}");
                return ExitCode::FAILURE;
            }
            if !w.broker_config.is_empty() {
                let props: Vec<String> = w
                    .broker_config
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                eprintln!(
                    "ringlog-bench: '{}' expects brokers started with {} (scripts/bench/perf-suite.sh starts them so; the result records it)",
                    w.name,
                    props.join(" ")
                );
            }
            let opts = bench_harness::run::RunOptions {
                bootstrap,
                target,
                broker_pids: broker_pid,
                progress: true,
                drop_caches,
            };
            let result = if w.find_sustainable_rate {
                bench_harness::sustainable::find_and_measure(w, &opts)
            } else {
                bench_harness::run::run(w, &opts)
            };
            match result {
                Ok(result) => {
                    let text = serde_json::to_string_pretty(&result).expect("result serialises");
                    if let Err(e) = std::fs::write(&out, text) {
                        eprintln!("ringlog-bench: writing {}: {e}", out.display());
                        return ExitCode::FAILURE;
                    }
                    println!("{}", summary(&result));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ringlog-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Why the workloads of one suite call cannot share their brokers' start properties.
#[derive(Debug, thiserror::Error)]
enum BrokerConfigError {
    #[error(transparent)]
    Workload(#[from] bench_harness::workload::WorkloadError),
    #[error("{first} and {other} start their brokers with different brokerConfig ({first_config:?} vs {other_config:?}); run them in separate suite calls")]
    Differ {
        first: String,
        other: String,
        first_config: std::collections::BTreeMap<String, String>,
        other_config: std::collections::BTreeMap<String, String>,
    },
}

/// The `brokerConfig` all the given workloads share, or which two differ.
fn broker_config(
    paths: &[PathBuf],
) -> Result<std::collections::BTreeMap<String, String>, BrokerConfigError> {
    let mut first: Option<(&PathBuf, bench_harness::workload::Workload)> = None;
    for p in paths {
        let w = bench_harness::workload::Workload::load(p)?;
        match &first {
            None => first = Some((p, w)),
            Some((fp, fw)) if fw.broker_config != w.broker_config => {
                return Err(BrokerConfigError::Differ {
                    first: fp.display().to_string(),
                    other: p.display().to_string(),
                    first_config: fw.broker_config.clone(),
                    other_config: w.broker_config,
                })
            }
            Some(_) => {}
        }
    }
    Ok(first.map(|(_, w)| w.broker_config).unwrap_or_default())
}

fn summary(r: &serde_json::Value) -> String {
    let rates = r["publishRate"].as_array().cloned().unwrap_or_default();
    let mean = rates.iter().filter_map(|v| v.as_f64()).sum::<f64>() / rates.len().max(1) as f64;
    format!(
        "{}{} on {}: publish {:.0} msg/s; publish latency ms p50 {} p99 {} p99.9 {} max {}; end-to-end ms p50 {} p99 {}; errors {} {}",
        r["workload"].as_str().unwrap_or(""),
        r["maxSustainableRate"].as_f64().map_or(String::new(), |m| format!(
            " (highest sustainable rate {m:.0} msg/s, held while measured: {})",
            r["sustainableAtMeasuredRate"]
        )),
        r["driver"].as_str().unwrap_or(""),
        mean,
        r["aggregatedPublishLatency50pct"],
        r["aggregatedPublishLatency99pct"],
        r["aggregatedPublishLatency999pct"],
        r["aggregatedPublishLatencyMax"],
        r["aggregatedEndToEndLatency50pct"],
        r["aggregatedEndToEndLatency99pct"],
        r["errors"],
        r.get("errorKinds")
            .filter(|k| k.as_object().is_some_and(|o| !o.is_empty()))
            .map_or(String::new(), |k| k.to_string()),
    )
}
