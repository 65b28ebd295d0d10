//! Broker configuration, with Kafka's property names. Sources, later ones winning: built-in
//! defaults, a TOML file of `"property" = value` pairs, then `--set property=value` and the
//! dedicated CLI flags.

mod catalogue;
mod cluster;
pub mod dynamic;
mod groups;
mod security;
mod storage;
mod transactions;

pub use catalogue::PROPERTIES;
use catalogue::REMOVED;

use kafka_protocol::messages::BrokerId;

use crate::ids::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use iouring_log::LogConfig;

use crate::partition::timestamps::TimestampPolicy;
use crate::security::SecuritySettings;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown config property '{0}' (see docs/operating/configuration.md)")]
    Unknown(String),
    #[error("config property '{key}' was removed: {why}")]
    Removed { key: String, why: &'static str },
    #[error("config property '{key}' = '{value}': {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
    #[error("config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("--set takes property=value, got '{0}'")]
    SetSyntax(String),
}

/// Kafka's config types (`DescribeConfigs`' `config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    /// Never shown: DescribeConfigs answers null and `is_sensitive`.
    Password = 9,
}

/// A property the broker understands: its name, default, type and what it does.
#[derive(Debug)]
pub struct Property {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: ConfigType,
    pub doc: &'static str,
}

/// The shards' log cleaners (`log.cleaner.*`).
#[derive(Debug, Clone, Copy)]
pub struct CleanerSettings {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.backoff.ms`: the sleep when no log is due.
    pub backoff_ms: u64,
    /// Each shard's share of the offset map memory and I/O rate.
    pub limits: iouring_log::CleanerLimits,
}

/// The group coordinator's settings (Kafka's names and defaults).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Partitions of `__consumer_offsets` when the node creates it.
    pub offsets_topic_partitions: i32,
    /// Its replication factor in a cluster (a single node's is 1): creating it fails until
    /// this many nodes are live, as in Kafka.
    pub offsets_topic_replication_factor: i32,
    pub offsets_topic_segment_bytes: i64,
    /// How long the committed offsets of an empty group are kept.
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    pub offset_metadata_max_bytes: usize,
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    /// `group.coordinator.rebalance.protocols` includes `consumer`: KIP-848 groups are served.
    pub consumer_protocol: bool,
    /// `group.consumer.*`: the consumer protocol's defaults and bounds.
    pub consumer: ConsumerGroupConfig,
}

/// Kafka's `group.consumer.*` settings.
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    pub session_timeout_ms: i32,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub min_heartbeat_interval_ms: i32,
    pub max_heartbeat_interval_ms: i32,
    pub max_size: usize,
    pub assignors: Vec<crate::group_coordinator::consumer::Assignor>,
    /// `group.consumer.migration.policy`.
    pub migration: crate::group_coordinator::consumer::MigrationPolicy,
}

/// The transaction coordinator's settings (Kafka's names and defaults).
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// Partitions of `__transaction_state` when the node creates it.
    pub state_log_partitions: i32,
    /// Its replication factor in a cluster (a single node's is 1).
    pub state_log_replication_factor: i32,
    /// Its `min.insync.replicas` (capped by the replication factor it gets).
    pub state_log_min_isr: i32,
    pub state_log_segment_bytes: i64,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// How often timed-out transactions are aborted.
    pub abort_timed_out_interval_ms: i64,
    /// `transactional.id.expiration.ms`: an id idle this long is removed.
    pub id_expiration_ms: i64,
    /// How often idle transactional ids are looked for
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`).
    pub remove_expired_interval_ms: i64,
    /// The finalized `transaction.version` feature level the node advertises (KIP-890 part 2 at
    /// 2) and writes `__transaction_state` values for (flexible from 1).
    pub version: ::transactions::TxnVersion,
    /// `transaction.partition.verification.enable` (KIP-890 part 1): a leader asks the
    /// coordinator whether a transactional produce's partition is in the transaction before
    /// the batch may start one there.
    pub partition_verification: bool,
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: NodeId,
    /// `broker.rack`: this node's failure domain; `None`: the node is its own.
    pub rack: Option<String>,
    pub log_dir: PathBuf,
    /// Listeners (shard `i` of each listens on its port + i), TLS and SASL.
    pub security: SecuritySettings,
    pub shards: usize,
    pub num_partitions: i32,
    pub auto_create_topics: bool,
    /// `default.replication.factor`: replicas of auto-created topics and of CreateTopics with -1.
    pub default_replication_factor: i16,
    pub log: LogConfig,
    pub retention_check_interval_ms: u64,
    pub message_max_bytes: usize,
    /// `min.insync.replicas`: the default of topics that do not set it.
    pub min_insync_replicas: usize,
    /// `auto.leader.rebalance.enable`: the controller restores preferred leaders by itself.
    pub auto_leader_rebalance: bool,
    /// `replica.repair.delay.ms`: how long a node may be gone before the controller
    /// re-creates its replicas elsewhere; `None`: never.
    pub replica_repair_delay: Option<std::time::Duration>,
    /// `log.message.timestamp.*`: the default of topics that do not set them.
    pub timestamps: TimestampPolicy,
    /// `compression.type` and `compression.*.level`: the default of topics.
    pub compression: crate::partition::compression::TopicCompression,
    pub replica: ReplicaConfig,
    pub socket_request_max_bytes: usize,
    /// The shards' log cleaners.
    pub cleaner: CleanerSettings,
    /// `metrics.listen`: where the Prometheus endpoint listens (`None`: nowhere).
    pub metrics_listen: Option<SocketAddr>,
    /// `queued.max.request.bytes`: memory all connections of the node may hold in request
    /// frames (`None`: unbounded, -1 as in Kafka).
    pub queued_max_request_bytes: Option<usize>,
    /// `log.read.cache.bytes`: the node's read cache (split evenly over its shards).
    pub read_cache_bytes: u64,
    pub group: GroupConfig,
    pub transactions: TxnConfig,
    /// Where cluster metadata lives.
    pub metadata: MetadataConfig,
    /// The properties as given (DescribeConfigs shows them with their sources).
    pub properties: Properties,
    /// SCRAM users `--add-scram` creates at start.
    pub add_scram: Vec<crate::security::AddScram>,
}

