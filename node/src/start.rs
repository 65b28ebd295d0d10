//! Starting a node: the control-plane thread and one pinned executor per shard.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{mpsc, Arc};

use futures_channel::mpsc as fmpsc;
use glommio::{LocalExecutorBuilder, Placement};

use std::time::Duration;

use crate::config::{BrokerConfig, MetadataConfig};
use crate::error::StartError;
use crate::limits::{ETCD_REQUEST_TIMEOUT, OPEN_FILES_WANTED, SHARD_IO_MEMORY_BYTES};
use crate::metadata::controller::ControllerSettings;
use crate::metadata::embedded::EmbeddedStore;
use crate::metadata::etcd::store::EtcdStore;
use crate::metadata::etcd::EtcdConfig;
use crate::metadata::lease::LeaseClock;
use crate::metadata::snapshot::NodeInfo;
use crate::metadata::store::MetadataStore;
use crate::metadata::{Command, Controller};
use crate::server::budget::RequestBudget;
use crate::shard::run::run_shard;
use crate::shard::{now_ms, NodeServices, ShardCtx};
use crate::stop::StopSignal;

/// A running node; `stop` asks every shard to finish and waits for them.
pub struct Node {
    pub stopping: Arc<AtomicBool>,
    /// Set by a shard that could not serve (its listener's port in use).
    failed: Arc<AtomicBool>,
    shards: Vec<glommio::ExecutorJoinHandle<()>>,
    controller: std::thread::JoinHandle<()>,
    /// The Prometheus endpoint's thread (`metrics.listen`).
    metrics: Option<std::thread::JoinHandle<()>>,
}

/// Keeps large buffers on the heap instead of fresh mmaps (each would page-fault and be
/// zeroed by the kernel on every use).
fn keep_large_allocations_on_heap() {
    // SAFETY: mallopt only changes glibc's allocation thresholds.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

/// Turns transparent huge pages off for the process (`prctl(PR_SET_THP_DISABLE)`): mimalloc
/// asks for them on its arenas (`MADV_HUGEPAGE`), so a buffer that grew the heap (a new tail
/// chunk while the read cache fills to its budget) faulted in a whole 2 MiB page and zeroed it
/// inside one page fault: 3–7 ms with the shard's thread in `folio_zero_user` (`perf sched
/// timehist -g`) on this virtual machine, whose host backs guest memory on first touch. At
/// 10 000 msg/s, where the cache fills for the whole run, that was ~4 stalls of 5 ms or more a
/// second and publish p99 3.6–8.3 ms against the null broker's 1.25
/// (`perf/results/2026-12-06-floor`). With 4 KiB pages the same zeroing is spread over the
/// appends that touch them. Kafka's JVM does not ask for huge pages by default either.
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process's memory map.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "could not turn transparent huge pages off; a fresh heap page may stall a shard"
        );
    }
}

/// Raises the open-files limit towards [`OPEN_FILES_WANTED`]: an active segment keeps its file
/// open for writes and the read cache up to `iouring_log::limits::READ_FILES_MAX` per
/// shard for reads, so 10 000 partitions need well over 10 000 descriptors, beyond common
/// defaults. The hard limit is raised too where the process may (root); otherwise the soft
/// limit goes up to the hard one. The limit before and after is logged.
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    let wanted = OPEN_FILES_WANTED as libc::rlim_t;
    if lim.rlim_cur >= wanted {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: wanted,
        rlim_max: lim.rlim_max.max(wanted),
    };
    let capped = libc::rlimit {
        rlim_cur: lim.rlim_max.min(wanted),
        rlim_max: lim.rlim_max,
    };
    let before = lim.rlim_cur;
    // Raising the hard limit needs privilege; without it, the soft limit goes to the hard one.
    // SAFETY: setrlimit only reads the rlimit it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        // SAFETY: as above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &capped) };
    }
    // SAFETY: as the first getrlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    tracing::info!(
        open_files_limit = lim.rlim_cur,
        before,
        wanted,
        "open files limit (active segments keep their files open)"
    );
}

