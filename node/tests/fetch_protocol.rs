//! Fetch as Kafka 4.x speaks it, against the real `ringlog` binary:
//! - v12+ with `LastFetchedEpoch`: a fetcher whose last fetched epoch does not end where this
//!   log has it gets `DivergingEpoch` (Kafka's KIP-320 / KIP-595 check, the one followers rely
//!   on) and no records;
//! - v13+ names topics by id (UNKNOWN_TOPIC_ID for an id this cluster does not have);
//! - v15+ carries the fetcher's `ReplicaState`: a broker fetching as a replica of a partition
//!   that has no followers gets NOT_LEADER_OR_FOLLOWER;
//! - incremental fetch sessions (KIP-227): created at epoch 0, then only changes both ways,
//!   FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH, closed at epoch -1; a session
//!   that does not read its quiet partitions again never hides records that arrive, records a
//!   full response left out, or a partition that goes;
//! - a long poll over several partitions gathers records arriving on each in turn.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_client::blocking::{ConnectOptions, Connection};
use kafka_client::security::ClientSecurity;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchRequest, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

struct Ringlog {
    child: Child,
    _dir: tempfile::TempDir,
    addr: String,
}

impl Drop for Ringlog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Ringlog {
    // A free port found by binding port 0 may be taken by a test running beside this one
    // before ringlog binds it: then ringlog exits, and we try another port. Ours is listening
    // once its own log says so (a connect could reach the other test's broker).
    for _ in 0..10 {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log_path = dir.path().join("broker.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringlog"))
            .args(["serve", "--shards", "1", "--listen", &addr, "--data-dir"])
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ringlog");
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if child.try_wait().expect("ringlog status").is_some() {
                break; // could not listen there: another port
            }
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if log.contains("listening") {
                return Ringlog {
                    child,
                    _dir: dir,
                    addr,
                };
            }
            assert!(Instant::now() < until, "ringlog did not listen:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("ringlog could not listen on any of 10 free ports");
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence is constant.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, &records, &opts).unwrap();
    out.freeze()
}

fn fetch(c: &mut Connection, offset: i64, last_fetched_epoch: i32) -> (i16, i64, i32, i64, usize) {
    fetch_as(c, 12, None, -1, offset, last_fetched_epoch)
}

/// One partition-0 fetch of topic `div` at `version` (by `topic_id` from v13), as replica
/// `replica` (-1: a consumer).
fn fetch_as(
    c: &mut Connection,
    version: i16,
    topic_id: Option<uuid::Uuid>,
    replica: i32,
    offset: i64,
    last_fetched_epoch: i32,
) -> (i16, i64, i32, i64, usize) {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.current_leader_epoch = 0;
    p.last_fetched_epoch = last_fetched_epoch;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name("div");
    t.topic_id = topic_id.unwrap_or_default();
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    if version >= 15 {
        req.replica_state = ReplicaState::default().with_replica_id(BrokerId(replica));
    } else {
        req.replica_id = BrokerId(replica);
    }
    req.max_wait_ms = 0;
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &req).unwrap();
    if version >= 13 {
        assert_eq!(
            Some(resp.responses[0].topic_id),
            topic_id,
            "answered by topic id"
        );
    }
    let pd = &resp.responses[0].partitions[0];
    let records = pd.records.as_ref().map_or(0, |r| r.len());
    (
        pd.error_code,
        pd.high_watermark,
        pd.diverging_epoch.epoch,
        pd.diverging_epoch.end_offset,
        records,
    )
}

fn connect(broker: &Ringlog) -> Connection {
    let options = ConnectOptions {
        client_id: "fetch-protocol-test",
        read_timeout: Some(Duration::from_secs(10)),
    };
    Connection::connect(&broker.addr, options, &ClientSecurity::plaintext()).unwrap()
}

/// Creates `topic` with `partitions` partitions; its id.
fn create_topic(c: &mut Connection, topic: &str, partitions: i32) -> uuid::Uuid {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![t];
    create.timeout_ms = 10_000;
    let created: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create).unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    created.topics[0].topic_id
}

fn produce(c: &mut Connection, topic: &str, partition: i32, values: &[&str]) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch(values));
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data = vec![pd];
    let mut produce = ProduceRequest::default();
    produce.acks = 1;
    produce.timeout_ms = 10_000;
    produce.topic_data = vec![td];
    let produced: ProduceResponse = c.call(ApiKey::Produce, 9, &produce).unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
}

