//! `node` will be the broker binary `ringlog` (not built yet; see the issues): shards (one
//! glommio executor per core, each a Kafka broker endpoint), the Kafka protocol server on the
//! `kafka-protocol` crate, topic/partition management, the consumer-group coordinator, cluster
//! metadata (embedded or etcd), configuration and CLI.
//!
//! It wires `iouring-log` and `replication` together and maps their errors to Kafka error
//! codes in one module. It must not reach into a log's files or hand-write protocol codecs.
