//! Kafka's ACL model and the decisions of its StandardAuthorizer: bindings of a resource
//! pattern (type, LITERAL or PREFIXED name) to entries (principal, host, operation, ALLOW or
//! DENY); DENY wins; DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by
//! ALTER_CONFIGS; super users may do everything; a resource no binding matches is open only with
//! `allow.everyone.if.no.acl.found`. Pure: the bindings live in the cluster metadata.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Kafka's resource types (`AclResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn from_code(code: i8) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| *t as i8 == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Topic => "TOPIC",
            ResourceType::Group => "GROUP",
            ResourceType::Cluster => "CLUSTER",
            ResourceType::TransactionalId => "TRANSACTIONAL_ID",
            ResourceType::DelegationToken => "DELEGATION_TOKEN",
            ResourceType::User => "USER",
        }
    }

    fn parse(name: &str) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Kafka's pattern types of a binding (`PatternType`): LITERAL 3, PREFIXED 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternType {
    Literal = 3,
    Prefixed = 4,
}

impl PatternType {
    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PatternType::Literal => "LITERAL",
            PatternType::Prefixed => "PREFIXED",
        }
    }
}

/// Kafka's ACL operations (`AclOperation`), without UNKNOWN and ANY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

impl Operation {
    pub const ALL_OPS: [Operation; 14] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
        Operation::TwoPhaseCommit,
    ];

    pub fn from_code(code: i8) -> Option<Operation> {
        Operation::ALL_OPS.into_iter().find(|o| *o as i8 == code)
    }

    /// Whether an entry for `self` grants `asked`: the operation itself, ALL, and Kafka's
    /// implications (DESCRIBE by READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS).
    fn allows(self, asked: Operation) -> bool {
        self == asked
            || self == Operation::All
            || (asked == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ))
            || (asked == Operation::DescribeConfigs && self == Operation::AlterConfigs)
    }

    /// Whether a DENY entry for `self` denies `asked` (no implications).
    fn denies(self, asked: Operation) -> bool {
        self == asked || self == Operation::All
    }
}

/// ALLOW or DENY (Kafka's `AclPermissionType` 3 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    Deny = 2,
    Allow = 3,
}

impl Permission {
    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// A resource pattern: what a binding applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pattern {
    pub resource: ResourceType,
    pub pattern: PatternType,
    pub name: String,
}

/// The name every literal pattern of a type may use to mean all resources of it.
pub const WILDCARD: &str = "*";
/// The one cluster resource's name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

impl Pattern {
    /// The metadata key of the pattern's entries: `TYPE/PATTERN/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}",
            self.resource.name(),
            self.pattern.name(),
            self.name
        )
    }

    pub fn from_key(key: &str) -> Option<Pattern> {
        let mut parts = key.splitn(3, '/');
        let resource = ResourceType::parse(parts.next()?)?;
        let pattern = match parts.next()? {
            "LITERAL" => PatternType::Literal,
            "PREFIXED" => PatternType::Prefixed,
            _ => return None,
        };
        Some(Pattern {
            resource,
            pattern,
            name: parts.next()?.to_owned(),
        })
    }

    /// Whether the pattern applies to resource `name` of its type.
    pub fn matches(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.name == name || self.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.name),
        }
    }
}

/// Who may (not) do what, from where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entry {
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl Entry {
    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == "User:*")
            && (self.host == host || self.host == WILDCARD)
    }
}

/// Every binding, by pattern key (the cluster metadata's form).
pub type Acls = BTreeMap<String, BTreeSet<Entry>>;

