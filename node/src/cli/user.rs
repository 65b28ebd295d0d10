//! `ringlog user ...`: SCRAM users over the Kafka protocol (AlterUserScramCredentials and
//! DescribeUserScramCredentials), as `kafka-configs.sh --entity-type users` manages them. The
//! password is salted here; only the salted password goes over the wire, as Kafka's admin
//! client does. Over TLS or SASL listeners give `--command-config` (as to Kafka's tools).

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResponse;
use kafka_protocol::messages::describe_user_scram_credentials_request::{
    DescribeUserScramCredentialsRequest, UserName,
};
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

use super::admin_client::{check, AdminClient};
use super::CliError;
use crate::security::scram::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

fn mechanism(name: &str) -> Result<ScramMechanism, CliError> {
    ScramMechanism::parse(name).ok_or_else(|| {
        CliError::Invalid(format!(
            "--mechanism '{name}': SCRAM-SHA-256 or SCRAM-SHA-512"
        ))
    })
}

fn alter(bootstrap: &str, req: AlterUserScramCredentialsRequest) -> Result<(), CliError> {
    let mut admin = AdminClient::connect(bootstrap)?;
    let resp: AlterUserScramCredentialsResponse =
        admin.call(ApiKey::AlterUserScramCredentials, 0, &req)?;
    for r in &resp.results {
        check(r.error_code, r.error_message.as_ref())
            .map_err(|e| e.context(format!("user {}", r.user)))?;
    }
    Ok(())
}

/// Sets `user`'s credential for `mechanism` to `password`.
pub fn set(
    bootstrap: &str,
    user: &str,
    mechanism_name: &str,
    password: &str,
    iterations: i32,
) -> Result<String, CliError> {
    let m = mechanism(mechanism_name)?;
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(CliError::Invalid(format!(
            "--iterations {iterations}: from {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )));
    }
    if password.is_empty() {
        return Err(CliError::Invalid("the password is empty".into()));
    }
    let salt: [u8; 32] = rand::random();
    let mut up = ScramCredentialUpsertion::default();
    up.name = StrBytes::from_string(user.to_owned());
    up.mechanism = m.id();
    up.iterations = iterations;
    up.salt = bytes::Bytes::copy_from_slice(&salt);
    up.salted_password =
        bytes::Bytes::from(m.salted_password(password.as_bytes(), &salt, iterations as u32));
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions = vec![up];
    alter(bootstrap, req)?;
    Ok(format!("set {} credential of user {user}", m.name()))
}

/// Deletes `user`'s credential for `mechanism`.
pub fn delete(bootstrap: &str, user: &str, mechanism_name: &str) -> Result<String, CliError> {
    let m = mechanism(mechanism_name)?;
    let mut d = ScramCredentialDeletion::default();
    d.name = StrBytes::from_string(user.to_owned());
    d.mechanism = m.id();
    let mut req = AlterUserScramCredentialsRequest::default();
    req.deletions = vec![d];
    alter(bootstrap, req)?;
    Ok(format!("deleted {} credential of user {user}", m.name()))
}

/// Every SCRAM user (or the ones named) with their mechanisms and iterations.
pub fn list(bootstrap: &str, users: &[String]) -> Result<String, CliError> {
    let mut admin = AdminClient::connect(bootstrap)?;
    let mut req = DescribeUserScramCredentialsRequest::default();
    req.users = (!users.is_empty()).then(|| {
        users
            .iter()
            .map(|u| {
                let mut n = UserName::default();
                n.name = StrBytes::from_string(u.clone());
                n
            })
            .collect()
    });
    let resp: DescribeUserScramCredentialsResponse =
        admin.call(ApiKey::DescribeUserScramCredentials, 0, &req)?;
    check(resp.error_code, resp.error_message.as_ref())?;
    let mut out = Vec::new();
    for r in &resp.results {
        check(r.error_code, r.error_message.as_ref())
            .map_err(|e| e.context(format!("user {}", r.user)))?;
        let creds: Vec<String> = r
            .credential_infos
            .iter()
            .map(|c| {
                let name = ScramMechanism::from_id(c.mechanism).map_or("unknown", |m| m.name());
                format!("{name}=iterations={}", c.iterations)
            })
            .collect();
        out.push(format!("{}\t{}", r.user, creds.join(",")));
    }
    Ok(out.join("\n"))
}
