//! DescribeCluster: the cluster's id, its brokers (every shard of every live node) and the
//! controller (shard 0 of the node elected through etcd), as Kafka's Admin `describeCluster()`
//! asks for them.

use crate::security::acl::{ResourceType, CLUSTER_NAME};
use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::authorized;
use crate::handlers::groups::Client;
use crate::shard::ShardCtx;

/// `EndpointType` 1: brokers (2, controllers, is for KRaft controller listeners).
const BROKERS: i8 = 1;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let mut resp = DescribeClusterResponse::default();
    resp.cluster_authorized_operations =
        authorized::report(req.include_cluster_authorized_operations, || {
            authorized::operations(ctx, client, ResourceType::Cluster, CLUSTER_NAME)
        });
    if version >= 1 {
        resp.endpoint_type = BROKERS;
        if req.endpoint_type != BROKERS {
            resp.error_code = ResponseError::UnsupportedEndpointType.code();
            resp.error_message = Some(StrBytes::from_string(format!(
                "endpoint type {}: ringlog nodes have broker endpoints only (1)",
                req.endpoint_type
            )));
            return resp;
        }
    }
    resp.cluster_id = StrBytes::from_string(ctx.cluster_id());
    let brokers = ctx.brokers(client.listener);
    resp.controller_id = ctx.controller_broker();
    resp.brokers = brokers
        .into_iter()
        .map(|(id, host, port)| {
            let mut b = DescribeClusterBroker::default();
            b.rack = Some(StrBytes::from_string(ctx.rack_of(id)));
            b.broker_id = id;
            b.host = StrBytes::from_string(host);
            b.port = port;
            b
        })
        .collect();
    resp
}