#[test]
fn a_fetch_whose_last_epoch_ends_elsewhere_gets_diverging_epoch() {
    let broker = start();
    let mut c = connect(&broker);
    let topic_id = create_topic(&mut c, "div", 1);
    produce(&mut c, "div", 0, &["a", "b", "c"]);

    // The log holds offsets 0..3 in leader epoch 0.
    let (error, hw, epoch, end, records) = fetch(&mut c, 0, -1);
    assert_eq!((error, hw, epoch, end), (0, 3, -1, -1));
    assert!(records > 0, "records from offset 0");
    // A fetcher that read up to 3 in epoch 0: consistent, nothing new yet.
    assert_eq!(fetch(&mut c, 3, 0), (0, 3, -1, -1, 0));
    // One that claims epoch 0 reached 10: epoch 0 ends at 3 here.
    assert_eq!(fetch(&mut c, 10, 0), (0, 3, 0, 3, 0));
    // Below the epoch's end: no divergence, records.
    let (_, _, epoch, end, records) = fetch(&mut c, 2, 0);
    assert_eq!((epoch, end), (-1, -1), "no divergence below the end");
    assert!(records > 0);
    // An epoch newer than any here: Kafka's UNDEFINED_EPOCH (-1, -1, the field's default, so
    // not even sent), and no records.
    assert_eq!(fetch(&mut c, 0, 5), (0, 3, -1, -1, 0));

    // v13 and v17 name the topic by id.
    for version in [13, 17] {
        let (error, hw, _, _, records) = fetch_as(&mut c, version, Some(topic_id), -1, 0, -1);
        assert_eq!((error, hw), (0, 3), "v{version}");
        assert!(records > 0, "v{version}: records by topic id");
        assert_eq!(
            fetch_as(&mut c, version, Some(topic_id), -1, 10, 0),
            (0, 3, 0, 3, 0),
            "v{version}: divergence"
        );
        let unknown = uuid::Uuid::from_u128(42);
        let (error, ..) = fetch_as(&mut c, version, Some(unknown), -1, 0, -1);
        assert_eq!(error, 100, "v{version}: UNKNOWN_TOPIC_ID");
    }
    // A broker fetching as a replica (ReplicaState from v15, replica_id before): no partition
    // has followers yet.
    let (error, ..) = fetch_as(&mut c, 15, Some(topic_id), 2, 0, -1);
    assert_eq!(error, 6, "NOT_LEADER_OR_FOLLOWER");
    let (error, ..) = fetch_as(&mut c, 12, None, 2, 0, -1);
    assert_eq!(error, 6, "NOT_LEADER_OR_FOLLOWER");
}

/// A v12 fetch of topic `sess` in a session: `(partition, offset)` to add or update,
/// partitions to forget.
fn session_fetch(
    c: &mut Connection,
    session_id: i32,
    epoch: i32,
    parts: &[(i32, i64)],
    forget: &[i32],
) -> FetchResponse {
    session_fetch_upto(c, (session_id, epoch), parts, forget, 1 << 20)
}

/// [`session_fetch`] with the response's `max_bytes`.
fn session_fetch_upto(
    c: &mut Connection,
    (session_id, epoch): (i32, i32),
    parts: &[(i32, i64)],
    forget: &[i32],
    max_bytes: i32,
) -> FetchResponse {
    let mut t = FetchTopic::default();
    t.topic = name("sess");
    t.partitions = parts
        .iter()
        .map(|&(p, offset)| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = offset;
            fp.partition_max_bytes = 1 << 20;
            fp
        })
        .collect();
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.max_bytes = max_bytes;
    req.session_id = session_id;
    req.session_epoch = epoch;
    if !parts.is_empty() {
        req.topics = vec![t];
    }
    if !forget.is_empty() {
        let mut f = ForgottenTopic::default();
        f.topic = name("sess");
        f.partitions = forget.to_vec();
        req.forgotten_topics_data = vec![f];
    }
    c.call(ApiKey::Fetch, 12, &req).unwrap()
}

/// `(partition, record bytes)` answered, in order.
fn answered(resp: &FetchResponse) -> Vec<(i32, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.records.as_ref().map_or(0, |r| r.len())))
        })
        .collect()
}

#[test]
fn incremental_fetch_sessions_carry_only_changes() {
    let broker = start();
    let mut c = connect(&broker);
    create_topic(&mut c, "sess", 3);
    produce(&mut c, "sess", 0, &["a"]);

    // Epoch 0: a full fetch creates the session and answers every partition.
    let full = session_fetch(&mut c, 0, 0, &[(0, 0), (1, 0), (2, 0)], &[]);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert!(id > 0, "a session was created");
    let got = answered(&full);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(got[0].1 > 0 && got[1].1 == 0 && got[2].1 == 0);

    // Epoch 1 moves partition 0 past its record: nothing is new anywhere.
    let quiet = session_fetch(&mut c, id, 1, &[(0, 1)], &[]);
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), vec![], "no news, no partitions");

    // A record on partition 2: only partition 2 is answered (its position is still 0).
    produce(&mut c, "sess", 2, &["b", "c"]);
    let news = answered(&session_fetch(&mut c, id, 2, &[], &[]));
    assert_eq!(news.len(), 1);
    assert!(news[0].0 == 2 && news[0].1 > 0, "{news:?}");
    assert_eq!(
        answered(&session_fetch(&mut c, id, 3, &[(2, 2)], &[])),
        vec![]
    );

    // Forget partition 2; a new record there is no longer answered, one on 1 is.
    produce(&mut c, "sess", 2, &["d"]);
    produce(&mut c, "sess", 1, &["e"]);
    let after = answered(&session_fetch(&mut c, id, 4, &[], &[2]));
    assert_eq!(after.iter().map(|g| g.0).collect::<Vec<_>>(), vec![1]);

    // A wrong epoch, an unknown session: refused at the top level, the session kept.
    let wrong = session_fetch(&mut c, id, 9, &[], &[]);
    assert_eq!((wrong.error_code, answered(&wrong)), (71, vec![]));
    assert_eq!(session_fetch(&mut c, id + 1000, 1, &[], &[]).error_code, 70);
    assert_eq!(session_fetch(&mut c, id, 5, &[], &[]).error_code, 0);

    // Epoch -1 closes it: a sessionless full fetch.
    let last = session_fetch(&mut c, id, -1, &[(0, 0)], &[]);
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(answered(&last).len(), 1);
    assert_eq!(
        session_fetch(&mut c, id, 6, &[], &[]).error_code,
        70,
        "closed"
    );
}

