//! Cluster metadata on etcd (`metadata.store=etcd`): the control-plane thread's view of the
//! coordination store. etcd is the consensus; nothing here votes.
//!
//! What it owns (keys under `/ringlog/<cluster.id>/`, see [`keys`]):
//! - [`session`]: a broker's registration, `brokers/<node>`, under a lease kept alive in the
//!   background; the broker epoch is the key's create revision. The broker's own view of its
//!   lease ends *before* etcd's (measured from when each keep-alive was sent), so a broker that
//!   believes it holds its lease always does: it stops leading as soon as that is in doubt.
//! - [`election`]: the one controller, elected with etcd's election API under the session's
//!   lease; its election key's create revision is the controller epoch, and every controller
//!   write is a transaction that holds only while that key still exists with that revision.
//! - [`partitions`]: partition states (`partitions/<topic>/<p>`), changed only by compare-and-swap
//!   on the key's mod revision, and fenced by the controller epoch.
//! - [`watch`]: every node loads the metadata at one revision and then applies every later
//!   change in revision order, from a watch that resumes where it stopped.
//! - [`store`]: the control plane's `MetadataStore` over all of the above: topics under
//!   `topics/<name>`, written by compare-and-swap, the live nodes from the registrations.
//! - [`liveness`]: the elected controller revokes the lease of a node whose listener refuses
//!   connections (its process is gone) instead of waiting for etcd to expire it.
//!
//! Blocking API: it runs its own tokio runtime (the shards never see it). It must not touch
//! shard state or logs; the control plane turns what it reads into snapshots for the shards.

pub mod election;
pub mod keys;
pub mod liveness;
pub mod partitions;
pub mod session;
pub mod store;
pub mod watch;

use crate::ids::NodeId;
use crate::limits::ETCD_KEEP_ALIVE_INTERVAL;
use std::sync::Arc;
use std::time::Duration;

pub use election::ControllerLease;
pub use partitions::{CasOutcome, PartitionRecord};
pub use session::BrokerSession;
pub use watch::{Doorbell, MetadataEvent, MetadataWatch};

/// How to reach etcd and who this node is.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// `metadata.etcd.endpoints`: `http://host:port`, one or more.
    pub endpoints: Vec<String>,
    /// `cluster.id`: the key prefix `/ringlog/<cluster.id>/`.
    pub cluster_id: String,
    /// `broker.session.timeout.ms` (Kafka's name): the lease TTL, rounded up to whole seconds
    /// (etcd's unit).
    pub session_timeout: Duration,
    /// How long one etcd call may take before it fails (etcd unreachable).
    pub request_timeout: Duration,
}

/// An etcd operation failed: what it was doing and why.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd at {endpoints:?}: {op}: {source}")]
    Etcd {
        op: &'static str,
        endpoints: Vec<String>,
        #[source]
        source: etcd_client::Error,
    },
    #[error("etcd at {endpoints:?}: {op}: no answer within {timeout:?}")]
    Timeout {
        op: &'static str,
        endpoints: Vec<String>,
        timeout: Duration,
    },
    #[error("node {node} is already registered in cluster {cluster} (broker epoch {epoch}): another process runs with this node.id, or the old one's lease has not expired yet")]
    DuplicateRegistration {
        node: NodeId,
        cluster: String,
        epoch: i64,
    },
    #[error("the broker's lease on etcd is lost (it expired or was revoked)")]
    LeaseLost,
    #[error("metadata at {key} is not valid: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("starting the etcd client runtime: {0}")]
    Runtime(std::io::Error),
}

/// The connection every part shares: one client on one runtime (and a second one for the one
/// call that waits as long as it must, the controller campaign).
#[derive(Clone)]
pub struct Etcd {
    inner: Arc<Inner>,
}

struct Inner {
    /// Always `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
    client: etcd_client::Client,
    /// Without the request timeout: etcd's Campaign answers only once elected, and a campaign
    /// the client gives up on is resigned by etcd (its key deleted; a new call writes it again),
    /// so with a timeout every waiting candidate wrote etcd twice per timeout, each write an
    /// fsync of etcd's log. HTTP/2 keep-alive still ends the call when etcd stops answering.
    waiting_client: etcd_client::Client,
    config: EtcdConfig,
}

impl Drop for Inner {
    /// The last handle may be dropped by a task on the runtime itself (an aborted keep-alive or
    /// watch): shut it down without waiting, which is allowed from inside it.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Etcd {
    /// Connects to `config.endpoints` (fails after `request_timeout` if none answers).
    pub fn connect(config: EtcdConfig) -> Result<Etcd, EtcdError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ringlog-etcd")
            .enable_all()
            .build()
            .map_err(EtcdError::Runtime)?;
        let waiting = etcd_client::ConnectOptions::new()
            .with_connect_timeout(config.request_timeout)
            .with_keep_alive(ETCD_KEEP_ALIVE_INTERVAL, config.request_timeout);
        let options = waiting.clone().with_timeout(config.request_timeout);
        let endpoints = config.endpoints.clone();
        let (client, waiting_client) = runtime
            .block_on(async {
                let connect = etcd_client::Client::connect(&endpoints, Some(options));
                let mut client = tokio::time::timeout(config.request_timeout, connect)
                    .await
                    .map_err(|_| "connect")?
                    .map_err(|_| "connect")?;
                // A client connects lazily: ask for the status to know etcd answers.
                tokio::time::timeout(config.request_timeout, client.status())
                    .await
                    .map_err(|_| "status")?
                    .map_err(|_| "status")?;
                let connect = etcd_client::Client::connect(&endpoints, Some(waiting));
                let waiting_client = tokio::time::timeout(config.request_timeout, connect)
                    .await
                    .map_err(|_| "connect")?
                    .map_err(|_| "connect")?;
                Ok::<_, &'static str>((client, waiting_client))
            })
            .map_err(|op| EtcdError::Timeout {
                op,
                endpoints: endpoints.clone(),
                timeout: config.request_timeout,
            })?;
        Ok(Etcd {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                client,
                waiting_client,
                config,
            }),
        })
    }

    pub fn config(&self) -> &EtcdConfig {
        &self.inner.config
    }

    fn client(&self) -> etcd_client::Client {
        self.inner.client.clone()
    }

    /// The client for calls that wait without a deadline (see [`Inner::waiting_client`]).
    fn waiting_client(&self) -> etcd_client::Client {
        self.inner.waiting_client.clone()
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.inner
            .runtime
            .as_ref()
            .expect("the runtime lives as long as the handles")
    }

    /// Runs one etcd call to completion within the request timeout.
    fn call<T, F>(&self, op: &'static str, f: F) -> Result<T, EtcdError>
    where
        F: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let timeout = self.inner.config.request_timeout;
        let endpoints = &self.inner.config.endpoints;
        self.runtime()
            .block_on(async { tokio::time::timeout(timeout, f).await })
            .map_err(|_| EtcdError::Timeout {
                op,
                endpoints: endpoints.clone(),
                timeout,
            })?
            .map_err(|source| EtcdError::Etcd {
                op,
                endpoints: endpoints.clone(),
                source,
            })
    }

    fn keys(&self) -> keys::Keys {
        keys::Keys::new(&self.inner.config.cluster_id)
    }
}
