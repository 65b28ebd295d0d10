//! One client connection: read request frames, decode them with the `kafka-protocol` crate,
//! run their handlers, write the responses in arrival order (Kafka's guarantee). Bad input
//! closes the connection with a log line; it never panics the shard and never reaches a log.
//!
//! Produce requests are pipelined: the reader appends request N+1 (the ordered append) while
//! the answer to request N still waits for its records to be written or flushed, so one write
//! and one fsync serve several requests of the connection (group commit). Answers wait in a
//! [`Pipeline`] that a writer task empties in order. Every other request waits until the
//! answers before it are written, then runs alone, as before.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use iouring_log::notify::Notify;
use iouring_log::ReadSlice;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::handlers;
use crate::handlers::groups::Client;
use crate::limits::{PIPELINE_REQUESTS_MAX, READ_CHUNK_BYTES};
use crate::server::response::{Outgoing, Part};
use crate::server::zero_copy::sendfile_all;
use crate::shard::ShardCtx;

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("client closed the connection")]
    Closed,
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("request of {size} bytes is outside 1..={max} (socket.request.max.bytes)")]
    BadFrameSize { size: i32, max: usize },
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("{api:?} v{version} is not supported")]
    UnsupportedVersion { api: ApiKey, version: i16 },
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("the broker is shutting down")]
    Stopping,
    #[error("writing a response failed")]
    WriterFailed,
}

/// An answer being prepared: `None` when no response is due.
type Answer = Pin<Box<dyn Future<Output = Result<Option<Outgoing>, ConnectionError>>>>;

/// The answers of one connection in request order, between the reader and the writer task.
#[derive(Default)]
struct Pipeline {
    answers: RefCell<VecDeque<Answer>>,
    /// Requests read whose answer is not written yet (queued, or being awaited or written).
    unanswered: Cell<usize>,
    /// Notified when an answer is queued or written, and when the reader or writer stops.
    changed: Notify,
    reader_done: Cell<bool>,
    /// Notified once if the writer fails: the reader stops.
    writer_failed: Notify,
}

impl Pipeline {
    fn push(&self, answer: Answer) {
        self.answers.borrow_mut().push_back(answer);
        self.unanswered.set(self.unanswered.get() + 1);
        self.changed.notify_all();
    }

    /// Waits until fewer than `max` requests are unanswered.
    async fn wait_below(&self, max: usize) {
        loop {
            let seen = self.changed.generation();
            if self.unanswered.get() < max {
                return;
            }
            self.changed.changed(seen).await;
        }
    }
}

pub async fn serve_connection(ctx: &Rc<ShardCtx>, stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "TCP_NODELAY");
    }
    // Kafka shows a member's host as "/address" in DescribeGroups.
    let host = stream
        .peer_addr()
        .map(|a| format!("/{}", a.ip()))
        .unwrap_or_default();
    let fd = stream.as_raw_fd();
    let (read_half, write_half) = futures_lite::io::split(stream);
    let pipeline = Rc::new(Pipeline::default());
    let writer = glommio::spawn_local({
        let (ctx, pipeline) = (ctx.clone(), pipeline.clone());
        async move { write_answers(&ctx, &pipeline, write_half, fd).await }
    });
    let result = serve_requests(ctx, &pipeline, read_half, host).await;
    pipeline.reader_done.set(true);
    pipeline.changed.notify_all();
    // Requests already read are answered before the connection closes.
    let written = writer.await;
    match result.and(written) {
        Err(ConnectionError::Closed) | Err(ConnectionError::Stopping) | Ok(()) => {}
        Err(ConnectionError::Io(e)) => tracing::debug!(%peer, error = %e, "connection I/O error"),
        Err(e) => tracing::warn!(%peer, shard = ctx.shard, error = %e, "closing connection"),
    }
}

