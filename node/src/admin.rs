//! `ringlog topic ...`: admin commands that talk to a running node over the Kafka protocol
//! (CreateTopics, Metadata, DescribeConfigs, DeleteTopics), like `kafka-topics.sh`. A small
//! blocking client: these commands run outside any shard.

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
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
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;

pub struct AdminClient {
    stream: TcpStream,
    correlation_id: i32,
}

fn err(context: &str, e: impl std::fmt::Display) -> String {
    format!("{context}: {e}")
}

impl AdminClient {
    pub fn connect(bootstrap: &str) -> Result<AdminClient, String> {
        let stream = TcpStream::connect(bootstrap)
            .map_err(|e| err(&format!("connecting to {bootstrap}"), e))?;
        stream
            .set_read_timeout(Some(crate::limits::ADMIN_TIMEOUT))
            .map_err(|e| err("socket", e))?;
        Ok(AdminClient {
            stream,
            correlation_id: 0,
        })
    }

    pub(crate) fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, String> {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("ringlog-admin"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, api.request_header_version(version))
            .map_err(|e| err("encoding", e))?;
        req.encode(&mut buf, version)
            .map_err(|e| err("encoding", e))?;
        let mut frame = (buf.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&buf);
        self.stream
            .write_all(&frame)
            .map_err(|e| err("sending", e))?;
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| err("reading the response", e))?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| err("reading the response", e))?;
        let mut body = Bytes::from(body);
        ResponseHeader::decode(&mut body, api.response_header_version(version))
            .map_err(|e| err("decoding", e))?;
        Resp::decode(&mut body, version).map_err(|e| err("decoding", e))
    }

    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<(), String> {
        let mut t = CreatableTopic::default();
        t.name = TopicName(StrBytes::from_string(name.to_owned()));
        t.num_partitions = partitions;
        t.replication_factor = -1;
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
        req.timeout_ms = crate::limits::ADMIN_TIMEOUT.as_millis() as i32;
        let resp: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 5, &req)?;
        let r = resp.topics.first().ok_or("empty CreateTopics response")?;
        check(r.error_code, r.error_message.as_ref())
    }

    pub fn delete_topic(&mut self, name: &str) -> Result<(), String> {
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![TopicName(StrBytes::from_string(name.to_owned()))];
        req.timeout_ms = crate::limits::ADMIN_TIMEOUT.as_millis() as i32;
        let resp: DeleteTopicsResponse = self.call(ApiKey::DeleteTopics, 5, &req)?;
        let r = resp
            .responses
            .first()
            .ok_or("empty DeleteTopics response")?;
        check(r.error_code, r.error_message.as_ref())
    }

    /// Metadata of the given topics (`None`: all; an empty list: brokers only).
    pub fn metadata(&mut self, topics: Option<&[&str]>) -> Result<MetadataResponse, String> {
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

    pub fn topic_configs(&mut self, topic: &str) -> Result<Vec<(String, String)>, String> {
        let mut res = DescribeConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = StrBytes::from_string(topic.to_owned());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        let resp: DescribeConfigsResponse = self.call(ApiKey::DescribeConfigs, 1, &req)?;
        let r = resp
            .results
            .first()
            .ok_or("empty DescribeConfigs response")?;
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

pub(crate) fn check(code: i16, message: Option<&StrBytes>) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    let name = ResponseError::try_from_code(code)
        .map_or_else(|| format!("error {code}"), |e| format!("{e:?}"));
    Err(match message {
        Some(m) => format!("{name}: {m}"),
        None => name,
    })
}

/// `ringlog topic list`.
pub fn list(bootstrap: &str) -> Result<String, String> {
    let md = AdminClient::connect(bootstrap)?.metadata(None)?;
    let mut names: Vec<String> = md
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    Ok(names.join("\n"))
}

/// `ringlog topic describe NAME`.
pub fn describe(bootstrap: &str, topic: &str) -> Result<String, String> {
    let mut c = AdminClient::connect(bootstrap)?;
    let md = c.metadata(Some(&[topic]))?;
    let t = md.topics.first().ok_or("empty Metadata response")?;
    check(t.error_code, None).map_err(|e| format!("topic '{topic}': {e}"))?;
    let mut out = format!("Topic: {topic}\tPartitionCount: {}\n", t.partitions.len());
    for p in &t.partitions {
        out.push_str(&format!(
            "\tPartition: {}\tLeader: {}\tReplicas: {:?}\n",
            p.partition_index,
            p.leader_id.0,
            p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>()
        ));
    }
    for (k, v) in c.topic_configs(topic)? {
        out.push_str(&format!("\t{k}={v}\n"));
    }
    Ok(out.trim_end().to_owned())
}
