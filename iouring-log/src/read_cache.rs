//! The shard's read cache: 1 MiB chunks of segment files in memory, so that a fetch never waits
//! on a thread and a consumer a little behind the head reads memory, not the device.
//!
//! What it holds, under one memory budget per shard (least recently used chunk out first):
//! - **chunks just written**: when the appender's tail releases a full chunk (its bytes are on
//!   disk), the chunk's buffer moves here instead of being freed (Redpanda's batch cache has
//!   the same role): the appends bypassed the page cache, and this is what stands in for it;
//! - **chunks read**: a miss reads the chunk through io_uring into an aligned buffer (glommio's
//!   main ring: no helper thread), from the block its reader needs to the chunk's final bytes
//!   (the budget counts what a chunk holds), and a read starts reads of the next
//!   [`READ_AHEAD_CHUNKS`] chunks its segment has final in the file (read ahead per consumer
//!   position, several in flight; [`crate::read_gate`] admits O_DIRECT reads to the device a
//!   few MiB at a time, a fetch's before read-ahead). A chunk the appender wrote only with
//!   O_DIRECT is read with O_DIRECT (no page cache); a chunk it wrote any bytes of through the page cache (a quiet
//!   partition's, see `segment_io`) is read through the page cache
//!   ([`CachedSegment::mark_page_cache_written`]): its recent bytes are dirty pages there, and
//!   an O_DIRECT read of them makes the kernel write them back and wait for the device first
//!   (ten thousand quiet partitions' consumers fell behind at 50 000 records/s on that wait).
//!   A chunk stays marked. Where the two kinds of I/O meet (a partition turning busy takes
//!   O_DIRECT from the next big chunk on) the kernel keeps them coherent: an O_DIRECT write
//!   flushes and drops the cached pages of its range before and after it, and a reader only
//!   ever reads bytes already written.
//!
//! Chunk `k` of a segment is file positions `[k * CHUNK, (k + 1) * CHUNK)`, the same cut as
//! the tail's. A cached chunk holds the bytes that were final when it was filled (`valid`); a
//! read that needs more than that reads again. Truncation of a segment ([`invalidate_from`])
//! drops its chunks from the cut on and keeps loads already running from inserting; a segment
//! whose last handle is dropped takes its chunks with it.
//!
//! Thread-local (one cache per shard); it must not be touched from another thread.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

use glommio::io::{BufferedFile, DmaBuffer, OpenOptions, ReadResult};

use crate::error::IoError;
use crate::helper_thread::on_helper_thread;
use crate::limits::{
    DIRECT_IO_ALIGNMENT, READ_AHEAD_CHUNKS, READ_AHEAD_IN_FLIGHT_MAX, READ_AHEAD_UNREAD_TTL,
    READ_FILES_MAX, SLOW_READ_WARN, TAIL_CHUNK_BYTES,
};
use crate::notify::Notify;
use crate::read_gate::{self, Class, Urgency};
use std::time::{Duration, Instant};

/// Bytes of one cache chunk (the tail's chunk size).
pub const CHUNK: usize = TAIL_CHUNK_BYTES;

/// How often [`CachedSegment::wait_unread`] looks again.
const UNREAD_POLL: Duration = Duration::from_millis(10);

/// `(segment id, chunk index)`.
type Key = (u64, u64);

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    static NEXT_SEGMENT_ID: Cell<u64> = const { Cell::new(1) };
    /// Read handles open, oldest opened first: beyond [`READ_FILES_MAX`] the oldest is closed
    /// (reopened when read again), so the shard's open files stay bounded however many
    /// segments are read.
    static OPEN: RefCell<std::collections::VecDeque<(std::rc::Weak<CachedSegment>, Handle)>> =
        const { RefCell::new(std::collections::VecDeque::new()) };
}

/// How a read handle reads the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handle {
    /// O_DIRECT: from the device, no page cache.
    Direct,
    /// Through the page cache.
    PageCache,
}

/// A segment file as the read cache knows it: an id that is never reused, which of its chunks
/// were written through the page cache, and the file opened for reads (on first use; one
/// handle with O_DIRECT, one without).
pub struct CachedSegment {
    id: u64,
    /// Where the file is: moved when the log cleaner replaces the segment ([`relocate`]).
    ///
    /// [`relocate`]: CachedSegment::relocate
    path: RefCell<Rc<PathBuf>>,
    direct: RefCell<Option<Rc<BufferedFile>>>,
    page_cache: RefCell<Option<Rc<BufferedFile>>>,
    /// Bit `k` set: chunk `k` had bytes written through the page cache (never cleared; a
    /// chunk read through the page cache that the device also has is only a copy more).
    page_cache_written: RefCell<Vec<u64>>,
    /// Itself, weakly: its place in the open-handles queue.
    me: std::rc::Weak<CachedSegment>,
}

