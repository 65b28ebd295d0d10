//! UpdateFeatures (`kafka-features upgrade | downgrade`, KIP-584/KIP-778): the finalized level
//! of Kafka's features, cluster-wide in the metadata, read by every node's ApiVersions and
//! transaction coordinators. ringlog has one feature, `transaction.version` (0–2); until an
//! UpdateFeatures sets it, each node uses its configured `transaction.version`.
//!
//! Kafka's rules (its `FeatureControlManager`): the whole request or nothing — the first bad
//! update is every feature's answer; an unknown feature or a level outside the supported range
//! is INVALID_UPDATE_VERSION; an upgrade (type 1) may not lower a level, a downgrade (types 2
//! and 3; v0's `allow_downgrade`) may not raise one; a level below 1 finalizes the feature at
//! 0. ALTER on the cluster.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::update_features_request::UpdateFeaturesRequest;
use kafka_protocol::messages::update_features_response::{
    UpdatableFeatureResult, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use transactions::TxnVersion;

use crate::error::Refused;
use crate::handlers::groups::Client;
use crate::metadata::controller::Command;
use crate::metadata::snapshot::TRANSACTION_VERSION_FEATURE;
use crate::security::acl::Operation;
use crate::shard::ShardCtx;

/// How a level may move (the request's `upgrade_type`, v0's `allow_downgrade`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Upgrade,
    Downgrade,
}

/// One asked update, parsed.
#[derive(Debug, Clone)]
struct Update {
    feature: String,
    level: i16,
    direction: Direction,
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let names: Vec<StrBytes> = req
        .feature_updates
        .iter()
        .map(|u| u.feature.clone())
        .collect();
    let outcome = update(ctx, client, &req, version).await;
    let (code, message) = match &outcome {
        Ok(()) => (0, None),
        Err(r) => (
            r.error.code(),
            Some(StrBytes::from_string(r.message.clone())),
        ),
    };
    let mut resp = UpdateFeaturesResponse::default()
        .with_error_code(code)
        .with_error_message(message.clone());
    if version <= 1 {
        resp.results = names
            .into_iter()
            .map(|n| {
                UpdatableFeatureResult::default()
                    .with_feature(n)
                    .with_error_code(code)
                    .with_error_message(message.clone())
            })
            .collect();
    }
    resp
}

async fn update(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: &UpdateFeaturesRequest,
    version: i16,
) -> Result<(), Refused> {
    if !crate::handlers::authorized::on_cluster(ctx, client, Operation::Alter) {
        return Err(Refused::new(
            ResponseError::ClusterAuthorizationFailed,
            "UpdateFeatures needs ALTER on the cluster",
        ));
    }
    let mut updates = Vec::new();
    for u in &req.feature_updates {
        let direction = match (version, u.upgrade_type) {
            (0, _) if u.allow_downgrade => Direction::Downgrade,
            (0, _) | (_, 1) => Direction::Upgrade,
            (_, 2) | (_, 3) => Direction::Downgrade,
            (_, other) => {
                return Err(Refused::new(
                    ResponseError::InvalidRequest,
                    format!(
                        "upgrade type {other} of feature '{}' is not 1, 2 or 3",
                        u.feature.as_str()
                    ),
                ))
            }
        };
        if updates
            .iter()
            .any(|p: &Update| p.feature == u.feature.as_str())
        {
            return Err(Refused::new(
                ResponseError::InvalidRequest,
                format!("feature '{}' is updated twice", u.feature.as_str()),
            ));
        }
        updates.push(Update {
            feature: u.feature.to_string(),
            level: u.max_version_level.max(0),
            direction,
        });
    }
    let configured = ctx.config().transactions.version;
    let alter = move |current: &BTreeMap<String, i16>| apply(current, configured, &updates);
    if req.validate_only {
        return alter(&ctx.snapshot().feature_levels()).map(|_| ());
    }
    ctx.control(|reply| Command::UpdateFeatures {
        alter: Box::new(alter),
        reply,
    })
    .await
}

/// The finalized levels after `updates`, or the first update's refusal.
fn apply(
    current: &BTreeMap<String, i16>,
    configured: TxnVersion,
    updates: &[Update],
) -> Result<BTreeMap<String, i16>, Refused> {
    let invalid = |m: String| Refused::new(ResponseError::InvalidUpdateVersion, m);
    let mut next = current.clone();
    for u in updates {
        if u.feature == super::api_versions::GROUP_VERSION_FEATURE {
            return Err(invalid(format!(
                "{} is set by the broker config group.coordinator.rebalance.protocols in ringlog \
                 (level 1 with consumer listed), not by UpdateFeatures",
                u.feature
            )));
        }
        if u.feature != TRANSACTION_VERSION_FEATURE {
            return Err(invalid(format!(
                "feature '{}' is not supported by ringlog (its features: {TRANSACTION_VERSION_FEATURE})",
                u.feature
            )));
        }
        let max = TxnVersion::V2.level();
        if u.level > max {
            return Err(invalid(format!(
                "{} {} is not in the supported range 0-{max}",
                u.feature, u.level
            )));
        }
        let now = current
            .get(&u.feature)
            .copied()
            .unwrap_or(configured.level());
        match u.direction {
            Direction::Upgrade if u.level < now => {
                return Err(invalid(format!(
                    "{} is at {now}: an upgrade cannot lower it to {} (downgrade it instead)",
                    u.feature, u.level
                )))
            }
            Direction::Downgrade if u.level > now => {
                return Err(invalid(format!(
                    "{} is at {now}: a downgrade cannot raise it to {}",
                    u.feature, u.level
                )))
            }
            _ => {}
        }
        next.insert(u.feature.clone(), u.level);
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(level: i16, direction: Direction) -> Vec<Update> {
        vec![Update {
            feature: TRANSACTION_VERSION_FEATURE.to_owned(),
            level,
            direction,
        }]
    }

    #[test]
    fn kafkas_rules_for_levels() {
        let none = BTreeMap::new();
        // From the configured level (2): a downgrade to 1, not an upgrade to 1.
        let at1 = apply(&none, TxnVersion::V2, &up(1, Direction::Downgrade)).unwrap();
        assert_eq!(at1[TRANSACTION_VERSION_FEATURE], 1);
        let e = apply(&none, TxnVersion::V2, &up(1, Direction::Upgrade)).unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidUpdateVersion);
        // From the finalized 1: up to 2, not "down" to 2; 3 is out of range.
        assert!(apply(&at1, TxnVersion::V2, &up(2, Direction::Upgrade)).is_ok());
        assert!(apply(&at1, TxnVersion::V2, &up(2, Direction::Downgrade)).is_err());
        assert!(apply(&at1, TxnVersion::V2, &up(3, Direction::Upgrade)).is_err());
        let unknown = vec![Update {
            feature: "metadata.version".into(),
            level: 27,
            direction: Direction::Upgrade,
        }];
        let e = apply(&at1, TxnVersion::V2, &unknown).unwrap_err();
        assert!(e.message.contains("metadata.version"), "{}", e.message);
    }
}
