//! Partition states in etcd: written only by the controller (fenced by its epoch), each change
//! a compare-and-swap on the key's mod revision.

use std::collections::BTreeSet;

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use iouring_log::LeaderEpoch;
use replication::{PartitionState, ReplicaId};
use serde::{Deserialize, Serialize};

use super::election::ControllerLease;
use super::{Etcd, EtcdError};

/// A partition's state as stored (Kafka's `PartitionRecord` fields; `leader` -1 when offline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    #[serde(default)]
    pub elr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
}

impl From<&PartitionState> for PartitionRecord {
    fn from(s: &PartitionState) -> PartitionRecord {
        PartitionRecord {
            replicas: s.replicas.iter().map(|r| r.0).collect(),
            isr: s.isr.iter().map(|r| r.0).collect(),
            elr: s.elr.iter().map(|r| r.0).collect(),
            leader: s.leader.map_or(-1, |r| r.0),
            leader_epoch: s.leader_epoch.0,
            partition_epoch: s.partition_epoch,
            adding_replicas: s.adding.iter().map(|r| r.0).collect(),
            removing_replicas: s.removing.iter().map(|r| r.0).collect(),
        }
    }
}

impl From<&PartitionRecord> for PartitionState {
    fn from(r: &PartitionRecord) -> PartitionState {
        let set = |v: &[i32]| v.iter().map(|&i| ReplicaId(i)).collect::<BTreeSet<_>>();
        PartitionState {
            replicas: r.replicas.iter().map(|&i| ReplicaId(i)).collect(),
            isr: set(&r.isr),
            elr: set(&r.elr),
            leader: (r.leader >= 0).then_some(ReplicaId(r.leader)),
            leader_epoch: LeaderEpoch(r.leader_epoch),
            partition_epoch: r.partition_epoch,
            adding: set(&r.adding_replicas),
            removing: set(&r.removing_replicas),
        }
    }
}

/// What a controller write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    /// Written at this revision (the key's new mod revision).
    Committed(i64),
    /// The partition changed since it was read: its state now and mod revision (`None`: no
    /// such partition / already exists for a create).
    Conflict(Option<(PartitionRecord, i64)>),
    /// This broker is no longer the controller: nothing was written.
    NotController,
}

/// Writes `record` for `topic`/`partition` if its key's mod revision is still `expected`
/// (`0`: the partition must not exist yet) and the caller is still the controller.
pub fn compare_and_swap(
    etcd: &Etcd,
    controller: &ControllerLease,
    topic: &str,
    partition: i32,
    expected: i64,
    record: &PartitionRecord,
) -> Result<CasOutcome, EtcdError> {
    let key = etcd.keys().partition(topic, partition);
    let value = serde_json::to_string(record).expect("a partition record serializes");
    let txn = Txn::new()
        .when([
            controller.fence(),
            Compare::mod_revision(key.clone(), CompareOp::Equal, expected),
        ])
        .and_then([TxnOp::put(key.clone(), value, None)])
        .or_else([
            TxnOp::get(key.clone(), None),
            TxnOp::get(controller.key().to_vec(), None),
        ]);
    let mut client = etcd.client();
    let answer = etcd.call("writing a partition state", client.txn(txn))?;
    if answer.succeeded() {
        return Ok(CasOutcome::Committed(
            answer.header().map_or(0, |h| h.revision()),
        ));
    }
    let gets: Vec<_> = answer
        .op_responses()
        .into_iter()
        .filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g),
            _ => None,
        })
        .collect();
    let [partition_now, controller_now] = &gets[..] else {
        return Err(EtcdError::Corrupt {
            key,
            reason: "a refused transaction answered without its reads".into(),
        });
    };
    let still_controller = controller_now
        .kvs()
        .first()
        .is_some_and(|kv| kv.create_revision() == controller.epoch());
    if !still_controller {
        return Ok(CasOutcome::NotController);
    }
    let current = match partition_now.kvs().first() {
        Some(kv) => Some((parse(&key, kv.value())?, kv.mod_revision())),
        None => None,
    };
    Ok(CasOutcome::Conflict(current))
}

fn parse(key: &str, value: &[u8]) -> Result<PartitionRecord, EtcdError> {
    serde_json::from_slice(value).map_err(|e| EtcdError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

/// One partition's state and mod revision.
pub fn read(
    etcd: &Etcd,
    topic: &str,
    partition: i32,
) -> Result<Option<(PartitionRecord, i64)>, EtcdError> {
    let key = etcd.keys().partition(topic, partition);
    let mut client = etcd.client();
    let answer = etcd.call("reading a partition state", client.get(key.clone(), None))?;
    match answer.kvs().first() {
        Some(kv) => Ok(Some((parse(&key, kv.value())?, kv.mod_revision()))),
        None => Ok(None),
    }
}

/// A partition's state as read: `(topic, partition)`, the record, its mod revision.
pub type StoredPartition = ((String, i32), PartitionRecord, i64);

/// Every partition's state, with the revision they were read at.
pub fn read_all(etcd: &Etcd) -> Result<(Vec<StoredPartition>, i64), EtcdError> {
    let keys = etcd.keys();
    let prefix = format!("{}partitions/", keys.root());
    let mut client = etcd.client();
    let options = GetOptions::new().with_prefix();
    let answer = etcd.call(
        "reading partition states",
        client.get(prefix, Some(options)),
    )?;
    let revision = answer.header().map_or(0, |h| h.revision());
    let mut out = Vec::new();
    for kv in answer.kvs() {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let Some((topic, p)) = keys.partition_of(&key) else {
            return Err(EtcdError::Corrupt {
                key,
                reason: "not <topic>/<partition>".into(),
            });
        };
        out.push((
            (topic.to_owned(), p),
            parse(&key, kv.value())?,
            kv.mod_revision(),
        ));
    }
    Ok((out, revision))
}
