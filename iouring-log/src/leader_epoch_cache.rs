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

    /// Kafka's `endOffsetFor` (what OffsetForLeaderEpoch answers), case for case:
    /// - the latest epoch: it and `log_end_offset`;
    /// - an epoch between known ones: the largest known epoch at or below it, ending where the
    ///   next known epoch starts;
    /// - an epoch older than every entry: it, ending where the first entry starts;
    /// - an undefined (negative) epoch, one newer than the latest, or an empty cache: `None`
    ///   (Kafka's `UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`).
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end_offset: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        let &(latest, _) = self.entries.last()?;
        if epoch.0 < 0 || epoch > latest {
            return None;
        }
        if epoch == latest {
            return Some((latest, log_end_offset));
        }
        let i = self.entries.partition_point(|&(e, _)| e <= epoch);
        let next_start = self.entries[i].1;
        match i.checked_sub(1) {
            Some(floor) => Some((self.entries[floor].0, next_start)),
            None => Some((epoch, next_start)),
        }
    }

    /// Kafka's divergence check for a fetch at `fetch_offset` whose last fetched batch had
    /// `last_fetched_epoch`: `None` when this log holds that epoch up to `fetch_offset` at
    /// least; otherwise `Some` of what [`Self::end_offset_for`] answers for it (Kafka's
    /// `DivergingEpoch`; `Some(None)` is `UNDEFINED_EPOCH`).
    pub fn divergence(
        &self,
        last_fetched_epoch: LeaderEpoch,
        fetch_offset: Offset,
        log_end_offset: Offset,
    ) -> Option<Option<(LeaderEpoch, Offset)>> {
        match self.end_offset_for(last_fetched_epoch, log_end_offset) {
            Some((e, end)) if e >= last_fetched_epoch && end >= fetch_offset => None,
            other => Some(other),
        }
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
        assert_eq!(
            c.end_offset_for(LeaderEpoch(4), Offset(30)),
            None,
            "newer than all"
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(2), Offset(30)),
            Some((LeaderEpoch(2), Offset(20)))
        );
        let mut later = LeaderEpochCache::default();
        later.assign(LeaderEpoch(5), Offset(100));
        later.assign(LeaderEpoch(7), Offset(120));
        assert_eq!(
            later.end_offset_for(LeaderEpoch(3), Offset(130)),
            Some((LeaderEpoch(3), Offset(100))),
            "older than every entry: ends where the first starts"
        );
        assert_eq!(
            LeaderEpochCache::default().end_offset_for(LeaderEpoch(0), Offset(0)),
            None
        );
        // Divergence: epoch 2 ends at 20 here, so a fetch at 25 after epoch-2 records diverges.
        assert_eq!(c.divergence(LeaderEpoch(2), Offset(15), Offset(30)), None);
        assert_eq!(
            c.divergence(LeaderEpoch(2), Offset(25), Offset(30)),
            Some(Some((LeaderEpoch(2), Offset(20))))
        );
        assert_eq!(
            c.divergence(LeaderEpoch(1), Offset(8), Offset(30)),
            Some(Some((LeaderEpoch(0), Offset(10)))),
            "epoch 1 never existed here"
        );
        assert_eq!(
            c.divergence(LeaderEpoch(9), Offset(8), Offset(30)),
            Some(None)
        );
        let round = LeaderEpochCache::from_lines(&c.to_lines()).unwrap();
        assert_eq!(round, c);
        c.truncate_from_end(Offset(20));
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(2)));
        c.truncate_from_start(Offset(12));
        assert_eq!(c.entries(), &[(LeaderEpoch(2), Offset(12))]);
    }
}
