//! How a client proves who it is, configured by a Kafka client's property names
//! (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.*`, as in the
//! `client.properties` Kafka's tools take with `--command-config`), and the client's side of
//! the SASL exchange (SaslHandshake, then SaslAuthenticate rounds) that both transports run.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rustls::ClientConfig;

use crate::codec::ClientError;
use crate::scram::{ScramClient, ScramMechanism};
use crate::tls::SslProperties;

/// Kafka's security protocols (`security.protocol`, a listener's protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Case-insensitive, as Kafka reads it.
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's security protocol id (Metadata v0's `security_protocol` of an endpoint).
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// Whether connections are TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL before anything else.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// The SASL mechanisms the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    pub fn parse(s: &str) -> Option<SaslMechanism> {
        match s.trim() {
            "PLAIN" => Some(SaslMechanism::Plain),
            other => ScramMechanism::parse(other).map(SaslMechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }
}

/// A user name and password for a mechanism. `Debug` does not show the password.
#[derive(Clone)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .finish()
    }
}

/// What a connection does before its first request: TLS (with this config), then SASL (with
/// these credentials), as the protocol says.
#[derive(Clone, Debug)]
pub struct ClientSecurity {
    pub protocol: SecurityProtocol,
    pub tls: Option<Arc<ClientConfig>>,
    pub sasl: Option<SaslCredentials>,
}

/// A client security property that cannot be used: the property and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SecurityConfigError {
    pub key: String,
    pub reason: String,
}

fn config_error(key: &str, reason: impl Into<String>) -> SecurityConfigError {
    SecurityConfigError {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// The `key=value` (or `key: value`) lines of a Java properties text; `#` and `!` start
/// comments, a line ending in `\` continues on the next.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            logical.push_str(head);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let split = entry.find(['=', ':']).unwrap_or(entry.len());
        let (k, v) = entry.split_at(split);
        let v = v.get(1..).unwrap_or("");
        out.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    out
}

/// Reads a properties file (`--command-config`).
pub fn load_properties(
    path: &std::path::Path,
) -> Result<Vec<(String, String)>, SecurityConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(&path.display().to_string(), e.to_string()))?;
    Ok(parse_properties(&text))
}

/// Why a `sasl.jaas.config` is refused (never quoting a value: it may be the password).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("login module '{0}' is not supported (PlainLoginModule or ScramLoginModule)")]
    Module(String),
    #[error("expected key=value options after the login module and its flag")]
    NotKeyValue,
    #[error("unterminated quote in the value of {0}")]
    Unterminated(String),
    #[error("needs username=\"…\" and password=\"…\"")]
    MissingCredentials,
}

/// The `username` and `password` options of a `sasl.jaas.config` for the PLAIN or SCRAM login
/// module: `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"
/// password="alice-secret";`.
pub fn jaas_credentials(jaas: &str) -> Result<(String, String), JaasError> {
    let mut rest = jaas.trim();
    let module = rest.split_whitespace().next().unwrap_or("");
    if !(module.ends_with("PlainLoginModule") || module.ends_with("ScramLoginModule")) {
        return Err(JaasError::Module(module.to_owned()));
    }
    rest = rest[module.len()..].trim_start();
    let flag = rest.split_whitespace().next().unwrap_or("");
    rest = rest[flag.len()..].trim_start();
    let (mut user, mut password) = (None, None);
    while !rest.is_empty() && !rest.starts_with(';') {
        let (key, after) = rest.split_once('=').ok_or(JaasError::NotKeyValue)?;
        let key = key.trim();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| JaasError::Unterminated(key.to_owned()))?;
            (value, &quoted[end..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || c == ';')
                .unwrap_or(after.len());
            (after[..end].to_owned(), &after[end..])
        };
        match key {
            "username" => user = Some(value),
            "password" => password = Some(value),
            _ => {}
        }
        rest = next.trim_start();
    }
    match (user, password) {
        (Some(u), Some(p)) => Ok((u, p)),
        _ => Err(JaasError::MissingCredentials),
    }
}

