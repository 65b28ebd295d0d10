//! Online migration between the classic and the consumer group protocols, the coordinator's
//! side (Kafka's `group.consumer.migration.policy`): classic JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup answered by a consumer group, and a consumer group turned back into a classic
//! group when only classic members would be left. (A classic group becomes a consumer group in
//! `consumer_ops::consumer_heartbeat`, when a consumer-protocol member joins it.)

use kafka_protocol::ResponseError;

use super::consumer::classic::{ClassicJoined, PROTOCOL_TYPE};
use super::consumer::TopicIndex;
use super::consumer_ops::{encode, settings};
use super::coordinator::Coordinator;
use super::host::Host;
use super::membership::{Caller, JoinRequest, JoinResult};
use super::persist::append;
use super::records::RecordKey;

impl Coordinator {
    /// Whether `group` is a consumer group with members (classic requests go to it then).
    pub(super) fn consumer_with_members(&self, group: &str) -> bool {
        self.groups
            .borrow()
            .get(group)
            .and_then(|g| g.consumer.as_ref())
            .is_some_and(|c| !c.members.is_empty())
    }

    /// JoinGroup of a classic member to a consumer group with members: it becomes a member of
    /// it, assigned by the group's server-side assignor; never the leader.
    pub(super) async fn classic_join_consumer(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        req: JoinRequest,
        now: i64,
    ) -> JoinResult {
        let snapshot = host.snapshot();
        let topics = self.topic_index.of(&snapshot);
        let s = settings(host, &snapshot, group);
        let member_id = req.member_id.clone();
        let out = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(group) else {
                return JoinResult::error(ResponseError::UnknownMemberId, member_id);
            };
            let Some(c) = g.consumer.as_mut() else {
                return JoinResult::error(ResponseError::UnknownMemberId, member_id);
            };
            let out = c.classic_join(req, &topics, &s, now);
            g.note_consumer_emptiness(now);
            out
        };
        match out {
            Err(e) => JoinResult::error(e, member_id),
            Ok(ClassicJoined::MemberIdRequired(id)) => {
                JoinResult::error(ResponseError::MemberIdRequired, id)
            }
            Ok(ClassicJoined::Joined {
                member_id,
                generation,
                protocol,
                records,
            }) => {
                if let Err(e) = self.write_consumer(host, p, group, &records, now).await {
                    return JoinResult::error(e, member_id);
                }
                tracing::info!(group, member = %member_id, epoch = generation, "classic member joined the consumer group");
                JoinResult {
                    error: None,
                    generation,
                    protocol_type: Some(PROTOCOL_TYPE.to_owned()),
                    protocol: Some(protocol),
                    leader: String::new(),
                    member_id,
                    members: Vec::new(),
                }
            }
        }
    }

    /// SyncGroup of a classic member of a consumer group: its partitions.
    pub(super) fn classic_sync_consumer(
        &self,
        host: &dyn Host,
        group: &str,
        who: Caller<'_>,
        protocol: (Option<&str>, Option<&str>),
        now: i64,
    ) -> Result<bytes::Bytes, ResponseError> {
        let topics = self.topic_index.of(&host.snapshot());
        let mut groups = self.groups.borrow_mut();
        let c = groups
            .get_mut(group)
            .and_then(|g| g.consumer.as_mut())
            .ok_or(ResponseError::UnknownMemberId)?;
        c.classic_sync(
            who.member_id,
            who.instance_id,
            who.generation,
            protocol.0,
            protocol.1,
            &topics,
            now,
        )
    }

    /// Heartbeat of a classic member of a consumer group.
    pub(super) fn classic_heartbeat_consumer(
        &self,
        group: &str,
        who: Caller<'_>,
        now: i64,
    ) -> Result<(), ResponseError> {
        let mut groups = self.groups.borrow_mut();
        let c = groups
            .get_mut(group)
            .and_then(|g| g.consumer.as_mut())
            .ok_or(ResponseError::UnknownMemberId)?;
        c.classic_heartbeat(who.member_id, who.instance_id, who.generation, now)
    }

    /// LeaveGroup of classic members of a consumer group.
    pub(super) async fn classic_leave_consumer(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let snapshot = host.snapshot();
        let topics = self.topic_index.of(&snapshot);
        let s = settings(host, &snapshot, group);
        let (results, records) = {
            let mut groups = self.groups.borrow_mut();
            let g = groups
                .get_mut(group)
                .ok_or(ResponseError::UnknownMemberId)?;
            let c = g.consumer.as_mut().ok_or(ResponseError::UnknownMemberId)?;
            let out = c.classic_leave(members, &topics, &s, now);
            g.note_consumer_emptiness(now);
            out
        };
        self.write_consumer(host, p, group, &records, now).await?;
        for id in results.iter().flatten() {
            tracing::info!(group, member = %id, "classic member left the consumer group");
        }
        Ok(results.into_iter().map(|r| r.map(|_| ())).collect())
    }

    /// The consumer group becomes a classic group without `leaving` (fenced, or it left):
    /// tombstones for its records and the classic group's metadata in one write, then a
    /// rebalance in which the classic members rejoin.
    pub(super) async fn downgrade(
        &self,
        host: &dyn Host,
        p: i32,
        group: &str,
        leaving: &str,
        topics: &TopicIndex,
        now: i64,
    ) -> Result<(), ResponseError> {
        let keys = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(group) else {
                return Ok(());
            };
            let Some(c) = g.consumer.as_ref() else {
                return Ok(());
            };
            let image = c.classic_image(leaving);
            let mut keys = encode(group, &c.tombstones());
            g.become_classic(image, topics, Self::limits(host), now);
            g.take_dirty();
            let value = g.to_record().encode();
            keys.push((RecordKey::Group(group.to_owned()).encode(), Some(value)));
            keys
        };
        tracing::info!(
            group,
            member = leaving,
            "consumer group turned classic: its last consumer-protocol member left"
        );
        if let Err(e) = append(host, p, keys, now).await {
            self.reload_group(host, p, group, now).await;
            return Err(e);
        }
        Ok(())
    }
}
