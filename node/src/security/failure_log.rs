//! A shard's log of failed authentications and TLS handshakes: each logged with the peer's
//! address and the user named (never a password), at most [`AUTH_FAILURE_LOG_BURST`] lines per
//! [`AUTH_FAILURE_LOG_WINDOW`]; how many more failed is logged when the next window opens.

use crate::limits::AUTH_FAILURE_LOG_BURST;
use crate::limits::AUTH_FAILURE_LOG_WINDOW;
use std::cell::Cell;
use std::time::Instant;

/// A shard's log of failed authentications and TLS handshakes, rate-limited.
#[derive(Default)]
pub struct FailureLog {
    window_start: Cell<Option<Instant>>,
    logged: Cell<u32>,
    suppressed: Cell<u32>,
}

impl FailureLog {
    /// Whether one more line may be logged now (and, when a window ends, how many were not).
    fn admit(&self) -> bool {
        let now = Instant::now();
        let fresh = self
            .window_start
            .get()
            .is_none_or(|at| now.duration_since(at) >= AUTH_FAILURE_LOG_WINDOW);
        if fresh {
            let suppressed = self.suppressed.replace(0);
            if suppressed > 0 {
                tracing::warn!(
                    suppressed,
                    "{suppressed} more failed authentications were not logged in the last {AUTH_FAILURE_LOG_WINDOW:?}"
                );
            }
            self.window_start.set(Some(now));
            self.logged.set(0);
        }
        if self.logged.get() < AUTH_FAILURE_LOG_BURST {
            self.logged.set(self.logged.get() + 1);
            true
        } else {
            self.suppressed.set(self.suppressed.get() + 1);
            false
        }
    }

    pub fn sasl_failed(&self, peer: &str, mechanism: &str, user: Option<&str>, reason: &str) {
        if self.admit() {
            let user = user.unwrap_or("-");
            tracing::warn!(%peer, %mechanism, %user, %reason, "failed authentication");
        }
    }

    pub fn tls_failed(&self, peer: &str, error: &std::io::Error) {
        // A connection closed before it said anything (a port probe, a health check).
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            tracing::debug!(%peer, "connection closed before its TLS handshake");
            return;
        }
        if self.admit() {
            tracing::warn!(%peer, error = %error, "TLS handshake failed (a plaintext client on a TLS listener, an untrusted or expired certificate, or no certificate where one is required)");
        }
    }
}
