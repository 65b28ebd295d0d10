//! `iouring-log` owns one partition's log on disk: segments in Kafka's layout and byte format
//! (`.log`, `.index`, `.timeindex`, `leader-epoch-checkpoint`), O_DIRECT appends through
//! glommio/io_uring, zero-copy read descriptions, recovery, roll, flush and retention.
//!
//! It must not touch: Kafka requests or the network (that is `node`), replicas, ISR or high
//! watermarks (that is `replication`; it only receives an upper bound for reads and
//! retention). Every method runs on the glommio executor that opened the log.
//!
//! Layout and crash cases: `docs/format.md`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod aligned_buf;
mod appender;
mod batch;
mod checkpoint;
mod config;
mod error;
pub mod fault_injection;
mod helper_thread;
mod leader_epoch_cache;
pub mod limits;
mod log;
mod notify;
mod offset_index;
mod read_cache;
mod read_gate;
mod reader;
pub mod records;
mod recovery;
mod segment;
mod segment_io;
mod slow;
mod tail;
mod time_index;
mod txn_index;
mod types;
mod watermarks;
mod write_planner;

// The crate's surface: everything another crate may use (the modules above are private, except
// the bounds in `limits` and the test facility `fault_injection`).

// A log: open, append, wait, read, roll, flush, retention, compaction.
pub use config::{Compaction, ConfigError as LogConfigError, LogConfig};
pub use log::cleaner::{CleanStats, CleanerLimits};
pub use log::durability::Durability;
pub use log::open::LogOptions;
pub use log::read::{ReadOptions, ReadResult};
pub use log::{AppendInfo, Log};
pub use records::first_unkeyed_record;
pub use types::{FilePosition, LeaderEpoch, Offset, RelativeOffset, TimestampMs};

// Kafka's aborted transaction index entries (`.txnindex`).
pub use txn_index::{AbortedTxnEntry, TXN_INDEX_ENTRY_BYTES};

// Errors.
pub use batch::BatchError;
pub use error::{AppendError, FailureCause, FlushError, IoError, LogFailure, OpenError, ReadError};

// Kafka's record batch header, and the whole batches at the start of some bytes.
pub use batch::{
    encode_marker, parse_control_record, whole_batches, BatchHeader, ControlRecord, ATTR_CONTROL,
    ATTR_TRANSACTIONAL, CONTROL_RECORD_BYTES_MAX,
};

// What a read returns: file ranges and in-memory tail pieces, sent without a copy.
pub use aligned_buf::AlignedBuf;
pub use reader::{await_piece, read_slices_to_vec, try_piece, ChunkPiece, ReadSlice};
pub use tail::MemSlice;

// Waiting for a log to move (appends, watermarks), across logs.
pub use notify::{AnyChanged, Moved, Notify};

// Kafka's leader epoch cache and its checkpoint files; small files written durably.
pub use checkpoint::{
    parse_checkpoint, read_file as read_checkpoint_file, write_checkpoint,
    write_checkpoint_unsynced,
};
pub use leader_epoch_cache::LeaderEpochCache;

// The shard-wide read cache and device read gate, and their counters.
pub use read_cache::{set_budget as set_read_cache_budget, stats as read_cache_stats, CacheStats};
pub use read_gate::{stats as read_gate_stats, GateStats};

// Segment file I/O: the implementation (and the trait a fault-injecting one implements), the
// device probe, disk space, and what the shard's log I/O took.
pub use segment_io::{
    disk_space, free_bytes, io_times, page_cache_writes, probe_direct_io, DirectIo, IoTimes,
    SegmentFile, SegmentIo, ShardIoTimes, WriteBuffer, WriteMode,
};

// Work that must not run on a shard's thread, and a warning for slow work that did.
pub use helper_thread::on_helper_thread;
pub use slow::warn_if_slow;
