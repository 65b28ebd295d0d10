//! The Kafka protocol server of a shard: connections, response encoding, zero-copy sends.

pub mod connection;
pub mod response;
pub mod zero_copy;