impl CachedSegment {
    pub fn new(path: Rc<PathBuf>) -> Rc<CachedSegment> {
        let id = NEXT_SEGMENT_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        Rc::new_cyclic(|me| CachedSegment {
            id,
            path: RefCell::new(path),
            direct: RefCell::new(None),
            page_cache: RefCell::new(None),
            page_cache_written: RefCell::new(Vec::new()),
            me: me.clone(),
        })
    }

    pub fn path(&self) -> Rc<PathBuf> {
        self.path.borrow().clone()
    }

    /// Waits until nothing but the caller holds the segment (no fetch response, view or load),
    /// at most `max`; whether it got there.
    pub(crate) async fn wait_unread(self: &Rc<Self>, max: std::time::Duration) -> bool {
        let deadline = Instant::now() + max;
        while Rc::strong_count(self) > 1 {
            if Instant::now() >= deadline {
                return false;
            }
            glommio::timer::sleep(UNREAD_POLL).await;
        }
        true
    }

    /// Closes the read handles (reads opened later open it again).
    pub(crate) fn close_handles(&self) {
        self.direct.borrow_mut().take();
        self.page_cache.borrow_mut().take();
    }

    /// The file was renamed (a replaced segment kept for its readers): reads that open it
    /// from now on open it there.
    pub fn relocate(&self, path: Rc<PathBuf>) {
        *self.path.borrow_mut() = path;
    }

    /// The appender writes file positions `[start, end)` through the page cache (called before
    /// the write is issued, so before any reader may read those bytes): their chunks are read
    /// through the page cache from now on.
    pub fn mark_page_cache_written(&self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let mut bits = self.page_cache_written.borrow_mut();
        for index in start / CHUNK as u64..=(end - 1) / CHUNK as u64 {
            let (word, bit) = ((index / 64) as usize, index % 64);
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            bits[word] |= 1 << bit;
        }
    }

    /// Whether chunk `index` had bytes written through the page cache.
    pub fn page_cache_written(&self, index: u64) -> bool {
        let bits = self.page_cache_written.borrow();
        bits.get((index / 64) as usize)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    fn slot(&self, kind: Handle) -> &RefCell<Option<Rc<BufferedFile>>> {
        match kind {
            Handle::Direct => &self.direct,
            Handle::PageCache => &self.page_cache,
        }
    }

    async fn handle(&self, kind: Handle) -> Result<Rc<BufferedFile>, IoError> {
        if let Some(f) = self.slot(kind).borrow().as_ref() {
            return Ok(f.clone());
        }
        // A glommio "buffered" file, with O_DIRECT or without: its reads go to the main ring.
        // As a `DmaFile` they would go to glommio's poll ring (IOPOLL), which glommio enables
        // when its probe read hits an empty file, and where every read of these machines'
        // virtio disks (no poll queues) fails with EOPNOTSUPP.
        let mut options = OpenOptions::new();
        options.read(true);
        if kind == Handle::Direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let path = self.path();
        let file = on_helper_thread(options.buffered_open(path.as_path()))
            .await
            .map(Rc::new)
            .map_err(|e| IoError::new("opening for reads", path.as_path(), e))?;
        // Two first reads may both open it; the first one stored wins, the other is dropped.
        if let Some(f) = self.slot(kind).borrow().as_ref() {
            return Ok(f.clone());
        }
        *self.slot(kind).borrow_mut() = Some(file.clone());
        OPEN.with(|open| {
            let mut open = open.borrow_mut();
            open.retain(|(w, _)| w.strong_count() > 0);
            while open.len() >= READ_FILES_MAX {
                if let Some((oldest, kind)) = open.pop_front() {
                    if let Some(oldest) = oldest.upgrade() {
                        // Reads running on it keep their clone until they finish.
                        oldest.slot(kind).borrow_mut().take();
                    }
                }
            }
            open.push_back((self.me.clone(), kind));
        });
        Ok(file)
    }
}

impl Drop for CachedSegment {
    /// No load of this segment can be running (each holds the segment), so its chunks go
    /// without invalidating other segments' loads.
    fn drop(&mut self) {
        let id = self.id;
        // `try_with`: the thread's cache may already be gone when the thread exits.
        let _ = CACHE.try_with(|c| c.borrow_mut().remove_from((id, 0)));
    }
}

enum ChunkBytes {
    /// A released tail chunk (all of it appended and written).
    Written(Rc<DmaBuffer>),
    /// A chunk read from the file.
    Read(ReadResult),
    /// No bytes, taking this much of the budget (the cache's own tests).
    #[cfg(test)]
    Sized(usize),
}

/// One cached chunk: its bytes `[start, valid)` (offsets in the chunk) are the file's bytes at
/// the chunk's positions. A read from the file starts where its reader needs (aligned down to
/// a block), not at the chunk's start: a consumer that comes back for a quiet partition's few
/// new kilobytes reads those, not again the whole chunk before them.
pub struct CachedChunk {
    bytes: ChunkBytes,
    start: usize,
    valid: usize,
}

impl CachedChunk {
    /// The bytes at chunk offsets `[from, to)`; `start <= from <= to <= valid`.
    pub fn bytes(&self, from: usize, to: usize) -> &[u8] {
        debug_assert!(self.start <= from && from <= to && to <= self.valid);
        let held = match &self.bytes {
            ChunkBytes::Written(b) => &b.as_bytes()[..self.valid],
            ChunkBytes::Read(r) => &r[..self.valid - self.start],
            #[cfg(test)]
            ChunkBytes::Sized(_) => &[],
        };
        &held[from - self.start..to - self.start]
    }

