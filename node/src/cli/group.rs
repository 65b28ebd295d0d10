//! `ringlog group list|describe|reset-offsets`: consumer group administration over the Kafka
//! protocol against a running node, like `kafka-consumer-groups.sh` (ListGroups on every broker,
//! FindCoordinator + DescribeGroups + OffsetFetch + ListOffsets, OffsetCommit from outside the
//! group for resets).

use std::collections::BTreeMap;

use bytes::Buf;
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::admin_client::{check, AdminClient};
use super::CliError;

/// Where `reset-offsets` moves a group's offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    Offset(i64),
    /// The first offset at or after this timestamp (ms since the epoch).
    Timestamp(i64),
    ShiftBy(i64),
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Every broker endpoint of the node: `(broker id, host:port)`.
fn brokers(bootstrap: &str) -> Result<Vec<(i32, String)>, CliError> {
    let md = AdminClient::connect(bootstrap)?.metadata(Some(&[]))?;
    Ok(md
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect())
}

fn coordinator(bootstrap: &str, group: &str) -> Result<AdminClient, CliError> {
    let mut req = FindCoordinatorRequest::default();
    req.key = s(group);
    req.key_type = 0;
    let resp: FindCoordinatorResponse =
        AdminClient::connect(bootstrap)?.call(ApiKey::FindCoordinator, 3, &req)?;
    check(resp.error_code, resp.error_message.as_ref())
        .map_err(|e| e.context(format!("finding the coordinator of group '{group}'")))?;
    AdminClient::connect(&format!("{}:{}", resp.host, resp.port))
}

/// `ringlog group list`: every group of every broker of the node, with its state.
pub fn list(bootstrap: &str) -> Result<String, CliError> {
    let mut rows = Vec::new();
    for (_, addr) in brokers(bootstrap)? {
        let resp: ListGroupsResponse = AdminClient::connect(&addr)?.call(
            ApiKey::ListGroups,
            4,
            &ListGroupsRequest::default(),
        )?;
        check(resp.error_code, None)?;
        for g in resp.groups {
            rows.push((g.group_id.0.to_string(), g.group_state.to_string()));
        }
    }
    rows.sort();
    let mut out = format!("{:<40} STATE\n", "GROUP");
    for (g, st) in rows {
        out.push_str(&format!("{g:<40} {st}\n"));
    }
    Ok(out.trim_end().to_owned())
}

struct GroupView {
    state: String,
    /// topic → partition → (member id, host, client id)
    owners: BTreeMap<(String, i32), (String, String, String)>,
    members: usize,
    committed: BTreeMap<(String, i32), i64>,
}

fn view(c: &mut AdminClient, group: &str) -> Result<GroupView, CliError> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(group))];
    let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req)?;
    let g = resp
        .groups
        .first()
        .ok_or(CliError::Empty("DescribeGroups"))?;
    check(g.error_code, None).map_err(|e| e.context(format!("group '{group}'")))?;
    let mut owners = BTreeMap::new();
    for m in &g.members {
        let mut buf = m.member_assignment.clone();
        if g.protocol_type.as_str() != "consumer" || buf.remaining() < 2 {
            continue;
        }
        let version = buf.get_i16();
        let Ok(a) = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) else {
            continue;
        };
        for tp in a.assigned_partitions {
            for p in tp.partitions {
                owners.insert(
                    (tp.topic.0.to_string(), p),
                    (
                        m.member_id.to_string(),
                        m.client_host.to_string(),
                        m.client_id.to_string(),
                    ),
                );
            }
        }
    }
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(s(group));
    req.topics = None;
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req)?;
    check(resp.error_code, None).map_err(|e| e.context(format!("group '{group}'")))?;
    let mut committed = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.committed_offset >= 0 {
                committed.insert(
                    (t.name.0.to_string(), p.partition_index),
                    p.committed_offset,
                );
            }
        }
    }
    Ok(GroupView {
        state: g.group_state.to_string(),
        owners,
        members: g.members.len(),
        committed,
    })
}

