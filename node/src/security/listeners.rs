//! Kafka's listeners: `listeners=NAME://HOST:PORT,...`, each name mapped to a security protocol
//! by `listener.security.protocol.map`, advertised to clients by `advertised.listeners`. Every
//! listener is opened on every shard: shard `i` of a listener bound to port `p` listens on
//! `p + i`. Pure parsing: the TLS and SASL settings a protocol needs are built elsewhere.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

pub use kafka_client::security::SecurityProtocol;

/// One listener: its name, protocol, shard 0's bound address, and what clients are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Shard 0's address; shard `i` listens on port + i.
    pub bind: SocketAddr,
    pub advertised_host: String,
    /// Shard 0's advertised port; shard `i`'s is port + i.
    pub advertised_port: u16,
}

impl Listener {
    /// The address shard `shard` listens on.
    pub fn bind_of(&self, shard: usize) -> SocketAddr {
        SocketAddr::new(self.bind.ip(), self.bind.port() + shard as u16)
    }
}

/// Why the listener properties do not make sense: the property and the reason (the caller
/// names the value).
#[derive(Debug, PartialEq, Eq)]
pub struct ListenerError {
    pub key: &'static str,
    pub reason: String,
}

fn error(key: &'static str, reason: impl Into<String>) -> ListenerError {
    ListenerError {
        key,
        reason: reason.into(),
    }
}

/// `NAME://HOST:PORT` split; a bare `HOST:PORT` is named PLAINTEXT (`--listen`'s form).
fn split_endpoint(key: &'static str, raw: &str) -> Result<(String, String, u16), ListenerError> {
    let raw = raw.trim();
    let (name, addr) = match raw.split_once("://") {
        Some((n, a)) => (n.trim().to_owned(), a),
        None => ("PLAINTEXT".to_owned(), raw),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(error(
            key,
            format!("listener name '{name}' must be letters, digits, '_' or '-'"),
        ));
    }
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| error(key, format!("'{raw}': expected NAME://HOST:PORT")))?;
    let port: u16 = port.parse().map_err(|_| {
        error(
            key,
            format!("'{raw}': port is not a number from 0 to 65535"),
        )
    })?;
    Ok((name, host.trim_matches(['[', ']']).to_owned(), port))
}

