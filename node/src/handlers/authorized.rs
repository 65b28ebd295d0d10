//! Authorized operations as Metadata, DescribeCluster and DescribeTopicPartitions report them:
//! bit sets of Kafka's ACL operations. ringlog has no authorizer yet (issue 14), so, as Kafka
//! without one, every operation a resource type supports is allowed.

/// Kafka's "authorized operations not computed" (the client did not ask).
pub const NOT_COMPUTED: i32 = i32::MIN;

/// A topic's operations: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
/// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
pub const ALL_TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// The cluster's operations: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
/// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
pub const ALL_CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// What to report when a client asks (`asked`) or not.
pub fn report(asked: bool, all: i32) -> i32 {
    if asked {
        all
    } else {
        NOT_COMPUTED
    }
}
