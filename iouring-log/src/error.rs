//! One error enum per operation, each carrying the path or offset it concerns.

use std::io;
use std::path::PathBuf;

use crate::batch::BatchError;
use crate::config::ConfigError;
use crate::types::{LeaderEpoch, Offset};

/// An I/O failure on a named file.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl IoError {
    pub fn new(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<io::Error>,
    ) -> IoError {
        IoError {
            op,
            path: path.into(),
            source: source.into(),
        }
    }
}

/// Opening (and recovering) a log.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("invalid log config: {0}")]
    Config(#[from] ConfigError),
    #[error("{path}: {reason}")]
    Layout { path: PathBuf, reason: String },
}

/// Appending batches.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("corrupt record batch at byte {position} of the request: {source}")]
    CorruptBatch {
        position: usize,
        #[source]
        source: BatchError,
    },
    #[error("record batch of {size} bytes exceeds segment.bytes {segment_bytes}")]
    BatchTooLarge { size: usize, segment_bytes: u64 },
    #[error("batch base offset {got} is not the log end offset {expected}")]
    OffsetMismatch { expected: Offset, got: Offset },
    #[error("leader epoch {epoch} is older than the latest epoch {latest}")]
    StaleEpoch {
        epoch: LeaderEpoch,
        latest: LeaderEpoch,
    },
    #[error("log {0} is failed after an I/O error; reopen it")]
    Failed(String),
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Reading.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
    #[error("segment {path} is corrupt at position {position}: {source}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        #[source]
        source: BatchError,
    },
    #[error("log {0} is failed after an I/O error; reopen it")]
    Failed(String),
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Flushing, rolling, truncating, deleting segments and closing.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("log {0} is failed after an I/O error; reopen it")]
    Failed(String),
    #[error("truncation to offset {offset} is below the log start offset {log_start_offset}")]
    TruncateBelowStart {
        offset: Offset,
        log_start_offset: Offset,
    },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// A flush, roll or permit failure met while appending.
impl From<FlushError> for AppendError {
    fn from(e: FlushError) -> AppendError {
        match e {
            FlushError::Io(io) => AppendError::Io(io),
            FlushError::Failed(f) => AppendError::Failed(f),
            other => AppendError::Failed(other.to_string()),
        }
    }
}
