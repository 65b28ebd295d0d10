//! A shard: one glommio executor pinned to one CPU, a Kafka broker endpoint of its own (listener
//! port base + shard, broker id node * 1000 + shard), and the partitions it owns. Nothing a
//! shard owns is touched by another thread.

mod cleaner;
mod maintenance;
mod report;
pub mod run;
mod stall_probe;
mod topology;
mod txn_host;
pub mod txn_verify;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};

use iouring_log::LeaderEpoch;
use kafka_protocol::ResponseError;

use crate::config::{BrokerConfig, GroupConfig};
use crate::error::Refused;
use crate::group_coordinator::{Coordinator, Host};
use crate::handlers::client::Client;
use crate::handlers::fetch::sessions::FetchSessions;
use crate::ids::NodeId;
use crate::metadata::lease::LeaseClock;
use crate::metadata::{Command, Snapshot, TopicMeta};
use crate::metadata::{Leader, PartitionMeta};
use crate::metrics::recorder::ShardMetrics;
use crate::partition::Partition;
use crate::quotas::QuotaKey;
use crate::replica::throttle::ReplicationQuotas;
use crate::security::failure_log::FailureLog;
use crate::server::budget::RequestBudget;
use crate::stop::StopSignal;
use crate::topic_config::{TopicConfig, TopicConfigError, TopicDefaults, TopicOverrides};
use kafka_protocol::messages::BrokerId;

/// What the node hands each shard when it starts: the services every shard shares.
pub struct NodeServices {
    pub config: Arc<BrokerConfig>,
    /// The control plane's inbox.
    pub commands: Arc<mpsc::Sender<Command>>,
    /// The node's producer id allocator.
    pub producer_ids: Arc<AtomicI64>,
    /// The node stopping: idle connections close at once, waits give up.
    pub stop: StopSignal,
    /// Whether this node holds its etcd lease (always, for a single node).
    pub lease: LeaseClock,
    /// The node's request budget (`queued.max.request.bytes`), shared by every shard.
    pub request_budget: Arc<RequestBudget>,
    /// The node's usage of client quotas, shared by every shard.
    pub quota_usage: Arc<crate::quotas::usage::QuotaUsage>,
}

/// Everything a shard's tasks share. Single-threaded: `Rc` and `RefCell`, no locks. Its state
/// is private to the `shard` module; other modules use the services its methods offer: the
/// replicas it holds ([`ShardCtx::replica`], [`ShardCtx::partition`],
/// [`ShardCtx::writable_partition`], [`ShardCtx::replicas`]), the metadata view
/// ([`ShardCtx::snapshot`] and the endpoint and topic lookups), the control plane
/// ([`ShardCtx::control`], [`ShardCtx::send_to_control_plane`],
/// [`ShardCtx::next_producer_id`]), the group coordinator, fetch sessions and fetchers, and the
/// connection services (metrics, request budget, failure log, stop signal).
pub struct ShardCtx {
    shard: usize,
    config: Arc<BrokerConfig>,
    snapshot: RefCell<Arc<Snapshot>>,
    partitions: RefCell<HashMap<(String, i32), Rc<Partition>>>,
    commands: Arc<mpsc::Sender<Command>>,
    producer_ids: Arc<AtomicI64>,
    stop: StopSignal,
    connections: Cell<usize>,
    /// The group coordinator for the `__consumer_offsets` partitions this shard leads.
    groups: Coordinator,
    /// The transaction coordinator for the `__transaction_state` partitions this shard leads.
    txns: crate::txn_coordinator::TxnCoordinator,
    /// Connections to other shards' inter-broker listeners: the transaction coordinator's
    /// markers to leaders, a leader's verification calls to coordinators.
    inter_broker_connections:
        RefCell<HashMap<crate::metadata::Slot, kafka_client::async_glommio::Connection>>,
    /// Incremental fetch sessions of the fetchers of this shard (KIP-227).
    fetch_sessions: RefCell<FetchSessions>,
    /// The leader shards this shard's follower fetchers pull from (one task each).
    fetchers: RefCell<std::collections::BTreeSet<crate::metadata::Slot>>,
    /// Whether this node holds its etcd lease (always, for a single node): a leader takes
    /// writes only while it does.
    lease: LeaseClock,
    /// Held while the set of open logs changes (a snapshot applied, a failed log reopened), so
    /// two tasks never open one partition's folder.
    topology: glommio::sync::Semaphore,
    /// When each failed log may next be tried for reopening.
    reopen_due: RefCell<HashMap<(String, i32), std::time::Instant>>,
    request_budget: Arc<RequestBudget>,
    /// The node's usage of client quotas (`quotas/usage.rs`).
    quota_usage: Arc<crate::quotas::usage::QuotaUsage>,
    /// What the shard counts for the metrics endpoint.
    metrics: ShardMetrics,
    /// Failed authentications and TLS handshakes, logged rate-limited.
    auth_failures: FailureLog,
    /// This shard's replication throttle budgets (it is a Kafka broker of its own).
    replication_quotas: ReplicationQuotas,
}