pub fn start(config: BrokerConfig) -> Result<Node, StartError> {
    keep_large_allocations_on_heap();
    disable_transparent_huge_pages();
    raise_open_files_limit();
    std::fs::create_dir_all(&config.log_dir).map_err(|source| StartError::DataDir {
        path: config.log_dir.clone(),
        source,
    })?;
    let (mut store, lease): (Box<dyn MetadataStore>, LeaseClock) = match &config.metadata {
        MetadataConfig::Embedded => (
            Box::new(EmbeddedStore::new(&config.log_dir)),
            LeaseClock::unleased(),
        ),
        MetadataConfig::Etcd {
            endpoints,
            cluster_id,
            session_timeout_ms,
        } => {
            let etcd = EtcdConfig {
                endpoints: endpoints.clone(),
                cluster_id: cluster_id.clone(),
                session_timeout: Duration::from_millis(*session_timeout_ms),
                request_timeout: ETCD_REQUEST_TIMEOUT,
            };
            let inter = config.inter_broker_listener();
            let me = NodeInfo {
                node: config.node_id,
                rack: config.rack.clone(),
                host: inter.advertised_host.clone(),
                port: inter.advertised_port,
                shards: config.shards,
                listeners: config
                    .security
                    .listeners
                    .iter()
                    .map(|l| {
                        (
                            l.name.clone(),
                            (l.advertised_host.clone(), l.advertised_port),
                        )
                    })
                    .collect(),
                controlled_shutdown: false,
            };
            let store = EtcdStore::open(etcd, me)?;
            let lease = store.lease_clock();
            (Box::new(store), lease)
        }
    };
    let mut snapshot = store.load()?;
    add_scram_users(&config.add_scram, store.as_mut(), &mut snapshot)?;
    let config = Arc::new(config);
    let stopping = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicBool::new(false));
    let sequence_base = (now_ms() - crate::limits::PRODUCER_ID_EPOCH_MS).max(0) << 8;
    let producer_ids = Arc::new(AtomicI64::new(sequence_base));
    let (commands, command_rx) = mpsc::channel();
    // Shared by the shards only: when they are all gone the control plane's channel closes. The
    // store's watch holds a weak reference, so news from other nodes wakes the control plane
    // at once without keeping it alive.
    let commands = Arc::new(commands);
    let news = Arc::downgrade(&commands);
    store.on_change(Box::new(move || {
        if let Some(commands) = news.upgrade() {
            commands.send(Command::MetadataChanged).ok();
        }
    }));
    let mut to_shards = Vec::new();
    let mut shards = Vec::new();
    let cpus = allowed_cpus();
    let request_budget = RequestBudget::new(config.queued_max_request_bytes);
    let quota_usage = Arc::new(crate::quotas::usage::QuotaUsage::default());
    // Bound before any shard starts: a port in use is a start error, not a log line.
    let metrics_listener = match config.metrics_listen {
        Some(addr) => Some(
            std::net::TcpListener::bind(addr)
                .map_err(|source| StartError::MetricsListen { addr, source })?,
        ),
        None => None,
    };
    let mut metrics_asks = Vec::new();
    for shard in 0..config.shards {
        let (tx, rx) = fmpsc::unbounded();
        to_shards.push(tx);
        let (ask_tx, asks) = fmpsc::unbounded();
        metrics_asks.push(ask_tx);
        let (config, commands, stopping, failed, producer_ids, lease, request_budget) = (
            config.clone(),
            commands.clone(),
            stopping.clone(),
            failed.clone(),
            producer_ids.clone(),
            lease.clone(),
            request_budget.clone(),
        );
        let quota_usage = quota_usage.clone();
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpus[shard % cpus.len()]))
            .name(&format!("shard-{shard}"))
            .io_memory(SHARD_IO_MEMORY_BYTES)
            .spawn(move || async move {
                let budget = config.read_cache_bytes / config.shards.max(1) as u64;
                iouring_log::set_read_cache_budget(usize::try_from(budget).unwrap_or(usize::MAX));
                if let Err(e) = iouring_log::probe_direct_io(&config.log_dir, shard).await {
                    tracing::warn!(shard, error = %e, dir = %config.log_dir.display(), "probing the data device for polled I/O");
                }
                let ctx = Rc::new(ShardCtx::new(
                    shard,
                    NodeServices {
                        config,
                        commands,
                        producer_ids,
                        stop: StopSignal::new(stopping, failed),
                        lease,
                        request_budget,
                        quota_usage,
                    },
                ));
                run_shard(ctx, rx, asks).await;
            })
            .map_err(|e| StartError::Shard {
                shard,
                reason: e.to_string(),
            })?;
        shards.push(handle);
    }
    drop(commands);
    let controller_stopping = stopping.clone();
    let settings = ControllerSettings {
        node: config.node_id,
        min_insync_replicas: config.min_insync_replicas,
        auto_leader_rebalance: config.auto_leader_rebalance,
        replica_repair_delay: config.replica_repair_delay,
    };
    let controller = std::thread::Builder::new()
        .name("control-plane".into())
        .spawn(move || {
            Controller::new(settings, store, snapshot, to_shards, controller_stopping)
                .run(command_rx)
        })
        .map_err(StartError::ControlPlane)?;
    let metrics = match metrics_listener {
        Some(listener) => {
            let endpoint = crate::metrics::endpoint::Endpoint {
                listener,
                shards: metrics_asks,
                request_budget: request_budget.clone(),
                request_budget_capacity: config.queued_max_request_bytes,
                quota_usage: quota_usage.clone(),
                node_id: config.node_id,
                stopping: stopping.clone(),
            };
            Some(
                std::thread::Builder::new()
                    .name("metrics".into())
                    .spawn(move || endpoint.run())
                    .map_err(StartError::Metrics)?,
            )
        }
        None => None,
    };
    Ok(Node {
        stopping,
        failed,
        shards,
        controller,
        metrics,
    })
}

