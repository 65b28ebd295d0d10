//! Request framing and decoding: a frame is a 4-byte size and that many bytes; its header and
//! body are decoded with the `kafka-protocol` crate. Pure apart from reading the socket; the
//! fuzz targets call [`decode_request`].

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::io::ReadHalf;
use futures_lite::AsyncReadExt;
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::handlers;
use crate::limits::READ_CHUNK_BYTES;

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

/// Bytes read from a connection but not yet handed out as frames: one `recv` usually brings
/// several pipelined requests.
#[derive(Default)]
pub struct FrameReader {
    buf: BytesMut,
    chunk: Vec<u8>,
}

impl FrameReader {
    pub async fn next(
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

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;
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
            ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(Default::default()),
            ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
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
