//! `node` is the broker `ringlog`: shards (one glommio executor per core, each a Kafka broker
//! endpoint), the Kafka protocol server on the `kafka-protocol` crate, topic/partition
//! management, the group coordinator and committed offsets (`group`), the cluster metadata
//! (embedded, or on etcd), replication (`replica/`: follower fetchers and their fetch
//! session, the leader's side of a follower's fetch, ISR proposals; each replica's role in
//! `partition/replica.rs` driving the `replication` crate's state machines; elections in
//! `metadata/controller.rs`; a leader takes writes only under its etcd lease,
//! `metadata/lease.rs`; a dead node's lease revoked early, `metadata/etcd/liveness.rs`),
//! configuration and the CLI, and who may do what (`security/`: listeners with Kafka's security
//! protocols, TLS, SASL PLAIN/SCRAM, Kafka's ACL rules; enforced per request in
//! `handlers/authorized.rs`).
//!
//! It wires `iouring-log` and `replication` to the network and maps their errors to Kafka
//! error codes in the handlers. It must not reach into a log's files, must not decide
//! replication rules itself (they live, pure, in `replication`), and must not hand-write
//! protocol codecs (the one exception: the `__consumer_offsets` record layouts in
//! `group/records.rs`, which are Kafka-internal and not in `kafka-protocol`, and
//! `__transaction_state`'s, which live in the `transactions` crate). The transaction
//! coordinator (`txn_coordinator/`) hosts the `transactions` crate's state machines on the
//! shards leading `__transaction_state`; partitions keep their side (`partition/txns.rs`). The log cleaner (compaction) lives in `iouring-log`; the
//! shard schedules it (`shard/cleaner.rs`). A shard's task queues: requests (the default),
//! maintenance, the log cleaner and the stall probe (`shard/stall_probe.rs`, which counts the
//! time a due task could not run).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cli;
pub mod config;
pub mod error;
pub mod group_coordinator;
pub mod handlers;
pub mod ids;
pub mod limits;
pub mod log_output;
pub mod metadata;
pub mod metrics;
pub mod partition;
pub mod quotas;
pub mod replica;
pub mod security;
pub mod server;
pub mod shard;
pub mod signals;
pub mod start;
pub mod stop;
pub mod topic_config;
pub mod txn_coordinator;
