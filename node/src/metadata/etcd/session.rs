//! A broker's registration under a lease, kept alive in the background.
//!
//! Contract: [`BrokerSession::register`] puts `brokers/<node>` only if no such key exists (one
//! process per node id), under a new lease of `broker.session.timeout.ms`; the broker epoch is
//! the key's create revision. Keep-alives go out every third of the TTL. The broker's own lease
//! deadline is the *send* time of the last answered keep-alive plus the TTL etcd granted, so it
//! always ends before etcd's deadline (which runs from when etcd received it):
//! [`BrokerSession::holds_lease`] true means etcd has not expired the lease yet. Once the
//! deadline passes, or etcd answers that the lease is gone, the session is lost for good; the
//! broker registers again under a new epoch.

use crate::ids::NodeId;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};

use super::{Etcd, EtcdError};
use crate::limits::LEASE_KEEP_ALIVES_PER_TTL;
use crate::limits::LEASE_KEEP_ALIVE_MIN_INTERVAL;
use crate::metadata::lease::LeaseClock;

/// The lease as this broker sees it.
#[derive(Debug, Clone, Copy)]
struct LeaseView {
    deadline: Instant,
    lost: bool,
}

/// A registered broker.
pub struct BrokerSession {
    etcd: Etcd,
    node: NodeId,
    lease_id: i64,
    broker_epoch: i64,
    view: Arc<Mutex<LeaseView>>,
    /// Where the deadline is published for the shards.
    clock: LeaseClock,
    keeper: tokio::task::JoinHandle<()>,
}

/// A registered broker as everyone sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node: NodeId,
    /// The key's create revision.
    pub broker_epoch: i64,
    /// What the broker registered (its endpoints, as JSON).
    pub info: String,
    /// The lease the registration lives under.
    pub lease_id: i64,
}

fn ttl_secs(timeout: Duration) -> i64 {
    (timeout.as_millis().div_ceil(1000) as i64).max(1)
}

