//! Whether this node may act as a partition leader right now.
//!
//! In a cluster a node leads only while it surely holds its etcd lease: the keep-alive task
//! ([`super::etcd::session`]) publishes the lease's deadline as this broker sees it (the send
//! time of the last answered keep-alive plus the granted TTL, so it ends before etcd's), and
//! shards read it before every write they acknowledge as leader. A paused or cut-off leader
//! stops accepting writes the moment its lease is in doubt, before etcd expires it and the
//! controller elects another leader: two nodes never take writes for one partition at once.
//! A single node (embedded metadata) has no lease and always may.
//!
//! A new session (the first, or one registered again after the lease was lost) counts only
//! once every shard applied the metadata as of its registration ([`LeaseClock::metadata_applied`]):
//! a node that was paused or cut off must first learn of the leaders elected meanwhile, or it
//! would take writes as the leader it no longer is.
//!
//! Contract: [`LeaseClock::holds`] is two atomic loads and a clock read; it is safe from any
//! thread. Deadlines only move forward while a session lives; [`LeaseClock::lost`] ends one.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The lease deadline shared by the control plane (writer) and the shards (readers).
#[derive(Clone, Debug)]
pub struct LeaseClock {
    /// Nanoseconds since [`base`] until which the lease surely holds (0: not held);
    /// `None`: no lease needed (a single node).
    until: Option<Arc<AtomicU64>>,
    /// The shards applied the metadata as of the current session's registration.
    applied: Arc<AtomicBool>,
    /// The current session's broker epoch.
    broker_epoch: Arc<AtomicI64>,
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn nanos(t: Instant) -> u64 {
    // +1: a deadline at the base instant is still a held lease, not "0 = lost".
    t.saturating_duration_since(base()).as_nanos() as u64 + 1
}

impl LeaseClock {
    /// A clock for a node that needs no lease (embedded metadata): always held.
    pub fn unleased() -> LeaseClock {
        LeaseClock {
            until: None,
            applied: Arc::new(AtomicBool::new(true)),
            broker_epoch: Arc::new(AtomicI64::new(-1)),
        }
    }

    /// A clock for a cluster node: not held until a session publishes a deadline.
    pub fn leased() -> LeaseClock {
        base();
        LeaseClock {
            until: Some(Arc::new(AtomicU64::new(0))),
            applied: Arc::default(),
            broker_epoch: Arc::new(AtomicI64::new(-1)),
        }
    }

    /// Whether the node holds its lease now.
    pub fn holds(&self) -> bool {
        match &self.until {
            None => true,
            Some(until) => {
                self.applied.load(Ordering::Acquire)
                    && nanos(Instant::now()) < until.load(Ordering::Acquire)
            }
        }
    }

    /// The broker epoch while the lease holds, which followers send with their fetches
    /// (Fetch's `ReplicaEpoch`): a leader whose own lease is in doubt learns from it whether
    /// they still reach the metadata store. `None` without a lease.
    pub fn broker_epoch(&self) -> Option<i64> {
        (self.until.is_some() && self.holds()).then(|| self.broker_epoch.load(Ordering::Acquire))
    }

    /// A new session registered as `broker_epoch`, its lease surely held until `deadline`
    /// (counting once the shards applied the metadata).
    pub fn registered(&self, broker_epoch: i64, deadline: Instant) {
        self.broker_epoch.store(broker_epoch, Ordering::Release);
        self.held_until(deadline);
    }

    /// A session's lease surely holds until `deadline` (a keep-alive answered).
    pub fn held_until(&self, deadline: Instant) {
        if let Some(until) = &self.until {
            until.store(nanos(deadline), Ordering::Release);
        }
    }

    /// Every shard applied the metadata as of the current session's registration.
    pub fn metadata_applied(&self) {
        self.applied.store(true, Ordering::Release);
    }

    /// The session's lease is lost (expired, revoked, or abandoned): the next session counts
    /// only once the shards caught up with the metadata again.
    pub fn lost(&self) {
        if let Some(until) = &self.until {
            until.store(0, Ordering::Release);
            self.applied.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_single_node_always_holds() {
        assert!(LeaseClock::unleased().holds());
    }

    #[test]
    fn a_cluster_node_holds_only_until_the_published_deadline() {
        let clock = LeaseClock::leased();
        let reader = clock.clone();
        assert!(!reader.holds(), "no session yet");
        clock.held_until(Instant::now() + Duration::from_secs(5));
        assert!(
            !reader.holds(),
            "the shards have not applied the metadata yet"
        );
        clock.metadata_applied();
        assert!(reader.holds());
        clock.held_until(Instant::now() - Duration::from_millis(1));
        assert!(!reader.holds(), "deadline passed");
        assert_eq!(reader.broker_epoch(), None);
        clock.held_until(Instant::now() + Duration::from_secs(5));
        clock.lost();
        assert!(!reader.holds(), "lost before the deadline");
        clock.held_until(Instant::now() + Duration::from_secs(5));
        assert!(
            !reader.holds(),
            "a new session waits for the metadata to be applied again"
        );
        clock.metadata_applied();
        assert!(reader.holds());
    }
}
