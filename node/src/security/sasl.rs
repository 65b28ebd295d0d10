//! SASL on a connection, as Kafka runs it (KIP-43, KIP-152, KIP-368): SaslHandshake names a
//! mechanism, SaslAuthenticate carries its messages; until they succeed a SASL listener serves
//! nothing but ApiVersions, SaslHandshake and SaslAuthenticate. With
//! `connections.max.reauth.ms` the session has a lifetime: the client authenticates again on
//! the same connection before it ends, or the connection is closed at its next request.
//!
//! Mechanisms: PLAIN and SCRAM-SHA-256/512, both against the SCRAM credentials in the cluster
//! metadata (PLAIN checks the password against any of the user's stored credentials; there is
//! no second password store). Pure: the credentials come through a lookup closure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::scram::{ScramCredential, ScramError, ScramMechanism, ScramServer, ScramStep};

/// A SASL mechanism the broker can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    pub fn parse(name: &str) -> Option<SaslMechanism> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            other => ScramMechanism::parse(other).map(SaslMechanism::Scram),
        }
    }

    /// `sasl.enabled.mechanisms`, in order; GSSAPI and OAUTHBEARER are named as not built.
    pub fn parse_list(list: &str) -> Result<Vec<SaslMechanism>, MechanismListError> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match SaslMechanism::parse(name) {
                Some(m) if !out.contains(&m) => out.push(m),
                Some(_) => {}
                None => return Err(MechanismListError::NotSupported(name.to_owned())),
            }
        }
        if out.is_empty() {
            return Err(MechanismListError::Empty);
        }
        Ok(out)
    }
}

/// Why a `sasl.enabled.mechanisms` value is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MechanismListError {
    #[error("{0} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
    NotSupported(String),
    #[error("no mechanism enabled")]
    Empty,
}

/// The mechanism a SaslHandshake named is not enabled.
#[derive(Debug, PartialEq, Eq)]
pub struct NotEnabled;

/// A user's stored credentials, by mechanism name.
pub type UserCredentials = BTreeMap<String, ScramCredential>;

/// Why authentication failed: what the broker logs (never a password), and what the client is
/// told.
#[derive(Debug, PartialEq, Eq)]
pub struct AuthFailure {
    pub user: Option<String>,
    pub reason: String,
}

impl AuthFailure {
    /// Kafka's message to the client: the same for an unknown user and a wrong password.
    pub fn client_message(&self, mechanism: SaslMechanism) -> String {
        format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        )
    }
}

/// What SaslAuthenticate answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Authenticated {
    /// Send these bytes; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated: send these bytes; the session lasts `lifetime` (`None`: for ever).
    Done {
        reply: Vec<u8>,
        lifetime: Option<Duration>,
    },
}

/// Whether a request may be served now.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    Serve,
    /// Not authenticated yet: only ApiVersions, SaslHandshake and SaslAuthenticate.
    NotAuthenticated,
    /// The session's lifetime is over and the client did not authenticate again.
    Expired,
}

enum Exchange {
    None,
    Handshaken(SaslMechanism),
    /// The exchange and the user the client named.
    Scram(ScramServer, Option<String>),
}

/// One connection's SASL state.
pub struct SaslSession {
    enabled: Vec<SaslMechanism>,
    reauth: Option<Duration>,
    exchange: Exchange,
    /// The authenticated user and when the session ends.
    user: Option<String>,
    expires: Option<Instant>,
    /// The mechanism of the last handshake (for the failure message).
    mechanism: Option<SaslMechanism>,
}

impl SaslSession {
    pub fn new(enabled: Vec<SaslMechanism>, reauth: Option<Duration>) -> SaslSession {
        SaslSession {
            enabled,
            reauth,
            exchange: Exchange::None,
            user: None,
            expires: None,
            mechanism: None,
        }
    }

    pub fn enabled(&self) -> &[SaslMechanism] {
        &self.enabled
    }

