//! The cluster's [`MetadataStore`]: topics under `topics/<name>` and users' SCRAM credentials
//! under `scram/<user>`, ACL entries under `acls/<TYPE>/<PATTERN>/<name>` in etcd, written with compare-and-swap on each key's revision (create only if absent, change or delete only
//! what this node last read), read back through the ordered watch; the live nodes are the
//! broker registrations.
//!
//! Contract: [`EtcdStore::open`] registers this node (refusing a second process with the same
//! `node.id`) and reads everything at one revision. `save` writes every topic that differs from
//! what was read in one transaction, or nothing ([`Saved::Conflict`]). `poll` applies the
//! watch's events and, if this node's lease was lost, registers it again under a new broker
//! epoch. Dropping the store revokes the lease: the node leaves at once.

use crate::ids::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::election::{campaign_until_elected, ControllerLease};
use super::liveness::Liveness;
use super::session::{live_brokers, BrokerSession};
use super::watch::{Doorbell, Entry, MetadataEvent, MetadataWatch};
use super::{Etcd, EtcdConfig, EtcdError};
use crate::limits::ETCD_RETRY_BACKOFF_MAX;
use crate::limits::ETCD_RETRY_BACKOFF_MIN;
use crate::limits::PREDECESSOR_POLL;
use crate::limits::PREDECESSOR_WAIT_MARGIN;
use crate::metadata::lease::LeaseClock;
use crate::metadata::placement::NodeShards;
use crate::metadata::snapshot::{FinalizedFeature, NodeInfo, Snapshot, TopicMeta};
use crate::metadata::store::{MetadataStore, Saved, StoreError};
use crate::security::acl::Entry as AclEntry;
use crate::security::sasl::UserCredentials;

pub struct EtcdStore {
    etcd: Etcd,
    me: NodeInfo,
    /// `me` as registered (the registration key's value).
    registration: String,
    session: Option<BrokerSession>,
    /// The current session's lease deadline, for the shards.
    clock: LeaseClock,
    /// A new session's broker epoch until the shards applied the metadata as of its
    /// registration (then the lease counts: [`LeaseClock::metadata_applied`]); whether the
    /// registration was read back yet (every change before it was, the watch being ordered).
    lease_pending: Option<(i64, bool)>,
    watch: MetadataWatch,
    /// Rung by the watch after each batch of events: the control plane's wake-up.
    bell: Doorbell,
    /// Every topic as last read, with its key's mod revision.
    topics: BTreeMap<String, (TopicMeta, i64)>,
    /// Every user's SCRAM credentials as last read, with the key's mod revision.
    scram: BTreeMap<String, (UserCredentials, i64)>,
    /// Dynamic broker configs by broker id (`default`: the cluster's defaults).
    broker_configs: BTreeMap<String, (BTreeMap<String, String>, i64)>,
    /// Every resource pattern's ACL entries as last read, with the key's mod revision.
    acls: BTreeMap<String, (BTreeSet<AclEntry>, i64)>,
    /// Finalized feature levels as last read, with the key's mod revision.
    features: BTreeMap<String, (FinalizedFeature, i64)>,
    /// Client quotas by entity as last read, with the key's mod revision.
    client_quotas: BTreeMap<String, (crate::quotas::EntityQuotas, i64)>,
    group_configs: BTreeMap<String, (BTreeMap<String, String>, i64)>,
    nodes: BTreeMap<NodeId, NodeInfo>,
    /// Every registration as last read: node → (broker epoch, the key's mod revision).
    registrations: BTreeMap<NodeId, (i64, i64)>,
    /// Controller candidacies: key → (create revision, node); the oldest leads.
    candidates: BTreeMap<String, (i64, NodeId)>,
    /// This node's campaign, running in the background under its lease.
    campaign: Option<tokio::task::JoinHandle<()>>,
    /// Set when this node is elected controller (its fence for controller writes).
    elected: Arc<Mutex<Option<ControllerLease>>>,
    /// The elected controller's probes of the other nodes' listeners.
    liveness: Liveness,
    /// While etcd does not answer: when it last failed and how long to leave it alone, so the
    /// control plane is not stuck in timeouts (it fails metadata changes at once instead).
    backoff: Option<(Instant, Duration)>,
}