/// `(earliest or latest by `timestamp`)` offsets of every partition of `topics`, asked of each
/// partition's leader: `(topic, partition) → offset`.
fn list_offsets(
    bootstrap: &str,
    topics: &[String],
    timestamp: i64,
) -> Result<BTreeMap<(String, i32), i64>, CliError> {
    let mut c = AdminClient::connect(bootstrap)?;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let md = c.metadata(Some(&names))?;
    let addrs: BTreeMap<i32, String> = md
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect();
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        check(t.error_code, None).map_err(|e| e.context(format!("topic '{name}'")))?;
        for p in &t.partitions {
            by_leader
                .entry(p.leader_id.0)
                .or_default()
                .push((name.clone(), p.partition_index));
        }
    }
    let mut out = BTreeMap::new();
    for (leader, parts) in by_leader {
        let addr = addrs
            .get(&leader)
            .ok_or_else(|| CliError::Protocol(format!("no address for broker {leader}")))?;
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        let mut topics: BTreeMap<String, ListOffsetsTopic> = BTreeMap::new();
        for (t, p) in parts {
            let lt = topics.entry(t.clone()).or_insert_with(|| {
                let mut lt = ListOffsetsTopic::default();
                lt.name = TopicName(s(&t));
                lt
            });
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = p;
            lp.current_leader_epoch = -1;
            lp.timestamp = timestamp;
            lt.partitions.push(lp);
        }
        req.topics = topics.into_values().collect();
        let resp: ListOffsetsResponse =
            AdminClient::connect(addr)?.call(ApiKey::ListOffsets, 4, &req)?;
        for t in resp.topics {
            for p in t.partitions {
                check(p.error_code, None)
                    .map_err(|e| e.context(format!("{}-{}", t.name.0, p.partition_index)))?;
                out.insert((t.name.0.to_string(), p.partition_index), p.offset);
            }
        }
    }
    Ok(out)
}

/// `ringlog group describe GROUP`: per partition the committed offset, log end offset, lag and
/// owner, like `kafka-consumer-groups --describe`.
pub fn describe(bootstrap: &str, group: &str) -> Result<String, CliError> {
    let mut c = coordinator(bootstrap, group)?;
    let v = view(&mut c, group)?;
    if v.state == "Dead" && v.committed.is_empty() {
        return Err(CliError::Refused(format!(
            "consumer group '{group}' does not exist"
        )));
    }
    let mut topics: Vec<String> = v
        .committed
        .keys()
        .chain(v.owners.keys())
        .map(|(t, _)| t.clone())
        .collect();
    topics.sort();
    topics.dedup();
    let ends = if topics.is_empty() {
        BTreeMap::new()
    } else {
        list_offsets(bootstrap, &topics, -1)?
    };
    let mut out = format!(
        "Group {group} is {} with {} member(s).\n\n{:<24} {:<24} {:>9} {:>14} {:>14} {:>8}  {:<40} {:<16} CLIENT-ID\n",
        v.state, v.members, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"
    );
    let mut keys: Vec<&(String, i32)> = v.committed.keys().chain(v.owners.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let current = v.committed.get(key).copied();
        let end = ends.get(key).copied();
        let lag = match (current, end) {
            (Some(c), Some(e)) => (e - c).max(0).to_string(),
            _ => "-".into(),
        };
        let (member, host, client) = v
            .owners
            .get(key)
            .cloned()
            .unwrap_or_else(|| ("-".into(), "-".into(), "-".into()));
        out.push_str(&format!(
            "{:<24} {:<24} {:>9} {:>14} {:>14} {:>8}  {:<40} {:<16} {}\n",
            group,
            key.0,
            key.1,
            current.map_or("-".into(), |c| c.to_string()),
            end.map_or("-".into(), |e| e.to_string()),
            lag,
            member,
            host,
            client
        ));
    }
    Ok(out.trim_end().to_owned())
}

