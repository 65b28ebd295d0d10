//! Consumer groups of Kafka's consumer protocol (KIP-848): server-side assignment, group /
//! target-assignment / member epochs, and reconciliation in which a partition reaches its new
//! owner only after its previous owner revoked it.
//!
//! Pure logic, like [`super::membership`]: no I/O, time comes in as milliseconds. Every change
//! is a [`ConsumerRecord`] in Kafka's `__consumer_offsets` layouts ([`records`]); a heartbeat
//! computes its records and applies each through [`ConsumerGroup::replay`] — the same function
//! a coordinator loading the partition uses — so the state in memory is always what replaying
//! the written records gives (the simulation in `sim.rs` checks exactly that).
//!
//! Owns: one group's members, epochs, target assignment and who owns which partition. Must not
//! touch: offsets (the coordinator keeps them beside the group), topics (given as a
//! [`TopicIndex`] built from the cluster metadata).

pub mod assignor;
pub mod classic;
mod heartbeat;
mod reconcile;
pub mod records;
#[cfg(test)]
mod sim;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

pub use assignor::Assignor;
pub use heartbeat::{validate as validate_heartbeat, Heartbeat, HeartbeatAnswer, HeartbeatError};
pub use records::{ConsumerKey, ConsumerRecord, ConsumerValue};

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// A leaving member's epoch (ConsumerGroupHeartbeat `MemberEpoch` -1).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// A static member leaving for a while, keeping its partitions until its session expires.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Kafka's `MemberState`, with its record codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Waiting for the member to revoke partitions it must give up.
    UnrevokedPartitions,
    /// Waiting for partitions still owned by other members.
    UnreleasedPartitions,
    /// A state this coordinator does not know (written by a newer one): the member is fenced
    /// at its next heartbeat unless it owns nothing.
    Unknown,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_code(code: i8) -> MemberState {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    /// The name ConsumerGroupDescribe... does not show; for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
            MemberState::Unknown => "unknown",
        }
    }
}

/// What a member subscribed with and who it is (record type 5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Sorted, without duplicates.
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set when the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside
    /// this consumer group — a group migrating between the protocols.
    pub classic: Option<ClassicMemberMetadata>,
}

/// A classic-protocol member's session timeout and the protocols it joined with (record type
/// 5's tagged `ClassicMemberMetadata`), in its order of preference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, bytes::Bytes)>,
}

/// A member's epochs and partitions (record type 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// The partitions the member owns (or is given).
    pub assigned: Assignment,
    /// Partitions it still owns and must revoke.
    pub pending_revocation: Assignment,
}

