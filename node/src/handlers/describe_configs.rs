//! DescribeConfigs for brokers, topics and groups, as Kafka answers it: the running values with
//! their real source (`STATIC_BROKER_CONFIG` for what the config file, `--set` or a CLI flag
//! set, `DEFAULT_CONFIG` for built-in defaults, `DYNAMIC_TOPIC_CONFIG` for a topic's
//! overrides), the synonyms a value falls back to (`include_synonyms`), type and documentation
//! (`include_documentation`, v3+).

use crate::handlers::authorized::on_config_resource;
use crate::handlers::groups::Client;
use crate::security::acl::Operation;
use std::rc::Rc;

use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::dynamic::DYNAMIC_BROKER_CONFIGS;
use crate::config::{ConfigType, Properties, PROPERTIES};
use crate::metadata::snapshot::DEFAULT_BROKER;
use crate::metadata::Snapshot;
use crate::shard::ShardCtx;
use crate::topic_config::TOPIC_CONFIG_DEFS;

/// Kafka's config resource types (AlterConfigs uses them too).
pub(crate) const TOPIC: i8 = 2;
pub(crate) const BROKER: i8 = 4;
pub(crate) const GROUP: i8 = 32;

/// Kafka's config sources.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    DynamicGroup = 8,
}

/// One value a config has at one level.
struct Level {
    name: String,
    value: String,
    source: Source,
}

/// A config as described: the levels it has, the one in force first.
struct Described {
    name: &'static str,
    levels: Vec<Level>,
    kind: ConfigType,
    doc: String,
    read_only: bool,
}

/// What the request asks for beyond the values.
#[derive(Clone, Copy)]
struct Detail {
    synonyms: bool,
    documentation: bool,
}

impl Described {
    fn into_result(self, detail: Detail) -> DescribeConfigsResourceResult {
        let mut e = DescribeConfigsResourceResult::default();
        let first = &self.levels[0];
        e.name = StrBytes::from_static_str(self.name);
        // A password's value is never sent, as in Kafka (null, `is_sensitive`).
        let sensitive = self.kind == ConfigType::Password;
        let shown = |v: String| (!sensitive).then(|| StrBytes::from_string(v));
        e.value = shown(first.value.clone());
        e.config_source = first.source as i8;
        e.read_only = self.read_only;
        e.is_sensitive = sensitive;
        e.config_type = self.kind as i8;
        e.documentation = detail
            .documentation
            .then(|| StrBytes::from_string(self.doc));
        if detail.synonyms {
            e.synonyms = self
                .levels
                .into_iter()
                .map(|l| {
                    let mut s = DescribeConfigsSynonym::default();
                    s.name = StrBytes::from_string(l.name);
                    s.value = shown(l.value);
                    s.source = l.source as i8;
                    s
                })
                .collect();
        }
        e
    }
}

/// The levels of broker property `name`: what was set, then the default.
fn broker_levels(props: &Properties, name: &str, default: &str) -> Vec<Level> {
    let mut levels = Vec::new();
    if props.is_set(name) {
        levels.push(Level {
            name: name.to_owned(),
            value: props.get(name).to_owned(),
            source: Source::StaticBroker,
        });
    }
    levels.push(Level {
        name: name.to_owned(),
        value: default.to_owned(),
        source: Source::Default,
    });
    levels
}

fn broker_configs(props: &Properties) -> Vec<Described> {
    PROPERTIES
        .iter()
        .map(|p| Described {
            name: p.name,
            levels: broker_levels(props, p.name, p.default),
            kind: p.kind,
            doc: p.doc.to_owned(),
            // No broker config changes at run time yet (AlterConfigs is not served).
            read_only: true,
        })
        .collect()
}