fn store_error(
    op: &'static str,
    location: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    StoreError {
        op,
        location: location.to_owned(),
        source: Box::new(e),
    }
}

impl EtcdStore {
    /// Connects, registers `me`, reads the cluster's metadata.
    pub fn open(config: EtcdConfig, me: NodeInfo) -> Result<EtcdStore, EtcdError> {
        let etcd = Etcd::connect(config)?;
        let registration = serde_json::to_string(&me).expect("node info serializes");
        let clock = LeaseClock::leased();
        let session = register_waiting_for_predecessor(&etcd, me.node, &registration, &clock)?;
        tracing::info!(
            node = %me.node,
            broker_epoch = session.broker_epoch(),
            cluster = %etcd.config().cluster_id,
            "registered in etcd"
        );
        let bell = Doorbell::default();
        let (entries, _, watch) = MetadataWatch::start(&etcd, bell.clone())?;
        let mut store = EtcdStore {
            etcd,
            me,
            registration,
            lease_pending: Some((session.broker_epoch(), false)),
            session: Some(session),
            clock,
            watch,
            bell,
            topics: BTreeMap::new(),
            scram: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            acls: BTreeMap::new(),
            features: BTreeMap::new(),
            client_quotas: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            registrations: BTreeMap::new(),
            candidates: BTreeMap::new(),
            campaign: None,
            elected: Arc::default(),
            liveness: Liveness::default(),
            backoff: None,
        };
        store.start_campaign();
        for e in entries {
            store.apply_put(&e);
        }
        Ok(store)
    }

    /// Whether etcd may be tried now (not within the pause after a failure).
    fn may_try(&self) -> bool {
        self.backoff.is_none_or(|(at, pause)| at.elapsed() >= pause)
    }

    fn failed(&mut self) {
        let pause = self.backoff.map_or(ETCD_RETRY_BACKOFF_MIN, |(_, p)| {
            (p * 2).min(ETCD_RETRY_BACKOFF_MAX)
        });
        self.backoff = Some((Instant::now(), pause));
    }

    fn location(&self) -> String {
        format!("{:?}", self.etcd.config().endpoints)
    }

    /// Applies one key's new value; whether anything changed.
    fn apply_put(&mut self, e: &Entry) -> bool {
        let keys = self.etcd.keys();
        if let Some(name) = keys.topic_of(&e.key) {
            return put_doc(&mut self.topics, name, e, "a topic");
        } else if let Some(user) = keys.scram_of(&e.key) {
            return put_doc(&mut self.scram, user, e, "SCRAM credentials");
        } else if let Some(broker) = keys.broker_configs_of(&e.key) {
            return put_doc(&mut self.broker_configs, broker, e, "broker configs");
        } else if let Some(pattern) = keys.acls_of(&e.key) {
            return put_doc(&mut self.acls, pattern, e, "ACLs");
        } else if let Some(name) = keys.feature_of(&e.key) {
            return put_doc(&mut self.features, name, e, "a feature level");
        } else if let Some(entity) = keys.client_quotas_of(&e.key) {
            return put_doc(&mut self.client_quotas, entity, e, "client quotas");
        } else if let Some(group) = keys.group_configs_of(&e.key) {
            return put_doc(&mut self.group_configs, group, e, "group configs");
        } else if keys.is_controller_candidacy(&e.key) {
            let node = String::from_utf8_lossy(&e.value).parse::<NodeId>();
            if let Ok(node) = node {
                let old = self
                    .candidates
                    .insert(e.key.clone(), (e.create_revision, node));
                return old.is_none();
            }
        } else if let Some(node) = keys.broker_of(&e.key) {
            self.registrations
                .insert(node, (e.create_revision, e.mod_revision));
            if let Some((epoch, seen)) = &mut self.lease_pending {
                if node == self.me.node && e.create_revision == *epoch {
                    // Handed out with the next snapshot even if nothing else changed.
                    *seen = true;
                    self.nodes.insert(node, self.me.clone());
                    return true;
                }
            }
            match serde_json::from_slice::<NodeInfo>(&e.value) {
                Ok(n) if n.node == node => {
                    self.liveness
                        .registered(node, e.create_revision, &n.host, n.port);
                    let old = self.nodes.insert(node, n.clone());
                    return old.is_none_or(|o| o != n);
                }
                _ => {
                    tracing::error!(key = %e.key, "ignoring a broker registration that does not parse")
                }
            }
        }
        false
    }

