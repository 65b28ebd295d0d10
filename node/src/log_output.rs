//! Where the broker's log lines go: stderr, written so that a failure to write can never stop
//! the broker.
//!
//! `tracing-subscriber` reports a failed write with `eprintln!`, which panics when stderr itself
//! cannot be written (a full disk under a redirected stderr): the broker died because its log
//! could not be written. Here a failed write is counted instead, and the next line that gets
//! through is preceded by how many were lost.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing_subscriber::fmt::MakeWriter;

/// Log lines that could not be written since the last one that could.
static LOST_LINES: AtomicU64 = AtomicU64::new(0);

/// A [`MakeWriter`] for stderr that never fails.
#[derive(Clone, Copy, Default)]
pub struct LossyStderr;

pub struct LossyStderrWriter;

impl Write for LossyStderrWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut err = io::stderr().lock();
        let lost = LOST_LINES.load(Ordering::Relaxed);
        if lost > 0 {
            let note = format!("ringlog: {lost} log lines lost: stderr could not be written\n");
            if err.write_all(note.as_bytes()).is_err() {
                LOST_LINES.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            LOST_LINES.fetch_sub(lost, Ordering::Relaxed);
        }
        if err.write_all(buf).is_err() {
            LOST_LINES.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LossyStderr {
    type Writer = LossyStderrWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LossyStderrWriter
    }
}

/// Lines lost so far and not yet reported (for tests).
pub fn lost_lines() -> u64 {
    LOST_LINES.load(Ordering::Relaxed)
}
