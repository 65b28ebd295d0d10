//! A topic's `compression.type` and `compression.{gzip,lz4,zstd}.level`: the codec its batches
//! are stored with, and when a produced batch must be recompressed to it (`accept.rs`).

use iouring_log::records::{Codec, Compression};

/// `compression.type` and its levels: the codec a topic's batches are stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicCompression {
    /// `None`: `producer`, batches stay as the producer compressed them.
    pub codec: Option<Codec>,
    pub gzip_level: i32,
    pub lz4_level: i32,
    pub zstd_level: i32,
}

impl Default for TopicCompression {
    /// Kafka's defaults: `producer`, gzip -1, lz4 9, zstd 3.
    fn default() -> Self {
        TopicCompression {
            codec: None,
            gzip_level: -1,
            lz4_level: 9,
            zstd_level: 3,
        }
    }
}

impl TopicCompression {
    /// What a batch sent with `source` must be recompressed to, if anything (Kafka's rule: a
    /// batch already in the topic's codec stays as it is, whatever its level).
    pub fn target(&self, source: Codec) -> Option<Compression> {
        let codec = self.codec.filter(|c| *c != source)?;
        let level = match codec {
            Codec::Gzip => Some(self.gzip_level),
            Codec::Lz4 => Some(self.lz4_level),
            Codec::Zstd => Some(self.zstd_level),
            Codec::None | Codec::Snappy => None,
        };
        Some(Compression { codec, level })
    }

    /// `compression.type`: a codec's name or `producer` (`Some(None)`); `None` otherwise.
    pub fn parse_type(value: &str) -> Option<Option<Codec>> {
        match value.trim() {
            "producer" => Some(None),
            v => Codec::parse(v).map(Some),
        }
    }

    /// A `compression.<codec>.level` within Kafka's range for `codec`.
    pub fn parse_level(codec: Codec, value: &str) -> Result<i32, String> {
        let (min, max, default) = codec.level_range().expect("a codec with levels");
        let level: i32 = value
            .trim()
            .parse()
            .map_err(|_| "not a whole number".to_owned())?;
        let gzip_default = codec == Codec::Gzip && level == default;
        if (min..=max).contains(&level) || gzip_default {
            Ok(level)
        } else if codec == Codec::Gzip {
            Err(format!("must be from {min} to {max}, or {default}"))
        } else {
            Err(format!("must be from {min} to {max}"))
        }
    }
}
