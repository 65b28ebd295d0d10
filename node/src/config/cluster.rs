//! Cluster settings: where the metadata lives (embedded or etcd) and how replicas follow.

use super::{ConfigError, Properties};
use super::{MetadataConfig, ReplicaConfig};

impl Properties {
    pub(super) fn metadata(&self) -> Result<MetadataConfig, ConfigError> {
        match self.get("metadata.store") {
            "embedded" => Ok(MetadataConfig::Embedded),
            "etcd" => {
                let endpoints: Vec<String> = self
                    .get("metadata.etcd.endpoints")
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_owned)
                    .collect();
                if endpoints.is_empty() {
                    return Err(self.invalid(
                        "metadata.etcd.endpoints",
                        "metadata.store=etcd needs at least one endpoint (http://host:port)",
                    ));
                }
                if let Some(bad) = endpoints
                    .iter()
                    .find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
                {
                    let reason = format!("'{bad}' is not http://host:port");
                    return Err(self.invalid("metadata.etcd.endpoints", reason));
                }
                let cluster_id = self.get("cluster.id").to_owned();
                let valid_id = !cluster_id.is_empty()
                    && cluster_id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
                if !valid_id {
                    return Err(
                        self.invalid("cluster.id", "letters, digits, '.', '_' and '-' only")
                    );
                }
                let session_timeout_ms: u64 = self.int("broker.session.timeout.ms")?;
                let bounds = crate::limits::BROKER_SESSION_TIMEOUT_MIN_MS
                    ..=crate::limits::BROKER_SESSION_TIMEOUT_MAX_MS;
                if !bounds.contains(&session_timeout_ms) {
                    return Err(self.invalid(
                        "broker.session.timeout.ms",
                        format!("{}..={}", bounds.start(), bounds.end()),
                    ));
                }
                Ok(MetadataConfig::Etcd {
                    endpoints,
                    cluster_id,
                    session_timeout_ms,
                })
            }
            _ => Err(self.invalid("metadata.store", "embedded or etcd")),
        }
    }

    pub(super) fn replica(&self) -> Result<ReplicaConfig, ConfigError> {
        let lag: i64 = self.int("replica.lag.time.max.ms")?;
        if lag < 1 {
            return Err(self.invalid("replica.lag.time.max.ms", "must be at least 1"));
        }
        let wait: i32 = self.int("replica.fetch.wait.max.ms")?;
        if !(0..=60_000).contains(&wait) {
            return Err(self.invalid("replica.fetch.wait.max.ms", "0..=60000"));
        }
        let max_bytes: i32 = self.int("replica.fetch.max.bytes")?;
        if max_bytes < 1024 {
            return Err(self.invalid("replica.fetch.max.bytes", "must be at least 1024"));
        }
        Ok(ReplicaConfig {
            lag_time_max_ms: lag,
            fetch_wait_max_ms: wait,
            fetch_max_bytes: max_bytes,
        })
    }
}