impl Default for CurrentAssignment {
    fn default() -> Self {
        CurrentAssignment {
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub meta: MemberMetadata,
    pub current: CurrentAssignment,
    /// Not persisted: a loaded member gets a fresh session.
    pub session_deadline_ms: i64,
    /// Set while the member must revoke partitions: past it, the member is fenced.
    pub rebalance_deadline_ms: Option<i64>,
    /// A classic member told to rejoin must JoinGroup by then (its rebalance timeout).
    pub join_deadline_ms: Option<i64>,
    /// A classic member that joined must SyncGroup by then (its rebalance timeout).
    pub sync_deadline_ms: Option<i64>,
}

impl Member {
    fn new(id: String) -> Member {
        Member {
            id,
            meta: MemberMetadata::default(),
            current: CurrentAssignment::default(),
            session_deadline_ms: 0,
            rebalance_deadline_ms: None,
            join_deadline_ms: None,
            sync_deadline_ms: None,
        }
    }

    /// Its session ended, it kept partitions to revoke past its rebalance timeout, or (a
    /// classic member) it did not rejoin or sync in time: the coordinator fences it.
    pub fn expired(&self, now_ms: i64) -> bool {
        now_ms >= self.session_deadline_ms
            || [
                self.rebalance_deadline_ms,
                self.join_deadline_ms,
                self.sync_deadline_ms,
            ]
            .iter()
            .flatten()
            .any(|d| now_ms >= *d)
    }

    /// The member's topics: its names that exist plus every topic its regex matches.
    pub fn subscribed_topics(&self, topics: &TopicIndex) -> BTreeSet<Uuid> {
        let mut out: BTreeSet<Uuid> = self
            .meta
            .subscribed_topic_names
            .iter()
            .filter_map(|n| topics.by_name.get(n).map(|t| t.0))
            .collect();
        if let Some(re) = &self.meta.subscribed_topic_regex {
            out.extend(topics.matching(re));
        }
        out
    }
}

/// The topics a group can subscribe to: name → (id, partitions), and back.
#[derive(Debug, Default, Clone)]
pub struct TopicIndex {
    pub by_name: BTreeMap<String, (Uuid, i32)>,
    pub by_id: HashMap<Uuid, (String, i32)>,
}

impl TopicIndex {
    pub fn insert(&mut self, name: &str, id: Uuid, partitions: i32) {
        self.by_name.insert(name.to_owned(), (id, partitions));
        self.by_id.insert(id, (name.to_owned(), partitions));
    }

    /// Topics whose whole name matches `re` (RE2 syntax, as Kafka's RE2J); internal topics
    /// (`__…`) are never matched, as in Kafka. A pattern that does not compile matches nothing
    /// (the heartbeat that sent it was refused).
    pub fn matching(&self, re: &str) -> Vec<Uuid> {
        let Ok(re) = compile_regex(re) else {
            return Vec::new();
        };
        self.by_name
            .iter()
            .filter(|(n, _)| !n.starts_with("__") && re.is_match(n))
            .map(|(_, t)| t.0)
            .collect()
    }
}

/// A subscription regex, anchored at both ends (Kafka matches whole topic names).
pub fn compile_regex(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{re})$"))
        .size_limit(crate::limits::GROUP_REGEX_BYTES_MAX)
        .build()
}

/// The group's settings (Kafka's `group.consumer.*`; per-group overrides already applied).
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<Assignor>,
    /// `group.consumer.migration.policy`.
    pub migration: MigrationPolicy,
    /// `group.max.size`: the most members a group turned classic may have.
    pub classic_max_size: usize,
}

/// Kafka's `group.consumer.migration.policy`: which way a group with members may move between
/// the classic and the consumer protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationPolicy {
    /// A consumer-protocol member joining a classic group converts it.
    pub upgrade: bool,
    /// A consumer group left with classic members only converts back.
    pub downgrade: bool,
}

impl MigrationPolicy {
    pub const BIDIRECTIONAL: MigrationPolicy = MigrationPolicy {
        upgrade: true,
        downgrade: true,
    };

    /// Kafka's values: `bidirectional`, `upgrade`, `downgrade`, `disabled` (any case).
    pub fn parse(v: &str) -> Option<MigrationPolicy> {
        let (upgrade, downgrade) = match v.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => (true, true),
            "upgrade" => (true, false),
            "downgrade" => (false, true),
            "disabled" => (false, false),
            _ => return None,
        };
        Some(MigrationPolicy { upgrade, downgrade })
    }

    pub fn name(self) -> &'static str {
        match (self.upgrade, self.downgrade) {
            (true, true) => "bidirectional",
            (true, false) => "upgrade",
            (false, true) => "downgrade",
            (false, false) => "disabled",
        }
    }
}

/// Kafka's group configs a consumer-protocol group may set (IncrementalAlterConfigs on a GROUP
/// resource), overriding the broker's `group.consumer.*`.
pub const SESSION_TIMEOUT_CONFIG: &str = "consumer.session.timeout.ms";
pub const HEARTBEAT_INTERVAL_CONFIG: &str = "consumer.heartbeat.interval.ms";

