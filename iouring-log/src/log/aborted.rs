//! The log's aborted transaction index (`.txnindex`, `txn_index.rs`): entries recorded by
//! whoever reads the markers (the broker's producer state), read by `read_committed` fetches,
//! rolled back with truncation and made durable before a producer state snapshot relies on
//! them.
//!
//! Each change rewrites the segment's file in place, unsynced (it is small, and its prefix does
//! not change, so a crash part way leaves the entries it had and a torn one, dropped at open);
//! [`Log::sync_aborted_txns`] syncs the files changed since the last sync. File writes go one
//! at a time (the log's checkpoint permit), so two aborts in a row cannot reorder their writes.

use std::path::Path;

use glommio::io::OpenOptions;

use crate::checkpoint::replace_file_durably;
use crate::error::IoError;
use crate::log::Log;
use crate::segment::segment_file;
use crate::txn_index::{self, AbortedTxnEntry, TXN_INDEX_SUFFIX};
use crate::types::Offset;

impl Log {
    /// Records a transaction aborted by the ABORT marker at `entry.last_offset`, which the log
    /// holds: the entry goes to the `.txnindex` of the segment holding the marker. Entries come
    /// in marker order (the log's order); one already recorded is not recorded twice.
    pub async fn append_aborted_txn(&self, entry: AbortedTxnEntry) -> Result<(), IoError> {
        self.append_aborted_txns(&[entry]).await
    }

    /// [`Log::append_aborted_txn`] of each entry. Every entry is in memory — what fetches
    /// read ([`Log::aborted_txns`]) — before this first waits: the caller has just closed their
    /// transactions, which lets the last stable offset pass their records, and a
    /// read_committed fetch that saw it pass without the entries would take the aborted
    /// records for committed ones. The files follow, unsynced.
    pub async fn append_aborted_txns(&self, entries: &[AbortedTxnEntry]) -> Result<(), IoError> {
        let bases: std::collections::BTreeSet<Offset> = {
            let mut st = self.inner.state.borrow_mut();
            let mut bases = std::collections::BTreeSet::new();
            for entry in entries {
                if entry.last_offset >= st.log_end_offset() {
                    continue;
                }
                let at = st
                    .segments
                    .partition_point(|s| s.base_offset <= entry.last_offset)
                    .saturating_sub(1);
                let seg = &mut st.segments[at];
                if seg.aborted.contains(entry) {
                    continue;
                }
                seg.aborted.push(*entry);
                bases.insert(seg.base_offset);
            }
            st.aborted_unsynced.extend(bases.iter().copied());
            bases
        };
        if bases.is_empty() {
            return Ok(());
        }
        let _one = self.checkpoint_permit().await;
        for base in bases {
            // As they are now (later entries of the segment included); a segment gone
            // meanwhile took its file with it.
            let Some(entries) = self.segment_aborted_if_present(base) else {
                continue;
            };
            write_unsynced(
                &segment_file(&self.inner.dir, base, TXN_INDEX_SUFFIX),
                &entries,
            )
            .await?;
        }
        Ok(())
    }

    /// The aborted transactions a fetch of `[from, upto)` must carry (Kafka's
    /// `collectAbortedTxns`), in marker order.
    pub fn aborted_txns(&self, from: Offset, upto: Offset) -> Vec<AbortedTxnEntry> {
        let st = self.inner.state.borrow();
        // An entry overlapping the range has its marker at or after `from`: in the segment
        // holding `from` or a later one.
        let first = st
            .segments
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        let segments = st.segments[first..]
            .iter()
            .take_while(|s| s.base_offset < upto || s.aborted.iter().any(|e| e.first_offset < upto))
            .map(|s| s.aborted.as_slice());
        txn_index::overlapping(segments, from, upto)
    }

    /// Forgets the entries whose markers are at or after `from` (the producer state is about
    /// to be rebuilt from the batches there on: after a restart, or a follower's truncation).
    pub async fn truncate_aborted_txns(&self, from: Offset) -> Result<(), IoError> {
        let _one = self.checkpoint_permit().await;
        let changed: Vec<(Offset, Vec<AbortedTxnEntry>)> = {
            let mut st = self.inner.state.borrow_mut();
            let mut changed = Vec::new();
            for seg in st.segments.iter_mut() {
                let before = seg.aborted.len();
                seg.aborted.retain(|e| e.last_offset < from);
                if seg.aborted.len() != before {
                    changed.push((seg.base_offset, seg.aborted.clone()));
                }
            }
            for (base, _) in &changed {
                st.aborted_unsynced.insert(*base);
            }
            changed
        };
        for (base, entries) in changed {
            write_unsynced(
                &segment_file(&self.inner.dir, base, TXN_INDEX_SUFFIX),
                &entries,
            )
            .await?;
        }
        Ok(())
    }

