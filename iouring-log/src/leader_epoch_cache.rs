//! The leader epoch cache: `(epoch, start offset)` pairs, Kafka's `leader-epoch-checkpoint`.
//! Epochs and start offsets both strictly increase.

use crate::types::{LeaderEpoch, Offset};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<(LeaderEpoch, Offset)>,
}

impl LeaderEpochCache {
    pub fn entries(&self) -> &[(LeaderEpoch, Offset)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.0)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the latest epoch.
    /// Returns whether the cache changed.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 {
            return false;
        }
        match self.entries.last() {
            Some(&(e, _)) if epoch <= e => false,
            Some(&(_, o)) if start_offset < o => {
                // A newer epoch cannot start before an older one; drop what it overrides.
                self.entries.retain(|&(_, s)| s < start_offset);
                self.entries.push((epoch, start_offset));
                true
            }
            _ => {
                self.entries.push((epoch, start_offset));
                true
            }
        }
    }

    /// Kafka's `endOffsetFor`: the requested epoch (or the largest below it) and the offset
    /// where it ended: the start of the next epoch, or `log_end_offset` for the latest.
    /// `None` when the epoch is older than every entry.
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end_offset: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        let i = self.entries.partition_point(|&(e, _)| e <= epoch);
        if i == 0 {
            return None;
        }
        let found = self.entries[i - 1].0;
        let end = self
            .entries
            .get(i)
            .map_or(log_end_offset, |&(_, start)| start);
        Some((found, end))
    }

    /// Drops entries starting at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: Offset) {
        self.entries.retain(|&(_, s)| s < end_offset);
    }

    /// Drops entries wholly before `start_offset`, moving the one covering it to start there.
    pub fn truncate_from_start(&mut self, start_offset: Offset) {
        let keep_from = self
            .entries
            .partition_point(|&(_, s)| s <= start_offset)
            .saturating_sub(1);
        self.entries.drain(..keep_from);
        if let Some(first) = self.entries.first_mut() {
            if first.1 < start_offset {
                first.1 = start_offset;
            }
        }
    }

    pub fn to_lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(e, o)| format!("{} {}", e.0, o.0))
            .collect()
    }

    pub fn from_lines(lines: &[String]) -> Option<LeaderEpochCache> {
        let mut cache = LeaderEpochCache::default();
        for l in lines {
            let mut it = l.split_whitespace();
            let e: i32 = it.next()?.parse().ok()?;
            let o: i64 = it.next()?.parse().ok()?;
            if it.next().is_some() {
                return None;
            }
            if let Some(&(le, lo)) = cache.entries.last() {
                if e <= le.0 || o < lo.0 {
                    return None;
                }
            }
            cache.entries.push((LeaderEpoch(e), Offset(o)));
        }
        Some(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offsets_and_truncation() {
        let mut c = LeaderEpochCache::default();
        assert!(c.assign(LeaderEpoch(0), Offset(0)));
        assert!(!c.assign(LeaderEpoch(0), Offset(5)));
        assert!(c.assign(LeaderEpoch(2), Offset(10)));
        assert!(c.assign(LeaderEpoch(3), Offset(20)));
        assert_eq!(
            c.end_offset_for(LeaderEpoch(1), Offset(30)),
            Some((LeaderEpoch(0), Offset(10)))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(3), Offset(30)),
            Some((LeaderEpoch(3), Offset(30)))
        );
        assert_eq!(c.end_offset_for(LeaderEpoch(-1), Offset(30)), None);
        let round = LeaderEpochCache::from_lines(&c.to_lines()).unwrap();
        assert_eq!(round, c);
        c.truncate_from_end(Offset(20));
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(2)));
        c.truncate_from_start(Offset(12));
        assert_eq!(c.entries(), &[(LeaderEpoch(2), Offset(12))]);
    }
}
