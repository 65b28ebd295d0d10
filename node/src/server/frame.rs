//! Request framing and decoding: a frame is a 4-byte size and that many bytes; its header and
//! body are decoded with the `kafka-protocol` crate. Pure apart from reading the socket; the
//! fuzz targets call [`decode_request`].

use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures_lite::{AsyncRead, AsyncReadExt};
use iouring_log::AlignedBuf;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::handlers;
use crate::limits::{LARGE_FRAME_MIN_BYTES, READ_CHUNK_BYTES};
use crate::server::budget::RequestBudget;
use crate::server::frame_memory::{self, small_frame, LargeFrame};

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
    #[error("{api:?} before authenticating on a SASL listener (only ApiVersions, SaslHandshake and SaslAuthenticate are served until then)")]
    NotAuthenticated { api: ApiKey },
    #[error("the SASL session of {user} expired (connections.max.reauth.ms) and the client did not authenticate again")]
    SessionExpired { user: String },
    #[error("authentication failed")]
    AuthenticationFailed,
}

/// Reads request frames from a connection. Small frames come from one read buffer (one
/// `recv` usually brings several pipelined requests) and are copied out; a large frame's body
/// is read straight into its own pooled buffer after what the read buffer already holds. Each
/// frame's memory is taken from the node's request budget before its body is read.
pub struct FrameReader {
    /// The connection's read buffer ([`READ_CHUNK_BYTES`], from the pool at the first read,
    /// back to it when the connection ends); `start..end` is read and not yet handed out.
    buf: AlignedBuf,
    start: usize,
    end: usize,
}

impl Default for FrameReader {
    fn default() -> FrameReader {
        FrameReader {
            buf: AlignedBuf::empty(),
            start: 0,
            end: 0,
        }
    }
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        if self.buf.capacity() > 0 {
            frame_memory::give_back(std::mem::replace(&mut self.buf, AlignedBuf::empty()));
        }
    }
}

impl FrameReader {
    /// The next frame. Dropping the future part-way (the connection closing) may lose what it
    /// read; the caller closes the connection then.
    pub async fn next<R: AsyncRead + Unpin>(
        &mut self,
        stream: &mut R,
        max: usize,
        budget: &Arc<RequestBudget>,
    ) -> Result<Bytes, ConnectionError> {
        while self.end - self.start < 4 {
            self.fill(stream).await?;
        }
        let head = &self.buf.as_slice()[self.start..self.start + 4];
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if size <= 0 || size as usize > max {
            return Err(ConnectionError::BadFrameSize { size, max });
        }
        let size = size as usize;
        // Nothing more is read from this connection until the budget has room for the frame.
        let permit = budget.acquire(frame_memory::frame_bytes(size)).await;
        self.start += 4;
        if size < LARGE_FRAME_MIN_BYTES {
            while self.end - self.start < size {
                self.fill(stream).await?;
            }
            let frame = small_frame(&self.buf.as_slice()[self.start..self.start + size], permit);
            self.start += size;
            return Ok(frame);
        }
        let mut frame = LargeFrame::new(size);
        self.start += frame.put(&self.buf.as_slice()[self.start..self.end]);
        while !frame.is_full() {
            let n = stream.read(frame.unfilled()).await?;
            if n == 0 {
                return Err(ConnectionError::Closed);
            }
            frame.advance(n);
        }
        Ok(frame.finish(permit))
    }

    /// Reads more into the read buffer, after moving what is left of it to its front.
    async fn fill<R: AsyncRead + Unpin>(&mut self, stream: &mut R) -> Result<(), ConnectionError> {
        if self.buf.capacity() == 0 {
            self.buf = frame_memory::take(READ_CHUNK_BYTES);
        }
        if self.start > 0 {
            self.buf.as_mut_slice().copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = stream
            .read(&mut self.buf.as_mut_slice()[self.end..])
            .await?;
        if n == 0 {
            return Err(ConnectionError::Closed);
        }
        self.end += n;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;
    use kafka_protocol::protocol::StrBytes;

    /// A socket that hands out at most `step` bytes per read.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(n))
        }
    }

