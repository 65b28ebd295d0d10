//! The Kafka protocol server of a shard: request framing and decoding, connections (pipelined
//! produces, answers in order), response encoding, zero-copy sends, authentication (TLS principals, SASL).

pub mod authenticate;
pub mod budget;
pub mod connection;
pub mod frame;
pub mod frame_memory;
pub mod response;