/// The control plane stopped: a command sent to it goes nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the control plane stopped")]
pub struct ControlPlaneStopped;

/// A partition's key, `(topic, index)`, owned or borrowed: the partitions map is looked up by
/// `(&str, i32)` without building a `String` (a fetch of a thousand partitions did a thousand
/// allocations for the lookups alone). Hashes and compares as the owned `(String, i32)` does.
pub trait PartitionKey {
    fn key(&self) -> (&str, i32);
}

impl PartitionKey for (String, i32) {
    fn key(&self) -> (&str, i32) {
        (&self.0, self.1)
    }
}

impl PartitionKey for (&str, i32) {
    fn key(&self) -> (&str, i32) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn PartitionKey + 'a> for (String, i32) {
    fn borrow(&self) -> &(dyn PartitionKey + 'a) {
        self
    }
}

impl std::hash::Hash for dyn PartitionKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // A tuple hashes its fields in order, and `str` hashes as `String` does.
        self.key().hash(state);
    }
}

impl PartialEq for dyn PartitionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for dyn PartitionKey + '_ {}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ShardCtx {
    /// Shard `shard` of this node, holding no partition and no metadata yet.
    pub fn new(shard: usize, node: NodeServices) -> ShardCtx {
        ShardCtx {
            shard,
            config: node.config,
            snapshot: RefCell::default(),
            partitions: RefCell::default(),
            commands: node.commands,
            producer_ids: node.producer_ids,
            stop: node.stop,
            connections: Cell::new(0),
            groups: Coordinator::default(),
            txns: Default::default(),
            inter_broker_connections: RefCell::default(),
            fetch_sessions: RefCell::default(),
            fetchers: RefCell::default(),
            lease: node.lease,
            topology: glommio::sync::Semaphore::new(1),
            reopen_due: RefCell::default(),
            request_budget: node.request_budget,
            quota_usage: node.quota_usage,
            metrics: ShardMetrics::default(),
            auth_failures: FailureLog::default(),
            replication_quotas: ReplicationQuotas::default(),
        }
    }

    /// Counts `amount` of `key` against the quota that applies to `client` (its user and client
    /// id, Kafka's order), node-wide; the throttle (ms) it leads to, which the client's next
    /// answer carries and its connection waits out. 0 without a quota (no lock taken).
    pub fn charge_quota(&self, client: &Client, key: QuotaKey, amount: f64) -> u32 {
        let snapshot = self.snapshot.borrow();
        if snapshot.client_quotas.is_empty() {
            return 0;
        }
        let user = client
            .principal
            .strip_prefix("User:")
            .unwrap_or(&client.principal);
        let index = QuotaKey::ALL
            .iter()
            .position(|k| *k == key)
            .expect("listed");
        let Some((entity, quota)) =
            client
                .quota
                .get(index, (snapshot.version, user, &client.id), || {
                    crate::quotas::resolve(&snapshot.client_quotas, user, &client.id)
                })
        else {
            return 0;
        };
        drop(snapshot);
        let throttle =
            self.quota_usage
                .charge(key, &entity, key.per_second(quota), amount, now_ms());
        client.quota.throttle(throttle);
        throttle
    }

    /// The node's usage of client quotas (the metrics endpoint reports it).
    pub fn quota_usage(&self) -> &crate::quotas::usage::QuotaUsage {
        &self.quota_usage
    }

    /// The replication throttle budgets of this shard (its broker's
    /// `*.replication.throttled.rate`).
    pub fn replication_quotas(&self) -> &ReplicationQuotas {
        &self.replication_quotas
    }

    /// This shard's index on its node (its CPU and its listener port offset).
    pub fn shard(&self) -> usize {
        self.shard
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The cluster metadata as this shard last applied it (borrowed: do not hold it across an
    /// await).
    pub fn snapshot(&self) -> std::cell::Ref<'_, Arc<Snapshot>> {
        self.snapshot.borrow()
    }

    /// The node stopping.
    pub fn stop(&self) -> &StopSignal {
        &self.stop
    }

    /// The group coordinator of the `__consumer_offsets` partitions this shard leads.
    pub fn groups(&self) -> &Coordinator {
        &self.groups
    }

    /// Incremental fetch sessions (KIP-227) opened with this shard.
    pub fn fetch_sessions(&self) -> &RefCell<FetchSessions> {
        &self.fetch_sessions
    }

    /// The leader shards this shard's follower fetchers pull from.
    pub fn fetchers(&self) -> &RefCell<std::collections::BTreeSet<crate::metadata::Slot>> {
        &self.fetchers
    }

    /// This node's broker epoch (its etcd lease), sent with a follower's fetches.
    pub fn broker_epoch(&self) -> Option<i64> {
        self.lease.broker_epoch()
    }

    pub fn metrics(&self) -> &ShardMetrics {
        &self.metrics
    }

    pub fn auth_failures(&self) -> &FailureLog {
        &self.auth_failures
    }

    pub fn request_budget(&self) -> &Arc<RequestBudget> {
        &self.request_budget
    }

    /// Calls `f` with every replica this shard holds, whatever its role, without copying the
    /// registry (a follower's fetch loop looks at it every round). The registry stays borrowed
    /// while `f` runs: `f` must not open or close a partition.
    pub fn with_replicas<R>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = &Rc<Partition>>) -> R,
    ) -> R {
        f(&mut self.partitions.borrow().values())
    }

    /// Sends `cmd` to the control plane without waiting for its answer.
    pub fn send_to_control_plane(&self, cmd: Command) -> Result<(), ControlPlaneStopped> {
        self.commands.send(cmd).map_err(|_| ControlPlaneStopped)
    }

    async fn lock_topology(&self) -> glommio::sync::Permit<'_> {
        self.topology
            .acquire_permit(1)
            .await
            .expect("the topology lock never closes")
    }

    pub fn broker_id(&self) -> kafka_protocol::messages::BrokerId {
        self.config.broker_id(self.shard)
    }

    /// The partition `topic`-`index` if this shard leads it (serves produce and fetch).
    pub fn partition(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        self.replica(topic, index).filter(|p| p.is_leader())
    }

    /// The partition `topic`-`index` if this shard leads it and may take writes for it now. In
    /// a cluster a leader takes writes while its node surely holds its etcd lease; when the
    /// lease is in doubt (etcd out of this node's reach) only while its in-sync followers keep
    /// fetching from it without a lease of their own (etcd down for everyone: nobody can elect
    /// another leader, the data path goes on). A paused or cut-off leader stops: its followers
    /// reach etcd, follow the leader the controller elected, or cannot reach it.
    pub fn writable_partition(&self, topic: &str, index: i32) -> Result<Rc<Partition>, Refused> {
        let Some(part) = self.partition(topic, index) else {
            let e = self.not_served(topic, index);
            let why = if e == ResponseError::NotLeaderOrFollower {
                "is led by another shard"
            } else {
                "does not exist"
            };
            return Err(Refused::new(e, format!("{topic}-{index} {why}")));
        };
        if !self.lease.holds()
            && !part.followers_share_the_outage(now_ms(), self.outage_window_ms())
        {
            return Err(Refused::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "{topic}-{index}: node {} cannot confirm its lease on the cluster metadata, and its in-sync followers can or do not fetch from it: its leadership may have moved",
                    self.config.node_id
                ),
            ));
        }
        Ok(part)
    }

    /// How recent a follower's unleased fetch must be to show it shares this leader's outage:
    /// two of its long polls (`replica.fetch.wait.max.ms`), at least a second.
    fn outage_window_ms(&self) -> i64 {
        (2 * i64::from(self.config.replica.fetch_wait_max_ms)).max(1000)
    }

    /// This shard's replica of `topic`-`index`, whatever its role.
    pub fn replica(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        let key: &dyn PartitionKey = &(topic, index);
        self.partitions.borrow().get(key).cloned()
    }

    /// Kafka's answer for a partition this shard does not serve: another shard leads it, or it
    /// does not exist.
    pub fn not_served(&self, topic: &str, index: i32) -> ResponseError {
        if self.snapshot.borrow().partition(topic, index).is_some() {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        }
    }

    /// The partition's current leader epoch, stamped into the batches appended to it.
    pub fn leader_epoch(&self, part: &Partition) -> LeaderEpoch {
        let epoch = self
            .snapshot
            .borrow()
            .partition(&part.topic, part.index)
            .map_or(LeaderEpoch(0), |p| p.leader_epoch);
        epoch
    }

    /// Where a partition's leader is reached on listener `listener` (the one the client
    /// connected to): its broker id, host and port; `None` when its node is not live (a
    /// cluster node whose registration is gone: the partition is offline) or has no such
    /// listener.
    pub fn leader_endpoint(
        &self,
        meta: &PartitionMeta,
        listener: usize,
    ) -> Option<(BrokerId, String, i32)> {
        let me = self.config.node_id;
        match meta.leader {
            Leader::Local => Some(self.local_endpoint(meta.shard, listener)),
            Leader::Node(n) if n == me => Some(self.local_endpoint(meta.shard, listener)),
            Leader::Node(n) => {
                let snapshot = self.snapshot.borrow();
                let node = snapshot.node(n)?;
                self.remote_endpoint(node, meta.shard, listener)
            }
            Leader::Offline => None,
        }
    }

    /// Where this node's inter-broker client reaches shard `slot.shard` of node `slot.node`:
    /// the node's registered host and port plus the shard; `None` while it is not live.
    pub fn peer_addr(&self, slot: crate::metadata::Slot) -> Option<String> {
        let snapshot = self.snapshot.borrow();
        let node = snapshot.node(slot.node)?;
        Some(format!("{}:{}", node.host, node.port as usize + slot.shard))
    }

    fn local_endpoint(&self, shard: usize, listener: usize) -> (BrokerId, String, i32) {
        let l = self.config.listener(listener);
        let port = i32::from(l.advertised_port) + shard as i32;
        (
            self.config.broker_id(shard),
            l.advertised_host.clone(),
            port,
        )
    }

    /// Shard `shard` of another node on listener `listener` (by name: nodes list the
    /// listeners they have); `None` if it has no listener of that name.
    fn remote_endpoint(
        &self,
        node: &crate::metadata::snapshot::NodeInfo,
        shard: usize,
        listener: usize,
    ) -> Option<(BrokerId, String, i32)> {
        let (host, port) = node.endpoint(&self.config.listener(listener).name)?;
        Some((
            crate::ids::broker_id(node.node, shard),
            host.to_owned(),
            i32::from(port) + shard as i32,
        ))
    }

    /// The cluster's id as clients see it: `cluster.id` in a cluster, one per single node.
    pub fn cluster_id(&self) -> String {
        match &self.config.metadata {
            crate::config::MetadataConfig::Etcd { cluster_id, .. } => cluster_id.clone(),
            crate::config::MetadataConfig::Embedded => {
                format!("ringlog-node-{}", self.config.node_id)
            }
        }
    }

    /// The broker reported as controller: shard 0 of the node elected controller in a cluster;
    /// the lowest broker of a single node.
    pub fn controller_broker(&self) -> BrokerId {
        match self.snapshot.borrow().controller {
            Some(node) => crate::ids::broker_id(node, 0),
            None => self.config.broker_id(0),
        }
    }

    /// Every broker clients of listener `listener` may talk to: each shard of each live node
    /// that has the listener (this node's own always).
    pub fn brokers(&self, listener: usize) -> Vec<(BrokerId, String, i32)> {
        let me = self.config.node_id;
        let mut out: Vec<_> = (0..self.config.shards)
            .map(|s| self.local_endpoint(s, listener))
            .collect();
        for n in self.snapshot.borrow().nodes.iter().filter(|n| n.node != me) {
            for shard in 0..n.shards {
                out.extend(self.remote_endpoint(n, shard, listener));
            }
        }
        out.sort_by_key(|b| b.0 .0);
        out
    }

    /// The rack of broker `broker`'s node as clients are told it (`snapshot::rack_or_own`).
    pub fn rack_of(&self, broker: BrokerId) -> String {
        let node = crate::ids::node_of(broker.0);
        if node == self.config.node_id {
            return crate::metadata::snapshot::rack_or_own(self.config.rack.as_deref(), node);
        }
        let snapshot = self.snapshot.borrow();
        let rack = snapshot.node(node).and_then(|n| n.rack.as_deref());
        crate::metadata::snapshot::rack_or_own(rack, node)
    }

    /// The name of the topic with id `id` (Fetch v13+ names topics by id).
    pub fn topic_name_of(&self, id: uuid::Uuid) -> Option<String> {
        self.snapshot
            .borrow()
            .topics
            .values()
            .find(|t| t.id == id)
            .map(|t| t.name.clone())
    }

    /// Kafka's check of the leader epoch a client believes current (`-1`: none given):
    /// FENCED_LEADER_EPOCH when it is older than the partition's, UNKNOWN_LEADER_EPOCH when
    /// newer (this broker has not learnt it yet).
    pub fn check_current_epoch(&self, part: &Partition, current: i32) -> Result<(), ResponseError> {
        if current < 0 {
            return Ok(());
        }
        match current.cmp(&self.leader_epoch(part).0) {
            std::cmp::Ordering::Less => Err(ResponseError::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => Err(ResponseError::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// The broker defaults a topic's overrides apply to.
    pub fn topic_defaults(&self) -> TopicDefaults {
        let snapshot = self.snapshot().clone();
        self.topic_defaults_in(&snapshot)
    }

    /// The broker defaults in `snapshot`: the config file's, with the dynamic broker configs
    /// that are topic defaults (`log.cleanup.policy`) over them.
    pub fn topic_defaults_in(&self, snapshot: &Snapshot) -> TopicDefaults {
        let mut log = self.config.log;
        if let Some((delete, compact)) = self.dynamic_cleanup_policy(snapshot) {
            log.compaction.delete = delete;
            log.compaction.compact = compact;
        }
        TopicDefaults {
            log,
            max_message_bytes: self.config.message_max_bytes,
            min_insync_replicas: self.config.min_insync_replicas,
            timestamps: self.config.timestamps,
            compression: self.config.compression,
        }
    }

    /// This shard's broker's dynamic `log.cleanup.policy` (its own, else the cluster's), as
    /// (delete, compact).
    pub(crate) fn dynamic_cleanup_policy(&self, snapshot: &Snapshot) -> Option<(bool, bool)> {
        snapshot
            .broker_config(
                self.broker_id().0,
                crate::config::dynamic::LOG_CLEANUP_POLICY,
            )
            .and_then(iouring_log::Compaction::parse_policy)
    }

    /// A topic's effective configs: broker defaults overridden by the topic's own.
    pub fn topic_config(&self, topic: &TopicMeta) -> Result<TopicConfig, TopicConfigError> {
        let snapshot = self.snapshot().clone();
        self.topic_config_in(topic, &snapshot)
    }

    /// [`ShardCtx::topic_config`] with the broker defaults of `snapshot`.
    pub fn topic_config_in(
        &self,
        topic: &TopicMeta,
        snapshot: &Snapshot,
    ) -> Result<TopicConfig, TopicConfigError> {
        TopicOverrides::parse(&topic.configs)?.resolve(&self.topic_defaults_in(snapshot))
    }

    /// Sends a command to the control plane and waits for its answer.
    pub async fn control(
        &self,
        make: impl FnOnce(crate::metadata::controller::Reply) -> Command,
    ) -> Result<(), Refused> {
        self.ask(make).await
    }

    /// Sends a command whose answer carries a value (one result per partition, ...) and waits
    /// for it; the control plane gone is UNKNOWN_SERVER_ERROR.
    pub async fn ask<T>(
        &self,
        make: impl FnOnce(futures_channel::oneshot::Sender<Result<T, Refused>>) -> Command,
    ) -> Result<T, Refused> {
        let gone = || {
            Refused::new(
                ResponseError::UnknownServerError,
                "the control plane stopped",
            )
        };
        let (tx, rx) = futures_channel::oneshot::channel();
        self.commands.send(make(tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// A producer id no node of the cluster handed out before
    /// ([`crate::limits::PRODUCER_ID_NODE_SLOTS`]).
    pub fn next_producer_id(&self) -> i64 {
        use crate::limits::PRODUCER_ID_NODE_SLOTS as SLOTS;
        let sequence = self.producer_ids.fetch_add(1, Ordering::Relaxed);
        sequence * SLOTS + i64::from(self.config.node_id.0).rem_euclid(SLOTS)
    }
}

impl Host for ShardCtx {
    fn shard(&self) -> usize {
        self.shard
    }

    fn node(&self) -> NodeId {
        self.config.node_id
    }

    fn settings(&self) -> &GroupConfig {
        &self.config.group
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    fn offsets_partition(&self, p: i32) -> Option<Rc<Partition>> {
        self.writable_partition(crate::metadata::OFFSETS_TOPIC, p)
            .ok()
    }

    fn stop(&self) -> &StopSignal {
        &self.stop
    }
}

#[cfg(test)]
mod tests {
    use super::PartitionKey;
    use std::collections::HashMap;

    #[test]
    fn a_borrowed_key_finds_what_the_owned_key_stored() {
        let mut map: HashMap<(String, i32), u32> = HashMap::new();
        for (i, topic) in ["orders", "a", "", "orders-1"].iter().enumerate() {
            for index in [0, 1, 7, 1000] {
                map.insert(
                    ((*topic).to_owned(), index),
                    i as u32 * 10_000 + index as u32,
                );
            }
        }
        for (i, topic) in ["orders", "a", "", "orders-1"].iter().enumerate() {
            for index in [0, 1, 7, 1000] {
                let key: &dyn PartitionKey = &(*topic, index);
                assert_eq!(map.get(key), Some(&(i as u32 * 10_000 + index as u32)));
            }
        }
        let missing: &dyn PartitionKey = &("orders", 2);
        assert_eq!(map.get(missing), None);
        let missing: &dyn PartitionKey = &("order", 0);
        assert_eq!(map.get(missing), None);
    }
}
