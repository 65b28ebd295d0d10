//! Storage settings: the defaults of topics' timestamps and compaction, the shards' log cleaners,
//! the read cache's budget from the memory the node may use.

use iouring_log::records::Codec;
use iouring_log::Compaction;

use crate::limits::READ_CACHE_AUTO_PER_SHARD;
use crate::partition::compression::TopicCompression;
use crate::partition::timestamps::{TimestampPolicy, TimestampType};

use super::CleanerSettings;
use super::{ConfigError, Properties};

impl Properties {
    /// `log.message.timestamp.*` (Kafka 4.x's defaults: CreateTime, any past, one hour ahead).
    pub(super) fn timestamps(&self) -> Result<TimestampPolicy, ConfigError> {
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

    /// `compression.type` and `compression.{gzip,lz4,zstd}.level`: the defaults of topics.
    pub(super) fn compression(&self) -> Result<TopicCompression, ConfigError> {
        let key = "compression.type";
        let codec = TopicCompression::parse_type(self.get(key)).ok_or_else(|| {
            self.invalid(
                key,
                "must be one of uncompressed, gzip, snappy, lz4, zstd, producer",
            )
        })?;
        let level = |codec: Codec| -> Result<i32, ConfigError> {
            let key = format!("compression.{}.level", codec.name());
            TopicCompression::parse_level(codec, self.get(&key))
                .map_err(|why| self.invalid(&key, why))
        };
        Ok(TopicCompression {
            codec,
            gzip_level: level(Codec::Gzip)?,
            lz4_level: level(Codec::Lz4)?,
            zstd_level: level(Codec::Zstd)?,
        })
    }

    /// The default compaction settings of topics (`log.cleanup.policy`, `log.cleaner.*`).
    pub(super) fn compaction(&self) -> Result<Compaction, ConfigError> {
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
    pub(super) fn cleaner(&self, shards: usize) -> Result<CleanerSettings, ConfigError> {
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
            limits: iouring_log::CleanerLimits {
                map_bytes: (map_bytes as f64 / shards) as usize,
                io_bytes_per_second: (rate > 0.0 && rate < 1e18)
                    .then(|| (rate / shards).max(1.0) as u64),
            },
        })
    }

    /// `log.read.cache.bytes`; -1 means 256 MiB per shard, at most a quarter of the memory the
    /// node may use.
    pub(super) fn read_cache_bytes(&self, shards: usize) -> Result<u64, ConfigError> {
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
}

/// The memory this process may use: physical memory, or the cgroup (v2) limit when that is
/// lower (a container's `memory.max`).
pub(super) fn usable_memory_bytes() -> u64 {
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
