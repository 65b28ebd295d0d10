//! One client connection: read request frames, decode them with the `kafka-protocol` crate,
//! run their handlers, write the responses in arrival order (Kafka's guarantee). Bad input
//! closes the connection with a log line; it never panics the shard and never reaches a log.
//!
//! A connection comes in on one listener: PLAINTEXT connections send record bytes from their
//! buffers with vectored `sendmsg`, no copy in user space; TLS connections (SSL, SASL_SSL) copy
//! them into TLS records. On a SASL listener nothing but ApiVersions, SaslHandshake and
//! SaslAuthenticate is served until the client authenticated (`server/authenticate.rs`).
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
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use iouring_log::MemSlice;
use iouring_log::Notify;
use iouring_log::ReadSlice;
use iouring_log::{await_piece, try_piece, ChunkPiece};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::handlers;
use crate::handlers::groups::Client;
use crate::limits::{
    FETCH_READS_AHEAD_SLICES, PIPELINE_REQUESTS_MAX, SEND_PIECES_MAX, SLOW_ANSWER_WARN,
    TLS_COPY_BYTES, TLS_HANDSHAKE_MAX,
};
use crate::quotas::QuotaKey;
use crate::security::ANONYMOUS;
use crate::server::authenticate::{self, Sasl};
use crate::server::frame::{decode_request, ConnectionError, Decoded, FrameReader};
use crate::server::response::{Outgoing, Part};
use crate::shard::ShardCtx;

/// An answer being prepared: `None` when no response is due.
type Answer = Pin<Box<dyn Future<Output = Result<Option<Outgoing>, ConnectionError>>>>;

/// Which API a request was and when its frame was read, for its latency.
#[derive(Clone, Copy)]
struct Timing {
    api_key: i16,
    read_at: Instant,
}

/// The answers of one connection in request order, between the reader and the writer task.
#[derive(Default)]
struct Pipeline {
    answers: RefCell<VecDeque<(Answer, Timing)>>,
    /// Requests read whose answer is not written yet (queued, or being awaited or written).
    unanswered: Cell<usize>,
    /// Notified when an answer is queued or written, and when the reader or writer stops.
    changed: Notify,
    reader_done: Cell<bool>,
    /// Notified once if the writer fails: the reader stops.
    writer_failed: Notify,
}