    /// Frames small and large, split across reads every which way, come out whole and in
    /// order, each holding its memory from the budget until dropped; a size over the maximum
    /// is refused before anything is taken from the budget.
    #[test]
    fn frames_come_out_whole_whatever_the_reads() {
        let sizes = [
            1usize,
            100,
            16 << 10,
            (16 << 10) - 1,
            70_000,
            3,
            1 << 20,
            65_531,
        ];
        let mut data = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            data.extend_from_slice(&(n as u32).to_be_bytes());
            data.extend((0..n).map(|j| (i * 31 + j) as u8));
        }
        for step in [1, 3, 4, 5, 4096, 65_536, 1 << 21] {
            let budget = RequestBudget::new(Some(64 << 20));
            let mut socket = Trickle {
                data: data.clone(),
                at: 0,
                step,
            };
            let mut reader = FrameReader::default();
            let mut frames = Vec::new();
            for &n in &sizes {
                let f = futures_lite::future::block_on(reader.next(&mut socket, 1 << 21, &budget))
                    .unwrap();
                assert_eq!(f.len(), n, "step {step}");
                frames.push(f);
            }
            for (i, f) in frames.iter().enumerate() {
                assert!(
                    f.iter().enumerate().all(|(j, &b)| b == (i * 31 + j) as u8),
                    "frame {i}, step {step}"
                );
            }
            assert!(budget.available() < (64 << 20) - (1 << 20));
            drop(frames);
            assert_eq!(budget.available(), 64 << 20);
            let end = futures_lite::future::block_on(reader.next(&mut socket, 1 << 21, &budget));
            assert!(matches!(end, Err(ConnectionError::Closed)));
        }
        let budget = RequestBudget::new(Some(1000));
        let mut socket = Trickle {
            data: 5000u32.to_be_bytes().to_vec(),
            at: 0,
            step: 4,
        };
        let refused =
            futures_lite::future::block_on(FrameReader::default().next(&mut socket, 4096, &budget));
        assert!(matches!(
            refused,
            Err(ConnectionError::BadFrameSize { size: 5000, .. })
        ));
        assert_eq!(budget.available(), 1000);
    }

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
            ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(Default::default()),
            ApiKey::EndTxn => RequestKind::EndTxn(Default::default()),
            ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(Default::default()),
            ApiKey::ListTransactions => RequestKind::ListTransactions(Default::default()),
            ApiKey::DescribeProducers => RequestKind::DescribeProducers(Default::default()),
            ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(Default::default()),
            ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(Default::default()),
            ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(Default::default()),
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
            ApiKey::ConsumerGroupHeartbeat => {
                RequestKind::ConsumerGroupHeartbeat(Default::default())
            }
            ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(Default::default()),
            ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(Default::default()),
            ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
            ApiKey::DeleteRecords => RequestKind::DeleteRecords(Default::default()),
            ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(Default::default()),
            ApiKey::AlterConfigs => RequestKind::AlterConfigs(Default::default()),
            ApiKey::OffsetDelete => RequestKind::OffsetDelete(Default::default()),
            ApiKey::DescribeTopicPartitions => {
                RequestKind::DescribeTopicPartitions(Default::default())
            }
            ApiKey::IncrementalAlterConfigs => {
                RequestKind::IncrementalAlterConfigs(Default::default())
            }
            ApiKey::ListConfigResources => RequestKind::ListConfigResources(Default::default()),
            ApiKey::SaslHandshake => RequestKind::SaslHandshake(Default::default()),
            ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(Default::default()),
            ApiKey::AlterUserScramCredentials => {
                RequestKind::AlterUserScramCredentials(Default::default())
            }
            ApiKey::DescribeUserScramCredentials => {
                RequestKind::DescribeUserScramCredentials(Default::default())
            }
            ApiKey::CreateAcls => RequestKind::CreateAcls(Default::default()),
            ApiKey::DescribeAcls => RequestKind::DescribeAcls(Default::default()),
            ApiKey::DeleteAcls => RequestKind::DeleteAcls(Default::default()),
            ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(Default::default()),
            ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(Default::default()),
            ApiKey::AlterPartitionReassignments => {
                RequestKind::AlterPartitionReassignments(Default::default())
            }
            ApiKey::ListPartitionReassignments => {
                RequestKind::ListPartitionReassignments(Default::default())
            }
            ApiKey::ElectLeaders => RequestKind::ElectLeaders(Default::default()),
            ApiKey::UpdateFeatures => RequestKind::UpdateFeatures(Default::default()),
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
