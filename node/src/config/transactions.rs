//! The transaction coordinator's settings (`transaction.*`).

use super::TxnConfig;
use super::{ConfigError, Properties};

impl Properties {
    pub(super) fn transactions(&self) -> Result<TxnConfig, ConfigError> {
        let positive = |key: &str| -> Result<i64, ConfigError> {
            let v: i64 = self.int(key)?;
            if v < 1 {
                return Err(self.invalid(key, "must be at least 1"));
            }
            Ok(v)
        };
        let partitions = positive("transaction.state.log.num.partitions")?;
        if partitions > i64::from(crate::limits::PARTITIONS_MAX) {
            return Err(self.invalid(
                "transaction.state.log.num.partitions",
                "too many partitions",
            ));
        }
        let rf = positive("transaction.state.log.replication.factor")?;
        if rf > crate::limits::REPLICATION_FACTOR_MAX as i64 {
            return Err(self.invalid("transaction.state.log.replication.factor", "at most 10"));
        }
        let max_timeout = positive("transaction.max.timeout.ms")?;
        Ok(TxnConfig {
            state_log_partitions: partitions as i32,
            state_log_replication_factor: rf as i32,
            state_log_min_isr: positive("transaction.state.log.min.isr")? as i32,
            state_log_segment_bytes: positive("transaction.state.log.segment.bytes")?,
            max_timeout_ms: i32::try_from(max_timeout)
                .map_err(|_| self.invalid("transaction.max.timeout.ms", "at most 2147483647"))?,
            abort_timed_out_interval_ms: positive(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            )?,
            id_expiration_ms: positive("transactional.id.expiration.ms")?,
            remove_expired_interval_ms: positive(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
            )?,
            partition_verification: self.bool("transaction.partition.verification.enable")?,
            version: match self.int::<i64>("transaction.version")? {
                0 => ::transactions::TxnVersion::V0,
                1 => ::transactions::TxnVersion::V1,
                2 => ::transactions::TxnVersion::V2,
                _ => return Err(self.invalid("transaction.version", "must be 0, 1 or 2")),
            },
        })
    }
}
