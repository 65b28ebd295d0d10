//! IncrementalAlterConfigs and AlterConfigs for topics: the new overrides are validated as
//! CreateTopics validates them (Kafka's bounds and the log's own), persisted in the cluster
//! metadata by the control plane, and applied live by every shard that holds a partition of
//! the topic (segment size and age, flush and retention settings, `max.message.bytes`,
//! `min.insync.replicas`). `validate_only` checks without changing anything.
//!
//! Brokers: only the dynamic broker configs (`config::dynamic`: the replication throttle rates,
//! the cluster default of `unclean.leader.election.enable`) change at run time, per broker id
//! or for the cluster (the empty name); others are refused with INVALID_REQUEST naming them.
//! Groups: Kafka's consumer-protocol group configs (`consumer.session.timeout.ms`,
//! `consumer.heartbeat.interval.ms`) per group, kept in the cluster metadata; share group
//! configs are refused (not built).

use crate::handlers::authorized::on_config_resource;
use crate::handlers::groups::Client;
use crate::security::acl::Operation;
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use kafka_protocol::messages::incremental_alter_configs_request::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_response::{
    self as incremental, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::dynamic::DynamicConfigError;
use crate::config::dynamic::DYNAMIC_BROKER_CONFIGS;
use crate::error::Refused;
use crate::handlers::describe_configs::{BROKER, GROUP, TOPIC};
use crate::metadata::controller::{Command, ConfigAlteration};
use crate::metadata::snapshot::DEFAULT_BROKER;
use crate::shard::ShardCtx;
use crate::topic_config::{TopicOverrides, TOPIC_CONFIG_DEFS};

/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// One change to a topic's overrides.
#[derive(Clone)]
enum Change {
    Set(String, String),
    Delete(String),
    Append(String, String),
    Subtract(String, String),
}

pub async fn incremental(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in req.resources {
        let changes: Result<Vec<Change>, Refused> = res
            .configs
            .iter()
            .map(|c| {
                let name = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                let need = |v: Option<String>| {
                    v.ok_or_else(|| invalid_config(format!("'{name}' needs a value")))
                };
                Ok(match c.config_operation {
                    SET => Change::Set(name.clone(), need(value)?),
                    DELETE => Change::Delete(name),
                    APPEND => Change::Append(name.clone(), need(value)?),
                    SUBTRACT => Change::Subtract(name.clone(), need(value)?),
                    op => {
                        return Err(invalid_request(format!(
                            "unknown config operation {op} for '{name}'"
                        )))
                    }
                })
            })
            .collect();
        let alteration = changes.map(|changes| -> ConfigAlteration {
            Box::new(move |current| apply_changes(current, &changes))
        });
        let resource = (res.resource_type, res.resource_name.as_str());
        let alteration = on_config_resource(ctx, client, Operation::AlterConfigs, resource)
            .map_err(|e| {
                Refused::new(
                    e,
                    format!("{} may not alter these configs", client.principal),
                )
            })
            .and(alteration);
        let (code, message) = outcome(ctx, resource, alteration, req.validate_only).await;
        let mut r = incremental::AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        (r.error_code, r.error_message) = (code, message);
        resp.responses.push(r);
    }
    resp
}

/// AlterConfigs: the given configs replace every override of the resource.
pub async fn alter_all(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut resp = AlterConfigsResponse::default();
    for res in req.resources {
        let replacement: Result<BTreeMap<String, String>, Refused> = res
            .configs
            .iter()
            .map(|c| {
                let value = c.value.as_ref().ok_or_else(|| {
                    invalid_config(format!("'{}' needs a value", c.name.as_str()))
                })?;
                Ok((c.name.to_string(), value.to_string()))
            })
            .collect();
        let alteration =
            replacement.map(|all| -> ConfigAlteration { Box::new(move |_| Ok(all.clone())) });
        let resource = (res.resource_type, res.resource_name.as_str());
        let alteration = on_config_resource(ctx, client, Operation::AlterConfigs, resource)
            .map_err(|e| {
                Refused::new(
                    e,
                    format!("{} may not alter these configs", client.principal),
                )
            })
            .and(alteration);
        let (code, message) = outcome(ctx, resource, alteration, req.validate_only).await;
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        (r.error_code, r.error_message) = (code, message);
        resp.responses.push(r);
    }
    resp
}

/// The error code and message of altering one resource (0 and none when done).
async fn outcome(
    ctx: &ShardCtx,
    resource: (i8, &str),
    alteration: Result<ConfigAlteration, Refused>,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let result = match alteration {
        Ok(change) => alter(ctx, resource, change, validate_only).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => (0, None),
        Err(e) => (e.error.code(), Some(StrBytes::from_string(e.message))),
    }
}

/// Alters one resource: a topic's overrides through the control plane (validated there
/// against the current ones), or the refusal of other resource types.
async fn alter(
    ctx: &ShardCtx,
    (kind, name): (i8, &str),
    change: ConfigAlteration,
    validate_only: bool,
) -> Result<(), Refused> {
    match kind {
        TOPIC => {}
        BROKER => return alter_broker(ctx, name, change, validate_only).await,
        GROUP => return alter_group(ctx, name, change, validate_only).await,
        other => {
            return Err(invalid_request(format!(
                "resource type {other} cannot be altered (topics 2)"
            )))
        }
    }
    let defaults = ctx.topic_defaults();
    let validated: ConfigAlteration = Box::new(move |current| {
        let next = change(current)?;
        TopicOverrides::parse(&next)
            .and_then(|o| o.resolve(&defaults))
            .map_err(|e| invalid_config(e.to_string()))?;
        Ok(next)
    });
    if validate_only {
        let snapshot = ctx.snapshot().clone();
        let topic = snapshot.topics.get(name).ok_or_else(|| {
            Refused::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            )
        })?;
        return validated(&topic.configs).map(|_| ());
    }
    let name = name.to_owned();
    ctx.control(|reply| Command::AlterTopicConfigs {
        name,
        alter: validated,
        reply,
    })
    .await
}

