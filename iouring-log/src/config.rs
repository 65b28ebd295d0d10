//! Per-log settings, named after Kafka's topic configs.

use crate::limits::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes of log between index entries.
    pub index_interval_bytes: u64,
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
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            flush_messages: None,
            flush_ms: None,
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("segment.bytes {value} is out of range [{SEGMENT_BYTES_MIN}, {SEGMENT_BYTES_MAX}]")]
    SegmentBytes { value: u64 },
    #[error("segment.ms {value} must be positive")]
    SegmentMs { value: i64 },
    #[error("index.interval.bytes {value} must be positive")]
    IndexInterval { value: u64 },
    #[error("flush.messages {value} must be positive")]
    FlushMessages { value: u64 },
    #[error("flush.ms {value} must not be negative")]
    FlushMs { value: i64 },
    #[error("retention.ms {value} must not be negative")]
    RetentionMs { value: i64 },
}

impl LogConfig {
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
        Ok(())
    }
}