    fn apply_delete(&mut self, key: &str) -> bool {
        let keys = self.etcd.keys();
        if let Some(name) = keys.topic_of(key) {
            return self.topics.remove(name).is_some();
        }
        if let Some(user) = keys.scram_of(key) {
            return self.scram.remove(user).is_some();
        }
        if let Some(broker) = keys.broker_configs_of(key) {
            return self.broker_configs.remove(broker).is_some();
        }
        if let Some(pattern) = keys.acls_of(key) {
            return self.acls.remove(pattern).is_some();
        }
        if let Some(name) = keys.feature_of(key) {
            return self.features.remove(name).is_some();
        }
        if let Some(entity) = keys.client_quotas_of(key) {
            return self.client_quotas.remove(entity).is_some();
        }
        if let Some(group) = keys.group_configs_of(key) {
            return self.group_configs.remove(group).is_some();
        }
        if let Some(node) = keys.broker_of(key) {
            self.registrations.remove(&node);
            self.liveness.deregistered(node);
            return self.nodes.remove(&node).is_some();
        }
        if keys.is_controller_candidacy(key) {
            return self.candidates.remove(key).is_some();
        }
        false
    }

    /// The node in line first for controller (the elected one, or about to be).
    fn snapshot_controller(&self) -> Option<NodeId> {
        self.candidates
            .values()
            .min_by_key(|(rev, _)| *rev)
            .map(|&(_, node)| node)
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: 0,
            topics: as_read(&self.topics),
            nodes: self.nodes.values().cloned().collect(),
            controller: self.snapshot_controller(),
            scram: as_read(&self.scram),
            broker_configs: as_read(&self.broker_configs),
            acls: as_read(&self.acls),
            features: as_read(&self.features),
            client_quotas: as_read(&self.client_quotas),
            group_configs: as_read(&self.group_configs),
        }
    }

    /// Campaigns for controller under the current session's lease, in the background: the
    /// candidacy key appears at once (every node sees who is in line), the call returns when
    /// elected.
    fn start_campaign(&mut self) {
        if let Some(old) = self.campaign.take() {
            old.abort();
        }
        *self.elected.lock().expect("elected lock") = None;
        let Some(session) = &self.session else {
            return;
        };
        let (etcd, lease, node) = (self.etcd.clone(), session.lease_id(), self.me.node);
        let elected = Arc::clone(&self.elected);
        self.campaign = Some(self.etcd.runtime().spawn(async move {
            match campaign_until_elected(&etcd, lease, &node.to_string()).await {
                Ok(won) => {
                    tracing::info!(node = %node, controller_epoch = won.epoch(), "elected controller");
                    *elected.lock().expect("elected lock") = Some(won);
                }
                Err(e) => tracing::warn!(node = %node, error = %e, "campaign for controller ended"),
            }
        }));
    }

    /// The lease deadline the shards check before acting as leader.
    pub fn lease_clock(&self) -> LeaseClock {
        self.clock.clone()
    }

    /// This node's controllership, if it was elected under its current lease.
    pub fn controller_lease(&self) -> Option<ControllerLease> {
        self.elected.lock().expect("elected lock").clone()
    }

    /// Registers again after the lease was lost (paused, cut off from etcd).
    fn keep_registered(&mut self) {
        if self
            .session
            .as_ref()
            .is_some_and(BrokerSession::holds_lease)
            || !self.may_try()
        {
            return;
        }
        if let Some(old) = self.session.take() {
            tracing::warn!(
                node = %self.me.node,
                broker_epoch = old.broker_epoch(),
                "lost the etcd lease; registering again"
            );
            if let Err(e) = old.close() {
                tracing::debug!(error = %e, "revoking the lost lease");
                self.failed();
                return;
            }
        }
        match BrokerSession::register(&self.etcd, self.me.node, &self.registration, &self.clock) {
            Ok(s) => {
                tracing::info!(
                    node = %self.me.node,
                    broker_epoch = s.broker_epoch(),
                    "registered in etcd again"
                );
                self.lease_pending = Some((s.broker_epoch(), false));
                self.session = Some(s);
                self.backoff = None;
                self.start_campaign();
            }
            Err(e) => {
                tracing::warn!(error = %e, "registering in etcd; retrying");
                self.failed();
            }
        }
    }

    /// Revokes the lease of a node whose process is gone (its listener refuses connections), so
    /// its partitions fail over now rather than when etcd expires the lease: the elected
    /// controller watches every other node, the others watch the controller.
    fn revoke_dead_nodes(&mut self) {
        if !self.may_try() {
            return;
        }
        let me = self.me.node;
        let controller = self.snapshot_controller();
        let elected = self.controller_lease().is_some();
        let which = |node: NodeId| node != me && (elected || Some(node) == controller);
        let gone = self.liveness.probe(which);
        if gone.is_empty() {
            return;
        }
        let brokers = match live_brokers(&self.etcd) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "listing brokers to revoke a dead node's lease");
                self.failed();
                return;
            }
        };
        let mut client = self.etcd.client();
        for (node, epoch) in gone {
            let Some(b) = brokers
                .iter()
                .find(|b| b.node == node && b.broker_epoch == epoch)
            else {
                continue;
            };
            tracing::warn!(
                node = %node,
                broker_epoch = epoch,
                "node {node} refuses connections: its process is gone; revoking its lease"
            );
            if let Err(e) = self.etcd.call(
                "revoking a dead node's lease",
                client.lease_revoke(b.lease_id),
            ) {
                tracing::warn!(node = %node, error = %e, "revoking a dead node's lease");
            }
        }
    }

    fn reload(&mut self) -> Result<(), StoreError> {
        let (entries, _, watch) = MetadataWatch::start(&self.etcd, self.bell.clone())
            .map_err(|e| store_error("re-reading", &self.location(), e))?;
        self.watch = watch;
        self.topics.clear();
        self.scram.clear();
        self.broker_configs.clear();
        self.acls.clear();
        self.features.clear();
        self.client_quotas.clear();
        self.group_configs.clear();
        self.nodes.clear();
        self.registrations.clear();
        self.liveness = Liveness::default();
        for e in entries {
            self.apply_put(&e);
        }
        Ok(())
    }
}

