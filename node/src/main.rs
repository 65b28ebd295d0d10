//! `ringlog`: the broker and its admin commands.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use node::cli::CliError;
use node::config::{ConfigError, Properties};

/// mimalloc, not glibc's malloc: a replicated node at 50 000 msg/s spent ~5 % of its CPU in
/// glibc's malloc and free (request and response buffers, fetch sessions, tasks).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ringlog",
    version,
    about = "A Kafka-compatible log storage node"
)]
struct Cli {
    /// How log lines are written to stderr: text (colours only when stderr is a terminal) or
    /// json (one object per line).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Commands,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
        /// A SCRAM user to create (or whose password to set) at start, as kafka-storage
        /// format takes it: 'SCRAM-SHA-512=[name=admin,password=secret]' (repeatable).
        #[arg(long = "add-scram", value_name = "MECHANISM=[name=..,password=..]")]
        add_scram: Vec<String>,
    },
    /// Manage topics on a running node over the Kafka protocol, like kafka-topics.sh.
    Topic {
        /// A broker of the node, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
        /// A Kafka client properties file for TLS and SASL (security.protocol, sasl.mechanism,
        /// sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it.
        #[arg(long = "command-config", value_name = "FILE")]
        command_config: Option<std::path::PathBuf>,
        #[command(subcommand)]
        action: TopicAction,
    },
    /// The cluster as a broker sees it: nodes, brokers, controller, offline and
    /// under-replicated partitions.
    Cluster {
        /// A broker of the cluster, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
        /// A Kafka client properties file for TLS and SASL (security.protocol, sasl.mechanism,
        /// sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it.
        #[arg(long = "command-config", value_name = "FILE")]
        command_config: Option<std::path::PathBuf>,
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Inspect and manage consumer groups over the Kafka protocol, like kafka-consumer-groups.sh.
    Group {
        /// A broker of the node, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
        /// A Kafka client properties file for TLS and SASL (security.protocol, sasl.mechanism,
        /// sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it.
        #[arg(long = "command-config", value_name = "FILE")]
        command_config: Option<std::path::PathBuf>,
        #[command(subcommand)]
        action: GroupAction,
    },
    /// Manage SCRAM users (SASL) over the Kafka protocol, like kafka-configs.sh --entity-type
    /// users.
    User {
        /// A broker of the node, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
        /// A Kafka client properties file for TLS and SASL (security.protocol, sasl.mechanism,
        /// sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it.
        #[arg(long = "command-config", value_name = "FILE")]
        command_config: Option<std::path::PathBuf>,
        #[command(subcommand)]
        action: UserAction,
    },
}

#[derive(Subcommand)]
enum UserAction {
    /// Set a user's SCRAM credential (created if new). The password is read from standard
    /// input unless --password is given.
    Set {
        name: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// The password (visible in the process list: prefer standard input).
        #[arg(long)]
        password: Option<String>,
        #[arg(long, default_value_t = 4096)]
        iterations: i32,
    },
    /// Delete a user's SCRAM credential for one mechanism.
    Delete {
        name: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
    },
    /// List SCRAM users (all, or those named) with their mechanisms and iterations.
    List { names: Vec<String> },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Nodes, brokers, controller, offline and under-replicated partitions; with --etcd, each
    /// node's lease health too.
    Status {
        /// The cluster's etcd (metadata.etcd.endpoints), to show every node's lease.
        #[arg(long)]
        etcd: Option<String>,
    },
    /// Plan moves that even replicas, preferred leaders and bytes over the live nodes (a new
    /// node takes its share); printed as Kafka's reassignment JSON, started with --execute.
    Rebalance {
        /// Only print the plan (the default).
        #[arg(long, conflicts_with = "execute")]
        plan: bool,
        /// Start the moves (AlterPartitionReassignments).
        #[arg(long)]
        execute: bool,
    },
    /// Plan moving every replica off a live node before it leaves the cluster; started with
    /// --execute. Once `ringlog cluster status` shows no move in progress, stop the node.
    Decommission {
        /// The node (node.id).
        node: i32,
        #[arg(long, conflicts_with = "execute")]
        plan: bool,
        #[arg(long)]
        execute: bool,
    },
    /// Plan re-creating, on the live nodes, every replica of a node gone for good (its disk
    /// lost), so each partition returns to its replication factor; started with --execute.
    RemoveNode {
        /// The node (node.id); it must not be live.
        node: i32,
        #[arg(long, conflicts_with = "execute")]
        plan: bool,
        #[arg(long)]
        execute: bool,
    },
}