    /// The authenticated user.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    pub fn mechanism(&self) -> Option<SaslMechanism> {
        self.mechanism
    }

    /// SaslHandshake: `Err` is UNSUPPORTED_SASL_MECHANISM (the mechanism is not enabled).
    pub fn handshake(&mut self, mechanism: &str) -> Result<(), NotEnabled> {
        match SaslMechanism::parse(mechanism).filter(|m| self.enabled.contains(m)) {
            Some(m) => {
                self.exchange = Exchange::Handshaken(m);
                self.mechanism = Some(m);
                Ok(())
            }
            None => Err(NotEnabled),
        }
    }

    /// SaslAuthenticate's bytes. `lookup` finds a user's stored credentials. A failure ends
    /// the exchange (the connection is closed after the answer). Re-authentication must be
    /// as the same user (Kafka's rule).
    pub fn authenticate(
        &mut self,
        bytes: &[u8],
        lookup: impl FnOnce(&str) -> Option<UserCredentials>,
        now: Instant,
    ) -> Result<Authenticated, AuthFailure> {
        let fail = |user: Option<String>, reason: String| AuthFailure { user, reason };
        let (user, reply) = match std::mem::replace(&mut self.exchange, Exchange::None) {
            Exchange::None => {
                return Err(fail(
                    None,
                    "SaslAuthenticate without a SaslHandshake first".into(),
                ))
            }
            Exchange::Handshaken(SaslMechanism::Plain) => {
                let (user, password) = parse_plain(bytes).map_err(|r| fail(None, r.into()))?;
                let ok = lookup(&user).is_some_and(|creds| {
                    creds.iter().any(|(mech, c)| {
                        ScramMechanism::parse(mech)
                            .is_some_and(|m| c.matches_password(m, &password))
                    })
                });
                if !ok {
                    return Err(fail(Some(user), "unknown user or wrong password".into()));
                }
                (user, Vec::new())
            }
            Exchange::Handshaken(SaslMechanism::Scram(m)) => {
                let mut server = ScramServer::new(m);
                let mut asked = None;
                let step = server.step(bytes, |u| {
                    asked = Some(u.to_owned());
                    lookup(u).and_then(|c| c.get(m.name()).cloned())
                });
                match step {
                    Ok(ScramStep::Continue(reply)) => {
                        self.exchange = Exchange::Scram(server, asked);
                        return Ok(Authenticated::Continue(reply));
                    }
                    Ok(ScramStep::Done { .. }) => {
                        return Err(fail(asked, "SCRAM exchange ended early".into()))
                    }
                    Err(e) => return Err(fail(asked, scram_reason(&e))),
                }
            }
            Exchange::Scram(mut server, asked) => match server.step(bytes, |_| None) {
                Ok(ScramStep::Done { user, reply }) => (user, reply),
                Ok(ScramStep::Continue(_)) => {
                    return Err(fail(asked, "SCRAM exchange did not end".into()))
                }
                Err(e) => return Err(fail(asked, scram_reason(&e))),
            },
        };
        if let Some(previous) = &self.user {
            if *previous != user {
                return Err(fail(
                    Some(user),
                    format!("re-authentication as another user (was {previous})"),
                ));
            }
        }
        self.user = Some(user);
        self.expires = self.reauth.map(|d| now + d);
        Ok(Authenticated::Done {
            reply,
            lifetime: self.reauth,
        })
    }

    /// Whether request `api` (its Kafka key) may be served at `now`.
    pub fn gate(&self, api: i16, now: Instant) -> Gate {
        // ApiVersions 18, SaslHandshake 17, SaslAuthenticate 36.
        let auth_api = matches!(api, 17 | 36);
        if self.user.is_none() {
            return if auth_api || api == 18 {
                Gate::Serve
            } else {
                Gate::NotAuthenticated
            };
        }
        match self.expires {
            Some(at) if now >= at && !auth_api => Gate::Expired,
            _ => Gate::Serve,
        }
    }
}

fn scram_reason(e: &ScramError) -> String {
    e.to_string()
}

