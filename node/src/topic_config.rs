//! Topic-level configs, parsed once into one typed value and validated with Kafka's rules and
//! the log's own (`LogConfig::validate`, the check `Log::open` makes): a topic CreateTopics
//! accepts is a topic whose partitions open.
//!
//! Kafka's bounds: `segment.bytes` an INT >= 14 (ours: the segment limits of `iouring-log`),
//! `segment.ms` >= 1, `retention.ms` and `retention.bytes` >= -1 (-1: unlimited),
//! `flush.messages` >= 1, `flush.ms` >= 0, `index.interval.bytes` >= 0 (0: an entry per batch),
//! `max.message.bytes` >= 0, `cleanup.policy` a list of `delete` and `compact`,
//! `min.cleanable.dirty.ratio` in [0, 1], `min.compaction.lag.ms` >= 0,
//! `delete.retention.ms` >= 0, `max.compaction.lag.ms` >= 1, `min.insync.replicas` >= 1, `unclean.leader.election.enable` `true` or `false` (read by the
//! controller when a partition's ISR and ELR are all gone).

use std::collections::BTreeMap;

use iouring_log::records::Codec;
use iouring_log::Compaction;
use iouring_log::LogConfig;

use crate::config::ConfigType;
pub use crate::partition::compression::TopicCompression;
use crate::partition::timestamps::{TimestampPolicy, TimestampType};

/// Per-topic configs a topic may override (Kafka's topic-level names).
pub const TOPIC_CONFIGS: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "retention.ms",
    "retention.bytes",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "segment.index.bytes",
    "segment.jitter.ms",
    "preallocate",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
];

/// Tiered storage's topic configs (KIP-405), accepted only at the value that keeps every
/// segment on the broker: ringlog has no remote tier.
const TIERED: &[(&str, &str)] = &[
    ("remote.storage.enable", "false"),
    ("local.retention.ms", "-2"),
    ("local.retention.bytes", "-2"),
    ("remote.log.copy.disable", "false"),
    ("remote.log.delete.on.disable", "false"),
];

/// What DescribeConfigs says of a topic config: the broker property it defaults to (its
/// synonym), the default when the broker has no such property, its type and documentation.
pub struct TopicConfigDef {
    pub name: &'static str,
    pub broker: &'static str,
    /// The value when `broker` is not one of ringlog's properties.
    pub fixed_default: &'static str,
    pub kind: ConfigType,
    pub doc: &'static str,
}

