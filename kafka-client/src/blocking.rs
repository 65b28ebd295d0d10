//! A blocking transport: one TCP connection split into a writing half ([`Sender`]) and a
//! reading half ([`Receiver`]), so one thread can keep several requests in flight while another
//! reads the answers (pipelining, as real producers do). [`call`] is one request and its answer
//! on a fresh connection.
//!
//! Over TLS the two halves share one rustls connection behind a mutex: the writer encrypts
//! under the lock and writes the records to the socket after it, the reader reads the socket
//! without the lock and decrypts under it, so neither blocks the other on the network. Only
//! the writer writes to the socket, which keeps TLS records in the order they were sealed.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::{Decodable, Encodable};
use rustls::ClientConnection;

use crate::codec::{decode, request_frame, response_body, ClientError};
use crate::security::{
    ClientSecurity, SaslCredentials, SaslExchange, SASL_AUTHENTICATE_VERSION,
    SASL_HANDSHAKE_VERSION,
};

/// The writing half of a connection.
pub struct Sender {
    wire: WriteHalf,
    addr: String,
    client_id: &'static str,
    next_correlation_id: i32,
}

/// The reading half of a connection.
pub struct Receiver {
    wire: ReadHalf,
    addr: String,
}

enum WriteHalf {
    Plain(TcpStream),
    Tls {
        tls: Arc<Mutex<ClientConnection>>,
        socket: TcpStream,
        sealed: Vec<u8>,
    },
}

enum ReadHalf {
    Plain(TcpStream),
    Tls {
        tls: Arc<Mutex<ClientConnection>>,
        socket: TcpStream,
        /// Bytes read from the socket not yet handed to rustls.
        raw: Vec<u8>,
        raw_start: usize,
        eof: bool,
    },
}

/// How to connect.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Sent as the request header's client id.
    pub client_id: &'static str,
    /// How long a read may wait for the broker (`None`: forever).
    pub read_timeout: Option<Duration>,
}

const TLS_READ_CHUNK: usize = 64 * 1024;

fn tls_error(e: rustls::Error) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, e)
}

/// Connects to `addr` (`host:port`), then runs TLS and SASL as `security` says.
pub fn connect(
    addr: &str,
    options: ConnectOptions,
    security: &ClientSecurity,
) -> Result<(Sender, Receiver), ClientError> {
    let (mut sender, mut receiver) = connect_wire(addr, options, security)?;
    if let Some(credentials) = &security.sasl {
        authenticate(&mut sender, &mut receiver, credentials)?;
    }
    Ok((sender, receiver))
}

/// TCP, and TLS when `security` says.
fn connect_wire(
    addr: &str,
    options: ConnectOptions,
    security: &ClientSecurity,
) -> Result<(Sender, Receiver), ClientError> {
    let io = |source| ClientError::Io {
        addr: addr.to_owned(),
        source,
    };
    let mut stream = TcpStream::connect(addr).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    stream.set_read_timeout(options.read_timeout).map_err(io)?;
    let reader = stream.try_clone().map_err(io)?;
    let (write, read) = match &security.tls {
        None => (WriteHalf::Plain(stream), ReadHalf::Plain(reader)),
        Some(config) => {
            let name = ClientSecurity::server_name(addr)?;
            let mut conn = ClientConnection::new(config.clone(), name)
                .map_err(|e| ClientError::Authentication(format!("{addr}: TLS: {e}")))?;
            conn.set_buffer_limit(None);
            while conn.is_handshaking() {
                conn.complete_io(&mut stream).map_err(|e| {
                    ClientError::Authentication(format!("{addr}: TLS handshake: {e}"))
                })?;
            }
            let tls = Arc::new(Mutex::new(conn));
            (
                WriteHalf::Tls {
                    tls: tls.clone(),
                    socket: stream,
                    sealed: Vec::new(),
                },
                ReadHalf::Tls {
                    tls,
                    socket: reader,
                    raw: Vec::new(),
                    raw_start: 0,
                    eof: false,
                },
            )
        }
    };
    let sender = Sender {
        wire: write,
        addr: addr.to_owned(),
        client_id: options.client_id,
        next_correlation_id: 0,
    };
    let receiver = Receiver {
        wire: read,
        addr: addr.to_owned(),
    };
    Ok((sender, receiver))
}

/// The SASL exchange on a connection; returns when to run it again (KIP-368), if the broker
/// limits the session.
fn authenticate(
    sender: &mut Sender,
    receiver: &mut Receiver,
    credentials: &SaslCredentials,
) -> Result<Option<Instant>, ClientError> {
    let mut exchange = SaslExchange::new(credentials);
    let resp: SaslHandshakeResponse = call_on(
        sender,
        receiver,
        ApiKey::SaslHandshake,
        SASL_HANDSHAKE_VERSION,
        &exchange.handshake_request(),
    )?;
    exchange.handshake_answer(&resp)?;
    let mut req = Some(exchange.first_request());
    while let Some(r) = req {
        let resp: SaslAuthenticateResponse = call_on(
            sender,
            receiver,
            ApiKey::SaslAuthenticate,
            SASL_AUTHENTICATE_VERSION,
            &r,
        )?;
        req = exchange.answer(&resp)?;
    }
    Ok(exchange.renew_at())
}

