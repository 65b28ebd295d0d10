//! The admin commands' Kafka client: `kafka_client`'s blocking connection with the admin
//! timeout and the security `--command-config` gives (TLS, SASL), and the few requests the
//! `topic` and `group` commands share.

use std::path::Path;
use std::sync::OnceLock;

use kafka_client::blocking::{ConnectOptions, Connection};
use kafka_client::security::{load_properties, ClientSecurity};
use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::CliError;
use crate::limits::ADMIN_TIMEOUT;

const OPTIONS: ConnectOptions = ConnectOptions {
    client_id: "ringlog-admin",
    read_timeout: Some(ADMIN_TIMEOUT),
};

/// How every connection of this process authenticates: one command, one `--command-config`.
static SECURITY: OnceLock<ClientSecurity> = OnceLock::new();

/// Reads `--command-config` (a Kafka client properties file) before the command connects;
/// without one, connections are PLAINTEXT.
pub fn configure(command_config: Option<&Path>) -> Result<(), CliError> {
    let security = match command_config {
        None => ClientSecurity::plaintext(),
        Some(path) => load_properties(path)
            .and_then(|props| ClientSecurity::from_properties(&props))
            .map_err(|e| CliError::Invalid(format!("--command-config {}: {e}", path.display())))?,
    };
    SECURITY
        .set(security)
        .map_err(|_| CliError::Invalid("the admin client is configured once".into()))
}

pub struct AdminClient {
    connection: Connection,
}

impl AdminClient {
    pub fn connect(bootstrap: &str) -> Result<AdminClient, CliError> {
        let security = SECURITY.get_or_init(ClientSecurity::plaintext);
        Ok(AdminClient {
            connection: Connection::connect(bootstrap, OPTIONS, security)?,
        })
    }

    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, CliError> {
        Ok(self.connection.call(api, version, req)?)
    }

    pub fn create_topic(
        &mut self,
        name: &str,
        (partitions, replication_factor): (i32, i16),
        configs: &[(String, String)],
    ) -> Result<(), CliError> {
        let mut t = CreatableTopic::default();
        t.name = TopicName(StrBytes::from_string(name.to_owned()));
        t.num_partitions = partitions;
        t.replication_factor = replication_factor;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.clone());
                c.value = Some(StrBytes::from_string(v.clone()));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = ADMIN_TIMEOUT.as_millis() as i32;
        let resp: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 5, &req)?;
        let r = resp.topics.first().ok_or(CliError::Empty("CreateTopics"))?;
        check(r.error_code, r.error_message.as_ref())
    }

    pub fn delete_topic(&mut self, name: &str) -> Result<(), CliError> {
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![TopicName(StrBytes::from_string(name.to_owned()))];
        req.timeout_ms = ADMIN_TIMEOUT.as_millis() as i32;
        let resp: DeleteTopicsResponse = self.call(ApiKey::DeleteTopics, 5, &req)?;
        let r = resp
            .responses
            .first()
            .ok_or(CliError::Empty("DeleteTopics"))?;
        check(r.error_code, r.error_message.as_ref())
    }

    /// Metadata of the given topics (`None`: all; an empty list: brokers only).
    pub fn metadata(&mut self, topics: Option<&[&str]>) -> Result<MetadataResponse, CliError> {
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut mt = MetadataRequestTopic::default();
                    mt.name = Some(TopicName(StrBytes::from_string((*t).to_owned())));
                    mt
                })
                .collect()
        });
        req.allow_auto_topic_creation = false;
        self.call(ApiKey::Metadata, 9, &req)
    }

    pub fn topic_configs(&mut self, topic: &str) -> Result<Vec<(String, String)>, CliError> {
        let mut res = DescribeConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = StrBytes::from_string(topic.to_owned());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        let resp: DescribeConfigsResponse = self.call(ApiKey::DescribeConfigs, 1, &req)?;
        let r = resp
            .results
            .first()
            .ok_or(CliError::Empty("DescribeConfigs"))?;
        check(r.error_code, r.error_message.as_ref())?;
        Ok(r.configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                )
            })
            .collect())
    }
}

/// A Kafka error code from a response as a [`CliError`] naming the error.
pub fn check(code: i16, message: Option<&StrBytes>) -> Result<(), CliError> {
    if code == 0 {
        return Ok(());
    }
    let name = ResponseError::try_from_code(code)
        .map_or_else(|| format!("error {code}"), |e| format!("{e:?}"));
    Err(CliError::Refused(match message {
        Some(m) => format!("{name}: {m}"),
        None => name,
    }))
}