    /// Whether it holds chunk offsets `[from, need)`.
    fn holds(&self, from: usize, need: usize) -> bool {
        self.start <= from && self.valid >= need
    }

    /// Memory it takes (what the budget counts).
    fn size(&self) -> usize {
        match &self.bytes {
            ChunkBytes::Written(_) => CHUNK,
            ChunkBytes::Read(r) => r.len(),
            #[cfg(test)]
            ChunkBytes::Sized(n) => *n,
        }
    }
}

struct Entry {
    chunk: Rc<CachedChunk>,
    tick: u64,
    /// Read ahead and not read by a fetch yet: since when. Such a chunk is evicted after
    /// the others until it is [`READ_AHEAD_UNREAD_TTL`] old (its consumer went away).
    unread_since: Option<Instant>,
    /// A fetch read it: it is in [`Cache::lru_fetched`], evicted before the chunks no fetch has
    /// read yet (in [`Cache::lru`]).
    fetched: bool,
}

impl Entry {
    fn protected(&self, now: Instant) -> bool {
        self.unread_since
            .is_some_and(|t| now.duration_since(t) < READ_AHEAD_UNREAD_TTL)
    }
}

/// A chunk being read: later readers of the same chunk wait for it.
struct Loading {
    done: Notify,
    start: usize,
    valid: usize,
    result: RefCell<Option<Result<Rc<CachedChunk>, String>>>,
    /// Raised when a fetch waits for this read (a read-ahead then goes before other
    /// read-ahead at the device, [`read_gate`]).
    urgency: Urgency,
}

/// Counters of the shard's cache (for tests, logs and benchmarks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub budget_bytes: usize,
    pub used_bytes: usize,
    pub chunks: usize,
    pub hits: u64,
    pub misses: u64,
    pub read_ahead: u64,
    /// Misses and read-aheads read through the page cache (chunks written through it).
    pub page_cache_reads: u64,
    pub inserted_written: u64,
    pub evicted: u64,
    /// Read-ahead chunks evicted before a fetch read them (device reads wasted).
    pub read_ahead_evicted_unread: u64,
    /// Read-ahead chunks no fetch read within [`READ_AHEAD_UNREAD_TTL`].
    pub read_ahead_expired_unread: u64,
}

#[derive(Default)]
struct Cache {
    budget: usize,
    used: usize,
    tick: u64,
    entries: BTreeMap<Key, Entry>,
    /// Chunks no fetch has read yet (just written, or read ahead), least recently used first.
    lru: BTreeMap<u64, Key>,
    /// Chunks a fetch has read, least recently used first: evicted first, so a consumer
    /// catching up from far behind (reading each chunk once, in order) does not push out the
    /// chunks just written that consumers near the head are about to read — with one LRU
    /// order, a 4 GB catch-up read every byte from the device while the cache held the last
    /// 512 MB of it when it started.
    lru_fetched: BTreeMap<u64, Key>,
    loading: HashMap<Key, Rc<Loading>>,
    /// Bumped by every invalidation: a load that started before one does not insert.
    invalidations: u64,
    read_ahead_in_flight: usize,
    /// Read-ahead chunks cached and not read yet ([`Entry::unread_since`]).
    read_ahead_unread: usize,
    /// When unread read-ahead chunks were last checked for expiry.
    unread_swept: Option<Instant>,
    stats: CacheStats,
}

impl Cache {
    fn get(&mut self, key: Key, (from, need): (usize, usize)) -> Option<Rc<CachedChunk>> {
        if !self.entries.get(&key)?.chunk.holds(from, need) {
            return None;
        }
        self.touch(key)
    }

