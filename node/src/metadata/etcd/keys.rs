//! The key layout under `/ringlog/<cluster.id>/`.

use crate::ids::NodeId;

/// Key names for one cluster.
#[derive(Debug, Clone)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(cluster_id: &str) -> Keys {
        Keys {
            root: format!("/ringlog/{cluster_id}/"),
        }
    }

    /// Every key of the cluster (a prefix).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The prefix of the broker registrations.
    pub fn brokers(&self) -> String {
        format!("{}brokers/", self.root)
    }

    /// A broker's registration, under its lease.
    pub fn broker(&self, node: NodeId) -> String {
        format!("{}brokers/{node}", self.root)
    }

    /// The controller election's name (etcd's election API keys candidates under it).
    pub fn controller_election(&self) -> String {
        format!("{}controller", self.root)
    }

    /// The prefix of the topics.
    pub fn topics(&self) -> String {
        format!("{}topics/", self.root)
    }

    /// A topic: its id, partitions (where each is led) and configs.
    pub fn topic(&self, name: &str) -> String {
        format!("{}topics/{name}", self.root)
    }

    /// Parses a topic key back into the topic's name.
    pub fn topic_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("topics/")
    }

    /// A user's SCRAM credentials (salted keys, never a password).
    pub fn scram(&self, user: &str) -> String {
        format!("{}scram/{user}", self.root)
    }

    /// Parses a SCRAM credentials key back into the user.
    pub fn scram_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("scram/")
    }

    /// The ACL entries of one resource pattern (`TYPE/PATTERN/name`).
    pub fn acls(&self, pattern: &str) -> String {
        format!("{}acls/{pattern}", self.root)
    }

    /// Parses an ACL key back into its resource pattern.
    pub fn acls_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("acls/")
    }

    /// A broker's dynamic configs (`default`: the cluster-wide defaults, Kafka's
    /// `--entity-default`).
    pub fn broker_configs(&self, broker: &str) -> String {
        format!("{}broker-configs/{broker}", self.root)
    }

    /// Parses a broker configs key back into its broker (or `default`).
    pub fn broker_configs_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?
            .strip_prefix("broker-configs/")
    }

    /// An entity's client quotas (AlterClientQuotas), by its storage key.
    pub fn client_quotas(&self, entity: &str) -> String {
        format!("{}client-quotas/{entity}", self.root)
    }

    /// Parses a client quotas key back into the entity's storage key.
    pub fn client_quotas_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("client-quotas/")
    }

    /// A group's configs (IncrementalAlterConfigs on a GROUP resource).
    pub fn group_configs(&self, group: &str) -> String {
        format!("{}group-configs/{group}", self.root)
    }

    /// Parses a group configs key back into the group id.
    pub fn group_configs_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("group-configs/")
    }

    /// A finalized feature's level (UpdateFeatures).
    pub fn feature(&self, name: &str) -> String {
        format!("{}features/{name}", self.root)
    }

    /// Parses a feature key back into the feature's name.
    pub fn feature_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.root)?.strip_prefix("features/")
    }

    /// Whether `key` is a controller candidacy (etcd's election API puts one key per candidate
    /// under the election's name; the oldest is the leader).
    pub fn is_controller_candidacy(&self, key: &str) -> bool {
        key.strip_prefix(&self.controller_election())
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// A partition's replication state.
    pub fn partition(&self, topic: &str, partition: i32) -> String {
        format!("{}partitions/{topic}/{partition}", self.root)
    }

    /// Parses a broker registration key back into its node id.
    pub fn broker_of(&self, key: &str) -> Option<NodeId> {
        key.strip_prefix(&self.brokers())?.parse().ok()
    }

    /// Parses a partition key back into `(topic, partition)`.
    pub fn partition_of<'a>(&self, key: &'a str) -> Option<(&'a str, i32)> {
        let rest = key.strip_prefix(&self.root)?.strip_prefix("partitions/")?;
        let (topic, p) = rest.rsplit_once('/')?;
        Some((topic, p.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let k = Keys::new("c1");
        assert_eq!(k.broker(NodeId(3)), "/ringlog/c1/brokers/3");
        assert_eq!(k.broker_of(&k.broker(NodeId(3))), Some(NodeId(3)));
        assert_eq!(k.broker_of("/ringlog/c2/brokers/3"), None);
        assert_eq!(k.partition_of(&k.partition("a/b", 7)), Some(("a/b", 7)));
        assert_eq!(k.partition_of(&k.broker(NodeId(1))), None);
        assert_eq!(k.scram_of(&k.scram("a/b=c")), Some("a/b=c"));
        assert_eq!(k.scram_of(&k.topic("t")), None);
    }
}