impl Pipeline {
    fn push(&self, answer: Answer, timing: Timing) {
        self.answers.borrow_mut().push_back((answer, timing));
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

/// Serves a connection accepted on listener `listener` until it closes or the node stops.
pub async fn serve_connection(ctx: &Rc<ShardCtx>, stream: TcpStream, listener: usize) {
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
    let client = Client {
        id: String::new(),
        host,
        listener,
        principal: ANONYMOUS.to_owned(),
        decisions: Default::default(),
        quota: Default::default(),
    };
    let protocol = ctx.config().listener(listener).protocol;
    let sasl = protocol.sasl().then(|| Sasl::new(ctx, &peer, listener));
    let security = &ctx.config().security;
    let server = security
        .client_auth
        .get(listener)
        .copied()
        .flatten()
        .and_then(|level| security.tls.as_ref()?.config(level));
    let result = match (server, protocol.tls()) {
        (Some(server), true) => {
            let acceptor = futures_rustls::TlsAcceptor::from(server);
            let handshake = async { Some(acceptor.accept(stream).await) };
            let timeout = async {
                glommio::timer::sleep(TLS_HANDSHAKE_MAX).await;
                None
            };
            match futures_lite::future::or(handshake, timeout).await {
                Some(Ok(tls_stream)) => {
                    let client = Client {
                        principal: authenticate::certificate_principal(&tls_stream),
                        ..client
                    };
                    tracing::debug!(target: "node::server::authenticate", %peer, principal = %client.principal, "TLS connection");
                    serve_stream(ctx, tls_stream, None, client, sasl).await
                }
                Some(Err(e)) => {
                    ctx.auth_failures().tls_failed(&peer, &e);
                    return;
                }
                None => {
                    tracing::debug!(%peer, "TLS handshake did not finish within {TLS_HANDSHAKE_MAX:?}");
                    return;
                }
            }
        }
        (None, true) => {
            // Config validation builds TLS settings whenever a listener is TLS.
            tracing::error!(%peer, "a TLS listener without TLS settings; closing");
            return;
        }
        (_, false) => {
            let fd = stream.as_raw_fd();
            serve_stream(ctx, stream, Some(fd), client, sasl).await
        }
    };
    match result {
        Err(ConnectionError::Closed) | Err(ConnectionError::Stopping) | Ok(()) => {}
        Err(ConnectionError::Io(e)) => tracing::debug!(%peer, error = %e, "connection I/O error"),
        Err(ConnectionError::AuthenticationFailed) => {} // logged, rate-limited, when it failed
        Err(e) => tracing::warn!(%peer, shard = ctx.shard(), error = %e, "closing connection"),
    }
}

/// Serves one connection's requests over `stream`; `fd` is its socket when responses may be
/// sent from their buffers directly (not through TLS).
async fn serve_stream<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    ctx: &Rc<ShardCtx>,
    stream: S,
    fd: Option<RawFd>,
    client: Client,
    sasl: Option<Sasl>,
) -> Result<(), ConnectionError> {
    let (read_half, write_half) = futures_lite::io::split(stream);
    let pipeline = Rc::new(Pipeline::default());
    let writer = glommio::spawn_local({
        let pipeline = pipeline.clone();
        let ctx = ctx.clone();
        async move { write_answers(&ctx, &pipeline, write_half, fd).await }
    });
    let result = serve_requests(ctx, &pipeline, read_half, client, sasl).await;
    if ctx.stop().is_stopping() && pipeline.unanswered.get() > 0 {
        tracing::debug!(
            shard = ctx.shard(),
            unanswered = pipeline.unanswered.get(),
            "stopping: answering what this connection asked first"
        );
    }
    pipeline.reader_done.set(true);
    pipeline.changed.notify_all();
    // Requests already read are answered before the connection closes.
    let written = writer.await;
    match (result, written) {
        // The reader stopped because the writer failed: the writer's error says why.
        (Err(ConnectionError::WriterFailed), Err(why)) => Err(why),
        (result, written) => result.and(written),
    }
}

async fn serve_requests<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &Rc<ShardCtx>,
    pipeline: &Pipeline,
    mut stream: ReadHalf<S>,
    mut client: Client,
    mut sasl: Option<Sasl>,
) -> Result<(), ConnectionError> {
    let mut reader = FrameReader::default();
    loop {
        // A client over a quota: its channel is muted for the throttle its last answer carried
        // (KIP-219); the requests it sends meanwhile wait in the socket.
        let throttle = client.quota.take_throttle();
        if throttle > 0 {
            let wait = glommio::timer::sleep(std::time::Duration::from_millis(u64::from(throttle)));
            futures_lite::future::or(wait, ctx.stop().stopped()).await;
        }
        let frame = read_frame_or_stop(ctx, pipeline, &mut reader, &mut stream).await?;
        let read_at = Instant::now();
        let frame_bytes = frame.len() + 4;
        ctx.metrics().received(frame.len() + 4);
        let request = match decode_request(frame)? {
            Decoded::ApiVersionsUnsupported { correlation_id } => {
                pipeline.wait_below(1).await;
                let consumer = crate::group_coordinator::Host::settings(&**ctx).consumer_protocol;
                let out = handlers::api_versions::unsupported(correlation_id, consumer);
                let timing = Timing {
                    api_key: ApiKey::ApiVersions as i16,
                    read_at,
                };
                pipeline.push(Box::pin(async move { Ok(Some(out)) }), timing);
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
        if let Some(s) = &sasl {
            s.gate(api)?;
        }
        if let Some(id) = &header.client_id {
            if id.as_str() != client.id {
                client.id = id.to_string();
            }
        }
        let correlation_id = header.correlation_id;
        let timing = Timing {
            api_key: api as i16,
            read_at,
        };
        tracing::trace!(?api, version, correlation_id, client = %client.id, "request");
        match *body {
            RequestKind::Produce(req) => {
                pipeline.wait_below(PIPELINE_REQUESTS_MAX).await;
                let spent = Rc::new(Cell::new(std::time::Duration::ZERO));
                let mut pending = PollTimed::new(
                    handlers::produce::append(ctx, &client, req, version),
                    spent.clone(),
                )
                .await;
                let bytes =
                    ctx.charge_quota(&client, QuotaKey::ProducerByteRate, frame_bytes as f64);
                let time = ctx.charge_quota(
                    &client,
                    QuotaKey::RequestPercentage,
                    spent.get().as_nanos() as f64,
                );
                pending.throttle_ms = bytes.max(time);
                if !pending.answered() {
                    // Fire and forget: done once appended.
                    ctx.metrics()
                        .record_request(timing.api_key, read_at.elapsed(), Instant::now());
                    continue;
                }
                let ctx = ctx.clone();
                pipeline.push(
                    Box::pin(async move {
                        let resp = handlers::produce::complete(&ctx, pending).await;
                        answer(&resp, api, version, correlation_id).map(Some)
                    }),
                    timing,
                );
            }
            RequestKind::SaslHandshake(req) => {
                pipeline.wait_below(1).await;
                let resp = authenticate::handshake(sasl.as_mut(), req, version);
                let out = answer(&resp, api, version, correlation_id)?;
                pipeline.push(Box::pin(async move { Ok(Some(out)) }), timing);
            }
            RequestKind::SaslAuthenticate(req) => {
                pipeline.wait_below(1).await;
                let (resp, failed) =
                    authenticate::authenticate(ctx, sasl.as_mut(), &mut client, req).await;
                let out = answer(&resp, api, version, correlation_id)?;
                pipeline.push(Box::pin(async move { Ok(Some(out)) }), timing);
                if failed {
                    // Kafka answers, then closes the connection.
                    return Err(ConnectionError::AuthenticationFailed);
                }
            }
            other => {
                // Everything but Produce runs alone, after the answers before it are written.
                pipeline.wait_below(1).await;
                let spent = Rc::new(Cell::new(std::time::Duration::ZERO));
                let answer = PollTimed::new(
                    handle_request(ctx, &client, (api, version, correlation_id), other),
                    spent.clone(),
                )
                .await;
                ctx.charge_quota(
                    &client,
                    QuotaKey::RequestPercentage,
                    spent.get().as_nanos() as f64,
                );
                pipeline.push(Box::pin(async move { answer }), timing);
            }
        }
    }
}

/// A future whose time spent running (inside `poll`, not waiting) is added to `spent`: a
/// request's share of its shard, for `request_percentage` quotas.
struct PollTimed<F> {
    inner: Pin<Box<F>>,
    spent: Rc<Cell<std::time::Duration>>,
}

impl<F: Future> PollTimed<F> {
    fn new(inner: F, spent: Rc<Cell<std::time::Duration>>) -> Self {
        PollTimed {
            inner: Box::pin(inner),
            spent,
        }
    }
}

impl<F: Future> Future for PollTimed<F> {
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let start = Instant::now();
        let out = self.inner.as_mut().poll(cx);
        self.spent.set(self.spent.get() + start.elapsed());
        out
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
    let malformed = |e: crate::error::HandlerError| ConnectionError::Malformed {
        api,
        version,
        reason: e.to_string(),
    };
    let Some(body) = handlers::dispatch(ctx, client, request, version)
        .await
        .map_err(malformed)?
    else {
        return Ok(None);
    };
    with_header(body, api, version, correlation_id).map(Some)
}

/// A response encoded with its header.
fn answer<T: Encodable>(
    body: &T,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<Outgoing, ConnectionError> {
    let body = handlers::encode(body, version).map_err(|e| ConnectionError::Malformed {
        api,
        version,
        reason: e.to_string(),
    })?;
    with_header(body, api, version, correlation_id)
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
async fn write_answers<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &ShardCtx,
    pipeline: &Pipeline,
    mut stream: WriteHalf<S>,
    fd: Option<RawFd>,
) -> Result<(), ConnectionError> {
    loop {
        let seen = pipeline.changed.generation();
        let next = pipeline.answers.borrow_mut().pop_front();
        let Some((answer, timing)) = next else {
            if pipeline.reader_done.get() {
                return Ok(());
            }
            pipeline.changed.changed(seen).await;
            continue;
        };
        let answered = iouring_log::warn_if_slow(answer, SLOW_ANSWER_WARN, || {
            tracing::warn!(
                api_key = timing.api_key,
                "a request is still unanswered after {SLOW_ANSWER_WARN:?}"
            )
        });
        let written = match answered.await {
            Ok(Some(out)) => {
                let bytes = out.len() + 4;
                let written = write_outgoing(&mut stream, fd, out).await;
                if written.is_ok() {
                    ctx.metrics().sent(bytes);
                }
                written
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if written.is_ok() {
            let now = Instant::now();
            ctx.metrics()
                .record_request(timing.api_key, now - timing.read_at, now);
        }
        pipeline.unanswered.set(pipeline.unanswered.get() - 1);
        pipeline.changed.notify_all();
        if let Err(e) = written {
            pipeline.writer_failed.notify_all();
            return Err(e);
        }
    }
}

async fn read_frame_or_stop<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &ShardCtx,
    pipeline: &Pipeline,
    reader: &mut FrameReader,
    stream: &mut ReadHalf<S>,
) -> Result<Bytes, ConnectionError> {
    let writer_seen = pipeline.writer_failed.generation();
    if ctx.stop().is_stopping() {
        return Err(ConnectionError::Stopping);
    }
    // An unfinished read is dropped only when the connection ends.
    let read = async {
        Some(
            reader
                .next(
                    stream,
                    ctx.config().socket_request_max_bytes,
                    ctx.request_budget(),
                )
                .await,
        )
    };
    let stop = async {
        ctx.stop().stopped().await;
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

/// Writes the size prefix and every part, from their own buffers (encoded response bytes,
/// tail chunks, cached file chunks) with vectored sends: nothing is copied in user space (on
/// TLS connections, `fd` `None`, the parts are copied into TLS records instead). The
/// file reads of the record parts run ahead of the writing, [`FETCH_READS_AHEAD_SLICES`] parts
/// at most (across the response's partitions; they complete in the read cache); the parts go
/// out in order, gathered until one must wait for its read, or [`SEND_PIECES_MAX`] are
/// gathered.
async fn write_outgoing<W: AsyncWrite + Unpin>(
    stream: &mut W,
    fd: Option<RawFd>,
    out: Outgoing,
) -> Result<(), ConnectionError> {
    let mut gathered = Gathered::default();
    gathered.push(Piece::Bytes(Bytes::copy_from_slice(
        &(out.len() as u32).to_be_bytes(),
    )));
    // The response in order: its own bytes, and the record slices of each partition.
    let mut items: Vec<Option<Item>> = out
        .parts
        .into_iter()
        .flat_map(|part| match part {
            Part::Bytes(b) => vec![Some(Item::Bytes(b))],
            Part::Records(slices) => slices.into_iter().map(|s| Some(Item::Records(s))).collect(),
        })
        .collect();
    // File slices' reads start a window of FETCH_READS_AHEAD_SLICES ahead of the one being
    // written: a fetch of 1000 quiet partitions would otherwise hold 1000 cached chunks (1 MiB
    // each, for a few KB of each) at once.
    let mut started: VecDeque<(usize, Vec<_>)> = VecDeque::new();
    let mut next_to_start = 0;
    for i in 0..items.len() {
        while started.len() < FETCH_READS_AHEAD_SLICES && next_to_start < items.len() {
            if let Some(Item::Records(s @ ReadSlice::File { .. })) = &items[next_to_start] {
                started.push_back((next_to_start, s.start_reads()));
            }
            next_to_start += 1;
        }
        match items[i].take().expect("each item is written once") {
            Item::Bytes(b) => gathered.push(Piece::Bytes(b)),
            Item::Records(ReadSlice::Memory(m)) => gathered.push(Piece::Memory(m)),
            Item::Records(ReadSlice::File { .. }) => {
                let (at, reads) = started
                    .pop_front()
                    .expect("reads started for every file slice");
                debug_assert_eq!(at, i, "file slices' reads start in order");
                for read in reads {
                    let piece = match try_piece(read).await {
                        Ok(done) => done,
                        Err(read) => {
                            // Send what is gathered while the read completes.
                            gathered.send(stream, fd).await?;
                            await_piece(read).await
                        }
                    }
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                    gathered.push(Piece::File(piece));
                }
            }
        }
        if gathered.pieces.len() >= SEND_PIECES_MAX {
            gathered.send(stream, fd).await?;
        }
    }
    gathered.send(stream, fd).await?;
    stream.flush().await?;
    Ok(())
}

/// One piece of a response to write.
enum Item {
    Bytes(bytes::Bytes),
    Records(ReadSlice),
}

/// Bytes of a response ready to send, each kept alive in its own buffer until sent.
enum Piece {
    Bytes(Bytes),
    Memory(MemSlice),
    File(ChunkPiece),
}

impl Piece {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Piece::Bytes(b) => b,
            Piece::Memory(m) => m.as_bytes(),
            Piece::File(p) => p.as_bytes(),
        }
    }
}

/// Pieces gathered for one vectored send; `sent` bytes of the first are out already.
#[derive(Default)]
struct Gathered {
    pieces: VecDeque<Piece>,
    sent: usize,
}

impl Gathered {
    fn push(&mut self, piece: Piece) {
        if !piece.as_bytes().is_empty() {
            self.pieces.push_back(piece);
        }
    }

    /// Sends every gathered piece: `sendmsg` without waiting while the socket takes bytes,
    /// glommio's write (which waits until the socket is writable) when it does not. Without a
    /// socket to send from (TLS), the pieces are copied, [`TLS_COPY_BYTES`] at a time, into
    /// the TLS stream.
    async fn send<W: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut W,
        fd: Option<RawFd>,
    ) -> Result<(), ConnectionError> {
        let Some(fd) = fd else {
            return self.copy_into(stream).await;
        };
        while !self.pieces.is_empty() {
            let sent = match send_vectored(fd, &self.pieces, self.sent) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    stream
                        .write(&self.pieces[0].as_bytes()[self.sent..])
                        .await?
                }
                Err(e) => return Err(e.into()),
            };
            if sent == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
            }
            self.advance(sent);
        }
        Ok(())
    }

    /// Copies the pieces into `stream` in writes of up to [`TLS_COPY_BYTES`] (one TLS record
    /// each at most 16 KiB; small pieces share records instead of one record each).
    async fn copy_into<W: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut W,
    ) -> Result<(), ConnectionError> {
        let mut buf = Vec::with_capacity(TLS_COPY_BYTES);
        while let Some(piece) = self.pieces.pop_front() {
            let mut bytes = &piece.as_bytes()[std::mem::take(&mut self.sent)..];
            while !bytes.is_empty() {
                let n = bytes.len().min(TLS_COPY_BYTES - buf.len());
                buf.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if buf.len() == TLS_COPY_BYTES {
                    stream.write_all(&buf).await?;
                    buf.clear();
                }
            }
        }
        if !buf.is_empty() {
            stream.write_all(&buf).await?;
        }
        Ok(())
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let left = self.pieces[0].as_bytes().len() - self.sent;
            if n < left {
                self.sent += n;
                return;
            }
            n -= left;
            self.sent = 0;
            self.pieces.pop_front();
        }
    }
}

/// One non-blocking `sendmsg` of the pieces (the first from `skip`), at most
/// [`SEND_PIECES_MAX`] of them.
fn send_vectored(fd: RawFd, pieces: &VecDeque<Piece>, skip: usize) -> std::io::Result<usize> {
    let iov: Vec<libc::iovec> = pieces
        .iter()
        .take(SEND_PIECES_MAX)
        .enumerate()
        .map(|(i, p)| {
            let b = if i == 0 {
                &p.as_bytes()[skip..]
            } else {
                p.as_bytes()
            };
            libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            }
        })
        .collect();
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: `msg` points at `iov`, whose entries point into buffers `pieces` keeps alive for
    // the call; the kernel only reads them. `fd` is the connection's socket, open while its
    // write half lives.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}