#[derive(Subcommand)]
enum GroupAction {
    /// List every group with its state.
    List,
    /// Show a group's members and, per partition, committed offset, log end offset and lag.
    Describe { group: String },
    /// Move a group's committed offsets on a topic (the group must have no active members).
    /// Prints the plan; commits only with --execute.
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        /// To each partition's log start offset.
        #[arg(long, group = "to")]
        to_earliest: bool,
        /// To each partition's log end offset.
        #[arg(long, group = "to")]
        to_latest: bool,
        /// To this offset (clamped to each partition's range).
        #[arg(long, group = "to", allow_hyphen_values = true)]
        to_offset: Option<i64>,
        /// To the first offset at or after YYYY-MM-DDTHH:MM:SS[.sss] (UTC) or epoch ms.
        #[arg(long, group = "to")]
        to_datetime: Option<String>,
        /// Move the committed offsets by N (negative: back).
        #[arg(long, group = "to", allow_hyphen_values = true)]
        shift_by: Option<i64>,
        /// Commit the new offsets (otherwise only print them).
        #[arg(long)]
        execute: bool,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = -1)]
        partitions: i32,
        /// Replicas of each partition (-1: the broker's default, 1), at most the live nodes.
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        replication_factor: i16,
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

/// `--command-config`: how the admin client connects.
fn configure(command_config: Option<std::path::PathBuf>) -> Result<(), CliError> {
    node::cli::admin_client::configure(command_config.as_deref())
}

fn topic_command(bootstrap: &str, action: TopicAction) -> Result<String, CliError> {
    use node::cli::topic;
    match action {
        TopicAction::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let mut pairs = Vec::new();
            for c in configs {
                let (k, v) = c.split_once('=').ok_or_else(|| {
                    CliError::Invalid(format!("--config takes key=value, got '{c}'"))
                })?;
                pairs.push((k.to_owned(), v.to_owned()));
            }
            topic::create(bootstrap, &name, (partitions, replication_factor), &pairs)
        }
        TopicAction::List => topic::list(bootstrap),
        TopicAction::Describe { name } => topic::describe(bootstrap, &name),
        TopicAction::Delete { name } => topic::delete(bootstrap, &name),
    }
}

fn group_command(bootstrap: &str, action: GroupAction) -> Result<String, CliError> {
    use node::cli::group::{self, ResetTo};
    match action {
        GroupAction::List => group::list(bootstrap),
        GroupAction::Describe { group } => group::describe(bootstrap, &group),
        GroupAction::ResetOffsets {
            group,
            topic,
            to_earliest,
            to_latest,
            to_offset,
            to_datetime,
            shift_by,
            execute,
        } => {
            let to = if to_earliest {
                ResetTo::Earliest
            } else if to_latest {
                ResetTo::Latest
            } else if let Some(o) = to_offset {
                ResetTo::Offset(o)
            } else if let Some(d) = to_datetime {
                ResetTo::Timestamp(group::parse_datetime(&d)?)
            } else if let Some(n) = shift_by {
                ResetTo::ShiftBy(n)
            } else {
                return Err(CliError::Invalid("reset-offsets needs one of --to-earliest, --to-latest, --to-offset N, --to-datetime T, --shift-by N".into()));
            };
            group::reset_offsets(bootstrap, &group, &topic, &to, execute)
        }
    }
}

fn user_command(bootstrap: &str, action: UserAction) -> Result<String, node::cli::CliError> {
    use node::cli::user;
    match action {
        UserAction::Set {
            name,
            mechanism,
            password,
            iterations,
        } => {
            let password = match password {
                Some(p) => p,
                None => {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map_err(|e| {
                        node::cli::CliError::Invalid(format!(
                            "reading the password from standard input: {e}"
                        ))
                    })?;
                    line.trim_end_matches(['\r', '\n']).to_owned()
                }
            };
            user::set(bootstrap, &name, &mechanism, &password, iterations)
        }
        UserAction::Delete { name, mechanism } => user::delete(bootstrap, &name, &mechanism),
        UserAction::List { names } => user::list(bootstrap, &names),
    }
}

