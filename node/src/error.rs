//! Errors that reach a client as Kafka error codes, in one place.
//!
//! A request refused for one partition, topic or group is a [`Refused`]: the Kafka error code
//! and a message for the client (sent in responses that carry one, logged otherwise). Handlers
//! build responses from it; services (partitions, the group coordinator, the control plane)
//! return it and never build responses themselves.

use kafka_protocol::ResponseError;

/// A request refused: Kafka's error code and a message for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub error: ResponseError,
    pub message: String,
}

impl Refused {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Refused {
        Refused {
            error,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.error, self.message)
    }
}

impl std::error::Error for Refused {}