    /// Marks `key` most recently used and read.
    fn touch(&mut self, key: Key) -> Option<Rc<CachedChunk>> {
        let tick = self.tick + 1;
        let entry = self.entries.get_mut(&key)?;
        self.tick = tick;
        if entry.fetched {
            self.lru_fetched.remove(&entry.tick);
        } else {
            self.lru.remove(&entry.tick);
        }
        entry.tick = tick;
        entry.fetched = true;
        if entry.unread_since.take().is_some() {
            self.read_ahead_unread -= 1;
        }
        self.lru_fetched.insert(tick, key);
        Some(entry.chunk.clone())
    }

    /// Whether another read-ahead chunk fits: read-ahead in flight and read ahead but not yet
    /// read take at most half the budget, so a shard with more consumers catching up than its
    /// budget has room for reads ahead less for each of them instead of evicting chunks it
    /// read ahead before they are read. Unbounded, that read a 4 GB backlog twice (16 chunks
    /// ahead in a 32 MiB budget) and 128 MB of 4 partitions 13 times over (8 chunks ahead in
    /// 8 MiB: `test_read_ahead_in_a_small_cache_reads_each_byte_once`). The other half is for
    /// the chunks fetches are reading (read in part) and those just written: with three
    /// quarters for read-ahead, that test read 180 MB for 128.
    ///
    /// Unread chunks older than [`READ_AHEAD_UNREAD_TTL`] stop counting (checked at most once
    /// a second): a consumer that went away does not hold the shard's read-ahead room.
    fn read_ahead_fits(&mut self, now: Instant) -> bool {
        let fits =
            |c: &Self| (c.read_ahead_in_flight + c.read_ahead_unread + 1) * CHUNK <= c.budget / 2;
        if fits(self) {
            return true;
        }
        if self
            .unread_swept
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return false;
        }
        self.unread_swept = Some(now);
        for e in self.entries.values_mut() {
            if e.unread_since.is_some() && !e.protected(now) {
                e.unread_since = None;
                self.read_ahead_unread -= 1;
                self.stats.read_ahead_expired_unread += 1;
            }
        }
        fits(self)
    }

    fn insert(&mut self, key: Key, chunk: Rc<CachedChunk>, unread: bool) {
        let now = Instant::now();
        let size = chunk.size();
        if self.budget < CHUNK {
            return;
        }
        self.remove(key);
        self.evict_to_at(self.budget - size, now);
        self.tick += 1;
        self.lru.insert(self.tick, key);
        self.entries.insert(
            key,
            Entry {
                chunk,
                tick: self.tick,
                unread_since: unread.then_some(now),
                fetched: false,
            },
        );
        self.read_ahead_unread += usize::from(unread);
        self.used += size;
    }

    /// Drops `key`; returns whether it was an unread read-ahead chunk.
    fn remove(&mut self, key: Key) -> bool {
        let Some(e) = self.entries.remove(&key) else {
            return false;
        };
        if e.fetched {
            self.lru_fetched.remove(&e.tick);
        } else {
            self.lru.remove(&e.tick);
        }
        self.used -= e.chunk.size();
        let unread = e.unread_since.is_some();
        self.read_ahead_unread -= usize::from(unread);
        recycle(e.chunk);
        unread
    }

    fn evict_to(&mut self, bytes: usize) {
        self.evict_to_at(bytes, Instant::now());
    }

    /// Evicts chunks until at most `bytes` are used: those a fetch has read first, then the
    /// others, least recently used first in each, read-ahead chunks not read yet last (they are
    /// about to be read; [`Cache::read_ahead_fits`] bounds them).
    fn evict_to_at(&mut self, bytes: usize, now: Instant) {
        while self.used > bytes {
            let victim = self
                .lru_fetched
                .values()
                .next()
                .or_else(|| {
                    self.lru
                        .values()
                        .find(|k| self.entries.get(k).is_some_and(|e| !e.protected(now)))
                })
                .or_else(|| self.lru.values().next())
                .copied();
            let Some(oldest) = victim else {
                break;
            };
            if self.remove(oldest) {
                self.stats.read_ahead_evicted_unread += 1;
            }
            self.stats.evicted += 1;
        }
    }

    /// Drops the chunks of `from.0` from chunk index `from.1` on.
    fn remove_from(&mut self, from: Key) {
        let keys: Vec<Key> = self
            .entries
            .range(from..=(from.0, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.remove(k);
        }
    }
}

/// Gives a written chunk's buffer back to the tail's pool when nothing else holds it.
fn recycle(chunk: Rc<CachedChunk>) {
    if let Ok(chunk) = Rc::try_unwrap(chunk) {
        if let ChunkBytes::Written(buf) = chunk.bytes {
            if let Ok(buf) = Rc::try_unwrap(buf) {
                crate::tail::recycle_chunk_buffer(buf);
            }
        }
    }
}