/// PLAIN's message (RFC 4616): authzid NUL authcid NUL password; an authzid other than the
/// user is refused, as Kafka does.
fn parse_plain(bytes: &[u8]) -> Result<(String, String), &'static str> {
    let s = std::str::from_utf8(bytes).map_err(|_| "PLAIN message is not UTF-8")?;
    let mut parts = s.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("PLAIN message is not authzid NUL user NUL password");
    };
    if user.is_empty() || password.is_empty() {
        return Err("PLAIN user or password is empty");
    }
    if !authzid.is_empty() && authzid != user {
        return Err("PLAIN authorization id is not the user");
    }
    Ok((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::tests::Client;

    fn store() -> BTreeMap<String, UserCredentials> {
        let mut users = BTreeMap::new();
        let mut alice = UserCredentials::new();
        alice.insert(
            "SCRAM-SHA-512".into(),
            ScramCredential::from_password(ScramMechanism::Sha512, "pw-a", 4096),
        );
        users.insert("alice".to_owned(), alice);
        users
    }

    fn scram_login(s: &mut SaslSession, user: &str, password: &str) -> Result<(), AuthFailure> {
        let users = store();
        let now = Instant::now();
        s.handshake("SCRAM-SHA-512").unwrap();
        let mut c = Client::new(ScramMechanism::Sha512, user, password);
        let Authenticated::Continue(sf) =
            s.authenticate(&c.first(), |u| users.get(u).cloned(), now)?
        else {
            panic!("no server-first")
        };
        let last = c.last(&sf);
        s.authenticate(&last, |u| users.get(u).cloned(), now)
            .map(|_| ())
    }

    #[test]
    fn only_auth_requests_until_authenticated() {
        let mechs = SaslMechanism::parse_list("SCRAM-SHA-512,PLAIN").unwrap();
        let mut s = SaslSession::new(mechs, None);
        let now = Instant::now();
        assert_eq!(s.gate(18, now), Gate::Serve);
        assert_eq!(s.gate(3, now), Gate::NotAuthenticated);
        assert!(s.handshake("SCRAM-SHA-256").is_err());
        assert!(s.handshake("GSSAPI").is_err());
        assert!(scram_login(&mut s, "alice", "wrong").is_err());
        assert_eq!(s.gate(0, now), Gate::NotAuthenticated);
        scram_login(&mut s, "alice", "pw-a").unwrap();
        assert_eq!(s.user(), Some("alice"));
        assert_eq!(s.gate(0, now), Gate::Serve);
    }

    #[test]
    fn plain_checks_the_scram_credential() {
        let users = store();
        let now = Instant::now();
        let mechs = SaslMechanism::parse_list("PLAIN").unwrap();
        let mut s = SaslSession::new(mechs.clone(), None);
        s.handshake("PLAIN").unwrap();
        let err = s
            .authenticate(b"\0alice\0nope", |u| users.get(u).cloned(), now)
            .unwrap_err();
        assert_eq!(err.user.as_deref(), Some("alice"));
        s.handshake("PLAIN").unwrap();
        assert!(s
            .authenticate(b"\0alice\0pw-a", |u| users.get(u).cloned(), now)
            .is_ok());
        let mut s = SaslSession::new(mechs, None);
        s.handshake("PLAIN").unwrap();
        assert!(s
            .authenticate(b"bob\0alice\0pw-a", |u| users.get(u).cloned(), now)
            .is_err());
    }

    #[test]
    fn sessions_expire_and_reauthenticate_as_the_same_user() {
        let mechs = SaslMechanism::parse_list("SCRAM-SHA-512").unwrap();
        let mut s = SaslSession::new(mechs, Some(Duration::from_millis(0)));
        scram_login(&mut s, "alice", "pw-a").unwrap();
        let later = Instant::now() + Duration::from_millis(1);
        assert_eq!(s.gate(1, later), Gate::Expired);
        assert_eq!(s.gate(17, later), Gate::Serve);
        scram_login(&mut s, "alice", "pw-a").unwrap();
        assert!(SaslMechanism::parse_list("GSSAPI").is_err());
        assert!(SaslMechanism::parse_list("").is_err());
    }
}
