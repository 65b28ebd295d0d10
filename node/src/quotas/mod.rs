//! Client quotas, Kafka's model (KIP-13, KIP-55, KIP-546): quota entities — a user, a client id,
//! or both, each a name or the default (`<default>`) — carry values for `producer_byte_rate`,
//! `consumer_byte_rate`, `request_percentage` and `controller_mutation_rate`, kept in the
//! cluster metadata (AlterClientQuotas, `kafka-configs --entity-type users|clients`).
//!
//! Which entity's quota applies to a connection (user U, client id C) is Kafka's order, first
//! match wins, per quota key:
//! `user=U,client-id=C`, `user=U,client-id=<default>`, `user=U`,
//! `user=<default>,client-id=C`, `user=<default>,client-id=<default>`, `user=<default>`,
//! `client-id=C`, `client-id=<default>`.
//! Usage is counted per matched entity (so every client under `user=<default>` shares it as
//! Kafka's `(user, client-id)` sensor tags say).
//!
//! IP quotas (`connection_creation_rate`) are not built: an alteration naming an `ip` entity is
//! refused saying so.

pub mod usage;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One side of a quota entity: a name, or the default for its type (Kafka's `<default>`, a null
/// name on the wire).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    Named(String),
    Default,
}

/// A quota entity: a user, a client id, or both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

/// The quota keys of users and client ids, with Kafka's types (an integral key refuses a
/// fractional value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKey {
    ProducerByteRate,
    ConsumerByteRate,
    RequestPercentage,
    ControllerMutationRate,
}

impl QuotaKey {
    pub const ALL: [QuotaKey; 4] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ControllerMutationRate => "controller_mutation_rate",
        }
    }

    pub fn parse(name: &str) -> Option<QuotaKey> {
        QuotaKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The quota's value as an amount per second of what is charged against it: bytes for the
    /// byte rates, nanoseconds of a shard's time for `request_percentage` (a percentage of one
    /// shard, as Kafka's is of one I/O thread), partitions for `controller_mutation_rate`.
    pub fn per_second(self, value: f64) -> f64 {
        match self {
            QuotaKey::RequestPercentage => value / 100.0 * 1e9,
            _ => value,
        }
    }

    /// The burst a client may use at once (ms of its quota): one second for the byte rates and
    /// request time, the whole quota window for topic mutations (Kafka's KIP-599 burst).
    pub fn burst_ms(self) -> i64 {
        match self {
            QuotaKey::ControllerMutationRate => {
                crate::limits::QUOTA_WINDOW_SAMPLES as i64 * crate::limits::QUOTA_SAMPLE_MS
            }
            _ => crate::limits::QUOTA_BURST_MS,
        }
    }

    /// Kafka's LONG keys (bytes per second).
    fn integral(self) -> bool {
        matches!(
            self,
            QuotaKey::ProducerByteRate | QuotaKey::ConsumerByteRate
        )
    }
}

/// Why an alteration of one entity was refused (Kafka's INVALID_REQUEST messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    #[error("Invalid empty client quota entity")]
    EmptyEntity,
    #[error("Invalid client quota entity, duplicate entity entry {0}")]
    DuplicateEntity(String),
    #[error("Unhandled client quota entity type: {0}")]
    UnknownEntityType(String),
    #[error("Empty {0} not supported")]
    EmptyName(String),
    #[error("IP quotas (connection_creation_rate) are not built in ringlog; quota user and client-id entities")]
    IpNotBuilt,
    #[error("Invalid configuration key {0}")]
    UnknownKey(String),
    #[error("Duplicate quota key {0} not updating quota for this entity")]
    DuplicateKey(String),
    #[error("Quota {0} must be greater than 0")]
    NotPositive(String),
    #[error("{0} cannot be a fractional value.")]
    Fractional(String),
    #[error("Proposed value for {0} is too large for a LONG.")]
    TooLarge(String),
}

/// One entity and the quotas set on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityQuotas {
    pub entity: QuotaEntity,
    pub values: BTreeMap<String, f64>,
}