/// Sets this shard's budget (bytes; below one chunk turns the cache off) and drops what is
/// over it.
pub fn set_budget(bytes: usize) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.budget = bytes;
        c.stats.budget_bytes = bytes;
        c.evict_to(bytes);
    });
}

pub fn stats() -> CacheStats {
    CACHE.with(|c| {
        let c = c.borrow();
        CacheStats {
            used_bytes: c.used,
            chunks: c.entries.len(),
            ..c.stats
        }
    })
}

/// Keeps a full tail chunk whose bytes are written (file positions `[start, start + CHUNK)`).
pub fn insert_written(segment: &CachedSegment, start: u64, buf: Rc<DmaBuffer>) {
    debug_assert_eq!(start % CHUNK as u64, 0);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.stats.inserted_written += 1;
        let chunk = Rc::new(CachedChunk {
            bytes: ChunkBytes::Written(buf),
            start: 0,
            valid: CHUNK,
        });
        c.insert((segment.id, start / CHUNK as u64), chunk, false);
    });
}

/// Drops the cached chunks of `segment` from file position `position` on (truncation), and
/// keeps loads already running from inserting what they read.
pub fn invalidate_from(segment: &CachedSegment, position: u64) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.remove_from((segment.id, position / CHUNK as u64));
        c.invalidations += 1;
    });
}

/// Chunk `index` of `segment` holding at least its offsets `[from, need)`. `final_len` is how
/// many bytes of the chunk are final in the file (at least `need`): a read keeps no more than
/// that, and starts at `from` aligned down to a block.
pub async fn chunk(
    segment: &Rc<CachedSegment>,
    index: u64,
    (from, need): (usize, usize),
    final_len: usize,
) -> Result<Rc<CachedChunk>, IoError> {
    debug_assert!(from <= need && need <= final_len && final_len <= CHUNK);
    let key = (segment.id, index);
    loop {
        let waiting = CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if let Some(hit) = c.get(key, (from, need)) {
                c.stats.hits += 1;
                return Ok(hit);
            }
            match c.loading.get(&key) {
                Some(l) if l.start <= from && l.valid >= need => Err(Some(l.clone())),
                _ => {
                    c.stats.misses += 1;
                    Err(None)
                }
            }
        });
        match waiting {
            Ok(hit) => return Ok(hit),
            Err(None) => {
                let start = from / DIRECT_IO_ALIGNMENT * DIRECT_IO_ALIGNMENT;
                return load(segment, index, (start, final_len), false).await;
            }
            Err(Some(loading)) => {
                let seen = loading.done.generation();
                loading.urgency.raise();
                if loading.result.borrow().is_none() {
                    let (start, valid) = (loading.start, loading.valid);
                    crate::slow::warn_if_slow(loading.done.changed(seen), SLOW_READ_WARN, || {
                        tracing::warn!(path = %segment.path().display(), chunk = index, start, valid,
                            "a read of the chunk another reader started is not done after {SLOW_READ_WARN:?}")
                    })
                    .await;
                }
                match loading.result.borrow().as_ref() {
                    Some(Ok(chunk)) => {
                        // A read-ahead this fetch waited for is read now.
                        CACHE.with(|c| c.borrow_mut().touch(key));
                        return Ok(chunk.clone());
                    }
                    // The other reader's failure is retried by this one (and reported if it
                    // fails again).
                    Some(Err(_)) | None => continue,
                }
            }
        }
    }
}

/// Reads chunk `index` of `segment` from offset `start` (block-aligned) to `final_len` and
/// caches it.
async fn load(
    segment: &Rc<CachedSegment>,
    index: u64,
    (start, final_len): (usize, usize),
    read_ahead: bool,
) -> Result<Rc<CachedChunk>, IoError> {
    let key = (segment.id, index);
    let loading = Rc::new(Loading {
        done: Notify::default(),
        start,
        valid: final_len,
        result: RefCell::new(None),
        urgency: Urgency::default(),
    });
    let invalidations = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.loading.insert(key, loading.clone());
        c.invalidations
    });
    // A load whose future is dropped (its fetch's connection closed while the read ran) must
    // not stay "loading": every later reader of the chunk would wait for it forever.
    let mut in_flight = LoadInFlight {
        key,
        loading: loading.clone(),
        ended: false,
    };
    let class = if read_ahead {
        Class::ReadAhead
    } else {
        Class::Fetch
    };
    let read = read_chunk(
        segment,
        index,
        (start, final_len),
        (class, &loading.urgency),
    );
    let result = crate::slow::warn_if_slow(read, SLOW_READ_WARN, || {
        tracing::warn!(path = %segment.path().display(), chunk = index, start, final_len,
            gate = ?read_gate::stats(), "a chunk read is not done after {SLOW_READ_WARN:?}")
    })
    .await;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        in_flight.leave(&mut c);
        if let Ok(chunk) = &result {
            if c.invalidations == invalidations {
                c.insert(key, chunk.clone(), read_ahead);
            }
        }
    });
    in_flight.end(result.as_ref().map(Rc::clone).map_err(|e| e.to_string()));
    result
}