/// Every topic config, described; the same names as [`TOPIC_CONFIGS`].
pub const TOPIC_CONFIG_DEFS: &[TopicConfigDef] = &[
    TopicConfigDef {
        name: "segment.bytes",
        broker: "log.segment.bytes",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "Segment size at which the active segment rolls.",
    },
    TopicConfigDef {
        name: "segment.ms",
        broker: "log.roll.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "Age at which the active segment rolls.",
    },
    TopicConfigDef {
        name: "retention.ms",
        broker: "log.retention.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "Segments whose newest record is older are deleted (-1: no limit).",
    },
    TopicConfigDef {
        name: "retention.bytes",
        broker: "log.retention.bytes",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "A partition larger than this deletes its oldest segments (-1: no limit).",
    },
    TopicConfigDef {
        name: "flush.messages",
        broker: "log.flush.interval.messages",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "fdatasync after this many messages; produce answers wait for it (-1: never).",
    },
    TopicConfigDef {
        name: "flush.ms",
        broker: "log.flush.interval.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "fdatasync when the oldest unsynced message is this old (-1: never).",
    },
    TopicConfigDef {
        name: "index.interval.bytes",
        broker: "log.index.interval.bytes",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "Bytes between offset index entries.",
    },
    TopicConfigDef {
        name: "max.message.bytes",
        broker: "message.max.bytes",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "Largest record batch accepted.",
    },
    TopicConfigDef {
        name: "cleanup.policy",
        broker: "log.cleanup.policy",
        fixed_default: "",
        kind: ConfigType::List,
        doc: "delete: retention deletes old segments; compact: the log cleaner keeps each key's latest record; both: compact, and delete by retention.",
    },
    TopicConfigDef {
        name: "min.cleanable.dirty.ratio",
        broker: "log.cleaner.min.cleanable.ratio",
        fixed_default: "",
        kind: ConfigType::Double,
        doc: "A compacted log is cleaned when its uncleaned bytes are at least this share of its cleanable bytes.",
    },
    TopicConfigDef {
        name: "min.compaction.lag.ms",
        broker: "log.cleaner.min.compaction.lag.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "Records younger than this are never compacted.",
    },
    TopicConfigDef {
        name: "max.compaction.lag.ms",
        broker: "log.cleaner.max.compaction.lag.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "A log with an uncleaned segment older than this is cleaned whatever its dirty ratio.",
    },
    TopicConfigDef {
        name: "delete.retention.ms",
        broker: "log.cleaner.delete.retention.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "How long a tombstone stays in a compacted log once cleaned.",
    },
    TopicConfigDef {
        name: "file.delete.delay.ms",
        broker: "log.segment.delete.delay.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "How long the files of segments the log cleaner replaced stay for reads that hold them.",
    },
    TopicConfigDef {
        name: "min.insync.replicas",
        broker: "min.insync.replicas",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "In-sync replicas an acks=all produce needs (fewer: NOT_ENOUGH_REPLICAS).",
    },
    TopicConfigDef {
        name: "unclean.leader.election.enable",
        broker: "unclean.leader.election.enable",
        fixed_default: "false",
        kind: ConfigType::Boolean,
        doc: "Whether a replica outside the ISR may become leader when no in-sync one is left.",
    },
    TopicConfigDef {
        name: "message.timestamp.type",
        broker: "log.message.timestamp.type",
        fixed_default: "",
        kind: ConfigType::String,
        doc:
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch on append.",
    },
    TopicConfigDef {
        name: "message.timestamp.before.max.ms",
        broker: "log.message.timestamp.before.max.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "How far in the past a CreateTime record's timestamp may be (INVALID_TIMESTAMP).",
    },
    TopicConfigDef {
        name: "message.timestamp.after.max.ms",
        broker: "log.message.timestamp.after.max.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "How far in the future a CreateTime record's timestamp may be (INVALID_TIMESTAMP).",
    },
    TopicConfigDef {
        name: "leader.replication.throttled.replicas",
        broker: "",
        fixed_default: "",
        kind: ConfigType::List,
        doc: "Replicas (partition:broker, or * for all) whose leader-side replication to out-of-sync followers is held to the leader broker's leader.replication.throttled.rate.",
    },
    TopicConfigDef {
        name: "follower.replication.throttled.replicas",
        broker: "",
        fixed_default: "",
        kind: ConfigType::List,
        doc: "Replicas (partition:broker, or * for all) whose fetches, while out of sync, are held to the follower broker's follower.replication.throttled.rate.",
    },
    TopicConfigDef {
        name: "compression.type",
        broker: "compression.type",
        fixed_default: "",
        kind: ConfigType::String,
        doc: "The codec batches are stored with: uncompressed, gzip, snappy, lz4, zstd, or producer (as the producer sent them); a batch sent with another codec is recompressed on the broker.",
    },
    TopicConfigDef {
        name: "compression.gzip.level",
        broker: "compression.gzip.level",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "The level of gzip when compression.type is gzip: 1 to 9, or -1 (6).",
    },
    TopicConfigDef {
        name: "compression.lz4.level",
        broker: "compression.lz4.level",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "The level of lz4 when compression.type is lz4: 1 to 17 (above 12 compresses as 12).",
    },
    TopicConfigDef {
        name: "compression.zstd.level",
        broker: "compression.zstd.level",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "The level of zstd when compression.type is zstd: -131072 to 22.",
    },
    TopicConfigDef {
        name: "segment.index.bytes",
        broker: "log.index.size.max.bytes",
        fixed_default: "",
        kind: ConfigType::Int,
        doc: "The largest offset or time index of a segment; the segment rolls when one is full.",
    },
    TopicConfigDef {
        name: "segment.jitter.ms",
        broker: "log.roll.jitter.ms",
        fixed_default: "",
        kind: ConfigType::Long,
        doc: "Each segment rolls up to this much before segment.ms, so partitions do not roll together.",
    },
    TopicConfigDef {
        name: "preallocate",
        broker: "log.preallocate",
        fixed_default: "",
        kind: ConfigType::Boolean,
        doc: "Allocate a new segment's file to segment.bytes at once.",
    },
    TopicConfigDef {
        name: "remote.storage.enable",
        broker: "",
        fixed_default: "false",
        kind: ConfigType::Boolean,
        doc: "Tiered storage (KIP-405) is not built in ringlog: only false.",
    },
    TopicConfigDef {
        name: "local.retention.ms",
        broker: "",
        fixed_default: "-2",
        kind: ConfigType::Long,
        doc: "Tiered storage (KIP-405) is not built in ringlog: only -2 (retention.ms applies).",
    },
    TopicConfigDef {
        name: "local.retention.bytes",
        broker: "",
        fixed_default: "-2",
        kind: ConfigType::Long,
        doc: "Tiered storage (KIP-405) is not built in ringlog: only -2 (retention.bytes applies).",
    },
    TopicConfigDef {
        name: "remote.log.copy.disable",
        broker: "",
        fixed_default: "false",
        kind: ConfigType::Boolean,
        doc: "Tiered storage (KIP-405) is not built in ringlog: only false.",
    },
    TopicConfigDef {
        name: "remote.log.delete.on.disable",
        broker: "",
        fixed_default: "false",
        kind: ConfigType::Boolean,
        doc: "Tiered storage (KIP-405) is not built in ringlog: only false.",
    },
];

