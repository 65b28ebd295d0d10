//! AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as Kafka answers
//! them: the client sends a salted password (never the password), the broker derives and
//! stores the StoredKey and ServerKey through the control plane; one result per user.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use kafka_protocol::messages::alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::handlers::authorized::on_cluster;
use crate::handlers::client::Client;
use crate::metadata::Command;
use crate::security::acl::Operation;
use crate::security::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::shard::ShardCtx;

/// One user's changes, as the request gives them.
#[derive(Default)]
struct UserChanges {
    upsert: Vec<(String, ScramCredential)>,
    delete: Vec<String>,
    refused: Option<Refused>,
}

fn mechanism(id: i8) -> Result<ScramMechanism, Refused> {
    ScramMechanism::from_id(id).ok_or_else(|| {
        Refused::new(
            ResponseError::UnsupportedSaslMechanism,
            format!("unknown SCRAM mechanism {id} (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)"),
        )
    })
}

fn empty_user() -> Refused {
    Refused::new(
        ResponseError::UnacceptableCredential,
        "username must not be empty",
    )
}

pub async fn alter(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut users: BTreeMap<String, UserChanges> = BTreeMap::new();
    // Each (user, mechanism) may appear once in a request, as in Kafka.
    let mut seen = BTreeSet::new();
    let duplicate = |u: &mut UserChanges| {
        u.refused = Some(Refused::new(
            ResponseError::DuplicateResource,
            "a user credential cannot be altered twice in the same request",
        ))
    };
    for d in req.deletions {
        let u = users.entry(d.name.to_string()).or_default();
        if d.name.is_empty() {
            u.refused.get_or_insert_with(empty_user);
            continue;
        }
        match mechanism(d.mechanism) {
            Ok(m) if seen.insert((d.name.to_string(), m)) => u.delete.push(m.name().to_owned()),
            Ok(_) => duplicate(u),
            Err(r) => {
                u.refused.get_or_insert(r);
            }
        }
    }
    for up in req.upsertions {
        let u = users.entry(up.name.to_string()).or_default();
        if up.name.is_empty() {
            u.refused.get_or_insert_with(empty_user);
            continue;
        }
        let m = match mechanism(up.mechanism) {
            Ok(m) => m,
            Err(r) => {
                u.refused.get_or_insert(r);
                continue;
            }
        };
        if !seen.insert((up.name.to_string(), m)) {
            duplicate(u);
            continue;
        }
        let refuse = |why: &str| Refused::new(ResponseError::UnacceptableCredential, why);
        if up.iterations < MIN_ITERATIONS {
            u.refused
                .get_or_insert(refuse("too few iterations (at least 4096)"));
            continue;
        }
        if up.iterations > MAX_ITERATIONS {
            u.refused
                .get_or_insert(refuse("too many iterations (at most 16384)"));
            continue;
        }
        if up.salt.is_empty() || up.salted_password.is_empty() {
            u.refused
                .get_or_insert(refuse("salt and salted password must not be empty"));
            continue;
        }
        let cred =
            ScramCredential::from_salted_password(m, &up.salt, &up.salted_password, up.iterations);
        u.upsert.push((m.name().to_owned(), cred));
    }
    // ALTER on the cluster (Kafka's rule): every user named is refused otherwise.
    if !on_cluster(ctx, client, Operation::Alter) {
        for u in users.values_mut() {
            u.refused = Some(Refused::new(
                ResponseError::ClusterAuthorizationFailed,
                format!("{} may not alter users' credentials", client.principal),
            ));
        }
    }
    let mut resp = AlterUserScramCredentialsResponse::default();
    for (user, changes) in users {
        let outcome = match changes.refused {
            Some(r) => Err(r),
            None => {
                ctx.control(|reply| Command::AlterScram {
                    user: user.clone(),
                    upsert: changes.upsert,
                    delete: changes.delete,
                    reply,
                })
                .await
            }
        };
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(user);
        if let Err(refused) = outcome {
            r.error_code = refused.error.code();
            r.error_message = Some(StrBytes::from_string(refused.message));
        }
        resp.results.push(r);
    }
    resp
}

pub fn describe(
    ctx: &ShardCtx,
    client: &Client,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut resp = DescribeUserScramCredentialsResponse::default();
    // DESCRIBE on the cluster (Kafka's rule).
    if !on_cluster(ctx, client, Operation::Describe) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    let snapshot = ctx.snapshot().clone();
    let asked: Vec<String> = match req.users {
        Some(u) if !u.is_empty() => u.into_iter().map(|n| n.name.to_string()).collect(),
        _ => snapshot.scram.keys().cloned().collect(),
    };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for u in &asked {
        *counts.entry(u.as_str()).or_default() += 1;
    }
    let mut answered = BTreeSet::new();
    for user in &asked {
        if !answered.insert(user.as_str()) {
            continue;
        }
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(user.clone());
        if counts[user.as_str()] > 1 {
            r.error_code = ResponseError::DuplicateResource.code();
            r.error_message = Some(StrBytes::from_string(format!(
                "cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            )));
        } else {
            match snapshot.scram.get(user) {
                Some(creds) => {
                    r.credential_infos = creds
                        .iter()
                        .filter_map(|(mech, c)| {
                            let m = ScramMechanism::parse(mech)?;
                            let mut info = CredentialInfo::default();
                            info.mechanism = m.id();
                            info.iterations = c.iterations;
                            Some(info)
                        })
                        .collect();
                }
                None => {
                    r.error_code = ResponseError::ResourceNotFound.code();
                    r.error_message = Some(StrBytes::from_string(format!(
                        "attempt to describe a user credential that does not exist: {user}"
                    )));
                }
            }
        }
        resp.results.push(r);
    }
    resp
}