/// The dynamic broker configs of broker `broker` (`None`: the cluster defaults): every one
/// with its levels — the broker's own value, the cluster default, the built-in default — or,
/// `set_only`, only those set (Kafka describes the default resource that way).
fn dynamic_configs(
    props: &Properties,
    snapshot: &Snapshot,
    broker: Option<i32>,
    set_only: bool,
) -> Vec<Described> {
    let own = broker.and_then(|b| snapshot.broker_configs.get(&b.to_string()));
    let cluster = snapshot.broker_configs.get(DEFAULT_BROKER);
    DYNAMIC_BROKER_CONFIGS
        .iter()
        .filter_map(|d| {
            let mut levels = Vec::new();
            let mut at = |configs: Option<&std::collections::BTreeMap<String, String>>, source| {
                if let Some(v) = configs.and_then(|c| c.get(d.name)) {
                    levels.push(Level {
                        name: d.name.to_owned(),
                        value: v.clone(),
                        source,
                    });
                }
            };
            at(own, Source::DynamicBroker);
            at(cluster, Source::DynamicDefaultBroker);
            if set_only && levels.is_empty() {
                return None;
            }
            // a dynamic config that is also a static one (`log.cleanup.policy`): the config
            // file's value under the dynamic ones
            match crate::config::property(d.name) {
                Some(p) => levels.extend(broker_levels(props, p.name, p.default)),
                None => levels.push(Level {
                    name: d.name.to_owned(),
                    value: d.default.to_owned(),
                    source: Source::Default,
                }),
            }
            Some(Described {
                name: d.name,
                levels,
                kind: d.kind,
                doc: d.doc.to_owned(),
                read_only: false,
            })
        })
        .collect()
}

/// A topic's configs: its own, then the broker's — dynamic (`broker`'s own, the cluster's),
/// static, built-in.
fn topic_configs(
    props: &Properties,
    overrides: &std::collections::BTreeMap<String, String>,
    dynamic: Option<(&Snapshot, i32)>,
) -> Vec<Described> {
    TOPIC_CONFIG_DEFS
        .iter()
        .map(|def| {
            let mut levels = Vec::new();
            if let Some(v) = overrides.get(def.name) {
                levels.push(Level {
                    name: def.name.to_owned(),
                    value: v.clone(),
                    source: Source::DynamicTopic,
                });
            }
            if let Some((snapshot, broker)) = dynamic {
                let is_dynamic = DYNAMIC_BROKER_CONFIGS.iter().any(|d| d.name == def.broker);
                for (key, source) in [
                    (broker.to_string(), Source::DynamicBroker),
                    (DEFAULT_BROKER.to_owned(), Source::DynamicDefaultBroker),
                ] {
                    let set = snapshot
                        .broker_configs
                        .get(&key)
                        .and_then(|c| c.get(def.broker));
                    if let Some(v) = set.filter(|_| is_dynamic) {
                        levels.push(Level {
                            name: def.broker.to_owned(),
                            value: v.clone(),
                            source,
                        });
                    }
                }
            }
            match crate::config::property(def.broker) {
                Some(p) => levels.extend(broker_levels(props, p.name, p.default)),
                None => levels.push(Level {
                    name: if def.broker.is_empty() {
                        def.name
                    } else {
                        def.broker
                    }
                    .to_owned(),
                    value: def.fixed_default.to_owned(),
                    source: Source::Default,
                }),
            }
            Described {
                name: def.name,
                levels,
                kind: def.kind,
                doc: def.doc.to_owned(),
                read_only: false,
            }
        })
        .collect()
}

