//! Checkpoint files: the unsynced ones are overwritten in place — the same inode, no rename, so
//! no freed block (a discard on a file system mounted with `discard`) — and read back exactly,
//! a longer one replaced by a shorter one included.

mod common;

use std::os::unix::fs::MetadataExt;

use iouring_log::{
    parse_checkpoint, read_checkpoint_file, write_checkpoint, write_checkpoint_unsynced,
};

#[test]
fn an_unsynced_checkpoint_is_overwritten_in_place_and_reads_back_exactly() {
    let dir = common::tmpdir();
    let path = dir.path().join("hw");
    let d = dir.path().to_path_buf();
    common::run(move || async move {
        let long: Vec<String> = (0..100).map(|i| format!("entry-{i}")).collect();
        write_checkpoint_unsynced(&d, "hw", &long).await.unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        for lines in [vec!["12345".to_owned()], vec!["9".to_owned()], long.clone()] {
            write_checkpoint_unsynced(&d, "hw", &lines).await.unwrap();
            let bytes = read_checkpoint_file(&path).await.unwrap().unwrap();
            assert_eq!(parse_checkpoint(&bytes), Some(lines));
            assert_eq!(
                std::fs::metadata(&path).unwrap().ino(),
                inode,
                "the same file"
            );
        }
        assert!(
            !d.join("hw.tmp").exists(),
            "no temporary file for an unsynced checkpoint"
        );
        // The durable one replaces the file (a new inode, renamed over it).
        write_checkpoint(&d, "hw", &["7".to_owned()]).await.unwrap();
        let bytes = read_checkpoint_file(&path).await.unwrap().unwrap();
        assert_eq!(parse_checkpoint(&bytes), Some(vec!["7".to_owned()]));
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
    });
}

/// What a process killed between an in-place write and its truncation leaves (the new lines,
/// then the old file's last ones) is rejected, never read as a value.
#[test]
fn a_checkpoint_with_old_lines_left_behind_it_is_rejected() {
    assert_eq!(parse_checkpoint(b"0\n1\n9\n345\n"), None);
    assert_eq!(parse_checkpoint(b"0\n1\n9\n\n"), None);
}
