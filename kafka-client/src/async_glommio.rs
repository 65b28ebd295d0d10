//! An async transport on glommio, for code that runs on a shard: one connection, one request at
//! a time ([`Connection::call`]); the caller pipelines by keeping several connections. Never
//! blocks the reactor.

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::codec::{decode, request_frame, response_body, ClientError};

pub struct Connection {
    stream: TcpStream,
    addr: String,
    client_id: &'static str,
    next_correlation_id: i32,
}

impl Connection {
    /// Connects to `addr` (`host:port`).
    pub async fn connect(addr: &str, client_id: &'static str) -> Result<Connection, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_owned(),
            source,
        };
        let stream = TcpStream::connect(addr).await.map_err(|e| io(e.into()))?;
        stream.set_nodelay(true).map_err(|e| io(e.into()))?;
        Ok(Connection {
            stream,
            addr: addr.to_owned(),
            client_id,
            next_correlation_id: 0,
        })
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    /// Sends a request and reads its response.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let expected = self.next_correlation_id;
        let frame = request_frame(api, version, expected, self.client_id, request)?;
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| self.io(e))?;
        self.stream.flush().await.map_err(|e| self.io(e))?;
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .await
            .map_err(|e| self.io(e))?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream
            .read_exact(&mut body)
            .await
            .map_err(|e| self.io(e))?;
        let (got, body) = response_body(api, version, Bytes::from(body))?;
        if got != expected {
            return Err(ClientError::OutOfOrder { api, expected, got });
        }
        decode(api, version, body)
    }
}
