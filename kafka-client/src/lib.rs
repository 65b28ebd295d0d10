//! A small Kafka client layer on the `kafka-protocol` crate: frames requests, decodes responses,
//! and carries them over a blocking socket ([`blocking`]) or a glommio one (`async_glommio`,
//! feature `glommio`), either one over TLS and SASL as a Kafka client's `security.protocol`
//! says ([`security`]). Requests and responses are `kafka-protocol`'s generated messages; what
//! they mean is the caller's business. See the README for what this crate owns.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "glommio")]
pub mod async_glommio;
pub mod blocking;
pub mod codec;
pub mod scram;
pub mod security;
pub mod tls;

pub use codec::ClientError;
