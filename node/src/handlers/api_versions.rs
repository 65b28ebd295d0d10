//! ApiVersions: the versions in [`super::SUPPORTED`], nothing more.

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;

use crate::server::response::Outgoing;

pub fn handle() -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = super::SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = key as i16;
            v.min_version = min;
            v.max_version = max;
            v
        })
        .collect();
    r
}

/// The v0 answer to an ApiVersions request of a version we do not know.
pub fn unsupported(correlation_id: i32) -> Outgoing {
    let mut r = handle();
    r.error_code = ResponseError::UnsupportedVersion.code();
    let mut buf = BytesMut::new();
    let mut h = ResponseHeader::default();
    h.correlation_id = correlation_id;
    h.encode(&mut buf, 0).expect("v0 header encodes");
    r.encode(&mut buf, 0).expect("v0 ApiVersions encodes");
    Outgoing::from_bytes(buf.freeze())
}