/// A topic config refused: the key, the value and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicConfigError {
    #[error("unknown topic config '{key}'; supported: {}", TOPIC_CONFIGS.join(", "))]
    Unknown { key: String },
    #[error("config '{key}' = '{value}': {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
    #[error("config '{key}' = '{value}': {what} is not built in ringlog (accepted: '{accepted}')")]
    NotBuilt {
        key: String,
        value: String,
        what: &'static str,
        accepted: &'static str,
    },
    #[error("{0}")]
    Log(#[from] iouring_log::LogConfigError),
}

/// The configs a topic overrides, typed. `None`: the broker default applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicOverrides {
    segment_bytes: Option<u64>,
    segment_ms: Option<i64>,
    /// `Some(None)`: unlimited.
    retention_ms: Option<Option<i64>>,
    retention_bytes: Option<Option<u64>>,
    flush_messages: Option<u64>,
    flush_ms: Option<i64>,
    index_interval_bytes: Option<u64>,
    max_message_bytes: Option<usize>,
    min_insync_replicas: Option<usize>,
    /// `cleanup.policy`: (delete, compact).
    cleanup_policy: Option<(bool, bool)>,
    min_cleanable_dirty_ratio: Option<f64>,
    min_compaction_lag_ms: Option<i64>,
    /// `Some(None)`: no bound (Long.MAX).
    max_compaction_lag_ms: Option<Option<i64>>,
    delete_retention_ms: Option<i64>,
    file_delete_delay_ms: Option<i64>,
    timestamp_type: Option<TimestampType>,
    /// `Some(None)`: no bound (Long.MAX, as Kafka writes it).
    timestamp_before_max_ms: Option<Option<i64>>,
    timestamp_after_max_ms: Option<Option<i64>>,
    segment_index_bytes: Option<u64>,
    segment_jitter_ms: Option<i64>,
    preallocate: Option<bool>,
    /// `Some(None)`: `producer`.
    compression_type: Option<Option<Codec>>,
    gzip_level: Option<i32>,
    lz4_level: Option<i32>,
    zstd_level: Option<i32>,
}

/// The effective settings of a topic's partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub log: LogConfig,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `min.insync.replicas`: an `acks=all` produce needs this many in-sync replicas.
    pub min_insync_replicas: usize,
    /// `message.timestamp.*`.
    pub timestamps: TimestampPolicy,
    /// `compression.type` and its levels.
    pub compression: TopicCompression,
}

