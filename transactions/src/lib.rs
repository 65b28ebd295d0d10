//! `transactions` owns Kafka's transactions as pure code — no I/O, no clock, no sockets: the
//! partition side ([`partition`]: transactions open on a partition, the last stable offset, the
//! aborted transactions a `read_committed` fetch carries and `.txnindex` holds) and the
//! transaction coordinator's state of each `transactional.id` ([`coordinator`]: producer ids
//! and epochs, the states and the transitions InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, the markers' completion and the timeout's abort make). Time comes
//! in as milliseconds, the logs' contents as arguments, so a seeded simulation drives them.
//!
//! It must not touch sockets, Kafka request encoding, files or a `Log`: the broker (`node`)
//! carries the requests, writes the `__transaction_state` records and the control batches the
//! state machines decide, and replays them into these types on load.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod coordinator;
pub mod partition;
pub mod records;

pub use coordinator::{partition_for, Transit, TxnError, TxnMetadata, TxnState, TxnVersion, Txns};
pub use partition::{
    AbortedTxn, Marker, MarkerRefused, PartitionTxns, ProducerId, SnapshotEntry, TxnBatch,
};
