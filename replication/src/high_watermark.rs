//! The high watermark: the offset below which every in-sync replica has every record, so a
//! consumer may read it and an `acks=all` producer may be answered.
//!
//! Contract: it only moves forward (asserted); it is the lowest log end offset over the ISR (the
//! leader's own counting only what is written to its segment file); it does not move while the
//! ISR is below `min.insync.replicas`.

use iouring_log::Offset;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HighWatermark(Offset);

impl HighWatermark {
    pub fn new(start: Offset) -> HighWatermark {
        HighWatermark(start)
    }

    pub fn get(self) -> Offset {
        self.0
    }

    /// Moves to `candidate` if that is forward; returns whether it moved.
    pub fn advance_to(&mut self, candidate: Offset) -> bool {
        if candidate > self.0 {
            self.0 = candidate;
            return true;
        }
        false
    }
}

/// The candidate high watermark: the lowest log end over the ISR members' ends given, `None`
/// when fewer than `min_insync` members are in sync or an end is unknown.
pub fn candidate(isr_log_ends: &[Option<Offset>], min_insync: usize) -> Option<Offset> {
    if isr_log_ends.len() < min_insync {
        return None;
    }
    isr_log_ends.iter().copied().min().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_in_sync_end_never_backwards_frozen_below_min_insync() {
        let mut hw = HighWatermark::new(Offset(5));
        let c = candidate(&[Some(Offset(9)), Some(Offset(7))], 2).unwrap();
        assert!(hw.advance_to(c));
        assert_eq!(hw.get(), Offset(7));
        assert!(!hw.advance_to(Offset(6)), "never backwards");
        assert_eq!(
            candidate(&[Some(Offset(9))], 2),
            None,
            "frozen below min.insync"
        );
        assert_eq!(
            candidate(&[Some(Offset(9)), None], 1),
            None,
            "an unknown end blocks it"
        );
    }
}
