//! Per-log settings, named after Kafka's topic configs.

use crate::limits::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes of log between index entries.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`: the largest offset index (8-byte entries) and time index
    /// (12-byte entries) of a segment; the segment rolls when either is full.
    pub segment_index_bytes: u64,
    /// `segment.jitter.ms`: each segment rolls up to this much (at most `segment.ms`) before
    /// `segment.ms`, by an amount fixed per segment, so partitions created together do not all
    /// roll at once.
    pub segment_jitter_ms: i64,
    /// `preallocate`: a new segment's file is allocated to `segment.bytes` at once, instead of
    /// in steps that grow with it.
    pub preallocate: bool,
    /// `flush.messages`: fsync after this many appended batches' records; `None` leaves
    /// durability to replication (Kafka's default).
    pub flush_messages: Option<u64>,
    /// `flush.ms`: fsync when the oldest unflushed append is this old (checked by
    /// [`crate::Log::maybe_flush`]); `None` = never on a timer.
    pub flush_ms: Option<i64>,
    /// `retention.bytes`: delete old segments while the log is larger; `None` = unlimited.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: delete segments whose newest record is older; `None` = forever.
    pub retention_ms: Option<i64>,
    /// `cleanup.policy` and the log cleaner's settings.
    pub compaction: Compaction,
}

/// `cleanup.policy` (`delete`, `compact`, or both) and the compaction settings, Kafka's
/// topic configs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compaction {
    /// `delete` in `cleanup.policy`: `retention.ms` and `retention.bytes` delete old segments.
    pub delete: bool,
    /// `compact` in `cleanup.policy`: the log cleaner keeps the latest record of each key.
    pub compact: bool,
    /// `min.cleanable.dirty.ratio`: the log is cleaned when its dirty bytes are at least this
    /// share of its cleanable bytes.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this are never compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log whose oldest dirty record is older than this is cleaned
    /// whatever its dirty ratio (`None`: no such bound).
    pub max_compaction_lag_ms: Option<i64>,
    /// `delete.retention.ms`: how long a tombstone stays once it is in the cleaned part.
    pub delete_retention_ms: i64,
    /// `file.delete.delay.ms`: how long the files of segments the cleaner replaced stay (renamed
    /// `.deleted`) for reads that took them before the swap; then they go once no fetch holds
    /// them. Retention and truncation need no delay: they wait for the fetches holding a
    /// segment (`Segment::delete_files`).
    pub file_delete_delay_ms: i64,
}

impl Compaction {
    /// `cleanup.policy`: a comma-separated list of `delete` and `compact` (either order, at
    /// least one) as `(delete, compact)`; `None` for anything else.
    pub fn parse_policy(value: &str) -> Option<(bool, bool)> {
        let (mut delete, mut compact) = (false, false);
        for part in value.split(',').map(str::trim) {
            match part {
                "delete" => delete = true,
                "compact" => compact = true,
                _ => return None,
            }
        }
        (delete || compact).then_some((delete, compact))
    }

    /// `min.cleanable.dirty.ratio`: a number from 0 to 1; `None` for anything else.
    pub fn parse_ratio(value: &str) -> Option<f64> {
        value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
    }
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            delete: true,
            compact: false,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
            delete_retention_ms: 24 * 3600 * 1000,
            file_delete_delay_ms: 60_000,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
            segment_jitter_ms: 0,
            preallocate: false,
            flush_messages: None,
            flush_ms: None,
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            compaction: Compaction::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("segment.bytes {value} is out of range [{SEGMENT_BYTES_MIN}, {SEGMENT_BYTES_MAX}]")]
    SegmentBytes { value: u64 },
    #[error("segment.ms {value} must be positive")]
    SegmentMs { value: i64 },
    #[error("segment.index.bytes {value} must be at least 4")]
    SegmentIndexBytes { value: u64 },
    #[error("segment.jitter.ms {value} must not be negative")]
    SegmentJitterMs { value: i64 },
    #[error("index.interval.bytes {value} must be positive")]
    IndexInterval { value: u64 },
    #[error("flush.messages {value} must be positive")]
    FlushMessages { value: u64 },
    #[error("flush.ms {value} must not be negative")]
    FlushMs { value: i64 },
    #[error("retention.ms {value} must not be negative")]
    RetentionMs { value: i64 },
    #[error("cleanup.policy must name delete, compact or both")]
    CleanupPolicy,
    #[error("min.cleanable.dirty.ratio {value} is out of range [0, 1]")]
    DirtyRatio { value: String },
    #[error("{key} {value} must not be negative")]
    CompactionMs { key: &'static str, value: i64 },
}

impl LogConfig {
    /// How long after its rolling timestamp the segment based at `base` rolls: `segment.ms`
    /// less its jitter, a share of `segment.jitter.ms` (bounded by `segment.ms`) fixed by the
    /// log's directory and the segment's base offset.
    pub fn roll_after_ms(&self, dir: &std::path::Path, base: i64) -> i64 {
        let bound = self.segment_jitter_ms.min(self.segment_ms);
        if bound <= 0 {
            return self.segment_ms;
        }
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (dir, base).hash(&mut h);
        self.segment_ms - (h.finish() % bound as u64) as i64
    }

    /// Whether a segment whose indexes hold these entries must roll before the next batch.
    pub fn indexes_full(&self, offset_entries: usize, time_entries: usize) -> bool {
        let (offset_max, time_max) = (
            self.segment_index_bytes / crate::limits::OFFSET_INDEX_ENTRY_BYTES as u64,
            self.segment_index_bytes / crate::limits::TIME_INDEX_ENTRY_BYTES as u64,
        );
        offset_entries as u64 >= offset_max || time_entries as u64 >= time_max
    }

    /// `(retention.ms, retention.bytes)` as they apply: neither without `delete` in
    /// `cleanup.policy` (a compacted-only log keeps every key's latest record forever).
    pub fn retention(&self) -> (Option<i64>, Option<u64>) {
        if self.compaction.delete {
            (self.retention_ms, self.retention_bytes)
        } else {
            (None, None)
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return Err(ConfigError::SegmentBytes {
                value: self.segment_bytes,
            });
        }
        if self.segment_ms <= 0 {
            return Err(ConfigError::SegmentMs {
                value: self.segment_ms,
            });
        }
        if self.segment_index_bytes < 4 {
            return Err(ConfigError::SegmentIndexBytes {
                value: self.segment_index_bytes,
            });
        }
        if self.segment_jitter_ms < 0 {
            return Err(ConfigError::SegmentJitterMs {
                value: self.segment_jitter_ms,
            });
        }
        if self.index_interval_bytes == 0 {
            return Err(ConfigError::IndexInterval { value: 0 });
        }
        if self.flush_messages == Some(0) {
            return Err(ConfigError::FlushMessages { value: 0 });
        }
        if let Some(v) = self.flush_ms.filter(|v| *v < 0) {
            return Err(ConfigError::FlushMs { value: v });
        }
        if let Some(v) = self.retention_ms.filter(|v| *v < 0) {
            return Err(ConfigError::RetentionMs { value: v });
        }
        let c = &self.compaction;
        if !c.delete && !c.compact {
            return Err(ConfigError::CleanupPolicy);
        }
        if !(0.0..=1.0).contains(&c.min_cleanable_dirty_ratio) {
            return Err(ConfigError::DirtyRatio {
                value: c.min_cleanable_dirty_ratio.to_string(),
            });
        }
        for (key, value) in [
            ("min.compaction.lag.ms", c.min_compaction_lag_ms),
            (
                "max.compaction.lag.ms",
                c.max_compaction_lag_ms.unwrap_or(0),
            ),
            ("delete.retention.ms", c.delete_retention_ms),
            ("file.delete.delay.ms", c.file_delete_delay_ms),
        ] {
            if value < 0 {
                return Err(ConfigError::CompactionMs { key, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_jitter_is_a_fixed_share_of_segment_ms_per_segment() {
        let dir = std::path::Path::new("/data/t-0");
        let none = LogConfig::default();
        assert_eq!(none.roll_after_ms(dir, 0), none.segment_ms);
        let cfg = LogConfig {
            segment_ms: 10_000,
            segment_jitter_ms: 4_000,
            ..LogConfig::default()
        };
        let rolls: Vec<i64> = (0..50).map(|b| cfg.roll_after_ms(dir, b * 100)).collect();
        assert!(
            rolls.iter().all(|r| (6_001..=10_000).contains(r)),
            "{rolls:?}"
        );
        assert!(
            rolls
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 10
        );
        // The same segment always gets the same share (a reopened log rolls it as before).
        assert_eq!(cfg.roll_after_ms(dir, 700), cfg.roll_after_ms(dir, 700));
        // A jitter above segment.ms is bounded by it (Kafka's min(jitter, segment.ms)).
        let wide = LogConfig {
            segment_ms: 1_000,
            segment_jitter_ms: i64::MAX,
            ..LogConfig::default()
        };
        assert!((0..50).all(|b| (1..=1_000).contains(&wide.roll_after_ms(dir, b))));
    }

    #[test]
    fn full_indexes_by_kafkas_entry_sizes() {
        let cfg = LogConfig {
            segment_index_bytes: 24,
            ..LogConfig::default()
        };
        assert!(!cfg.indexes_full(2, 1));
        assert!(cfg.indexes_full(3, 1));
        assert!(cfg.indexes_full(0, 2));
        let tiny = LogConfig {
            segment_index_bytes: 4,
            ..LogConfig::default()
        };
        assert!(tiny.indexes_full(0, 0));
        assert_eq!(
            LogConfig {
                segment_index_bytes: 3,
                ..LogConfig::default()
            }
            .validate(),
            Err(ConfigError::SegmentIndexBytes { value: 3 })
        );
    }
}
