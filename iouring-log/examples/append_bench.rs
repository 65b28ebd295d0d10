//! Append benchmark of `iouring-log` (run by `scripts/bench/bench-log.sh`, which prints it next to
//! fio's raw-device figures).
//!
//! `append_bench throughput DIR BATCH_BYTES TOTAL_BYTES` appends batches of 1 KiB records
//! totalling BATCH_BYTES until TOTAL_BYTES are on disk (written, then one final fsync), and
//! prints `log_append batch_bytes=.. MiBps=.. cpu_s_per_GiB=..`.
//!
//! The executor gets a 128 MiB registered I/O arena (`BENCH_IO_MEMORY_MIB`), which the tail
//! chunks come from.
//!
//! `append_bench fsync DIR BATCH_BYTES COUNT` appends one batch then `flush()`s (fdatasync),
//! COUNT times, and prints the p50/p99/p99.9 of append+fsync in microseconds.

use std::time::Instant;

use bytes::BytesMut;
use iouring_log::{Durability, LeaderEpoch, Log, LogConfig};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const RECORD_BYTES: usize = 1024;

/// A batch of 1 KiB-value records with incompressible-looking values, about `bytes` long.
fn make_batch(bytes: usize) -> Vec<u8> {
    let count = (bytes / (RECORD_BYTES + 16)).max(1);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let records: Vec<Record> = (0..count as i64)
        .map(|i| {
            let value: Vec<u8> = (0..RECORD_BYTES)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: (i - 1) as i32,
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(value.into()),
                headers: Default::default(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode batch");
    buf.to_vec()
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

async fn throughput(dir: String, batch_bytes: usize, total: u64) {
    let cfg = LogConfig {
        segment_bytes: 1 << 30,
        ..LogConfig::default()
    };
    let log = Log::open(&dir, cfg, 0).await.expect("open log");
    let batch = make_batch(batch_bytes);
    let (start, cpu0) = (Instant::now(), cpu_seconds());
    let mut appended = 0u64;
    while appended < total {
        log.append_as_leader(&batch, LeaderEpoch(0), 0)
            .await
            .expect("append");
        appended += batch.len() as u64;
    }
    log.flush().await.expect("flush");
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    let gib = appended as f64 / (1u64 << 30) as f64;
    println!(
        "log_append batch_bytes={} MiBps={:.1} cpu_s_per_GiB={:.3}",
        batch.len(),
        appended as f64 / secs / (1 << 20) as f64,
        cpu / gib
    );
    log.close().await.expect("close");
}

async fn fsync_latency(dir: String, batch_bytes: usize, count: usize) {
    let log = Log::open(&dir, LogConfig::default(), 0)
        .await
        .expect("open log");
    let batch = make_batch(batch_bytes);
    let mut hist =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    for _ in 0..count {
        let t = Instant::now();
        log.append_as_leader(&batch, LeaderEpoch(0), 0)
            .await
            .expect("append");
        log.flush().await.expect("flush");
        hist.record(t.elapsed().as_micros() as u64).expect("record");
    }
    println!(
        "log_append_fsync batch_bytes={} p50_us={} p99_us={} p999_us={}",
        batch.len(),
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999)
    );
    log.close().await.expect("close");
}

/// Appends `count` batches at `BENCH_RATE` batches per second (default 1000), each waited for
/// as a produce does (ordered append, then a wait until written), and reports the latency from
/// the append to the written acknowledgement.
async fn written_latency(dir: String, batch_bytes: usize, count: usize) {
    let log = Log::open(&dir, LogConfig::default(), 0)
        .await
        .expect("open log");
    let batch = make_batch(batch_bytes);
    let rate: f64 = std::env::var("BENCH_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000.0);
    let hist = std::rc::Rc::new(std::cell::RefCell::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram"),
    ));
    let start = Instant::now();
    let mut waits = Vec::with_capacity(count);
    for i in 0..count {
        let due = start + std::time::Duration::from_secs_f64(i as f64 / rate);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            glommio::timer::sleep(d).await;
        }
        let t = Instant::now();
        let info = log
            .append_as_leader(&batch, LeaderEpoch(0), 0)
            .await
            .expect("append");
        let (log, hist) = (log.clone(), hist.clone());
        waits.push(glommio::spawn_local(async move {
            log.wait_for(Durability::Written, info.last_offset.next())
                .await
                .expect("written");
            let us = t.elapsed().as_micros() as u64;
            hist.borrow_mut().record(us.max(1)).expect("record");
        }));
    }
    for w in waits {
        w.await;
    }
    let h = hist.borrow().clone();
    println!(
        "log_append_written batch_bytes={} rate={rate} p50_us={} p99_us={} p999_us={} max_us={}",
        batch.len(),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max()
    );
    log.close().await.expect("close");
}

/// Keeps large buffers on the heap instead of fresh mmaps: every write buffer and tail chunk
/// would otherwise page-fault and be zeroed by the kernel on each use.
fn keep_large_allocations_on_heap() {
    // SAFETY: mallopt only changes glibc's allocation thresholds; called before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

fn main() {
    if std::env::var_os("BENCH_DEFAULT_MALLOC").is_none() {
        keep_large_allocations_on_heap();
    }
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: append_bench throughput|fsync|written DIR BATCH_BYTES TOTAL_BYTES|COUNT";
    let [_, mode, dir, batch_bytes, amount] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let parse = |name: &str, v: &str| -> u64 {
        v.parse().unwrap_or_else(|_| {
            eprintln!("{name} must be a whole number, got '{v}'\n{usage}");
            std::process::exit(2)
        })
    };
    let batch_bytes = parse("BATCH_BYTES", batch_bytes) as usize;
    let amount = parse("TOTAL_BYTES|COUNT", amount);
    let (mode, dir) = (mode.clone(), dir.clone());
    let io_memory_mib: usize = std::env::var("BENCH_IO_MEMORY_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    glommio::LocalExecutorBuilder::default()
        .io_memory(io_memory_mib << 20)
        .spawn(move || async move {
            match mode.as_str() {
                "throughput" => throughput(dir, batch_bytes, amount).await,
                "fsync" => fsync_latency(dir, batch_bytes, amount as usize).await,
                "written" => written_latency(dir, batch_bytes, amount as usize).await,
                other => {
                    eprintln!("unknown mode '{other}'\n{usage}");
                    std::process::exit(2);
                }
            }
        })
        .expect("start executor (is ulimit -l >= 512 KiB?)")
        .join()
        .expect("executor");
}