/// The quotas set on each entity, by the entity's [`QuotaEntity::storage_key`].
pub type ClientQuotas = BTreeMap<String, EntityQuotas>;

/// One entity's change: each key set to a value, or removed (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

impl QuotaEntity {
    /// From AlterClientQuotas / DescribeClientQuotas components: `(entity type, name or None for
    /// the default)`.
    pub fn from_components(
        components: &[(String, Option<String>)],
    ) -> Result<QuotaEntity, QuotaError> {
        let mut e = QuotaEntity {
            user: None,
            client_id: None,
        };
        if components.is_empty() {
            return Err(QuotaError::EmptyEntity);
        }
        for (kind, name) in components {
            let name = match name {
                Some(n) if n.is_empty() => return Err(QuotaError::EmptyName(kind.clone())),
                Some(n) => EntityName::Named(n.clone()),
                None => EntityName::Default,
            };
            let slot = match kind.as_str() {
                "user" => &mut e.user,
                "client-id" => &mut e.client_id,
                "ip" => return Err(QuotaError::IpNotBuilt),
                other => return Err(QuotaError::UnknownEntityType(other.to_owned())),
            };
            if slot.replace(name).is_some() {
                return Err(QuotaError::DuplicateEntity(kind.clone()));
            }
        }
        Ok(e)
    }

