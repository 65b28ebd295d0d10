//! ApiVersions: the versions in [`super::SUPPORTED`], nothing more; and Kafka's features
//! (KIP-584) the node serves: `transaction.version` 0–2, finalized at the level UpdateFeatures
//! set for the cluster, else the node's `transaction.version` (clients take level 2 for
//! KIP-890 part 2's transactions); `group.version` 0–1 (KIP-1022), finalized at 1 when the
//! consumer group protocol (KIP-848) is served, as Kafka 4 finalizes it, else not at all.

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use transactions::TxnVersion;

use crate::metadata::snapshot::{CONFIGURED_FEATURES_EPOCH, TRANSACTION_VERSION_FEATURE};
use crate::server::response::Outgoing;

/// Kafka's feature of the consumer group protocol: level 1 serves KIP-848. Set here by
/// `group.coordinator.rebalance.protocols`; UpdateFeatures does not change it.
pub const GROUP_VERSION_FEATURE: &str = "group.version";

/// `finalized_epoch`: the epoch of the last UpdateFeatures (clients keep the features of the
/// highest epoch they saw).
/// `consumer_protocol`: KIP-848's APIs are served (`group.coordinator.rebalance.protocols`).
pub fn handle(
    txn_version: TxnVersion,
    finalized_epoch: i64,
    consumer_protocol: bool,
) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    let name = || StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE);
    r.supported_features = vec![SupportedFeatureKey::default()
        .with_name(name())
        .with_min_version(0)
        .with_max_version(TxnVersion::V2.level())];
    r.finalized_features_epoch = finalized_epoch;
    r.supported_features.push(
        SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str(GROUP_VERSION_FEATURE))
            .with_min_version(0)
            .with_max_version(1),
    );
    if txn_version.level() > 0 {
        r.finalized_features.push(
            FinalizedFeatureKey::default()
                .with_name(name())
                .with_min_version_level(txn_version.level())
                .with_max_version_level(txn_version.level()),
        );
    }
    if consumer_protocol {
        r.finalized_features.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(GROUP_VERSION_FEATURE))
                .with_min_version_level(1)
                .with_max_version_level(1),
        );
    }
    r.api_keys = super::SUPPORTED
        .iter()
        .filter(|(key, _, _)| {
            consumer_protocol
                || !matches!(
                    key,
                    ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe
                )
        })
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

/// The v0 answer to an ApiVersions request of a version we do not know: the versions it lists
/// are those the client then uses (KIP-511), so they are the node's real ones.
pub fn unsupported(correlation_id: i32, consumer_protocol: bool) -> Outgoing {
    let mut r = handle(TxnVersion::V0, CONFIGURED_FEATURES_EPOCH, consumer_protocol);
    r.error_code = ResponseError::UnsupportedVersion.code();
    let mut buf = BytesMut::new();
    let mut h = ResponseHeader::default();
    h.correlation_id = correlation_id;
    h.encode(&mut buf, 0).expect("v0 header encodes");
    r.encode(&mut buf, 0).expect("v0 ApiVersions encodes");
    Outgoing::from_bytes(buf.freeze())
}