/// The broker-wide defaults a topic's overrides apply to.
#[derive(Debug, Clone)]
pub struct TopicDefaults {
    pub log: LogConfig,
    pub max_message_bytes: usize,
    pub min_insync_replicas: usize,
    pub timestamps: TimestampPolicy,
    pub compression: TopicCompression,
}

impl TopicOverrides {
    /// Parses every override, refusing unknown keys and values out of Kafka's bounds.
    pub fn parse(configs: &BTreeMap<String, String>) -> Result<TopicOverrides, TopicConfigError> {
        let mut o = TopicOverrides::default();
        for (key, value) in configs {
            let int = |min: i64| parse_at_least(key, value, min);
            let level = |codec: Codec| {
                TopicCompression::parse_level(codec, value).map_err(|why| invalid(key, value, &why))
            };
            match key.as_str() {
                "segment.bytes" => o.segment_bytes = Some(int(14)? as u64),
                "segment.ms" => o.segment_ms = Some(int(1)?),
                "retention.ms" => o.retention_ms = Some(unlimited_if_negative(int(-1)?)),
                "retention.bytes" => {
                    o.retention_bytes = Some(unlimited_if_negative(int(-1)?).map(|v| v as u64))
                }
                "flush.messages" => o.flush_messages = Some(int(1)? as u64),
                "flush.ms" => o.flush_ms = Some(int(0)?),
                // Kafka's 0 indexes every batch; the log's smallest interval does the same.
                "index.interval.bytes" => o.index_interval_bytes = Some(int(0)?.max(1) as u64),
                "max.message.bytes" => o.max_message_bytes = Some(int(0)? as usize),
                "min.insync.replicas" => o.min_insync_replicas = Some(int(1)? as usize),
                "message.timestamp.type" => {
                    o.timestamp_type = Some(
                        TimestampType::parse(value)
                            .ok_or_else(|| invalid(key, value, "CreateTime or LogAppendTime"))?,
                    )
                }
                "message.timestamp.before.max.ms" => {
                    o.timestamp_before_max_ms = Some(Some(int(0)?).filter(|v| *v != i64::MAX))
                }
                "message.timestamp.after.max.ms" => {
                    o.timestamp_after_max_ms = Some(Some(int(0)?).filter(|v| *v != i64::MAX))
                }
                "unclean.leader.election.enable" if value == "true" || value == "false" => {}
                "unclean.leader.election.enable" => {
                    return Err(invalid(key, value, "true or false"))
                }
                "cleanup.policy" => {
                    o.cleanup_policy =
                        Some(Compaction::parse_policy(value).ok_or_else(|| {
                            invalid(key, value, "a list of delete and/or compact")
                        })?)
                }
                "min.cleanable.dirty.ratio" => {
                    o.min_cleanable_dirty_ratio = Some(
                        Compaction::parse_ratio(value)
                            .ok_or_else(|| invalid(key, value, "a number from 0 to 1"))?,
                    )
                }
                "min.compaction.lag.ms" => o.min_compaction_lag_ms = Some(int(0)?),
                "max.compaction.lag.ms" => {
                    o.max_compaction_lag_ms = Some(Some(int(1)?).filter(|v| *v != i64::MAX))
                }
                "delete.retention.ms" => o.delete_retention_ms = Some(int(0)?),
                "file.delete.delay.ms" => o.file_delete_delay_ms = Some(int(0)?),
                "segment.index.bytes" => o.segment_index_bytes = Some(int(4)? as u64),
                "segment.jitter.ms" => o.segment_jitter_ms = Some(int(0)?),
                "preallocate" => o.preallocate = Some(boolean(key, value)?),
                "compression.type" => {
                    o.compression_type =
                        Some(TopicCompression::parse_type(value).ok_or_else(|| {
                            invalid(
                                key,
                                value,
                                "one of uncompressed, gzip, snappy, lz4, zstd, producer",
                            )
                        })?)
                }
                "compression.gzip.level" => o.gzip_level = Some(level(Codec::Gzip)?),
                "compression.lz4.level" => o.lz4_level = Some(level(Codec::Lz4)?),
                "compression.zstd.level" => o.zstd_level = Some(level(Codec::Zstd)?),
                k if TIERED.iter().any(|(t, _)| *t == k) => {
                    let accepted = TIERED
                        .iter()
                        .find(|(t, _)| *t == k)
                        .map(|(_, v)| *v)
                        .expect("listed");
                    if value.trim() != accepted {
                        return Err(TopicConfigError::NotBuilt {
                            key: key.clone(),
                            value: value.clone(),
                            what: "tiered storage (KIP-405)",
                            accepted,
                        });
                    }
                }
                "leader.replication.throttled.replicas"
                | "follower.replication.throttled.replicas" => {
                    ThrottledReplicas::parse(value).ok_or_else(|| {
                        invalid(key, value, "* or a list of partition:broker pairs")
                    })?;
                }
                _ => return Err(TopicConfigError::Unknown { key: key.clone() }),
            }
        }
        Ok(o)
    }

