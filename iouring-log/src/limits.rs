//! Every bound of the partition log in one place.
//!
//! Arithmetic behind the numbers:
//! - Direct I/O works in blocks of [`DIRECT_IO_ALIGNMENT`] bytes: every write position, write
//!   length and buffer address is a multiple of it.
//! - The in-memory tail is cut into chunks of [`TAIL_SMALL_CHUNK_BYTES`] while a partition is
//!   quiet and of [`TAIL_CHUNK_BYTES`] once it is busy, each starting at a multiple of its own
//!   length. A partition written to holds one small chunk at least and two once written past
//!   the first ([`TAIL_RETAIN_BYTES`]), so N quiet partitions hold up to N × 32 KiB of tail
//!   (10 000: 320 MiB) while written to; one idle for [`TAIL_PARK_IDLE`] keeps only its partial
//!   last block (≤ 4 KiB: 10 000 idle partitions 40 MiB); a busy one holds up to 4 writes in
//!   flight plus the chunk being filled (≤ 5 MiB).
//! - One write is at most [`WRITE_BYTES_MAX`] and at most [`WRITES_IN_FLIGHT_MAX`] are in
//!   flight per active segment, so the unwritten tail that is being written at any moment is at
//!   most 4 MiB.
//! - Positions in a segment are `u32` (Kafka's offset index stores them in 4 bytes), so a
//!   segment is at most [`SEGMENT_BYTES_MAX`] (2 GiB - 1 in Kafka; we keep it aligned).

/// Block size of O_DIRECT I/O and the alignment of every buffer the kernel copies from.
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// Size of one chunk of the in-memory tail of the active segment.
pub const TAIL_CHUNK_BYTES: usize = 1 << 20;

