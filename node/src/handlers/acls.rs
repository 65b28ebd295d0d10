//! CreateAcls, DescribeAcls and DeleteAcls, validated as Kafka's controller validates them;
//! SECURITY_DISABLED when no authorizer is configured; ALTER (create, delete) or DESCRIBE on
//! the cluster needed, as in Kafka. The bindings change through the
//! control plane (the cluster metadata holds them).

use std::rc::Rc;

use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
};
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::handlers::authorized::on_cluster;
use crate::handlers::client::Client;
use crate::metadata::Command;
use crate::security::acl::{
    Entry, Filter, Operation, Pattern, PatternType, Permission, ResourceType, CLUSTER_NAME,
};
use crate::shard::ShardCtx;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn disabled() -> Refused {
    Refused::new(
        ResponseError::SecurityDisabled,
        "no authorizer is configured (authorizer.class.name)",
    )
}

fn invalid(why: String) -> Refused {
    Refused::new(ResponseError::InvalidRequest, why)
}

/// A binding to create, checked as Kafka checks new ACLs.
fn binding(c: &AclCreation) -> Result<(Pattern, Entry), Refused> {
    let resource = ResourceType::from_code(c.resource_type)
        .ok_or_else(|| invalid(format!("invalid resource type {}", c.resource_type)))?;
    let pattern = PatternType::from_code(c.resource_pattern_type).ok_or_else(|| {
        invalid(format!(
            "invalid pattern type {} (LITERAL 3 or PREFIXED 4)",
            c.resource_pattern_type
        ))
    })?;
    let operation = Operation::from_code(c.operation)
        .ok_or_else(|| invalid(format!("invalid operation {}", c.operation)))?;
    let permission = Permission::from_code(c.permission_type)
        .ok_or_else(|| invalid(format!("invalid permission type {}", c.permission_type)))?;
    if c.resource_name.is_empty() {
        return Err(invalid("resource name should not be empty".into()));
    }
    if resource == ResourceType::Cluster && c.resource_name.as_str() != CLUSTER_NAME {
        return Err(invalid(format!(
            "the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )));
    }
    let principal = c.principal.as_str();
    if !principal
        .split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
    {
        return Err(invalid(format!(
            "could not parse principal from '{principal}' (Type:name, e.g. User:alice)"
        )));
    }
    Ok((
        Pattern {
            resource,
            pattern,
            name: c.resource_name.to_string(),
        },
        Entry {
            principal: principal.to_owned(),
            host: if c.host.is_empty() {
                "*".into()
            } else {
                c.host.to_string()
            },
            operation,
            permission,
        },
    ))
}

pub async fn create(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    if !on_cluster(ctx, client, Operation::Alter) {
        return refuse_create(&req, ResponseError::ClusterAuthorizationFailed);
    }
    let mut resp = CreateAclsResponse::default();
    let checked: Vec<Result<(Pattern, Entry), Refused>> =
        req.creations.iter().map(binding).collect();
    let valid: Vec<(Pattern, Entry)> = checked.iter().filter_map(|b| b.clone().ok()).collect();
    let saved = if ctx.config().security.authorizer.is_none() {
        Err(disabled())
    } else if valid.is_empty() {
        Ok(())
    } else {
        ctx.control(|reply| Command::AlterAcls {
            add: valid,
            remove: Vec::new(),
            reply,
        })
        .await
    };
    for b in checked {
        let mut r = AclCreationResult::default();
        if let Err(refused) = b.and_then(|_| saved.clone()) {
            r.error_code = refused.error.code();
            r.error_message = Some(s(refused.message));
        }
        resp.results.push(r);
    }
    resp
}

/// CreateAcls refused as a whole (the client may not alter the cluster).
fn refuse_create(req: &CreateAclsRequest, error: ResponseError) -> CreateAclsResponse {
    let mut resp = CreateAclsResponse::default();
    resp.results = req
        .creations
        .iter()
        .map(|_| {
            let mut r = AclCreationResult::default();
            r.error_code = error.code();
            r
        })
        .collect();
    resp
}

/// DeleteAcls refused as a whole.
fn refuse_delete(req: &DeleteAclsRequest, error: ResponseError) -> DeleteAclsResponse {
    let mut resp = DeleteAclsResponse::default();
    resp.filter_results = req
        .filters
        .iter()
        .map(|_| {
            let mut r = DeleteAclsFilterResult::default();
            r.error_code = error.code();
            r
        })
        .collect();
    resp
}

/// A DescribeAcls or DeleteAcls filter, from its wire fields.
fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    (operation, permission): (i8, i8),
) -> Result<Filter, Refused> {
    const ANY: i8 = 1;
    let resource = match resource_type {
        ANY => None,
        t => Some(
            ResourceType::from_code(t)
                .ok_or_else(|| invalid(format!("invalid resource type filter {t}")))?,
        ),
    };
    let pattern = match pattern_type {
        ANY => None,
        2 => Some(None), // MATCH
        p => Some(Some(PatternType::from_code(p).ok_or_else(|| {
            invalid(format!("invalid pattern type filter {p}"))
        })?)),
    };
    let operation = match operation {
        ANY => None,
        o => Some(
            Operation::from_code(o)
                .ok_or_else(|| invalid(format!("invalid operation filter {o}")))?,
        ),
    };
    let permission = match permission {
        ANY => None,
        p => Some(
            Permission::from_code(p)
                .ok_or_else(|| invalid(format!("invalid permission type filter {p}")))?,
        ),
    };
    Ok(Filter {
        resource,
        name: name.map(|n| n.to_string()),
        pattern,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation,
        permission,
    })
}

/// Every binding the filter matches, in the metadata's order.
fn matching(ctx: &ShardCtx, f: &Filter) -> Vec<(Pattern, Entry)> {
    let snapshot = ctx.snapshot().clone();
    let mut out = Vec::new();
    for (key, entries) in &snapshot.acls {
        let Some(pattern) = Pattern::from_key(key) else {
            continue;
        };
        for e in entries.iter().filter(|e| f.matches(&pattern, e)) {
            out.push((pattern.clone(), e.clone()));
        }
    }
    out
}

pub fn describe(ctx: &ShardCtx, client: &Client, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let mut resp = DescribeAclsResponse::default();
    let f = if ctx.config().security.authorizer.is_none() {
        Err(disabled())
    } else if !on_cluster(ctx, client, Operation::Describe) {
        Err(Refused::new(
            ResponseError::ClusterAuthorizationFailed,
            format!("{} may not describe ACLs", client.principal),
        ))
    } else {
        filter(
            req.resource_type_filter,
            req.resource_name_filter.as_ref(),
            req.pattern_type_filter,
            req.principal_filter.as_ref(),
            req.host_filter.as_ref(),
            (req.operation, req.permission_type),
        )
    };
    let f = match f {
        Ok(f) => f,
        Err(refused) => {
            resp.error_code = refused.error.code();
            resp.error_message = Some(s(refused.message));
            return resp;
        }
    };
    for (pattern, entry) in matching(ctx, &f) {
        let new_resource = resp
            .resources
            .last()
            .is_none_or(|r: &DescribeAclsResource| {
                r.resource_type != pattern.resource as i8
                    || r.pattern_type != pattern.pattern as i8
                    || r.resource_name.as_str() != pattern.name
            });
        if new_resource {
            let mut r = DescribeAclsResource::default();
            r.resource_type = pattern.resource as i8;
            r.resource_name = s(pattern.name.clone());
            r.pattern_type = pattern.pattern as i8;
            resp.resources.push(r);
        }
        let mut d = AclDescription::default();
        d.principal = s(entry.principal);
        d.host = s(entry.host);
        d.operation = entry.operation as i8;
        d.permission_type = entry.permission as i8;
        resp.resources
            .last_mut()
            .expect("a resource was pushed")
            .acls
            .push(d);
    }
    resp
}

fn delete_filter(f: &DeleteAclsFilter) -> Result<Filter, Refused> {
    filter(
        f.resource_type_filter,
        f.resource_name_filter.as_ref(),
        f.pattern_type_filter,
        f.principal_filter.as_ref(),
        f.host_filter.as_ref(),
        (f.operation, f.permission_type),
    )
}

pub async fn delete(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    if !on_cluster(ctx, client, Operation::Alter) {
        return refuse_delete(&req, ResponseError::ClusterAuthorizationFailed);
    }
    let mut resp = DeleteAclsResponse::default();
    let mut results = Vec::new();
    let mut remove = Vec::new();
    for f in &req.filters {
        let found = if ctx.config().security.authorizer.is_none() {
            Err(disabled())
        } else {
            delete_filter(f).map(|f| matching(ctx, &f))
        };
        if let Ok(m) = &found {
            remove.extend(m.iter().cloned());
        }
        results.push(found);
    }
    let saved = if remove.is_empty() {
        Ok(())
    } else {
        ctx.control(|reply| Command::AlterAcls {
            add: Vec::new(),
            remove,
            reply,
        })
        .await
    };
    for found in results {
        let mut r = DeleteAclsFilterResult::default();
        match found.and_then(|m| saved.clone().map(|_| m)) {
            Ok(m) => {
                r.matching_acls = m
                    .into_iter()
                    .map(|(p, e)| {
                        let mut a = DeleteAclsMatchingAcl::default();
                        a.resource_type = p.resource as i8;
                        a.resource_name = s(p.name);
                        a.pattern_type = p.pattern as i8;
                        a.principal = s(e.principal);
                        a.host = s(e.host);
                        a.operation = e.operation as i8;
                        a.permission_type = e.permission as i8;
                        a
                    })
                    .collect()
            }
            Err(refused) => {
                r.error_code = refused.error.code();
                r.error_message = Some(s(refused.message));
            }
        }
        resp.filter_results.push(r);
    }
    resp
}
