//! Attempts per instance: a client layer around each attempt
//! ([`ClientBuilder::layer_inner`](volo_core::client::ClientBuilder::layer_inner), below
//! the balancer) that counts, for the instance the balancer picked, the attempts it
//! answered and those that failed. It shows where a balancer sent the calls (and the
//! stream openings), and what became of them, when instances die or slow down.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use examples::attempts::InstanceCounts;
//! use examples::echo::EchoServiceClient;
//! use volo_core::context::Address;
//!
//! let addrs: Vec<Address> = vec!["127.0.0.1:9001".parse().unwrap()];
//! let counts = InstanceCounts::new(&addrs);
//! let client = EchoServiceClient::builder()
//!     .addresses(addrs)
//!     .layer_inner(counts.layer())
//!     .build()?;
//! # let _ = client;
//! for line in counts.lines() {
//!     println!("{line}"); // instance=127.0.0.1:9001 ok=0 failed=0
//! }
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use volo_core::client::{ClientCall, ClientContext, Error};
use volo_core::context::Address;
use volo_core::service::{Layer, Service};

/// What one instance did with the attempts sent to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Attempts it answered (an answer the transport could read, exceptions included).
    pub ok: u64,
    /// Attempts that failed on it (connect refused, connection lost, timeout...).
    pub failed: u64,
    /// Attempts dropped before they ended: a backup request answered first, or the
    /// call timed out.
    pub cancelled: u64,
    /// When its first attempt ended, in milliseconds since the Unix epoch (a wall
    /// clock, so that other processes' events can be set against it); 0: none yet.
    pub first_unix_ms: u64,
    /// When its last attempt ended, likewise.
    pub last_unix_ms: u64,
}

/// Attempts per instance, counted by the [`CountAttempts`] layers made by
/// [`layer`](Self::layer) (cheap to clone: clones share the counts).
///
/// Attempts cancelled before they ended (a backup request answered first, the call
/// timed out) count as neither answered nor failed, but as
/// [`cancelled`](Counts::cancelled).
#[derive(Debug, Clone)]
pub struct InstanceCounts {
    /// Per instance, in the order first seen (the given ones first).
    seen: Arc<Mutex<Vec<(String, Counts)>>>,
}

impl InstanceCounts {
    /// Counts that list `instances` from the start (in this order, with zeros until
    /// they get attempts); instances met later are added after them.
    pub fn new<'a>(instances: impl IntoIterator<Item = &'a Address>) -> Self {
        let seen = instances
            .into_iter()
            .map(|a| (a.to_string(), Counts::default()))
            .collect();
        InstanceCounts {
            seen: Arc::new(Mutex::new(seen)),
        }
    }

    /// A layer for [`ClientBuilder::layer_inner`](volo_core::client::ClientBuilder::layer_inner)
    /// that counts into these counts.
    pub fn layer(&self) -> CountAttemptsLayer {
        CountAttemptsLayer {
            counts: self.clone(),
        }
    }

    /// Each instance's counts now, in order.
    pub fn snapshot(&self) -> Vec<(String, Counts)> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One line per instance: `instance=<addr> ok=<n> failed=<n> first_unix_ms=<n>
    /// last_unix_ms=<n>` (cancelled attempts are left out of the counts).
    pub fn lines(&self) -> Vec<String> {
        self.snapshot()
            .into_iter()
            .map(|(addr, c)| {
                format!(
                    "instance={addr} ok={} failed={} first_unix_ms={} last_unix_ms={}",
                    c.ok, c.failed, c.first_unix_ms, c.last_unix_ms
                )
            })
            .collect()
    }

    fn record(&self, instance: &str, outcome: Outcome) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match seen.iter().position(|(a, _)| a == instance) {
            Some(at) => at,
            None => {
                seen.push((instance.to_string(), Counts::default()));
                seen.len() - 1
            }
        };
        let counts = &mut seen[at].1;
        let now = unix_ms();
        if counts.first_unix_ms == 0 {
            counts.first_unix_ms = now;
        }
        counts.last_unix_ms = now;
        match outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Failed => counts.failed += 1,
            Outcome::Cancelled => counts.cancelled += 1,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Ok,
    Failed,
    Cancelled,
}

