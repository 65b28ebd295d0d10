//! Errors that reach a client as Kafka error codes, in one place.
//!
//! A request refused for one partition, topic or group is a [`Refused`]: the Kafka error code
//! and a message for the client (sent in responses that carry one, logged otherwise). Handlers
//! build responses from it; services (partitions, the group coordinator, the control plane)
//! return it and never build responses themselves.

use kafka_protocol::ResponseError;

/// A request refused: Kafka's error code and a message for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub error: ResponseError,
    pub message: String,
    /// KIP-467: the records of a produced batch that made it refused, by their index in the
    /// batch (Produce v8+ answers them; clients fail those records and may retry the rest).
    pub record_errors: Vec<RecordError>,
}

/// One record of a produced batch that is refused, and why (Kafka's `RecordError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

impl std::fmt::Display for RecordError {
    /// As Kafka's `RecordError.toString` (the partition's message lists up to three).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RecordError(batchIndex={}, message='{}')",
            self.batch_index, self.message
        )
    }
}

impl Refused {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Refused {
        Refused {
            error,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.error, self.message)
    }
}

impl std::error::Error for Refused {}

/// A request the broker could not answer at all: the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("encoding the response: {0}")]
    Encode(String),
    #[error("no handler for {0}")]
    Unhandled(String),
}

/// The node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("creating log.dirs {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("loading the cluster metadata: {0}")]
    Metadata(#[from] crate::metadata::store::StoreError),
    #[error("joining the cluster through etcd: {0}")]
    Etcd(#[from] crate::metadata::etcd::EtcdError),
    #[error("starting shard {shard}: {reason} (is ulimit -l at least 512 KiB?)")]
    Shard { shard: usize, reason: String },
    #[error("starting the control plane: {0}")]
    ControlPlane(#[source] std::io::Error),
    #[error("metrics.listen {addr}: cannot listen: {source}")]
    MetricsListen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the metrics endpoint: {0}")]
    Metrics(#[source] std::io::Error),
    #[error("--add-scram: {0}")]
    AddScram(String),
}