/// A group's configs checked as Kafka's `GroupConfig.validate` checks them; the message names
/// the config at fault.
pub fn validate_group_configs(
    configs: &BTreeMap<String, String>,
    bounds: &crate::config::ConsumerGroupConfig,
) -> Result<(), String> {
    let int = |name: &str, v: &str| {
        v.trim().parse::<i32>().map_err(|_| {
            format!("Invalid value {v} for configuration {name}: Not a number of type INT")
        })
    };
    let within = |name: &str, v: &str, (lo, hi): (i32, i32), broker: &str| {
        let v = int(name, v)?;
        if v < lo || v > hi {
            return Err(format!(
                "{name} must be between group.consumer.min.{broker} ({lo}) and \
                 group.consumer.max.{broker} ({hi})"
            ));
        }
        Ok(())
    };
    for (name, v) in configs {
        match name.as_str() {
            SESSION_TIMEOUT_CONFIG => within(
                name,
                v,
                (bounds.min_session_timeout_ms, bounds.max_session_timeout_ms),
                "session.timeout.ms",
            )?,
            HEARTBEAT_INTERVAL_CONFIG => within(
                name,
                v,
                (bounds.min_heartbeat_interval_ms, bounds.max_heartbeat_interval_ms),
                "heartbeat.interval.ms",
            )?,
            n if n.starts_with("share.") || n.starts_with("streams.") => {
                return Err(format!(
                    "{n}: share groups (KIP-932) and streams groups (KIP-1071) are not built in ringlog"
                ))
            }
            other => return Err(format!("Unknown group config name: {other}")),
        }
    }
    let (session, interval) = group_timeouts(configs, bounds);
    if interval >= session {
        return Err(format!(
            "{HEARTBEAT_INTERVAL_CONFIG} ({interval}) must be less than {SESSION_TIMEOUT_CONFIG} ({session})"
        ));
    }
    Ok(())
}

/// `(session timeout, heartbeat interval)` of a group: its own configs, else the broker's.
pub fn group_timeouts(
    configs: &BTreeMap<String, String>,
    defaults: &crate::config::ConsumerGroupConfig,
) -> (i32, i32) {
    let get = |name: &str, default: i32| {
        configs
            .get(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    };
    (
        get(SESSION_TIMEOUT_CONFIG, defaults.session_timeout_ms),
        get(HEARTBEAT_INTERVAL_CONFIG, defaults.heartbeat_interval_ms),
    )
}

/// Kafka's consumer group states, as ListGroups / ConsumerGroupDescribe show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroup {
    /// Bumped whenever the members or their subscribed topics change.
    pub epoch: i32,
    /// A hash of the subscribed topics' ids and partition counts when `epoch` was set (Kafka
    /// 4.1's `MetadataHash`): a topic created, deleted or grown changes it.
    pub metadata_hash: i64,
    /// The epoch the target assignment was computed at.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The target assignment of each member.
    pub target: BTreeMap<String, Assignment>,
    /// instance id → member id.
    pub static_members: BTreeMap<String, String>,
    /// (topic id, partition) → the member that owns it (assigned or pending revocation).
    pub owners: BTreeMap<(Uuid, i32), String>,
}

