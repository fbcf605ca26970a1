//! Traces across hops: the spans each call opens on both sides, and the W3C trace
//! context that ties them together from one process to the next.
//!
//! # Spans
//!
//! Every call opens [`tracing`] spans, named and attributed after OpenTelemetry's
//! conventions for RPC (`rpc.system` = `apache_thrift`):
//!
//! | span | where | fields |
//! |---|---|---|
//! | `rpc.client` | the client, around the whole call (retries and backup requests included) | `otel.name` (`Service/method`), `otel.kind` = `client`, `rpc.system`, `rpc.service`, `rpc.method` |
//! | `rpc.attempt` | the client, around each attempt, once the balancer picked the instance: a child of `rpc.client` | `otel.kind` = `client`, `rpc.attempt` (0 first, then retries and backups), `server.address` |
//! | `rpc.server` | the server, around each call, outside every layer | `otel.name`, `otel.kind` = `server`, `rpc.system`, `rpc.service`, `rpc.method`, `client.address` |
//!
//! Each also has `trace_id`, `span_id` and `parent_span_id` (hexadecimal, as W3C
//! writes them) and, once the call is over, `otel.status_code` (`OK` or `ERROR`) and,
//! on an error, `error.type` (the client's [`ErrorKind`](crate::client::ErrorKind),
//! the server's exception kind, or `panic`). A subscriber that exports to
//! OpenTelemetry (`tracing-opentelemetry` reads the `otel.*` fields) or one that
//! logs shows them; with no subscriber the spans are disabled, their fields are never
//! evaluated, no id is drawn and nothing is added to the call's metainfo.
//!
//! # Trace context
//!
//! A trace spans every hop through the W3C `traceparent`
//! (`00-<trace id>-<parent span id>-<flags>`), carried as a persistent metainfo key,
//! so in TTHeader (and THeader) it reaches the server, and from there every call made
//! with [`ClientContext::forward_from`](crate::client::ClientContext::forward_from):
//!
//! - the client's `rpc.client` span continues the trace of a `traceparent` already
//!   in the context (forwarded from the server call being handled) or starts one;
//!   each `rpc.attempt` sends its own span as the parent;
//! - the server's `rpc.server` span is a child of the `traceparent` received, and
//!   puts its own in the context, so the calls it forwards are its children.
//!
//! A `traceparent` that does not parse is ignored (a new trace starts) and logged at
//! debug level, never trusted in part.
//!
//! # Access logs
//!
//! Both sides can log calls, one `tracing` event at `INFO` per call shown, on the
//! target `volo_core::access`, with `side` = `server` or `client`. Off by default;
//! [`AccessLog`] picks one call in `every`, by a counter (the 1st, the 1+`every`th...
//! of the server's, or of the client's, calls), not at random. What each side logs:
//! [`crate::server::trace`] and [`crate::client::trace`].

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::context::{Address, MetaInfo};
use crate::random::random_seed;

/// Which calls an access log shows
/// ([`Observability::access_log`](crate::config::Observability::access_log), on either
/// side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessLog {
    /// One call in `every` (1: all of them; 0 counts as 1).
    pub every: u64,
}

impl AccessLog {
    /// Every call.
    pub fn all() -> Self {
        AccessLog { every: 1 }
    }
}

/// A count of calls, for an access log's sampling.
#[derive(Debug, Default)]
pub(crate) struct AccessCount(AtomicU64);

impl AccessCount {
    /// Whether the next call is one to log under `log`.
    pub(crate) fn pick(&self, log: Option<&AccessLog>) -> bool {
        let Some(log) = log else {
            return false;
        };
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        n.is_multiple_of(log.every.max(1))
    }
}

/// One call as an access log shows it, on either side: the fields both sides log,
/// written in one place so that the two lines keep the same shape.
pub(crate) struct AccessLine<'a> {
    /// `server` or `client`.
    pub(crate) side: &'static str,
    pub(crate) method: &'a str,
    pub(crate) service: &'a str,
    /// The other side: the caller on a server, the instance called on a client.
    pub(crate) peer: Option<&'a Address>,
    /// `ok`, or why the call failed.
    pub(crate) status: &'a str,
    pub(crate) started: Instant,
    /// The client's attempts; a server line has no such field.
    pub(crate) attempts: Option<u64>,
    pub(crate) request_bytes: usize,
    pub(crate) reply_bytes: usize,
}

impl AccessLine<'_> {
    /// Logs the line at `INFO` on `volo_core::access`, the call's duration taken now.
    pub(crate) fn log(&self) {
        tracing::info!(
            target: "volo_core::access",
            side = self.side,
            method = %self.method,
            service = %self.service,
            peer = self.peer.map(tracing::field::display),
            status = self.status,
            duration_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            attempts = self.attempts,
            request_bytes = self.request_bytes,
            reply_bytes = self.reply_bytes,
            "call"
        );
    }
}

/// The metainfo key of the trace context (W3C Trace Context's header name).
pub const TRACEPARENT: &str = "traceparent";

/// The `rpc.system` of every span: OpenTelemetry's name for Apache Thrift.
pub const RPC_SYSTEM: &str = "apache_thrift";