/// How long deleting a segment waits for the fetches reading it before it is renamed
/// `.deleted` and left to a background task (see `Segment::delete_files`): a response on its
/// way to a consumer holds the segment until sent.
pub const DELETE_READERS_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long that background task waits for the readers before deleting the file anyway (a
/// reader left after this has its descriptor's last close free the blocks on the shard).
pub const DELETE_READERS_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(600);

/// A deleted segment is shrunk by this much per helper-thread call before its unlink. On this
/// machine's ext4 (mounted `discard`) freeing blocks discards them synchronously, and the
/// discards take device time from the appends' writes: at 900 000 msg/s with a 1 GiB segment
/// deleted per partition every few seconds, publish p99 was 81 ms freeing each file at once,
/// 42–58 ms in 64 MiB steps, 23–26 in 16 MiB and 17 ms in 4 MiB ones, which also kept the
/// rate at 900 000 where the others dipped each check (`perf/results/2026-12-05-sustainable/steps/`).
/// Deletion kept pace (data directory 11–15 GB throughout).
pub const DELETE_SHRINK_STEP_BYTES: u64 = 4 << 20;

/// Read handles (O_DIRECT or through the page cache) the read cache keeps open per shard (the
/// oldest opened is closed beyond): with one descriptor per active segment for writes, 10 000
/// partitions on two shards stay under a 20 000 open-files limit.
pub const READ_FILES_MAX: usize = 2048;

/// Size of a tail chunk of a quiet partition.
pub const TAIL_SMALL_CHUNK_BYTES: usize = 16 << 10;

/// Written bytes a quiet partition's tail keeps after a small chunk before dropping it (so one
/// more small chunk: 3 s of a partition taking 5 KB/s).
pub const TAIL_RETAIN_BYTES: u64 = TAIL_SMALL_CHUNK_BYTES as u64;

/// A small chunk filled faster than this makes the tail busy (16 KiB in 100 ms: 160 KB/s).
pub const TAIL_BUSY_FILL: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a partition takes no append before its tail is parked (its chunks given back,
/// its partial last block kept in 4 KiB): 10 000 idle partitions then hold 40 MiB at most,
/// not 320. Consumers of an idle partition read its last bytes from the read cache.
pub const TAIL_PARK_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// Released tail chunks kept per thread for reuse (16 MiB).
pub const TAIL_CHUNK_POOL_MAX: usize = 16;

/// Released small tail chunks kept per thread for reuse (4 MiB).
pub const TAIL_SMALL_CHUNK_POOL_MAX: usize = 256;

/// A data write, `fdatasync` or seal of a segment file taking at least each of these is counted
/// as slow (`segment_io::io_times`): the device floor of a 16 KiB O_DIRECT write is ~0.2 ms at
/// p99 on the machines measured, of an `fdatasync` ~0.2-0.5 ms (`scripts/bench/device-floor.sh`).
pub const SLOW_IO_THRESHOLDS: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(1),
    std::time::Duration::from_millis(5),
    std::time::Duration::from_millis(20),
];

/// Largest single write to a segment file.
pub const WRITE_BYTES_MAX: usize = 1 << 20;

/// Writes in flight per active segment (the disk needs 2–4 to reach its bandwidth).
pub const WRITES_IN_FLIGHT_MAX: usize = 4;

/// Largest segment: positions must fit the offset index's `u32`.
pub const SEGMENT_BYTES_MAX: u64 = (1 << 31) - DIRECT_IO_ALIGNMENT as u64;

/// Smallest `segment.bytes` accepted (Kafka's lower bound for `log.segment.bytes` is 14 bytes;
/// we need room for at least one batch header).
pub const SEGMENT_BYTES_MIN: u64 = BATCH_HEADER_BYTES as u64;

/// Largest record batch accepted (header included). Kafka's `message.max.bytes` is checked by
/// the broker; this bound keeps a corrupt length field from making recovery read gigabytes.
pub const BATCH_BYTES_MAX: usize = 64 << 20;

/// Size of the fixed RecordBatch v2 header (through `recordsCount`).
pub const BATCH_HEADER_BYTES: usize = 61;

/// Bytes before the `batchLength` value starts counting (`baseOffset` + `batchLength`).
pub const BATCH_LOG_OVERHEAD: usize = 12;

/// Appended bytes not yet written that a log holds before appends wait for the disk
/// (backpressure: memory use per partition is bounded by this plus one tail chunk).
pub const UNWRITTEN_BYTES_MAX: u64 = 64 << 20;

/// Least time between two periodic recovery-point checkpoints (Kafka's
/// `log.flush.offset.checkpoint.interval.ms` default). Roll and close always write it.
pub const RECOVERY_POINT_CHECKPOINT_INTERVAL_MS: i64 = 60_000;

/// How far past an active segment's appended end zero fill keeps the file converted while its
/// device is idle, so that later data writes land on converted blocks (see `write_planner.rs`).
/// Only busy partitions' segments (see `tail.rs`) zero-fill: ten thousand quiet ones would write
/// 10 GB of zeros for a few MB/s of records.
pub const ZERO_FILL_AHEAD_BYTES: u64 = 1 << 20;

/// One zero-fill write. The device serves requests in order, and a write or `fdatasync` issued
/// while a zero fill is in flight waits for it: a 1 MiB zero fill held the device ~1 ms, and
/// under `flush.messages=1` at 100 000 msg/s 651 of 653 `fdatasync`s slower than 1 ms overlapped
/// one (`perf/results/2026-12-06-fsync-tail`); a 256 KiB piece holds it ~0.25 ms.
pub const ZERO_FILL_WRITE_BYTES: usize = 256 << 10;

/// Largest preallocation step of active segment files.
pub const PREALLOCATE_BYTES: u64 = 64 << 20;

/// First preallocation step: steps double with the file up to [`PREALLOCATE_BYTES`] (see
/// `appender::preallocation_target`), within the shard's budget.
pub const PREALLOCATE_MIN_BYTES: u64 = 4 << 20;

/// Preallocated and not yet written bytes a shard's active segments reserve together, about:
/// each step is at most this divided by the shard's active segments (so 4 partitions take
/// 64 MiB steps, 5 000 take 200 KiB ones and reserve 1 GiB in all, not 20 GB).
pub const PREALLOCATE_BUDGET_BYTES_PER_SHARD: u64 = 1 << 30;

/// Preallocation steps are multiples of this (and never smaller).
pub const PREALLOCATE_GRANULE_BYTES: u64 = 64 << 10;

/// Size of one read while recovering or scanning a segment file.
pub const SCAN_READ_BYTES: usize = 1 << 20;

/// Bytes read at once when scanning batch headers for a fetch (index interval + slack): the
/// largest window. A scan starts with [`HEADER_SCAN_FIRST_BYTES`] and doubles the window each
/// time it needs more, so a fetch at the head of a log of large batches copies a few hundred
/// bytes to find its batch, not 16 KiB (that copy was 1.4 % of a broker CPU profile at 50 000
/// msg/s; the broker's CPU-s/GB moved less than run-to-run noise).
pub const HEADER_SCAN_READ_BYTES: usize = 16 << 10;

/// The first window of a batch header scan (room for the header of the batch at the index
/// entry's position and a few small ones after it).
pub const HEADER_SCAN_FIRST_BYTES: usize = 256;

/// Chunks a read reads ahead of the consumer (the next 8 MiB: 4 reached 0.83× of the device in
/// a cold catch-up, 8 reached 0.94×).
pub const READ_AHEAD_CHUNKS: usize = 8;

/// Read-ahead chunk reads in flight per shard (the device needs 2–4 in flight; several
/// consumers catch up at once).
pub const READ_AHEAD_IN_FLIGHT_MAX: usize = 16;

/// O_DIRECT read bytes in flight per shard ([`crate::read_gate`]). fio's 1 MiB reads of a
/// fresh file here: ~3 GB/s with 4 in flight, ~2.5 GB/s with 16, 4 MiB reads ~2 GB/s. A cold
/// catch-up on 2 shards, reads submitted when made (`perf/results/2026-12-04-catchup/gate/`,
/// `submit/`): 2 MiB a shard drained at 2 096 MB/s, 3 MiB 2 194, 4 MiB 2 027–2 109, 6 MiB
/// 2 208, 8 MiB 1 908–2 455; publish p99 while draining 7.4 / 8.0 / 9.9–10.3 / 10.3 /
/// 16–17 ms (the device's latency grows with the depth), against 1 525–1 583 MB/s and
/// 22–28 ms with every read started at once.
pub const READ_BYTES_IN_FLIGHT_MAX: usize = 4 << 20;

/// A chunk read ahead is evicted after the cache's other chunks until a fetch reads it or it is
/// this old (its consumer went away); until then it also counts against the read-ahead room
/// (half the read cache's budget).
pub const READ_AHEAD_UNREAD_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// A chunk read (or the wait for one another reader started) still not done after this is
/// logged as a warning: a device read takes milliseconds; this much means something is stuck.
pub const SLOW_READ_WARN: std::time::Duration = std::time::Duration::from_secs(10);

/// Size of one offset index entry: relative offset u32 + position u32.
pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;

/// Size of one time index entry: timestamp i64 + relative offset u32.
pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

/// Entries a memory index may hold: one per 4 KiB of a maximal segment, plus one.
pub const INDEX_ENTRIES_MAX: usize = (SEGMENT_BYTES_MAX as usize / DIRECT_IO_ALIGNMENT) + 1;

const _: () = assert!(TAIL_CHUNK_BYTES.is_multiple_of(DIRECT_IO_ALIGNMENT));
const _: () = assert!(TAIL_SMALL_CHUNK_BYTES.is_multiple_of(DIRECT_IO_ALIGNMENT));
const _: () = assert!(TAIL_CHUNK_BYTES.is_multiple_of(TAIL_SMALL_CHUNK_BYTES));
const _: () = assert!(WRITE_BYTES_MAX.is_multiple_of(DIRECT_IO_ALIGNMENT));
const _: () = assert!(WRITE_BYTES_MAX <= TAIL_CHUNK_BYTES * 4);
const _: () = assert!(SEGMENT_BYTES_MAX.is_multiple_of(DIRECT_IO_ALIGNMENT as u64));
const _: () = assert!(SEGMENT_BYTES_MAX <= u32::MAX as u64);
const _: () = assert!(PREALLOCATE_BYTES.is_multiple_of(DIRECT_IO_ALIGNMENT as u64));
const _: () = assert!(ZERO_FILL_WRITE_BYTES.is_multiple_of(DIRECT_IO_ALIGNMENT));
const _: () = assert!(ZERO_FILL_AHEAD_BYTES.is_multiple_of(ZERO_FILL_WRITE_BYTES as u64));
const _: () = assert!(ZERO_FILL_AHEAD_BYTES <= PREALLOCATE_MIN_BYTES);
const _: () = assert!(PREALLOCATE_BYTES.is_multiple_of(PREALLOCATE_MIN_BYTES));
const _: () = assert!(BATCH_BYTES_MAX < SEGMENT_BYTES_MAX as usize);
const _: () = assert!(WRITES_IN_FLIGHT_MAX >= 2 && WRITES_IN_FLIGHT_MAX <= 4);
const _: () = assert!(HEADER_SCAN_READ_BYTES >= BATCH_HEADER_BYTES);
const _: () = assert!(HEADER_SCAN_FIRST_BYTES >= BATCH_HEADER_BYTES);
const _: () = assert!(HEADER_SCAN_FIRST_BYTES <= HEADER_SCAN_READ_BYTES);
const _: () = assert!(UNWRITTEN_BYTES_MAX >= (WRITE_BYTES_MAX * WRITES_IN_FLIGHT_MAX) as u64);
