//! TLS for the SSL and SASL_SSL listeners, with rustls, configured by Kafka's `ssl.*` property
//! names (PEM key stores and trust stores only), and the principal of a client certificate.
//!
//! Fetched record bytes cannot go out zero-copy through user-space TLS: a TLS connection's
//! responses are copied into TLS records (see the connection's send path).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

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

/// The `ssl.*` properties as given (a `Properties` view, so this module does not depend on
/// the config's types).
pub struct SslProperties<'a> {
    pub keystore_type: &'a str,
    pub keystore_location: &'a str,
    pub keystore_key: &'a str,
    pub keystore_certificate_chain: &'a str,
    pub key_password: &'a str,
    pub truststore_type: &'a str,
    pub truststore_location: &'a str,
    pub truststore_certificates: &'a str,
    pub client_auth: &'a str,
    pub enabled_protocols: &'a str,
}

/// What is wrong with the TLS settings: the property and why.
#[derive(Debug)]
pub struct TlsError {
    pub key: &'static str,
    pub reason: String,
}

fn error(key: &'static str, reason: impl Into<String>) -> TlsError {
    TlsError {
        key,
        reason: reason.into(),
    }
}

/// The TLS side of the broker's listeners. `ssl.client.auth` applies to SSL listeners; a
/// SASL_SSL listener authenticates clients with SASL and asks for no certificate (Kafka's rule
/// since KIP-684, unless set per listener, which ringlog does not read).
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// For SSL listeners: asks for client certificates as `ssl.client.auth` says.
    pub ssl: Arc<ServerConfig>,
    /// For SASL_SSL listeners: no client certificate.
    pub sasl_ssl: Arc<ServerConfig>,
    pub client_auth: ClientAuth,
}

fn read_pem(key: &'static str, path: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(Path::new(path)).map_err(|e| error(key, format!("reading {path}: {e}")))
}

fn certificates(key: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(key, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(error(
            key,
            "no PEM certificate (-----BEGIN CERTIFICATE-----) found",
        ));
    }
    Ok(certs)
}

fn private_key(key: &'static str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
        error(
            key,
            format!("no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1) found: {e}"),
        )
    })
}

impl TlsSettings {
    /// Builds the server's TLS config from the `ssl.*` properties.
    pub fn build(p: &SslProperties<'_>) -> Result<TlsSettings, TlsError> {
        if p.keystore_type.trim() != "PEM" {
            return Err(error(
                "ssl.keystore.type",
                format!(
                    "'{}' is not supported: ringlog reads PEM key stores (ssl.keystore.type=PEM)",
                    p.keystore_type
                ),
            ));
        }
        if !p.key_password.is_empty() {
            return Err(error(
                "ssl.key.password",
                "encrypted private keys are not supported: give the key unencrypted (PKCS#8 PEM)",
            ));
        }
        let (chain, key) = match (
            p.keystore_location.trim(),
            p.keystore_key.trim(),
            p.keystore_certificate_chain.trim(),
        ) {
            ("", "", _) | ("", _, "") => {
                return Err(error(
                    "ssl.keystore.location",
                    "a TLS listener needs the broker's key and certificate chain: ssl.keystore.location (one PEM file holding both) or ssl.keystore.key with ssl.keystore.certificate.chain",
                ))
            }
            ("", key, chain) => (
                certificates("ssl.keystore.certificate.chain", chain.as_bytes())?,
                private_key("ssl.keystore.key", key.as_bytes())?,
            ),
            (path, _, _) => {
                let pem = read_pem("ssl.keystore.location", path)?;
                (
                    certificates("ssl.keystore.location", &pem)?,
                    private_key("ssl.keystore.location", &pem)?,
                )
            }
        };
        let client_auth = ClientAuth::parse(p.client_auth).ok_or_else(|| {
            error(
                "ssl.client.auth",
                format!("'{}': must be required, requested or none", p.client_auth),
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut versions = Vec::new();
        for v in p.enabled_protocols.split(',').map(str::trim) {
            match v {
                "TLSv1.3" => versions.push(&rustls::version::TLS13),
                "TLSv1.2" => versions.push(&rustls::version::TLS12),
                "" => {}
                other => {
                    return Err(error(
                        "ssl.enabled.protocols",
                        format!("'{other}' is not supported (TLSv1.2, TLSv1.3)"),
                    ))
                }
            }
        }
        if versions.is_empty() {
            return Err(error("ssl.enabled.protocols", "no protocol enabled"));
        }
        let builder = || {
            ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| error("ssl.enabled.protocols", e.to_string()))
        };
        let certified = |b: rustls::ConfigBuilder<
            ServerConfig,
            rustls::server::WantsServerCert,
        >| {
            b.with_single_cert(chain.clone(), key.clone_key())
                .map(Arc::new)
                .map_err(|e| error("ssl.keystore.location", format!("key and certificate: {e}")))
        };
        let sasl_ssl = certified(builder()?.with_no_client_auth())?;
        let ssl = if client_auth == ClientAuth::None {
            sasl_ssl.clone()
        } else {
            let trusted = match (
                p.truststore_location.trim(),
                p.truststore_certificates.trim(),
            ) {
                ("", "") => {
                    return Err(error(
                        "ssl.truststore.location",
                        "ssl.client.auth asks for client certificates: give the CAs that sign them (ssl.truststore.location or ssl.truststore.certificates, PEM)",
                    ))
                }
                ("", inline) => certificates("ssl.truststore.certificates", inline.as_bytes())?,
                (path, _) => {
                    if p.truststore_type.trim() != "PEM" {
                        return Err(error(
                            "ssl.truststore.type",
                            format!(
                                "'{}' is not supported: ringlog reads PEM trust stores",
                                p.truststore_type
                            ),
                        ));
                    }
                    certificates(
                        "ssl.truststore.location",
                        &read_pem("ssl.truststore.location", path)?,
                    )?
                }
            };
            let mut roots = RootCertStore::empty();
            for c in trusted {
                roots
                    .add(c)
                    .map_err(|e| error("ssl.truststore.location", e.to_string()))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| error("ssl.truststore.location", e.to_string()))?;
            certified(builder()?.with_client_cert_verifier(verifier))?
        };
        Ok(TlsSettings {
            ssl,
            sasl_ssl,
            client_auth,
        })
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
        let p = SslProperties {
            keystore_type: "PEM",
            keystore_location: "",
            keystore_key: "",
            keystore_certificate_chain: "",
            key_password: "",
            truststore_type: "PEM",
            truststore_location: "",
            truststore_certificates: "",
            client_auth: "none",
            enabled_protocols: "TLSv1.2,TLSv1.3",
        };
        assert_eq!(
            TlsSettings::build(&p).unwrap_err().key,
            "ssl.keystore.location"
        );
        let jks = SslProperties {
            keystore_type: "JKS",
            ..p
        };
        assert!(TlsSettings::build(&jks).unwrap_err().reason.contains("PEM"));
    }
}
