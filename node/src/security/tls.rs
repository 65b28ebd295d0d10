//! TLS for the SSL and SASL_SSL listeners, with rustls, configured by Kafka's `ssl.*` property
//! names (PEM key stores and trust stores only), and the principal of a client certificate.
//!
//! Fetched record bytes cannot go out zero-copy through user-space TLS: a TLS connection's
//! responses are copied into TLS records (see the connection's send path).

use std::sync::Arc;

use kafka_client::tls::error;
pub use kafka_client::tls::{SslProperties, TlsError};
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

/// `ssl.client.auth`: whether clients must, may or need not show a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Requested,
    None,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<ClientAuth> {
        Some(match s.trim() {
            "required" => ClientAuth::Required,
            "requested" => ClientAuth::Requested,
            "none" | "" => ClientAuth::None,
            _ => return None,
        })
    }
}

/// The TLS side of the broker's listeners: one server config for each `ssl.client.auth` a TLS
/// listener uses. An SSL listener asks for client certificates as `ssl.client.auth` says, a
/// SASL_SSL one for none (Kafka's rule since KIP-684); `listener.name.<listener>.ssl.client.auth`
/// overrides either (see the config).
#[derive(Debug, Clone)]
pub struct TlsSettings {
    configs: Vec<(ClientAuth, Arc<ServerConfig>)>,
}

impl TlsSettings {
    /// Builds a server config for each of `levels` from the `ssl.*` properties.
    pub fn build(p: &SslProperties<'_>, levels: &[ClientAuth]) -> Result<TlsSettings, TlsError> {
        let (chain, key) = p.key_store()?.ok_or_else(|| {
            error(
                "ssl.keystore.location",
                "a TLS listener needs the broker's key and certificate chain: ssl.keystore.location (one PEM file holding both) or ssl.keystore.key with ssl.keystore.certificate.chain",
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions = p.protocol_versions()?;
        let mut configs: Vec<(ClientAuth, Arc<ServerConfig>)> = Vec::new();
        for &level in levels {
            if configs.iter().any(|(l, _)| *l == level) {
                continue;
            }
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| error("ssl.enabled.protocols", e.to_string()))?;
            let builder = if level == ClientAuth::None {
                builder.with_no_client_auth()
            } else {
                let roots = p.trust_store()?.ok_or_else(|| {
                    error(
                        "ssl.truststore.location",
                        "ssl.client.auth asks for client certificates: give the CAs that sign them (ssl.truststore.location or ssl.truststore.certificates, PEM)",
                    )
                })?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                let verifier = if level == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| error("ssl.truststore.location", e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            };
            let config = builder
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(|e| error("ssl.keystore.location", format!("key and certificate: {e}")))?;
            configs.push((level, Arc::new(config)));
        }
        Ok(TlsSettings { configs })
    }

    /// The server config for a listener asking for client certificates as `level` says.
    pub fn config(&self, level: ClientAuth) -> Option<Arc<ServerConfig>> {
        self.configs
            .iter()
            .find(|(l, _)| *l == level)
            .map(|(_, c)| c.clone())
    }
}

/// The principal name Kafka's default principal builder gives a client certificate: its
/// subject as RFC 2253 writes it (`CN=client,OU=eng,O=example`: the last RDN first, no
/// spaces, special characters escaped).
pub fn subject_name(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let mut rdns = Vec::new();
    for rdn in parsed.subject().iter_rdn() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type().to_id_string();
            let name = match oid.as_str() {
                "2.5.4.3" => "CN".to_owned(),
                "2.5.4.11" => "OU".to_owned(),
                "2.5.4.10" => "O".to_owned(),
                "2.5.4.7" => "L".to_owned(),
                "2.5.4.8" => "ST".to_owned(),
                "2.5.4.6" => "C".to_owned(),
                "2.5.4.9" => "STREET".to_owned(),
                "0.9.2342.19200300.100.1.25" => "DC".to_owned(),
                "0.9.2342.19200300.100.1.1" => "UID".to_owned(),
                other => other.to_owned(),
            };
            let value = attr.as_str().ok()?;
            parts.push(format!("{name}={}", escape_rfc2253(value)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == v.len() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_escapes_what_it_must() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" x "), "\\ x\\ ");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }

    #[test]
    fn missing_key_store_is_named() {
        let p = SslProperties::default();
        assert_eq!(
            TlsSettings::build(&p, &[ClientAuth::None]).unwrap_err().key,
            "ssl.keystore.location"
        );
        let jks = SslProperties {
            keystore_type: "JKS",
            ..p
        };
        assert!(TlsSettings::build(&jks, &[ClientAuth::None])
            .unwrap_err()
            .reason
            .contains("PEM"));
    }
}