/// Registers `node`; while its key is still held — by a previous process killed before its
/// lease expired, as after `kill -9` and a quick restart — waits up to one session timeout (plus
/// a margin) for that lease to expire, as a Kafka broker retries a duplicate registration. A
/// registration still held after that belongs to a live process: refused.
fn register_waiting_for_predecessor(
    etcd: &Etcd,
    node: NodeId,
    info: &str,
    clock: &LeaseClock,
) -> Result<BrokerSession, EtcdError> {
    let give_up = Instant::now() + etcd.config().session_timeout + PREDECESSOR_WAIT_MARGIN;
    let mut told = false;
    loop {
        match BrokerSession::register(etcd, node, info, clock) {
            Err(EtcdError::DuplicateRegistration { epoch, .. }) if Instant::now() < give_up => {
                if !told {
                    tracing::warn!(
                        node = %node,
                        broker_epoch = epoch,
                        "node {node} is still registered (a previous process that did not stop cleanly?); waiting for its lease to expire"
                    );
                    told = true;
                }
                std::thread::sleep(PREDECESSOR_POLL);
            }
            other => return other,
        }
    }
}

/// Applies a document's new value (a topic, a user's credentials, a pattern's ACLs) to what was
/// read; whether it changed. One that does not parse is logged and ignored.
fn put_doc<T: serde::de::DeserializeOwned + PartialEq + Clone>(
    docs: &mut BTreeMap<String, (T, i64)>,
    name: &str,
    e: &Entry,
    what: &str,
) -> bool {
    match serde_json::from_slice::<T>(&e.value) {
        Ok(doc) => {
            let old = docs.insert(name.to_owned(), (doc.clone(), e.mod_revision));
            old.is_none_or(|(o, _)| o != doc)
        }
        Err(err) => {
            tracing::error!(key = %e.key, error = %err, "ignoring {what} that does not parse");
            false
        }
    }
}

