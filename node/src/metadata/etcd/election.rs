//! The controller: elected with etcd's election API under the broker's lease.
//!
//! Contract: [`ControllerLease::campaign`] returns once this broker is the controller; the
//! election key's create revision is the controller epoch. [`ControllerLease::fence`] is the
//! compare every controller write carries: the key still exists with that revision — so a
//! controller whose lease expired (paused, cut off) can never write, even if it does not know
//! yet that it lost.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, LeaderKey, ResignOptions};

use super::session::BrokerSession;
use super::{Etcd, EtcdError};
use crate::limits::CONTROLLER_CAMPAIGN_CHECK;
use crate::limits::CONTROLLER_CAMPAIGN_RETRY;

/// This broker's controllership.
#[derive(Debug, Clone)]
pub struct ControllerLease {
    key: Vec<u8>,
    epoch: i64,
    leader: LeaderKey,
}

impl ControllerLease {
    /// Campaigns with `value` (the node id) under `session`'s lease; waits until elected, the
    /// lease is lost, or `give_up_after` passes (`Ok(None)`).
    pub fn campaign(
        etcd: &Etcd,
        session: &BrokerSession,
        value: &str,
        give_up_after: Duration,
    ) -> Result<Option<ControllerLease>, EtcdError> {
        let campaign = campaign_until_elected(etcd, session.lease_id(), value);
        let watch = async {
            let step = CONTROLLER_CAMPAIGN_CHECK;
            let waited = tokio::time::Instant::now();
            tokio::pin!(campaign);
            loop {
                tokio::select! {
                    answer = &mut campaign => return Some(answer),
                    _ = tokio::time::sleep(step) => {
                        if !session.holds_lease() || waited.elapsed() >= give_up_after {
                            return None;
                        }
                    }
                }
            }
        };
        match etcd.runtime().block_on(watch) {
            Some(answer) => answer.map(Some),
            None if !session.holds_lease() => Err(EtcdError::LeaseLost),
            None => Ok(None),
        }
    }

    /// The controller epoch: the election key's create revision.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// The compare that fences a controller write.
    pub fn fence(&self) -> Compare {
        Compare::create_revision(self.key.clone(), CompareOp::Equal, self.epoch)
    }

    pub(super) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Gives controllership up (controlled shutdown); the next candidate is elected.
    pub fn resign(self, etcd: &Etcd) -> Result<(), EtcdError> {
        let mut client = etcd.client();
        let options = ResignOptions::new().with_leader(self.leader);
        etcd.call("resigning as controller", client.resign(Some(options)))
            .map(|_| ())
    }
}

/// Campaigns with `value` (the node id) under `lease` until elected. The call waits without a
/// deadline ([`Etcd::waiting_client`]): etcd resigns a campaign whose call ends unanswered, so
/// a deadline would delete and write the candidacy key again on every expiry. A call that fails
/// (etcd restarting, the connection's keep-alive lapsing) is made again after
/// [`CONTROLLER_CAMPAIGN_RETRY`]; it ends with [`EtcdError::LeaseLost`] when etcd no longer knows the lease.
pub async fn campaign_until_elected(
    etcd: &Etcd,
    lease: i64,
    value: &str,
) -> Result<ControllerLease, EtcdError> {
    let mut client = etcd.waiting_client();
    let name = etcd.keys().controller_election();
    loop {
        match client.campaign(name.clone(), value, lease).await {
            Err(e) if is_lease_not_found(&e) => return Err(EtcdError::LeaseLost),
            Err(e) => {
                tracing::debug!(error = %e, "campaigning for controller; calling again");
                tokio::time::sleep(CONTROLLER_CAMPAIGN_RETRY).await;
            }
            Ok(answer) => {
                let leader = answer.leader().cloned().ok_or_else(|| EtcdError::Corrupt {
                    key: name.clone(),
                    reason: "campaign answered without a leader key".into(),
                })?;
                return Ok(ControllerLease {
                    key: leader.key().to_vec(),
                    epoch: leader.rev(),
                    leader,
                });
            }
        }
    }
}

/// Whether `e` is etcd saying the lease the campaign runs under is gone.
fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s)
        if s.code() == tonic::Code::NotFound && s.message().contains("lease not found"))
}

/// The current controller's node id (its campaign value) and epoch, if any.
pub fn current_controller(etcd: &Etcd) -> Result<Option<(String, i64)>, EtcdError> {
    let mut client = etcd.client();
    let name = etcd.keys().controller_election();
    match etcd.call("reading the controller", client.leader(name)) {
        Ok(answer) => Ok(answer.kv().map(|kv| {
            (
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.create_revision(),
            )
        })),
        // etcd answers "election: no leader" as an error.
        Err(EtcdError::Etcd { source, .. }) if source.to_string().contains("no leader") => Ok(None),
        Err(e) => Err(e),
    }
}