    /// Makes every entry recorded so far durable: called before a producer state snapshot
    /// that no longer replays their markers, and at close.
    pub async fn sync_aborted_txns(&self) -> Result<(), IoError> {
        let _one = self.checkpoint_permit().await;
        let unsynced = std::mem::take(&mut self.inner.state.borrow_mut().aborted_unsynced);
        for base in unsynced {
            let entries = self.segment_aborted(base);
            let path = segment_file(&self.inner.dir, base, TXN_INDEX_SUFFIX);
            let still_there = self
                .inner
                .state
                .borrow()
                .segments
                .iter()
                .any(|s| s.base_offset == base);
            if still_there {
                replace_file_durably(&path, txn_index::to_bytes(&entries)).await?;
            }
        }
        Ok(())
    }

    /// The entries of the segment at `base` (none if it is gone).
    pub(crate) fn segment_aborted(&self, base: Offset) -> Vec<AbortedTxnEntry> {
        self.segment_aborted_if_present(base).unwrap_or_default()
    }

    /// The entries of the segment at `base`, if it is there.
    fn segment_aborted_if_present(&self, base: Offset) -> Option<Vec<AbortedTxnEntry>> {
        let st = self.inner.state.borrow();
        st.segments
            .iter()
            .find(|s| s.base_offset == base)
            .map(|s| s.aborted.clone())
    }
}

/// Writes `entries` over the file at `path` in place (created if needed), unsynced.
async fn write_unsynced(path: &Path, entries: &[AbortedTxnEntry]) -> Result<(), IoError> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .buffered_open(path)
        .await
        .map_err(|e| IoError::new("opening", path, e))?;
    let bytes = txn_index::to_bytes(entries);
    let len = bytes.len() as u64;
    if !bytes.is_empty() {
        let n = file
            .write_at(bytes, 0)
            .await
            .map_err(|e| IoError::new("writing", path, e))?;
        if n as u64 != len {
            let short = std::io::Error::other(format!("short write: {n} of {len} bytes"));
            return Err(IoError::new("writing", path, short));
        }
    }
    file.truncate(len)
        .await
        .map_err(|e| IoError::new("truncating", path, e))?;
    file.close()
        .await
        .map_err(|e| IoError::new("closing", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaderEpoch, LogConfig};

    /// The entry of an abort is what a read_committed fetch needs to skip the transaction's
    /// records: it must be there from the moment the transaction is closed, not once its
    /// file is written (the file waits for other writes of the log's checkpoint files).
    #[test]
    fn an_entry_is_seen_by_fetches_before_its_file_is_written() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let ticker = async {
                    loop {
                        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                    }
                };
                let test = async {
                    let dir = tempfile::tempdir().unwrap();
                    let log = Log::open(dir.path(), LogConfig::default(), 0)
                        .await
                        .unwrap();
                    let marker = crate::encode_marker(7, 0, false, 0, 0);
                    log.append_as_leader(&marker, LeaderEpoch(0), 0)
                        .await
                        .unwrap();
                    let entry = AbortedTxnEntry {
                        producer_id: 7,
                        first_offset: Offset(0),
                        last_offset: Offset(0),
                        last_stable_offset: Offset(1),
                    };
                    // Another checkpoint file being written.
                    let busy = log.checkpoint_permit().await;
                    let writing = glommio::spawn_local({
                        let log = log.clone();
                        async move { log.append_aborted_txn(entry).await }
                    });
                    futures_lite::future::yield_now().await;
                    assert_eq!(log.aborted_txns(Offset(0), Offset(1)), vec![entry]);
                    drop(busy);
                    writing.await.unwrap();
                    log.close().await.unwrap();
                    let log = Log::open(dir.path(), LogConfig::default(), 0)
                        .await
                        .unwrap();
                    assert_eq!(log.aborted_txns(Offset(0), Offset(1)), vec![entry]);
                    log.close().await.unwrap();
                };
                futures_lite::future::or(test, ticker).await
            })
            .expect("executor")
            .join()
            .expect("executor thread");
    }
}
