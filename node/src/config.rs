//! Broker configuration, with Kafka's property names. Sources, later ones winning: built-in
//! defaults, a TOML file of `"property" = value` pairs, then `--set property=value` and the
//! dedicated CLI flags.

use kafka_protocol::messages::BrokerId;

use crate::ids::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use iouring_log::config::Compaction;
use iouring_log::LogConfig;

use crate::partition::timestamps::{TimestampPolicy, TimestampType};
use crate::security::acl::AuthorizerSettings;
use crate::security::listeners::SecurityProtocol;
use crate::security::sasl::SaslMechanism;
use crate::security::tls::{ClientAuth, SslProperties, TlsSettings};
use crate::security::SecuritySettings;
use kafka_client::security::ClientSecurity;

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

const fn prop(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    doc: &'static str,
) -> Property {
    Property {
        name,
        default,
        kind,
        doc,
    }
}

/// Every property the broker understands, with its default.
pub const PROPERTIES: &[Property] = &[
    prop(
        "node.id",
        "0",
        ConfigType::Int,
        "This node's id; its shards are the Kafka brokers node.id * 1000 + shard.",
    ),
    prop(
        "metadata.store",
        "embedded",
        ConfigType::String,
        "Where cluster metadata lives: embedded (a JSON file in the data directory, one node) or etcd (a cluster).",
    ),
    prop(
        "metadata.etcd.endpoints",
        "",
        ConfigType::List,
        "etcd endpoints (http://host:port, comma separated) when metadata.store=etcd.",
    ),
    prop(
        "cluster.id",
        "ringlog",
        ConfigType::String,
        "The cluster's name: its key prefix in etcd.",
    ),
    prop(
        "broker.session.timeout.ms",
        "9000",
        ConfigType::Int,
        "TTL of the node's etcd lease; the node gives up leadership itself before etcd expires it.",
    ),
    prop(
        "log.dirs",
        "./ringlog-data",
        ConfigType::String,
        "The data directory: one folder per partition, in Kafka's layout.",
    ),
    prop(
        "listeners",
        "PLAINTEXT://127.0.0.1:9092",
        ConfigType::List,
        "NAME://HOST:PORT of each listener, comma separated; every shard listens on each (shard i on port + i).",
    ),
    prop(
        "advertised.listeners",
        "",
        ConfigType::List,
        "NAME://HOST:PORT given to clients per listener (a listener not named here: as it is bound).",
    ),
    prop(
        "listener.security.protocol.map",
        crate::security::listeners::DEFAULT_PROTOCOL_MAP,
        ConfigType::List,
        "NAME:PROTOCOL for each listener name; protocols PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.",
    ),
    prop(
        "inter.broker.listener.name",
        "",
        ConfigType::String,
        "The listener other nodes fetch from (empty: the first); it must be PLAINTEXT for now.",
    ),
    prop(
        "ssl.keystore.type",
        "PEM",
        ConfigType::String,
        "Format of the broker's key store: PEM only.",
    ),
    prop(
        "ssl.keystore.location",
        "",
        ConfigType::String,
        "A PEM file holding the broker's private key and certificate chain (TLS listeners).",
    ),
    prop(
        "ssl.keystore.key",
        "",
        ConfigType::Password,
        "The broker's PEM private key, inline (instead of ssl.keystore.location).",
    ),
    prop(
        "ssl.keystore.certificate.chain",
        "",
        ConfigType::Password,
        "The broker's PEM certificate chain, inline (with ssl.keystore.key).",
    ),
    prop(
        "ssl.key.password",
        "",
        ConfigType::Password,
        "Not supported: give the private key unencrypted.",
    ),
    prop(
        "ssl.truststore.type",
        "PEM",
        ConfigType::String,
        "Format of the trust store: PEM only.",
    ),
    prop(
        "ssl.truststore.location",
        "",
        ConfigType::String,
        "A PEM file of the CA certificates client certificates must chain to.",
    ),
    prop(
        "ssl.truststore.certificates",
        "",
        ConfigType::Password,
        "The trusted CA certificates, inline PEM (instead of ssl.truststore.location).",
    ),
    prop(
        "ssl.client.auth",
        "none",
        ConfigType::String,
        "Client certificates on SSL listeners: required, requested or none (SASL_SSL listeners ask for none, as in Kafka since KIP-684).",
    ),
    prop(
        "ssl.enabled.protocols",
        "TLSv1.2,TLSv1.3",
        ConfigType::List,
        "TLS versions the TLS listeners accept.",
    ),
    prop(
        "sasl.enabled.mechanisms",
        "SCRAM-SHA-256,SCRAM-SHA-512",
        ConfigType::List,
        "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN checks passwords against the users' SCRAM credentials).",
    ),
    prop(
        "sasl.mechanism.inter.broker.protocol",
        "GSSAPI",
        ConfigType::String,
        "The SASL mechanism brokers use with each other when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI, Kafka's default, is not supported). The broker's user and password: listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    ),
    prop(
        "ssl.endpoint.identification.algorithm",
        "https",
        ConfigType::String,
        "https: a broker connecting to another over TLS checks that its certificate names the host it connects to; empty: only that it chains to the trust store.",
    ),
    prop(
        "connections.max.reauth.ms",
        "0",
        ConfigType::Long,
        "Lifetime of a SASL session: the client authenticates again on the connection before it ends, or is disconnected (0: no limit).",
    ),
    prop(
        "authorizer.class.name",
        "",
        ConfigType::String,
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACL authorization on (empty: off, everyone may do everything).",
    ),
    prop(
        "super.users",
        "",
        ConfigType::List,
        "Principals allowed everything, separated by ';' (User:admin;User:CN=ops).",
    ),
    prop(
        "allow.everyone.if.no.acl.found",
        "false",
        ConfigType::Boolean,
        "With an authorizer: whether a resource no ACL matches is open to everyone.",
    ),
    prop(
        "connection.failed.authentication.delay.ms",
        "100",
        ConfigType::Int,
        "How long the answer to a failed authentication is held before the connection is closed.",
    ),
    prop(
        "metrics.listen",
        "",
        ConfigType::String,
        "HOST:PORT of the Prometheus endpoint (GET /metrics); empty: no endpoint.",
    ),
    prop(
        "num.shards",
        "0",
        ConfigType::Int,
        "Shards, one pinned glommio executor each (0: one per CPU the process may run on).",
    ),
    prop(
        "num.partitions",
        "0",
        ConfigType::Int,
        "Partitions of auto-created topics (0: one per shard).",
    ),
    prop(
        "auto.create.topics.enable",
        "true",
        ConfigType::Boolean,
        "Create topics named in Metadata and Produce requests.",
    ),
    prop(
        "log.segment.bytes",
        "1073741824",
        ConfigType::Int,
        "Segment size at which the active segment rolls.",
    ),
    prop(
        "log.roll.ms",
        "604800000",
        ConfigType::Long,
        "Age at which the active segment rolls.",
    ),
    prop(
        "log.retention.ms",
        "604800000",
        ConfigType::Long,
        "Segments whose newest record is older are deleted (-1: no limit).",
    ),
    prop(
        "log.retention.bytes",
        "-1",
        ConfigType::Long,
        "A partition larger than this deletes its oldest segments (-1: no limit).",
    ),
    prop(
        "log.retention.check.interval.ms",
        "300000",
        ConfigType::Long,
        "How often retention runs.",
    ),
    prop(
        "log.cleanup.policy",
        "delete",
        ConfigType::List,
        "Default cleanup.policy of topics: delete (retention deletes old segments), compact (the log cleaner keeps each key's latest record), or both.",
    ),
    prop(
        "log.cleaner.enable",
        "true",
        ConfigType::Boolean,
        "Run a log cleaner on each shard for the logs of compacted topics.",
    ),
    prop(
        "log.cleaner.backoff.ms",
        "15000",
        ConfigType::Long,
        "How long a shard's cleaner sleeps when no log is due for cleaning.",
    ),
    prop(
        "log.cleaner.dedupe.buffer.size",
        "134217728",
        ConfigType::Long,
        "Memory of the cleaners' offset maps, split over the shards; a cleaning maps as much of a log's dirty part as fits.",
    ),
    prop(
        "log.cleaner.io.max.bytes.per.second",
        "-1",
        ConfigType::Double,
        "Reads plus writes per second of the cleaners, split over the shards (-1: unthrottled).",
    ),
    prop(
        "log.cleaner.min.cleanable.ratio",
        "0.5",
        ConfigType::Double,
        "Default min.cleanable.dirty.ratio of topics.",
    ),
    prop(
        "log.cleaner.min.compaction.lag.ms",
        "0",
        ConfigType::Long,
        "Default min.compaction.lag.ms of topics.",
    ),
    prop(
        "log.cleaner.max.compaction.lag.ms",
        "9223372036854775807",
        ConfigType::Long,
        "Default max.compaction.lag.ms of topics.",
    ),
    prop(
        "log.cleaner.delete.retention.ms",
        "86400000",
        ConfigType::Long,
        "Default delete.retention.ms of topics.",
    ),
    prop(
        "log.segment.delete.delay.ms",
        "60000",
        ConfigType::Long,
        "Default file.delete.delay.ms of topics.",
    ),
    prop(
        "log.index.interval.bytes",
        "4096",
        ConfigType::Int,
        "Bytes between offset index entries.",
    ),
    prop(
        "log.flush.interval.messages",
        "-1",
        ConfigType::Long,
        "fdatasync after this many messages; produce answers wait for it (-1: never; segments are synced on roll and close).",
    ),
    prop(
        "log.flush.interval.ms",
        "-1",
        ConfigType::Long,
        "fdatasync when the oldest unsynced message is this old (-1: never).",
    ),
    prop(
        "log.message.timestamp.type",
        "CreateTime",
        ConfigType::String,
        "CreateTime keeps the producer's record timestamps; LogAppendTime stamps each batch with its append time.",
    ),
    prop(
        "log.message.timestamp.before.max.ms",
        "9223372036854775807",
        ConfigType::Long,
        "How far in the past a CreateTime record's timestamp may be (larger: INVALID_TIMESTAMP).",
    ),
    prop(
        "log.message.timestamp.after.max.ms",
        "3600000",
        ConfigType::Long,
        "How far in the future a CreateTime record's timestamp may be (larger: INVALID_TIMESTAMP).",
    ),
    prop(
        "message.max.bytes",
        "1048588",
        ConfigType::Int,
        "Largest record batch accepted.",
    ),
    prop(
        "min.insync.replicas",
        "1",
        ConfigType::Int,
        "Default of topics that do not set it: in-sync replicas an acks=all produce needs.",
    ),
    prop(
        "replica.lag.time.max.ms",
        "30000",
        ConfigType::Long,
        "A follower not caught up for this long leaves the ISR.",
    ),
    prop(
        "replica.fetch.wait.max.ms",
        "500",
        ConfigType::Int,
        "How long a follower's fetch waits for new records.",
    ),
    prop(
        "replica.fetch.max.bytes",
        "1048576",
        ConfigType::Int,
        "The most a follower's fetch asks of one partition.",
    ),
    prop(
        "socket.request.max.bytes",
        "104857600",
        ConfigType::Int,
        "Largest request; a larger one closes the connection.",
    ),
    prop(
        "queued.max.request.bytes",
        "536870912",
        ConfigType::Long,
        "Memory all connections of the node may hold in request frames; beyond it connections read nothing until requests are done with (-1: unbounded).",
    ),
    prop(
        "log.read.cache.bytes",
        "-1",
        ConfigType::Long,
        "The node's read cache of segment file chunks, split over its shards (-1: 256 MiB per shard, at most a quarter of the memory the node may use; 0: off).",
    ),
    prop(
        "offsets.topic.num.partitions",
        "50",
        ConfigType::Int,
        "Partitions of __consumer_offsets when the node creates it.",
    ),
    prop(
        "offsets.topic.replication.factor",
        "3",
        ConfigType::Short,
        "Replicas of __consumer_offsets in a cluster (1 on a single node).",
    ),
    prop(
        "offsets.topic.segment.bytes",
        "104857600",
        ConfigType::Int,
        "Segment size of __consumer_offsets.",
    ),
    prop(
        "offsets.retention.minutes",
        "10080",
        ConfigType::Int,
        "Committed offsets of a group empty this long expire.",
    ),
    prop(
        "offsets.retention.check.interval.ms",
        "600000",
        ConfigType::Long,
        "How often expired offsets are removed.",
    ),
    prop(
        "offset.metadata.max.bytes",
        "4096",
        ConfigType::Int,
        "Longest commit metadata (longer: OFFSET_METADATA_TOO_LARGE).",
    ),
    prop(
        "group.initial.rebalance.delay.ms",
        "3000",
        ConfigType::Int,
        "A new group's first rebalance waits this long for more members.",
    ),
    prop(
        "group.min.session.timeout.ms",
        "6000",
        ConfigType::Int,
        "Shortest member session timeout allowed.",
    ),
    prop(
        "group.max.session.timeout.ms",
        "1800000",
        ConfigType::Int,
        "Longest member session timeout allowed.",
    ),
    prop(
        "group.max.size",
        "2147483647",
        ConfigType::Int,
        "Members per group (more: GROUP_MAX_SIZE_REACHED).",
    ),
];

/// Properties earlier versions took, with what replaced them.
const REMOVED: &[(&str, &str)] = &[(
    "fetch.zero.copy",
    "fetches read segment files with O_DIRECT through the read cache \
     (log.read.cache.bytes), never with sendfile on a helper thread",
)];

/// `log.read.cache.bytes` = -1: this much per shard, and at most a quarter of the memory the
/// node may use. Not more by default: while the cache grows, every megabyte it keeps makes the
/// tail take fresh memory for its next chunk (page faults, zeroing, unregistered writes), and
/// broker CPU at 50 000 msg/s is higher for as long as that lasts — 45 % when first measured,
/// 18–21 % on 2026-12-02 (a growing 3 GiB per shard: 7.0–7.7 vs 5.4–6.5 CPU-s/GB with 128 MiB;
/// once full it recycles at no cost). Backing those chunks with transparent huge pages made
/// it worse (10.7–12.0 CPU-s/GB, p99.9 37–72 ms: each fault zeroes 2 MiB inline).
const READ_CACHE_AUTO_PER_SHARD: u64 = 256 << 20;

/// The shards' log cleaners (`log.cleaner.*`).
#[derive(Debug, Clone, Copy)]
pub struct CleanerSettings {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.backoff.ms`: the sleep when no log is due.
    pub backoff_ms: u64,
    /// Each shard's share of the offset map memory and I/O rate.
    pub limits: iouring_log::cleaner::CleanerLimits,
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
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: NodeId,
    pub log_dir: PathBuf,
    /// Listeners (shard `i` of each listens on its port + i), TLS and SASL.
    pub security: SecuritySettings,
    pub shards: usize,
    pub num_partitions: i32,
    pub auto_create_topics: bool,
    pub log: LogConfig,
    pub retention_check_interval_ms: u64,
    pub message_max_bytes: usize,
    /// `min.insync.replicas`: the default of topics that do not set it.
    pub min_insync_replicas: usize,
    /// `log.message.timestamp.*`: the default of topics that do not set them.
    pub timestamps: TimestampPolicy,
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

    /// Listeners, TLS and SASL (`listeners`, `ssl.*`, `sasl.*`).
    fn security(&self, shards: usize) -> Result<SecuritySettings, ConfigError> {
        let (listeners, inter_broker) = crate::security::listeners::parse(
            self.get("listeners"),
            self.get("listener.security.protocol.map"),
            self.get("advertised.listeners"),
            self.get("inter.broker.listener.name"),
            shards,
        )
        .map_err(|e| self.invalid(e.key, e.reason))?;
        // Every per-listener property names a listener.
        for key in self.values.keys() {
            if let Some((name, _)) = listener_key(key) {
                if !listeners.iter().any(|l| l.name.eq_ignore_ascii_case(name)) {
                    return Err(self.invalid(key, format!("there is no listener named {name}")));
                }
            }
        }
        let mechanisms = "sasl.enabled.mechanisms";
        let default_mechanisms = SaslMechanism::parse_list(self.get(mechanisms))
            .map_err(|reason| self.invalid(mechanisms, reason))?;
        let mut client_auth = Vec::with_capacity(listeners.len());
        let mut sasl_mechanisms = Vec::with_capacity(listeners.len());
        for l in &listeners {
            let own = self.listener_value(&l.name, "ssl.client.auth");
            client_auth.push(if l.protocol.tls() {
                // KIP-684: a SASL_SSL listener asks for no certificate unless its own
                // ssl.client.auth says so.
                let (key, value) = match own {
                    Some(own) => own,
                    None if l.protocol.sasl() => ("ssl.client.auth", "none"),
                    None => ("ssl.client.auth", self.get("ssl.client.auth")),
                };
                Some(ClientAuth::parse(value).ok_or_else(|| {
                    self.invalid(key, "must be required, requested or none")
                })?)
            } else {
                if let Some((key, _)) = own {
                    return Err(self.invalid(
                        key,
                        format!("listener {} is {}: ssl.client.auth applies to SSL and SASL_SSL listeners", l.name, l.protocol.name()),
                    ));
                }
                None
            });
            sasl_mechanisms.push(match self.listener_value(&l.name, mechanisms) {
                Some((key, value)) => {
                    SaslMechanism::parse_list(value).map_err(|reason| self.invalid(key, reason))?
                }
                None => default_mechanisms.clone(),
            });
        }
        let tls = if listeners.iter().any(|l| l.protocol.tls()) {
            let ssl = SslProperties::from_lookup(|k| self.lookup(k));
            let levels: Vec<ClientAuth> = client_auth.iter().flatten().copied().collect();
            Some(TlsSettings::build(&ssl, &levels).map_err(|e| self.invalid(e.key, e.reason))?)
        } else {
            None
        };
        let reauth: i64 = self.int("connections.max.reauth.ms")?;
        if reauth < 0 {
            return Err(self.invalid("connections.max.reauth.ms", "must be at least 0"));
        }
        let delay: i64 = self.int("connection.failed.authentication.delay.ms")?;
        if !(0..=60_000).contains(&delay) {
            return Err(self.invalid(
                "connection.failed.authentication.delay.ms",
                "must be from 0 to 60000",
            ));
        }
        let authorizer = match self.get("authorizer.class.name").trim() {
            "" => None,
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            | "kafka.security.authorizer.AclAuthorizer" => Some(AuthorizerSettings {
                super_users: self
                    .get("super.users")
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect(),
                allow_everyone_if_no_acl_found: self.bool("allow.everyone.if.no.acl.found")?,
            }),
            _ => {
                return Err(self.invalid(
                    "authorizer.class.name",
                    "ringlog's authorizer is Kafka's StandardAuthorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or empty for none)",
                ))
            }
        };
        if let Some(bad) = authorizer
            .iter()
            .flat_map(|a| &a.super_users)
            .find(|u| !u.contains(':'))
        {
            return Err(self.invalid(
                "super.users",
                format!("'{bad}' is not a principal (User:name)"),
            ));
        }
        Ok(SecuritySettings {
            listeners,
            inter_broker,
            tls,
            client_auth,
            authorizer,
            sasl_mechanisms,
            reauth: (reauth > 0).then(|| std::time::Duration::from_millis(reauth as u64)),
            failed_authentication_delay: std::time::Duration::from_millis(delay as u64),
            inter_broker_client: ClientSecurity::plaintext(),
        })
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
            log_dir: PathBuf::from(self.get("log.dirs")),
            security,
            shards,
            num_partitions,
            auto_create_topics: self.bool("auto.create.topics.enable")?,
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
            timestamps: self.timestamps()?,
            replica: self.replica()?,
            socket_request_max_bytes: self.int("socket.request.max.bytes")?,
            queued_max_request_bytes: self.queued_max_request_bytes()?,
            metrics_listen: self.metrics_listen()?,
            read_cache_bytes: self.read_cache_bytes(shards)?,
            group: self.group()?,
            metadata,
            properties: self.clone(),
            add_scram: Vec::new(),
        })
    }

    /// `log.message.timestamp.*` (Kafka 4.x's defaults: CreateTime, any past, one hour ahead).
    fn timestamps(&self) -> Result<TimestampPolicy, ConfigError> {
        let key = "log.message.timestamp.type";
        let kind = TimestampType::parse(self.get(key))
            .ok_or_else(|| self.invalid(key, "must be CreateTime or LogAppendTime"))?;
        let bound = |key: &str| -> Result<Option<i64>, ConfigError> {
            let v: i64 = self.int(key)?;
            match v {
                i64::MAX => Ok(None),
                0.. => Ok(Some(v)),
                _ => Err(self.invalid(key, "must be at least 0")),
            }
        };
        Ok(TimestampPolicy {
            kind,
            before_max_ms: bound("log.message.timestamp.before.max.ms")?,
            after_max_ms: bound("log.message.timestamp.after.max.ms")?,
        })
    }

    /// The default compaction settings of topics (`log.cleanup.policy`, `log.cleaner.*`).
    fn compaction(&self) -> Result<Compaction, ConfigError> {
        let policy = "log.cleanup.policy";
        let (delete, compact) = Compaction::parse_policy(self.get(policy))
            .ok_or_else(|| self.invalid(policy, "a list of delete and/or compact"))?;
        let ratio = "log.cleaner.min.cleanable.ratio";
        let min_cleanable_dirty_ratio = Compaction::parse_ratio(self.get(ratio))
            .ok_or_else(|| self.invalid(ratio, "a number from 0 to 1"))?;
        let at_least = |key: &str, min: i64| -> Result<i64, ConfigError> {
            let v: i64 = self.int(key)?;
            if v < min {
                return Err(self.invalid(key, format!("must be at least {min}")));
            }
            Ok(v)
        };
        let max_lag = at_least("log.cleaner.max.compaction.lag.ms", 1)?;
        Ok(Compaction {
            delete,
            compact,
            min_cleanable_dirty_ratio,
            min_compaction_lag_ms: at_least("log.cleaner.min.compaction.lag.ms", 0)?,
            max_compaction_lag_ms: (max_lag != i64::MAX).then_some(max_lag),
            delete_retention_ms: at_least("log.cleaner.delete.retention.ms", 0)?,
            file_delete_delay_ms: at_least("log.segment.delete.delay.ms", 0)?,
        })
    }

    /// The shards' log cleaners (`log.cleaner.*`), each with its share of the node's memory
    /// and I/O rate.
    fn cleaner(&self, shards: usize) -> Result<CleanerSettings, ConfigError> {
        let backoff = "log.cleaner.backoff.ms";
        let backoff_ms: i64 = self.int(backoff)?;
        if backoff_ms < 1 {
            return Err(self.invalid(backoff, "must be at least 1"));
        }
        let buffer = "log.cleaner.dedupe.buffer.size";
        let map_bytes: i64 = self.int(buffer)?;
        if map_bytes < 1 << 20 {
            return Err(self.invalid(buffer, "must be at least 1048576"));
        }
        let io = "log.cleaner.io.max.bytes.per.second";
        let rate: f64 = self
            .get(io)
            .trim()
            .parse()
            .map_err(|_| self.invalid(io, "not a number"))?;
        if rate <= 0.0 && rate != -1.0 {
            return Err(self.invalid(io, "must be positive, or -1 for unthrottled"));
        }
        let shards = shards.max(1) as f64;
        Ok(CleanerSettings {
            enable: self.bool("log.cleaner.enable")?,
            backoff_ms: backoff_ms as u64,
            limits: iouring_log::cleaner::CleanerLimits {
                map_bytes: (map_bytes as f64 / shards) as usize,
                io_bytes_per_second: (rate > 0.0 && rate < 1e18)
                    .then(|| (rate / shards).max(1.0) as u64),
            },
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

    /// `log.read.cache.bytes`; -1 means 256 MiB per shard, at most a quarter of the memory the
    /// node may use.
    fn read_cache_bytes(&self, shards: usize) -> Result<u64, ConfigError> {
        let v: i64 = self.int("log.read.cache.bytes")?;
        match v {
            -1 => Ok((READ_CACHE_AUTO_PER_SHARD * shards as u64).min(usable_memory_bytes() / 4)),
            0.. => Ok(v as u64),
            _ => Err(self.invalid(
                "log.read.cache.bytes",
                "must be -1 (256 MiB per shard) or a byte count >= 0",
            )),
        }
    }

    /// How this broker connects to the others' inter-broker listener (its followers fetch
    /// over it): TLS with the broker's own trust store (and key store, for listeners that ask
    /// for client certificates), SASL with `sasl.mechanism.inter.broker.protocol` and the
    /// listener's `listener.name.<listener>.<mechanism>.sasl.jaas.config`. Only a cluster
    /// (`metadata.store=etcd`) connects to other brokers.
    fn inter_broker_client(
        &self,
        metadata: &MetadataConfig,
        security: &SecuritySettings,
    ) -> Result<ClientSecurity, ConfigError> {
        let listener = &security.listeners[security.inter_broker];
        if !matches!(metadata, MetadataConfig::Etcd { .. })
            || listener.protocol == SecurityProtocol::Plaintext
        {
            return Ok(ClientSecurity::plaintext());
        }
        let mut sasl = None;
        if listener.protocol.sasl() {
            let mech_key = "sasl.mechanism.inter.broker.protocol";
            let mechanism = self.get(mech_key).trim();
            let enabled = &security.sasl_mechanisms[security.inter_broker];
            if !enabled.iter().any(|m| m.name() == mechanism) {
                let names: Vec<&str> = enabled.iter().map(|m| m.name()).collect();
                return Err(self.invalid(
                    mech_key,
                    format!(
                        "the inter-broker listener {} is {}: brokers authenticate to each other with one of its enabled mechanisms ({})",
                        listener.name,
                        listener.protocol.name(),
                        names.join(",")
                    ),
                ));
            }
            let jaas_property = format!("{}.sasl.jaas.config", mechanism.to_ascii_lowercase());
            let (_, jaas) = self
                .listener_value(&listener.name, &jaas_property)
                .ok_or_else(|| {
                    self.invalid(
                        &format!(
                            "listener.name.{}.{jaas_property}",
                            listener.name.to_ascii_lowercase()
                        ),
                        "the broker's own user and password on the inter-broker listener: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"…\" password=\"…\";",
                    )
                })?;
            sasl = Some((mechanism, jaas));
        }
        // The broker's own ssl.* settings, with the listener's protocol and SASL login.
        ClientSecurity::from_lookup(|key| match key {
            "security.protocol" => Some(listener.protocol.name()),
            "sasl.mechanism" => sasl.map(|(mechanism, _)| mechanism),
            "sasl.jaas.config" => sasl.map(|(_, jaas)| jaas),
            other => self.lookup(other),
        })
        .map_err(|e| {
            let key = if e.key.starts_with("sasl.jaas") {
                format!(
                    "listener.name.{}.*.sasl.jaas.config",
                    listener.name.to_ascii_lowercase()
                )
            } else {
                e.key
            };
            self.invalid(&key, format!("inter-broker client: {}", e.reason))
        })
    }

    fn metadata(&self) -> Result<MetadataConfig, ConfigError> {
        match self.get("metadata.store") {
            "embedded" => Ok(MetadataConfig::Embedded),
            "etcd" => {
                let endpoints: Vec<String> = self
                    .get("metadata.etcd.endpoints")
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_owned)
                    .collect();
                if endpoints.is_empty() {
                    return Err(self.invalid(
                        "metadata.etcd.endpoints",
                        "metadata.store=etcd needs at least one endpoint (http://host:port)",
                    ));
                }
                if let Some(bad) = endpoints
                    .iter()
                    .find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
                {
                    let reason = format!("'{bad}' is not http://host:port");
                    return Err(self.invalid("metadata.etcd.endpoints", reason));
                }
                let cluster_id = self.get("cluster.id").to_owned();
                let valid_id = !cluster_id.is_empty()
                    && cluster_id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
                if !valid_id {
                    return Err(
                        self.invalid("cluster.id", "letters, digits, '.', '_' and '-' only")
                    );
                }
                let session_timeout_ms: u64 = self.int("broker.session.timeout.ms")?;
                if !(1000..=600_000).contains(&session_timeout_ms) {
                    return Err(self.invalid("broker.session.timeout.ms", "1000..=600000"));
                }
                Ok(MetadataConfig::Etcd {
                    endpoints,
                    cluster_id,
                    session_timeout_ms,
                })
            }
            _ => Err(self.invalid("metadata.store", "embedded or etcd")),
        }
    }

    fn replica(&self) -> Result<ReplicaConfig, ConfigError> {
        let lag: i64 = self.int("replica.lag.time.max.ms")?;
        if lag < 1 {
            return Err(self.invalid("replica.lag.time.max.ms", "must be at least 1"));
        }
        let wait: i32 = self.int("replica.fetch.wait.max.ms")?;
        if !(0..=60_000).contains(&wait) {
            return Err(self.invalid("replica.fetch.wait.max.ms", "0..=60000"));
        }
        let max_bytes: i32 = self.int("replica.fetch.max.bytes")?;
        if max_bytes < 1024 {
            return Err(self.invalid("replica.fetch.max.bytes", "must be at least 1024"));
        }
        Ok(ReplicaConfig {
            lag_time_max_ms: lag,
            fetch_wait_max_ms: wait,
            fetch_max_bytes: max_bytes,
        })
    }

    fn group(&self) -> Result<GroupConfig, ConfigError> {
        let positive = |key: &str| -> Result<i64, ConfigError> {
            let v: i64 = self.int(key)?;
            if v < 1 {
                return Err(self.invalid(key, "must be at least 1"));
            }
            Ok(v)
        };
        let partitions = positive("offsets.topic.num.partitions")?;
        if partitions > i64::from(crate::limits::PARTITIONS_MAX) {
            return Err(self.invalid("offsets.topic.num.partitions", "too many partitions"));
        }
        let min_session: i32 = self.int("group.min.session.timeout.ms")?;
        let max_session: i32 = self.int("group.max.session.timeout.ms")?;
        if min_session < 1 || max_session < min_session {
            return Err(self.invalid(
                "group.max.session.timeout.ms",
                "group.min.session.timeout.ms must be >= 1 and <= group.max.session.timeout.ms",
            ));
        }
        let delay: i64 = self.int("group.initial.rebalance.delay.ms")?;
        if delay < 0 {
            return Err(self.invalid("group.initial.rebalance.delay.ms", "must be >= 0"));
        }
        Ok(GroupConfig {
            offsets_topic_partitions: partitions as i32,
            offsets_topic_replication_factor: {
                let rf = positive("offsets.topic.replication.factor")?;
                if rf > crate::metadata::placement::REPLICATION_FACTOR_MAX as i64 {
                    return Err(self.invalid("offsets.topic.replication.factor", "at most 10"));
                }
                rf as i32
            },
            offsets_topic_segment_bytes: positive("offsets.topic.segment.bytes")?,
            offsets_retention_ms: positive("offsets.retention.minutes")?.saturating_mul(60_000),
            offsets_retention_check_interval_ms: positive("offsets.retention.check.interval.ms")?,
            offset_metadata_max_bytes: self.int("offset.metadata.max.bytes")?,
            initial_rebalance_delay_ms: delay,
            min_session_timeout_ms: min_session,
            max_session_timeout_ms: max_session,
            max_size: positive("group.max.size")? as usize,
        })
    }
}

impl BrokerConfig {
    /// The Kafka broker id of shard `shard` of this node.
    pub fn broker_id(&self, shard: usize) -> BrokerId {
        crate::ids::broker_id(self.node_id.0, shard)
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

/// The memory this process may use: physical memory, or the cgroup (v2) limit when that is
/// lower (a container's `memory.max`).
fn usable_memory_bytes() -> u64 {
    let physical = physical_memory_bytes();
    std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|limit| limit.trim().parse::<u64>().ok())
        .map_or(physical, |limit| limit.min(physical))
}

/// Total physical memory (`sysconf`); 1 GiB if the system does not say.
fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page > 0 {
        pages as u64 * page as u64
    } else {
        1 << 30
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_build_and_bad_values_name_the_property() {
        let mut p = Properties::default();
        p.set("num.shards", "2").unwrap();
        let c = p.build().unwrap();
        assert_eq!(
            (c.shards, c.num_partitions, c.listener(0).bind.port()),
            (2, 2, 9092)
        );
        assert!(matches!(
            p.set("no.such", "1"),
            Err(ConfigError::Unknown(_))
        ));
        p.set("log.segment.bytes", "abc").unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("log.segment.bytes") && err.contains("abc"),
            "{err}"
        );
        assert!(p.set_pair("novalue").is_err());
    }

    #[test]
    fn read_cache_budget_defaults_to_256_mib_per_shard() {
        let mut p = Properties::default();
        p.set("num.shards", "2").unwrap();
        let auto = p.build().unwrap().read_cache_bytes;
        assert_eq!(auto, (512 << 20).min(usable_memory_bytes() / 4));
        p.set("log.read.cache.bytes", "0").unwrap();
        assert_eq!(p.build().unwrap().read_cache_bytes, 0);
        p.set("log.read.cache.bytes", "-2").unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("log.read.cache.bytes") && err.contains("-2"),
            "{err}"
        );
        let err = p.set("fetch.zero.copy", "true").unwrap_err().to_string();
        assert!(
            err.contains("fetch.zero.copy") && err.contains("removed"),
            "{err}"
        );
    }

    #[test]
    fn request_budget_is_bounded_by_default_and_minus_one_lifts_it() {
        let mut p = Properties::default();
        assert_eq!(p.build().unwrap().queued_max_request_bytes, Some(512 << 20));
        assert_eq!(p.build().unwrap().metrics_listen, None);
        p.set("metrics.listen", "localhost:9404").unwrap();
        assert_eq!(
            p.build().unwrap().metrics_listen,
            Some("127.0.0.1:9404".parse().unwrap())
        );
        for bad in [
            "9404",
            "127.0.0.1:http",
            "example.com:9404",
            "1.2.3.4:70000",
        ] {
            p.set("metrics.listen", bad).unwrap();
            let err = p.build().unwrap_err().to_string();
            assert!(
                err.contains("metrics.listen") && err.contains(bad),
                "{bad}: {err}"
            );
        }
        p.set("metrics.listen", "").unwrap();
        p.set("queued.max.request.bytes", "-1").unwrap();
        assert_eq!(p.build().unwrap().queued_max_request_bytes, None);
        p.set("queued.max.request.bytes", "4096").unwrap();
        assert_eq!(p.build().unwrap().queued_max_request_bytes, Some(4096));
        for bad in ["0", "-5"] {
            p.set("queued.max.request.bytes", bad).unwrap();
            let err = p.build().unwrap_err().to_string();
            assert!(
                err.contains("queued.max.request.bytes") && err.contains(bad),
                "{err}"
            );
        }
    }

    #[test]
    fn inter_broker_sasl_names_what_is_missing_and_never_shows_a_secret() {
        let mut p = Properties::default();
        for (k, v) in [
            ("metadata.store", "etcd"),
            ("metadata.etcd.endpoints", "http://127.0.0.1:2379"),
            (
                "listeners",
                "INTERNAL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
        ] {
            p.set(k, v).unwrap();
        }
        // Kafka's default mechanism, GSSAPI, is not one ringlog has.
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("sasl.mechanism.inter.broker.protocol") && err.contains("GSSAPI"),
            "{err}"
        );
        p.set("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512")
            .unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("listener.name.internal.scram-sha-512.sasl.jaas.config"),
            "{err}"
        );
        let key = "listener.name.internal.scram-sha-512.sasl.jaas.config";
        p.set(key, "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"s3cret-pw\";").unwrap();
        let c = p.build().unwrap();
        let client = &c.security.inter_broker_client;
        assert_eq!(client.sasl.as_ref().unwrap().username, "broker");
        assert!(!format!("{p:?} {client:?}").contains("s3cret-pw"));
        // A login module ringlog cannot use: named, the value (with its password) not shown.
        p.set(
            key,
            "com.sun.security.auth.module.Krb5LoginModule required password=\"s3cret-pw\";",
        )
        .unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("sasl.jaas.config") && !err.contains("s3cret-pw"),
            "{err}"
        );
        let err = p
            .set("listener.name.internal.ssl.keystore.location", "/x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("per-listener"), "{err}");
        // Without a cluster nothing connects to other brokers: nothing is needed.
        p.set("metadata.store", "embedded").unwrap();
        assert!(p.build().is_ok());
    }

    #[test]
    fn per_listener_client_auth_and_mechanisms() {
        let mut p = Properties::default();
        for (k, v) in [
            (
                "listeners",
                "SASL_SSL://127.0.0.1:9192,SSL://127.0.0.1:9292,PLAINTEXT://127.0.0.1:9092",
            ),
            ("ssl.keystore.key", "unused: the build stops before the key"),
            ("listener.name.nosuch.ssl.client.auth", "required"),
        ] {
            p.set(k, v).unwrap();
        }
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("listener.name.nosuch.ssl.client.auth") && err.contains("no listener"),
            "{err}"
        );
        let mut p = Properties::default();
        p.set(
            "listeners",
            "SASL_SSL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
        )
        .unwrap();
        p.set("listener.name.PLAINTEXT.ssl.client.auth", "required")
            .unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(err.contains("applies to SSL and SASL_SSL"), "{err}");
        let mut p = Properties::default();
        p.set(
            "listeners",
            "SASL_SSL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
        )
        .unwrap();
        p.set("listener.name.sasl_ssl.sasl.enabled.mechanisms", "GSSAPI")
            .unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("listener.name.sasl_ssl.sasl.enabled.mechanisms"),
            "{err}"
        );
        p.set("listener.name.sasl_ssl.sasl.enabled.mechanisms", "PLAIN")
            .unwrap();
        p.set("listener.name.sasl_ssl.ssl.client.auth", "sometimes")
            .unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("listener.name.sasl_ssl.ssl.client.auth") && err.contains("sometimes"),
            "{err}"
        );
    }
}
