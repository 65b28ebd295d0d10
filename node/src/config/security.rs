//! Listeners, TLS, SASL and ACL settings (`listeners`, `ssl.*`, `sasl.*`, `authorizer.*`), and
//! how this broker authenticates to the others' inter-broker listener.

use crate::security::acl::AuthorizerSettings;
use crate::security::listeners::SecurityProtocol;
use crate::security::sasl::SaslMechanism;
use crate::security::tls::{ClientAuth, SslProperties, TlsSettings};
use crate::security::SecuritySettings;
use kafka_client::security::ClientSecurity;

use super::{listener_key, MetadataConfig};
use super::{ConfigError, Properties};

impl Properties {
    /// Listeners, TLS and SASL (`listeners`, `ssl.*`, `sasl.*`).
    pub(super) fn security(&self, shards: usize) -> Result<SecuritySettings, ConfigError> {
        let (listeners, inter_broker) = crate::security::listeners::parse(
            self.get("listeners"),
            self.get("listener.security.protocol.map"),
            self.get("advertised.listeners"),
            self.get("inter.broker.listener.name"),
            shards,
        )
        .map_err(|e| self.invalid(e.key, e.reason))?;
        // Every per-listener property names a listener.
        for key in self.values.keys() {
            if let Some((name, _)) = listener_key(key) {
                if !listeners.iter().any(|l| l.name.eq_ignore_ascii_case(name)) {
                    return Err(self.invalid(key, format!("there is no listener named {name}")));
                }
            }
        }
        let mechanisms = "sasl.enabled.mechanisms";
        let default_mechanisms = SaslMechanism::parse_list(self.get(mechanisms))
            .map_err(|reason| self.invalid(mechanisms, reason.to_string()))?;
        let mut client_auth = Vec::with_capacity(listeners.len());
        let mut sasl_mechanisms = Vec::with_capacity(listeners.len());
        for l in &listeners {
            let own = self.listener_value(&l.name, "ssl.client.auth");
            client_auth.push(if l.protocol.tls() {
                // KIP-684: a SASL_SSL listener asks for no certificate unless its own
                // ssl.client.auth says so.
                let (key, value) = match own {
                    Some(own) => own,
                    None if l.protocol.sasl() => ("ssl.client.auth", "none"),
                    None => ("ssl.client.auth", self.get("ssl.client.auth")),
                };
                Some(ClientAuth::parse(value).ok_or_else(|| {
                    self.invalid(key, "must be required, requested or none")
                })?)
            } else {
                if let Some((key, _)) = own {
                    return Err(self.invalid(
                        key,
                        format!("listener {} is {}: ssl.client.auth applies to SSL and SASL_SSL listeners", l.name, l.protocol.name()),
                    ));
                }
                None
            });
            sasl_mechanisms.push(match self.listener_value(&l.name, mechanisms) {
                Some((key, value)) => SaslMechanism::parse_list(value)
                    .map_err(|reason| self.invalid(key, reason.to_string()))?,
                None => default_mechanisms.clone(),
            });
        }
        let tls = if listeners.iter().any(|l| l.protocol.tls()) {
            let ssl = SslProperties::from_lookup(|k| self.lookup(k));
            let levels: Vec<ClientAuth> = client_auth.iter().flatten().copied().collect();
            Some(TlsSettings::build(&ssl, &levels).map_err(|e| self.invalid(e.key, e.reason))?)
        } else {
            None
        };
        let reauth: i64 = self.int("connections.max.reauth.ms")?;
        if reauth < 0 {
            return Err(self.invalid("connections.max.reauth.ms", "must be at least 0"));
        }
        let delay: i64 = self.int("connection.failed.authentication.delay.ms")?;
        if !(0..=60_000).contains(&delay) {
            return Err(self.invalid(
                "connection.failed.authentication.delay.ms",
                "must be from 0 to 60000",
            ));
        }
        let authorizer = match self.get("authorizer.class.name").trim() {
            "" => None,
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            | "kafka.security.authorizer.AclAuthorizer" => Some(AuthorizerSettings {
                super_users: self
                    .get("super.users")
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect(),
                allow_everyone_if_no_acl_found: self.bool("allow.everyone.if.no.acl.found")?,
            }),
            _ => {
                return Err(self.invalid(
                    "authorizer.class.name",
                    "ringlog's authorizer is Kafka's StandardAuthorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or empty for none)",
                ))
            }
        };
        if let Some(bad) = authorizer
            .iter()
            .flat_map(|a| &a.super_users)
            .find(|u| !u.contains(':'))
        {
            return Err(self.invalid(
                "super.users",
                format!("'{bad}' is not a principal (User:name)"),
            ));
        }
        Ok(SecuritySettings {
            listeners,
            inter_broker,
            tls,
            client_auth,
            authorizer,
            sasl_mechanisms,
            reauth: (reauth > 0).then(|| std::time::Duration::from_millis(reauth as u64)),
            failed_authentication_delay: std::time::Duration::from_millis(delay as u64),
            inter_broker_client: ClientSecurity::plaintext(),
        })
    }

