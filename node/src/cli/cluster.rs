//! `ringlog cluster status`: the cluster as one broker sees it — its id, the live nodes (those
//! holding their etcd lease) and their brokers, the broker answering as controller, and every
//! partition that is offline (no live leader) or under-replicated (fewer in-sync replicas than
//! replicas), and the replica moves in progress (adding and removing replicas). With `--etcd`, also every node's lease as etcd holds it (broker epoch, seconds
//! left of its TTL) and any node the broker and etcd disagree about.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsRequest;
use kafka_protocol::messages::list_partition_reassignments_response::ListPartitionReassignmentsResponse;
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::ResponseError;

use super::admin_client::AdminClient;
use super::CliError;
use crate::limits::ETCD_REQUEST_TIMEOUT;
use crate::metadata::etcd::session::lease_health;
use crate::metadata::etcd::{Etcd, EtcdConfig};

pub fn status(bootstrap: &str, etcd_endpoints: Option<&str>) -> Result<String, CliError> {
    let mut c = AdminClient::connect(bootstrap)?;
    let cluster: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    )?;
    if let Some(e) = ResponseError::try_from_code(cluster.error_code) {
        return Err(CliError::Refused(format!("DescribeCluster: {e:?}")));
    }
    let md = c.metadata(None)?;
    let mut nodes: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for b in &cluster.brokers {
        nodes
            .entry(b.broker_id.0 / 1000)
            .or_default()
            .push(format!("{} ({}:{})", b.broker_id.0, b.host, b.port));
    }
    let mut out = format!(
        "Cluster: {}\tController: {}\tNodes: {}\tBrokers: {}\n",
        cluster.cluster_id,
        cluster.controller_id.0,
        nodes.len(),
        cluster.brokers.len()
    );
    for (node, brokers) in &nodes {
        out.push_str(&format!("\tnode {node}: {}\n", brokers.join(", ")));
    }
    let (mut partitions, mut offline, mut under) = (0, Vec::new(), Vec::new());
    for t in &md.topics {
        let name = t.name.as_ref().map_or("?".to_owned(), |n| n.0.to_string());
        for p in &t.partitions {
            partitions += 1;
            if p.leader_id.0 < 0 {
                offline.push(format!("{name}-{}", p.partition_index));
            } else if p.isr_nodes.len() < p.replica_nodes.len() {
                under.push(format!("{name}-{}", p.partition_index));
            }
        }
    }
    out.push_str(&format!(
        "Topics: {}\tPartitions: {partitions}\tOffline: {}\tUnder-replicated: {}\n",
        md.topics.len(),
        offline.len(),
        under.len()
    ));
    if !offline.is_empty() {
        out.push_str(&format!("\toffline: {}\n", offline.join(", ")));
    }
    if !under.is_empty() {
        out.push_str(&format!("\tunder-replicated: {}\n", under.join(", ")));
    }
    let moving: ListPartitionReassignmentsResponse = c.call(
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default(),
    )?;
    let ongoing: Vec<String> = moving
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let ids = |v: &[BrokerId]| {
                    v.iter()
                        .map(|b| b.0.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                format!(
                    "\t{}-{}: replicas {} adding {} removing {}",
                    t.name.0,
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas)
                )
            })
        })
        .collect();
    out.push_str(&format!("Reassignments in progress: {}\n", ongoing.len()));
    for line in ongoing {
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(endpoints) = etcd_endpoints {
        out.push_str(&leases(endpoints, &cluster.cluster_id, &nodes)?);
    }
    Ok(out.trim_end().to_owned())
}

/// The leases section: each registered node's lease, and the nodes the broker asked and etcd
/// disagree about (a lease that just expired, a node that just registered).
fn leases(
    endpoints: &str,
    cluster_id: &str,
    seen: &BTreeMap<i32, Vec<String>>,
) -> Result<String, CliError> {
    let config = EtcdConfig {
        endpoints: endpoints.split(',').map(|e| e.trim().to_owned()).collect(),
        cluster_id: cluster_id.to_owned(),
        // Unused: the CLI registers nothing.
        session_timeout: std::time::Duration::from_secs(9),
        request_timeout: ETCD_REQUEST_TIMEOUT,
    };
    let etcd = Etcd::connect(config)?;
    let leases = lease_health(&etcd)?;
    let mut out = format!("Leases (etcd {endpoints}):\n");
    for l in &leases {
        let health = if l.remaining_secs <= 0 {
            "expired"
        } else if l.remaining_secs * 2 < l.granted_secs {
            "keep-alives late"
        } else {
            "healthy"
        };
        out.push_str(&format!(
            "\tnode {}: broker epoch {}, lease {:x}, {} s of {} s left, {health}{}\n",
            l.node,
            l.broker_epoch,
            l.lease_id,
            l.remaining_secs.max(0),
            l.granted_secs,
            if seen.contains_key(&l.node.0) {
                ""
            } else {
                " (not yet listed by the broker asked)"
            }
        ));
    }
    for node in seen.keys() {
        if !leases.iter().any(|l| l.node.0 == *node) {
            out.push_str(&format!(
                "\tnode {node}: listed by the broker asked but not registered in etcd (its lease expired)\n"
            ));
        }
    }
    Ok(out)
}
