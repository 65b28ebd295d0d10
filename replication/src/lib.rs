//! `replication` will own replica state (not built yet; see the issues): the leader's view of
//! its followers (ISR, high watermark, `acks=all` waiters), follower fetchers with batched
//! fetch sessions, leader epochs and truncation to the leader's epoch end offset.
//!
//! It knows replicas, offsets and epochs, and drives an `iouring-log` `Log` through
//! `append_as_follower`, `truncate_to` and `end_offset_for_epoch`. It must not touch sockets,
//! Kafka request encoding or files directly.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
