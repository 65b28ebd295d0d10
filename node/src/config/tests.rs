use super::storage::usable_memory_bytes;
use super::*;

#[test]
fn defaults_build_and_bad_values_name_the_property() {
    let mut p = Properties::default();
    p.set("num.shards", "2").unwrap();
    let c = p.build().unwrap();
    assert_eq!(
        (c.shards, c.num_partitions, c.listener(0).bind.port()),
        (2, 2, 9092)
    );
    assert!(matches!(
        p.set("no.such", "1"),
        Err(ConfigError::Unknown(_))
    ));
    p.set("log.segment.bytes", "abc").unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("log.segment.bytes") && err.contains("abc"),
        "{err}"
    );
    assert!(p.set_pair("novalue").is_err());
}

#[test]
fn read_cache_budget_defaults_to_256_mib_per_shard() {
    let mut p = Properties::default();
    p.set("num.shards", "2").unwrap();
    let auto = p.build().unwrap().read_cache_bytes;
    assert_eq!(auto, (512 << 20).min(usable_memory_bytes() / 4));
    p.set("log.read.cache.bytes", "0").unwrap();
    assert_eq!(p.build().unwrap().read_cache_bytes, 0);
    p.set("log.read.cache.bytes", "-2").unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("log.read.cache.bytes") && err.contains("-2"),
        "{err}"
    );
    let err = p.set("fetch.zero.copy", "true").unwrap_err().to_string();
    assert!(
        err.contains("fetch.zero.copy") && err.contains("removed"),
        "{err}"
    );
}

#[test]
fn request_budget_is_bounded_by_default_and_minus_one_lifts_it() {
    let mut p = Properties::default();
    assert_eq!(p.build().unwrap().queued_max_request_bytes, Some(512 << 20));
    assert_eq!(p.build().unwrap().metrics_listen, None);
    p.set("metrics.listen", "localhost:9404").unwrap();
    assert_eq!(
        p.build().unwrap().metrics_listen,
        Some("127.0.0.1:9404".parse().unwrap())
    );
    for bad in [
        "9404",
        "127.0.0.1:http",
        "example.com:9404",
        "1.2.3.4:70000",
    ] {
        p.set("metrics.listen", bad).unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("metrics.listen") && err.contains(bad),
            "{bad}: {err}"
        );
    }
    p.set("metrics.listen", "").unwrap();
    p.set("queued.max.request.bytes", "-1").unwrap();
    assert_eq!(p.build().unwrap().queued_max_request_bytes, None);
    p.set("queued.max.request.bytes", "4096").unwrap();
    assert_eq!(p.build().unwrap().queued_max_request_bytes, Some(4096));
    for bad in ["0", "-5"] {
        p.set("queued.max.request.bytes", bad).unwrap();
        let err = p.build().unwrap_err().to_string();
        assert!(
            err.contains("queued.max.request.bytes") && err.contains(bad),
            "{err}"
        );
    }
}

#[test]
fn inter_broker_sasl_names_what_is_missing_and_never_shows_a_secret() {
    let mut p = Properties::default();
    for (k, v) in [
        ("metadata.store", "etcd"),
        ("metadata.etcd.endpoints", "http://127.0.0.1:2379"),
        (
            "listeners",
            "INTERNAL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
        ),
        (
            "listener.security.protocol.map",
            "INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ),
        ("inter.broker.listener.name", "INTERNAL"),
    ] {
        p.set(k, v).unwrap();
    }
    // Kafka's default mechanism, GSSAPI, is not one ringlog has.
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("sasl.mechanism.inter.broker.protocol") && err.contains("GSSAPI"),
        "{err}"
    );
    p.set("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512")
        .unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("listener.name.internal.scram-sha-512.sasl.jaas.config"),
        "{err}"
    );
    let key = "listener.name.internal.scram-sha-512.sasl.jaas.config";
    p.set(key, "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"s3cret-pw\";").unwrap();
    let c = p.build().unwrap();
    let client = &c.security.inter_broker_client;
    assert_eq!(client.sasl.as_ref().unwrap().username, "broker");
    assert!(!format!("{p:?} {client:?}").contains("s3cret-pw"));
    // A login module ringlog cannot use: named, the value (with its password) not shown.
    p.set(
        key,
        "com.sun.security.auth.module.Krb5LoginModule required password=\"s3cret-pw\";",
    )
    .unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("sasl.jaas.config") && !err.contains("s3cret-pw"),
        "{err}"
    );
    let err = p
        .set("listener.name.internal.ssl.keystore.location", "/x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("per-listener"), "{err}");
    // Without a cluster nothing connects to other brokers: nothing is needed.
    p.set("metadata.store", "embedded").unwrap();
    assert!(p.build().is_ok());
}

#[test]
fn per_listener_client_auth_and_mechanisms() {
    let mut p = Properties::default();
    for (k, v) in [
        (
            "listeners",
            "SASL_SSL://127.0.0.1:9192,SSL://127.0.0.1:9292,PLAINTEXT://127.0.0.1:9092",
        ),
        ("ssl.keystore.key", "unused: the build stops before the key"),
        ("listener.name.nosuch.ssl.client.auth", "required"),
    ] {
        p.set(k, v).unwrap();
    }
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("listener.name.nosuch.ssl.client.auth") && err.contains("no listener"),
        "{err}"
    );
    let mut p = Properties::default();
    p.set(
        "listeners",
        "SASL_SSL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
    )
    .unwrap();
    p.set("listener.name.PLAINTEXT.ssl.client.auth", "required")
        .unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(err.contains("applies to SSL and SASL_SSL"), "{err}");
    let mut p = Properties::default();
    p.set(
        "listeners",
        "SASL_SSL://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092",
    )
    .unwrap();
    p.set("listener.name.sasl_ssl.sasl.enabled.mechanisms", "GSSAPI")
        .unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("listener.name.sasl_ssl.sasl.enabled.mechanisms"),
        "{err}"
    );
    p.set("listener.name.sasl_ssl.sasl.enabled.mechanisms", "PLAIN")
        .unwrap();
    p.set("listener.name.sasl_ssl.ssl.client.auth", "sometimes")
        .unwrap();
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("listener.name.sasl_ssl.ssl.client.auth") && err.contains("sometimes"),
        "{err}"
    );
}
