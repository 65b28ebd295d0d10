//! The harness's Kafka connections: `kafka_client`'s blocking transport (a writing and a reading
//! half, so producers pipeline) with the harness's client id, no read timeout, and the
//! security `--command-config` gives (TLS, SASL) for every connection of the run.

use std::sync::OnceLock;

use kafka_client::blocking::ConnectOptions;
pub use kafka_client::blocking::{Receiver, Sender};
use kafka_client::security::ClientSecurity;
pub use kafka_client::ClientError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

const OPTIONS: ConnectOptions = ConnectOptions {
    client_id: "ringlog-bench",
    read_timeout: None,
};

static SECURITY: OnceLock<ClientSecurity> = OnceLock::new();

/// The client security was set already (it is set once, before the run).
#[derive(Debug, thiserror::Error)]
#[error("the client security is set once")]
pub struct SecurityAlreadySet;

/// Sets how every connection authenticates (once, before the run; PLAINTEXT without it).
pub fn set_security(security: ClientSecurity) -> Result<(), SecurityAlreadySet> {
    SECURITY.set(security).map_err(|_| SecurityAlreadySet)
}

fn security() -> &'static ClientSecurity {
    SECURITY.get_or_init(ClientSecurity::plaintext)
}

pub fn connect(addr: &str) -> Result<(Sender, Receiver), ClientError> {
    kafka_client::blocking::connect(addr, OPTIONS, security())
}

/// One request and its response on a fresh connection.
pub fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    kafka_client::blocking::call(addr, OPTIONS, security(), api, version, request)
}
