//! ApiVersions: the versions in [`super::SUPPORTED`], nothing more; and Kafka's features
//! (KIP-584) the node serves: `transaction.version` 0–2, finalized at the node's
//! `transaction.version` (clients take level 2 for KIP-890 part 2's transactions).

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use transactions::TxnVersion;

use crate::server::response::Outgoing;

/// The epoch of the finalized features: the features of a node are fixed while it runs.
const FINALIZED_FEATURES_EPOCH: i64 = 1;

pub fn handle(txn_version: TxnVersion) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    let name = || StrBytes::from_static_str("transaction.version");
    r.supported_features = vec![SupportedFeatureKey::default()
        .with_name(name())
        .with_min_version(0)
        .with_max_version(TxnVersion::V2.level())];
    r.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
    if txn_version.level() > 0 {
        r.finalized_features = vec![FinalizedFeatureKey::default()
            .with_name(name())
            .with_min_version_level(txn_version.level())
            .with_max_version_level(txn_version.level())];
    }
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
    let mut r = handle(TxnVersion::V0);
    r.error_code = ResponseError::UnsupportedVersion.code();
    let mut buf = BytesMut::new();
    let mut h = ResponseHeader::default();
    h.correlation_id = correlation_id;
    h.encode(&mut buf, 0).expect("v0 header encodes");
    r.encode(&mut buf, 0).expect("v0 ApiVersions encodes");
    Outgoing::from_bytes(buf.freeze())
}
