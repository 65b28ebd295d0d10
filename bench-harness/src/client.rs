//! A small blocking Kafka client on the `kafka-protocol` crate: one TCP connection, requests
//! written by one thread and responses read by another, so several requests can be in flight
//! (pipelining), as real producers do.

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("encoding or decoding {api:?}: {reason}")]
    Codec { api: ApiKey, reason: String },
    #[error("{0}")]
    Broker(String),
}

/// The writing half of a connection.
pub struct Sender {
    stream: TcpStream,
    addr: String,
    next_correlation_id: i32,
}

/// The reading half of a connection.
pub struct Receiver {
    stream: TcpStream,
    addr: String,
}

pub fn connect(addr: &str) -> Result<(Sender, Receiver), ClientError> {
    let io = |source| ClientError::Io {
        addr: addr.to_owned(),
        source,
    };
    let stream = TcpStream::connect(addr).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    let reader = stream.try_clone().map_err(io)?;
    Ok((
        Sender {
            stream,
            addr: addr.to_owned(),
            next_correlation_id: 0,
        },
        Receiver {
            stream: reader,
            addr: addr.to_owned(),
        },
    ))
}

impl Sender {
    /// Closes both directions, so the reading half sees the end of the stream.
    pub fn shutdown(&self) {
        // Already closed by the peer is fine: the reader ends either way.
        self.stream.shutdown(std::net::Shutdown::Both).ok();
    }

    /// Writes one request; returns its correlation id.
    pub fn send<R: Encodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &R,
    ) -> Result<i32, ClientError> {
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = self.next_correlation_id;
        header.client_id = Some(StrBytes::from_static_str("ringlog-bench"));
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(&[0; 4]);
        header
            .encode(&mut buf, api.request_header_version(version))
            .map_err(|e| ClientError::Codec {
                api,
                reason: e.to_string(),
            })?;
        request
            .encode(&mut buf, version)
            .map_err(|e| ClientError::Codec {
                api,
                reason: e.to_string(),
            })?;
        let len = (buf.len() - 4) as u32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream
            .write_all(&buf)
            .map_err(|source| ClientError::Io {
                addr: self.addr.clone(),
                source,
            })?;
        Ok(self.next_correlation_id)
    }
}

impl Receiver {
    /// Reads one response: its correlation id and body.
    pub fn recv(&mut self, api: ApiKey, version: i16) -> Result<(i32, Bytes), ClientError> {
        let io = |source| ClientError::Io {
            addr: self.addr.clone(),
            source,
        };
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(io)?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream
            .read_exact(&mut body)
            .map_err(|source| ClientError::Io {
                addr: self.addr.clone(),
                source,
            })?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, api.response_header_version(version))
            .map_err(|e| ClientError::Codec {
                api,
                reason: e.to_string(),
            })?;
        Ok((header.correlation_id, body))
    }

    pub fn recv_decoded<T: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
    ) -> Result<(i32, T), ClientError> {
        let (corr, mut body) = self.recv(api, version)?;
        let decoded = T::decode(&mut body, version).map_err(|e| ClientError::Codec {
            api,
            reason: e.to_string(),
        })?;
        Ok((corr, decoded))
    }
}

/// One request and its response on a fresh connection.
pub fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    let (mut tx, mut rx) = connect(addr)?;
    tx.send(api, version, request)?;
    Ok(rx.recv_decoded(api, version)?.1)
}
