//! The groups of settings that the client's and the server's configurations share:
//! the same type, under the same field name, on both sides (see
//! [Configuration](crate#configuration)).

use crate::codec::Limits;
use crate::codec::ttheader::HeaderLimits;
use crate::transport::TransportKind;

/// Size limits on what is read off the wire: every frame, and every TTHeader or
/// THeader header. A server applies them to requests, a client to replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireLimits {
    /// The largest frame (or Buffered message). Default 16,384,000 bytes, Apache
    /// Thrift's.
    pub frame: Limits,
    /// The largest TTHeader or THeader header. Default 64 KiB.
    pub header: HeaderLimits,
}

/// The sockets that carry the calls, and the reactor that drives them.
#[derive(Debug, Clone, Default)]
pub struct TransportConfig {
    /// netpoll-rs (the default) or plain tokio (the measured baseline).
    pub kind: TransportKind,
    /// The netpoll-rs reactor's settings (unused on tokio sockets).
    pub reactor: netpoll_rs::Config,
}

/// What is recorded of the calls besides their spans: metrics and the access log.
#[derive(Debug, Clone, Default)]
pub struct Observability {
    /// Where the calls, bytes and the rest are counted (see [`crate::metrics`]).
    /// Default `None`: nothing counted, nothing paid.
    pub metrics: Option<crate::metrics::Metrics>,
    /// Logs one call in [`every`](crate::trace::AccessLog::every), through `tracing`
    /// (see [`crate::trace`]). Default `None`: no access log.
    pub access_log: Option<crate::trace::AccessLog>,
}
