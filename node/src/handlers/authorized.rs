//! Authorization of requests: whether a connection's principal may do an operation on a
//! resource (Kafka's StandardAuthorizer rules, `security/acl.rs`), and the authorized
//! operations Metadata, DescribeCluster and DescribeTopicPartitions report as bit sets of
//! Kafka's ACL operations. Without an authorizer everyone may do everything, as in Kafka.
//!
//! Decisions are cached per connection until the metadata changes, so the data path (Produce,
//! Fetch) pays one hash lookup per topic and request.

use crate::handlers::client::Client;
use crate::security::acl::{self, operations_of, Operation, Requester, ResourceType};
use crate::shard::ShardCtx;

/// Kafka's "authorized operations not computed" (the client did not ask).
pub const NOT_COMPUTED: i32 = i32::MIN;

/// The address ACLs name a client by: its IP, without Kafka's "/" in front.
fn host(client: &Client) -> &str {
    client.host.strip_prefix('/').unwrap_or(&client.host)
}

/// Whether the connection may do `op` on resource `name` of type `resource`.
pub fn authorized(
    ctx: &ShardCtx,
    client: &Client,
    op: Operation,
    resource: ResourceType,
    name: &str,
) -> bool {
    let Some(settings) = &ctx.config().security.authorizer else {
        return true;
    };
    let snapshot = ctx.snapshot();
    let d = &client.decisions;
    if d.version.get() != snapshot.version {
        d.cache.borrow_mut().clear();
        d.version.set(snapshot.version);
    }
    let cached = d
        .cache
        .borrow()
        .get(&(op, resource))
        .and_then(|names| names.get(name).copied());
    if let Some(allowed) = cached {
        return allowed;
    }
    let who = Requester {
        principal: &client.principal,
        host: host(client),
    };
    let allowed = acl::authorize(&snapshot.acls, settings, who, op, resource, name);
    if !allowed {
        tracing::debug!(principal = %client.principal, host = who.host, ?op, ?resource, name, "not authorized");
    }
    d.cache
        .borrow_mut()
        .entry((op, resource))
        .or_default()
        .insert(name.to_owned(), allowed);
    allowed
}

/// Whether the connection may do `op` on the cluster.
pub fn on_cluster(ctx: &ShardCtx, client: &Client, op: Operation) -> bool {
    authorized(ctx, client, op, ResourceType::Cluster, acl::CLUSTER_NAME)
}

/// Whether the connection may do `op` on some resource of type `resource` (idempotent
/// producers: WRITE on any topic).
pub fn on_some(ctx: &ShardCtx, client: &Client, op: Operation, resource: ResourceType) -> bool {
    let Some(settings) = &ctx.config().security.authorizer else {
        return true;
    };
    let who = Requester {
        principal: &client.principal,
        host: host(client),
    };
    acl::allowed_on_some(&ctx.snapshot().acls, settings, who, op, resource)
}

/// The operations the connection may do on a resource, as Kafka's bit set.
pub fn operations(ctx: &ShardCtx, client: &Client, resource: ResourceType, name: &str) -> i32 {
    operations_of(resource)
        .iter()
        .filter(|&&op| authorized(ctx, client, op, resource, name))
        .fold(0, |bits, &op| bits | (1 << op as i32))
}

/// What to report when a client asks (`asked`) or not.
pub fn report(asked: bool, bits: impl FnOnce() -> i32) -> i32 {
    if asked {
        bits()
    } else {
        NOT_COMPUTED
    }
}

/// Whether the connection may do `op` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource
/// of Kafka's type code `kind` (2 topic, 4 broker, 8 broker logger, 32 group): the error to
/// answer if not. Other types are left to the handler.
pub fn on_config_resource(
    ctx: &ShardCtx,
    client: &Client,
    op: Operation,
    (kind, name): (i8, &str),
) -> Result<(), kafka_protocol::ResponseError> {
    use kafka_protocol::ResponseError;
    let (allowed, error) = match kind {
        2 => (
            authorized(ctx, client, op, ResourceType::Topic, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        4 | 8 => (
            on_cluster(ctx, client, op),
            ResponseError::ClusterAuthorizationFailed,
        ),
        32 => (
            authorized(ctx, client, op, ResourceType::Group, name),
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => (true, ResponseError::UnknownServerError),
    };
    if allowed {
        Ok(())
    } else {
        Err(error)
    }
}
