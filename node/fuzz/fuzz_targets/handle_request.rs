//! The handlers' entry point: every decodable request runs against a real shard context with
//! one real partition log (in a temp dir) and must not panic the shard, whatever it asks.
#![no_main]

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{mpsc, Arc};

use bytes::Bytes;
use glommio::LocalExecutor;
use libfuzzer_sys::fuzz_target;
use node::config::Properties;
use node::metadata::{PartitionMeta, Snapshot, TopicMeta};
use node::partition::Partition;
use node::server::frame::{decode_request, Decoded};
use node::shard::ShardCtx;

struct Harness {
    executor: LocalExecutor,
    ctx: Rc<ShardCtx>,
    _dir: std::path::PathBuf,
}

thread_local! {
    static HARNESS: Harness = setup();
}

fn setup() -> Harness {
    let dir = std::env::temp_dir().join(format!("ringlog-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut p = Properties::default();
    p.set("num.shards", "1").unwrap();
    p.set("log.dirs", dir.to_str().unwrap()).unwrap();
    p.set("auto.create.topics.enable", "false").unwrap();
    let config = Arc::new(p.build().unwrap());
    // The control plane is absent: admin requests get an error answer.
    let (commands, _) = mpsc::channel();
    let mut topics = BTreeMap::new();
    topics.insert(
        "fuzz".to_owned(),
        TopicMeta { name: "fuzz".into(), id: Default::default(), partitions: vec![PartitionMeta { shard: 0, leader_epoch: iouring_log::LeaderEpoch(0) }], configs: BTreeMap::new() },
    );
    let executor = LocalExecutor::default();
    let ctx = executor.run(async {
        let log = iouring_log::Log::open(dir.join("fuzz-0"), config.log.clone(), 0).await.unwrap();
        let ctx = Rc::new(ShardCtx {
            shard: 0,
            config: config.clone(),
            snapshot: RefCell::new(Arc::new(Snapshot { version: 1, topics })),
            partitions: RefCell::default(),
            commands,
            data_arrived: Default::default(),
            producer_ids: Arc::new(AtomicI64::new(1)),
            stop: node::stop::StopSignal::new(
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            ),
            connections: Cell::new(0),
            groups: Default::default(),
        });
        let part = Partition::new("fuzz".into(), 0, log, 1 << 20);
        ctx.partitions.borrow_mut().insert(("fuzz".into(), 0), Rc::new(part));
        ctx
    });
    Harness { executor, ctx, _dir: dir }
}

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Request { version, body, .. }) = decode_request(Bytes::copy_from_slice(data)) else { return };
    HARNESS.with(|h| {
        let ctx = h.ctx.clone();
        h.executor.run(async move {
            // Long polls would only slow the fuzzer down (each waits up to max_wait_ms): run
            // only fetches that barely wait.
            if let kafka_protocol::messages::RequestKind::Fetch(f) = body.as_ref() {
                if f.max_wait_ms > 10 {
                    return;
                }
            }
            let _ = node::handlers::dispatch(&ctx, &Default::default(), *body, version).await;
        });
    });
});