    /// These overrides on top of the broker's defaults, validated as `Log::open` validates.
    pub fn resolve(&self, defaults: &TopicDefaults) -> Result<TopicConfig, TopicConfigError> {
        let d = defaults.log;
        let log = LogConfig {
            segment_bytes: self.segment_bytes.unwrap_or(d.segment_bytes),
            segment_ms: self.segment_ms.unwrap_or(d.segment_ms),
            index_interval_bytes: self.index_interval_bytes.unwrap_or(d.index_interval_bytes),
            segment_index_bytes: self.segment_index_bytes.unwrap_or(d.segment_index_bytes),
            segment_jitter_ms: self.segment_jitter_ms.unwrap_or(d.segment_jitter_ms),
            preallocate: self.preallocate.unwrap_or(d.preallocate),
            flush_messages: self.flush_messages.or(d.flush_messages),
            flush_ms: self.flush_ms.or(d.flush_ms),
            retention_bytes: self.retention_bytes.unwrap_or(d.retention_bytes),
            retention_ms: self.retention_ms.unwrap_or(d.retention_ms),
            compaction: {
                let c = d.compaction;
                let (delete, compact) = self.cleanup_policy.unwrap_or((c.delete, c.compact));
                Compaction {
                    delete,
                    compact,
                    min_cleanable_dirty_ratio: self
                        .min_cleanable_dirty_ratio
                        .unwrap_or(c.min_cleanable_dirty_ratio),
                    min_compaction_lag_ms: self
                        .min_compaction_lag_ms
                        .unwrap_or(c.min_compaction_lag_ms),
                    max_compaction_lag_ms: self
                        .max_compaction_lag_ms
                        .unwrap_or(c.max_compaction_lag_ms),
                    delete_retention_ms: self.delete_retention_ms.unwrap_or(c.delete_retention_ms),
                    file_delete_delay_ms: self
                        .file_delete_delay_ms
                        .unwrap_or(c.file_delete_delay_ms),
                }
            },
        };
        log.validate()?;
        Ok(TopicConfig {
            log,
            max_message_bytes: self.max_message_bytes.unwrap_or(defaults.max_message_bytes),
            min_insync_replicas: self
                .min_insync_replicas
                .unwrap_or(defaults.min_insync_replicas),
            timestamps: TimestampPolicy {
                kind: self.timestamp_type.unwrap_or(defaults.timestamps.kind),
                before_max_ms: self
                    .timestamp_before_max_ms
                    .unwrap_or(defaults.timestamps.before_max_ms),
                after_max_ms: self
                    .timestamp_after_max_ms
                    .unwrap_or(defaults.timestamps.after_max_ms),
            },
            compression: {
                let c = defaults.compression;
                TopicCompression {
                    codec: self.compression_type.unwrap_or(c.codec),
                    gzip_level: self.gzip_level.unwrap_or(c.gzip_level),
                    lz4_level: self.lz4_level.unwrap_or(c.lz4_level),
                    zstd_level: self.zstd_level.unwrap_or(c.zstd_level),
                }
            },
        })
    }
}