/// Prints an admin command's output (or its error, naming the command) and picks the exit code.
fn admin_outcome(command: &str, result: Result<String, CliError>) -> ExitCode {
    match result {
        Ok(out) => {
            if !out.is_empty() {
                println!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringlog {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn properties(
    config: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    listen: Option<String>,
    shards: Option<usize>,
    set: Vec<String>,
) -> Result<Properties, ConfigError> {
    let mut p = Properties::default();
    if let Some(path) = config {
        p.load_file(&path)?;
    }
    for pair in &set {
        p.set_pair(pair)?;
    }
    if let Some(d) = data_dir {
        p.set("log.dirs", &d.to_string_lossy())?;
    }
    if let Some(l) = listen {
        // `--listen HOST:PORT` is the plaintext listener, named as Kafka names listeners.
        let l = if l.contains("://") {
            l
        } else {
            format!("PLAINTEXT://{l}")
        };
        p.set("listeners", &l)?;
    }
    if let Some(s) = shards {
        if s == 0 {
            return Err(ConfigError::Invalid {
                key: "--shards (num.shards)".into(),
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        p.set("num.shards", &s.to_string())?;
    }
    Ok(p)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(node::log_output::LossyStderr)
        .log_internal_errors(false);
    match cli.log_format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => logs.json().init(),
    }
    match cli.command {
        Commands::Serve {
            config,
            data_dir,
            listen,
            shards,
            set,
            add_scram,
        } => {
            let mut config =
                match properties(config, data_dir, listen, shards, set).and_then(|p| p.build()) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("ringlog: {e}");
                        return ExitCode::from(2);
                    }
                };
            for arg in &add_scram {
                match node::security::AddScram::parse(arg) {
                    Ok(a) => config.add_scram.push(a),
                    Err(e) => {
                        eprintln!("ringlog: --add-scram: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            let signals = node::signals::block_termination_signals();
            tracing::info!(shards = config.shards, dir = %config.log_dir.display(), listen = %config.listener(0).bind, "starting ringlog");
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
            if running.wait() {
                tracing::info!("stopped");
                ExitCode::SUCCESS
            } else {
                tracing::error!("stopped: a shard could not serve (see above)");
                ExitCode::FAILURE
            }
        }
        Commands::Topic {
            bootstrap_server,
            command_config,
            action,
        } => admin_outcome(
            "topic",
            configure(command_config).and_then(|()| topic_command(&bootstrap_server, action)),
        ),
        Commands::Group {
            bootstrap_server,
            command_config,
            action,
        } => admin_outcome(
            "group",
            configure(command_config).and_then(|()| group_command(&bootstrap_server, action)),
        ),
        Commands::User {
            bootstrap_server,
            command_config,
            action,
        } => admin_outcome(
            "user",
            configure(command_config).and_then(|()| user_command(&bootstrap_server, action)),
        ),
        Commands::Cluster {
            bootstrap_server,
            command_config,
            action,
        } => admin_outcome(
            "cluster",
            configure(command_config).and_then(|()| cluster_command(&bootstrap_server, action)),
        ),
    }
}

fn cluster_command(bootstrap: &str, action: ClusterAction) -> Result<String, CliError> {
    use node::cli::moves::{run, Lifecycle};
    use node::ids::NodeId;
    match action {
        ClusterAction::Status { etcd } => node::cli::cluster::status(bootstrap, etcd.as_deref()),
        ClusterAction::Rebalance { execute, .. } => run(bootstrap, Lifecycle::Rebalance, execute),
        ClusterAction::Decommission { node, execute, .. } => {
            run(bootstrap, Lifecycle::Decommission(NodeId(node)), execute)
        }
        ClusterAction::RemoveNode { node, execute, .. } => {
            run(bootstrap, Lifecycle::RemoveNode(NodeId(node)), execute)
        }
    }
}
