//! The murmur2 partitioner puts keys where the Java client (kafka-clients 4.x, resolved by
//! scripts/kafka/fetch-kafka.sh) puts them: the expected partitions come from the Java client
//! itself.

use std::path::Path;
use std::process::Command;

use bench_harness::partitioner::partition_for_key;

fn kafka_libs() -> String {
    if let Ok(dir) = std::env::var("RINGLOG_KAFKA_LIBS") {
        return dir;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka/fetch-kafka.sh");
    let out = Command::new(script)
        .output()
        .expect("run scripts/kafka/fetch-kafka.sh");
    assert!(
        out.status.success(),
        "fetch-kafka.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn murmur2_partitions_match_the_java_client() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/PartitionsFromJava.java");
    let out = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", kafka_libs()))
        .arg(source)
        .args(["1000", "1", "3", "7", "12", "100", "1000"])
        .output()
        .expect("run java (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "java: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut checked = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (key, parts, expected): (&str, u32, u32) =
            (f[0], f[1].parse().unwrap(), f[2].parse().unwrap());
        assert_eq!(
            partition_for_key(key.as_bytes(), parts),
            expected,
            "key {key} over {parts} partitions"
        );
        checked += 1;
    }
    assert_eq!(checked, 6000, "every key and partition count was compared");
}
