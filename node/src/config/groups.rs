//! The group coordinator's settings (`offsets.*`, `group.*`).

use super::GroupConfig;
use super::{ConfigError, Properties};

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
        })
    }
}
