//! Request frames and response decoding, the same for every transport.
//!
//! A request frame is a 4-byte big-endian size, then the request header (at the version Kafka
//! pairs with the API version) and the body. A response frame is a size, the response header and
//! the body.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A request or response that could not be exchanged.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding or decoding {api:?} v{version}: {reason}")]
    Codec {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("{api:?} answered correlation id {got}, expected {expected}")]
    OutOfOrder {
        api: ApiKey,
        expected: i32,
        got: i32,
    },
    /// The broker answered with an error the caller could not use.
    #[error("{0}")]
    Broker(String),
    /// TLS or SASL did not let the connection in.
    #[error("{0}")]
    Authentication(String),
}

fn codec(api: ApiKey, version: i16, e: impl std::fmt::Display) -> ClientError {
    ClientError::Codec {
        api,
        version,
        reason: e.to_string(),
    }
}

/// The frame of one request: size, header, body.
pub fn request_frame<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &'static str,
    request: &R,
) -> Result<BytesMut, ClientError> {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str(client_id));
    let mut buf = BytesMut::with_capacity(64);
    buf.extend_from_slice(&[0; 4]);
    header
        .encode(&mut buf, api.request_header_version(version))
        .map_err(|e| codec(api, version, e))?;
    request
        .encode(&mut buf, version)
        .map_err(|e| codec(api, version, e))?;
    let len = (buf.len() - 4) as u32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Splits a response (without its size) into its correlation id and body.
pub fn response_body(
    api: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, Bytes), ClientError> {
    let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))
        .map_err(|e| codec(api, version, e))?;
    Ok((header.correlation_id, frame))
}

/// Decodes a response body.
pub fn decode<T: Decodable>(api: ApiKey, version: i16, mut body: Bytes) -> Result<T, ClientError> {
    T::decode(&mut body, version).map_err(|e| codec(api, version, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;

    #[test]
    fn frames_carry_their_size_header_and_body() {
        let frame = request_frame(
            ApiKey::ApiVersions,
            3,
            7,
            "test",
            &ApiVersionsRequest::default(),
        )
        .unwrap();
        let size = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4);
        let mut rest = frame.freeze().slice(4..);
        let header =
            RequestHeader::decode(&mut rest, ApiKey::ApiVersions.request_header_version(3))
                .unwrap();
        assert_eq!((header.request_api_key, header.correlation_id), (18, 7));
    }
}
