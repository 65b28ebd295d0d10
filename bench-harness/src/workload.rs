//! Workloads in OpenMessaging Benchmark's shape (YAML, OMB's field names), plus the producer
//! settings OMB keeps in its driver files. Every field is validated with a message that names
//! it and the offending value.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    /// Replicas of each partition (OMB's driver `replicationFactor`); 1 by default.
    #[serde(default = "one")]
    pub replication_factor: u32,
    /// Topic configs given at creation (OMB's driver `topicConfig`), e.g.
    /// `{ min.insync.replicas: "2" }`.
    #[serde(default)]
    pub topic_config: std::collections::BTreeMap<String, String>,
    /// ringlog's addition: broker properties both brokers start with when
    /// `scripts/bench/perf-suite.sh` runs this workload (ringlog `--set`, Kafka's
    /// server.properties), for settings Kafka only takes at broker start, e.g.
    /// `log.retention.check.interval.ms`.
    /// `ringlog-bench run` cannot apply them to a running broker; it records them in the result.
    #[serde(default)]
    pub broker_config: std::collections::BTreeMap<String, String>,
    pub message_size: usize,
    #[serde(default = "one")]
    pub producers_per_topic: u32,
    #[serde(default = "one")]
    pub subscriptions_per_topic: u32,
    #[serde(default = "one")]
    pub consumer_per_subscription: u32,
    /// Messages per second across all producers; 0 = as fast as possible.
    pub producer_rate: u64,
    #[serde(default)]
    pub key_distributor: KeyDistributor,
    /// Consumers start this many bytes behind (OMB's catch-up read), produced before the test.
    #[serde(default, rename = "consumerBacklogSizeGB")]
    pub consumer_backlog_size_gb: f64,
    pub test_duration_minutes: f64,
    #[serde(default)]
    pub warmup_duration_minutes: f64,
    #[serde(default)]
    pub producer: ProducerSettings,
    /// ringlog's addition: how consumers get their partitions.
    #[serde(default)]
    pub consumer_assignment: ConsumerAssignment,
    /// ringlog's addition, OpenMessaging Benchmark's meaning of maximum throughput: search the
    /// highest publish rate at which the consumers keep up (short trials, see `sustainable.rs`),
    /// then measure at it for the test duration. Needs `producerRate: 0` and consumers.
    #[serde(default)]
    pub find_sustainable_rate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumerAssignment {
    /// Partitions split round-robin among a subscription's consumers, no group.
    #[default]
    Partitions,
    /// Each subscription is a consumer group; its consumers join it (range assignor) and commit.
    Group,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KeyDistributor {
    /// No key: records spread round-robin over partitions.
    #[default]
    NoKey,
    /// Keys cycle through a fixed set; the partition is murmur2(key) like the Java client.
    KeyRoundRobin,
    /// A random key per record.
    RandomNano,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProducerSettings {
    /// -1 (all), 0 or 1.
    pub acks: i16,
    pub batch_size_bytes: usize,
    pub linger_ms: u64,
    /// none, gzip, snappy, lz4, zstd.
    pub compression: String,
    /// Produce requests in flight per connection.
    pub max_in_flight: usize,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            acks: 1,
            batch_size_bytes: 131_072,
            linger_ms: 1,
            compression: "none".into(),
            max_in_flight: 5,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WorkloadError {
    #[error("workload file {path}: {reason}")]
    Parse { path: String, reason: String },
    #[error("workload '{name}': {field} = {value}: {reason}")]
    Invalid {
        name: String,
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

pub const MESSAGE_SIZE_MAX: usize = 16 << 20;
pub const CONNECTIONS_MAX: u32 = 10_000;

impl Workload {
    pub fn from_yaml(text: &str, path: &str) -> Result<Workload, WorkloadError> {
        let w: Workload = serde_yaml::from_str(text).map_err(|e| WorkloadError::Parse {
            path: path.into(),
            reason: e.to_string(),
        })?;
        w.validate()?;
        Ok(w)
    }

    pub fn load(path: &std::path::Path) -> Result<Workload, WorkloadError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::Parse {
            path: p.clone(),
            reason: e.to_string(),
        })?;
        Workload::from_yaml(&text, &p)
    }

    fn invalid(
        &self,
        field: &'static str,
        value: impl ToString,
        reason: &'static str,
    ) -> WorkloadError {
        WorkloadError::Invalid {
            name: self.name.clone(),
            field,
            value: value.to_string(),
            reason,
        }
    }

    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.topics == 0 {
            return Err(self.invalid("topics", self.topics, "must be at least 1"));
        }
        if self.partitions_per_topic == 0 {
            return Err(self.invalid(
                "partitionsPerTopic",
                self.partitions_per_topic,
                "must be at least 1",
            ));
        }
        if self.replication_factor == 0 || self.replication_factor > 10 {
            return Err(self.invalid(
                "replicationFactor",
                self.replication_factor,
                "must be 1 to 10",
            ));
        }
        if self.message_size < 16 || self.message_size > MESSAGE_SIZE_MAX {
            return Err(self.invalid(
                "messageSize",
                self.message_size,
                "must be 16 bytes (room for the send timestamp) to 16 MiB",
            ));
        }
        if self.producers_per_topic == 0 {
            return Err(self.invalid(
                "producersPerTopic",
                self.producers_per_topic,
                "must be at least 1",
            ));
        }
        let connections = self.topics
            * (self.producers_per_topic
                + self.subscriptions_per_topic * self.consumer_per_subscription);
        if connections > CONNECTIONS_MAX {
            return Err(self.invalid(
                "producersPerTopic",
                connections,
                "more than 10000 connections in all",
            ));
        }
        if self.test_duration_minutes.is_nan() || self.test_duration_minutes <= 0.0 {
            return Err(self.invalid(
                "testDurationMinutes",
                self.test_duration_minutes,
                "must be positive",
            ));
        }
        if self.warmup_duration_minutes < 0.0 || self.consumer_backlog_size_gb < 0.0 {
            return Err(self.invalid(
                "warmupDurationMinutes",
                self.warmup_duration_minutes,
                "must not be negative",
            ));
        }
        if self.find_sustainable_rate {
            if self.producer_rate != 0 {
                return Err(self.invalid(
                    "producerRate",
                    self.producer_rate,
                    "must be 0 with findSustainableRate (the search sets the rate)",
                ));
            }
            if self.subscriptions_per_topic == 0 || self.consumer_per_subscription == 0 {
                return Err(self.invalid(
                    "subscriptionsPerTopic",
                    self.subscriptions_per_topic * self.consumer_per_subscription,
                    "findSustainableRate needs consumers to keep up",
                ));
            }
            if self.consumer_backlog_size_gb > 0.0 {
                return Err(self.invalid(
                    "consumerBacklogSizeGB",
                    self.consumer_backlog_size_gb,
                    "must be 0 with findSustainableRate",
                ));
            }
        }
        for (field, map) in [
            ("topicConfig", &self.topic_config),
            ("brokerConfig", &self.broker_config),
        ] {
            // Both go into command lines and properties files as key=value.
            let plain = |t: &str| {
                !t.is_empty() && !t.contains(|c: char| c == '=' || c.is_whitespace() || c == '#')
            };
            if let Some((k, v)) = map.iter().find(|(k, v)| !plain(k) || !plain(v)) {
                return Err(self.invalid(
                    field,
                    format!("{k}: {v:?}"),
                    "keys and values must be non-empty, without '=', '#' or white space",
                ));
            }
        }
        let p = &self.producer;
        if !matches!(p.acks, -1..=1) {
            return Err(self.invalid("producer.acks", p.acks, "must be -1, 0 or 1"));
        }
        if p.batch_size_bytes < self.message_size.min(1 << 20) || p.batch_size_bytes > 64 << 20 {
            return Err(self.invalid(
                "producer.batchSizeBytes",
                p.batch_size_bytes,
                "must hold one message and be at most 64 MiB",
            ));
        }
        if !["none", "gzip", "snappy", "lz4", "zstd"].contains(&p.compression.as_str()) {
            return Err(self.invalid(
                "producer.compression",
                &p.compression,
                "must be none, gzip, snappy, lz4 or zstd",
            ));
        }
        if p.max_in_flight == 0 || p.max_in_flight > 64 {
            return Err(self.invalid("producer.maxInFlight", p.max_in_flight, "must be 1 to 64"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "
name: max-throughput
topics: 1
partitionsPerTopic: 4
messageSize: 1024
producersPerTopic: 2
producerRate: 0
testDurationMinutes: 1
warmupDurationMinutes: 0.1
producer: { acks: 1, batchSizeBytes: 1048576, lingerMs: 5, compression: none, maxInFlight: 5 }
";

    #[test]
    fn parses_omb_fields() {
        let w = Workload::from_yaml(GOOD, "good.yaml").unwrap();
        assert_eq!(
            (w.partitions_per_topic, w.message_size, w.key_distributor),
            (4, 1024, KeyDistributor::NoKey)
        );
        assert_eq!(w.producer.batch_size_bytes, 1 << 20);
        assert_eq!(w.consumer_assignment, ConsumerAssignment::Partitions);
        let g = format!("{GOOD}consumerAssignment: group\n");
        let w = Workload::from_yaml(&g, "group.yaml").unwrap();
        assert_eq!(w.consumer_assignment, ConsumerAssignment::Group);
        let bad = format!("{GOOD}consumerAssignment: groups\n");
        let e = Workload::from_yaml(&bad, "bad.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("consumerAssignment") && e.contains("groups"),
            "{e}"
        );
    }

    #[test]
    fn broker_config_is_parsed_and_checked() {
        let g = format!("{GOOD}brokerConfig: {{ log.retention.check.interval.ms: 5000 }}\n");
        let w = Workload::from_yaml(&g, "b.yaml").unwrap();
        assert_eq!(w.broker_config["log.retention.check.interval.ms"], "5000");
        for bad in [
            "brokerConfig: { \"a b\": 1 }",
            "brokerConfig: { a: \"x=y\" }",
            "topicConfig: { retention.bytes: \"\" }",
        ] {
            let e = Workload::from_yaml(&format!("{GOOD}{bad}\n"), "bad.yaml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("Config") && e.contains("without '='"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn errors_name_the_field_and_value() {
        let bad = GOOD.replace("messageSize: 1024", "messageSize: 3");
        let e = Workload::from_yaml(&bad, "bad.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("messageSize") && e.contains('3'), "{e}");
        let bad = GOOD.replace("compression: none", "compression: brotli");
        assert!(Workload::from_yaml(&bad, "bad.yaml")
            .unwrap_err()
            .to_string()
            .contains("brotli"));
        let bad = GOOD.replace("topics: 1", "topics: 1\ntopcis: 2");
        let e = Workload::from_yaml(&bad, "bad.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.yaml") && e.contains("topcis"), "{e}");
        let bad = GOOD.replace(
            "producerRate: 0",
            "producerRate: 5\nfindSustainableRate: true",
        );
        let e = Workload::from_yaml(&bad, "bad.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("producerRate") && e.contains('5'), "{e}");
        let ok = format!("{GOOD}findSustainableRate: true\n");
        assert!(
            Workload::from_yaml(&ok, "ok.yaml")
                .unwrap()
                .find_sustainable_rate
        );
        let bad = GOOD
            .replace("keyDistributor", "x")
            .replace("producerRate: 0", "producerRate: 0\nkeyDistributor: ZIPF");
        assert!(Workload::from_yaml(&bad, "bad.yaml").is_err());
    }
}
