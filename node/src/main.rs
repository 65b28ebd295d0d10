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
    /// Manage topics on a running node over the Kafka protocol, like kafka-topics.sh.
    Topic {
        /// A broker of the node, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
        #[command(subcommand)]
        action: TopicAction,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = -1)]
        partitions: i32,
        /// Topic config, as key=value (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// List topics.
    List,
    /// Show a topic's partitions and configs.
    Describe { name: String },
    /// Delete a topic and its data.
    Delete { name: String },
}

fn topic_command(bootstrap: &str, action: TopicAction) -> Result<String, String> {
    use node::admin;
    match action {
        TopicAction::Create {
            name,
            partitions,
            configs,
        } => {
            let mut pairs = Vec::new();
            for c in configs {
                let (k, v) = c
                    .split_once('=')
                    .ok_or_else(|| format!("--config takes key=value, got '{c}'"))?;
                pairs.push((k.to_owned(), v.to_owned()));
            }
            admin::AdminClient::connect(bootstrap)?.create_topic(&name, partitions, &pairs)?;
            Ok(format!("Created topic {name}."))
        }
        TopicAction::List => admin::list(bootstrap),
        TopicAction::Describe { name } => admin::describe(bootstrap, &name),
        TopicAction::Delete { name } => {
            admin::AdminClient::connect(bootstrap)?.delete_topic(&name)?;
            Ok(format!("Deleted topic {name}."))
        }
    }
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
        Commands::Topic {
            bootstrap_server,
            action,
        } => match topic_command(&bootstrap_server, action) {
            Ok(out) => {
                if !out.is_empty() {
                    println!("{out}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ringlog topic: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