/// `ringlog group reset-offsets`: computes the new offset of every partition of `topic` and,
/// with `execute`, commits them. Like Kafka, only a group without active members can be reset.
pub fn reset_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    to: &ResetTo,
    execute: bool,
) -> Result<String, CliError> {
    let mut c = coordinator(bootstrap, group)?;
    let v = view(&mut c, group)?;
    if v.state != "Empty" && v.state != "Dead" {
        return Err(CliError::Refused(format!(
            "group '{group}' is {} with {} member(s); offsets can only be reset while it has no active members (stop its consumers first)",
            v.state, v.members
        )));
    }
    let topics = vec![topic.to_owned()];
    let earliest = list_offsets(bootstrap, &topics, -2)?;
    let latest = list_offsets(bootstrap, &topics, -1)?;
    let mut plan = BTreeMap::new();
    for (key, &start) in &earliest {
        let end = latest.get(key).copied().unwrap_or(start);
        let target = match to {
            ResetTo::Earliest => start,
            ResetTo::Latest => end,
            ResetTo::Offset(o) => *o,
            ResetTo::ShiftBy(n) => v
                .committed
                .get(key)
                .copied()
                .unwrap_or(end)
                .saturating_add(*n),
            ResetTo::Timestamp(_) => -1,
        };
        plan.insert(key.clone(), (target, start, end));
    }
    if let ResetTo::Timestamp(ts) = to {
        for (key, off) in list_offsets(bootstrap, &topics, *ts)? {
            if let Some(entry) = plan.get_mut(&key) {
                // No record at or after the timestamp: the log end.
                entry.0 = if off < 0 { entry.2 } else { off };
            }
        }
    }
    let plan: BTreeMap<(String, i32), i64> = plan
        .into_iter()
        .map(|(k, (target, start, end))| (k, target.clamp(start, end)))
        .collect();
    let mut out = format!(
        "{:<24} {:<24} {:>9} {:>12}\n",
        "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"
    );
    for ((t, p), o) in &plan {
        out.push_str(&format!("{group:<24} {t:<24} {p:>9} {o:>12}\n"));
    }
    if !execute {
        out.push_str("\n(dry run: add --execute to commit these offsets)");
        return Ok(out);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = -1;
    let mut ct = OffsetCommitRequestTopic::default();
    ct.name = TopicName(s(topic));
    for ((_, p), o) in &plan {
        let mut cp = OffsetCommitRequestPartition::default();
        cp.partition_index = *p;
        cp.committed_offset = *o;
        cp.committed_leader_epoch = -1;
        cp.committed_metadata = Some(s(""));
        ct.partitions.push(cp);
    }
    req.topics = vec![ct];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req)?;
    for t in &resp.topics {
        for p in &t.partitions {
            check(p.error_code, None)
                .map_err(|e| e.context(format!("committing {}-{}", t.name.0, p.partition_index)))?;
        }
    }
    out.push_str("\nOffsets committed.");
    Ok(out)
}

/// Parses `--to-datetime` values: `YYYY-MM-DDTHH:MM:SS[.sss]` in UTC (Kafka's format, an
/// optional trailing `Z`) or epoch milliseconds.
pub fn parse_datetime(v: &str) -> Result<i64, CliError> {
    if let Ok(ms) = v.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || {
        CliError::Invalid(format!(
            "--to-datetime '{v}': expected YYYY-MM-DDTHH:MM:SS[.sss] (UTC) or epoch milliseconds"
        ))
    };
    let t = v.trim_end_matches('Z');
    let (date, time) = t.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (hms, millis) = time.split_once('.').unwrap_or((time, "0"));
    let h: Vec<i64> = hms
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let ms: i64 = format!("{millis:0<3}")[..3].parse().map_err(|_| bad())?;
    let (&[y, mo, day], &[hh, mm, ss]) = (&d[..], &h[..]) else {
        return Err(bad());
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::parse_datetime;

    #[test]
    fn datetimes_parse_as_utc() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00").unwrap(), 0);
        assert_eq!(
            parse_datetime("2026-11-29T10:00:00.5Z").unwrap(),
            1_795_946_400_500
        );
        assert_eq!(parse_datetime("1234").unwrap(), 1234);
        assert!(parse_datetime("2026-13-01T00:00:00").is_err());
        assert!(parse_datetime("yesterday")
            .unwrap_err()
            .to_string()
            .contains("yesterday"));
    }
}