impl WriteHalf {
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            WriteHalf::Plain(s) => s.write_all(data),
            WriteHalf::Tls {
                tls,
                socket,
                sealed,
            } => {
                sealed.clear();
                {
                    let mut conn = tls.lock().expect("the TLS state is not poisoned");
                    // No buffer limit (set at connect): rustls takes it all at once.
                    conn.writer().write_all(data)?;
                    // Sealed with anything the reader's decrypting queued (alerts, key updates).
                    while conn.wants_write() {
                        conn.write_tls(sealed)?;
                    }
                }
                socket.write_all(sealed)
            }
        }
    }

    fn shutdown(&self) {
        let s = match self {
            WriteHalf::Plain(s) | WriteHalf::Tls { socket: s, .. } => s,
        };
        // Already closed by the peer is fine: the reader ends either way.
        s.shutdown(std::net::Shutdown::Both).ok();
    }
}

impl Read for ReadHalf {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (tls, socket, raw, raw_start, eof) = match self {
            ReadHalf::Plain(s) => return s.read(buf),
            ReadHalf::Tls {
                tls,
                socket,
                raw,
                raw_start,
                eof,
            } => (tls, socket, raw, raw_start, eof),
        };
        loop {
            {
                let mut conn = tls.lock().expect("the TLS state is not poisoned");
                match conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if *raw_start < raw.len() {
                    let mut pending = &raw[*raw_start..];
                    *raw_start += conn.read_tls(&mut pending)?;
                    conn.process_new_packets().map_err(tls_error)?;
                    continue;
                }
                if *eof {
                    // The peer closed: rustls tells a close_notify (Ok(0)) from a cut.
                    conn.read_tls(&mut &[][..])?;
                    conn.process_new_packets().map_err(tls_error)?;
                    return match conn.reader().read(buf) {
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            Err(ErrorKind::UnexpectedEof.into())
                        }
                        other => other,
                    };
                }
            }
            raw.resize(TLS_READ_CHUNK, 0);
            let n = socket.read(raw)?;
            raw.truncate(n);
            *raw_start = 0;
            *eof = n == 0;
        }
    }
}

impl Sender {
    /// Closes both directions, so the reading half sees the end of the stream.
    pub fn shutdown(&self) {
        self.wire.shutdown();
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
        self.wire
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
        let addr = &self.addr;
        let wire = &mut self.wire;
        let mut read = |buf: &mut [u8]| {
            wire.read_exact(buf).map_err(|source| ClientError::Io {
                addr: addr.clone(),
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

fn call_on<Req: Encodable, Resp: Decodable>(
    sender: &mut Sender,
    receiver: &mut Receiver,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    let expected = sender.send(api, version, request)?;
    let (got, resp) = receiver.recv_decoded(api, version)?;
    if got != expected {
        return Err(ClientError::OutOfOrder { api, expected, got });
    }
    Ok(resp)
}

/// A connection used one request at a time; it renews a SASL session with a lifetime before
/// it ends (the split halves of [`connect`] do not: a pipelined connection is closed by the
/// broker when its session ends).
pub struct Connection {
    sender: Sender,
    receiver: Receiver,
    sasl: Option<SaslCredentials>,
    reauthenticate_at: Option<Instant>,
}

impl Connection {
    pub fn connect(
        addr: &str,
        options: ConnectOptions,
        security: &ClientSecurity,
    ) -> Result<Connection, ClientError> {
        let (sender, receiver) = connect_wire(addr, options, security)?;
        let mut c = Connection {
            sender,
            receiver,
            sasl: security.sasl.clone(),
            reauthenticate_at: None,
        };
        c.authenticate()?;
        Ok(c)
    }

    fn authenticate(&mut self) -> Result<(), ClientError> {
        if let Some(credentials) = &self.sasl {
            self.reauthenticate_at =
                authenticate(&mut self.sender, &mut self.receiver, credentials)?;
        }
        Ok(())
    }

    /// Sends a request and reads its response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        if self
            .reauthenticate_at
            .is_some_and(|at| Instant::now() >= at)
        {
            self.authenticate()?;
        }
        call_on(&mut self.sender, &mut self.receiver, api, version, request)
    }
}

/// One request and its response on a fresh connection.
pub fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    options: ConnectOptions,
    security: &ClientSecurity,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, ClientError> {
    Connection::connect(addr, options, security)?.call(api, version, request)
}
