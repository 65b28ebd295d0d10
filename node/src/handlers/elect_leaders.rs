//! ElectLeaders (`kafka-leader-election`): PREFERRED moves leadership to each partition's first
//! replica when it is live and in sync; UNCLEAN elects any live replica of a partition left
//! without a leader. Decided by the control plane (`metadata/elections.rs`); needs ALTER on the
//! cluster, as in Kafka.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::elect_leaders_request::ElectLeadersRequest;
use kafka_protocol::messages::elect_leaders_response::{
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::handlers::authorized::on_cluster;
use crate::handlers::groups::Client;
use crate::metadata::controller::Command;
use crate::metadata::elections::{ElectionType, Key, Outcomes};
use crate::security::acl::Operation;
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let asked: Option<Vec<Key>> = req.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions.iter().map(move |&p| (name.clone(), p))
            })
            .collect()
    });
    // v0 has no election type: preferred.
    let kind = if version == 0 {
        Some(ElectionType::Preferred)
    } else {
        ElectionType::from_wire(req.election_type)
    };
    let outcomes: Result<Outcomes, Refused> = if !on_cluster(ctx, client, Operation::Alter) {
        Err(Refused::new(
            ResponseError::ClusterAuthorizationFailed,
            format!("{} may not alter the cluster", client.principal),
        ))
    } else if let Some(kind) = kind {
        let (tx, rx) = futures_channel::oneshot::channel();
        let cmd = Command::ElectLeaders {
            kind,
            partitions: asked.clone(),
            reply: tx,
        };
        match ctx.send_to_control_plane(cmd) {
            Ok(()) => rx.await.unwrap_or_else(|_| Err(stopped())),
            Err(_) => Err(stopped()),
        }
    } else {
        Err(Refused::new(
            ResponseError::InvalidRequest,
            format!(
                "election type {} (0 preferred, 1 unclean)",
                req.election_type
            ),
        ))
    };
    let mut resp = ElectLeadersResponse::default();
    let outcomes = match outcomes {
        Ok(o) => o,
        Err(r) => {
            // Every partition asked for gets the refusal; a top-level error too (v1+).
            resp.error_code = r.error.code();
            asked
                .unwrap_or_default()
                .into_iter()
                .map(|k| (k, Err(r.clone())))
                .collect()
        }
    };
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, p), outcome) in outcomes {
        let mut pr = PartitionResult::default();
        pr.partition_id = p;
        if let Err(r) = outcome {
            pr.error_code = r.error.code();
            pr.error_message = Some(StrBytes::from_string(r.message));
        }
        by_topic.entry(topic).or_default().push(pr);
    }
    resp.replica_election_results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            let mut t = ReplicaElectionResult::default();
            t.topic = StrBytes::from_string(topic).into();
            t.partition_result = partition_result;
            t
        })
        .collect();
    resp
}

fn stopped() -> Refused {
    Refused::new(
        ResponseError::UnknownServerError,
        "the control plane stopped",
    )
}