/// Parses and validates `configs` against `LogConfig::default()` (what the control plane can
/// check without a broker's settings: every bound above is on the value alone).
pub fn validate(configs: &BTreeMap<String, String>) -> Result<(), TopicConfigError> {
    let defaults = TopicDefaults {
        log: LogConfig::default(),
        max_message_bytes: 1,
        min_insync_replicas: 1,
        timestamps: crate::config::BrokerConfig::default_timestamps(),
        compression: TopicCompression::default(),
    };
    TopicOverrides::parse(configs)?.resolve(&defaults)?;
    Ok(())
}

fn parse_at_least(key: &str, value: &str, min: i64) -> Result<i64, TopicConfigError> {
    match value.trim().parse::<i64>() {
        Ok(v) if v >= min => Ok(v),
        Ok(_) => Err(invalid(key, value, &format!("must be at least {min}"))),
        Err(_) => Err(invalid(key, value, "not a whole number")),
    }
}

fn boolean(key: &str, value: &str) -> Result<bool, TopicConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn unlimited_if_negative(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

/// A topic's `leader.replication.throttled.replicas` or `follower.replication.throttled.replicas`
/// (Kafka's format: `*`, or `partition:broker` pairs separated by commas).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    #[default]
    None,
    All,
    Listed(std::collections::BTreeSet<(i32, i32)>),
}

impl ThrottledReplicas {
    /// `None` when the value is not in Kafka's format.
    pub fn parse(value: &str) -> Option<ThrottledReplicas> {
        let value = value.trim();
        if value == "*" {
            return Some(ThrottledReplicas::All);
        }
        let mut listed = std::collections::BTreeSet::new();
        for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (p, b) = pair.split_once(':')?;
            let p: i32 = p.trim().parse().ok().filter(|p| *p >= 0)?;
            let b: i32 = b.trim().parse().ok().filter(|b| *b >= 0)?;
            listed.insert((p, b));
        }
        Some(if listed.is_empty() {
            ThrottledReplicas::None
        } else {
            ThrottledReplicas::Listed(listed)
        })
    }

    /// From a topic's overrides (`key` one of the two names); unset or malformed: none.
    pub fn of(configs: &BTreeMap<String, String>, key: &str) -> ThrottledReplicas {
        configs
            .get(key)
            .and_then(|v| ThrottledReplicas::parse(v))
            .unwrap_or_default()
    }

    /// Whether the replica of `partition` on `broker` is throttled.
    pub fn contains(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(l) => l.contains(&(partition, broker)),
        }
    }
}

