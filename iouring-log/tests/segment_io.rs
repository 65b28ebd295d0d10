//! The real segment file (`DirectIo`): page-cache and O_DIRECT writes of one descriptor.

mod common;

use std::path::Path;

use iouring_log::{DirectIo, SegmentIo, WriteBuffer, WriteMode};

/// Whether the open descriptor of `path` in this process has O_DIRECT set (its `flags` line in
/// `/proc/self/fdinfo`, octal).
fn o_direct(path: &Path) -> bool {
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(path) {
            continue;
        }
        let fd = entry.file_name().into_string().unwrap();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| i64::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        return flags & i64::from(libc::O_DIRECT) != 0;
    }
    panic!("{} is not open", path.display());
}

/// A page-cache write leaves O_DIRECT cleared for the next one (no switching per write); a
/// direct write sets it again first; every byte of both kinds reads back in place.
#[test]
fn page_cache_writes_keep_o_direct_off_until_a_direct_write() {
    common::run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .canonicalize()
            .unwrap()
            .join("00000000000000000000.log");
        let file = DirectIo.create(&path).await.unwrap();
        assert!(o_direct(&path), "opened O_DIRECT");
        let block = |fill: u8| {
            let mut b = file.alloc_buffer(4096);
            b.as_bytes_mut().fill(fill);
            WriteBuffer::Owned(b)
        };
        for (i, fill) in [1u8, 2].into_iter().enumerate() {
            let at = i as u64 * 4096;
            let n = file.write_at(block(fill), at, WriteMode::PageCache).await;
            assert_eq!(n.unwrap(), 4096);
            assert!(!o_direct(&path), "cleared after page-cache write {i}");
        }
        assert_eq!(
            file.write_at(block(3), 8192, WriteMode::Direct)
                .await
                .unwrap(),
            4096
        );
        assert!(o_direct(&path), "set again by the direct write");
        assert_eq!(
            file.write_at(block(4), 12288, WriteMode::PageCache)
                .await
                .unwrap(),
            4096
        );
        assert!(!o_direct(&path));
        file.fdatasync().await.unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for (i, fill) in [1u8, 2, 3, 4].into_iter().enumerate() {
            assert!(
                bytes[i * 4096..(i + 1) * 4096].iter().all(|&b| b == fill),
                "block {i}"
            );
        }
        file.close().await.unwrap();
    });
}
