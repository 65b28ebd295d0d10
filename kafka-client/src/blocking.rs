//! A blocking transport: one TCP connection split into a writing half ([`Sender`]) and a
//! reading half ([`Receiver`]), so one thread can keep several requests in flight while another
//! reads the answers (pipelining, as real producers do). [`call`] is one request and its answer
//! on a fresh connection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::codec::{decode, request_frame, response_body, ClientError};

/// The writing half of a connection.
pub struct Sender {
    stream: TcpStream,
    addr: String,
    client_id: &'static str,
    next_correlation_id: i32,
}

/// The reading half of a connection.
pub struct Receiver {
    stream: TcpStream,
    addr: String,
}

/// How to connect.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Sent as the request header's client id.
    pub client_id: &'static str,
    /// How long a read may wait for the broker (`None`: forever).
    pub read_timeout: Option<Duration>,
}

/// Connects to `addr` (`host:port`).
pub fn connect(addr: &str, options: ConnectOptions) -> Result<(Sender, Receiver), ClientError> {
    let io = |source| ClientError::Io {
        addr: addr.to_owned(),
        source,
    };
    let stream = TcpStream::connect(addr).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    stream.set_read_timeout(options.read_timeout).map_err(io)?;
    let reader = stream.try_clone().map_err(io)?;
    let sender = Sender {
        stream,
        addr: addr.to_owned(),
        client_id: options.client_id,
        next_correlation_id: 0,
    };
    let receiver = Receiver {
        stream: reader,
        addr: addr.to_owned(),
    };
    Ok((sender, receiver))
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
        let frame = request_frame(
            api,
            version,
            self.next_correlation_id,
            self.client_id,
            request,
        )?;
        self.stream
            .write_all(&frame)
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
        let mut len = [0u8; 4];
        let mut read = |buf: &mut [u8]| {
            self.stream
                .read_exact(buf)
                .map_err(|source| ClientError::Io {
                    addr: self.addr.clone(),
                    source,
                })
        };
        read(&mut len)?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        read(&mut body)?;
        response_body(api, version, Bytes::from(body))
    }

    /// Reads and decodes one response.
    pub fn recv_decoded<T: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
    ) -> Result<(i32, T), ClientError> {
        let (correlation_id, body) = self.recv(api, version)?;
        Ok((correlation_id, decode(api, version, body)?))
    }
}

/// A connection used one request at a time.
pub struct Connection {
    sender: Sender,
    receiver: Receiver,
}

impl Connection {
    pub fn connect(addr: &str, options: ConnectOptions) -> Result<Connection, ClientError> {
        let (sender, receiver) = connect(addr, options)?;
        Ok(Connection { sender, receiver })
    }

    /// Sends a request and reads its response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let expected = self.sender.send(api, version, request)?;
        let (got, resp) = self.receiver.recv_decoded(api, version)?;
        if got != expected {
            return Err(ClientError::OutOfOrder { api, expected, got });
        }
        Ok(resp)
    }
}

/// One request and its response on a fresh connection.
pub fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    options: ConnectOptions,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    Connection::connect(addr, options)?.call(api, version, request)
}