/// A long poll over several partitions whose records arrive one partition at a time: each
/// wake-up re-reads only the partitions that moved and keeps the others' answers, so the
/// records of the first are still in the answer when the second's complete `min_bytes`.
#[test]
fn a_long_poll_gathers_records_arriving_on_different_partitions() {
    let broker = start();
    let mut c = connect(&broker);
    create_topic(&mut c, "poll", 3);
    let one_batch = batch(&["first"]).len() as i32;
    let mut producer = connect(&broker);
    let appends = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        produce(&mut producer, "poll", 1, &["first"]);
        std::thread::sleep(Duration::from_millis(300));
        produce(&mut producer, "poll", 2, &["second"]);
    });
    let mut t = FetchTopic::default();
    t.topic = name("poll");
    t.partitions = (0..3)
        .map(|p| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.partition_max_bytes = 1 << 20;
            fp
        })
        .collect();
    let mut req = FetchRequest::default();
    req.max_wait_ms = 8_000;
    req.min_bytes = one_batch + 1;
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    let started = std::time::Instant::now();
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &req).unwrap();
    let waited = started.elapsed();
    appends.join().unwrap();
    let got = answered(&resp);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got[0].1 == 0 && got[1].1 > 0 && got[2].1 > 0,
        "records of partitions 1 and 2 in one answer: {got:?}"
    );
    assert!(
        waited < Duration::from_secs(7),
        "answered once min_bytes arrived, not at max_wait: {waited:?}"
    );
}

/// A session does not read its quiet partitions again while nothing moves: a deleted topic's
/// partitions are still answered with an error at once.
#[test]
fn a_session_learns_that_its_quiet_partitions_are_gone() {
    let broker = start();
    let mut c = connect(&broker);
    create_topic(&mut c, "sess", 2);
    let full = session_fetch(&mut c, 0, 0, &[(0, 0), (1, 0)], &[]);
    let id = full.session_id;
    assert!(id > 0, "a session was created");
    // Nothing new twice: the second request reads nothing (nothing moved).
    assert_eq!(answered(&session_fetch(&mut c, id, 1, &[], &[])), vec![]);
    assert_eq!(answered(&session_fetch(&mut c, id, 2, &[], &[])), vec![]);
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![name("sess")];
    delete.timeout_ms = 10_000;
    let deleted: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 4, &delete).unwrap();
    assert_eq!(deleted.responses[0].error_code, 0);
    let errors: Vec<i16> = session_fetch(&mut c, id, 3, &[], &[])
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert!(
        errors.len() == 2 && errors.iter().all(|&e| e != 0),
        "both partitions answered with an error: {errors:?}"
    );
}

/// A response that filled up leaves the records it had no room for to the next request, even
/// though nothing was appended since: a session reads again a partition whose position is
/// below the high watermark it answered.
#[test]
fn records_left_out_of_a_full_response_come_in_the_next() {
    let broker = start();
    let mut c = connect(&broker);
    create_topic(&mut c, "sess", 3);
    let full = session_fetch(&mut c, 0, 0, &[(0, 0), (1, 0), (2, 0)], &[]);
    let id = full.session_id;
    assert!(id > 0, "a session was created");
    produce(&mut c, "sess", 1, &["one"]);
    produce(&mut c, "sess", 2, &["two"]);
    // One byte of room: partition 1's batch comes whole (KIP-74), partition 2's waits (its
    // high watermark is answered, its records are not).
    let got = answered(&session_fetch_upto(&mut c, (id, 1), &[], &[], 1));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].0 == 1 && got[0].1 > 0, "{got:?}");
    assert_eq!(got[1], (2, 0), "no room for partition 2's records");
    let got = answered(&session_fetch(&mut c, id, 2, &[(1, 1)], &[]));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].0 == 2 && got[0].1 > 0,
        "partition 2's records now: {got:?}"
    );
}
