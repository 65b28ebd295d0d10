//! One partition served by a shard: its log and its idempotent producer state.

use std::cell::RefCell;

use iouring_log::Log;

use crate::producer_state::ProducerStateMap;

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub log: Log,
    pub producers: RefCell<ProducerStateMap>,
    /// `max.message.bytes` of the topic: the largest batch accepted.
    pub max_message_bytes: usize,
}

impl Partition {
    /// The high watermark: on a single node every appended record is committed.
    pub fn high_watermark(&self) -> i64 {
        self.log.log_end_offset().0
    }
}

/// `<topic>-<partition>`, Kafka's folder name.
pub fn dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}