    /// How this broker connects to the others' inter-broker listener (its followers fetch
    /// over it): TLS with the broker's own trust store (and key store, for listeners that ask
    /// for client certificates), SASL with `sasl.mechanism.inter.broker.protocol` and the
    /// listener's `listener.name.<listener>.<mechanism>.sasl.jaas.config`. Only a cluster
    /// (`metadata.store=etcd`) connects to other brokers.
    pub(super) fn inter_broker_client(
        &self,
        metadata: &MetadataConfig,
        security: &SecuritySettings,
    ) -> Result<ClientSecurity, ConfigError> {
        let listener = &security.listeners[security.inter_broker];
        if !matches!(metadata, MetadataConfig::Etcd { .. })
            || listener.protocol == SecurityProtocol::Plaintext
        {
            return Ok(ClientSecurity::plaintext());
        }
        let mut sasl = None;
        if listener.protocol.sasl() {
            let mech_key = "sasl.mechanism.inter.broker.protocol";
            let mechanism = self.get(mech_key).trim();
            let enabled = &security.sasl_mechanisms[security.inter_broker];
            if !enabled.iter().any(|m| m.name() == mechanism) {
                let names: Vec<&str> = enabled.iter().map(|m| m.name()).collect();
                return Err(self.invalid(
                    mech_key,
                    format!(
                        "the inter-broker listener {} is {}: brokers authenticate to each other with one of its enabled mechanisms ({})",
                        listener.name,
                        listener.protocol.name(),
                        names.join(",")
                    ),
                ));
            }
            let jaas_property = format!("{}.sasl.jaas.config", mechanism.to_ascii_lowercase());
            let (_, jaas) = self
                .listener_value(&listener.name, &jaas_property)
                .ok_or_else(|| {
                    self.invalid(
                        &format!(
                            "listener.name.{}.{jaas_property}",
                            listener.name.to_ascii_lowercase()
                        ),
                        "the broker's own user and password on the inter-broker listener: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"…\" password=\"…\";",
                    )
                })?;
            sasl = Some((mechanism, jaas));
        }
        // The broker's own ssl.* settings, with the listener's protocol and SASL login.
        ClientSecurity::from_lookup(|key| match key {
            "security.protocol" => Some(listener.protocol.name()),
            "sasl.mechanism" => sasl.map(|(mechanism, _)| mechanism),
            "sasl.jaas.config" => sasl.map(|(_, jaas)| jaas),
            other => self.lookup(other),
        })
        .map_err(|e| {
            let key = if e.key.starts_with("sasl.jaas") {
                format!(
                    "listener.name.{}.*.sasl.jaas.config",
                    listener.name.to_ascii_lowercase()
                )
            } else {
                e.key
            };
            self.invalid(&key, format!("inter-broker client: {}", e.reason))
        })
    }
}
