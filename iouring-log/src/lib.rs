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

pub mod aligned_buf;
pub mod appender;
pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod error;
pub mod fault_injection;
mod helper_thread;
pub mod leader_epoch_cache;
pub mod limits;
mod log;
mod log_durability;
mod log_open;
mod log_read;
mod log_roll;
pub mod notify;
pub mod offset_index;
pub mod read_cache;
pub mod read_gate;
pub mod reader;
pub mod recovery;
pub mod retention;
pub mod segment;
pub mod segment_io;
pub mod slow;
pub mod tail;
pub mod time_index;
pub mod types;
pub mod watermarks;
pub mod write_planner;

pub use batch::{BatchError, BatchHeader};
pub use config::LogConfig;
pub use error::{AppendError, FailureCause, FlushError, IoError, LogFailure, OpenError, ReadError};
pub use helper_thread::on_helper_thread;
pub use log::{AppendInfo, Log};
pub use log_durability::Durability;
pub use log_open::LogOptions;
pub use log_read::{ReadOptions, ReadResult};
pub use reader::{read_slices_to_vec, ReadSlice};
pub use segment_io::free_bytes;
pub use types::{FilePosition, LeaderEpoch, Offset, RelativeOffset, TimestampMs};