impl ConsumerGroup {
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| {
            m.current.state != MemberState::Stable
                || m.current.member_epoch != self.assignment_epoch
        }) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// Applies one record: how a heartbeat changes the group, and how a load rebuilds it.
    pub fn replay(&mut self, record: &ConsumerRecord, now_ms: i64, session_timeout_ms: i32) {
        match (&record.key, &record.value) {
            (
                ConsumerKey::Metadata,
                Some(ConsumerValue::Metadata {
                    epoch,
                    metadata_hash,
                }),
            ) => {
                self.epoch = *epoch;
                self.metadata_hash = *metadata_hash;
            }
            (ConsumerKey::Metadata, None) => *self = ConsumerGroup::default(),
            (ConsumerKey::Member(id), Some(ConsumerValue::Member(meta))) => {
                // a classic member's session is its own (from its JoinGroup)
                let session = meta
                    .classic
                    .as_ref()
                    .map_or(session_timeout_ms, |c| c.session_timeout_ms);
                let m = self.members.entry(id.clone()).or_insert_with(|| {
                    let mut m = Member::new(id.clone());
                    m.session_deadline_ms = now_ms + i64::from(session);
                    m
                });
                if let Some(old) = &m.meta.instance_id {
                    self.static_members.remove(old);
                }
                m.meta = meta.clone();
                if let Some(i) = &meta.instance_id {
                    self.static_members.insert(i.clone(), id.clone());
                }
            }
            (ConsumerKey::Member(id), None) => {
                if let Some(m) = self.members.remove(id) {
                    if let Some(i) = &m.meta.instance_id {
                        if self.static_members.get(i) == Some(id) {
                            self.static_members.remove(i);
                        }
                    }
                    self.release(&m.current, id);
                }
            }
            (ConsumerKey::TargetMetadata, Some(ConsumerValue::TargetMetadata { epoch })) => {
                self.assignment_epoch = *epoch;
            }
            (ConsumerKey::TargetMetadata, None) => self.assignment_epoch = 0,
            (ConsumerKey::TargetMember(id), Some(ConsumerValue::TargetMember(a))) => {
                self.target.insert(id.clone(), a.clone());
            }
            (ConsumerKey::TargetMember(id), None) => {
                self.target.remove(id);
            }
            (ConsumerKey::Current(id), Some(ConsumerValue::Current(c))) => {
                let Some(old) = self.members.get(id).map(|m| m.current.clone()) else {
                    // Kafka writes a member's metadata before its assignment; a current
                    // assignment alone (a damaged log) is ignored.
                    return;
                };
                self.release(&old, id);
                for (t, ps) in c.assigned.iter().chain(c.pending_revocation.iter()) {
                    for p in ps {
                        self.owners.insert((*t, *p), id.clone());
                    }
                }
                if let Some(m) = self.members.get_mut(id) {
                    // the rebalance timeout runs from when the member is asked to revoke
                    let asked_before = m.current.state == MemberState::UnrevokedPartitions
                        && m.current.member_epoch == c.member_epoch;
                    m.rebalance_deadline_ms = match c.state {
                        // a classic member has its join and sync timeouts instead
                        _ if m.meta.classic.is_some() => None,
                        MemberState::UnrevokedPartitions if asked_before => m.rebalance_deadline_ms,
                        MemberState::UnrevokedPartitions => {
                            Some(now_ms + i64::from(m.meta.rebalance_timeout_ms.max(0)))
                        }
                        _ => None,
                    };
                    m.current = c.clone();
                }
            }
            (ConsumerKey::Current(id), None) => {
                if let Some(old) = self.members.get(id).map(|m| m.current.clone()) {
                    self.release(&old, id);
                    if let Some(m) = self.members.get_mut(id) {
                        m.current = CurrentAssignment::default();
                    }
                }
            }
            // A value of another key's kind cannot be decoded into (records.rs pairs them).
            _ => {}
        }
    }

    fn release(&mut self, current: &CurrentAssignment, id: &str) {
        for (t, ps) in current
            .assigned
            .iter()
            .chain(current.pending_revocation.iter())
        {
            for p in ps {
                if self.owners.get(&(*t, *p)).map(String::as_str) == Some(id) {
                    self.owners.remove(&(*t, *p));
                }
            }
        }
    }

    /// Applies records in order (the heartbeat's own changes).
    fn apply(
        &mut self,
        records: &[ConsumerRecord],
        from: usize,
        now_ms: i64,
        session_timeout_ms: i32,
    ) {
        for r in &records[from..] {
            self.replay(r, now_ms, session_timeout_ms);
        }
    }

    /// The records that delete the group (it must be empty): Kafka's tombstones.
    pub fn deletion_records(&self) -> Vec<ConsumerRecord> {
        vec![
            ConsumerRecord::tombstone(ConsumerKey::TargetMetadata),
            ConsumerRecord::tombstone(ConsumerKey::Metadata),
        ]
    }
}

/// Kafka's hash of the topics a group subscribes to: any topic created, deleted or given more
/// partitions changes it (and so bumps the group epoch).
pub fn metadata_hash(topics: &BTreeSet<Uuid>, index: &TopicIndex) -> i64 {
    // FNV-1a over (id, partitions) in id order: stable across restarts and nodes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for id in topics {
        eat(id.as_bytes());
        let partitions = index.by_id.get(id).map_or(0, |t| t.1);
        eat(&partitions.to_be_bytes());
    }
    h as i64
}
