//! Small checkpoint files replaced atomically: temporary file, fdatasync, rename, directory
//! fsync ([`write_checkpoint`]). Format as Kafka's checkpoint files: a version line, a count
//! line, one entry a line.
//!
//! [`write_checkpoint_unsynced`] overwrites the file in place instead, without syncing it, for
//! the periodic checkpoints whose loss after a machine crash only costs work or is conservative
//! (a high watermark, a producer state snapshot): a process kill keeps them (the page cache),
//! and one killed between the write and the truncation after it leaves the old file's last
//! lines behind the new ones, which [`parse_checkpoint`] rejects (the count line no longer
//! matches); a power loss may leave an older file, an empty one, or such a mix. No sync: each is
//! a device cache flush, and on a disk with a write-back cache (a VM's virtio disk) a flush holds
//! every O_DIRECT write issued after it until the cache is written back (50-850 ms measured on
//! these machines under a replicated load). In place: a rename frees the old file's block, and
//! on a file system mounted with `discard` every freed block is a discard request, which held
//! this machine's virtio disk up to 880 ms as well.

use std::path::Path;

use glommio::io::{BufferedFile, Directory, OpenOptions};

use crate::error::IoError;

pub const RECOVERY_POINT_FILE: &str = "recovery-point-checkpoint";
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
/// The log start offset moved past the first segment's base (DeleteRecords), per partition
/// (Kafka keeps one such file per log directory).
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
/// Where the log cleaner got to: every segment below this offset was cleaned (Kafka keeps one
/// such file per log directory; ringlog one per partition, beside the others).
pub const CLEANER_OFFSET_FILE: &str = "cleaner-offset-checkpoint";

/// Writes `lines` as a version-0 checkpoint file `dir/name`, replacing it atomically and
/// durably.
pub async fn write_checkpoint(dir: &Path, name: &str, lines: &[String]) -> Result<(), IoError> {
    replace_file_durably(&dir.join(name), checkpoint_text(lines)).await
}

/// Replaces the file at `path` with `bytes` atomically and durably: written and synced as
/// `<path>.tmp` (a log's open removes such leftovers), renamed, the directory synced.
pub async fn replace_file_durably(path: &Path, bytes: Vec<u8>) -> Result<(), IoError> {
    let dir = path.parent().expect("a file in a directory");
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    write_file_durably(&tmp, bytes).await?;
    crate::helper_thread::on_helper_thread(glommio::io::rename(&tmp, path))
        .await
        .map_err(|e| IoError::new("renaming to", path, e))?;
    sync_dir(dir).await
}

/// Writes `lines` as a version-0 checkpoint file `dir/name`, overwriting it in place and
/// without syncing it (see the module doc for which checkpoints may).
pub async fn write_checkpoint_unsynced(
    dir: &Path,
    name: &str,
    lines: &[String],
) -> Result<(), IoError> {
    let path = dir.join(name);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .buffered_open(&path)
        .await
        .map_err(|e| IoError::new("opening", &path, e))?;
    let len = write_whole(&file, &path, checkpoint_text(lines)).await?;
    file.truncate(len as u64)
        .await
        .map_err(|e| IoError::new("truncating", &path, e))?;
    file.close()
        .await
        .map_err(|e| IoError::new("closing", &path, e))
}

fn checkpoint_text(lines: &[String]) -> Vec<u8> {
    let mut text = format!("0\n{}\n", lines.len());
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    text.into_bytes()
}

/// Creates (or replaces) `path` with `bytes` and fdatasyncs it.
pub async fn write_file_durably(path: &Path, bytes: Vec<u8>) -> Result<(), IoError> {
    let file = BufferedFile::create(path)
        .await
        .map_err(|e| IoError::new("creating", path, e))?;
    if !bytes.is_empty() {
        write_whole(&file, path, bytes).await?;
    }
    file.fdatasync()
        .await
        .map_err(|e| IoError::new("syncing", path, e))?;
    file.close()
        .await
        .map_err(|e| IoError::new("closing", path, e))
}

/// Writes `bytes` at the start of `file` (at `path`), all of them; returns how many.
async fn write_whole(file: &BufferedFile, path: &Path, bytes: Vec<u8>) -> Result<usize, IoError> {
    let len = bytes.len();
    let n = file
        .write_at(bytes, 0)
        .await
        .map_err(|e| IoError::new("writing", path, e))?;
    if n != len {
        let short = std::io::Error::other(format!("short write: {n} of {len} bytes"));
        return Err(IoError::new("writing", path, short));
    }
    Ok(len)
}

pub async fn sync_dir(dir: &Path) -> Result<(), IoError> {
    let d = Directory::open(dir)
        .await
        .map_err(|e| IoError::new("opening directory", dir, e))?;
    d.sync()
        .await
        .map_err(|e| IoError::new("syncing directory", dir, e))?;
    d.close()
        .await
        .map_err(|e| IoError::new("closing directory", dir, e))
}

/// Reads a whole file; `Ok(None)` when it does not exist.
pub async fn read_file(path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    let file = match BufferedFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e = std::io::Error::from(e);
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(IoError::new("opening", path, e));
        }
    };
    let size = file
        .file_size()
        .await
        .map_err(|e| IoError::new("sizing", path, e))?;
    let bytes = if size == 0 {
        Vec::new()
    } else {
        let r = file
            .read_at(0, size as usize)
            .await
            .map_err(|e| IoError::new("reading", path, e))?;
        r.to_vec()
    };
    file.close()
        .await
        .map_err(|e| IoError::new("closing", path, e))?;
    Ok(Some(bytes))
}

/// Parses a checkpoint written by [`write_checkpoint`] or [`write_checkpoint_unsynced`];
/// `None` if it is malformed (empty, or an unsynced one's new lines followed by old ones).
pub fn parse_checkpoint(bytes: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.parse().ok()?;
    let entries: Vec<String> = lines.map(str::to_owned).collect();
    (entries.len() == count).then_some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_complete_checkpoints() {
        assert_eq!(parse_checkpoint(b"0\n1\n42\n"), Some(vec!["42".to_owned()]));
        assert_eq!(parse_checkpoint(b"0\n2\n42\n"), None);
        assert_eq!(parse_checkpoint(b"1\n1\n42\n"), None);
        assert_eq!(parse_checkpoint(b"\xff"), None);
        assert_eq!(parse_checkpoint(b""), None);
    }
}
