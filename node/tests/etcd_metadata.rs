//! The etcd metadata layer against a real etcd (Debian's `etcd-server`, installed by
//! `scripts/install-deps.sh`): broker registration under a lease, controller election and
//! fencing, compare-and-swap of partition states, and the ordered watch — with etcd killed and
//! restarted, and stopped (SIGSTOP) past the lease.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use node::ids::NodeId;
use node::metadata::etcd::election::{current_controller, ControllerLease};
use node::metadata::etcd::partitions::{self, CasOutcome, PartitionRecord};
use node::metadata::etcd::session::{live_brokers, BrokerSession};
use node::metadata::etcd::store::EtcdStore;
use node::metadata::etcd::{Doorbell, Etcd, EtcdConfig, EtcdError, MetadataEvent, MetadataWatch};
use node::metadata::lease::LeaseClock;
use node::metadata::snapshot::NodeInfo;
use node::metadata::store::{MetadataStore, Saved};
use node::metadata::{Snapshot, TopicMeta};

/// One etcd member on loopback ports of its own, with its data in a temp dir.
struct EtcdProcess {
    child: Option<Child>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

impl EtcdProcess {
    fn start() -> EtcdProcess {
        let mut p = EtcdProcess {
            child: None,
            dir: tempfile::tempdir().expect("temp dir"),
            client_port: free_port(),
            peer_port: free_port(),
        };
        // Free ports found by binding port 0 may be taken by a test running beside this one
        // before etcd binds them: then try others.
        for _ in 0..10 {
            if p.spawn() {
                return p;
            }
            p.client_port = free_port();
            p.peer_port = free_port();
        }
        panic!("etcd could not listen on any of 10 pairs of free ports");
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Starts etcd on its ports; `false` if it exited (a port was taken).
    fn spawn(&mut self) -> bool {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("t={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(self.dir.path().join("etcd.log")).expect("etcd log"),
            ))
            .spawn()
            .expect("etcd not found: run scripts/install-deps.sh (Debian's etcd-server)");
        self.child = Some(child);
        // Ready once its own log says so (a connect could reach another test's etcd, should
        // the port have been taken in between: then this one exits).
        let log_path = self.dir.path().join("etcd.log");
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let exited = self.child.as_mut().expect("spawned").try_wait();
            if exited.expect("etcd status").is_some() {
                return false;
            }
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if log.contains("ready to serve client requests") {
                return true;
            }
            assert!(Instant::now() < until, "etcd not ready within 20 s:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(ok.success(), "kill {sig} {pid}");
    }

    fn kill9_and_restart(&mut self) {
        self.signal("-KILL");
        self.child
            .take()
            .expect("running")
            .wait()
            .expect("reap etcd");
        assert!(self.spawn(), "etcd did not restart on its ports");
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn connect(etcd: &EtcdProcess, cluster: &str, session_secs: u64) -> Etcd {
    Etcd::connect(EtcdConfig {
        endpoints: vec![etcd.endpoint()],
        cluster_id: cluster.into(),
        session_timeout: Duration::from_secs(session_secs),
        request_timeout: Duration::from_secs(2),
    })
    .expect("connect to etcd")
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

fn record(epoch: i32) -> PartitionRecord {
    PartitionRecord {
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        elr: vec![],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: epoch,
        adding_replicas: vec![],
        removing_replicas: vec![],
    }
}

#[test]
fn a_broker_registers_once_and_its_registration_dies_with_its_lease() {
    let etcd = EtcdProcess::start();
    let client = connect(&etcd, "reg", 2);
    let first = BrokerSession::register(
        &client,
        NodeId(1),
        r#"{"host":"127.0.0.1"}"#,
        &LeaseClock::leased(),
    )
    .unwrap();
    assert!(first.holds_lease());
    let brokers = live_brokers(&client).unwrap();
    assert_eq!(brokers.len(), 1);
    assert_eq!(
        (brokers[0].node, brokers[0].broker_epoch),
        (NodeId(1), first.broker_epoch())
    );
    match BrokerSession::register(&client, NodeId(1), "{}", &LeaseClock::leased()) {
        Err(EtcdError::DuplicateRegistration {
            node: NodeId(1),
            epoch,
            ..
        }) => {
            assert_eq!(epoch, first.broker_epoch())
        }
        other => panic!(
            "a second node 1 registered: {:?}",
            other.map(|s| s.broker_epoch())
        ),
    }
    // Kept alive: still registered after three TTLs.
    std::thread::sleep(Duration::from_secs(6));
    assert!(first.holds_lease());
    assert_eq!(live_brokers(&client).unwrap().len(), 1);
    // Stopped keeping it alive (as a paused broker): etcd drops it within the TTL.
    let old_epoch = first.broker_epoch();
    first.abandon();
    assert!(!first.holds_lease());
    let took = wait_for("registration expired", Duration::from_secs(8), || {
        live_brokers(&client).unwrap().is_empty()
    });
    // The TTL, plus etcd's expiry check interval and this loop's polling.
    assert!(
        took <= Duration::from_millis(4500),
        "expired after {took:?}"
    );
    let again = BrokerSession::register(&client, NodeId(1), "{}", &LeaseClock::leased()).unwrap();
    assert!(again.broker_epoch() > old_epoch, "a new broker epoch");
    again.close().unwrap();
    assert!(
        live_brokers(&client).unwrap().is_empty(),
        "closing deregisters at once"
    );
}

#[test]
fn a_broker_cut_off_from_etcd_knows_its_lease_is_gone_before_etcd_does() {
    let mut etcd = EtcdProcess::start();
    let client = connect(&etcd, "cut", 2);
    let clock = LeaseClock::leased();
    let session = BrokerSession::register(&client, NodeId(7), "{}", &clock).unwrap();
    clock.metadata_applied();
    assert!(clock.holds(), "the shards see the lease");
    std::thread::sleep(Duration::from_millis(800));
    // etcd stops answering (SIGSTOP) for longer than the TTL.
    etcd.signal("-STOP");
    let stopped = Instant::now();
    let lost_after = wait_for("lease given up", Duration::from_secs(4), || {
        !session.holds_lease()
    });
    assert!(
        // At most the TTL after the last answered keep-alive (sent before the stop), plus
        // this loop's polling.
        lost_after <= Duration::from_millis(2300),
        "held {lost_after:?} without etcd"
    );
    assert!(
        !clock.holds(),
        "the shards stop leading when the session does"
    );
    std::thread::sleep(Duration::from_secs(2).saturating_sub(stopped.elapsed()));
    etcd.signal("-CONT");
    // It registers again under a new epoch (revoking the old lease if etcd kept it).
    let old = session.broker_epoch();
    session.close().unwrap();
    let again = BrokerSession::register(&client, NodeId(7), "{}", &clock).unwrap();
    assert!(again.broker_epoch() > old);
    assert!(
        !clock.holds(),
        "a new session counts once the shards applied the metadata"
    );
    clock.metadata_applied();
    assert!(clock.holds(), "a new session publishes its deadline");
    // And survives etcd being killed and restarted within its TTL.
    let again_epoch = again.broker_epoch();
    etcd.kill9_and_restart();
    std::thread::sleep(Duration::from_secs(3));
    assert!(again.holds_lease(), "lease lost across an etcd restart");
    let brokers = live_brokers(&client).unwrap();
    assert_eq!(brokers[0].broker_epoch, again_epoch);
}

#[test]
fn one_controller_at_a_time_and_a_deposed_one_cannot_write() {
    let etcd = EtcdProcess::start();
    let client = connect(&etcd, "ctl", 2);
    let a = BrokerSession::register(&client, NodeId(1), "{}", &LeaseClock::leased()).unwrap();
    let b = BrokerSession::register(&client, NodeId(2), "{}", &LeaseClock::leased()).unwrap();
    let wait = Duration::from_secs(1);
    let ca = ControllerLease::campaign(&client, &a, "1", wait)
        .unwrap()
        .expect("the first candidate is elected");
    assert!(ControllerLease::campaign(&client, &b, "2", wait)
        .unwrap()
        .is_none());
    assert_eq!(
        current_controller(&client).unwrap(),
        Some(("1".into(), ca.epoch()))
    );

    let created = partitions::compare_and_swap(&client, &ca, "t", 0, 0, &record(0)).unwrap();
    let CasOutcome::Committed(rev) = created else {
        panic!("create refused: {created:?}")
    };
    assert_eq!(
        partitions::compare_and_swap(&client, &ca, "t", 0, 0, &record(0)).unwrap(),
        CasOutcome::Conflict(Some((record(0), rev))),
        "created twice"
    );

    // The controller's broker pauses past its lease: the other one takes over.
    a.abandon();
    let cb = ControllerLease::campaign(&client, &b, "2", Duration::from_secs(6))
        .unwrap()
        .expect("elected once the first controller's lease expired");
    assert!(cb.epoch() > ca.epoch(), "a higher controller epoch");
    // The old controller wakes up and writes: fenced, nothing written.
    assert_eq!(
        partitions::compare_and_swap(&client, &ca, "t", 0, rev, &record(1)).unwrap(),
        CasOutcome::NotController
    );
    assert_eq!(
        partitions::read(&client, "t", 0).unwrap(),
        Some((record(0), rev))
    );
    let next = partitions::compare_and_swap(&client, &cb, "t", 0, rev, &record(1)).unwrap();
    assert!(matches!(next, CasOutcome::Committed(r) if r > rev));
    cb.resign(&client).unwrap();
    assert_eq!(current_controller(&client).unwrap(), None);
}

#[test]
fn of_concurrent_compare_and_swaps_on_one_revision_exactly_one_commits() {
    let etcd = EtcdProcess::start();
    let client = connect(&etcd, "cas", 5);
    let s = BrokerSession::register(&client, NodeId(1), "{}", &LeaseClock::leased()).unwrap();
    let c = ControllerLease::campaign(&client, &s, "1", Duration::from_secs(2))
        .unwrap()
        .unwrap();
    let CasOutcome::Committed(rev) =
        partitions::compare_and_swap(&client, &c, "t", 3, 0, &record(0)).unwrap()
    else {
        panic!("create refused")
    };
    let barrier = Arc::new(Barrier::new(8));
    let outcomes: Vec<CasOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=8)
            .map(|i| {
                let (client, c, barrier) = (client.clone(), c.clone(), Arc::clone(&barrier));
                scope.spawn(move || {
                    barrier.wait();
                    partitions::compare_and_swap(&client, &c, "t", 3, rev, &record(i)).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let committed = outcomes
        .iter()
        .filter(|o| matches!(o, CasOutcome::Committed(_)))
        .count();
    assert_eq!(committed, 1, "{outcomes:?}");
    let (now, now_rev) = partitions::read(&client, "t", 3).unwrap().unwrap();
    let (all, at) = partitions::read_all(&client).unwrap();
    assert_eq!(all, vec![(("t".to_owned(), 3), now.clone(), now_rev)]);
    assert!(at >= now_rev);
    for o in &outcomes {
        if let CasOutcome::Conflict(Some((seen, _))) = o {
            assert_eq!(seen, &now, "a refused writer sees the winner's state");
        }
    }
}

#[test]
fn the_watch_delivers_every_change_once_in_order_across_an_etcd_restart() {
    let mut etcd = EtcdProcess::start();
    let client = connect(&etcd, "watch", 8);
    let s = BrokerSession::register(&client, NodeId(1), "{}", &LeaseClock::leased()).unwrap();
    let c = ControllerLease::campaign(&client, &s, "1", Duration::from_secs(2))
        .unwrap()
        .unwrap();
    let bell = Doorbell::default();
    let rings = Arc::new(AtomicUsize::new(0));
    let counted = rings.clone();
    bell.set(Box::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    }));
    let (initial, revision, watch) = MetadataWatch::start(&client, bell).unwrap();
    assert!(initial.iter().any(|e| e.key.ends_with("/brokers/1")));
    assert!(revision > 0);

    let mut rev = 0;
    for epoch in 0..60 {
        if epoch == 30 {
            etcd.kill9_and_restart();
        }
        // A write may fail while etcd restarts: retry until it lands (a CAS cannot land twice).
        loop {
            match partitions::compare_and_swap(&client, &c, "w", 0, rev, &record(epoch)) {
                Ok(CasOutcome::Committed(r)) => {
                    rev = r;
                    break;
                }
                Ok(CasOutcome::Conflict(Some((seen, r)))) if seen == record(epoch) => {
                    rev = r; // an earlier try landed after all
                    break;
                }
                Ok(other) => panic!("write {epoch} refused: {other:?}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    let mut seen = Vec::new();
    let mut last_revision = revision;
    while seen.len() < 60 {
        match watch.events.recv_timeout(Duration::from_secs(10)) {
            Ok(MetadataEvent::Put(e)) if e.key.ends_with("/partitions/w/0") => {
                assert!(e.mod_revision > last_revision, "out of order");
                last_revision = e.mod_revision;
                let r: PartitionRecord = serde_json::from_slice(&e.value).unwrap();
                seen.push(r.partition_epoch);
            }
            Ok(MetadataEvent::Reload) => panic!("history lost without compaction"),
            Ok(_) => {}
            Err(e) => panic!("watch stalled after {:?}: {e}", seen.last()),
        }
    }
    assert_eq!(
        seen,
        (0..60).collect::<Vec<_>>(),
        "every change once, in order"
    );
    // The writes came in at least two batches (etcd restarted between them): the first one's
    // ring came before the second was delivered.
    assert!(
        rings.load(Ordering::SeqCst) >= 1,
        "the watch rings its bell after delivering events"
    );
}

fn node_info(node: i32) -> NodeInfo {
    NodeInfo {
        node: NodeId(node),
        host: "127.0.0.1".into(),
        port: 9000 + node as u16,
        shards: 1,
        listeners: BTreeMap::new(),
        controlled_shutdown: false,
        rack: None,
    }
}

fn store_config(etcd: &EtcdProcess, cluster: &str) -> EtcdConfig {
    EtcdConfig {
        endpoints: vec![etcd.endpoint()],
        cluster_id: cluster.into(),
        session_timeout: Duration::from_secs(4),
        request_timeout: Duration::from_secs(2),
    }
}

/// A topic document that differs for each `n` (a save must write something).
fn with_topic(n: u32) -> Snapshot {
    let mut s = Snapshot::default();
    let name = format!("t{n}");
    let topic = TopicMeta {
        name: name.clone(),
        id: uuid::Uuid::from_u128(u128::from(n) + 1),
        partitions: vec![],
        configs: BTreeMap::new(),
    };
    s.topics.insert(name, topic);
    s
}

/// KIP-841 and KIP-903 on the store: a node in controlled shutdown is no longer one an ISR may
/// take in, a restarted node is eligible under its new broker epoch only, and an ISR addition
/// decided on a registration read before it changed is not saved.
#[test]
fn isr_additions_are_decided_on_the_added_brokers_registration_as_read() {
    let etcd = EtcdProcess::start();
    let cluster = "kip903";
    let mut b = EtcdStore::open(store_config(&etcd, cluster), node_info(2)).unwrap();
    let a = EtcdStore::open(store_config(&etcd, cluster), node_info(1)).unwrap();
    let mut a = Some(a);
    let eligible = |s: &mut EtcdStore| {
        s.poll().unwrap();
        s.isr_eligible().unwrap()
    };
    wait_for("node 1 seen by node 2", Duration::from_secs(10), || {
        eligible(&mut b).contains_key(&NodeId(1))
    });
    let first_epoch = eligible(&mut b)[&NodeId(1)];
    let guard: BTreeSet<NodeId> = [NodeId(1)].into();
    assert_eq!(b.save_guarded(&with_topic(1), &guard).unwrap(), Saved::Yes);

    // Node 1 stops: marked first. An addition decided on what node 2 read before: not saved.
    a.as_mut().unwrap().begin_controlled_shutdown().unwrap();
    assert_eq!(
        b.save_guarded(&with_topic(2), &guard).unwrap(),
        Saved::Conflict,
        "node 1's registration changed since node 2 read it"
    );
    wait_for("node 1 no longer eligible", Duration::from_secs(10), || {
        !eligible(&mut b).contains_key(&NodeId(1))
    });
    assert!(
        b.live_nodes().unwrap().iter().any(|n| n.node == NodeId(1)),
        "still live (it serves until it leaves)"
    );

    // Node 1 leaves and comes back: eligible again, under a new broker epoch only.
    drop(a.take());
    wait_for("node 1 gone", Duration::from_secs(10), || {
        b.poll().unwrap();
        !b.live_nodes().unwrap().iter().any(|n| n.node == NodeId(1))
    });
    let _again = EtcdStore::open(store_config(&etcd, cluster), node_info(1)).unwrap();
    wait_for("node 1 back", Duration::from_secs(10), || {
        eligible(&mut b).contains_key(&NodeId(1))
    });
    let second_epoch = eligible(&mut b)[&NodeId(1)];
    assert!(
        second_epoch > first_epoch,
        "{second_epoch} after {first_epoch}"
    );
    assert_eq!(b.save_guarded(&with_topic(3), &guard).unwrap(), Saved::Yes);
}

/// The controller candidacies under `/ringlog/<cluster>/controller` (key, create revision) and
/// etcd's current revision, read with a client of the test's own.
fn candidacies(etcd: &EtcdProcess, cluster: &str) -> (Vec<(String, i64)>, i64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.endpoint()], None)
            .await
            .unwrap();
        let prefix = format!("/ringlog/{cluster}/controller");
        let got = c
            .get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
            .await
            .unwrap();
        let keys = got
            .kvs()
            .iter()
            .map(|kv| (kv.key_str().unwrap().to_owned(), kv.create_revision()))
            .collect();
        (keys, got.header().unwrap().revision())
    })
}

/// A candidate waiting to become controller waits quietly: its candidacy key stays the one it
/// wrote and etcd takes no write at all, past several request timeouts and past etcd's
/// keep-alive policy (`--grpc-keepalive-min-time`, 5 s). Before: the waiting campaign call ran
/// out of the request timeout, etcd resigned it and the call wrote the key again, and the
/// clients' 1 s pings made etcd close their connections every few seconds — four etcd writes
/// (fsyncs) every few seconds from an idle cluster. It still takes over when the controller
/// goes.
#[test]
fn a_waiting_controller_candidate_writes_nothing_while_it_waits() {
    let etcd = EtcdProcess::start();
    let cluster = "quiet";
    let a = EtcdStore::open(store_config(&etcd, cluster), node_info(1)).unwrap();
    wait_for("node 1 elected", Duration::from_secs(10), || {
        a.controller_lease().is_some()
    });
    let b = EtcdStore::open(store_config(&etcd, cluster), node_info(2)).unwrap();
    wait_for("node 2 a candidate", Duration::from_secs(10), || {
        candidacies(&etcd, cluster).0.len() == 2
    });
    let before = candidacies(&etcd, cluster);
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(
        candidacies(&etcd, cluster),
        before,
        "the candidacies (key, create revision) and etcd's revision did not move"
    );
    assert!(b.controller_lease().is_none());

    drop(a);
    wait_for("node 2 elected", Duration::from_secs(10), || {
        b.controller_lease().is_some()
    });
}
