//! Newtypes for the numbers the log deals in, so that an offset is never mistaken for a
//! position and "unknown" is an `Option`, never -1.

use std::fmt;

/// A Kafka offset: the position of a record in the partition's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

/// An offset relative to its segment's base offset, as stored in the indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativeOffset(pub u32);

/// A byte position inside a segment's `.log` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FilePosition(pub u32);

/// The epoch of the leader that appended a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderEpoch(pub i32);

/// A record timestamp in milliseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimestampMs(pub i64);

impl Offset {
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }

    /// The offset relative to `base`, if it fits the index's `u32`.
    pub fn relative_to(self, base: Offset) -> Option<RelativeOffset> {
        let delta = self.0.checked_sub(base.0)?;
        u32::try_from(delta).ok().map(RelativeOffset)
    }
}

impl RelativeOffset {
    pub fn absolute(self, base: Offset) -> Offset {
        Offset(base.0 + i64::from(self.0))
    }
}

impl FilePosition {
    pub fn get(self) -> u64 {
        u64::from(self.0)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for FilePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
