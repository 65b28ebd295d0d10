//! DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas kept in the cluster
//! metadata (`quotas/mod.rs`), as Kafka's `kafka-configs --entity-type users|clients` manages
//! them. Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS; each entity's
//! alteration is checked on its own (Kafka's per-entity errors), the valid ones saved together.

use std::collections::BTreeSet;

use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntityData as AlterEntityData, EntryData as AlterEntryData,
};
use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::{
    DescribeClientQuotasResponse, EntityData, EntryData, ValueData,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::authorized::on_cluster;
use crate::handlers::client::Client;
use crate::metadata::controller::Command;
use crate::quotas::{self, Match, QuotaAlteration, QuotaEntity};
use crate::security::acl::Operation;
use crate::shard::ShardCtx;

/// Kafka's `match_type`s.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// What Kafka refuses in a filter, as its message says it.
fn invalid(req: &DescribeClientQuotasRequest) -> Option<String> {
    let mut seen = BTreeSet::new();
    for c in &req.components {
        let kind = c.entity_type.as_str();
        if !matches!(kind, "user" | "client-id" | "ip") {
            return Some(format!("Custom entity type '{kind}' not supported"));
        }
        if !seen.insert(kind) {
            return Some(format!("Duplicate entity type: {kind}"));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return Some(format!(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null for {kind}"
                ))
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return Some(format!("Unexpected match type: {other}")),
        }
    }
    (seen.contains("ip") && seen.len() > 1)
        .then(|| "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.".to_owned())
}

pub fn describe(
    ctx: &ShardCtx,
    client: &Client,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut resp = DescribeClientQuotasResponse::default();
    let refuse =
        |resp: &mut DescribeClientQuotasResponse, error: ResponseError, message: String| {
            resp.error_code = error.code();
            resp.error_message = Some(StrBytes::from_string(message));
            resp.entries = None;
        };
    if !on_cluster(ctx, client, Operation::DescribeConfigs) {
        refuse(
            &mut resp,
            ResponseError::ClusterAuthorizationFailed,
            "DESCRIBE_CONFIGS on the cluster is needed to describe client quotas".into(),
        );
        return resp;
    }
    if let Some(message) = invalid(&req) {
        refuse(&mut resp, ResponseError::InvalidRequest, message);
        return resp;
    }
    if req
        .components
        .iter()
        .any(|c| c.entity_type.as_str() == "ip")
    {
        // IP quotas are not built: none exists.
        resp.entries = Some(Vec::new());
        return resp;
    }
    let filter: Vec<(String, Match)> = req
        .components
        .iter()
        .map(|c| {
            let m = match (c.match_type, &c._match) {
                (MATCH_EXACT, Some(name)) => Match::Exact(name.to_string()),
                (MATCH_DEFAULT, _) => Match::Default,
                _ => Match::Specified,
            };
            (c.entity_type.to_string(), m)
        })
        .collect();
    let snapshot = ctx.snapshot().clone();
    resp.entries = Some(
        quotas::matching(&snapshot.client_quotas, &filter, req.strict)
            .into_iter()
            .map(|q| {
                let mut e = EntryData::default();
                e.entity = q
                    .entity
                    .components()
                    .into_iter()
                    .map(|(kind, name)| {
                        let mut d = EntityData::default();
                        d.entity_type = StrBytes::from_static_str(kind);
                        d.entity_name = name.map(|n| StrBytes::from_string(n.to_owned()));
                        d
                    })
                    .collect();
                e.values = q
                    .values
                    .iter()
                    .map(|(k, v)| {
                        let mut d = ValueData::default();
                        d.key = StrBytes::from_string(k.clone());
                        d.value = *v;
                        d
                    })
                    .collect();
                e
            })
            .collect(),
    );
    resp
}

/// One entry's alteration, or why it is refused.
type Checked = Result<QuotaAlteration, (ResponseError, String)>;

pub async fn alter(
    ctx: &ShardCtx,
    client: &Client,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let mut resp = AlterClientQuotasResponse::default();
    let allowed = on_cluster(ctx, client, Operation::AlterConfigs);
    let mut seen = BTreeSet::new();
    let mut checked: Vec<(Vec<AlterEntityData>, Checked)> = Vec::new();
    let mut scratch = ctx.snapshot().client_quotas.clone();
    for entry in req.entries {
        let echo: Vec<AlterEntityData> = entry
            .entity
            .iter()
            .map(|e| {
                let mut d = AlterEntityData::default();
                d.entity_type = e.entity_type.clone();
                d.entity_name = e.entity_name.clone();
                d
            })
            .collect();
        let outcome = if !allowed {
            Err((
                ResponseError::ClusterAuthorizationFailed,
                "ALTER_CONFIGS on the cluster is needed to alter client quotas".to_owned(),
            ))
        } else {
            let components: Vec<(String, Option<String>)> = entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.to_string(),
                        e.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            QuotaEntity::from_components(&components)
                .map_err(|e| (ResponseError::InvalidRequest, e.to_string()))
                .and_then(|entity| {
                    if !seen.insert(entity.storage_key()) {
                        return Err((
                            ResponseError::InvalidRequest,
                            format!("Ignoring duplicate entity {}", entity.storage_key()),
                        ));
                    }
                    let alteration = QuotaAlteration {
                        entity,
                        ops: entry
                            .ops
                            .iter()
                            .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                            .collect(),
                    };
                    quotas::alter(&mut scratch, &alteration)
                        .map(|_| alteration)
                        .map_err(|e| (ResponseError::InvalidRequest, e.to_string()))
                })
        };
        checked.push((echo, outcome));
    }
    let valid: Vec<QuotaAlteration> = checked
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok().cloned())
        .collect();
    let saved = if valid.is_empty() || req.validate_only {
        Ok(())
    } else {
        ctx.control(|reply| Command::AlterClientQuotas {
            alterations: valid,
            reply,
        })
        .await
    };
    resp.entries = checked
        .into_iter()
        .map(|(entity, outcome)| {
            let mut e = AlterEntryData::default();
            e.entity = entity;
            let error = match (outcome, &saved) {
                (Err(e), _) => Some(e),
                (Ok(_), Err(r)) => Some((r.error, r.message.clone())),
                (Ok(_), Ok(())) => None,
            };
            if let Some((code, message)) = error {
                e.error_code = code.code();
                e.error_message = Some(StrBytes::from_string(message));
            }
            e
        })
        .collect();
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;

    fn filter(components: &[(&str, i8, Option<&str>)]) -> DescribeClientQuotasRequest {
        let mut req = DescribeClientQuotasRequest::default();
        req.components = components
            .iter()
            .map(|&(kind, match_type, name)| {
                let mut c = ComponentData::default();
                c.entity_type = StrBytes::from_string(kind.to_owned());
                c.match_type = match_type;
                c._match = name.map(|n| StrBytes::from_string(n.to_owned()));
                c
            })
            .collect();
        req
    }

    #[test]
    fn filters_are_checked_as_kafka_checks_them() {
        assert_eq!(invalid(&filter(&[("user", MATCH_ANY, None)])), None);
        assert_eq!(
            invalid(&filter(&[
                ("user", MATCH_EXACT, Some("alice")),
                ("client-id", MATCH_DEFAULT, None)
            ])),
            None
        );
        assert!(invalid(&filter(&[("user", MATCH_EXACT, None)])).is_some());
        assert!(invalid(&filter(&[("group", MATCH_ANY, None)])).is_some());
        assert!(invalid(&filter(&[
            ("user", MATCH_ANY, None),
            ("user", MATCH_ANY, None)
        ]))
        .is_some());
        assert!(invalid(&filter(&[
            ("ip", MATCH_ANY, None),
            ("user", MATCH_ANY, None)
        ]))
        .is_some());
        assert!(invalid(&filter(&[("user", 7, None)])).is_some());
    }
}