impl ClientSecurity {
    pub fn plaintext() -> ClientSecurity {
        ClientSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
        }
    }

    /// From a Kafka client's properties. Properties outside `security.protocol`, `sasl.*` and
    /// `ssl.*` are not this module's (a caller may use or ignore them); `sasl.*` and `ssl.*`
    /// properties the client cannot honour are errors, not silently dropped.
    pub fn from_properties(
        props: &[(String, String)],
    ) -> Result<ClientSecurity, SecurityConfigError> {
        let get = |k: &str| {
            props
                .iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        const KNOWN: &[&str] = &[
            "security.protocol",
            "sasl.mechanism",
            "sasl.jaas.config",
            "ssl.keystore.type",
            "ssl.keystore.location",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
            "ssl.key.password",
            "ssl.truststore.type",
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            "ssl.enabled.protocols",
            // Names the JVM's SSLContext in Kafka; the versions offered are
            // ssl.enabled.protocols' there as here.
            "ssl.protocol",
            "ssl.endpoint.identification.algorithm",
        ];
        for (k, _) in props {
            if (k.starts_with("ssl.") || k.starts_with("sasl.")) && !KNOWN.contains(&k.as_str()) {
                return Err(config_error(k, "not supported by ringlog's client"));
            }
        }
        ClientSecurity::from_lookup(get)
    }

    /// From the properties `get` finds by name (Kafka's defaults for the rest), without the
    /// check for properties the client cannot honour (the caller knows its keys).
    pub fn from_lookup<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<ClientSecurity, SecurityConfigError> {
        let protocol_name = get("security.protocol").unwrap_or("PLAINTEXT");
        let protocol = SecurityProtocol::parse(protocol_name).ok_or_else(|| {
            config_error(
                "security.protocol",
                format!("'{protocol_name}': PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
            )
        })?;
        let tls = if protocol.tls() {
            let ssl = SslProperties::from_lookup(&get);
            let verify_hostname = match get("ssl.endpoint.identification.algorithm")
                .unwrap_or("https")
                .trim()
            {
                "https" | "HTTPS" => true,
                "" => false,
                other => {
                    return Err(config_error(
                        "ssl.endpoint.identification.algorithm",
                        format!("'{other}': https (check the host name) or empty (do not)"),
                    ))
                }
            };
            Some(
                ssl.client_config(verify_hostname)
                    .map_err(|e| config_error(e.key, e.reason))?,
            )
        } else {
            None
        };
        let sasl = if protocol.sasl() {
            let name = get("sasl.mechanism").unwrap_or("GSSAPI");
            let mechanism = SaslMechanism::parse(name).ok_or_else(|| {
                config_error(
                    "sasl.mechanism",
                    format!("'{name}' is not supported: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                )
            })?;
            let jaas = get("sasl.jaas.config")
                .ok_or_else(|| config_error("sasl.jaas.config", "needed for SASL"))?;
            let (username, password) = jaas_credentials(jaas)
                .map_err(|e| config_error("sasl.jaas.config", e.to_string()))?;
            Some(SaslCredentials {
                mechanism,
                username,
                password,
            })
        } else {
            None
        };
        Ok(ClientSecurity {
            protocol,
            tls,
            sasl,
        })
    }

    /// The TLS server name for a broker address `host:port`.
    pub fn server_name(addr: &str) -> Result<rustls::pki_types::ServerName<'static>, ClientError> {
        let host = addr
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(addr)
            .trim_start_matches('[')
            .trim_end_matches(']');
        rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| {
            ClientError::Authentication(format!("{addr}: '{host}' is not a TLS server name: {e}"))
        })
    }
}

/// The client's side of one SASL exchange, without I/O: the SaslHandshake request, then the
/// bytes of each SaslAuthenticate request from the previous answer.
pub struct SaslExchange {
    mechanism: SaslMechanism,
    state: ExchangeState,
    started: std::time::Instant,
    /// The session lifetime the broker gave in its last answer (0: no limit).
    session_lifetime_ms: i64,
}

enum ExchangeState {
    Plain(String, String),
    ScramFirst(ScramClient),
    ScramFinal(ScramClient),
    Done,
}

/// SaslHandshake and SaslAuthenticate versions the client sends.
pub const SASL_HANDSHAKE_VERSION: i16 = 1;
pub const SASL_AUTHENTICATE_VERSION: i16 = 2;

impl SaslExchange {
    pub fn new(credentials: &SaslCredentials) -> SaslExchange {
        let state = match credentials.mechanism {
            SaslMechanism::Plain => {
                ExchangeState::Plain(credentials.username.clone(), credentials.password.clone())
            }
            SaslMechanism::Scram(m) => ExchangeState::ScramFirst(ScramClient::new(
                m,
                &credentials.username,
                &credentials.password,
            )),
        };
        SaslExchange {
            mechanism: credentials.mechanism,
            state,
            started: std::time::Instant::now(),
            session_lifetime_ms: 0,
        }
    }

    pub fn handshake_request(&self) -> SaslHandshakeRequest {
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = StrBytes::from_static_str(self.mechanism.name());
        req
    }

    /// Whether the broker took the mechanism.
    pub fn handshake_answer(&self, resp: &SaslHandshakeResponse) -> Result<(), ClientError> {
        if resp.error_code == 0 {
            return Ok(());
        }
        let enabled: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
        Err(ClientError::Authentication(format!(
            "SaslHandshake for {} refused (error {}): the broker enables {}",
            self.mechanism.name(),
            resp.error_code,
            if enabled.is_empty() {
                "none".to_owned()
            } else {
                enabled.join(", ")
            }
        )))
    }

    /// The first SaslAuthenticate request.
    pub fn first_request(&mut self) -> SaslAuthenticateRequest {
        let bytes = match &mut self.state {
            ExchangeState::Plain(user, password) => {
                let b = format!("\0{user}\0{password}").into_bytes();
                self.state = ExchangeState::Done;
                b
            }
            ExchangeState::ScramFirst(c) => c.first(),
            _ => Vec::new(),
        };
        authenticate_request(bytes)
    }

    /// Takes the broker's answer: the next request, or `None` when authenticated.
    pub fn answer(
        &mut self,
        resp: &SaslAuthenticateResponse,
    ) -> Result<Option<SaslAuthenticateRequest>, ClientError> {
        if resp.error_code != 0 {
            return Err(ClientError::Authentication(format!(
                "{} authentication failed (error {}): {}",
                self.mechanism.name(),
                resp.error_code,
                resp.error_message.as_deref().unwrap_or("no message")
            )));
        }
        self.session_lifetime_ms = resp.session_lifetime_ms;
        let scram = |e: crate::scram::ScramClientError| ClientError::Authentication(e.to_string());
        match std::mem::replace(&mut self.state, ExchangeState::Done) {
            ExchangeState::ScramFirst(mut c) => {
                let last = c.last(&resp.auth_bytes).map_err(scram)?;
                self.state = ExchangeState::ScramFinal(c);
                Ok(Some(authenticate_request(last)))
            }
            ExchangeState::ScramFinal(mut c) => {
                c.verify(&resp.auth_bytes).map_err(scram)?;
                Ok(None)
            }
            ExchangeState::Plain(..) | ExchangeState::Done => Ok(None),
        }
    }
}

impl SaslExchange {
    /// When to authenticate again on the connection (KIP-368), once the exchange is over: at
    /// 85 % of the session lifetime the broker gave (`None`: no limit).
    pub fn renew_at(&self) -> Option<std::time::Instant> {
        (self.session_lifetime_ms > 0).then(|| {
            self.started
                + std::time::Duration::from_millis(self.session_lifetime_ms as u64 * 85 / 100)
        })
    }
}

fn authenticate_request(bytes: Vec<u8>) -> SaslAuthenticateRequest {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = Bytes::from(bytes);
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
    }

    #[test]
    fn properties_and_jaas_are_read_as_kafka_writes_them() {
        let p = props(
            "# a comment\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism : SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  \
             username=\"al ice\" password=\"p\\\"w;d\";\n",
        );
        assert_eq!(p.len(), 3);
        let s = ClientSecurity::from_properties(&p).unwrap();
        assert_eq!(s.protocol, SecurityProtocol::SaslPlaintext);
        let c = s.sasl.unwrap();
        assert_eq!(c.mechanism, SaslMechanism::Scram(ScramMechanism::Sha512));
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("al ice", "p\"w;d")
        );
        assert!(!format!("{c:?}").contains("p\"w;d"));
        assert_eq!(
            jaas_credentials("x.PlainLoginModule required username=bob password=b0b;").unwrap(),
            ("bob".into(), "b0b".into())
        );
    }

    #[test]
    fn unusable_settings_name_their_property() {
        let err = |text: &str| {
            ClientSecurity::from_properties(&props(text))
                .unwrap_err()
                .key
        };
        assert_eq!(err("security.protocol=SASL_TLS"), "security.protocol");
        assert_eq!(
            err("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN"),
            "ssl.truststore.location"
        );
        assert_eq!(err("security.protocol=SASL_PLAINTEXT"), "sasl.mechanism");
        assert_eq!(
            err("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN"),
            "sasl.jaas.config"
        );
        assert_eq!(
            err("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;"),
            "sasl.jaas.config"
        );
        assert_eq!(err("ssl.keystore.password=x"), "ssl.keystore.password");
    }
}
