//! The group coordinator's settings (`offsets.*`, `group.*`).

use super::{ConfigError, Properties};
use super::{ConsumerGroupConfig, GroupConfig};
use crate::group_coordinator::consumer::{Assignor, MigrationPolicy};

impl Properties {
    pub(super) fn group(&self) -> Result<GroupConfig, ConfigError> {
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
                if rf > crate::limits::REPLICATION_FACTOR_MAX as i64 {
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
            consumer_protocol: self.rebalance_protocols()?,
            consumer: self.consumer_group()?,
        })
    }

    /// `group.coordinator.rebalance.protocols`: `classic` must be there; `consumer` turns on
    /// KIP-848 groups. (`share` and `streams` are not built.)
    fn rebalance_protocols(&self) -> Result<bool, ConfigError> {
        let key = "group.coordinator.rebalance.protocols";
        let mut consumer = false;
        let mut classic = false;
        for p in self
            .get(key)
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match p {
                "classic" => classic = true,
                "consumer" => consumer = true,
                "share" | "streams" => {
                    return Err(self.invalid(
                        key,
                        format!("the {p} group protocol is not built in ringlog"),
                    ))
                }
                other => return Err(self.invalid(key, format!("unknown group protocol {other}"))),
            }
        }
        if !classic {
            return Err(self.invalid(key, "classic must be listed"));
        }
        Ok(consumer)
    }

    fn consumer_group(&self) -> Result<ConsumerGroupConfig, ConfigError> {
        let bounded = |key: &str, min: &str, max: &str| -> Result<(i32, i32, i32), ConfigError> {
            let (v, lo, hi): (i32, i32, i32) = (self.int(key)?, self.int(min)?, self.int(max)?);
            if lo < 1 || hi < lo {
                return Err(self.invalid(max, format!("{min} must be >= 1 and <= {max}")));
            }
            if v < lo || v > hi {
                return Err(self.invalid(key, format!("must be between {min} and {max}")));
            }
            Ok((v, lo, hi))
        };
        let (session, min_session, max_session) = bounded(
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )?;
        let (interval, min_interval, max_interval) = bounded(
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )?;
        if interval >= session {
            return Err(self.invalid(
                "group.consumer.heartbeat.interval.ms",
                "must be less than group.consumer.session.timeout.ms",
            ));
        }
        let key = "group.consumer.assignors";
        let mut assignors = Vec::new();
        for name in self
            .get(key)
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            match Assignor::parse(name) {
                Some(a) if !assignors.contains(&a) => assignors.push(a),
                Some(_) => {}
                None => {
                    return Err(
                        self.invalid(key, format!("unknown assignor {name} (uniform, range)"))
                    )
                }
            }
        }
        if assignors.is_empty() {
            return Err(self.invalid(key, "at least one assignor"));
        }
        let max_size: i64 = self.int("group.consumer.max.size")?;
        if max_size < 1 {
            return Err(self.invalid("group.consumer.max.size", "must be at least 1"));
        }
        let key = "group.consumer.migration.policy";
        let migration = MigrationPolicy::parse(self.get(key)).ok_or_else(|| {
            self.invalid(
                key,
                format!(
                    "unknown policy {} (bidirectional, upgrade, downgrade, disabled)",
                    self.get(key)
                ),
            )
        })?;
        Ok(ConsumerGroupConfig {
            session_timeout_ms: session,
            min_session_timeout_ms: min_session,
            max_session_timeout_ms: max_session,
            heartbeat_interval_ms: interval,
            min_heartbeat_interval_ms: min_interval,
            max_heartbeat_interval_ms: max_interval,
            max_size: max_size as usize,
            assignors,
            migration,
        })
    }
}
