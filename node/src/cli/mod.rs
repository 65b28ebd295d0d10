//! The command-line tools of `ringlog` that talk to a running node over the Kafka protocol:
//! `ringlog topic ...` ([`topic`], like `kafka-topics.sh`) and `ringlog group ...` ([`group`],
//! like `kafka-consumer-groups.sh`), `ringlog user ...` ([`user`], SCRAM users, like
//! `kafka-configs.sh --entity-type users`), `ringlog cluster status` ([`cluster`]) and the node
//! lifecycle's `ringlog cluster rebalance | decommission | remove-node` ([`moves`]), through one
//! blocking admin client ([`admin_client`]).

pub mod admin_client;
pub mod cluster;
pub mod group;
pub mod moves;
pub mod topic;
pub mod user;

use kafka_client::ClientError;

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The broker could not be reached or its answer not read.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker refused (a Kafka error code, named).
    #[error("{0}")]
    Refused(String),
    /// The broker answered without the entry asked for.
    #[error("empty {0} response")]
    Empty(&'static str),
    /// The broker's answers do not fit together.
    #[error("{0}")]
    Protocol(String),
    /// The cluster's etcd could not be read.
    #[error(transparent)]
    Etcd(#[from] crate::metadata::etcd::EtcdError),
    /// The command line asked for something impossible.
    #[error("{0}")]
    Invalid(String),
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: Box<CliError>,
    },
}

impl CliError {
    /// This error, prefixed with what was being done.
    pub fn context(self, context: impl Into<String>) -> CliError {
        CliError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}
