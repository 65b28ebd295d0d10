//! Dynamic broker configs: the broker configs that change at run time, Kafka's way —
//! IncrementalAlterConfigs / AlterConfigs on a broker (its id) or on the cluster default (the
//! empty name), kept in the cluster metadata and applied by every shard with the next snapshot.
//! A broker's own value wins over the cluster default, which wins over the built-in default.
//! Every other broker config is static (the config file or `--set`, then a restart).

use std::collections::BTreeMap;

use super::ConfigType;

/// A dynamic broker config: name, type, built-in default, documentation.
pub struct DynamicDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    pub doc: &'static str,
}

pub const LEADER_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_THROTTLED_RATE: &str = "follower.replication.throttled.rate";
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";
pub const LOG_CLEANUP_POLICY: &str = "log.cleanup.policy";
pub const BACKGROUND_THREADS: &str = "background.threads";
pub const KERBEROS_MIN_RELOGIN: &str = "sasl.kerberos.min.time.before.relogin";

/// Kafka's "unlimited" rate (`Long.MAX_VALUE`).
const UNLIMITED: &str = "9223372036854775807";

pub const DYNAMIC_BROKER_CONFIGS: &[DynamicDef] = &[
    DynamicDef {
        name: LEADER_THROTTLED_RATE,
        kind: ConfigType::Long,
        default: UNLIMITED,
        doc: "Bytes per second a leader shard sends to out-of-sync followers of the replicas its topics list in leader.replication.throttled.replicas.",
    },
    DynamicDef {
        name: FOLLOWER_THROTTLED_RATE,
        kind: ConfigType::Long,
        default: UNLIMITED,
        doc: "Bytes per second a follower shard fetches for its out-of-sync replicas its topics list in follower.replication.throttled.replicas.",
    },
    DynamicDef {
        name: UNCLEAN_LEADER_ELECTION,
        kind: ConfigType::Boolean,
        default: "false",
        doc: "The cluster default of the topic config: whether a replica outside the ISR may become leader when no in-sync one is left (the controller reads the cluster-wide value).",
    },
    DynamicDef {
        name: LOG_CLEANUP_POLICY,
        kind: ConfigType::List,
        default: "delete",
        doc: "The cleanup.policy of topics that set none (delete and/or compact): a change applies to their partitions with the next cluster metadata.",
    },
    DynamicDef {
        name: BACKGROUND_THREADS,
        kind: ConfigType::Int,
        default: "10",
        doc: "Kafka's background thread pool size. Accepted (1 or more) and shown, for Kafka's tools and runbooks; ringlog has no such pool (one thread per core does the background work), so it changes nothing.",
    },
    DynamicDef {
        name: KERBEROS_MIN_RELOGIN,
        kind: ConfigType::Long,
        default: "60000",
        doc: "Kafka's Kerberos (GSSAPI) relogin interval. Accepted (0 or more) and shown, for Kafka's tools and runbooks; ringlog serves no GSSAPI listener, so it changes nothing.",
    },
];

/// Why a dynamic broker config change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicConfigError {
    #[error("'{0}' cannot change at run time in ringlog; dynamic broker configs: {list}. Set it in the config file or with --set and restart", list = dynamic_names())]
    Static(String),
    #[error("'{0}' throttles replica moves between a broker's log directories; ringlog keeps one log directory per node, so there are none (only deleting it is accepted)")]
    NoLogDirMoves(String),
    #[error("config '{key}' = '{value}': {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: &'static str,
    },
}

fn dynamic_names() -> String {
    DYNAMIC_BROKER_CONFIGS
        .iter()
        .map(|d| d.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a broker's (or the cluster default's) dynamic configs as they would be after a change.
pub fn validate(configs: &BTreeMap<String, String>) -> Result<(), DynamicConfigError> {
    for (key, value) in configs {
        let invalid = |reason| DynamicConfigError::Invalid {
            key: key.clone(),
            value: value.clone(),
            reason,
        };
        match key.as_str() {
            LEADER_THROTTLED_RATE | FOLLOWER_THROTTLED_RATE => {
                whole_in(value, 0, i64::MAX)
                    .ok_or_else(|| invalid("a number of bytes per second, 0 or more"))?;
            }
            UNCLEAN_LEADER_ELECTION if value == "true" || value == "false" => {}
            UNCLEAN_LEADER_ELECTION => return Err(invalid("true or false")),
            LOG_CLEANUP_POLICY => {
                iouring_log::Compaction::parse_policy(value)
                    .ok_or_else(|| invalid("a list of delete and/or compact"))?;
            }
            BACKGROUND_THREADS => {
                whole_in(value, 1, i64::from(i32::MAX))
                    .ok_or_else(|| invalid("a number of threads, 1 or more"))?;
            }
            KERBEROS_MIN_RELOGIN => {
                whole_in(value, 0, i64::MAX)
                    .ok_or_else(|| invalid("a number of milliseconds, 0 or more"))?;
            }
            "replica.alter.log.dirs.io.max.bytes.per.second" => {
                return Err(DynamicConfigError::NoLogDirMoves(key.clone()))
            }
            _ => return Err(DynamicConfigError::Static(key.clone())),
        }
    }
    Ok(())
}

/// `value` as a whole number in `min..=max`.
fn whole_in(value: &str, min: i64, max: i64) -> Option<i64> {
    value
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
}

/// A rate config's value in bytes per second; `None`: unlimited (unset, or Kafka's
/// `Long.MAX_VALUE`).
pub fn rate(value: Option<&str>) -> Option<u64> {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v < i64::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_the_throttle_rates_are_dynamic() {
        assert!(validate(&map(&[(LEADER_THROTTLED_RATE, "1000000")])).is_ok());
        assert!(matches!(
            validate(&map(&[(FOLLOWER_THROTTLED_RATE, "-1")])),
            Err(DynamicConfigError::Invalid { .. })
        ));
        let e = validate(&map(&[("log.retention.ms", "1")])).unwrap_err();
        assert!(e.to_string().contains("restart"), "{e}");
        assert!(matches!(
            validate(&map(&[(
                "replica.alter.log.dirs.io.max.bytes.per.second",
                "1"
            )])),
            Err(DynamicConfigError::NoLogDirMoves(_))
        ));
        assert!(validate(&map(&[(LOG_CLEANUP_POLICY, "delete,compact")])).is_ok());
        assert!(matches!(
            validate(&map(&[(LOG_CLEANUP_POLICY, "delete,shred")])),
            Err(DynamicConfigError::Invalid { .. })
        ));
        assert!(validate(&map(&[
            (BACKGROUND_THREADS, "9"),
            (KERBEROS_MIN_RELOGIN, "58000")
        ]))
        .is_ok());
        assert!(validate(&map(&[(BACKGROUND_THREADS, "0")])).is_err());
        assert_eq!(rate(Some("9223372036854775807")), None);
        assert_eq!(rate(Some("5")), Some(5));
        assert_eq!(rate(None), None);
    }
}
