//! Where cluster metadata persists, behind one trait so the controller is the same code over
//! every store: the embedded JSON file of a single node ([`super::embedded`]), or etcd for a
//! cluster ([`super::etcd::store`]), where other nodes change it too.

use super::placement::NodeShards;
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

/// What saving found.
#[derive(Debug, PartialEq, Eq)]
pub enum Saved {
    Yes,
    /// Another node changed the same topics first: nothing was written; reload and decide
    /// again.
    Conflict,
}

/// Persists snapshots for the control plane (its thread may block).
pub trait MetadataStore: Send {
    /// The last saved snapshot, or an empty one.
    fn load(&mut self) -> Result<Snapshot, StoreError>;
    /// Saves `snapshot` durably before returning, unless another node changed what it changes
    /// since this store last read it.
    fn save(&mut self, snapshot: &Snapshot) -> Result<Saved, StoreError>;
    /// What other nodes changed since the last load, save or poll; `None`: nothing.
    fn poll(&mut self) -> Result<Option<Snapshot>, StoreError> {
        Ok(None)
    }
    /// Every shard applied the last snapshot this store handed out (through `load` or `poll`):
    /// a cluster store lets a newly registered node lead from here on.
    fn shards_applied(&mut self) {}
    /// The live nodes replicas may be placed on; `None`: this node alone (its own metadata).
    fn live_nodes(&mut self) -> Option<Vec<NodeShards>> {
        None
    }
}
