//! `ringlog cluster rebalance | decommission NODE | remove-node NODE`: the node lifecycle as
//! replica moves. The cluster's shape is read over the Kafka protocol (DescribeCluster for the
//! brokers and racks, Metadata for the replicas, DescribeLogDirs of each broker for the bytes),
//! the planner (`metadata/planner.rs`) proposes the moves, printed as Kafka's reassignment JSON
//! (`kafka-reassign-partitions --reassignment-json-file` takes it as is, with `--throttle`);
//! `--execute` submits them with AlterPartitionReassignments. Progress shows in
//! `ringlog cluster status` (ListPartitionReassignments).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_partition_reassignments_request::{
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_partition_reassignments_response::AlterPartitionReassignmentsResponse;
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::admin_client::{check, AdminClient};
use super::CliError;
use crate::ids::{broker_id, node_of, shard_of, NodeId};
use crate::metadata::planner::{plan, Goal, PlanNode, PlanPartition, PlannedMove};
use crate::metadata::Slot;

/// What to do with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Even the cluster (a new node takes its share).
    Rebalance,
    /// Move every replica off a live node, before it leaves.
    Decommission(NodeId),
    /// Re-create the replicas of a node gone for good on the live ones.
    RemoveNode(NodeId),
}

/// The cluster as the planner needs it.
struct Shape {
    nodes: Vec<PlanNode>,
    partitions: Vec<PlanPartition>,
}

fn read_shape(c: &mut AdminClient) -> Result<Shape, CliError> {
    let cluster: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(1),
    )?;
    check(cluster.error_code, cluster.error_message.as_ref())?;
    let mut nodes: BTreeMap<NodeId, PlanNode> = BTreeMap::new();
    for b in &cluster.brokers {
        let node = node_of(b.broker_id.0);
        let entry = nodes.entry(node).or_insert_with(|| PlanNode {
            node,
            shards: 0,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        });
        entry.shards = entry.shards.max(shard_of(b.broker_id.0) + 1);
    }
    let md = c.metadata(None)?;
    let mut sizes: BTreeMap<(String, i32), u64> = BTreeMap::new();
    for b in &cluster.brokers {
        // Best effort: a broker that cannot be asked leaves its partitions' bytes unknown.
        let Ok(mut bc) = AdminClient::connect(&format!("{}:{}", b.host, b.port)) else {
            continue;
        };
        let Ok(dirs) = bc.call::<_, DescribeLogDirsResponse>(
            ApiKey::DescribeLogDirs,
            1,
            &DescribeLogDirsRequest::default(),
        ) else {
            continue;
        };
        for d in dirs.results {
            for t in d.topics {
                for p in t.partitions {
                    let size = sizes
                        .entry((t.name.0.to_string(), p.partition_index))
                        .or_default();
                    *size = (*size).max(p.partition_size.max(0) as u64);
                }
            }
        }
    }
    let mut partitions = Vec::new();
    for t in &md.topics {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        for p in &t.partitions {
            let replicas = p
                .replica_nodes
                .iter()
                .map(|b| Slot {
                    node: node_of(b.0),
                    shard: shard_of(b.0),
                })
                .collect();
            partitions.push(PlanPartition {
                bytes: sizes
                    .get(&(name.clone(), p.partition_index))
                    .copied()
                    .unwrap_or(0),
                topic: name.clone(),
                partition: p.partition_index,
                replicas,
            });
        }
    }
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(Shape {
        nodes: nodes.into_values().collect(),
        partitions,
    })
}

/// Plans (and with `execute`, starts) the moves of `what`; the report printed.
pub fn run(bootstrap: &str, what: Lifecycle, execute: bool) -> Result<String, CliError> {
    let mut c = AdminClient::connect(bootstrap)?;
    let shape = read_shape(&mut c)?;
    let live: BTreeSet<NodeId> = shape.nodes.iter().map(|n| n.node).collect();
    let leaving;
    let goal = match what {
        Lifecycle::Rebalance => Goal::Rebalance,
        Lifecycle::Decommission(n) => {
            if !live.contains(&n) {
                return Err(CliError::Invalid(format!(
                    "node {n} is not live; to re-create the replicas of a node gone for good use `ringlog cluster remove-node {n}`"
                )));
            }
            leaving = BTreeSet::from([n]);
            Goal::Evacuate(&leaving)
        }
        Lifecycle::RemoveNode(n) => {
            if live.contains(&n) {
                return Err(CliError::Invalid(format!(
                    "node {n} is live; move its replicas off with `ringlog cluster decommission {n}` (remove-node is for a node gone for good)"
                )));
            }
            leaving = BTreeSet::from([n]);
            Goal::Evacuate(&leaving)
        }
    };
    let moves = plan(&shape.nodes, &shape.partitions, goal)
        .map_err(|e| CliError::Invalid(e.to_string()))?;
    let mut out = summary(&shape, &moves);
    out.push_str(&reassignment_json(&moves));
    out.push('\n');
    if execute && !moves.is_empty() {
        out.push_str(&submit(&mut c, &moves)?);
    } else if !moves.is_empty() {
        out.push_str("Not started: run again with --execute, or give the JSON above to kafka-reassign-partitions --execute (with --throttle to hold the moves' rate).\n");
    }
    Ok(out.trim_end().to_owned())
}