impl Node {
    /// Stops accepting, lets in-flight requests finish, closes every log, then returns.
    pub fn stop(self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.wait();
    }

    /// Waits until every shard has stopped (after `stopping` was set, or a listener failed);
    /// false when a shard could not serve (the process should exit with a failure).
    #[must_use]
    pub fn wait(self) -> bool {
        for (i, h) in self.shards.into_iter().enumerate() {
            if h.join().is_err() {
                tracing::error!(shard = i, "shard thread panicked");
            }
        }
        if self.controller.join().is_err() {
            tracing::error!("control-plane thread panicked");
        }
        // The endpoint stops with the node (it looks at the flag a shard's failure sets too).
        if let Some(m) = self.metrics {
            if m.join().is_err() {
                tracing::error!("metrics thread panicked");
            }
        }
        !self.failed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The CPUs this process may run on (its affinity mask, e.g. from `taskset`), in order: shard
/// `i` is pinned to the `i`-th of them, so `taskset -c 1 ringlog serve --shards 1` keeps the
/// broker on CPU 1 and leaves CPU 0 to a load generator.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is a plain bit mask; all zeros is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of_val(&set)` bytes into `set`, which we own.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    let cpus: Vec<usize> = if rc == 0 {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE, the number of bits `set` holds.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    } else {
        Vec::new()
    };
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        (0..n).collect()
    } else {
        cpus
    }
}

/// `--add-scram`: each user's credential for its mechanism is created, or replaced if its
/// password differs, before any client connects (a compare-and-swap in a cluster, retried on
/// the new metadata once if another node changed it meanwhile).
fn add_scram_users(
    users: &[crate::security::AddScram],
    store: &mut dyn MetadataStore,
    snapshot: &mut crate::metadata::snapshot::Snapshot,
) -> Result<(), StartError> {
    for attempt in 0..2 {
        let mut next = snapshot.clone();
        for a in users {
            let creds = next.scram.entry(a.user.clone()).or_default();
            let name = a.mechanism.name().to_owned();
            let current = creds
                .get(&name)
                .is_some_and(|c| c.matches_password(a.mechanism, &a.password));
            if !current {
                creds.insert(
                    name,
                    crate::security::scram::ScramCredential::from_password(
                        a.mechanism,
                        &a.password,
                        a.iterations,
                    ),
                );
                tracing::info!(user = %a.user, mechanism = a.mechanism.name(), "--add-scram: credential set");
            }
        }
        if next.scram == snapshot.scram {
            return Ok(());
        }
        match store.save(&next)? {
            crate::metadata::store::Saved::Yes => {
                *snapshot = next;
                return Ok(());
            }
            crate::metadata::store::Saved::Conflict if attempt == 0 => *snapshot = store.load()?,
            crate::metadata::store::Saved::Conflict => {}
        }
    }
    Err(StartError::AddScram(
        "the cluster metadata changed concurrently twice; start again".into(),
    ))
}
