//! Metadata: every shard of the node is a broker; a partition's leader is the shard that owns
//! it. Unknown topics are created when `auto.create.topics.enable` and the request allow it.

use crate::ids::NodeId;
use std::rc::Rc;

use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::authorized::{self, authorized};
use crate::handlers::groups::Client;
use crate::metadata::{validate_topic_name, Command, PartitionMeta, TopicMeta};
use crate::metadata::{Leader, Slot};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut resp = MetadataResponse::default();
    resp.brokers = ctx
        .brokers(client.listener)
        .into_iter()
        .map(|b| {
            let rack = ctx.rack_of(b.0);
            broker(b, rack)
        })
        .collect();
    if version >= 2 {
        resp.cluster_id = Some(StrBytes::from_string(ctx.cluster_id()));
    }
    resp.controller_id = ctx.controller_broker();
    // Asked for in v8-v10 (v11 moved the cluster's to DescribeCluster).
    if (8..=10).contains(&version) {
        resp.cluster_authorized_operations =
            authorized::report(req.include_cluster_authorized_operations, || {
                authorized::operations(ctx, client, ResourceType::Cluster, CLUSTER_NAME)
            });
    }
    let topic_operations = version >= 8 && req.include_topic_authorized_operations;
    let auto_create =
        ctx.config().auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
    // v10+ may name a topic by its id alone (consumers of KIP-848 learn their partitions by
    // topic id): the id is looked up; an unknown one is UNKNOWN_TOPIC_ID.
    let mut unknown_ids = Vec::new();
    let names: Option<Vec<String>> = req.topics.map(|ts| {
        let snapshot = ctx.snapshot();
        ts.into_iter()
            .filter_map(|t| match t.name {
                Some(n) => Some(n.0.to_string()),
                None if !t.topic_id.is_nil() => {
                    let found = snapshot
                        .topics
                        .iter()
                        .find(|(_, m)| m.id == t.topic_id)
                        .map(|(n, _)| n.clone());
                    if found.is_none() {
                        unknown_ids.push(t.topic_id);
                    }
                    found
                }
                None => None,
            })
            .collect()
    });
    for id in unknown_ids {
        let mut t = MetadataResponseTopic::default();
        t.topic_id = id;
        t.error_code = ResponseError::UnknownTopicId.code();
        resp.topics.push(t);
    }
    // "All topics" is a null array from v1 on, and an empty one in v0 (which has no null).
    // Listing all shows only the topics the client may describe; a topic asked for by name that
    // it may not describe is TOPIC_AUTHORIZATION_FAILED, whether it exists or not (Kafka's
    // rule: nothing leaks).
    let describable =
        |n: &str| authorized(ctx, client, Operation::Describe, ResourceType::Topic, n);
    let names: Vec<(String, bool)> = match names {
        Some(n) if !(n.is_empty() && version == 0) => n
            .into_iter()
            .map(|n| {
                let ok = describable(&n);
                (n, ok)
            })
            .collect(),
        _ => {
            let all: Vec<String> = ctx.snapshot().topics.keys().cloned().collect();
            all.into_iter()
                .filter(|n| describable(n))
                .map(|n| (n, true))
                .collect()
        }
    };
    for (name, may_describe) in names {
        let mut t = if may_describe {
            // Auto-creation needs CREATE on the cluster or on the topic, as in Kafka.
            let may_create = auto_create
                && (authorized::on_cluster(ctx, client, Operation::Create)
                    || authorized(ctx, client, Operation::Create, ResourceType::Topic, &name));
            let mut t = topic(ctx, &name, may_create, version).await;
            if auto_create
                && !may_create
                && t.error_code == ResponseError::UnknownTopicOrPartition.code()
            {
                t.error_code = ResponseError::TopicAuthorizationFailed.code();
            }
            t
        } else {
            let mut t = MetadataResponseTopic::default();
            t.name = Some(TopicName(StrBytes::from_string(name.clone())));
            t.error_code = ResponseError::TopicAuthorizationFailed.code();
            t
        };
        if version >= 8 {
            t.topic_authorized_operations =
                authorized::report(topic_operations && may_describe, || {
                    authorized::operations(ctx, client, ResourceType::Topic, &name)
                });
        }
        resp.topics.push(t);
    }
    resp
}

