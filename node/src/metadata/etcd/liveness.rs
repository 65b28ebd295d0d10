//! The fast path for a node whose process is gone.
//!
//! A node killed outright (kill -9, a crash) keeps its registration until etcd expires its lease,
//! up to `broker.session.timeout.ms` later, and its partitions stay without a leader until then.
//! But a dead process leaves a sign a paused or cut-off one does not: its listener is closed, so a
//! connection to it is *refused* at once (a paused process's socket still completes the
//! handshake; a cut-off node does not answer at all). The elected controller probes every other
//! registered node's listener, and every other node probes the controller's (a dead controller
//! is replaced by etcd's election only once its lease is gone); once a node that has accepted a
//! connection under its current registration refuses twice in a row over at least
//! [`LIVENESS_REFUSED_FOR`], its lease is revoked — the same deletion etcd makes when the lease expires,
//! so leadership (and the controllership) moves by the usual path, only sooner.
//!
//! Contract: a node is never judged before it was once seen listening under its current broker
//! epoch (a starting node registers before it listens); only ECONNREFUSED counts (a timeout
//! proves nothing, and pauses that node's probes for a second so the control plane is not held
//! up); the probe is one connect with a short timeout, closed at once.

use crate::ids::NodeId;
use crate::limits::LIVENESS_CONNECT_TIMEOUT;
use crate::limits::LIVENESS_PROBE_INTERVAL;
use crate::limits::LIVENESS_REFUSALS;
use crate::limits::LIVENESS_REFUSED_FOR;
use crate::limits::LIVENESS_UNANSWERED_PAUSE;
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Instant;

struct Probe {
    broker_epoch: i64,
    addr: Option<SocketAddr>,
    /// It accepted a connection under this broker epoch.
    seen_listening: bool,
    /// The first of the refusals in a row, and how many.
    refused: Option<(Instant, u32)>,
    next_at: Instant,
    /// Reported gone (once per registration).
    reported: bool,
}

#[derive(Default)]
pub struct Liveness {
    probes: BTreeMap<NodeId, Probe>,
}

impl Liveness {
    /// Node `node` is registered as `broker_epoch`, listening on `host:port`.
    pub fn registered(&mut self, node: NodeId, broker_epoch: i64, host: &str, port: u16) {
        if self
            .probes
            .get(&node)
            .is_some_and(|p| p.broker_epoch == broker_epoch)
        {
            return;
        }
        let addr = (host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next());
        self.probes.insert(
            node,
            Probe {
                broker_epoch,
                addr,
                seen_listening: false,
                refused: None,
                next_at: Instant::now(),
                reported: false,
            },
        );
    }

    pub fn deregistered(&mut self, node: NodeId) {
        self.probes.remove(&node);
    }

    /// Probes the nodes `which` selects that are due; returns each node (with its broker
    /// epoch) whose listener has refused long enough: its process is gone.
    pub fn probe(&mut self, which: impl Fn(NodeId) -> bool) -> Vec<(NodeId, i64)> {
        let now = Instant::now();
        let mut gone = Vec::new();
        for (&node, p) in &mut self.probes {
            if !which(node) || p.reported || now < p.next_at {
                continue;
            }
            p.next_at = now + LIVENESS_PROBE_INTERVAL;
            let Some(addr) = p.addr else {
                continue;
            };
            match TcpStream::connect_timeout(&addr, LIVENESS_CONNECT_TIMEOUT) {
                Ok(_) => {
                    p.seen_listening = true;
                    p.refused = None;
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused && p.seen_listening => {
                    let (since, count) = p.refused.get_or_insert((now, 0));
                    *count += 1;
                    if *count >= LIVENESS_REFUSALS
                        && now.duration_since(*since) >= LIVENESS_REFUSED_FOR
                    {
                        p.reported = true;
                        gone.push((node, p.broker_epoch));
                    }
                }
                Err(e) => {
                    p.refused = None;
                    if e.kind() == ErrorKind::TimedOut {
                        p.next_at = now + LIVENESS_UNANSWERED_PAUSE;
                    }
                }
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    fn probe_until(l: &mut Liveness, me: NodeId, within: Duration) -> Vec<(NodeId, i64)> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let gone = l.probe(|n| n != me);
            if !gone.is_empty() {
                return gone;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Vec::new()
    }

    #[test]
    fn a_node_whose_listener_closed_is_reported_once() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut l = Liveness::default();
        l.registered(NodeId(2), 41, "127.0.0.1", port);
        assert!(l.probe(|n| n != NodeId(1)).is_empty(), "listening");
        drop(listener);
        let started = Instant::now();
        assert_eq!(
            probe_until(&mut l, NodeId(1), Duration::from_secs(3)),
            vec![(NodeId(2), 41)]
        );
        assert!(started.elapsed() >= LIVENESS_REFUSED_FOR);
        assert!(
            probe_until(&mut l, NodeId(1), Duration::from_millis(500)).is_empty(),
            "reported once"
        );
    }

    #[test]
    fn a_node_never_seen_listening_is_not_judged() {
        // A port nothing listens on: a starting node registers before it listens.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut l = Liveness::default();
        l.registered(NodeId(2), 41, "127.0.0.1", port);
        assert!(probe_until(&mut l, NodeId(1), Duration::from_millis(800)).is_empty());
        // Nor a node not selected.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        l.registered(
            NodeId(3),
            7,
            "127.0.0.1",
            listener.local_addr().unwrap().port(),
        );
        assert!(l.probe(|n| n != NodeId(3)).is_empty());
        drop(listener);
        assert!(probe_until(&mut l, NodeId(3), Duration::from_millis(800)).is_empty());
    }
}