/// Alters a broker's dynamic configs (`name` its Kafka broker id) or the cluster's defaults
/// (the empty name): only the dynamic ones (`config::dynamic`) may be set.
async fn alter_broker(
    ctx: &ShardCtx,
    name: &str,
    change: ConfigAlteration,
    validate_only: bool,
) -> Result<(), Refused> {
    let broker = if name.is_empty() {
        DEFAULT_BROKER.to_owned()
    } else {
        match name.parse::<i32>() {
            Ok(id) if id >= 0 => id.to_string(),
            _ => {
                return Err(invalid_request(format!(
                    "unexpected broker id '{name}': a broker id or the empty name (the cluster default)"
                )))
            }
        }
    };
    let validated: ConfigAlteration = Box::new(move |current| {
        let next = change(current)?;
        // Kafka's answers: a config that cannot change at run time is an invalid request, a
        // bad value of one that can an invalid config.
        crate::config::dynamic::validate(&next).map_err(|e| match e {
            DynamicConfigError::Static(_) => invalid_request(e.to_string()),
            _ => invalid_config(e.to_string()),
        })?;
        Ok(next)
    });
    if validate_only {
        let current = ctx
            .snapshot()
            .broker_configs
            .get(&broker)
            .cloned()
            .unwrap_or_default();
        return validated(&current).map(|_| ());
    }
    ctx.control(|reply| Command::AlterBrokerConfigs {
        broker,
        alter: validated,
        reply,
    })
    .await
}