async fn serve_requests(
    ctx: &Rc<ShardCtx>,
    pipeline: &Pipeline,
    mut stream: ReadHalf<TcpStream>,
    host: String,
) -> Result<(), ConnectionError> {
    let mut reader = FrameReader::default();
    let mut client = Client {
        id: String::new(),
        host,
    };
    loop {
        let frame = read_frame_or_stop(ctx, pipeline, &mut reader, &mut stream).await?;
        let request = match decode_request(frame)? {
            Decoded::ApiVersionsUnsupported { correlation_id } => {
                pipeline.wait_below(1).await;
                let out = handlers::api_versions::unsupported(correlation_id);
                pipeline.push(Box::pin(async move { Ok(Some(out)) }));
                continue;
            }
            Decoded::Request {
                api,
                version,
                header,
                body,
            } => (api, version, header, body),
        };
        let (api, version, header, body) = request;
        if let Some(id) = &header.client_id {
            if id.as_str() != client.id {
                client.id = id.to_string();
            }
        }
        let correlation_id = header.correlation_id;
        match *body {
            RequestKind::Produce(req) => {
                pipeline.wait_below(PIPELINE_REQUESTS_MAX).await;
                let acks = req.acks;
                let pending = handlers::produce::append(ctx, req, version).await;
                if acks == 0 {
                    continue;
                }
                pipeline.push(Box::pin(async move {
                    let resp = handlers::produce::complete(pending).await;
                    let body = handlers::encode(&resp, version).map_err(|reason| {
                        ConnectionError::Malformed {
                            api,
                            version,
                            reason,
                        }
                    })?;
                    with_header(body, api, version, correlation_id).map(Some)
                }));
            }
            other => {
                // Everything but Produce runs alone, after the answers before it are written.
                pipeline.wait_below(1).await;
                let answer =
                    handle_request(ctx, &client, (api, version, correlation_id), other).await;
                pipeline.push(Box::pin(async move { answer }));
            }
        }
    }
}

/// Runs the handler of a decoded request (not a pipelined Produce); `None` when no response is
/// due.
async fn handle_request(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    (api, version, correlation_id): (ApiKey, i16, i32),
    request: RequestKind,
) -> Result<Option<Outgoing>, ConnectionError> {
    let malformed = |reason: String| ConnectionError::Malformed {
        api,
        version,
        reason,
    };
    let Some(body) = handlers::dispatch(ctx, client, request, version)
        .await
        .map_err(malformed)?
    else {
        return Ok(None);
    };
    with_header(body, api, version, correlation_id).map(Some)
}

fn with_header(
    body: Outgoing,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<Outgoing, ConnectionError> {
    let mut head = BytesMut::new();
    let mut rh = ResponseHeader::default();
    rh.correlation_id = correlation_id;
    rh.encode(&mut head, api.response_header_version(version))
        .map_err(|e| ConnectionError::Malformed {
            api,
            version,
            reason: e.to_string(),
        })?;
    Ok(body.with_header(head.freeze()))
}

/// The writer task: awaits each answer in request order and writes it; stops when the reader
/// is done and every answer is written, or on the first failure (which stops the reader).
async fn write_answers(
    ctx: &ShardCtx,
    pipeline: &Pipeline,
    mut stream: WriteHalf<TcpStream>,
    fd: RawFd,
) -> Result<(), ConnectionError> {
    loop {
        let seen = pipeline.changed.generation();
        let next = pipeline.answers.borrow_mut().pop_front();
        let Some(answer) = next else {
            if pipeline.reader_done.get() {
                return Ok(());
            }
            pipeline.changed.changed(seen).await;
            continue;
        };
        let written = match answer.await {
            Ok(Some(out)) => write_outgoing(ctx, &mut stream, fd, out).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        pipeline.unanswered.set(pipeline.unanswered.get() - 1);
        pipeline.changed.notify_all();
        if let Err(e) = written {
            pipeline.writer_failed.notify_all();
            return Err(e);
        }
    }
}

async fn read_frame_or_stop(
    ctx: &ShardCtx,
    pipeline: &Pipeline,
    reader: &mut FrameReader,
    stream: &mut ReadHalf<TcpStream>,
) -> Result<Bytes, ConnectionError> {
    let writer_seen = pipeline.writer_failed.generation();
    if ctx.stop.is_stopping() {
        return Err(ConnectionError::Stopping);
    }
    // Dropping an unfinished read loses nothing: glommio reads a socket only once it is ready.
    let read = async {
        Some(
            reader
                .next(stream, ctx.config.socket_request_max_bytes)
                .await,
        )
    };
    let stop = async {
        ctx.stop.stopped().await;
        None
    };
    let writer_failed = async {
        pipeline.writer_failed.changed(writer_seen).await;
        Some(Err(ConnectionError::WriterFailed))
    };
    let stop_or_failed = futures_lite::future::or(stop, writer_failed);
    futures_lite::future::or(read, stop_or_failed)
        .await
        .unwrap_or(Err(ConnectionError::Stopping))
}

/// Bytes read from a connection but not yet handed out as frames: one `recv` usually brings
/// several pipelined requests.
#[derive(Default)]
struct FrameReader {
    buf: BytesMut,
    chunk: Vec<u8>,
}

impl FrameReader {
    async fn next(
        &mut self,
        stream: &mut ReadHalf<TcpStream>,
        max: usize,
    ) -> Result<Bytes, ConnectionError> {
        loop {
            if self.buf.len() >= 4 {
                let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                if size <= 0 || size as usize > max {
                    return Err(ConnectionError::BadFrameSize { size, max });
                }
                if self.buf.len() >= 4 + size as usize {
                    self.buf.advance(4);
                    return Ok(self.buf.split_to(size as usize).freeze());
                }
            }
            if self.chunk.is_empty() {
                self.chunk = vec![0; READ_CHUNK_BYTES];
            }
            let n = stream.read(&mut self.chunk).await?;
            if n == 0 {
                return Err(ConnectionError::Closed);
            }
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
}

/// A decoded request, or the immediate answer to an ApiVersions of an unknown version.
pub enum Decoded {
    Request {
        api: ApiKey,
        version: i16,
        header: RequestHeader,
        body: Box<RequestKind>,
    },
    ApiVersionsUnsupported {
        correlation_id: i32,
    },
}

/// Decodes one request frame (without its size prefix). Pure: the fuzz target calls it.
pub fn decode_request(mut frame: Bytes) -> Result<Decoded, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::BadFrameSize {
            size: frame.len() as i32,
            max: 8,
        });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).map_err(|_| ConnectionError::UnknownApiKey(key))?;
    let Some(range) = handlers::supported_versions(api) else {
        return Err(ConnectionError::UnsupportedVersion { api, version });
    };
    if !(range.0..=range.1).contains(&version) {
        if api == ApiKey::ApiVersions {
            // Kafka answers an unknown ApiVersions version with v0 and UNSUPPORTED_VERSION, so
            // the client can retry with a version it finds in the list.
            let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            return Ok(Decoded::ApiVersionsUnsupported { correlation_id });
        }
        return Err(ConnectionError::UnsupportedVersion { api, version });
    }
    let malformed = |reason: String| ConnectionError::Malformed {
        api,
        version,
        reason,
    };
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))
        .map_err(|e| malformed(e.to_string()))?;
    let body =
        RequestKind::decode(api, &mut frame, version).map_err(|e| malformed(e.to_string()))?;
    // Bytes after the body are ignored, for every API, as Kafka does: its generated readers
    // stop at the body's last field and `RequestContext.parseRequest` never looks at what is
    // left. librdkafka relies on it (its issue #5049: an all-topics Metadata v9+ request carries
    // a 4-byte placeholder where a 1-byte null array belongs).
    if frame.has_remaining() {
        tracing::debug!(
            ?api,
            version,
            trailing_bytes = frame.remaining(),
            "ignoring bytes after the request body"
        );
    }
    Ok(Decoded::Request {
        api,
        version,
        header,
        body: Box::new(body),
    })
}