fn invalid(key: &str, value: &str, reason: &str) -> TopicConfigError {
    TopicConfigError::Invalid {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iouring_log::records::Compression;

    fn defaults(max_message_bytes: usize) -> TopicDefaults {
        TopicDefaults {
            log: LogConfig::default(),
            max_message_bytes,
            min_insync_replicas: 1,
            timestamps: crate::config::BrokerConfig::default_timestamps(),
            compression: TopicCompression::default(),
        }
    }

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_bounds_and_unlimited_values() {
        let o = TopicOverrides::parse(&configs(&[
            ("retention.ms", "-1"),
            ("retention.bytes", "-1"),
            ("flush.messages", "1"),
            ("flush.ms", "0"),
            ("index.interval.bytes", "0"),
            ("segment.ms", "60000"),
            ("min.insync.replicas", "2"),
        ]))
        .unwrap();
        let defaults = defaults(1000);
        let c = o.resolve(&defaults).unwrap();
        assert_eq!(c.min_insync_replicas, 2);
        assert_eq!(c.log.retention_ms, None);
        assert_eq!(c.log.retention_bytes, None);
        assert_eq!(c.log.flush_messages, Some(1));
        assert_eq!(c.log.flush_ms, Some(0));
        assert_eq!(c.log.index_interval_bytes, 1);
        assert_eq!(c.log.segment_ms, 60_000);
        assert_eq!(c.max_message_bytes, 1000);
    }

    #[test]
    fn cleanup_policies_and_compaction_settings() {
        assert_eq!(Compaction::parse_policy("compact"), Some((false, true)));
        assert_eq!(
            Compaction::parse_policy("compact,delete"),
            Some((true, true))
        );
        assert_eq!(
            Compaction::parse_policy(" delete , compact"),
            Some((true, true))
        );
        let c = TopicOverrides::parse(&configs(&[
            ("cleanup.policy", "compact"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("max.compaction.lag.ms", "9223372036854775807"),
            ("delete.retention.ms", "0"),
            ("file.delete.delay.ms", "250"),
        ]))
        .unwrap()
        .resolve(&defaults(1))
        .unwrap();
        let k = c.log.compaction;
        assert!(k.compact && !k.delete);
        assert_eq!(k.min_cleanable_dirty_ratio, 0.25);
        assert_eq!((k.max_compaction_lag_ms, k.delete_retention_ms), (None, 0));
        assert_eq!(k.file_delete_delay_ms, 250);
        // Retention applies only with delete in the policy.
        assert_eq!(c.log.retention(), (None, None));
    }

    #[test]
    fn values_kafka_refuses_are_refused_with_key_and_value() {
        for (k, v) in [
            ("segment.ms", "-1"),
            ("segment.ms", "0"),
            ("segment.bytes", "13"),
            ("segment.bytes", "3000000000"),
            ("flush.messages", "0"),
            ("flush.messages", "-1"),
            ("flush.ms", "-5"),
            ("retention.ms", "-2"),
            ("max.message.bytes", "ten"),
            ("cleanup.policy", "compaction"),
            ("cleanup.policy", ""),
            ("cleanup.policy", "delete,"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.cleanable.dirty.ratio", "half"),
            ("min.compaction.lag.ms", "-1"),
            ("max.compaction.lag.ms", "0"),
            ("delete.retention.ms", "-1"),
            ("file.delete.delay.ms", "-1"),
            ("no.such.config", "1"),
            ("compression.type", "brotli"),
            ("compression.type", "none"),
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "10"),
            ("compression.lz4.level", "18"),
            ("compression.zstd.level", "23"),
            ("compression.zstd.level", "-131073"),
            ("segment.index.bytes", "3"),
            ("segment.jitter.ms", "-1"),
            ("preallocate", "yes"),
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "1000"),
            ("local.retention.bytes", "-1"),
            ("remote.log.copy.disable", "true"),
            ("remote.log.delete.on.disable", "true"),
        ] {
            let e = validate(&configs(&[(k, v)])).expect_err(&format!("{k}={v} accepted"));
            let msg = e.to_string();
            assert!(msg.contains(k), "{msg}");
        }
    }

    #[test]
    fn kafka_4_topic_configs_are_honoured_or_refused_naming_what_is_not_built() {
        let defaults = defaults(1);
        let c = TopicOverrides::parse(&configs(&[
            ("compression.type", "zstd"),
            ("compression.zstd.level", "-5"),
            ("compression.gzip.level", "-1"),
            ("segment.index.bytes", "4096"),
            ("segment.jitter.ms", "1000"),
            ("preallocate", "true"),
            ("remote.storage.enable", "false"),
            ("local.retention.ms", "-2"),
        ]))
        .unwrap()
        .resolve(&defaults)
        .unwrap();
        assert_eq!(c.compression.codec, Some(Codec::Zstd));
        assert_eq!(
            c.compression.target(Codec::None),
            Some(Compression {
                codec: Codec::Zstd,
                level: Some(-5)
            })
        );
        assert_eq!(c.compression.target(Codec::Zstd), None, "already zstd");
        assert_eq!(
            (
                c.log.segment_index_bytes,
                c.log.segment_jitter_ms,
                c.log.preallocate
            ),
            (4096, 1000, true)
        );
        let producer = TopicOverrides::parse(&configs(&[("compression.type", "producer")]))
            .unwrap()
            .resolve(&defaults)
            .unwrap();
        assert_eq!(producer.compression.target(Codec::Gzip), None);
        let e = validate(&configs(&[("remote.storage.enable", "true")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("tiered storage (KIP-405) is not built"),
            "{e}"
        );
    }
}