/// Counts an attempt as cancelled unless it was counted before being dropped.
struct Pending<'a> {
    counts: &'a InstanceCounts,
    instance: String,
    done: bool,
}

impl Pending<'_> {
    fn finish(mut self, ok: bool) {
        self.done = true;
        let outcome = if ok { Outcome::Ok } else { Outcome::Failed };
        self.counts.record(&self.instance, outcome);
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.counts.record(&self.instance, Outcome::Cancelled);
        }
    }
}

/// Makes [`CountAttempts`] services (from [`InstanceCounts::layer`]).
#[derive(Debug, Clone)]
pub struct CountAttemptsLayer {
    counts: InstanceCounts,
}

impl<S> Layer<S> for CountAttemptsLayer {
    type Service = CountAttempts<S>;

    fn layer(self, inner: S) -> CountAttempts<S> {
        CountAttempts {
            inner,
            counts: self.counts,
        }
    }
}

/// Around each attempt: counts its outcome for the instance in
/// `cx.rpc.callee.address` (`none` when the balancer set none).
#[derive(Debug, Clone)]
pub struct CountAttempts<S> {
    inner: S,
    counts: InstanceCounts,
}

/// Calls and stream openings alike: a stream's opening is an attempt, answered once
/// the stream is open.
impl<S, R> Service<ClientContext, R> for CountAttempts<S>
where
    R: ClientCall,
    S: Service<ClientContext, R, Error = Error> + Sync,
    S::Response: Send,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        // The balancer above picked the instance already.
        let instance = cx
            .rpc
            .callee
            .address
            .as_ref()
            .map_or_else(|| "none".to_string(), ToString::to_string);
        let pending = Pending {
            counts: &self.counts,
            instance,
            done: false,
        };
        let out = self.inner.call(cx, req).await;
        pending.finish(out.is_ok());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volo_core::client::{ClientRequest, ClientResponse, ErrorKind};
    use volo_core::service::service_fn;

    #[test]
    fn attempts_are_counted_per_instance_in_order() {
        let a: Address = "127.0.0.1:1".parse().unwrap();
        let b: Address = "127.0.0.1:2".parse().unwrap();
        let counts = InstanceCounts::new([&a, &b]);
        let svc =
            counts
                .layer()
                .layer(service_fn(|cx: &mut ClientContext, _req: ClientRequest| {
                    let up = cx.rpc.callee.address.as_ref().map(ToString::to_string)
                        == Some("127.0.0.1:2".to_string());
                    async move {
                        if up {
                            Ok(ClientResponse::none())
                        } else {
                            Err(Error::new(ErrorKind::Io, "reset"))
                        }
                    }
                }));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for to in [Some(&b), Some(&b), Some(&a), None] {
                let mut cx = ClientContext::new();
                cx.rpc.callee.address = to.cloned();
                let req = ClientRequest::new("echo", crate::echo::Request::default());
                let _ = svc.call(&mut cx, req).await;
            }
        });
        let lines: Vec<String> = counts
            .lines()
            .iter()
            .map(|l| l.split(" first_unix_ms=").next().unwrap().to_string())
            .collect();
        assert_eq!(
            lines,
            [
                "instance=127.0.0.1:1 ok=0 failed=1",
                "instance=127.0.0.1:2 ok=2 failed=0",
                "instance=none ok=0 failed=1",
            ]
        );
        let snap = counts.snapshot();
        assert!(
            snap.iter()
                .all(|(_, c)| c.first_unix_ms > 0 && c.last_unix_ms >= c.first_unix_ms)
        );
    }
}