/// The documents as read, without their revisions.
fn as_read<T: Clone>(docs: &BTreeMap<String, (T, i64)>) -> BTreeMap<String, T> {
    docs.iter()
        .map(|(n, (d, _))| (n.clone(), d.clone()))
        .collect()
}

/// The compares and writes of one metadata transaction.
#[derive(Default)]
struct TxnParts {
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
}

impl TxnParts {
    /// Writes every document of `wanted` that differs from what was `read` (created only if
    /// still absent, changed only if unchanged since read) and deletes what `wanted` lacks.
    fn diff<T: PartialEq + serde::Serialize>(
        &mut self,
        read: &BTreeMap<String, (T, i64)>,
        wanted: &BTreeMap<String, T>,
        key: impl Fn(&str) -> String,
    ) {
        for (name, doc) in wanted {
            match read.get(name) {
                Some((old, _)) if old == doc => continue,
                Some((_, rev)) => {
                    self.compares
                        .push(Compare::mod_revision(key(name), CompareOp::Equal, *rev))
                }
                None => {
                    self.compares
                        .push(Compare::create_revision(key(name), CompareOp::Equal, 0))
                }
            }
            let value = serde_json::to_string(doc).expect("metadata serializes");
            self.ops.push(TxnOp::put(key(name), value, None));
        }
        for (name, (_, rev)) in read {
            if !wanted.contains_key(name) {
                self.compares
                    .push(Compare::mod_revision(key(name), CompareOp::Equal, *rev));
                self.ops.push(TxnOp::delete(key(name), None));
            }
        }
    }
}

/// What was read becomes what was saved: changed documents at the transaction's revision.
fn saved<T: PartialEq + Clone>(
    read: &mut BTreeMap<String, (T, i64)>,
    wanted: &BTreeMap<String, T>,
    revision: i64,
) {
    *read = wanted
        .iter()
        .map(|(n, t)| {
            let rev = match read.get(n) {
                Some((old, rev)) if old == t => *rev,
                _ => revision,
            };
            (n.clone(), (t.clone(), rev))
        })
        .collect();
}

