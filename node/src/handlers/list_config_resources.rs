//! ListConfigResources (Kafka 4.1, KIP-1142; v0 was ListClientMetricsResources): the names of
//! the resources that have configs, by type. v0 lists client metrics resources only (ringlog
//! has none); v1 takes a list of types (empty: every type served) and lists the topics, the
//! brokers (every shard of every live node) and the groups this broker coordinates (as each
//! Kafka broker lists the groups of its own coordinator). A type ringlog does not serve —
//! BROKER_LOGGER, whose configs DescribeConfigs does not describe — fails the request with
//! UNSUPPORTED_VERSION and no resources, as Kafka does for a type it does not know.

use crate::handlers::authorized::on_cluster;
use crate::handlers::client::Client;
use crate::security::acl::Operation;
use std::rc::Rc;

use kafka_protocol::messages::list_config_resources_request::ListConfigResourcesRequest;
use kafka_protocol::messages::list_config_resources_response::{
    ConfigResource, ListConfigResourcesResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::describe_configs::{BROKER, GROUP, TOPIC};
use crate::shard::ShardCtx;

/// Kafka's CLIENT_METRICS resource type (none exist on ringlog).
const CLIENT_METRICS: i8 = 16;

/// The types v1 lists, in the order Kafka lists them.
const SERVED: [i8; 4] = [TOPIC, BROKER, CLIENT_METRICS, GROUP];

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let mut resp = ListConfigResourcesResponse::default();
    // DESCRIBE_CONFIGS on the cluster, as Kafka asks.
    if !on_cluster(ctx, client, Operation::DescribeConfigs) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    let types: Vec<i8> = if version == 0 {
        vec![CLIENT_METRICS]
    } else if req.resource_types.is_empty() {
        SERVED.to_vec()
    } else {
        req.resource_types.clone()
    };
    if let Some(t) = types.iter().find(|t| !SERVED.contains(t)) {
        resp.error_code = ResponseError::UnsupportedVersion.code();
        tracing::debug!(
            resource_type = t,
            "ListConfigResources: a resource type ringlog does not serve"
        );
        return resp;
    }
    let mut names: Vec<(i8, String)> = Vec::new();
    for t in types {
        match t {
            TOPIC => names.extend(ctx.snapshot().topics.keys().map(|n| (TOPIC, n.clone()))),
            BROKER => names.extend(
                ctx.brokers(ctx.config().security.inter_broker)
                    .into_iter()
                    .map(|(id, _, _)| (BROKER, id.0.to_string())),
            ),
            GROUP => {
                // this broker's groups, and every group with configs of its own (Kafka lists
                // groups that have dynamic configs whether or not they exist)
                let mut groups: std::collections::BTreeSet<String> =
                    ctx.groups().list().into_iter().map(|g| g.id).collect();
                groups.extend(ctx.snapshot().group_configs.keys().cloned());
                names.extend(groups.into_iter().map(|g| (GROUP, g)));
            }
            _ => {} // CLIENT_METRICS: none
        }
    }
    resp.config_resources = names
        .into_iter()
        .map(|(t, name)| {
            let mut r = ConfigResource::default();
            r.resource_name = StrBytes::from_string(name);
            r.resource_type = t;
            r
        })
        .collect();
    resp
}
