//! The high watermark checkpoint of a replicated partition (Kafka's
//! `replication-offset-checkpoint`, kept here as one small file per partition folder,
//! [`HW_CHECKPOINT_FILE`]): written when the high watermark moved, at most every
//! [`HW_CHECKPOINT_INTERVAL_MS`], and on close; read when the partition opens, so a replica that
//! restarts shows consumers what was committed before it stopped instead of nothing until its
//! followers report in — and never more than its own log holds (the lower of the two).
//!
//! A high watermark only ever covers committed records, which no truncation removes, so a
//! checkpoint that is older than the log is merely conservative. That is why the periodic
//! checkpoints are not synced ([`write_checkpoint_unsynced`]): a power loss may take one back
//! (an older value, or a missing or unreadable file: 0), never forward, while each sync is a device cache flush that
//! holds the disk's other writes — the acknowledgements waiting on them — until the cache is
//! written back (up to 850 ms measured on these machines' virtio disk under a replicated
//! load, a dip every 5 s). The checkpoint at close is synced.

use iouring_log::{
    parse_checkpoint, read_checkpoint_file, write_checkpoint, write_checkpoint_unsynced,
};
use iouring_log::{IoError, Offset};

use super::replica::Role;
use super::Partition;
use crate::limits::HW_CHECKPOINT_INTERVAL_MS;

pub const HW_CHECKPOINT_FILE: &str = "high-watermark-checkpoint";

impl Partition {
    /// Writes the high watermark of a replicated partition if it moved since the last
    /// checkpoint and, unless `force`, the last one is older than [`HW_CHECKPOINT_INTERVAL_MS`];
    /// synced only if `force`.
    pub async fn checkpoint_high_watermark(&self, now_ms: i64, force: bool) -> Result<(), IoError> {
        if matches!(*self.role.borrow(), Role::Single) {
            return Ok(());
        }
        let hw = self.high_watermark().0;
        let due = hw != self.hw_checkpointed.get()
            && (force || now_ms - self.hw_checkpoint_at.get() >= HW_CHECKPOINT_INTERVAL_MS);
        if !due {
            return Ok(());
        }
        let lines = [hw.to_string()];
        if force {
            write_checkpoint(self.log.dir(), HW_CHECKPOINT_FILE, &lines).await?;
        } else {
            write_checkpoint_unsynced(self.log.dir(), HW_CHECKPOINT_FILE, &lines).await?;
        }
        self.hw_checkpointed.set(hw);
        self.hw_checkpoint_at.set(now_ms);
        Ok(())
    }

    /// Reads the checkpoint on open: the high watermark this replica starts from (before the
    /// metadata gives it a role) is the checkpointed one, at most its written end. A missing or
    /// malformed checkpoint leaves it at zero.
    pub async fn restore_high_watermark(&self) -> Result<(), IoError> {
        let path = self.log.dir().join(HW_CHECKPOINT_FILE);
        let Some(bytes) = read_checkpoint_file(&path).await? else {
            return Ok(());
        };
        let Some(hw) = parse_checkpoint(&bytes)
            .and_then(|lines| lines.first().and_then(|l| l.trim().parse::<i64>().ok()))
        else {
            tracing::warn!(path = %path.display(), "malformed high watermark checkpoint; starting from 0");
            return Ok(());
        };
        let hw = Offset(hw.max(0)).min(self.log.written_end_offset());
        self.hw_checkpointed.set(hw.0);
        if let Role::Offline { high_watermark } = &mut *self.role.borrow_mut() {
            *high_watermark = hw;
        }
        Ok(())
    }
}