/// Kafka 4.x's group configs: the consumer protocol's session timeout and heartbeat interval —
/// the group's own (DYNAMIC_GROUP_CONFIG) over the broker's `group.consumer.*` (its synonym) —
/// and share groups' at Kafka's defaults (KIP-932 is not built: they affect nothing).
fn group_configs(ctx: &ShardCtx, group: &str) -> Vec<Described> {
    use crate::group_coordinator::consumer::{HEARTBEAT_INTERVAL_CONFIG, SESSION_TIMEOUT_CONFIG};
    let c = &crate::group_coordinator::Host::settings(ctx).consumer;
    let snapshot = ctx.snapshot();
    let own = snapshot.group_configs.get(group);
    let consumer = [
        (
            SESSION_TIMEOUT_CONFIG,
            "group.consumer.session.timeout.ms",
            c.session_timeout_ms,
            "Session timeout of the group's consumer-protocol members (KIP-848).",
        ),
        (
            HEARTBEAT_INTERVAL_CONFIG,
            "group.consumer.heartbeat.interval.ms",
            c.heartbeat_interval_ms,
            "Heartbeat interval of the group's consumer-protocol members (KIP-848).",
        ),
    ]
    .into_iter()
    .map(|(name, broker_name, broker_value, doc)| {
        let mut levels = Vec::new();
        if let Some(v) = own.and_then(|o| o.get(name)) {
            levels.push(Level {
                name: name.to_owned(),
                value: v.clone(),
                source: Source::DynamicGroup,
            });
        }
        levels.push(Level {
            name: broker_name.to_owned(),
            value: broker_value.to_string(),
            source: Source::Default,
        });
        Described {
            name,
            levels,
            kind: ConfigType::Int,
            doc: doc.to_owned(),
            read_only: false,
        }
    });
    const NOT_SERVED: &str =
        " Share groups (KIP-932) are not built in ringlog: this config affects nothing.";
    let share = [
        (
            "share.session.timeout.ms",
            "45000",
            ConfigType::Int,
            "Session timeout of share group members.",
        ),
        (
            "share.heartbeat.interval.ms",
            "5000",
            ConfigType::Int,
            "Heartbeat interval of share group members.",
        ),
        (
            "share.record.lock.duration.ms",
            "30000",
            ConfigType::Int,
            "How long a share group member holds a record's acquisition lock.",
        ),
        (
            "share.auto.offset.reset",
            "latest",
            ConfigType::String,
            "Where a share-partition starts.",
        ),
    ]
    .into_iter()
    .map(|(name, value, kind, doc)| Described {
        name,
        levels: vec![Level {
            name: name.to_owned(),
            value: value.to_owned(),
            source: Source::Default,
        }],
        kind,
        doc: format!("{doc}{NOT_SERVED}"),
        read_only: true,
    });
    consumer.chain(share).collect()
}

/// The configs of one resource, or the error Kafka gives for it.
fn describe(
    ctx: &ShardCtx,
    res: &DescribeConfigsResource,
) -> Result<Vec<Described>, (ResponseError, String)> {
    let name = res.resource_name.as_str();
    let props = &ctx.config().properties;
    match res.resource_type {
        TOPIC => match ctx.snapshot().topics.get(name) {
            Some(t) => Ok(topic_configs(
                props,
                &t.configs,
                Some((&ctx.snapshot(), ctx.broker_id().0)),
            )),
            None => Err((
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist"),
            )),
        },
        // Kafka: the empty name asks for the cluster-wide dynamic defaults (none here, no
        // broker config is dynamic), a broker id for that broker's configs.
        BROKER if name.is_empty() => Ok(dynamic_configs(props, &ctx.snapshot(), None, true)),
        BROKER => match name.parse::<i32>() {
            Ok(id) if ctx.config().shard_of_broker(BrokerId(id)).is_some() => {
                let mut all = dynamic_configs(props, &ctx.snapshot(), Some(id), false);
                all.extend(
                    broker_configs(props)
                        .into_iter()
                        .filter(|c| DYNAMIC_BROKER_CONFIGS.iter().all(|d| d.name != c.name)),
                );
                Ok(all)
            }
            _ => Err((
                ResponseError::InvalidRequest,
                format!(
                    "unexpected broker id '{name}': this node is brokers {}..={} or the empty name",
                    ctx.config().broker_id(0).0,
                    ctx.config().broker_id(ctx.config().shards - 1).0
                ),
            )),
        },
        GROUP => Ok(group_configs(ctx, name)),
        other => Err((
            ResponseError::InvalidRequest,
            format!("resource type {other} is not supported (topics 2, brokers 4, groups 32)"),
        )),
    }
}