/// How followers fetch and how long a leader waits for them (Kafka's names and defaults).
#[derive(Debug, Clone, Copy)]
pub struct ReplicaConfig {
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub lag_time_max_ms: i64,
    /// `replica.fetch.wait.max.ms`: how long a follower's fetch waits for new records.
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.max.bytes`: the most a follower's fetch asks of one partition.
    pub fetch_max_bytes: i32,
}

/// `metadata.store`: the data dir's JSON file (one node), or etcd (a cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataConfig {
    Embedded,
    Etcd {
        /// `metadata.etcd.endpoints`, comma separated `http://host:port`.
        endpoints: Vec<String>,
        /// `cluster.id`.
        cluster_id: String,
        /// `broker.session.timeout.ms`: the broker's lease on etcd.
        session_timeout_ms: u64,
    },
}

impl BrokerConfig {
    /// Listener `i` (connections know theirs by index).
    pub fn listener(&self, i: usize) -> &crate::security::listeners::Listener {
        &self.security.listeners[i]
    }

    /// The listener other nodes use: its endpoint is the one registered in a cluster.
    pub fn inter_broker_listener(&self) -> &crate::security::listeners::Listener {
        self.listener(self.security.inter_broker)
    }
}

/// The property of this name, if the broker has it.
pub fn property(name: &str) -> Option<&'static Property> {
    PROPERTIES.iter().find(|p| p.name == name)
}

/// Whether `key`'s value is a secret, never shown: passwords, keys and JAAS configs.
fn is_secret(key: &str) -> bool {
    property(key).is_some_and(|p| p.kind == ConfigType::Password)
        || key.ends_with(".sasl.jaas.config")
}

/// `value` as logs, errors and `Debug` may show it: a set secret as `[hidden]`.
fn shown<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret(key) && !value.is_empty() {
        "[hidden]"
    } else {
        value
    }
}

/// A per-listener property, `listener.name.<listener>.<property>`, of those ringlog reads per
/// listener: `ssl.client.auth`, `sasl.enabled.mechanisms` and `<mechanism>.sasl.jaas.config`
/// (a broker's own SASL credentials on the inter-broker listener). Returns the listener and the
/// property.
fn listener_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("listener.name.")?;
    let (listener, property) = rest.split_once('.')?;
    let known = matches!(property, "ssl.client.auth" | "sasl.enabled.mechanisms")
        || property
            .strip_suffix(".sasl.jaas.config")
            .is_some_and(|m| !m.is_empty() && !m.contains('.'));
    (!listener.is_empty() && known).then_some((listener, property))
}

/// The raw property map, validated as it is filled, and which properties were set (by the
/// config file, `--set` or a CLI flag) rather than left at their defaults.
#[derive(Clone)]
pub struct Properties {
    values: BTreeMap<String, String>,
    set: BTreeSet<String>,
}

/// Passwords and keys are never printed.
impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.values.iter().map(|(k, v)| (k, shown(k, v)));
        f.debug_map().entries(entries).finish()
    }
}