/// A W3C trace context: the trace, the span that is the parent of the next hop, and
/// whether the trace is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace (never 0).
    pub trace_id: u128,
    /// The parent span (never 0).
    pub span_id: u64,
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceParent {
    /// A new trace's first span, sampled.
    pub fn new_root() -> Self {
        TraceParent {
            trace_id: new_trace_id(),
            span_id: new_span_id(),
            sampled: true,
        }
    }

    /// A new span in this one's trace, with its flags (this one is its parent).
    pub fn child(&self) -> Self {
        TraceParent {
            span_id: new_span_id(),
            ..*self
        }
    }

    /// Reads a `traceparent` value: version `00` exactly as W3C writes it (55
    /// characters, lower-case hexadecimal, ids not all zero); a later version by its
    /// first four fields, as the recommendation asks; `None` for anything else
    /// (version `ff` included).
    pub fn parse(value: &str) -> Option<Self> {
        let b = value.as_bytes();
        if b.len() < 55 || (b.len() > 55 && (b[55] != b'-' || value.starts_with("00"))) {
            return None;
        }
        let field = |from: usize, len: usize| {
            let s = value.get(from..from + len)?;
            s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
                .then_some(s)
        };
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = field(0, 2)?;
        if version == "ff" {
            return None;
        }
        let trace_id = u128::from_str_radix(field(3, 32)?, 16).ok()?;
        let span_id = u64::from_str_radix(field(36, 16)?, 16).ok()?;
        let flags = u8::from_str_radix(field(53, 2)?, 16).ok()?;
        if trace_id == 0 || span_id == 0 {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The trace id as W3C writes it (32 hexadecimal digits).
    pub fn trace_hex(&self) -> Hex128 {
        Hex128(self.trace_id)
    }

    /// The span id as W3C writes it (16 hexadecimal digits).
    pub fn span_hex(&self) -> Hex64 {
        Hex64(self.span_id)
    }
}

/// `00-<trace id>-<span id>-<flags>`.
impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_hex(),
            self.span_hex(),
            u8::from(self.sampled)
        )
    }
}

/// A trace id shown as 32 hexadecimal digits.
#[derive(Debug, Clone, Copy)]
pub struct Hex128(pub u128);

impl fmt::Display for Hex128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A span id shown as 16 hexadecimal digits.
#[derive(Debug, Clone, Copy)]
pub struct Hex64(pub u64);

impl fmt::Display for Hex64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A random trace id, not 0.
fn new_trace_id() -> u128 {
    let id = (u128::from(random_seed()) << 64) | u128::from(random_seed());
    id.max(1)
}

/// A random span id, not 0.
fn new_span_id() -> u64 {
    random_seed().max(1)
}

/// Ties `span` to `ids` (and to `parent`, when the trace came from one): records its
/// `trace_id`, `span_id` and `parent_span_id` fields.
pub(crate) fn record_ids(span: &tracing::Span, ids: &TraceParent, parent: Option<&TraceParent>) {
    span.record("trace_id", tracing::field::display(ids.trace_hex()));
    span.record("span_id", tracing::field::display(ids.span_hex()));
    if let Some(p) = parent {
        span.record("parent_span_id", tracing::field::display(p.span_hex()));
    }
}

/// Records a call's outcome on `span`: `otel.status_code`, and `error.type` when it
/// failed.
pub(crate) fn record_outcome<E: fmt::Debug>(span: &tracing::Span, error: Option<E>) {
    match error {
        None => {
            span.record("otel.status_code", "OK");
        }
        Some(kind) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", tracing::field::debug(kind));
        }
    }
}

/// Makes `span` the next span of the trace `metainfo` carries (a child of its
/// `traceparent`, or a new trace's root when it has none that parses), records its
/// ids, and puts it in `metainfo` as the parent of the next hop. Its ids.
pub(crate) fn continue_trace(span: &tracing::Span, metainfo: &mut MetaInfo) -> TraceParent {
    let parent = parse_received(metainfo.persistent(TRACEPARENT));
    let ids = match &parent {
        Some(p) => p.child(),
        None => TraceParent::new_root(),
    };
    record_ids(span, &ids, parent.as_ref());
    metainfo.set_persistent(TRACEPARENT, ids.to_string());
    ids
}

/// The `traceparent` of a metainfo value, logged at debug level when it is there but
/// does not parse.
fn parse_received(value: Option<&str>) -> Option<TraceParent> {
    let value = value?;
    let parsed = TraceParent::parse(value);
    if parsed.is_none() {
        tracing::debug!(
            value,
            "a traceparent that does not parse: a new trace starts"
        );
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_read_and_write_as_w3c_shows_them() {
        let s = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = TraceParent::parse(s).unwrap();
        assert_eq!(t.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(t.span_id, 0x00f067aa0ba902b7);
        assert!(t.sampled);
        assert_eq!(t.to_string(), s);
        let unsampled = TraceParent::parse(&s.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled);
        // A later version: its first four fields, whatever follows a dash.
        let later = format!("01{}-what-comes-next", &s[2..]);
        assert_eq!(TraceParent::parse(&later).unwrap().span_id, t.span_id);
    }

    #[test]
    fn bad_traceparents_are_refused_whole() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        for bad in [
            "",
            "00",
            &good[..54],
            &format!("{good}-extra"),
            &good.replace("00-4b", "ff-4b"),
            &good.to_uppercase(),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn children_keep_the_trace_and_draw_a_new_span() {
        let root = TraceParent::new_root();
        assert_ne!(root.trace_id, 0);
        let child = root.child();
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        assert_eq!(TraceParent::parse(&child.to_string()), Some(child));
    }
}
