//! The harness's Kafka connections: `kafka_client`'s blocking transport (a writing and a reading
//! half, so producers pipeline) with the harness's client id and no read timeout.

use kafka_client::blocking::ConnectOptions;
pub use kafka_client::blocking::{Receiver, Sender};
pub use kafka_client::ClientError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

const OPTIONS: ConnectOptions = ConnectOptions {
    client_id: "ringlog-bench",
    read_timeout: None,
};

pub fn connect(addr: &str) -> Result<(Sender, Receiver), ClientError> {
    kafka_client::blocking::connect(addr, OPTIONS)
}

/// One request and its response on a fresh connection.
pub fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    kafka_client::blocking::call(addr, OPTIONS, api, version, request)
}
