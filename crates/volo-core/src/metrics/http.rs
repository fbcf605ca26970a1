//! `GET /metrics` over HTTP/1.1: a minimal server on tokio, one request per
//! connection.
//!
//! It reads a request's head (at most [`MAX_HEAD`] bytes, within [`READ_TIMEOUT`]),
//! answers `GET /metrics` (a query string is ignored) with the encoded metrics, any
//! other path `404`, any other method `405`, a head too large `431`, and an
//! unreadable one `400`, then closes the connection (`Connection: close`). At most
//! [`MAX_CONNECTIONS`] scrapes are served at once; more are closed at once. A
//! request body is never read: a scrape has none.
//!
//! It logs on `tracing`: a failed `accept` and a scrape refused for the limit at
//! `warn` (a scraper, or the process, is in trouble); a request it cannot answer
//! (too slow, unreadable, cut off) at `debug`, with the peer's address.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{CONTENT_TYPE, Metrics};

/// The most bytes of a request's head (request line and headers) read.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// How long a request's head may take to arrive.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a response may take to be written.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once.
pub(crate) const MAX_CONNECTIONS: usize = 16;

/// The endpoint [`Metrics::serve`] started: it serves until dropped or
/// [`stop`](MetricsServer::stop)ped.
#[derive(Debug)]
pub struct MetricsServer {
    local: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// The address it listens on (with the port picked, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops listening; scrapes in progress are cut short.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Metrics {
    /// Serves these metrics at `http://addr/metrics` (see [`MetricsServer`]) from a
    /// task of the current tokio runtime, until the handle is dropped. Fails when
    /// `addr` cannot be bound.
    pub async fn serve(&self, addr: SocketAddr) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let metrics = self.clone();
        let task = tokio::spawn(async move {
            let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
            let mut conns = tokio::task::JoinSet::new();
            loop {
                while conns.try_join_next().is_some() {}
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // A passing shortage (file descriptors...): try again
                        // shortly, which also bounds this line to 100 a second.
                        tracing::warn!(%error, "metrics endpoint: accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    tracing::warn!(
                        %peer,
                        limit = MAX_CONNECTIONS,
                        "metrics endpoint: scrapes at the limit, closing a connection"
                    );
                    continue;
                };
                let metrics = metrics.clone();
                conns.spawn(async move {
                    if let Err(error) = answer(stream, &metrics).await {
                        tracing::debug!(%peer, %error, "metrics endpoint: no answer sent");
                    }
                    drop(slot);
                });
            }
        });
        Ok(MetricsServer { local, task })
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    Metrics,
    NotFound,
    BadMethod,
    TooLarge,
    Bad,
}

/// Reads the head of one request from `stream` and answers it.
async fn answer(mut stream: TcpStream, metrics: &Metrics) -> io::Result<()> {
    let asked = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(asked)) => asked,
        Ok(Err(e)) => return Err(e),
        // Too slow: closed without an answer.
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request head did not arrive in time",
            ));
        }
    };
    let (status, body, content_type) = match asked {
        Asked::Metrics => ("200 OK", metrics.encode(), CONTENT_TYPE),
        Asked::NotFound => ("404 Not Found", "not found\n".into(), "text/plain"),
        Asked::BadMethod => ("405 Method Not Allowed", "GET only\n".into(), "text/plain"),
        Asked::TooLarge => (
            "431 Request Header Fields Too Large",
            "request head too large\n".into(),
            "text/plain",
        ),
        Asked::Bad => ("400 Bad Request", "bad request\n".into(), "text/plain"),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        body.len(),
        if asked == Asked::BadMethod {
            "Allow: GET\r\n"
        } else {
            ""
        },
    );
    response.push_str(&body);
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the response was not taken in time",
        ))
    })
}

/// Reads until the end of the head (`\r\n\r\n`), at most [`MAX_HEAD`] bytes.
async fn read_head(stream: &mut TcpStream) -> io::Result<Asked> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Asked::Bad);
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&head) {
            return Ok(parse(&head[..end]));
        }
        if head.len() >= MAX_HEAD {
            return Ok(Asked::TooLarge);
        }
    }
}

fn find_end(head: &[u8]) -> Option<usize> {
    head.windows(4).position(|w| w == b"\r\n\r\n")
}

/// What the request line of `head` asks for.
pub(crate) fn parse(head: &[u8]) -> Asked {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return Asked::Bad;
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Asked::Bad;
    }
    if method != "GET" {
        return Asked::BadMethod;
    }
    let path = target.split('?').next().unwrap_or_default();
    if path == "/metrics" {
        Asked::Metrics
    } else {
        Asked::NotFound
    }
}