/// A running [`load`]'s entry in the cache's `loading`: ended with the read's result, or, if
/// the load's future is dropped before that, taken out with a cancellation its waiters answer
/// by reading the chunk themselves.
struct LoadInFlight {
    key: Key,
    loading: Rc<Loading>,
    ended: bool,
}

impl LoadInFlight {
    /// Takes the load out of `loading`, unless a newer load of the chunk replaced it there.
    fn leave(&self, c: &mut Cache) {
        if c.loading
            .get(&self.key)
            .is_some_and(|l| Rc::ptr_eq(l, &self.loading))
        {
            c.loading.remove(&self.key);
        }
    }

    /// Tells the load's waiters its result.
    fn end(&mut self, result: Result<Rc<CachedChunk>, String>) {
        self.ended = true;
        *self.loading.result.borrow_mut() = Some(result);
        self.loading.done.notify_all();
    }
}

impl Drop for LoadInFlight {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // `try_with`: the thread's cache may already be gone when the thread exits.
        let _ = CACHE.try_with(|c| self.leave(&mut c.borrow_mut()));
        self.end(Err("the read was cancelled".to_owned()));
    }
}

async fn read_chunk(
    segment: &CachedSegment,
    index: u64,
    (start, final_len): (usize, usize),
    (class, urgency): (Class, &Urgency),
) -> Result<Rc<CachedChunk>, IoError> {
    debug_assert!(start % DIRECT_IO_ALIGNMENT == 0 && start <= final_len);
    let kind = if segment.page_cache_written(index) {
        CACHE.with(|c| c.borrow_mut().stats.page_cache_reads += 1);
        Handle::PageCache
    } else {
        Handle::Direct
    };
    let file = segment.handle(kind).await?;
    let position = index * CHUNK as u64 + start as u64;
    // The open and the read may complete on an io_uring worker thread (an O_DIRECT read the
    // kernel cannot start without blocking), whose completion the reactor can miss while
    // nothing else wakes it: seen as a test hanging in `io_cqring_wait` with the read done.
    // The same ticker as for helper-thread operations keeps the reactor looking.
    // Only the bytes that are final, in whole blocks: the chunk is valid up to `final_len`
    // whatever more is read, and a 1 MiB buffer for each of 10 000 quiet partitions' few
    // kilobytes took the node's RSS to 4.6 GB during one fetch of all of them.
    let len = (final_len - start)
        .next_multiple_of(DIRECT_IO_ALIGNMENT)
        .clamp(DIRECT_IO_ALIGNMENT, CHUNK - start);
    // O_DIRECT reads wait for room at the device (page-cache reads mostly copy memory).
    let read = match kind {
        Handle::Direct => {
            let _permit = read_gate::admit(len, class, urgency.clone()).await;
            on_helper_thread(file.read_at_rushed(position, len)).await
        }
        Handle::PageCache => on_helper_thread(file.read_at(position, len)).await,
    }
    .map_err(|e| IoError::new("reading", segment.path().as_path(), std::io::Error::from(e)))?;
    if read.len() < final_len - start {
        let e = std::io::Error::other(format!(
            "short read at {position}: {} of {} bytes",
            read.len(),
            final_len - start
        ));
        return Err(IoError::new("reading", segment.path().as_path(), e));
    }
    Ok(Rc::new(CachedChunk {
        bytes: ChunkBytes::Read(read),
        start,
        valid: final_len,
    }))
}

