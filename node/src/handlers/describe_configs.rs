//! DescribeConfigs for topics (their overrides over the broker defaults) and brokers.

use std::rc::Rc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// Kafka's config sources.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

fn entry(name: &str, value: String, source: i8) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = StrBytes::from_string(name.to_owned());
    e.value = Some(StrBytes::from_string(value));
    e.config_source = source;
    e.read_only = source != DYNAMIC_TOPIC_CONFIG;
    e
}

pub fn handle(
    ctx: &Rc<ShardCtx>,
    req: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let mut configs = match res.resource_type {
            TOPIC => match ctx.snapshot.borrow().topics.get(&name) {
                Some(t) => topic_configs(ctx, &t.configs),
                None => {
                    r.error_code = ResponseError::UnknownTopicOrPartition.code();
                    Vec::new()
                }
            },
            BROKER => crate::config::PROPERTIES
                .iter()
                .map(|(k, v)| entry(k, (*v).to_owned(), DEFAULT_CONFIG))
                .collect(),
            other => {
                r.error_code = ResponseError::InvalidRequest.code();
                r.error_message = Some(StrBytes::from_string(format!(
                    "resource type {other} is not supported"
                )));
                Vec::new()
            }
        };
        // Null or empty: every config.
        if let Some(keys) = res.configuration_keys.as_ref().filter(|k| !k.is_empty()) {
            configs.retain(|c| keys.contains(&c.name));
        }
        r.configs = configs;
        resp.results.push(r);
    }
    resp
}

fn topic_configs(
    ctx: &ShardCtx,
    overrides: &std::collections::BTreeMap<String, String>,
) -> Vec<DescribeConfigsResourceResult> {
    let log = &ctx.config.log;
    let none = |v: Option<i64>| v.map_or("-1".to_owned(), |v| v.to_string());
    let defaults = [
        ("cleanup.policy", "delete".to_owned()),
        ("segment.bytes", log.segment_bytes.to_string()),
        ("segment.ms", log.segment_ms.to_string()),
        ("retention.ms", none(log.retention_ms)),
        (
            "retention.bytes",
            none(log.retention_bytes.map(|v| v as i64)),
        ),
        ("flush.messages", none(log.flush_messages.map(|v| v as i64))),
        ("flush.ms", none(log.flush_ms)),
        ("index.interval.bytes", log.index_interval_bytes.to_string()),
        (
            "max.message.bytes",
            ctx.config.message_max_bytes.to_string(),
        ),
        (
            "min.insync.replicas",
            ctx.config.min_insync_replicas.to_string(),
        ),
        ("unclean.leader.election.enable", "false".to_owned()),
    ];
    defaults
        .into_iter()
        .map(|(k, v)| match overrides.get(k) {
            Some(o) => entry(k, o.clone(), DYNAMIC_TOPIC_CONFIG),
            None => entry(k, v, DEFAULT_CONFIG),
        })
        .collect()
}