/// Writes the size prefix and every part; record parts go out by `sendfile` from the segment
/// file (zero-copy) or from memory.
async fn write_outgoing(
    ctx: &ShardCtx,
    stream: &mut WriteHalf<TcpStream>,
    fd: RawFd,
    out: Outgoing,
) -> Result<(), ConnectionError> {
    // Everything up to a zero-copy file range goes out in one write.
    let mut pending = Vec::with_capacity(out.len().min(1 << 20) + 4);
    pending.extend_from_slice(&(out.len() as u32).to_be_bytes());
    for part in out.parts {
        match part {
            Part::Bytes(b) => pending.extend_from_slice(&b),
            Part::Records(slices) => {
                for s in slices {
                    match &s {
                        ReadSlice::Memory(m) => pending.extend_from_slice(m.as_bytes()),
                        ReadSlice::File { .. } if ctx.config.fetch_zero_copy => {
                            stream.write_all(&pending).await?;
                            pending.clear();
                            write_slice(stream, fd, &s).await?;
                        }
                        ReadSlice::File { .. } => {
                            let bytes = s
                                .to_vec()
                                .await
                                .map_err(|e| std::io::Error::other(e.to_string()))?;
                            pending.extend_from_slice(&bytes);
                        }
                    }
                }
            }
        }
    }
    stream.write_all(&pending).await?;
    stream.flush().await?;
    Ok(())
}

