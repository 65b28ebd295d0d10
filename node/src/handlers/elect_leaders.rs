//! ElectLeaders (`kafka-leader-election`): PREFERRED moves leadership to each partition's first
//! replica when it is live and in sync; UNCLEAN elects any live replica of a partition left
//! without a leader. Decided by the control plane (`metadata/elections.rs`); needs ALTER on the
//! cluster, as in Kafka.

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
        let partitions = asked.clone();
        ctx.ask(|reply| Command::ElectLeaders {
            kind,
            partitions,
            reply,
        })
        .await
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
    let results = outcomes.into_iter().map(|((topic, p), outcome)| {
        let mut pr = PartitionResult::default();
        pr.partition_id = p;
        if let Err(r) = outcome {
            pr.error_code = r.error.code();
            pr.error_message = Some(StrBytes::from_string(r.message));
        }
        (topic, pr)
    });
    resp.replica_election_results = super::by_topic(results)
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
