//! The Kafka protocol server of a shard: request framing and decoding, connections (pipelined
//! produces, answers in order), response encoding, zero-copy sends.

pub mod connection;
pub mod frame;
pub mod response;
