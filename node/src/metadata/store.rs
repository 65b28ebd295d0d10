//! Where cluster metadata persists, behind one trait so the controller is the same code over
//! every store: the embedded JSON file of a single node ([`super::embedded`]) today, etcd with
//! replication.

use super::snapshot::Snapshot;

/// A metadata store failed: what it was doing, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{op} {location}: {source}")]
pub struct StoreError {
    pub op: &'static str,
    pub location: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Persists snapshots for the control plane (its thread may block).
pub trait MetadataStore: Send {
    /// The last saved snapshot, or an empty one.
    fn load(&mut self) -> Result<Snapshot, StoreError>;
    /// Saves `snapshot` durably before returning.
    fn save(&mut self, snapshot: &Snapshot) -> Result<(), StoreError>;
}
