//! DescribeClientQuotas (KIP-546): ringlog enforces no client quotas (no produce, fetch or
//! request-rate throttling), so every valid filter matches nothing and the answer lists no
//! entries — which lets `kafka-configs --describe --entity-type users` (SCRAM credentials and
//! quotas in one listing) work. AlterClientQuotas is not advertised: setting a quota fails in
//! the client with Kafka's "not supported" error rather than being accepted and ignored.

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::DescribeClientQuotasResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::authorized::on_cluster;
use crate::handlers::client::Client;
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
    } else if let Some(message) = invalid(&req) {
        refuse(&mut resp, ResponseError::InvalidRequest, message);
    } else {
        // No quotas are configured or enforced: nothing matches.
        resp.entries = Some(Vec::new());
    }
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
