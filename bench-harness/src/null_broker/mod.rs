//! `ringlog-bench null-broker`: a Kafka-protocol endpoint that keeps records in memory and does
//! nothing else — no storage, no validation beyond the batch framing, no replication — so a
//! benchmark run against it measures the client, the loopback network and the machine (thread
//! wake-ups on this virtual machine's vCPUs included): the floor that a broker's own share of a
//! latency percentile is stated against (`perf/README.md`).
//!
//! It serves what `ringlog-bench` and a plain Kafka client need to produce and consume:
//! ApiVersions, Metadata, CreateTopics, DeleteTopics, Produce (acks 0, 1 and -1 alike: answered
//! once the records are in memory) and Fetch (no fetch sessions: every answer has session id 0,
//! which asks a client for full requests; long polls wake on the next produce). It is one
//! broker (node id 0) that leads every partition. Other APIs (consumer groups, offsets) are not
//! advertised; a request for one closes its connection with a line on stderr.
//!
//! One thread per connection with blocking sockets: the kernel wakes the thread a response is
//! for, with no executor between.

pub mod memory_log;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use memory_log::MemoryLog;

mod handlers;

/// The largest request frame read (Kafka's `socket.request.max.bytes` default, 100 MiB).
pub const REQUEST_BYTES_MAX: usize = 100 << 20;
/// The default bound on the records kept over all partitions.
pub const RETAINED_BYTES_DEFAULT: usize = 1 << 30;

/// What the null broker serves and how it calls itself in Metadata.
pub struct NullBrokerOptions {
    pub listen: SocketAddr,
    /// The host Metadata gives for the broker (the listen address's IP when `None`).
    pub advertised_host: Option<String>,
    /// The bytes of records kept over all partitions; the oldest go first.
    pub retained_bytes_max: usize,
}

/// Why a connection ended other than by the client closing it.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("request of {0} bytes is larger than {REQUEST_BYTES_MAX}")]
    TooLarge(usize),
    #[error("request header: {0}")]
    Header(String),
    #[error("API key {key} v{version} is not served by the null broker")]
    NotServed { key: i16, version: i16 },
    #[error("decoding {api:?} v{version}: {reason}")]
    Decode {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("encoding the {api:?} v{version} response: {reason}")]
    Encode {
        api: ApiKey,
        version: i16,
        reason: String,
    },
}

/// Binds `opts.listen` and serves until the process is killed. Returns only if binding fails.
pub fn serve(opts: &NullBrokerOptions) -> std::io::Result<()> {
    let listener = TcpListener::bind(opts.listen)?;
    let local = listener.local_addr()?;
    let endpoint = Arc::new(handlers::Endpoint {
        host: opts
            .advertised_host
            .clone()
            .unwrap_or_else(|| local.ip().to_string()),
        port: i32::from(local.port()),
        log: MemoryLog::new(opts.retained_bytes_max),
    });
    eprintln!("ringlog-bench null-broker: listening on {local}");
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                eprintln!("ringlog-bench null-broker: accept: {e}");
                continue;
            }
        };
        let endpoint = endpoint.clone();
        std::thread::spawn(move || {
            let peer = stream.peer_addr().ok();
            if let Err(e) = serve_connection(&endpoint, stream) {
                eprintln!("ringlog-bench null-broker: connection from {peer:?} closed: {e}");
            }
        });
    }
    Ok(())
}

/// Answers the connection's requests in order until the client closes it.
fn serve_connection(
    endpoint: &handlers::Endpoint,
    mut stream: TcpStream,
) -> Result<(), ConnectionError> {
    stream.set_nodelay(true)?;
    let mut size = [0u8; 4];
    loop {
        match stream.read_exact(&mut size) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let len = i32::from_be_bytes(size);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= REQUEST_BYTES_MAX)
            .ok_or(ConnectionError::TooLarge(len as u32 as usize))?;
        let mut frame = BytesMut::zeroed(len);
        stream.read_exact(&mut frame)?;
        if let Some(response) = answer(endpoint, frame.freeze())? {
            stream.write_all(&response)?;
        }
    }
}

/// The response frame to one request frame (without its size), or `None` for a Produce with
/// acks=0.
fn answer(endpoint: &handlers::Endpoint, frame: Bytes) -> Result<Option<Bytes>, ConnectionError> {
    if frame.len() < 4 {
        return Err(ConnectionError::Header(format!(
            "{} bytes, no API key and version",
            frame.len()
        )));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = handlers::served(key, version).ok_or(ConnectionError::NotServed { key, version })?;
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, api.request_header_version(version))
        .map_err(|e| ConnectionError::Header(e.to_string()))?;
    let Some(response) = handlers::handle(endpoint, api, version, body)? else {
        return Ok(None);
    };
    let mut out = BytesMut::with_capacity(64 + response.len());
    out.extend_from_slice(&[0; 4]);
    let mut rh = ResponseHeader::default();
    rh.correlation_id = header.correlation_id;
    rh.encode(&mut out, api.response_header_version(version))
        .map_err(|e| ConnectionError::Encode {
            api,
            version,
            reason: e.to_string(),
        })?;
    out.extend_from_slice(&response);
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(Some(out.freeze()))
}

/// Decodes a request body of `api` v`version`.
fn decode<T: Decodable>(api: ApiKey, version: i16, mut body: Bytes) -> Result<T, ConnectionError> {
    T::decode(&mut body, version).map_err(|e| ConnectionError::Decode {
        api,
        version,
        reason: e.to_string(),
    })
}

/// Encodes a response body.
fn encode<T: Encodable>(api: ApiKey, version: i16, response: &T) -> Result<Bytes, ConnectionError> {
    let mut out = BytesMut::new();
    response
        .encode(&mut out, version)
        .map_err(|e| ConnectionError::Encode {
            api,
            version,
            reason: e.to_string(),
        })?;
    Ok(out.freeze())
}