/// Starts background reads of the chunks after `after_index`, up to [`READ_AHEAD_CHUNKS`] of
/// them and not past file position `final_end` (bytes beyond it are not final), skipping
/// chunks cached or being read; at most [`READ_AHEAD_IN_FLIGHT_MAX`] run per shard.
pub fn read_ahead(segment: &Rc<CachedSegment>, after_index: u64, final_end: u64) {
    for index in after_index + 1..=after_index + READ_AHEAD_CHUNKS as u64 {
        let start = index * CHUNK as u64;
        if start >= final_end {
            return;
        }
        let final_len = (final_end - start).min(CHUNK as u64) as usize;
        let key = (segment.id, index);
        let start_read = CACHE.with(|c| {
            let mut c = c.borrow_mut();
            let cached = c
                .entries
                .get(&key)
                .is_some_and(|e| e.chunk.holds(0, final_len));
            if cached || c.loading.contains_key(&key) {
                return false;
            }
            if c.read_ahead_in_flight >= READ_AHEAD_IN_FLIGHT_MAX
                || !c.read_ahead_fits(Instant::now())
            {
                return false;
            }
            c.read_ahead_in_flight += 1;
            c.stats.read_ahead += 1;
            true
        });
        if !start_read {
            continue;
        }
        let segment = segment.clone();
        glommio::spawn_local(async move {
            if let Err(e) = load(&segment, index, (0, final_len), true).await {
                tracing::debug!(error = %e, "read ahead failed");
            }
            CACHE.with(|c| c.borrow_mut().read_ahead_in_flight -= 1);
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk read whose reader goes away mid-read (its fetch's connection closed) leaves
    /// nothing behind that a later reader of the chunk would wait for.
    #[test]
    fn a_read_cancelled_midway_does_not_hold_up_the_next_reader() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                // Under the target directory: O_DIRECT needs a real filesystem (/tmp may be a
                // tmpfs).
                let base = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
                std::fs::create_dir_all(base).unwrap();
                let dir = tempfile::tempdir_in(base).unwrap();
                let path = dir.path().join("00000000000000000000.log");
                let bytes: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8).collect();
                std::fs::write(&path, &bytes).unwrap();
                let segment = CachedSegment::new(Rc::new(path));
                let mut first = Box::pin(super::chunk(&segment, 0, (0, 4096), CHUNK));
                assert!(
                    futures_lite::future::poll_once(&mut first).await.is_none(),
                    "the first read is under way"
                );
                drop(first);
                let again = async { Some(super::chunk(&segment, 0, (0, 4096), CHUNK).await) };
                // A ticker keeps the reactor waking (see `tests/common/mod.rs`'s `run`).
                let timeout = async {
                    for _ in 0..1000 {
                        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                    }
                    None
                };
                let chunk = futures_lite::future::or(again, timeout)
                    .await
                    .expect("the second read finishes")
                    .expect("and reads the chunk");
                assert_eq!(chunk.bytes(0, 4096), &bytes[..4096]);
            })
            .expect("start executor (is ulimit -l >= 512 KiB?)")
            .join()
            .unwrap();
    }

    fn chunk() -> Rc<CachedChunk> {
        Rc::new(CachedChunk {
            bytes: ChunkBytes::Sized(CHUNK),
            start: 0,
            valid: 0,
        })
    }

    #[test]
    fn chunks_a_fetch_read_go_first_then_the_least_recently_used_and_the_budget_holds() {
        let mut c = Cache {
            budget: 3 * CHUNK,
            ..Cache::default()
        };
        c.insert((1, 0), chunk(), false);
        c.insert((1, 1), chunk(), false);
        c.insert((1, 2), chunk(), false);
        assert!(c.get((1, 1), (0, 0)).is_some(), "a fetch reads chunk 1");
        c.insert((1, 3), chunk(), false);
        assert_eq!(c.used, 3 * CHUNK);
        assert!(
            !c.entries.contains_key(&(1, 1)),
            "the chunk a fetch read went first"
        );
        c.insert((1, 4), chunk(), false);
        assert!(
            !c.entries.contains_key(&(1, 0)),
            "then the least recently used"
        );
        assert!([(1, 2), (1, 3), (1, 4)]
            .iter()
            .all(|k| c.entries.contains_key(k)));
        // Among chunks fetches read, the least recently read goes first.
        assert!(c.get((1, 3), (0, 0)).is_some());
        assert!(c.get((1, 2), (0, 0)).is_some());
        c.insert((1, 5), chunk(), false);
        assert!(!c.entries.contains_key(&(1, 3)));
        assert!(c.entries.contains_key(&(1, 2)) && c.entries.contains_key(&(1, 4)));
        assert_eq!(c.used, 3 * CHUNK);
    }

    #[test]
    fn read_ahead_takes_at_most_half_the_budget_and_a_read_frees_its_room() {
        let mut c = Cache {
            budget: 8 * CHUNK,
            ..Cache::default()
        };
        let now = Instant::now();
        for k in 0..3 {
            assert!(c.read_ahead_fits(now), "chunk {k} fits");
            c.insert((1, k), chunk(), true);
        }
        c.read_ahead_in_flight = 1;
        assert!(
            !c.read_ahead_fits(now),
            "3 unread + 1 in flight = half of 8"
        );
        assert!(c.get((1, 0), (0, 0)).is_some());
        assert_eq!(c.read_ahead_unread, 2);
        assert!(c.read_ahead_fits(now), "a read chunk no longer counts");
        c.read_ahead_in_flight = 0;
        c.insert((1, 3), chunk(), true);
        c.insert((1, 4), chunk(), true);
        // Chunks 1 to 4 unread: other chunks go first, read chunk 0 the oldest of them.
        for k in 0..4 {
            c.insert((2, k), chunk(), false);
        }
        assert_eq!(c.stats.evicted, 1);
        assert!(c.get((1, 0), (0, 0)).is_none(), "the read chunk went first");
        assert_eq!(c.read_ahead_unread, 4);
        assert_eq!(c.stats.read_ahead_evicted_unread, 0);
        for k in 0..8 {
            c.insert((3, k), chunk(), false);
        }
        assert_eq!(c.read_ahead_unread, 4, "young unread chunks stay");
        // Grown old unread (their consumer gone), they are evicted like the others, counted.
        let past = now - 2 * READ_AHEAD_UNREAD_TTL;
        for e in c.entries.values_mut().filter(|e| e.unread_since.is_some()) {
            e.unread_since = Some(past);
        }
        for k in 0..8 {
            c.insert((5, k), chunk(), false);
        }
        assert_eq!(c.read_ahead_unread, 0);
        assert_eq!(c.stats.read_ahead_evicted_unread, 4);
        // And they stop holding the read-ahead room.
        for k in 0..6 {
            c.insert((6, k), chunk(), true);
        }
        assert!(!c.read_ahead_fits(now));
        for e in c.entries.values_mut().filter(|e| e.unread_since.is_some()) {
            e.unread_since = Some(past);
        }
        assert!(
            c.read_ahead_fits(now + Duration::from_secs(2)),
            "expired unread chunks let go"
        );
        assert_eq!(c.stats.read_ahead_expired_unread, 6);
        assert_eq!(c.read_ahead_unread, 0);
        // Invalidation is not eviction.
        c.insert((4, 0), chunk(), true);
        c.remove_from((4, 0));
        assert_eq!(c.read_ahead_unread, 0);
        assert_eq!(c.stats.read_ahead_evicted_unread, 4);
    }

    #[test]
    fn invalidation_drops_a_segment_from_a_chunk_on() {
        let mut c = Cache {
            budget: 8 * CHUNK,
            ..Cache::default()
        };
        for k in 0..3 {
            c.insert((1, k), chunk(), false);
            c.insert((2, k), chunk(), false);
        }
        c.remove_from((1, 1));
        assert!(c.get((1, 0), (0, 0)).is_some());
        assert!(c.get((1, 1), (0, 0)).is_none());
        assert!(c.get((1, 2), (0, 0)).is_none());
        assert!(
            (0..3).all(|k| c.get((2, k), (0, 0)).is_some()),
            "other segment kept"
        );
        assert_eq!(c.used, 4 * CHUNK);
        assert_eq!(c.lru.len() + c.lru_fetched.len(), 4);
    }

    #[test]
    fn a_chunk_with_too_few_valid_bytes_is_a_miss() {
        let mut c = Cache {
            budget: 8 * CHUNK,
            ..Cache::default()
        };
        c.insert((1, 0), chunk(), false);
        assert!(c.get((1, 0), (0, 1)).is_none());
    }

    #[test]
    fn a_chunk_read_from_an_offset_serves_reads_from_there_on_and_counts_its_size() {
        let mut c = Cache {
            budget: 8 * CHUNK,
            ..Cache::default()
        };
        let part = Rc::new(CachedChunk {
            bytes: ChunkBytes::Sized(3 * DIRECT_IO_ALIGNMENT),
            start: 2 * DIRECT_IO_ALIGNMENT,
            valid: 5 * DIRECT_IO_ALIGNMENT,
        });
        c.insert((1, 0), part, false);
        assert_eq!(
            c.used,
            3 * DIRECT_IO_ALIGNMENT,
            "what it holds, not a whole chunk"
        );
        let at = 2 * DIRECT_IO_ALIGNMENT;
        assert!(c.get((1, 0), (at + 10, at + 100)).is_some());
        assert!(
            c.get((1, 0), (at - 1, at + 100)).is_none(),
            "before its start"
        );
        assert!(
            c.get((1, 0), (at, 6 * DIRECT_IO_ALIGNMENT)).is_none(),
            "past its end"
        );
        c.remove((1, 0));
        assert_eq!(c.used, 0);
    }

    #[test]
    fn no_budget_caches_nothing() {
        let mut c = Cache::default();
        c.insert((1, 0), chunk(), false);
        assert_eq!(c.used, 0);
        assert!(c.get((1, 0), (0, 0)).is_none());
    }
}
