//! TLS settings by Kafka's `ssl.*` property names, PEM only: the key store (a key and its
//! certificate chain) and the trust store both sides read, the protocol versions, and the
//! client's rustls config. The broker builds its server config from the same pieces.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    SupportedProtocolVersion,
};

/// The `ssl.*` properties as given (empty: not set).
#[derive(Debug, Clone, Copy)]
pub struct SslProperties<'a> {
    pub keystore_type: &'a str,
    pub keystore_location: &'a str,
    pub keystore_key: &'a str,
    pub keystore_certificate_chain: &'a str,
    pub key_password: &'a str,
    pub truststore_type: &'a str,
    pub truststore_location: &'a str,
    pub truststore_certificates: &'a str,
    pub enabled_protocols: &'a str,
}

impl Default for SslProperties<'_> {
    /// Kafka's defaults, with PEM stores.
    fn default() -> Self {
        SslProperties {
            keystore_type: "PEM",
            keystore_location: "",
            keystore_key: "",
            keystore_certificate_chain: "",
            key_password: "",
            truststore_type: "PEM",
            truststore_location: "",
            truststore_certificates: "",
            enabled_protocols: "TLSv1.2,TLSv1.3",
        }
    }
}

/// What is wrong with the TLS settings: the property and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct TlsError {
    pub key: &'static str,
    pub reason: String,
}

pub fn error(key: &'static str, reason: impl Into<String>) -> TlsError {
    TlsError {
        key,
        reason: reason.into(),
    }
}

fn read_pem(key: &'static str, path: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(Path::new(path)).map_err(|e| error(key, format!("reading {path}: {e}")))
}

/// The certificates of a PEM text.
pub fn certificates(
    key: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
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

impl<'a> SslProperties<'a> {
    /// The `ssl.*` properties `get` finds by name; those it does not take Kafka's defaults
    /// (PEM stores, TLS 1.2 and 1.3).
    pub fn from_lookup(get: impl Fn(&str) -> Option<&'a str>) -> SslProperties<'a> {
        let d = SslProperties::default();
        SslProperties {
            keystore_type: get("ssl.keystore.type").unwrap_or(d.keystore_type),
            keystore_location: get("ssl.keystore.location").unwrap_or(d.keystore_location),
            keystore_key: get("ssl.keystore.key").unwrap_or(d.keystore_key),
            keystore_certificate_chain: get("ssl.keystore.certificate.chain")
                .unwrap_or(d.keystore_certificate_chain),
            key_password: get("ssl.key.password").unwrap_or(d.key_password),
            truststore_type: get("ssl.truststore.type").unwrap_or(d.truststore_type),
            truststore_location: get("ssl.truststore.location").unwrap_or(d.truststore_location),
            truststore_certificates: get("ssl.truststore.certificates")
                .unwrap_or(d.truststore_certificates),
            enabled_protocols: get("ssl.enabled.protocols").unwrap_or(d.enabled_protocols),
        }
    }
}

/// A key and the certificate chain that goes with it.
pub type KeyStore = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

impl SslProperties<'_> {
    /// The key store, if one is given.
    pub fn key_store(&self) -> Result<Option<KeyStore>, TlsError> {
        if self.keystore_type.trim() != "PEM" {
            return Err(error(
                "ssl.keystore.type",
                format!(
                    "'{}' is not supported: ringlog reads PEM key stores (ssl.keystore.type=PEM)",
                    self.keystore_type
                ),
            ));
        }
        if !self.key_password.is_empty() {
            return Err(error(
                "ssl.key.password",
                "encrypted private keys are not supported: give the key unencrypted (PKCS#8 PEM)",
            ));
        }
        Ok(Some(
            match (
                self.keystore_location.trim(),
                self.keystore_key.trim(),
                self.keystore_certificate_chain.trim(),
            ) {
                ("", "", "") => return Ok(None),
                ("", "", _) | ("", _, "") => {
                    return Err(error(
                        "ssl.keystore.key",
                        "ssl.keystore.key and ssl.keystore.certificate.chain go together",
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
            },
        ))
    }

    /// The trusted certificates, if a trust store is given.
    pub fn trust_store(&self) -> Result<Option<RootCertStore>, TlsError> {
        let trusted = match (
            self.truststore_location.trim(),
            self.truststore_certificates.trim(),
        ) {
            ("", "") => return Ok(None),
            ("", inline) => certificates("ssl.truststore.certificates", inline.as_bytes())?,
            (path, _) => {
                if self.truststore_type.trim() != "PEM" {
                    return Err(error(
                        "ssl.truststore.type",
                        format!(
                            "'{}' is not supported: ringlog reads PEM trust stores",
                            self.truststore_type
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
        Ok(Some(roots))
    }

    /// `ssl.enabled.protocols`.
    pub fn protocol_versions(&self) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
        let mut versions = Vec::new();
        for v in self.enabled_protocols.split(',').map(str::trim) {
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
        Ok(versions)
    }

    /// A client's TLS config: the broker's certificate must chain to the trust store, and name
    /// the host connected to when `verify_hostname` (Kafka's
    /// `ssl.endpoint.identification.algorithm=https`, its default); the key store, if given, is
    /// the client's certificate for mutual TLS.
    pub fn client_config(&self, verify_hostname: bool) -> Result<Arc<ClientConfig>, TlsError> {
        let roots = self.trust_store()?.ok_or_else(|| {
            error(
                "ssl.truststore.location",
                "a TLS client needs the CAs that sign the broker's certificate: ssl.truststore.location or ssl.truststore.certificates (PEM)",
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| error("ssl.truststore.location", e.to_string()))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.protocol_versions()?)
            .map_err(|e| error("ssl.enabled.protocols", e.to_string()))?;
        let builder = if verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
        };
        let config = match self.key_store()? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| error("ssl.keystore.location", format!("key and certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

/// The web PKI check without the host name (`ssl.endpoint.identification.algorithm=`, empty):
/// the chain must still lead to a trusted CA and be valid now.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