impl MetadataStore for EtcdStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        Ok(self.snapshot())
    }

    fn save(&mut self, snapshot: &Snapshot) -> Result<Saved, StoreError> {
        self.save_guarded(snapshot, &BTreeSet::new())
    }

    fn save_guarded(
        &mut self,
        snapshot: &Snapshot,
        brokers: &BTreeSet<NodeId>,
    ) -> Result<Saved, StoreError> {
        let keys = self.etcd.keys();
        let mut txn = TxnParts::default();
        txn.diff(&self.topics, &snapshot.topics, |n| keys.topic(n));
        txn.diff(&self.scram, &snapshot.scram, |u| keys.scram(u));
        txn.diff(&self.broker_configs, &snapshot.broker_configs, |b| {
            keys.broker_configs(b)
        });
        txn.diff(&self.acls, &snapshot.acls, |p| keys.acls(p));
        txn.diff(&self.features, &snapshot.features, |f| keys.feature(f));
        txn.diff(&self.client_quotas, &snapshot.client_quotas, |e| {
            keys.client_quotas(e)
        });
        txn.diff(&self.group_configs, &snapshot.group_configs, |g| {
            keys.group_configs(g)
        });
        if txn.ops.is_empty() {
            return Ok(Saved::Yes);
        }
        for node in brokers {
            // A registration not read is not live: the change was refused before saving.
            if let Some(&(_, rev)) = self.registrations.get(node) {
                txn.compares.push(Compare::mod_revision(
                    keys.broker(*node),
                    CompareOp::Equal,
                    rev,
                ));
            }
        }
        let txn = Txn::new().when(txn.compares).and_then(txn.ops);
        let mut client = self.etcd.client();
        let answer = match self.etcd.call("writing metadata", client.txn(txn)) {
            Ok(a) => a,
            Err(e) => {
                self.failed();
                return Err(store_error("writing metadata to", &self.location(), e));
            }
        };
        self.backoff = None;
        if !answer.succeeded() {
            return Ok(Saved::Conflict);
        }
        let revision = answer.header().map_or(0, |h| h.revision());
        saved(&mut self.topics, &snapshot.topics, revision);
        saved(&mut self.scram, &snapshot.scram, revision);
        saved(&mut self.broker_configs, &snapshot.broker_configs, revision);
        saved(&mut self.acls, &snapshot.acls, revision);
        saved(&mut self.features, &snapshot.features, revision);
        saved(&mut self.client_quotas, &snapshot.client_quotas, revision);
        saved(&mut self.group_configs, &snapshot.group_configs, revision);
        Ok(Saved::Yes)
    }

    fn poll(&mut self) -> Result<Option<Snapshot>, StoreError> {
        self.keep_registered();
        self.revoke_dead_nodes();
        let mut changed = false;
        loop {
            match self.watch.events.try_recv() {
                Ok(MetadataEvent::Put(e)) => changed |= self.apply_put(&e),
                Ok(MetadataEvent::Delete { key, .. }) => changed |= self.apply_delete(&key),
                Ok(MetadataEvent::Reload) => {
                    self.reload()?;
                    changed = true;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.reload()?;
                    changed = true;
                    break;
                }
            }
        }
        Ok(changed.then(|| self.snapshot()))
    }

    fn on_change(&mut self, wake: Box<dyn Fn() + Send>) {
        self.bell.set(wake);
    }

    fn shards_applied(&mut self) {
        if let Some((_, true)) = self.lease_pending {
            self.lease_pending = None;
            self.clock.metadata_applied();
        }
    }

    fn isr_eligible(&mut self) -> Option<BTreeMap<NodeId, i64>> {
        Some(
            self.nodes
                .values()
                .filter(|n| !n.controlled_shutdown)
                .filter_map(|n| Some((n.node, self.registrations.get(&n.node)?.0)))
                .collect(),
        )
    }

    fn begin_controlled_shutdown(&mut self) -> Result<(), StoreError> {
        let Some(session) = &self.session else {
            return Ok(());
        };
        let me = NodeInfo {
            controlled_shutdown: true,
            ..self.me.clone()
        };
        let value = serde_json::to_string(&me).expect("node info serializes");
        let key = self.etcd.keys().broker(self.me.node);
        // Only this session's registration: a lost lease leaves nothing to mark.
        let txn = Txn::new()
            .when([Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                session.broker_epoch(),
            )])
            .and_then([TxnOp::put(
                key,
                value,
                Some(PutOptions::new().with_lease(session.lease_id())),
            )]);
        let mut client = self.etcd.client();
        self.etcd
            .call("marking controlled shutdown", client.txn(txn))
            .map(|_| ())
            .map_err(|e| store_error("marking controlled shutdown in", &self.location(), e))
    }

    fn live_nodes(&mut self) -> Option<Vec<NodeShards>> {
        Some(
            self.nodes
                .values()
                .map(|n| NodeShards {
                    node: n.node,
                    shards: n.shards,
                })
                .collect(),
        )
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(c) = self.campaign.take() {
            c.abort();
        }
        if let Some(s) = self.session.take() {
            if let Err(e) = s.close() {
                tracing::warn!(error = %e, "leaving the cluster (revoking the etcd lease)");
            }
        }
    }
}