/// The address to bind for `host`: empty and 0.0.0.0 bind every interface.
fn bind_ip(key: &'static str, host: &str) -> Result<IpAddr, ListenerError> {
    match host {
        "" | "0.0.0.0" => Ok(IpAddr::from([0, 0, 0, 0])),
        "localhost" => Ok(IpAddr::from([127, 0, 0, 1])),
        h => h.parse().map_err(|_| {
            error(
                key,
                format!("host '{h}' must be an IP address or localhost"),
            )
        }),
    }
}

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// Parses the listener properties for a node of `shards` shards. `inter_broker` names the
/// listener other brokers use (empty: the first). Returns the listeners in the order given and
/// the index of the inter-broker one.
pub fn parse(
    listeners: &str,
    protocol_map: &str,
    advertised: &str,
    inter_broker: &str,
    shards: usize,
) -> Result<(Vec<Listener>, usize), ListenerError> {
    let mut map = BTreeMap::new();
    for pair in protocol_map.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, proto) = pair.split_once(':').ok_or_else(|| {
            error(
                "listener.security.protocol.map",
                format!("'{pair}': expected NAME:PROTOCOL"),
            )
        })?;
        let proto = SecurityProtocol::parse(proto).ok_or_else(|| {
            error(
                "listener.security.protocol.map",
                format!("'{pair}': protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
            )
        })?;
        map.insert(name.trim().to_owned(), proto);
    }
    let mut adv = BTreeMap::new();
    for raw in advertised.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, host, port) = split_endpoint("advertised.listeners", raw)?;
        if host.is_empty() || host == "0.0.0.0" {
            return Err(error(
                "advertised.listeners",
                format!("'{raw}': clients cannot connect to an unspecified host"),
            ));
        }
        if adv.insert(name.clone(), (host, port)).is_some() {
            return Err(error(
                "advertised.listeners",
                format!("listener {name} is advertised twice"),
            ));
        }
    }
    let mut out: Vec<Listener> = Vec::new();
    for raw in listeners.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, host, port) = split_endpoint("listeners", raw)?;
        let protocol = *map.get(&name).ok_or_else(|| {
            error(
                "listeners",
                format!(
                    "listener {name} has no security protocol in listener.security.protocol.map"
                ),
            )
        })?;
        if out.iter().any(|l| l.name == name) {
            return Err(error(
                "listeners",
                format!("listener {name} is given twice"),
            ));
        }
        if port as usize + shards > 65536 {
            return Err(error(
                "listeners",
                format!(
                    "listener {name}: ports {port}..{port}+{shards} (one per shard) pass 65535"
                ),
            ));
        }
        let ip = bind_ip("listeners", &host)?;
        let (advertised_host, advertised_port) = adv.remove(&name).unwrap_or_else(|| {
            let h = if ip.is_unspecified() {
                "127.0.0.1".to_owned()
            } else {
                ip.to_string()
            };
            (h, port)
        });
        out.push(Listener {
            name,
            protocol,
            bind: SocketAddr::new(ip, port),
            advertised_host,
            advertised_port,
        });
    }
    if out.is_empty() {
        return Err(error("listeners", "no listener given"));
    }
    if let Some(name) = adv.keys().next() {
        return Err(error(
            "advertised.listeners",
            format!("listener {name} is advertised but not in listeners"),
        ));
    }
    // One shard's port of a listener may not be another's.
    for (i, a) in out.iter().enumerate() {
        for b in &out[i + 1..] {
            let (pa, pb) = (a.bind.port() as usize, b.bind.port() as usize);
            if pa != 0 && pb != 0 && pa < pb + shards && pb < pa + shards {
                return Err(error(
                    "listeners",
                    format!(
                        "listeners {} and {} overlap: each takes {shards} ports (one per shard) from its port",
                        a.name, b.name
                    ),
                ));
            }
        }
    }
    let inter = if inter_broker.trim().is_empty() {
        0
    } else {
        out.iter()
            .position(|l| l.name == inter_broker.trim())
            .ok_or_else(|| {
                error(
                    "inter.broker.listener.name",
                    format!("no listener named {inter_broker}"),
                )
            })?
    };
    Ok((out, inter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_as_kafka_names_them() {
        let (l, inter) = parse(
            "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9192,CLIENT://localhost:9292",
            &format!("{DEFAULT_PROTOCOL_MAP},CLIENT:SSL"),
            "SASL_SSL://broker.example:19192",
            "",
            2,
        )
        .unwrap();
        assert_eq!(inter, 0);
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(l[1].bind_of(1).to_string(), "0.0.0.0:9193");
        assert_eq!(
            (l[1].advertised_host.as_str(), l[1].advertised_port),
            ("broker.example", 19192)
        );
        assert_eq!(
            (l[2].protocol, l[2].advertised_host.as_str()),
            (SecurityProtocol::Ssl, "127.0.0.1")
        );
        // A bare HOST:PORT is the PLAINTEXT listener.
        let (l, _) = parse("127.0.0.1:9092", DEFAULT_PROTOCOL_MAP, "", "", 1).unwrap();
        assert_eq!(l[0].name, "PLAINTEXT");
    }

    #[test]
    fn bad_listeners_say_what_is_wrong() {
        let bad = |listeners: &str, advertised: &str, inter: &str| {
            parse(listeners, DEFAULT_PROTOCOL_MAP, advertised, inter, 4).unwrap_err()
        };
        assert!(bad("FOO://:9092", "", "").reason.contains("FOO"));
        assert!(bad("PLAINTEXT://:9092,SSL://:9094", "", "")
            .reason
            .contains("overlap"));
        assert!(bad("PLAINTEXT://:9092,PLAINTEXT://:9192", "", "")
            .reason
            .contains("twice"));
        assert_eq!(
            bad("PLAINTEXT://:9092", "SSL://h:1", "").key,
            "advertised.listeners"
        );
        assert_eq!(
            bad("PLAINTEXT://:9092", "", "SSL").key,
            "inter.broker.listener.name"
        );
        assert!(bad("PLAINTEXT://host.example:9092", "", "")
            .reason
            .contains("IP address"));
        assert!(bad("PLAINTEXT://:65534", "", "").reason.contains("65535"));
        assert!(
            parse("PLAINTEXT://:9092", "PLAINTEXT:TLS", "", "", 1)
                .unwrap_err()
                .key
                == "listener.security.protocol.map"
        );
    }
}
