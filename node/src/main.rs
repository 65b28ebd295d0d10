//! `ringlog`: the broker and its admin commands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use node::config::Properties;

#[derive(Parser)]
#[command(
    name = "ringlog",
    version,
    about = "A Kafka-compatible log storage node"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a broker node (one Kafka broker endpoint per shard).
    Serve {
        /// TOML file of Kafka-named properties, e.g. "log.dirs" = "/var/lib/ringlog".
        #[arg(long)]
        config: Option<PathBuf>,
        /// Data directory (log.dirs).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// HOST:PORT of shard 0; shard i listens on PORT + i (listeners).
        #[arg(long)]
        listen: Option<String>,
        /// Number of shards (default: all cores).
        #[arg(long)]
        shards: Option<usize>,
        /// Any property, as key=value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
}

fn properties(
    config: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    listen: Option<String>,
    shards: Option<usize>,
    set: Vec<String>,
) -> Result<Properties, String> {
    let mut p = Properties::default();
    if let Some(path) = config {
        p.load_file(&path).map_err(|e| e.to_string())?;
    }
    for pair in &set {
        p.set_pair(pair).map_err(|e| e.to_string())?;
    }
    if let Some(d) = data_dir {
        p.set("log.dirs", &d.to_string_lossy())
            .map_err(|e| e.to_string())?;
    }
    if let Some(l) = listen {
        p.set("listeners", &l).map_err(|e| e.to_string())?;
    }
    if let Some(s) = shards {
        if s == 0 {
            return Err("--shards must be at least 1, got 0".into());
        }
        p.set("num.shards", &s.to_string())
            .map_err(|e| e.to_string())?;
    }
    Ok(p)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Commands::Serve {
            config,
            data_dir,
            listen,
            shards,
            set,
        } => {
            let config = match properties(config, data_dir, listen, shards, set)
                .and_then(|p| p.build().map_err(|e| e.to_string()))
            {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("ringlog: {e}");
                    return ExitCode::from(2);
                }
            };
            let signals = node::signals::block_termination_signals();
            tracing::info!(shards = config.shards, dir = %config.log_dir.display(), listen = %config.listen, "starting ringlog");
            let running = match node::start::start(config) {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("ringlog: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let stopping = running.stopping.clone();
            std::thread::spawn(move || {
                let sig = node::signals::wait_for_termination(&signals);
                tracing::info!(
                    signal = sig,
                    "stopping: finishing in-flight requests and closing logs"
                );
                stopping.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            running.wait();
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
    }
}
