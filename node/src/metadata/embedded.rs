//! The single-node metadata store: one JSON file in the data dir, replaced atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::snapshot::Snapshot;
use super::store::{MetadataStore, Saved, StoreError};

pub const METADATA_FILE: &str = "__ringlog_metadata.json";

/// `<log.dirs>/__ringlog_metadata.json`.
pub struct EmbeddedStore {
    dir: PathBuf,
}

impl EmbeddedStore {
    pub fn new(dir: &Path) -> EmbeddedStore {
        EmbeddedStore {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(METADATA_FILE)
    }

    fn error(
        &self,
        op: &'static str,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        StoreError {
            op,
            location: self.path().display().to_string(),
            source: e.into(),
        }
    }
}

impl MetadataStore for EmbeddedStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        match std::fs::read(self.path()) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| self.error("parsing", e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Snapshot::default()),
            Err(e) => Err(self.error("reading", e)),
        }
    }

    /// Temporary file, fsync, rename, fsync the folder.
    fn save(&mut self, snapshot: &Snapshot) -> Result<Saved, StoreError> {
        let tmp = self.dir.join(format!("{METADATA_FILE}.tmp"));
        let bytes = serde_json::to_vec_pretty(snapshot).map_err(|e| self.error("encoding", e))?;
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.path())?;
            std::fs::File::open(&self.dir)?.sync_all()
        })();
        written
            .map(|()| Saved::Yes)
            .map_err(|e| self.error("writing", e))
    }
}
