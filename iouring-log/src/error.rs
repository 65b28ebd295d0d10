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

/// The first I/O failure of a log, latched: the log keeps serving what it wrote and takes
/// nothing more until it is retired and reopened. Its [`FailureCause`] says whether freeing
/// space can help (a full disk) or not (the device failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct LogFailure {
    pub cause: FailureCause,
    /// What failed, with the file and position.
    pub what: String,
}

/// Why a log failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCause {
    /// ENOSPC or EDQUOT: the file system (or the quota) is full.
    NoSpace,
    /// Any other I/O error (EIO, ...), with its errno when the OS gave one.
    Io { errno: Option<i32> },
    /// A write completed short of its length.
    ShortWrite,
}

impl LogFailure {
    /// The failure an I/O error of `what` latches.
    pub fn from_io(e: &io::Error, what: impl Into<String>) -> LogFailure {
        let errno = e.raw_os_error();
        // glommio rebuilds its I/O errors without the errno but with their kind.
        let full = matches!(errno, Some(libc::ENOSPC) | Some(libc::EDQUOT))
            || matches!(
                e.kind(),
                io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
            );
        let cause = if full {
            FailureCause::NoSpace
        } else {
            FailureCause::Io { errno }
        };
        LogFailure {
            cause,
            what: what.into(),
        }
    }

    /// Whether the failure is a full file system (ENOSPC, EDQUOT).
    pub fn is_no_space(&self) -> bool {
        self.cause == FailureCause::NoSpace
    }

    /// Whether the log may work again once its file system has room: a full one, or a write
    /// cut short (what a write meeting the end of the free space returns before ENOSPC).
    pub fn recoverable_with_space(&self) -> bool {
        matches!(self.cause, FailureCause::NoSpace | FailureCause::ShortWrite)
    }
}

impl From<&IoError> for LogFailure {
    fn from(e: &IoError) -> LogFailure {
        LogFailure::from_io(&e.source, e.to_string())
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
    #[error("the log failed after an I/O error (reopen it): {0}")]
    Failed(LogFailure),
    #[error(transparent)]
    Flush(Box<FlushError>),
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
    #[error("the log failed after an I/O error (reopen it): {0}")]
    Failed(LogFailure),
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Flushing, rolling, truncating, deleting segments and closing.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("the log failed after an I/O error (reopen it): {0}")]
    Failed(LogFailure),
    #[error("{0} has not failed; close it instead of retiring it")]
    NotFailed(PathBuf),
    #[error("the log {0} is closed")]
    Closed(PathBuf),
    #[error("truncation to offset {offset} is below the log start offset {log_start_offset}")]
    TruncateBelowStart {
        offset: Offset,
        log_start_offset: Offset,
    },
    #[error("the log cannot start again at offset {offset}: it is not empty and its end is {log_end_offset}, at or above it")]
    RestartInsideLog {
        offset: Offset,
        log_end_offset: Offset,
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
            other => AppendError::Flush(Box::new(other)),
        }
    }
}