/// Alters a group's configs (Kafka's `GroupConfig`): the consumer protocol's session timeout and
/// heartbeat interval, within the broker's `group.consumer.min/max.*` bounds; share groups'
/// configs are refused as not built.
async fn alter_group(
    ctx: &ShardCtx,
    group: &str,
    change: ConfigAlteration,
    validate_only: bool,
) -> Result<(), Refused> {
    if group.is_empty() {
        return Err(invalid_request("a group config resource needs a group id"));
    }
    let bounds = crate::group_coordinator::Host::settings(ctx)
        .consumer
        .clone();
    let validated: ConfigAlteration = Box::new(move |current| {
        let next = change(current)?;
        crate::group_coordinator::consumer::validate_group_configs(&next, &bounds)
            .map_err(invalid_config)?;
        Ok(next)
    });
    if validate_only {
        let current = ctx
            .snapshot()
            .group_configs
            .get(group)
            .cloned()
            .unwrap_or_default();
        return validated(&current).map(|_| ());
    }
    let group = group.to_owned();
    ctx.control(|reply| Command::AlterGroupConfigs {
        group,
        alter: validated,
        reply,
    })
    .await
}

/// The overrides after `changes`, in order. APPEND and SUBTRACT apply to list configs only
/// (`cleanup.policy`), as in Kafka.
fn apply_changes(
    current: &BTreeMap<String, String>,
    changes: &[Change],
) -> Result<BTreeMap<String, String>, Refused> {
    let mut next = current.clone();
    for change in changes {
        match change {
            Change::Set(k, v) => {
                next.insert(k.clone(), v.clone());
            }
            Change::Delete(k) => {
                next.remove(k);
            }
            Change::Append(k, v) | Change::Subtract(k, v) => {
                // a topic's list configs, or a dynamic broker config's (`log.cleanup.policy`);
                // the base is the value set, else the built-in default, as in Kafka
                let list = |kind| kind == crate::config::ConfigType::List;
                let default = TOPIC_CONFIG_DEFS
                    .iter()
                    .find(|d| d.name == k && list(d.kind))
                    .map(|d| d.fixed_default)
                    .or_else(|| {
                        DYNAMIC_BROKER_CONFIGS
                            .iter()
                            .find(|d| d.name == k && list(d.kind))
                            .map(|d| d.default)
                    });
                let Some(default) = default else {
                    return Err(invalid_config(format!(
                        "'{k}' is not a list config: APPEND and SUBTRACT apply to lists only"
                    )));
                };
                let base = next.get(k).map_or(default, String::as_str);
                let mut items: Vec<String> = base
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let at = items.iter().position(|i| i == item);
                    match (change, at) {
                        (Change::Append(..), None) => items.push(item.to_owned()),
                        (Change::Subtract(..), Some(i)) => {
                            items.remove(i);
                        }
                        _ => {}
                    }
                }
                next.insert(k.clone(), items.join(","));
            }
        }
    }
    Ok(next)
}

fn invalid_config(message: impl Into<String>) -> Refused {
    Refused::new(ResponseError::InvalidConfig, message)
}

fn invalid_request(message: impl Into<String>) -> Refused {
    Refused::new(ResponseError::InvalidRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn changes_apply_in_order_and_lists_take_append_and_subtract() {
        let current = map(&[("retention.ms", "1000"), ("segment.bytes", "1048576")]);
        let next = apply_changes(
            &current,
            &[
                Change::Set("retention.ms".into(), "2000".into()),
                Change::Delete("segment.bytes".into()),
                Change::Append("cleanup.policy".into(), "delete".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            next,
            map(&[("retention.ms", "2000"), ("cleanup.policy", "delete")])
        );
        let fewer = apply_changes(
            &next,
            &[Change::Subtract("cleanup.policy".into(), "delete".into())],
        )
        .unwrap();
        assert_eq!(fewer["cleanup.policy"], "");
        let refused = apply_changes(
            &current,
            &[Change::Append("retention.ms".into(), "5".into())],
        )
        .unwrap_err();
        assert_eq!(refused.error, ResponseError::InvalidConfig);
        assert!(
            refused.message.contains("not a list"),
            "{}",
            refused.message
        );
    }
}
