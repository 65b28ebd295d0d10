//! Every node's view of the cluster metadata: one consistent read, then every later change in
//! revision order.
//!
//! Contract: [`MetadataWatch::start`] reads everything under the cluster's prefix at one
//! revision R and watches from R + 1. Events arrive on a channel strictly in revision order,
//! each exactly once; if the watch breaks (etcd restarted, connection lost) it resumes from the
//! revision after the last one delivered. If etcd compacted past that revision the history is
//! gone: [`MetadataEvent::Reload`] tells the reader to start over from a fresh read. After each
//! batch of events the watch rings its [`Doorbell`], so the reader need not poll to learn of them.

use std::sync::{mpsc, Arc, Mutex};

use etcd_client::{EventType, GetOptions, WatchOptions};

use super::{Etcd, EtcdError};
use crate::limits::METADATA_WATCH_RESTART;
use crate::limits::METADATA_WATCH_RETRY;

/// A key and its value as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
}

/// One change, at its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataEvent {
    Put(Entry),
    Delete {
        key: String,
        revision: i64,
    },
    /// The history since the last delivered revision is compacted away: read everything again.
    Reload,
}

/// What the watch calls after it delivered a batch of events (none until one is set): the control
/// plane's wake-up, so a change made by another node is applied at once, not at its next poll.
#[derive(Clone, Default)]
pub struct Doorbell(Arc<Mutex<Option<Wake>>>);

/// What a [`Doorbell`] calls.
pub type Wake = Box<dyn Fn() + Send>;

impl Doorbell {
    /// Rings `wake` from now on.
    pub fn set(&self, wake: Wake) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake);
    }

    fn ring(&self) {
        if let Some(wake) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            wake();
        }
    }
}

/// A running watch; dropping it stops the watch.
pub struct MetadataWatch {
    pub events: mpsc::Receiver<MetadataEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MetadataWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MetadataWatch {
    /// Reads everything under the cluster's prefix, then watches it, ringing `bell` after each
    /// batch of events.
    pub fn start(
        etcd: &Etcd,
        bell: Doorbell,
    ) -> Result<(Vec<Entry>, i64, MetadataWatch), EtcdError> {
        let prefix = etcd.keys().root().to_owned();
        let mut client = etcd.client();
        let options = GetOptions::new().with_prefix();
        let answer = etcd.call(
            "reading the cluster metadata",
            client.get(prefix.clone(), Some(options)),
        )?;
        let revision = answer.header().map_or(0, |h| h.revision());
        let entries = answer
            .kvs()
            .iter()
            .map(|kv| Entry {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                value: kv.value().to_vec(),
                create_revision: kv.create_revision(),
                mod_revision: kv.mod_revision(),
            })
            .collect();
        let (tx, rx) = mpsc::channel();
        let task = etcd
            .runtime()
            .spawn(follow(etcd.clone(), prefix, revision, tx, bell));
        Ok((entries, revision, MetadataWatch { events: rx, task }))
    }
}

async fn follow(
    etcd: Etcd,
    prefix: String,
    mut delivered: i64,
    tx: mpsc::Sender<MetadataEvent>,
    bell: Doorbell,
) {
    let mut client = etcd.client();
    loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(delivered + 1)
            .with_progress_notify();
        let mut stream = match client.watch(prefix.clone(), Some(options)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "metadata watch: etcd unreachable, retrying");
                tokio::time::sleep(METADATA_WATCH_RETRY).await;
                continue;
            }
        };
        // Events at or below this were delivered before (a resumed watch replays from the
        // revision after it); one revision may hold several events (a transaction).
        let floor = delivered;
        loop {
            let answer = match stream.message().await {
                Ok(Some(a)) => a,
                Ok(None) | Err(_) => break,
            };
            if answer.compact_revision() > 0 && answer.compact_revision() > delivered + 1 {
                let _ = tx.send(MetadataEvent::Reload);
                bell.ring();
                return;
            }
            if answer.canceled() {
                break;
            }
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                let revision = kv.mod_revision();
                if revision <= floor {
                    continue;
                }
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                let msg = match event.event_type() {
                    EventType::Put => MetadataEvent::Put(Entry {
                        key,
                        value: kv.value().to_vec(),
                        create_revision: kv.create_revision(),
                        mod_revision: revision,
                    }),
                    EventType::Delete => MetadataEvent::Delete { key, revision },
                };
                if tx.send(msg).is_err() {
                    return;
                }
                delivered = revision;
            }
            if !answer.events().is_empty() {
                bell.ring();
            }
        }
        tokio::time::sleep(METADATA_WATCH_RESTART).await;
    }
}