pub fn handle(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let detail = Detail {
        synonyms: req.include_synonyms,
        documentation: version >= 3 && req.include_documentation,
    };
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        let allowed = on_config_resource(
            ctx,
            client,
            Operation::DescribeConfigs,
            (res.resource_type, res.resource_name.as_str()),
        );
        let described = allowed
            .map_err(|e| {
                (
                    e,
                    format!("{} may not describe these configs", client.principal),
                )
            })
            .and_then(|()| describe(ctx, &res));
        match described {
            Ok(mut configs) => {
                // Null or empty: every config.
                if let Some(keys) = res.configuration_keys.as_ref().filter(|k| !k.is_empty()) {
                    configs.retain(|c| keys.iter().any(|k| k.as_str() == c.name));
                }
                r.configs = configs.into_iter().map(|c| c.into_result(detail)).collect();
            }
            Err((code, message)) => {
                r.error_code = code.code();
                r.error_message = Some(StrBytes::from_string(message));
            }
        }
        resp.results.push(r);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_configs_show_what_was_set_over_the_defaults() {
        let mut p = Properties::default();
        p.set("log.dirs", "/data/x").unwrap();
        p.set("group.initial.rebalance.delay.ms", "0").unwrap();
        let configs = broker_configs(&p);
        let all = Detail {
            synonyms: true,
            documentation: true,
        };
        let by_name = |n: &str| {
            broker_configs(&p)
                .into_iter()
                .find(|c| c.name == n)
                .unwrap()
                .into_result(all)
        };
        assert_eq!(configs.len(), PROPERTIES.len());
        let dirs = by_name("log.dirs");
        assert_eq!(dirs.value.as_deref(), Some("/data/x"));
        assert_eq!(dirs.config_source, Source::StaticBroker as i8);
        assert_eq!(dirs.synonyms.len(), 2);
        assert_eq!(dirs.synonyms[1].value.as_deref(), Some("./ringlog-data"));
        assert_eq!(dirs.synonyms[1].source, Source::Default as i8);
        let delay = by_name("group.initial.rebalance.delay.ms");
        assert_eq!(delay.value.as_deref(), Some("0"));
        assert_eq!(delay.config_type, ConfigType::Int as i8);
        let unset = by_name("log.retention.ms");
        assert_eq!(unset.config_source, Source::Default as i8);
        assert_eq!(unset.synonyms.len(), 1);
        assert!(unset.documentation.is_some_and(|d| !d.is_empty()));
    }

    #[test]
    fn topic_configs_fall_back_to_the_broker_then_the_default() {
        let mut p = Properties::default();
        p.set("log.retention.ms", "1000").unwrap();
        let overrides = [("segment.bytes".to_owned(), "1048576".to_owned())].into();
        let configs: Vec<_> = topic_configs(&p, &overrides, None)
            .into_iter()
            .map(|c| {
                c.into_result(Detail {
                    synonyms: true,
                    documentation: false,
                })
            })
            .collect();
        let get = |n: &str| configs.iter().find(|c| c.name.as_str() == n).unwrap();
        let seg = get("segment.bytes");
        assert_eq!(seg.value.as_deref(), Some("1048576"));
        assert_eq!(seg.config_source, Source::DynamicTopic as i8);
        assert_eq!(
            seg.synonyms
                .iter()
                .map(|s| (s.name.as_str(), s.source))
                .collect::<Vec<_>>(),
            [
                ("segment.bytes", Source::DynamicTopic as i8),
                ("log.segment.bytes", Source::Default as i8)
            ]
        );
        let ret = get("retention.ms");
        assert_eq!(ret.value.as_deref(), Some("1000"));
        assert_eq!(ret.config_source, Source::StaticBroker as i8);
        assert_eq!(ret.synonyms[0].name.as_str(), "log.retention.ms");
        let policy = get("cleanup.policy");
        assert_eq!(policy.value.as_deref(), Some("delete"));
        assert_eq!(policy.config_source, Source::Default as i8);
        assert!(seg.documentation.is_none(), "not asked for");
    }

    #[test]
    fn every_topic_config_is_described_and_its_broker_synonym_exists_or_has_a_default() {
        let described: Vec<&str> = TOPIC_CONFIG_DEFS.iter().map(|d| d.name).collect();
        assert_eq!(described, crate::topic_config::TOPIC_CONFIGS);
        // Kafka's throttled replica lists have no broker synonym and default to empty.
        for d in TOPIC_CONFIG_DEFS.iter().filter(|d| !d.broker.is_empty()) {
            assert!(
                crate::config::property(d.broker).is_some() == d.fixed_default.is_empty(),
                "{}: a broker property or a fixed default, not both",
                d.name
            );
        }
    }
}