fn broker((id, host, port): (BrokerId, String, i32), rack: String) -> MetadataResponseBroker {
    let mut b = MetadataResponseBroker::default();
    b.node_id = id;
    b.rack = Some(StrBytes::from_string(rack));
    b.host = StrBytes::from_string(host);
    b.port = port;
    b
}

async fn topic(
    ctx: &Rc<ShardCtx>,
    name: &str,
    auto_create: bool,
    version: i16,
) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    if validate_topic_name(name).is_err() {
        t.error_code = ResponseError::InvalidTopicException.code();
        return t;
    }
    let mut meta = ctx.snapshot().topics.get(name).cloned();
    if meta.is_none() && auto_create {
        let partitions = ctx.config().num_partitions;
        let name_owned = name.to_owned();
        let created = ctx
            .control(|reply| Command::CreateTopic {
                name: name_owned,
                partitions,
                replication_factor: i32::from(ctx.config().default_replication_factor),
                configs: Default::default(),
                assignment: None,
                reply,
            })
            .await;
        match created {
            Ok(()) => tracing::info!(topic = name, partitions, "auto-created topic"),
            Err(r) if r.error == ResponseError::TopicAlreadyExists => {}
            Err(r) => tracing::warn!(topic = name, error = %r, "auto-create failed"),
        }
        meta = ctx.snapshot().topics.get(name).cloned();
    }
    match meta {
        Some(m) => fill_topic(ctx, &mut t, &m, version),
        None => t.error_code = ResponseError::UnknownTopicOrPartition.code(),
    }
    t
}

fn fill_topic(ctx: &ShardCtx, t: &mut MetadataResponseTopic, m: &TopicMeta, version: i16) {
    if version >= 10 {
        t.topic_id = m.id;
    }
    t.is_internal = crate::metadata::is_internal(&m.name);
    t.partitions = m
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let view = partition_view(ctx, p);
            let mut mp = MetadataResponsePartition::default();
            mp.partition_index = i as i32;
            if version >= 7 {
                mp.leader_epoch = p.leader_epoch.0;
            }
            mp.replica_nodes = view.replicas;
            mp.isr_nodes = view.isr;
            if version >= 5 {
                mp.offline_replicas = view.offline;
            }
            match view.leader {
                Some(leader) => mp.leader_id = leader,
                None => {
                    // No live replica leads it: offline until one may.
                    mp.error_code = ResponseError::LeaderNotAvailable.code();
                    mp.leader_id = BrokerId(-1);
                }
            }
            mp
        })
        .collect();
}

/// A partition as clients see it: its leader (`None`: no live replica may lead now), replicas,
/// in-sync replicas, eligible leader replicas (KIP-966) and offline replicas, as broker ids.
pub(crate) struct PartitionView {
    pub leader: Option<BrokerId>,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub elr: Vec<BrokerId>,
    pub offline: Vec<BrokerId>,
}

pub(crate) fn partition_view(ctx: &ShardCtx, p: &PartitionMeta) -> PartitionView {
    // A partition of one replica keeps no replica list: its leader is its replica.
    let single = |node| {
        vec![Slot {
            node,
            shard: p.shard,
        }]
    };
    let replicas = match (p.replicas.is_empty(), p.leader) {
        (false, _) => p.replicas.clone(),
        (true, Leader::Local) => single(ctx.config().node_id),
        (true, Leader::Node(n)) => single(n),
        // Offline with no replica recorded (not written by the controller, which marks only
        // replicated partitions offline): no replica to name.
        (true, Leader::Offline) => Vec::new(),
    };
    let live = |node: NodeId| node == ctx.config().node_id || ctx.snapshot().node(node).is_some();
    let id = |s: &Slot| crate::ids::broker_id(s.node, s.shard);
    let isr = if p.is_replicated() {
        replicas
            .iter()
            .filter(|s| p.isr.contains(&s.node))
            .map(id)
            .collect()
    } else {
        replicas.iter().filter(|s| live(s.node)).map(id).collect()
    };
    PartitionView {
        // Every node has the inter-broker listener: the leader's id does not depend on the
        // client's.
        leader: ctx
            .leader_endpoint(p, ctx.config().security.inter_broker)
            .map(|(leader, _, _)| leader),
        replicas: replicas.iter().map(id).collect(),
        isr,
        elr: replicas
            .iter()
            .filter(|s| p.elr.contains(&s.node))
            .map(id)
            .collect(),
        offline: replicas.iter().filter(|s| !live(s.node)).map(id).collect(),
    }
}
