//! The connection a request came on, as handlers see it: who sent it, where from, as whom,
//! and the authorization decisions cached for it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::security::acl::{Operation, ResourceType};

/// Who sent a request: its client id and address (JoinGroup records them for DescribeGroups),
/// the listener it came in on, and the principal it acts as.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub id: String,
    pub host: String,
    /// The listener the connection came in on (an index into the config's listeners).
    pub listener: usize,
    /// Who the connection acts as: `User:ANONYMOUS`, `User:<sasl user>` or
    /// `User:<certificate subject>`.
    pub principal: String,
    /// Authorization decisions made for it, cached until the metadata changes.
    pub decisions: Decisions,
    /// Its client quotas and the throttle its answers ask for.
    pub quota: QuotaState,
}

/// A connection's client quotas: those resolved for its user and client id at a metadata
/// version (`quotas::resolve`), and the longest throttle an answer since the reader last looked
/// asked for (the reader reads nothing more for that long: KIP-219's muted channel).
#[derive(Debug, Default)]
pub struct QuotaState {
    resolved: RefCell<Option<ResolvedQuotas>>,
    throttle_ms: Cell<u32>,
}

#[derive(Debug)]
struct ResolvedQuotas {
    version: u64,
    user: String,
    client_id: String,
    quotas: [Option<(String, f64)>; 4],
}

impl Clone for QuotaState {
    fn clone(&self) -> QuotaState {
        QuotaState::default()
    }
}

impl QuotaState {
    /// The quota of `key` (an index in `QuotaKey::ALL`) and its entity, resolved again when the
    /// metadata version, the user or the client id changed.
    pub fn get(
        &self,
        key: usize,
        (version, user, client_id): (u64, &str, &str),
        resolve: impl FnOnce() -> [Option<(String, f64)>; 4],
    ) -> Option<(String, f64)> {
        let mut r = self.resolved.borrow_mut();
        let fresh = r
            .as_ref()
            .is_some_and(|r| r.version == version && r.user == user && r.client_id == client_id);
        if !fresh {
            *r = Some(ResolvedQuotas {
                version,
                user: user.to_owned(),
                client_id: client_id.to_owned(),
                quotas: resolve(),
            });
        }
        r.as_ref().and_then(|r| r.quotas[key].clone())
    }

    /// An answer asks the client to wait `ms`.
    pub fn throttle(&self, ms: u32) {
        self.throttle_ms.set(self.throttle_ms.get().max(ms));
    }

    /// The throttle asked for so far (the answer being built carries it).
    pub fn pending_throttle(&self) -> u32 {
        self.throttle_ms.get()
    }

    /// The throttle asked for since the last call.
    pub fn take_throttle(&self) -> u32 {
        self.throttle_ms.replace(0)
    }
}

/// A connection's cached decisions, valid for one metadata version.
#[derive(Debug, Default)]
pub struct Decisions {
    pub(crate) version: Cell<u64>,
    /// By operation and resource type, then resource name (looked up without allocating).
    pub(crate) cache: RefCell<HashMap<(Operation, ResourceType), HashMap<String, bool>>>,
}

impl Clone for Decisions {
    fn clone(&self) -> Decisions {
        Decisions::default()
    }
}
