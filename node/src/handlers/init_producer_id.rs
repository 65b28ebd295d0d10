//! InitProducerId: a producer id for an idempotent producer, or — with a transactional id —
//! the transaction coordinator's answer (a producer id and bumped epoch for the new producer
//! instance, older instances fenced; KIP-360 recovery from v3).

use crate::handlers::authorized::{authorized, on_cluster, on_some};
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;

use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::ResponseError;
use transactions::coordinator::ProducerIdAndEpoch;

use crate::shard::{now_ms, ShardCtx};
use crate::txn_coordinator::{self, txn_error};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    if let Some(id) = &req.transactional_id {
        let id = id.0.to_string();
        if !authorized(
            ctx,
            client,
            Operation::Write,
            ResourceType::TransactionalId,
            &id,
        ) {
            r.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
            return r;
        }
        // v3+: a producer recovering from an abortable error names its id and epoch.
        let expected = (version >= 3 && req.producer_id.0 >= 0).then_some(ProducerIdAndEpoch {
            producer_id: req.producer_id.0,
            epoch: req.producer_epoch,
        });
        let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
        let timeout = req.transaction_timeout_ms;
        match txn_coordinator::init_producer_id(host, &id, timeout, expected, now_ms()).await {
            Ok(p) => {
                r.producer_id = ProducerId(p.producer_id);
                r.producer_epoch = p.epoch;
            }
            Err(e) => r.error_code = txn_error(e, version, 4).code(),
        }
        return r;
    }
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    // (Kafka 3.0+).
    let idempotent_ok = on_cluster(ctx, client, Operation::IdempotentWrite)
        || on_some(ctx, client, Operation::Write, ResourceType::Topic);
    if !idempotent_ok {
        r.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return r;
    }
    if req.producer_id.0 >= 0 {
        // A producer bumping its epoch after an error keeps its id.
        r.producer_id = req.producer_id;
        r.producer_epoch = req.producer_epoch.saturating_add(1);
    } else {
        r.producer_id = ProducerId(ctx.next_producer_id());
        r.producer_epoch = 0;
    }
    r
}