impl Default for Properties {
    fn default() -> Self {
        Properties {
            values: PROPERTIES
                .iter()
                .map(|p| (p.name.to_string(), p.default.to_string()))
                .collect(),
            set: BTreeSet::new(),
        }
    }
}

impl Properties {
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some((_, why)) = REMOVED.iter().find(|(k, _)| *k == key) {
            return Err(ConfigError::Removed {
                key: key.to_owned(),
                why,
            });
        }
        if key.starts_with("listener.name.") && listener_key(key).is_none() {
            return Err(ConfigError::Invalid {
                key: key.to_owned(),
                value: shown(key, value).to_owned(),
                reason: "of the per-listener properties ringlog reads listener.name.<listener>.ssl.client.auth, .sasl.enabled.mechanisms and .<mechanism>.sasl.jaas.config".into(),
            });
        }
        if !self.values.contains_key(key) && listener_key(key).is_none() {
            return Err(ConfigError::Unknown(key.to_owned()));
        }
        self.values.insert(key.to_owned(), value.to_owned());
        self.set.insert(key.to_owned());
        Ok(())
    }

    /// Whether `key` was set rather than left at its default.
    pub fn is_set(&self, key: &str) -> bool {
        self.set.contains(key)
    }

    /// `key=value` as given to `--set`.
    pub fn set_pair(&mut self, pair: &str) -> Result<(), ConfigError> {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| ConfigError::SetSyntax(pair.to_owned()))?;
        self.set(k.trim(), v.trim())
    }

    /// Loads a TOML file of `"property" = value` pairs.
    pub fn load_file(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        let file_err = |reason: String| ConfigError::File {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| file_err(e.to_string()))?;
        for (key, value) in table {
            let v = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(file_err(format!(
                        "'{key}' must be a string, integer or boolean, got {other}"
                    )))
                }
            };
            self.set(&key, &v)?;
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> &str {
        self.values
            .get(key)
            .map(String::as_str)
            .expect("every property has a default")
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_owned(),
            value: shown(key, self.lookup(key).unwrap_or("")).to_owned(),
            reason: reason.into(),
        }
    }

    fn int<T: std::str::FromStr>(&self, key: &str) -> Result<T, ConfigError> {
        self.get(key)
            .parse()
            .map_err(|_| self.invalid(key, "not a number in range"))
    }

    fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        self.get(key)
            .parse()
            .map_err(|_| self.invalid(key, "must be true or false"))
    }

    /// `-1` (Kafka's "none") becomes `None`.
    fn optional(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        let v: i64 = self.int(key)?;
        match v {
            -1 => Ok(None),
            v if v > 0 => Ok(Some(v)),
            _ => Err(self.invalid(key, "must be positive, or -1 for none")),
        }
    }

    /// The value of `key`, set or default; `None` for a key the broker does not have (a
    /// per-listener one not set).
    fn lookup(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A listener's own value of `property` (`listener.name.<listener>.<property>`, the
    /// listener name in any case): the key as given and the value.
    fn listener_value(&self, listener: &str, property: &str) -> Option<(&str, &str)> {
        self.values
            .iter()
            .find(|(k, _)| {
                listener_key(k).is_some_and(|(l, p)| {
                    l.eq_ignore_ascii_case(listener) && p.eq_ignore_ascii_case(property)
                })
            })
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn build(&self) -> Result<BrokerConfig, ConfigError> {
        let shards: usize = self.int("num.shards")?;
        let shards = if shards == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            shards
        };
        if shards > 256 {
            return Err(self.invalid("num.shards", "at most 256"));
        }
        let mut security = self.security(shards)?;
        let metadata = self.metadata()?;
        security.inter_broker_client = self.inter_broker_client(&metadata, &security)?;
        let num_partitions: i32 = self.int("num.partitions")?;
        let num_partitions = if num_partitions == 0 {
            shards as i32
        } else {
            num_partitions
        };
        if num_partitions < 1 {
            return Err(self.invalid("num.partitions", "must be at least 1"));
        }
        let log = LogConfig {
            segment_bytes: self.int("log.segment.bytes")?,
            segment_ms: self.int("log.roll.ms")?,
            index_interval_bytes: self.int("log.index.interval.bytes")?,
            segment_index_bytes: self.int("log.index.size.max.bytes")?,
            segment_jitter_ms: self.int("log.roll.jitter.ms")?,
            preallocate: self.bool("log.preallocate")?,
            flush_messages: self
                .optional("log.flush.interval.messages")?
                .map(|v| v as u64),
            flush_ms: self.optional("log.flush.interval.ms")?,
            retention_bytes: self.optional("log.retention.bytes")?.map(|v| v as u64),
            retention_ms: self.optional("log.retention.ms")?,
            compaction: self.compaction()?,
        };
        log.validate().map_err(|e| ConfigError::Invalid {
            key: "log.*".into(),
            value: String::new(),
            reason: e.to_string(),
        })?;
        Ok(BrokerConfig {
            node_id: NodeId(self.int("node.id")?),
            rack: Some(self.get("broker.rack").trim().to_owned()).filter(|r| !r.is_empty()),
            log_dir: PathBuf::from(self.get("log.dirs")),
            security,
            shards,
            num_partitions,
            auto_create_topics: self.bool("auto.create.topics.enable")?,
            default_replication_factor: {
                let v: i64 = self.int("default.replication.factor")?;
                if !(1..=crate::limits::REPLICATION_FACTOR_MAX as i64).contains(&v) {
                    return Err(self.invalid(
                        "default.replication.factor",
                        format!(
                            "must be from 1 to {}",
                            crate::limits::REPLICATION_FACTOR_MAX
                        ),
                    ));
                }
                v as i16
            },
            log,
            retention_check_interval_ms: self.int("log.retention.check.interval.ms")?,
            cleaner: self.cleaner(shards)?,
            message_max_bytes: self.int("message.max.bytes")?,
            min_insync_replicas: {
                let v: i64 = self.int("min.insync.replicas")?;
                if v < 1 {
                    return Err(self.invalid("min.insync.replicas", "must be at least 1"));
                }
                v as usize
            },
            auto_leader_rebalance: self.bool("auto.leader.rebalance.enable")?,
            replica_repair_delay: self
                .optional("replica.repair.delay.ms")?
                .map(|ms| std::time::Duration::from_millis(ms as u64)),
            timestamps: self.timestamps()?,
            compression: self.compression()?,
            replica: self.replica()?,
            socket_request_max_bytes: self.int("socket.request.max.bytes")?,
            queued_max_request_bytes: self.queued_max_request_bytes()?,
            metrics_listen: self.metrics_listen()?,
            read_cache_bytes: self.read_cache_bytes(shards)?,
            group: self.group()?,
            transactions: self.transactions()?,
            metadata,
            properties: self.clone(),
            add_scram: Vec::new(),
        })
    }

    /// `metrics.listen`: empty for no endpoint, else HOST:PORT (an IP address or localhost).
    fn metrics_listen(&self) -> Result<Option<SocketAddr>, ConfigError> {
        let key = "metrics.listen";
        let raw = self.get(key).trim();
        if raw.is_empty() {
            return Ok(None);
        }
        let (host, port) = raw
            .rsplit_once(':')
            .ok_or_else(|| self.invalid(key, "expected HOST:PORT"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| self.invalid(key, "port is not a number from 0 to 65535"))?;
        let host = host.trim_matches(['[', ']']);
        let ip: IpAddr = match host {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            "" => IpAddr::from([0, 0, 0, 0]),
            h => h
                .parse()
                .map_err(|_| self.invalid(key, "host must be an IP address or localhost"))?,
        };
        Ok(Some(SocketAddr::new(ip, port)))
    }

    /// `queued.max.request.bytes`: -1 (Kafka's default) is unbounded; ringlog's default is
    /// 512 MiB, so that many clients sending at once meet back-pressure, not an OOM kill.
    fn queued_max_request_bytes(&self) -> Result<Option<usize>, ConfigError> {
        let v: i64 = self.int("queued.max.request.bytes")?;
        match v {
            -1 => Ok(None),
            1.. => Ok(Some(usize::try_from(v).unwrap_or(usize::MAX))),
            _ => Err(self.invalid(
                "queued.max.request.bytes",
                "must be -1 (unbounded) or a byte count > 0",
            )),
        }
    }
}

impl BrokerConfig {
    /// The Kafka broker id of shard `shard` of this node.
    pub fn broker_id(&self, shard: usize) -> BrokerId {
        crate::ids::broker_id(self.node_id, shard)
    }

    /// Kafka's default timestamp settings (tests that build limits by hand).
    pub fn default_timestamps() -> TimestampPolicy {
        Properties::default()
            .timestamps()
            .expect("the defaults are valid")
    }

    /// The shard of this node that is Kafka broker `broker_id`, if any.
    pub fn shard_of_broker(&self, broker_id: BrokerId) -> Option<usize> {
        let shard = broker_id.0 - self.node_id.0 * 1000;
        (0..self.shards as i32)
            .contains(&shard)
            .then_some(shard as usize)
    }
}

#[cfg(test)]
mod tests;