/// A request's filter (DescribeAcls, DeleteAcls): `None` fields match anything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub resource: Option<ResourceType>,
    pub name: Option<String>,
    /// `None`: ANY; `Some(None)`: MATCH (the patterns that apply to `name`).
    pub pattern: Option<Option<PatternType>>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl Filter {
    /// Whether the binding (`pattern`, `entry`) passes the filter.
    pub fn matches(&self, pattern: &Pattern, entry: &Entry) -> bool {
        let resource_ok = self.resource.is_none_or(|r| r == pattern.resource);
        let pattern_ok = match (&self.pattern, &self.name) {
            (None, None) => true,
            (None, Some(n)) => pattern.name == *n,
            (Some(Some(p)), None) => pattern.pattern == *p,
            (Some(Some(p)), Some(n)) => pattern.pattern == *p && pattern.name == *n,
            // MATCH: every pattern that applies to the named resource.
            (Some(None), Some(n)) => pattern.matches(n),
            (Some(None), None) => true,
        };
        resource_ok
            && pattern_ok
            && self
                .principal
                .as_ref()
                .is_none_or(|p| *p == entry.principal)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
            && self.operation.is_none_or(|o| o == entry.operation)
            && self.permission.is_none_or(|p| p == entry.permission)
    }
}

/// Who asks: principal and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// The authorizer's settings (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default)]
pub struct AuthorizerSettings {
    pub super_users: BTreeSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// The patterns that may apply to resource `name` of type `resource`: its literal name, the
/// literal wildcard and each prefix.
fn candidate_keys(resource: ResourceType, name: &str) -> Vec<String> {
    let mut keys = Vec::with_capacity(name.len() + 3);
    for literal in [name, WILDCARD] {
        keys.push(
            Pattern {
                resource,
                pattern: PatternType::Literal,
                name: literal.to_owned(),
            }
            .key(),
        );
    }
    for (i, _) in name.char_indices().skip(1).chain([(name.len(), ' ')]) {
        keys.push(
            Pattern {
                resource,
                pattern: PatternType::Prefixed,
                name: name[..i].to_owned(),
            }
            .key(),
        );
    }
    keys
}

/// Whether `who` may do `op` on resource `name` of type `resource`.
pub fn authorize(
    acls: &Acls,
    settings: &AuthorizerSettings,
    who: Requester<'_>,
    op: Operation,
    resource: ResourceType,
    name: &str,
) -> bool {
    if settings.super_users.contains(who.principal) {
        return true;
    }
    let mut any = false;
    let mut allowed = false;
    for key in candidate_keys(resource, name) {
        let Some(entries) = acls.get(&key) else {
            continue;
        };
        any |= !entries.is_empty();
        for e in entries
            .iter()
            .filter(|e| e.applies_to(who.principal, who.host))
        {
            match e.permission {
                Permission::Deny if e.operation.denies(op) => return false,
                Permission::Allow if e.operation.allows(op) => allowed = true,
                _ => {}
            }
        }
    }
    if !any {
        return settings.allow_everyone_if_no_acl_found;
    }
    allowed
}

/// Whether `who` is allowed `op` on some resource of type `resource`: Kafka's
/// `authorizeByResourceType` (idempotent producers: WRITE on any topic stands for
/// IDEMPOTENT_WRITE), by its rules. First as for a resource named `hardcode` (so super users, and
/// `allow.everyone.if.no.acl.found` where nothing names it, pass); then, over the bindings of
/// that type for `who`'s principal (or `User:*`) and host (or `*`) whose operation is `op` itself
/// or ALL (no implied operations): a DENY on the literal `*` refuses; an ALLOW on the literal `*`
/// allows; otherwise some other ALLOW must survive the DENYs — a literal one not denied by the
/// same literal, neither kind with a PREFIXED DENY on any prefix of its name (the whole name
/// included).
pub fn allowed_on_some(
    acls: &Acls,
    settings: &AuthorizerSettings,
    who: Requester<'_>,
    op: Operation,
    resource: ResourceType,
) -> bool {
    if authorize(acls, settings, who, op, resource, "hardcode") {
        return true;
    }
    let mut denied_literal = BTreeSet::new();
    let mut denied_prefix = BTreeSet::new();
    let mut allowed = Vec::new();
    let mut wildcard_allowed = false;
    for (key, entries) in acls {
        let Some(p) = Pattern::from_key(key) else {
            continue;
        };
        if p.resource != resource {
            continue;
        }
        for e in entries.iter().filter(|e| {
            e.applies_to(who.principal, who.host)
                && (e.operation == op || e.operation == Operation::All)
        }) {
            match (e.permission, p.pattern) {
                (Permission::Deny, PatternType::Literal) if p.name == WILDCARD => return false,
                (Permission::Deny, PatternType::Literal) => {
                    denied_literal.insert(p.name.clone());
                }
                (Permission::Deny, PatternType::Prefixed) => {
                    denied_prefix.insert(p.name.clone());
                }
                (Permission::Allow, PatternType::Literal) if p.name == WILDCARD => {
                    wildcard_allowed = true
                }
                (Permission::Allow, pattern) => allowed.push((pattern, p.name.clone())),
            }
        }
    }
    wildcard_allowed
        || allowed.iter().any(|(pattern, name)| {
            let literal_denied = *pattern == PatternType::Literal && denied_literal.contains(name);
            let prefix_denied = name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| denied_prefix.contains(prefix));
            !literal_denied && !prefix_denied
        })
}