    /// `(entity type, name or None)` pairs, user first.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        fn name(n: &EntityName) -> Option<&str> {
            match n {
                EntityName::Named(s) => Some(s.as_str()),
                EntityName::Default => None,
            }
        }
        let mut out = Vec::new();
        if let Some(u) = &self.user {
            out.push(("user", name(u)));
        }
        if let Some(c) = &self.client_id {
            out.push(("client-id", name(c)));
        }
        out
    }

    /// The key this entity's quotas are stored under (cluster metadata, etcd): each part
    /// `type=name` with the name percent-encoded, `<default>` for a default.
    pub fn storage_key(&self) -> String {
        self.components()
            .into_iter()
            .map(|(t, n)| format!("{t}={}", n.map_or("<default>".to_owned(), percent_encode)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Applies `alteration` to `quotas` after checking it whole (Kafka's rules); returns whether
/// anything changed. An entity left without keys is removed.
pub fn alter(quotas: &mut ClientQuotas, alteration: &QuotaAlteration) -> Result<bool, QuotaError> {
    let mut seen = std::collections::BTreeSet::new();
    for (key, value) in &alteration.ops {
        if !seen.insert(key.as_str()) {
            return Err(QuotaError::DuplicateKey(key.clone()));
        }
        let Some(k) = QuotaKey::parse(key) else {
            return Err(QuotaError::UnknownKey(key.clone()));
        };
        if let Some(v) = value {
            check_value(k, *v)?;
        }
    }
    let key = alteration.entity.storage_key();
    let current = quotas
        .get(&key)
        .map(|q| q.values.clone())
        .unwrap_or_default();
    let mut next = current.clone();
    for (k, value) in &alteration.ops {
        match value {
            Some(v) => next.insert(k.clone(), *v),
            None => next.remove(k),
        };
    }
    if next == current {
        return Ok(false);
    }
    if next.is_empty() {
        quotas.remove(&key);
    } else {
        quotas.insert(
            key,
            EntityQuotas {
                entity: alteration.entity.clone(),
                values: next,
            },
        );
    }
    Ok(true)
}

fn check_value(key: QuotaKey, value: f64) -> Result<(), QuotaError> {
    let name = || key.name().to_owned();
    if value.is_nan() || value <= 0.0 {
        return Err(QuotaError::NotPositive(name()));
    }
    if key.integral() {
        if value > i64::MAX as f64 {
            return Err(QuotaError::TooLarge(name()));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(QuotaError::Fractional(name()));
        }
    }
    Ok(())
}

/// The quotas that apply to a connection of `user` with `client_id`, per key (in
/// [`QuotaKey::ALL`]'s order): the value and the storage key of the entity it comes from
/// (whose usage it is counted against), in Kafka's order.
pub fn resolve(quotas: &ClientQuotas, user: &str, client_id: &str) -> [Option<(String, f64)>; 4] {
    let named = |s: &str| Some(EntityName::Named(s.to_owned()));
    let default = || Some(EntityName::Default);
    let order = [
        (named(user), named(client_id)),
        (named(user), default()),
        (named(user), None),
        (default(), named(client_id)),
        (default(), default()),
        (default(), None),
        (None, named(client_id)),
        (None, default()),
    ];
    let found: Vec<(String, &EntityQuotas)> = order
        .into_iter()
        .filter_map(|(user, client_id)| {
            let key = QuotaEntity { user, client_id }.storage_key();
            quotas.get(&key).map(|q| (key, q))
        })
        .collect();
    QuotaKey::ALL.map(|k| {
        found
            .iter()
            .find_map(|(key, q)| q.values.get(k.name()).map(|v| (key.clone(), *v)))
    })
}

/// What a DescribeClientQuotas filter component asks of one side of an entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// This name (`MATCH_TYPE_EXACT`).
    Exact(String),
    /// The default (`MATCH_TYPE_DEFAULT`).
    Default,
    /// Any name or the default, the side present (`MATCH_TYPE_SPECIFIED`).
    Specified,
}

/// DescribeClientQuotas: the entities matching every component (`(entity type, match)`); with
/// `strict`, only entities with no other side.
pub fn matching<'a>(
    quotas: &'a ClientQuotas,
    components: &[(String, Match)],
    strict: bool,
) -> Vec<&'a EntityQuotas> {
    let side = |e: &'a QuotaEntity, kind: &str| match kind {
        "user" => e.user.as_ref(),
        _ => e.client_id.as_ref(),
    };
    quotas
        .values()
        .filter(|q| {
            let e = &q.entity;
            components.iter().all(|(kind, m)| match (side(e, kind), m) {
                (Some(EntityName::Named(n)), Match::Exact(want)) => n == want,
                (Some(EntityName::Default), Match::Default) => true,
                (Some(_), Match::Specified) => true,
                _ => false,
            }) && (!strict
                || ["user", "client-id"]
                    .iter()
                    .all(|k| side(e, k).is_none() || components.iter().any(|(c, _)| c == k)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
        let side = |s: Option<Option<&str>>| {
            s.map(|n| n.map_or(EntityName::Default, |n| EntityName::Named(n.to_owned())))
        };
        QuotaEntity {
            user: side(user),
            client_id: side(client),
        }
    }

    fn set(quotas: &mut ClientQuotas, e: QuotaEntity, key: &str, v: f64) {
        alter(
            quotas,
            &QuotaAlteration {
                entity: e,
                ops: vec![(key.to_owned(), Some(v))],
            },
        )
        .unwrap();
    }

    #[test]
    fn the_most_specific_entity_with_the_key_wins_in_kafkas_order() {
        let mut q = ClientQuotas::new();
        let p = |q: &ClientQuotas, u: &str, c: &str| resolve(q, u, c)[0].clone();
        set(&mut q, entity(None, Some(None)), "producer_byte_rate", 8.0);
        assert_eq!(p(&q, "alice", "app").unwrap().1, 8.0);
        set(
            &mut q,
            entity(None, Some(Some("app"))),
            "producer_byte_rate",
            7.0,
        );
        assert_eq!(p(&q, "alice", "app").unwrap().1, 7.0);
        assert_eq!(p(&q, "alice", "other").unwrap().1, 8.0);
        set(&mut q, entity(Some(None), None), "producer_byte_rate", 6.0);
        assert_eq!(p(&q, "alice", "app").unwrap().1, 6.0);
        set(
            &mut q,
            entity(Some(None), Some(None)),
            "producer_byte_rate",
            5.0,
        );
        set(
            &mut q,
            entity(Some(None), Some(Some("app"))),
            "producer_byte_rate",
            4.0,
        );
        assert_eq!(p(&q, "alice", "app").unwrap().1, 4.0);
        assert_eq!(p(&q, "alice", "other").unwrap().1, 5.0);
        set(
            &mut q,
            entity(Some(Some("alice")), None),
            "producer_byte_rate",
            3.0,
        );
        set(
            &mut q,
            entity(Some(Some("alice")), Some(None)),
            "producer_byte_rate",
            2.0,
        );
        set(
            &mut q,
            entity(Some(Some("alice")), Some(Some("app"))),
            "producer_byte_rate",
            1.0,
        );
        let (e, v) = p(&q, "alice", "app").unwrap();
        assert_eq!((e.as_str(), v), ("user=alice,client-id=app", 1.0));
        assert_eq!(p(&q, "alice", "other").unwrap().1, 2.0);
        assert_eq!(p(&q, "bob", "app").unwrap().1, 4.0);
        // Another key is resolved on its own: none is set.
        assert!(resolve(&q, "alice", "app")[1].is_none());
        // Removing the last key removes the entity.
        alter(
            &mut q,
            &QuotaAlteration {
                entity: entity(Some(Some("alice")), Some(Some("app"))),
                ops: vec![("producer_byte_rate".into(), None)],
            },
        )
        .unwrap();
        assert!(!q.contains_key("user=alice,client-id=app"));
        assert_eq!(p(&q, "alice", "app").unwrap().1, 2.0);
    }

    #[test]
    fn kafkas_refusals() {
        let mut q = ClientQuotas::new();
        let e = entity(Some(Some("u")), None);
        let refuse = |q: &mut ClientQuotas, ops: Vec<(&str, Option<f64>)>| {
            alter(
                q,
                &QuotaAlteration {
                    entity: e.clone(),
                    ops: ops.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                },
            )
            .unwrap_err()
        };
        assert_eq!(
            refuse(&mut q, vec![("producer_byte_rate", Some(0.0))]),
            QuotaError::NotPositive("producer_byte_rate".into())
        );
        assert_eq!(
            refuse(&mut q, vec![("producer_byte_rate", Some(1.5))]),
            QuotaError::Fractional("producer_byte_rate".into())
        );
        assert_eq!(
            refuse(&mut q, vec![("connection_creation_rate", Some(1.0))]),
            QuotaError::UnknownKey("connection_creation_rate".into())
        );
        assert_eq!(
            refuse(
                &mut q,
                vec![
                    ("request_percentage", Some(1.0)),
                    ("request_percentage", None)
                ]
            ),
            QuotaError::DuplicateKey("request_percentage".into())
        );
        assert!(q.is_empty(), "nothing applied");
        assert!(alter(
            &mut q,
            &QuotaAlteration {
                entity: e.clone(),
                ops: vec![("request_percentage".into(), Some(12.5))]
            }
        )
        .unwrap());
        assert_eq!(
            QuotaEntity::from_components(&[("ip".into(), Some("1.2.3.4".into()))]),
            Err(QuotaError::IpNotBuilt)
        );
        assert_eq!(
            QuotaEntity::from_components(&[
                ("user".into(), Some("a".into())),
                ("user".into(), None)
            ]),
            Err(QuotaError::DuplicateEntity("user".into()))
        );
        assert_eq!(
            QuotaEntity::from_components(&[]),
            Err(QuotaError::EmptyEntity)
        );
    }

    #[test]
    fn describe_filters_and_storage_keys() {
        let mut q = ClientQuotas::new();
        for e in [
            entity(Some(Some("a/b")), None),
            entity(Some(None), Some(Some("c"))),
            entity(None, Some(None)),
        ] {
            set(&mut q, e, "consumer_byte_rate", 100.0);
        }
        let users = matching(&q, &[("user".into(), Match::Specified)], false);
        assert_eq!(users.len(), 2);
        let users_only = matching(&q, &[("user".into(), Match::Specified)], true);
        assert_eq!(users_only.len(), 1);
        assert_eq!(
            matching(&q, &[("client-id".into(), Match::Default)], false).len(),
            1
        );
        assert_eq!(
            matching(&q, &[("user".into(), Match::Exact("a/b".into()))], true)[0]
                .entity
                .storage_key(),
            "user=a%2Fb"
        );
        assert_eq!(
            entity(Some(None), Some(Some("c"))).storage_key(),
            "user=<default>,client-id=c"
        );
    }
}
