//! What the coordinator uses of the shard it runs on — and nothing more: the coordinator
//! depends on this trait, the shard implements it.

use crate::ids::NodeId;
use std::rc::Rc;
use std::sync::Arc;

use crate::config::GroupConfig;
use crate::metadata::Snapshot;
use crate::partition::Partition;
use crate::stop::StopSignal;

pub trait Host {
    /// The shard's index: the coordinator serves groups whose `__consumer_offsets` partition
    /// this shard leads.
    fn shard(&self) -> usize;
    /// The node the shard runs on (`node.id`).
    fn node(&self) -> NodeId;
    /// The `group.*` and `offsets.*` settings.
    fn settings(&self) -> &GroupConfig;
    /// The cluster metadata the shard last applied.
    fn snapshot(&self) -> Arc<Snapshot>;
    /// Partition `p` of `__consumer_offsets`, if this shard leads it and may write to it now.
    fn offsets_partition(&self, p: i32) -> Option<Rc<Partition>>;
    /// The node stopping: waiting joins and syncs give up.
    fn stop(&self) -> &StopSignal;
}
