//! Where cluster metadata persists, behind one trait so the controller is the same code over
//! every store: the embedded JSON file of a single node ([`super::embedded`]), or etcd for a
//! cluster ([`super::etcd::store`]), where other nodes change it too.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Calls `wake` (from another thread) whenever [`MetadataStore::poll`] may have news: a
    /// cluster store's watch saw other nodes' changes. Stores without it are polled on a timer.
    fn on_change(&mut self, wake: Box<dyn Fn() + Send>) {
        let _ = wake;
    }
    /// Every shard applied the last snapshot this store handed out (through `load` or `poll`):
    /// a cluster store lets a newly registered node lead from here on.
    fn shards_applied(&mut self) {}
    /// The live nodes replicas may be placed on; `None`: this node alone (its own metadata).
    fn live_nodes(&mut self) -> Option<Vec<NodeShards>> {
        None
    }
    /// The nodes an ISR may take in, by broker epoch: registered and not in controlled
    /// shutdown; `None`: this node alone.
    fn isr_eligible(&mut self) -> Option<BTreeMap<crate::ids::NodeId, i64>> {
        None
    }
    /// Saves as [`MetadataStore::save`] does, and only if the registrations of `brokers` are
    /// still as last read (none registered again, none entered controlled shutdown since):
    /// an ISR addition is decided on them.
    fn save_guarded(
        &mut self,
        snapshot: &Snapshot,
        brokers: &BTreeSet<crate::ids::NodeId>,
    ) -> Result<Saved, StoreError> {
        let _ = brokers;
        self.save(snapshot)
    }
    /// This node begins its controlled shutdown: from now on the cluster takes it into no ISR
    /// and moves no leadership to it. Saved before the node moves its leadership away.
    fn begin_controlled_shutdown(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}
