//! AlterPartitionReassignments and ListPartitionReassignments (Kafka's KIP-455): replica moves
//! started, replaced or cancelled through the control plane (`metadata/moves.rs` decides,
//! the controller completes them), and the moves in progress as the metadata shows them. Both
//! need ALTER / DESCRIBE on the cluster, as in Kafka.

use std::rc::Rc;

use kafka_protocol::messages::alter_partition_reassignments_request::AlterPartitionReassignmentsRequest;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsRequest;
use kafka_protocol::messages::list_partition_reassignments_response::{
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::handlers::authorized::on_cluster;
use crate::handlers::groups::Client;
use crate::metadata::controller::Command;
use crate::metadata::moves::{ongoing, Move};
use crate::security::acl::Operation;
use crate::shard::ShardCtx;
use replication::reassignment::target_replicas;

pub async fn alter(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.allow_replication_factor_change = req.allow_replication_factor_change;
    let refuse_all = |resp: &mut AlterPartitionReassignmentsResponse, r: Refused| {
        resp.error_code = r.error.code();
        resp.error_message = Some(StrBytes::from_string(r.message));
    };
    if !on_cluster(ctx, client, Operation::Alter) {
        let why = format!("{} may not alter the cluster", client.principal);
        refuse_all(
            &mut resp,
            Refused::new(ResponseError::ClusterAuthorizationFailed, why),
        );
        return resp;
    }
    // Checked here, per partition, what the control plane does not know: whether the request
    // allows the replication factor to change (v1, KIP-860; v0 always does).
    let snapshot = ctx.snapshot().clone();
    let mut moves = Vec::new();
    let mut answers: Vec<(String, i32, Option<Refused>)> = Vec::new();
    for t in &req.topics {
        let topic = t.name.0.to_string();
        for p in &t.partitions {
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
            let factor_changes = target.as_ref().is_some_and(|target| {
                snapshot
                    .partition(&topic, p.partition_index)
                    .is_some_and(|meta| {
                        // The replicas it has, or will have once the move in progress ends.
                        let now = target_replicas(&meta.movable_state()).len().max(1);
                        now != target.len()
                    })
            });
            if factor_changes && !req.allow_replication_factor_change {
                let why = format!(
                    "{topic}-{}: the request does not allow the replication factor to change",
                    p.partition_index
                );
                answers.push((
                    topic.clone(),
                    p.partition_index,
                    Some(Refused::new(ResponseError::InvalidReplicationFactor, why)),
                ));
                continue;
            }
            answers.push((topic.clone(), p.partition_index, None));
            moves.push(Move {
                topic: topic.clone(),
                partition: p.partition_index,
                target,
            });
        }
    }
    let decided = if moves.is_empty() {
        Ok(Vec::new())
    } else {
        ctx.ask(|reply| Command::AlterReassignments { moves, reply })
            .await
    };
    let mut decided = match decided {
        Ok(d) => d.into_iter(),
        Err(r) => {
            refuse_all(&mut resp, r);
            return resp;
        }
    };
    let results = answers.into_iter().map(|(topic, partition, refused)| {
        let outcome = match refused {
            Some(r) => Err(r),
            None => decided.next().unwrap_or_else(|| Err(missing())),
        };
        let mut pr = ReassignablePartitionResponse::default();
        pr.partition_index = partition;
        if let Err(r) = outcome {
            pr.error_code = r.error.code();
            pr.error_message = Some(StrBytes::from_string(r.message));
        }
        (topic, pr)
    });
    resp.responses = super::by_topic(results)
        .into_iter()
        .map(|(name, partitions)| {
            let mut tr = ReassignableTopicResponse::default();
            tr.name = StrBytes::from_string(name).into();
            tr.partitions = partitions;
            tr
        })
        .collect();
    resp
}

/// The control plane answered fewer moves than it was sent (never expected).
fn missing() -> Refused {
    Refused::new(
        ResponseError::UnknownServerError,
        "the control plane left this move unanswered",
    )
}

pub fn list(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut resp = ListPartitionReassignmentsResponse::default();
    if !on_cluster(ctx, client, Operation::Describe) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = Some(StrBytes::from_string(format!(
            "{} may not describe the cluster",
            client.principal
        )));
        return resp;
    }
    let snapshot = ctx.snapshot().clone();
    // Every partition asked for (all of them when none is named); those not moving (or not
    // existing) are left out, as Kafka does.
    let asked: Vec<(String, Vec<i32>)> = match &req.topics {
        Some(topics) => topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect(),
        None => snapshot
            .topics
            .values()
            .map(|t| (t.name.clone(), (0..t.partitions.len() as i32).collect()))
            .collect(),
    };
    for (topic, partitions) in asked {
        let ongoing: Vec<OngoingPartitionReassignment> = partitions
            .into_iter()
            .filter_map(|p| {
                let o = ongoing(&snapshot, &topic, p)?;
                let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect();
                let mut out = OngoingPartitionReassignment::default();
                out.partition_index = p;
                out.replicas = ids(o.replicas);
                out.adding_replicas = ids(o.adding);
                out.removing_replicas = ids(o.removing);
                Some(out)
            })
            .collect();
        if !ongoing.is_empty() {
            let mut t = OngoingTopicReassignment::default();
            t.name = StrBytes::from_string(topic).into();
            t.partitions = ongoing;
            resp.topics.push(t);
        }
    }
    resp
}
