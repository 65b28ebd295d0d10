//! The null broker through the real binaries: `ringlog-bench null-broker` started as a process,
//! a workload run against it by `ringlog-bench run` (every record published is consumed, with
//! no error), and a request for an API it does not serve closes the connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ringlog-bench");

struct NullBroker {
    child: Child,
    addr: String,
    /// Kept open: the broker writes why a connection closed to its stderr.
    _stderr: BufReader<std::process::ChildStderr>,
}

impl Drop for NullBroker {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Starts a null broker on a free port and reads the address it announces.
fn start() -> NullBroker {
    let mut child = Command::new(BIN)
        .args(["null-broker", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("ringlog-bench starts");
    let mut line = String::new();
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    stderr.read_line(&mut line).expect("a line on stderr");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("listening on ADDR")
        .to_owned();
    assert!(line.contains("listening on"), "{line}");
    NullBroker {
        child,
        addr,
        _stderr: stderr,
    }
}

#[test]
fn a_workload_runs_against_the_null_broker_and_reads_back_every_record() {
    let broker = start();
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.yaml");
    std::fs::write(
        &workload,
        "name: null-floor\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 1024\n\
         producersPerTopic: 1\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\n\
         producerRate: 2000\nkeyDistributor: NO_KEY\ntestDurationMinutes: 0.05\n\
         warmupDurationMinutes: 0.02\n\
         producer: { acks: 1, batchSizeBytes: 131072, lingerMs: 1, compression: none, maxInFlight: 5 }\n",
    )
    .unwrap();
    let out = dir.path().join("r.json");
    let status = Command::new(BIN)
        .args([
            "run",
            "--bootstrap",
            &broker.addr,
            "--target",
            "null",
            "--workload",
        ])
        .arg(&workload)
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["errors"], 0, "{}", r["errorKinds"]);
    assert_eq!(r["driver"], "null");
    let sum = |key: &str| -> f64 {
        r[key]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_f64())
            .sum()
    };
    let (published, consumed) = (sum("publishRate"), sum("consumeRate"));
    assert!(published > 0.0, "nothing published: {r}");
    // Rates are sampled per interval: consumption trails publication by at most a sample.
    assert!(
        (published - consumed).abs() <= published * 0.05,
        "published {published} consumed {consumed}"
    );
    assert_eq!(
        r["backlog"].as_array().unwrap().last().unwrap(),
        0,
        "backlog left"
    );
    assert!(r["aggregatedEndToEndLatency50pct"].as_f64().unwrap() > 0.0);
}

#[test]
fn an_api_it_does_not_serve_closes_the_connection() {
    let broker = start();
    let mut s = TcpStream::connect(&broker.addr).unwrap();
    // JoinGroup (11) v5, correlation id 1, no client id, then a body the broker never reads.
    let mut frame = Vec::new();
    frame.extend_from_slice(&11i16.to_be_bytes());
    frame.extend_from_slice(&5i16.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&[0u8; 16]);
    s.write_all(&(frame.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "closed without an answer");
}