fn summary(shape: &Shape, moves: &[PlannedMove]) -> String {
    let bytes: BTreeMap<(&str, i32), u64> = shape
        .partitions
        .iter()
        .map(|p| ((p.topic.as_str(), p.partition), p.bytes))
        .collect();
    let (mut replicas, mut moved_bytes, mut reorders) = (0, 0, 0);
    for m in moves {
        let new =
            m.to.iter()
                .filter(|s| !m.from.iter().any(|f| f.node == s.node))
                .count();
        if new == 0 {
            reorders += 1;
        }
        replicas += new;
        moved_bytes += new as u64
            * bytes
                .get(&(m.topic.as_str(), m.partition))
                .copied()
                .unwrap_or(0);
    }
    let mut counts: BTreeMap<NodeId, (usize, usize)> =
        shape.nodes.iter().map(|n| (n.node, (0, 0))).collect();
    for p in &shape.partitions {
        let now = moves
            .iter()
            .find(|m| m.topic == p.topic && m.partition == p.partition)
            .map_or(&p.replicas, |m| &m.to);
        for (i, s) in now.iter().enumerate() {
            let e = counts.entry(s.node).or_default();
            e.0 += 1;
            e.1 += usize::from(i == 0);
        }
    }
    let mut out = format!(
        "Plan: {} partition(s) change, {replicas} replica(s) to copy ({moved_bytes} bytes), {reorders} reorder(s) only.\nAfter it, replicas (preferred leaders) per node:",
        moves.len()
    );
    for (n, (r, l)) in counts {
        out.push_str(&format!(" {n}: {r} ({l})"));
    }
    out.push('\n');
    out
}

/// Kafka's reassignment JSON (`kafka-reassign-partitions --reassignment-json-file`).
fn reassignment_json(moves: &[PlannedMove]) -> String {
    let partitions: Vec<serde_json::Value> = moves
        .iter()
        .map(|m| {
            serde_json::json!({
                "topic": m.topic,
                "partition": m.partition,
                "replicas": m.to.iter().map(|s| broker_id(s.node, s.shard).0).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({"version": 1, "partitions": partitions}).to_string()
}

fn submit(c: &mut AdminClient, moves: &[PlannedMove]) -> Result<String, CliError> {
    let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
    for m in moves {
        let mut p = ReassignablePartition::default();
        p.partition_index = m.partition;
        p.replicas = Some(
            m.to.iter()
                .map(|s| broker_id(s.node, s.shard))
                .collect::<Vec<BrokerId>>(),
        );
        topics.entry(&m.topic).or_default().push(p);
    }
    let mut req = AlterPartitionReassignmentsRequest::default();
    req.timeout_ms = 60_000;
    req.topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = ReassignableTopic::default();
            t.name = StrBytes::from_string(name.to_owned()).into();
            t.partitions = partitions;
            t
        })
        .collect();
    let resp: AlterPartitionReassignmentsResponse =
        c.call(ApiKey::AlterPartitionReassignments, 0, &req)?;
    check(resp.error_code, resp.error_message.as_ref())?;
    let mut failed = Vec::new();
    for t in &resp.responses {
        for p in &t.partitions {
            if let Some(e) = ResponseError::try_from_code(p.error_code) {
                let why = p
                    .error_message
                    .as_ref()
                    .map_or(String::new(), |m| format!(": {m}"));
                failed.push(format!("{}-{} {e:?}{why}", t.name.0, p.partition_index));
            }
        }
    }
    if failed.is_empty() {
        Ok(format!(
            "Started {} move(s); `ringlog cluster status` shows them until they complete.\n",
            moves.len()
        ))
    } else {
        Err(CliError::Refused(format!(
            "{} of {} move(s) refused: {}",
            failed.len(),
            moves.len(),
            failed.join("; ")
        )))
    }
}