/// Sends a file range with `sendfile` (zero-copy) to the socket `socket`.
async fn write_slice(
    stream: &mut WriteHalf<TcpStream>,
    socket: RawFd,
    slice: &ReadSlice,
) -> Result<(), ConnectionError> {
    let (file, position, len) = slice.file_range().expect("a file slice");
    stream.flush().await?;
    sendfile_all(socket, file, position, len).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    /// A default (empty) request of `api`; every API the broker serves is listed.
    fn default_request(api: ApiKey) -> RequestKind {
        match api {
            ApiKey::Produce => RequestKind::Produce(Default::default()),
            ApiKey::Fetch => RequestKind::Fetch(Default::default()),
            ApiKey::ListOffsets => RequestKind::ListOffsets(Default::default()),
            ApiKey::Metadata => RequestKind::Metadata(Default::default()),
            ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
            ApiKey::CreateTopics => RequestKind::CreateTopics(Default::default()),
            ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
            ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
            ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(Default::default()),
            ApiKey::CreatePartitions => RequestKind::CreatePartitions(Default::default()),
            ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
            ApiKey::JoinGroup => RequestKind::JoinGroup(Default::default()),
            ApiKey::SyncGroup => RequestKind::SyncGroup(Default::default()),
            ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
            ApiKey::LeaveGroup => RequestKind::LeaveGroup(Default::default()),
            ApiKey::OffsetCommit => RequestKind::OffsetCommit(Default::default()),
            ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
            ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
            ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
            ApiKey::DeleteGroups => RequestKind::DeleteGroups(Default::default()),
            other => panic!("add {other:?} to default_request"),
        }
    }

    /// The request frame, or `None` when the default body cannot be written at this version
    /// (the encoder refuses non-default values of fields the version lacks).
    fn frame_of(api: ApiKey, version: i16, body: &RequestKind, trailing: &[u8]) -> Option<Bytes> {
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = 42;
        header.client_id = Some(StrBytes::from_static_str("trailing-bytes-test"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).ok()?;
        buf.extend_from_slice(trailing);
        Some(buf.freeze())
    }

    /// Kafka ignores bytes after a request body for every API and version (its readers stop at
    /// the last field; nothing checks what is left), so ringlog decodes each of them to the
    /// same request with or without trailing bytes.
    #[test]
    fn trailing_bytes_are_ignored_for_every_api_and_version() {
        let mut checked = 0;
        for &(api, min, max) in handlers::SUPPORTED {
            for version in min..=max {
                let body = default_request(api);
                let Some(clean) = frame_of(api, version, &body, &[]) else {
                    continue;
                };
                for trailing in [&[0u8][..], &[0, 0, 0], &[0xff; 17]] {
                    let dirty = frame_of(api, version, &body, trailing).expect("encodes");
                    let (a, b) = match (decode_request(clean.clone()), decode_request(dirty)) {
                        (
                            Ok(Decoded::Request {
                                body: a, header, ..
                            }),
                            Ok(Decoded::Request { body: b, .. }),
                        ) => {
                            assert_eq!(header.correlation_id, 42);
                            (a, b)
                        }
                        (Err(e), _) | (_, Err(e)) => {
                            panic!(
                                "{api:?} v{version} with {} trailing bytes: {e}",
                                trailing.len()
                            )
                        }
                        _ => panic!("{api:?} v{version}: not decoded as a request"),
                    };
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{api:?} v{version}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 300, "only {checked} cases");
    }

    /// librdkafka's all-topics Metadata v9+ (its issue #5049): a 4-byte placeholder where the
    /// 1-byte null compact array belongs. Kafka reads the first byte as null (all topics), the
    /// next ones as the booleans and the tag count, and ignores the last one.
    #[test]
    fn librdkafka_all_topics_metadata_decodes_as_all_topics() {
        for version in 9..=13i16 {
            let mut header = RequestHeader::default();
            header.request_api_key = ApiKey::Metadata as i16;
            header.request_api_version = version;
            header.correlation_id = 7;
            header.client_id = Some(StrBytes::from_static_str("rdkafka"));
            let mut buf = BytesMut::new();
            header
                .encode(&mut buf, ApiKey::Metadata.request_header_version(version))
                .unwrap();
            // topics: a 4-byte placeholder holding the null count (0) first, then the real
            // allow_auto_topic_creation, [include_cluster_authorized_operations (v9-10),]
            // include_topic_authorized_operations and the tag count.
            buf.extend_from_slice(&[0, 0, 0, 0]);
            buf.extend_from_slice(&[1]);
            if version <= 10 {
                buf.extend_from_slice(&[0]);
            }
            buf.extend_from_slice(&[0, 0]);
            match decode_request(buf.freeze()) {
                Ok(Decoded::Request { body, .. }) => match *body {
                    RequestKind::Metadata(m) => assert_eq!(m.topics, None, "v{version}"),
                    other => panic!("{other:?}"),
                },
                Err(e) => panic!("v{version}: {e}"),
                Ok(_) => panic!("v{version}: not a request"),
            }
        }
    }
}
