//! The Prometheus endpoint (`metrics.listen`): a thread of its own that answers
//! `GET /metrics` by asking every shard for its report (over a channel its task listens on),
//! waiting at most [`SCRAPE_SHARD_TIMEOUT`] for them, and writing the text format. A shard that
//! does not answer in time is reported down (`ringlog_shard_up 0`) and the rest is served.
//! One scrape at a time, each connection closed after its answer: Prometheus scrapes every few
//! seconds, nothing here is on the data path.

use crate::ids::NodeId;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use futures_channel::mpsc as fmpsc;

use super::render::{render, NodeFacts};
use super::report::ShardReport;
use crate::limits::METRICS_ACCEPT_POLL;
use crate::limits::METRICS_CLIENT_IO_TIMEOUT;
use crate::limits::METRICS_REQUEST_HEAD_MAX;
use crate::limits::SCRAPE_SHARD_TIMEOUT;
use crate::server::budget::RequestBudget;

/// Where a shard sends its report for one scrape.
pub type Ask = mpsc::Sender<ShardReport>;

pub struct Endpoint {
    pub listener: TcpListener,
    pub shards: Vec<fmpsc::UnboundedSender<Ask>>,
    pub request_budget: Arc<RequestBudget>,
    pub request_budget_capacity: Option<usize>,
    pub quota_usage: Arc<crate::quotas::usage::QuotaUsage>,
    pub node_id: NodeId,
    pub stopping: Arc<AtomicBool>,
}

impl Endpoint {
    /// Serves scrapes until the node stops.
    pub fn run(self) {
        if let Err(e) = self.listener.set_nonblocking(true) {
            tracing::error!(error = %e, "metrics endpoint: cannot poll its listener; not serving");
            return;
        }
        let addr = self.listener.local_addr().ok();
        tracing::info!(addr = ?addr, "metrics endpoint listening (GET /metrics)");
        while !self.stopping.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if let Err(e) = self.answer(stream) {
                        tracing::debug!(%peer, error = %e, "metrics endpoint: scrape connection");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(METRICS_ACCEPT_POLL)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    std::thread::sleep(METRICS_ACCEPT_POLL);
                }
            }
        }
    }

    fn answer(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(METRICS_CLIENT_IO_TIMEOUT))?;
        stream.set_write_timeout(Some(METRICS_CLIENT_IO_TIMEOUT))?;
        let head = read_head(&mut stream)?;
        let (status, content_type, body) = match parse_request_line(&head) {
            Err(why) => ("400 Bad Request", "text/plain", format!("{why}\n")),
            Ok(("GET" | "HEAD", path)) if path == "/metrics" || path.starts_with("/metrics?") => (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                self.scrape(),
            ),
            Ok(("GET" | "HEAD", "/")) => (
                "200 OK",
                "text/plain",
                "ringlog metrics: GET /metrics\n".to_owned(),
            ),
            Ok(("GET" | "HEAD", path)) => (
                "404 Not Found",
                "text/plain",
                format!("no such path: {path} (metrics are at /metrics)\n"),
            ),
            Ok((method, _)) => (
                "405 Method Not Allowed",
                "text/plain",
                format!("method {method} not allowed: GET /metrics\n"),
            ),
        };
        let head_only = head.starts_with("HEAD ");
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        if !head_only {
            out.extend_from_slice(body.as_bytes());
        }
        stream.write_all(&out)?;
        stream.flush()
    }

    /// Asks every shard for its report and renders the scrape.
    fn scrape(&self) -> String {
        let (tx, rx) = mpsc::channel();
        for shard in &self.shards {
            // A shard that stopped has closed its end: it is reported down.
            let _ = shard.unbounded_send(tx.clone());
        }
        drop(tx);
        let mut reports: Vec<Option<ShardReport>> = vec![None; self.shards.len()];
        let deadline = Instant::now() + SCRAPE_SHARD_TIMEOUT;
        while reports.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(r) => {
                    let i = r.shard;
                    if i < reports.len() {
                        reports[i] = Some(r);
                    }
                }
                Err(_) => break,
            }
        }
        for (i, r) in reports.iter().enumerate() {
            if r.is_none() {
                tracing::warn!(
                    shard = i,
                    "metrics endpoint: shard did not report within {SCRAPE_SHARD_TIMEOUT:?}"
                );
            }
        }
        let facts = NodeFacts {
            node_id: self.node_id,
            request_budget_capacity: self.request_budget_capacity,
            request_budget_available: self.request_budget.available(),
            request_budget_waiting: self.request_budget.waiting(),
            quota_rates: self.quota_usage.rates(crate::shard::now_ms()),
            process: super::process::read(),
        };
        render(&reports, &facts)
    }
}

/// Reads up to the end of the request head (an empty line).
fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        if buf.len() >= METRICS_REQUEST_HEAD_MAX {
            break;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A request that does not start with an HTTP/1.x request line (its first 100 characters).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an HTTP/1.x request line: {0:?}")]
struct BadRequestLine(String);

/// `(method, path)` of an HTTP/1.x request line.
fn parse_request_line(head: &str) -> Result<(&str, &str), BadRequestLine> {
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(path), Some(version), None) if version.starts_with("HTTP/1.") => {
            Ok((method, path))
        }
        _ => Err(BadRequestLine(line.chars().take(100).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(("GET", "/metrics"))
        );
        assert!(parse_request_line("GET /metrics\r\n\r\n").is_err());
        assert!(parse_request_line("\u{16}\u{3}\u{1} binary").is_err());
        assert!(parse_request_line("").is_err());
    }
}