/// Kafka's operations of a resource type (the bits of authorized operations in Metadata and
/// DescribeCluster).
pub fn operations_of(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => &[
            Create,
            Alter,
            Describe,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ],
        ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acls(bindings: &[(&str, &str, Operation, Permission, &str)]) -> Acls {
        let mut out = Acls::new();
        for &(key, principal, operation, permission, host) in bindings {
            out.entry(key.to_owned()).or_default().insert(Entry {
                principal: principal.into(),
                host: host.into(),
                operation,
                permission,
            });
        }
        out
    }

    const ALICE: Requester = Requester {
        principal: "User:alice",
        host: "127.0.0.1",
    };

    #[test]
    fn deny_wins_and_implications_hold() {
        use Operation::*;
        use Permission::*;
        let a = acls(&[
            ("TOPIC/PREFIXED/orders-", "User:alice", Read, Allow, "*"),
            ("TOPIC/LITERAL/orders-secret", "User:alice", All, Deny, "*"),
            ("TOPIC/LITERAL/*", "User:*", Describe, Allow, "10.0.0.1"),
            ("GROUP/LITERAL/g1", "User:alice", Read, Allow, "127.0.0.1"),
        ]);
        let s = AuthorizerSettings::default();
        let t = ResourceType::Topic;
        assert!(authorize(&a, &s, ALICE, Read, t, "orders-eu"));
        assert!(
            authorize(&a, &s, ALICE, Describe, t, "orders-eu"),
            "READ implies DESCRIBE"
        );
        assert!(!authorize(&a, &s, ALICE, Write, t, "orders-eu"));
        assert!(
            !authorize(&a, &s, ALICE, Read, t, "orders-secret"),
            "DENY wins"
        );
        assert!(
            !authorize(&a, &s, ALICE, Read, t, "orders"),
            "a prefix is not the name"
        );
        // the wildcard binding exists (for another host): the topic has ACLs, none for alice
        assert!(!authorize(&a, &s, ALICE, Describe, t, "payments"));
        let other = Requester {
            principal: "User:bob",
            host: "10.0.0.1",
        };
        assert!(authorize(&a, &s, other, Describe, t, "payments"));
        assert!(authorize(&a, &s, ALICE, Read, ResourceType::Group, "g1"));
        assert!(!authorize(&a, &s, ALICE, Delete, ResourceType::Group, "g1"));
        // no binding for the resource at all: allow.everyone.if.no.acl.found decides
        assert!(!authorize(&a, &s, ALICE, Read, ResourceType::Group, "g2"));
        let open = AuthorizerSettings {
            allow_everyone_if_no_acl_found: true,
            ..Default::default()
        };
        assert!(authorize(&a, &open, ALICE, Read, ResourceType::Group, "g2"));
        let sup = AuthorizerSettings {
            super_users: ["User:alice".to_owned()].into(),
            ..Default::default()
        };
        assert!(authorize(&a, &sup, ALICE, Read, t, "orders-secret"));
        assert!(allowed_on_some(&a, &s, ALICE, Read, t));
        assert!(!allowed_on_some(&a, &s, ALICE, Write, t));
    }

    /// Kafka's `authorizeByResourceType` cases (AuthorizerTest's by-resource-type tests).
    #[test]
    fn allowed_on_some_follows_kafkas_rules() {
        use Operation::*;
        use Permission::*;
        let t = ResourceType::Topic;
        let s = AuthorizerSettings::default();
        let check = |bindings: &[(&str, &str, Operation, Permission, &str)]| {
            allowed_on_some(&acls(bindings), &s, ALICE, Write, t)
        };
        assert!(!check(&[]), "no ACL, allow.everyone.if.no.acl.found=false");
        assert!(check(&[(
            "TOPIC/LITERAL/t1",
            "User:alice",
            Write,
            Allow,
            "*"
        )]));
        assert!(check(&[("TOPIC/PREFIXED/t", "User:*", All, Allow, "*")]));
        assert!(
            !check(&[("TOPIC/LITERAL/t1", "User:alice", Read, Allow, "*")]),
            "READ is not WRITE, and nothing is implied"
        );
        assert!(!check(&[
            ("TOPIC/LITERAL/t1", "User:alice", Write, Allow, "*"),
            ("TOPIC/LITERAL/t1", "User:alice", Write, Deny, "*"),
        ]));
        assert!(check(&[
            ("TOPIC/LITERAL/t1", "User:alice", Write, Allow, "*"),
            ("TOPIC/LITERAL/t2", "User:alice", Write, Allow, "*"),
            ("TOPIC/LITERAL/t1", "User:alice", Write, Deny, "*"),
        ]));
        assert!(
            !check(&[
                ("TOPIC/LITERAL/abc", "User:alice", Write, Allow, "*"),
                ("TOPIC/PREFIXED/a", "User:alice", Write, Deny, "*"),
            ]),
            "a PREFIXED deny on a prefix dominates"
        );
        assert!(
            !check(&[
                ("TOPIC/PREFIXED/abc", "User:alice", Write, Allow, "*"),
                ("TOPIC/PREFIXED/abc", "User:alice", Write, Deny, "*"),
            ]),
            "the whole name is a prefix of itself"
        );
        assert!(
            check(&[
                ("TOPIC/PREFIXED/a", "User:alice", Write, Allow, "*"),
                ("TOPIC/PREFIXED/abc", "User:alice", Write, Deny, "*"),
            ]),
            "a longer PREFIXED deny leaves the rest of the prefix allowed"
        );
        assert!(
            !check(&[
                ("TOPIC/LITERAL/*", "User:*", All, Allow, "*"),
                ("TOPIC/LITERAL/*", "User:alice", Write, Deny, "*"),
            ]),
            "a DENY on the wildcard refuses"
        );
        assert!(!check(&[(
            "TOPIC/LITERAL/t1",
            "User:alice",
            Write,
            Allow,
            "10.0.0.9"
        )]));
        let sup = AuthorizerSettings {
            super_users: ["User:alice".to_owned()].into(),
            ..Default::default()
        };
        assert!(allowed_on_some(
            &acls(&[("TOPIC/LITERAL/*", "User:alice", All, Deny, "*")]),
            &sup,
            ALICE,
            Write,
            t
        ));
        let open = AuthorizerSettings {
            allow_everyone_if_no_acl_found: true,
            ..Default::default()
        };
        assert!(allowed_on_some(&acls(&[]), &open, ALICE, Write, t));
    }

    #[test]
    fn keys_and_filters() {
        let p = Pattern {
            resource: ResourceType::Group,
            pattern: PatternType::Prefixed,
            name: "team/a".into(),
        };
        assert_eq!(Pattern::from_key(&p.key()), Some(p.clone()));
        let e = Entry {
            principal: "User:x".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        let matching = Filter {
            name: Some("team/abc".into()),
            pattern: Some(None),
            ..Default::default()
        };
        assert!(matching.matches(&p, &e));
        let exact = Filter {
            name: Some("team/abc".into()),
            ..Default::default()
        };
        assert!(!exact.matches(&p, &e));
        assert!(Filter::default().matches(&p, &e));
        assert_eq!(candidate_keys(ResourceType::Topic, "ab").len(), 4);
    }
}
