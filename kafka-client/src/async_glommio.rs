//! An async transport on glommio, for code that runs on a shard: one connection, one request at
//! a time ([`Connection::call`]); the caller pipelines by keeping several connections. Never
//! blocks the reactor. TLS is futures-rustls over glommio's stream; a SASL session with a
//! lifetime is renewed on the connection before it ends (KIP-368).

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::client::TlsStream;
use futures_rustls::TlsConnector;
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::codec::{decode, request_frame, response_body, ClientError};
use crate::security::{
    ClientSecurity, SaslCredentials, SaslExchange, SASL_AUTHENTICATE_VERSION,
    SASL_HANDSHAKE_VERSION,
};
use std::sync::{Arc, Mutex};
use std::time::Instant;

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

pub struct Connection {
    stream: Stream,
    addr: String,
    client_id: &'static str,
    next_correlation_id: i32,
    /// SASL credentials, and when the session must be renewed.
    sasl: Option<SaslCredentials>,
    reauthenticate_at: Option<Instant>,
    first_read: FirstRead,
}

/// How much the first read of a response may take: its length prefix and, for most responses,
/// the whole body — one `recv` where reading the prefix alone and then the body took two.
const FIRST_READ_BYTES: usize = 64 * 1024;

/// Smallest response body handed to the caller in its first-read buffer rather than copied:
/// at least a quarter of the buffer is then in use.
const HANDED_OVER_MIN_BYTES: usize = FIRST_READ_BYTES / 4;

/// Response buffers a connection keeps for reuse (one is in use per request; a caller may
/// still hold the previous response's bytes).
const FIRST_READ_POOL_MAX: usize = 4;

/// The buffers of responses' first reads, 4 KiB aligned (the kernel copies into them;
/// unaligned buffers made kernel copies much slower here) and reused: a response that fits its
/// first read is handed to the caller in its buffer, not copied out of it, and the buffer comes
/// back to the pool when the caller drops the last view of it.
#[derive(Default)]
struct FirstRead {
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl FirstRead {
    fn take(&self) -> AlignedRead {
        let buf = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(|| vec![0u8; FIRST_READ_BYTES + 4096]);
        let start = buf.as_ptr().align_offset(4096);
        AlignedRead {
            buf,
            start,
            pool: self.pool.clone(),
        }
    }
}

/// One first-read buffer: `buf[start..start + FIRST_READ_BYTES]` is the aligned part.
struct AlignedRead {
    buf: Vec<u8>,
    start: usize,
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl AlignedRead {
    fn get(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + FIRST_READ_BYTES]
    }

    /// `len` bytes from `from` (within the aligned part) as `Bytes`, without copying.
    fn into_bytes(self, from: usize, len: usize) -> Bytes {
        let at = self.start + from;
        Bytes::from_owner(self).slice(at..at + len)
    }
}

impl AsRef<[u8]> for AlignedRead {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for AlignedRead {
    fn drop(&mut self) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < FIRST_READ_POOL_MAX {
            pool.push(std::mem::take(&mut self.buf));
        }
    }
}

/// Writes a request frame and reads the response frame after it. One request is in flight on
/// the connection, so nothing may follow the response: bytes past it are an error.
async fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    frame: &[u8],
    first_read: &FirstRead,
) -> std::io::Result<Bytes> {
    s.write_all(frame).await?;
    s.flush().await?;
    let mut read = first_read.take();
    let first = read.get();
    let mut n = 0;
    while n < 4 {
        match s.read(&mut first[n..]).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            got => n += got,
        }
    }
    let len = u32::from_be_bytes([first[0], first[1], first[2], first[3]]) as usize;
    let got = n - 4;
    if got > len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{got} bytes after a response of {len}: bytes answering no request"),
        ));
    }
    if 4 + len <= FIRST_READ_BYTES {
        // The rest of the body fits the buffer: read it there. A large body (a follower's
        // fetch of records) is handed over in the buffer; a small one is copied out, so
        // what a caller keeps of it (names in a metadata answer) does not hold 64 KiB.
        s.read_exact(&mut first[n..4 + len]).await?;
        if len >= HANDED_OVER_MIN_BYTES {
            return Ok(read.into_bytes(4, len));
        }
        return Ok(Bytes::copy_from_slice(&first[4..4 + len]));
    }
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(&first[4..n]);
    drop(read);
    body.resize(len, 0);
    s.read_exact(&mut body[got..]).await?;
    Ok(Bytes::from(body))
}

impl Connection {
    /// Connects to `addr` (`host:port`), then runs TLS and SASL as `security` says.
    pub async fn connect(
        addr: &str,
        client_id: &'static str,
        security: &ClientSecurity,
    ) -> Result<Connection, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_owned(),
            source,
        };
        let stream = TcpStream::connect(addr).await.map_err(|e| io(e.into()))?;
        stream.set_nodelay(true).map_err(|e| io(e.into()))?;
        let stream = match &security.tls {
            None => Stream::Plain(stream),
            Some(config) => {
                let name = ClientSecurity::server_name(addr)?;
                let tls = TlsConnector::from(config.clone())
                    .connect(name, stream)
                    .await
                    .map_err(|e| {
                        ClientError::Authentication(format!("{addr}: TLS handshake: {e}"))
                    })?;
                Stream::Tls(Box::new(tls))
            }
        };
        let mut conn = Connection {
            stream,
            addr: addr.to_owned(),
            client_id,
            next_correlation_id: 0,
            sasl: security.sasl.clone(),
            reauthenticate_at: None,
            first_read: FirstRead::default(),
        };
        conn.authenticate().await?;
        Ok(conn)
    }

    /// The SASL exchange (when the connection has credentials), at connect and again before
    /// the session the broker gave ends.
    async fn authenticate(&mut self) -> Result<(), ClientError> {
        let Some(credentials) = self.sasl.clone() else {
            return Ok(());
        };
        let mut exchange = SaslExchange::new(&credentials);
        let resp: SaslHandshakeResponse = self
            .exchange(
                ApiKey::SaslHandshake,
                SASL_HANDSHAKE_VERSION,
                &exchange.handshake_request(),
            )
            .await?;
        exchange.handshake_answer(&resp)?;
        let mut req = Some(exchange.first_request());
        while let Some(r) = req {
            let resp: SaslAuthenticateResponse = self
                .exchange(ApiKey::SaslAuthenticate, SASL_AUTHENTICATE_VERSION, &r)
                .await?;
            req = exchange.answer(&resp)?;
        }
        self.reauthenticate_at = exchange.renew_at();
        Ok(())
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    /// Sends a request and reads its response (authenticating again first when the SASL
    /// session is about to end).
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        if self
            .reauthenticate_at
            .is_some_and(|at| Instant::now() >= at)
        {
            self.authenticate().await?;
        }
        self.exchange(api, version, request).await
    }

    async fn exchange<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let expected = self.next_correlation_id;
        let frame = request_frame(api, version, expected, self.client_id, request)?;
        let body = match &mut self.stream {
            Stream::Plain(s) => round_trip(s, &frame, &self.first_read).await,
            Stream::Tls(s) => round_trip(s, &frame, &self.first_read).await,
        }
        .map_err(|e| self.io(e))?;
        let (got, body) = response_body(api, version, body)?;
        if got != expected {
            return Err(ClientError::OutOfOrder { api, expected, got });
        }
        decode(api, version, body)
    }
}
