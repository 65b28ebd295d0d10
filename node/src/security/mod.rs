//! Who may connect, as whom, and what they may do: listeners with Kafka's security protocols (`listeners.rs`),
//! TLS with rustls (`tls.rs`), SASL PLAIN and SCRAM (`sasl.rs`, `scram.rs`) against the SCRAM
//! credentials in the cluster metadata, and the principal a connection acts as.
//!
//! Owns the rules; the connection (`server/`) runs them and the control plane stores the
//! credentials and ACLs (`acl.rs`: Kafka's ACL model and StandardAuthorizer's decisions). It
//! must not touch logs or partitions, and never logs a password, a key or a
//! SCRAM proof.

pub mod acl;
pub mod failure_log;
pub mod listeners;
pub mod sasl;
pub mod scram;
pub mod tls;

use std::time::Duration;

use listeners::Listener;
use sasl::SaslMechanism;
use tls::TlsSettings;

/// Kafka's principal of connections nobody authenticated (PLAINTEXT, TLS without a client
/// certificate).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Kafka's principal of an authenticated user (or certificate subject).
pub fn user_principal(name: &str) -> String {
    format!("User:{name}")
}

/// The security side of the broker's configuration.
#[derive(Debug, Clone)]
pub struct SecuritySettings {
    /// Every listener, in the order given; `inter_broker` indexes the one other nodes use.
    pub listeners: Vec<Listener>,
    pub inter_broker: usize,
    /// The TLS listeners' settings (`None` when no listener is TLS).
    pub tls: Option<TlsSettings>,
    /// Per listener (by index): the client certificates a TLS listener asks for (`None`: not a
    /// TLS listener).
    pub client_auth: Vec<Option<tls::ClientAuth>>,
    /// ACL authorization (`authorizer.class.name`); `None`: everyone may do everything.
    pub authorizer: Option<acl::AuthorizerSettings>,
    /// Per listener (by index): its SASL mechanisms (`sasl.enabled.mechanisms`, or the
    /// listener's `listener.name.<listener>.sasl.enabled.mechanisms`).
    pub sasl_mechanisms: Vec<Vec<SaslMechanism>>,
    /// `connections.max.reauth.ms` (`None`: 0, sessions last as long as their connection).
    pub reauth: Option<Duration>,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay: Duration,
    /// How this broker connects to the other brokers' inter-broker listener (TLS, SASL).
    pub inter_broker_client: kafka_client::security::ClientSecurity,
}

/// A SCRAM user to create at start: `--add-scram 'SCRAM-SHA-512=[name=admin,password=...]'`
/// (kafka-storage format's syntax; `iterations=` optional, 4096 by default).
#[derive(Clone)]
pub struct AddScram {
    pub mechanism: scram::ScramMechanism,
    pub user: String,
    pub password: String,
    pub iterations: i32,
}

/// The password is never printed.
impl std::fmt::Debug for AddScram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AddScram({}, {}, iterations {})",
            self.mechanism.name(),
            self.user,
            self.iterations
        )
    }
}

/// Why an `--add-scram` argument is refused; it never repeats the password.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddScramError {
    #[error("expected MECHANISM=[name=NAME,password=PASSWORD]")]
    NoMechanism,
    #[error("'{0}' is not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)")]
    NotScram(String),
    #[error("the credential must be in brackets: [name=NAME,password=PASSWORD]")]
    NoBrackets,
    #[error("expected key=value pairs (name, password, iterations)")]
    NotKeyValue,
    #[error("iterations '{0}' must be from 4096 to 16384")]
    Iterations(String),
    #[error("unknown key '{0}' (name, password, iterations)")]
    UnknownKey(String),
    #[error("{0}= is missing")]
    Missing(&'static str),
}

impl AddScram {
    /// Parses `MECHANISM=[name=NAME,password=PASSWORD(,iterations=N)]`; the error never
    /// repeats the password.
    pub fn parse(arg: &str) -> Result<AddScram, AddScramError> {
        let (mech, rest) = arg.split_once('=').ok_or(AddScramError::NoMechanism)?;
        let mechanism = scram::ScramMechanism::parse(mech.trim())
            .ok_or_else(|| AddScramError::NotScram(mech.to_owned()))?;
        let body = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or(AddScramError::NoBrackets)?;
        let (mut user, mut password, mut iterations) = (None, None, scram::MIN_ITERATIONS);
        // The password is last or followed by ",iterations=": it may itself hold commas.
        let mut rest = body;
        while !rest.is_empty() {
            let (key, value_and_more) = rest.split_once('=').ok_or(AddScramError::NotKeyValue)?;
            let (value, more) = match key.trim() {
                "password" => match value_and_more.rfind(",iterations=") {
                    Some(i) => (&value_and_more[..i], &value_and_more[i + 1..]),
                    None => (value_and_more, ""),
                },
                _ => value_and_more
                    .split_once(',')
                    .unwrap_or((value_and_more, "")),
            };
            match key.trim() {
                "name" => user = Some(value.trim().trim_matches('"').to_owned()),
                "password" => password = Some(value.trim_matches('"').to_owned()),
                "iterations" => {
                    iterations = value
                        .trim()
                        .parse()
                        .ok()
                        .filter(|i| (scram::MIN_ITERATIONS..=scram::MAX_ITERATIONS).contains(i))
                        .ok_or_else(|| AddScramError::Iterations(value.to_owned()))?
                }
                other => return Err(AddScramError::UnknownKey(other.to_owned())),
            }
            rest = more;
        }
        let user = user
            .filter(|u| !u.is_empty())
            .ok_or(AddScramError::Missing("name"))?;
        let password = password
            .filter(|p| !p.is_empty())
            .ok_or(AddScramError::Missing("password"))?;
        Ok(AddScram {
            mechanism,
            user,
            password,
            iterations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_scram_takes_kafka_storage_syntax() {
        let a = AddScram::parse("SCRAM-SHA-512=[name=admin,password=s3,cr=t]").unwrap();
        assert_eq!(
            (a.user.as_str(), a.password.as_str(), a.iterations),
            ("admin", "s3,cr=t", 4096)
        );
        let a = AddScram::parse("SCRAM-SHA-256=[name=\"bob\",password=\"pw\",iterations=8192]")
            .unwrap();
        assert_eq!((a.user.as_str(), a.password.as_str()), ("bob", "pw"));
        assert_eq!(a.iterations, 8192);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-512=name=a,password=b",
            "SCRAM-SHA-512=[password=b]",
            "SCRAM-SHA-512=[name=a]",
            "SCRAM-SHA-512=[name=a,password=b,iterations=10]",
        ] {
            let e = AddScram::parse(bad).unwrap_err().to_string();
            assert!(
                !e.contains("=b"),
                "{bad}: the error shows the password: {e}"
            );
        }
        assert!(!format!("{a:?}").contains("pw"));
    }
}
