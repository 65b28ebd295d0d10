//! InitProducerId for idempotent producers. Transactions are not built: a transactional id is
//! refused with a clear error.

use crate::handlers::authorized::{on_cluster, on_some};
use crate::handlers::groups::Client;
use crate::security::acl::{Operation, ResourceType};
use std::rc::Rc;

use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    // (Kafka 3.0+).
    let idempotent_ok = || {
        on_cluster(ctx, client, Operation::IdempotentWrite)
            || on_some(ctx, client, Operation::Write, ResourceType::Topic)
    };
    if req.transactional_id.is_none() && !idempotent_ok() {
        r.error_code = ResponseError::ClusterAuthorizationFailed.code();
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        return r;
    }
    if req.transactional_id.is_some() {
        tracing::warn!("InitProducerId with a transactional id: transactions are not supported");
        r.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
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
