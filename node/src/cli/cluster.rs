//! `ringlog cluster status`: the cluster as one broker sees it — its id, the live nodes (those
//! holding their etcd lease) and their brokers, the broker answering as controller, and every
//! partition that is offline (no live leader) or under-replicated (fewer in-sync replicas than
//! replicas).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

use super::admin_client::AdminClient;
use super::CliError;

pub fn status(bootstrap: &str) -> Result<String, CliError> {
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
    Ok(out.trim_end().to_owned())
}