impl BrokerSession {
    /// Registers `node` with `info`; refuses if the node id is registered already. The lease's
    /// deadline is published on `clock` while the session lives.
    pub fn register(
        etcd: &Etcd,
        node: NodeId,
        info: &str,
        clock: &LeaseClock,
    ) -> Result<BrokerSession, EtcdError> {
        let ttl = ttl_secs(etcd.config().session_timeout);
        let mut client = etcd.client();
        let sent = Instant::now();
        let grant = etcd.call("granting the broker lease", client.lease_grant(ttl, None))?;
        let lease_id = grant.id();
        let granted = Duration::from_secs(grant.ttl().max(0) as u64);
        let key = etcd.keys().broker(node);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                info,
                Some(PutOptions::new().with_lease(lease_id)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let answer = etcd.call("registering the broker", client.txn(txn))?;
        if !answer.succeeded() {
            let epoch = answer
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.create_revision()),
                    _ => None,
                })
                .unwrap_or(0);
            // Best effort: the lease would expire by itself.
            let _ = etcd.call("revoking an unused lease", client.lease_revoke(lease_id));
            return Err(EtcdError::DuplicateRegistration {
                node,
                cluster: etcd.config().cluster_id.clone(),
                epoch,
            });
        }
        let broker_epoch = answer.header().map_or(0, |h| h.revision());
        let view = Arc::new(Mutex::new(LeaseView {
            deadline: sent + granted,
            lost: false,
        }));
        clock.registered(broker_epoch, sent + granted);
        let keeper = etcd.runtime().spawn(keep_alive(
            etcd.clone(),
            lease_id,
            Arc::clone(&view),
            clock.clone(),
        ));
        Ok(BrokerSession {
            etcd: etcd.clone(),
            node,
            lease_id,
            broker_epoch,
            view,
            clock: clock.clone(),
            keeper,
        })
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    pub fn lease_id(&self) -> i64 {
        self.lease_id
    }

    /// The registration's create revision.
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch
    }

    /// Whether etcd still holds this broker's lease, as far as the broker can be sure.
    pub fn holds_lease(&self) -> bool {
        let v = *self.view.lock().expect("lease view lock");
        !v.lost && Instant::now() < v.deadline
    }

    /// How long the lease surely lasts from now (zero once lost).
    pub fn lease_remaining(&self) -> Duration {
        let v = *self.view.lock().expect("lease view lock");
        if v.lost {
            return Duration::ZERO;
        }
        v.deadline.saturating_duration_since(Instant::now())
    }

    /// Stops keeping the lease alive without revoking it (as a paused or cut-off broker
    /// would): etcd expires it after the TTL.
    pub fn abandon(&self) {
        self.keeper.abort();
        mark_lost(&self.view, &self.clock);
    }

    /// Deregisters: revokes the lease, which deletes the registration (and anything else
    /// under the lease, such as a controller candidacy) at once.
    /// A lease etcd already expired counts as revoked.
    pub fn close(self) -> Result<(), EtcdError> {
        self.abandon();
        let mut client = self.etcd.client();
        match self.etcd.call(
            "revoking the broker lease",
            client.lease_revoke(self.lease_id),
        ) {
            Ok(_) => Ok(()),
            Err(EtcdError::Etcd { source, .. }) if source.to_string().contains("not found") => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for BrokerSession {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Marks the session lost and tells the shards, once: under the view's lock, so no clock
/// change of this session can land after [`BrokerSession::abandon`] returned (the next
/// session's registration publishes on the same clock). Whether it was not lost before.
fn mark_lost(view: &Mutex<LeaseView>, clock: &LeaseClock) -> bool {
    let mut v = view.lock().expect("lease view lock");
    if v.lost {
        return false;
    }
    v.lost = true;
    clock.lost();
    true
}

/// Keeps the lease alive until etcd says it is gone or the deadline passes without an answer.
async fn keep_alive(etcd: Etcd, lease_id: i64, view: Arc<Mutex<LeaseView>>, clock: LeaseClock) {
    let ttl = etcd.config().session_timeout;
    let every = (ttl / LEASE_KEEP_ALIVES_PER_TTL).max(LEASE_KEEP_ALIVE_MIN_INTERVAL);
    let timeout = etcd.config().request_timeout.min(every);
    let mut client = etcd.client();
    let mut stream = None;
    loop {
        let deadline = {
            let v = *view.lock().expect("lease view lock");
            if v.lost {
                return;
            }
            v.deadline
        };
        if Instant::now() >= deadline {
            if !mark_lost(&view, &clock) {
                return;
            }
            tracing::warn!(
                lease_id,
                "broker lease deadline passed without a keep-alive answer"
            );
            return;
        }
        if stream.is_none() {
            match tokio::time::timeout(timeout, client.lease_keep_alive(lease_id)).await {
                Ok(Ok(s)) => stream = Some(s),
                _ => {
                    tokio::time::sleep(LEASE_KEEP_ALIVE_MIN_INTERVAL).await;
                    continue;
                }
            }
        }
        let (keeper, answers) = stream.as_mut().expect("set above");
        let sent = Instant::now();
        let answered = tokio::time::timeout(timeout, async {
            keeper.keep_alive().await?;
            answers.message().await
        })
        .await;
        match answered {
            Ok(Ok(Some(answer))) if answer.ttl() > 0 => {
                let granted = Duration::from_secs(answer.ttl() as u64);
                let mut v = view.lock().expect("lease view lock");
                if v.lost {
                    return;
                }
                v.deadline = v.deadline.max(sent + granted);
                clock.held_until(v.deadline);
            }
            Ok(Ok(Some(_))) => {
                // TTL 0 or less: etcd no longer knows the lease.
                if !mark_lost(&view, &clock) {
                    return;
                }
                tracing::warn!(lease_id, "etcd says the broker lease has expired");
                return;
            }
            _ => {
                // No answer: a fresh stream on the next round (etcd may be restarting).
                stream = None;
                continue;
            }
        }
        tokio::time::sleep(every.saturating_sub(sent.elapsed())).await;
    }
}

/// Every registered broker, by node id.
pub fn live_brokers(etcd: &Etcd) -> Result<Vec<BrokerRegistration>, EtcdError> {
    let keys = etcd.keys();
    let mut client = etcd.client();
    let prefix = keys.brokers();
    let options = etcd_client::GetOptions::new().with_prefix();
    let answer = etcd.call("listing brokers", client.get(prefix, Some(options)))?;
    let mut brokers = Vec::new();
    for kv in answer.kvs() {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let node = keys.broker_of(&key).ok_or_else(|| EtcdError::Corrupt {
            key: key.clone(),
            reason: "not a node id".into(),
        })?;
        brokers.push(BrokerRegistration {
            node,
            broker_epoch: kv.create_revision(),
            info: String::from_utf8_lossy(kv.value()).into_owned(),
            lease_id: kv.lease(),
        });
    }
    brokers.sort_by_key(|b| b.node);
    Ok(brokers)
}

/// A registered broker's lease as etcd holds it: how long it lasts without another keep-alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHealth {
    pub node: NodeId,
    pub broker_epoch: i64,
    pub lease_id: i64,
    /// Seconds etcd keeps the lease without a keep-alive; negative: already gone.
    pub remaining_secs: i64,
    /// The TTL it was granted.
    pub granted_secs: i64,
}

/// Every registered broker's lease, by node id (the health `ringlog cluster status` shows).
pub fn lease_health(etcd: &Etcd) -> Result<Vec<LeaseHealth>, EtcdError> {
    let mut client = etcd.client();
    let mut out = Vec::new();
    for b in live_brokers(etcd)? {
        let ttl = etcd.call(
            "reading a broker lease",
            client.lease_time_to_live(b.lease_id, None),
        )?;
        out.push(LeaseHealth {
            node: b.node,
            broker_epoch: b.broker_epoch,
            lease_id: b.lease_id,
            remaining_secs: ttl.ttl(),
            granted_secs: ttl.granted_ttl(),
        });
    }
    Ok(out)
}
