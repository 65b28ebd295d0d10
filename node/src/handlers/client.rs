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
