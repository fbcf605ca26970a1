//! Metrics in the Prometheus (OpenMetrics) text format: calls by service, method and
//! outcome, latency histograms, calls in flight, connections, bytes, retries, backup
//! requests, breaker states and limiter refusals.
//!
//! One [`Metrics`] is a registry of its own (no global one): a cheap handle
//! (`Clone`, an `Arc` inside) that a server and a client of one process
//! may share ([`Observability::metrics`], in both configurations), each counting under its own
//! names. Without one (the default) nothing is counted and nothing is paid.
//! [`Metrics::encode`] writes the text a scraper reads; [`Metrics::serve`] serves it
//! at `GET /metrics` on an address of its own.
//!
//! ```
//! # async fn run() -> std::io::Result<()> {
//! use volo_core::metrics::Metrics;
//! use volo_core::config::Observability;
//! use volo_core::server::ServerConfig;
//!
//! let metrics = Metrics::new();
//! let config = ServerConfig {
//!     observability: Observability { metrics: Some(metrics.clone()), ..Default::default() },
//!     ..ServerConfig::default()
//! };
//! let endpoint = metrics.serve("127.0.0.1:0".parse().unwrap()).await?;
//! println!("scrape http://{}/metrics", endpoint.local_addr());
//! # drop(config);
//! # Ok(())
//! # }
//! ```
//!
//! # What is counted
//!
//! Per call, by layers of the service stacks ([`MeteredServer`](crate::server::metered::MeteredServer), outermost on
//! the server, around the user's layers; [`MeteredClient`](crate::client::metered::MeteredClient), in the default
//! client stack right inside the call's span, around the timeout, the breaker and the retries):
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `rpc_server_requests_total` | counter | `service`, `method`, `outcome` | calls that reached the server's stack, by how they ended |
//! | `rpc_server_duration_seconds` | histogram | `service`, `method` | from the call entering the stack (its frame decoded) to its reply value, in seconds |
//! | `rpc_server_inflight_requests` | gauge | `service` | calls in the server's stack now |
//! | `rpc_client_requests_total` | counter | `service`, `method`, `outcome` | calls made, by how they ended (retries and backups inside one call count once) |
//! | `rpc_client_duration_seconds` | histogram | `service`, `method` | the whole call as its caller waits for it, retries included |
//! | `rpc_client_inflight_requests` | gauge | `service` | calls in progress now |
//! | `rpc_client_retries_total` | counter | `service`, `method` | retries the retry layer made |
//! | `rpc_client_backup_requests_total` | counter | `service`, `method` | backup requests sent |
//! | `rpc_client_tier_calls_total` | counter | `service`, `tier` (`host`, `rack`, `zone`, `any`) | attempts a [`Tiered`](crate::client::Tiered) balancer sent to each locality tier (given [`Tiered::with_metrics`](crate::client::Tiered::with_metrics)) |
//!
//! Of the [governance](crate::governance) handles watched (a client built with one and
//! metrics on, a server given one; or [`Metrics::watch_client_governance`]), read at
//! each scrape:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `rpc_governance_value` | gauge | `side` (`client`, `server`), `service`, `method` (`*` for the rule of any method, empty for a server), `setting` | a value in force: `rpc_timeout_seconds`, `connect_timeout_seconds`, `retry_max`, `backup_delay_seconds`, `breaker_enabled`, `breaker_error_rate`, `breaker_min_samples`; a server's `connection_limit`, `qps_limit`, `concurrency_limit` (0: none) |
//! | `rpc_governance_updates_total` | counter | `side`, `service`, `category` (`rpc_timeout`, `retry`, `circuit_break`, `limit`), `result` (`applied`, `refused`) | values given to the handle, and whether they were applied or refused (the last good one kept) |
//!
//! Per connection and per frame, by the server's drivers and the client's transport:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `rpc_server_open_connections` | gauge | | connections open now |
//! | `rpc_server_connections_total` | counter | | connections accepted (those over `max_connections`, closed at once, not included) |
//! | `rpc_server_received_bytes_total` | counter | | bytes of the request frames cut from connections, framing included |
//! | `rpc_server_sent_bytes_total` | counter | | bytes of the replies written, framing included (exceptions too) |
//! | `rpc_server_limiter_rejections_total` | counter | `reason` (`concurrency`, `qps`, `streams`) | calls the limiter refused before decoding them, and streams over [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight) (`streams`) |
//! | `rpc_server_unrouted_requests_total` | counter | | calls a multiplexed server routed to no service (unknown service name, no default) |
//! | `rpc_client_sent_bytes_total` | counter | | bytes of the request frames written |
//! | `rpc_client_received_bytes_total` | counter | | bytes of the reply frames read |
//!
//! Per stream ([`crate::stream`]), by the connection's session on either side
//! (`side` in the names is `server` or `client`):
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `rpc_<side>_open_streams` | gauge | | streams open now |
//! | `rpc_<side>_streams_total` | counter | `outcome` | streams ended, by how (below) |
//! | `rpc_<side>_stream_messages_total` | counter | `direction` (`sent`, `received`) | messages of streams |
//! | `rpc_<side>_stream_bytes_total` | counter | `direction` | bytes of those messages (the structs, framing not included) |
//!
//! A stream's outcome: `ok` (both directions ended cleanly), `application_error`
//! (an exception in a trailer), `biz_error` (a business status in a trailer),
//! `cancelled`, `deadline_exceeded`, `reset` (the peer reset it with another error),
//! `protocol_error` (the peer broke the protocol on it, or a message did not decode),
//! `connection_error` (its connection failed), `refused` (not opened: the
//! connection's limit, a server shutting down, a method or service not served).
//! Streams have no method label: their counters are per side.
//!
//! And at each scrape:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `rpc_client_breaker_state` | gauge | `service` | the service breaker: 0 closed, 1 half-open, 2 open (the worst of the clients of that service in the process) |
//! | `rpc_client_instance_breakers_not_closed` | gauge | `service` | instance breakers open or half-open, over the clients of that service (a count: instances are not labels) |
//!
//! Histogram buckets are exponential from 50 µs, doubling, to 6.6 s (18 buckets and
//! `+Inf`): RPC latencies from a loopback call to a call near the default timeout.
//!
//! # Outcomes
//!
//! On the server: `ok` (a reply; a declared IDL exception is a reply too, in the
//! result struct, and the server's stack does not see inside it), `unknown_method`,
//! `decode_error` (the arguments did not decode), `application_error` (a
//! `TApplicationException` from the handler or a layer), `deadline_exceeded` (the
//! caller's deadline passed: [`crate::server::deadline`]), `overloaded` and `closing`
//! (a layer of the user's refused the call: [`DispatchError::refusal`](crate::server::DispatchError::refusal)),
//! `panic` (the handler panicked), `cancelled` (the call was dropped unfinished: its
//! connection closed).
//! Calls refused before the stack (by the limiter, a multiplexed server's routing, an
//! unreadable header) are not in `rpc_server_requests_total`: their service is not
//! known, or not known to be one of the server's. The limiter's refusals and the
//! unrouted calls have counters of their own; a frame with an unreadable header closes
//! its connection (`rpc_server_open_connections` goes down).
//!
//! On the client: `ok`, or the [`ErrorKind`](crate::client::ErrorKind) in snake case
//! (`connect`, `io`, `timeout`, `circuit_open`, `no_instance`, `protocol`, `encode`,
//! `application`, `overloaded`, `rejected`), or `cancelled` (the caller dropped the
//! call). A declared IDL exception is `ok`, as the breakers take it.
//!
//! # Label cardinality
//!
//! Every label set a scraper stores costs memory for ever, so the labels are bounded:
//!
//! - a server names a method only once its dispatcher knew it: a call of a method the
//!   service does not have counts as method `_other` (OpenTelemetry's convention), so
//!   a caller cannot make up new series by sending names;
//! - at most [`MAX_METHODS`] (service, method) pairs are kept per side (server,
//!   client); calls of further methods count as method `_other` of their service. (A
//!   user layer that answers calls before the dispatcher sees names as they were
//!   sent; the cap bounds those.)
//! - services are what the code serves and calls; outcomes and reasons are fixed
//!   lists; instances are not labels.
//!
//! # Cost
//!
//! A call finds its service's and method's series through two maps read without a
//! lock (no allocation, no reference count once the pair is known), reads the clock
//! twice, and adds to about six counters. Those are striped: each thread adds to a
//! copy of its own, on cache lines of its own, and a scrape sums the copies, so the
//! threads of a side do not pass the lines back and forth on every call. The price is
//! memory: one copy per core, at most 8, of each counter and histogram (a histogram's
//! copy is 256 bytes), bounded with the labels.
//!
//! `rpc-bench --metrics on,off` measures the cost in one run, alternating one-second
//! slices with the metrics on and off (the workspace's `docs/performance.md` gives
//! what it found).
//!
//! [`Observability::metrics`]: crate::config::Observability::metrics

mod governance;
mod http;
pub(crate) mod labels;
mod striped;

use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

pub use http::MetricsServer;
pub use labels::MAX_METHODS;
use labels::{CallLabels, MethodTable, OutcomeLabels, ReasonLabels, ServiceLabels, TierLabels};
use striped::{LatencyHistogram, StripedCounter, StripedGauge};

use crate::transport::lock;

/// A registry of this crate's metrics (see the [module docs](self)): cheap to clone,
/// clones share it.
#[derive(Clone)]
pub struct Metrics {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

type HistogramFamily = Family<CallLabels, LatencyHistogram>;

/// The families of one side (server or client) that are kept per call.
pub(crate) struct CallFamilies {
    pub(crate) requests: Family<OutcomeLabels, StripedCounter>,
    pub(crate) duration: HistogramFamily,
    pub(crate) inflight: Family<ServiceLabels, StripedGauge>,
}

impl CallFamilies {
    fn new() -> Self {
        CallFamilies {
            requests: Family::default(),
            duration: Family::default(),
            inflight: Family::default(),
        }
    }

    fn register(&self, registry: &mut Registry, side: &str) {
        registry.register(
            format!("rpc_{side}_requests"),
            format!("RPC {side} calls by service, method and outcome"),
            self.requests.clone(),
        );
        registry.register(
            format!("rpc_{side}_duration_seconds"),
            format!("RPC {side} call latency in seconds, by service and method"),
            self.duration.clone(),
        );
        registry.register(
            format!("rpc_{side}_inflight_requests"),
            format!("RPC {side} calls in progress, by service"),
            self.inflight.clone(),
        );
    }
}

pub(crate) struct Inner {
    registry: Registry,
    pub(crate) server_streams: StreamCounters,
    pub(crate) client_streams: StreamCounters,
    pub(crate) server_calls: CallFamilies,
    pub(crate) client_calls: CallFamilies,
    pub(crate) server_methods: MethodTable,
    pub(crate) client_methods: MethodTable,
    pub(crate) client_retries: Family<CallLabels, Counter>,
    pub(crate) client_backups: Family<CallLabels, Counter>,
    client_tiers: Family<TierLabels, Counter>,
    pub(crate) server_conns: ServerConns,
    pub(crate) client_bytes: ByteCounters,
    breakers: Arc<Breakers>,
    governance: Arc<governance::Watched>,
}

/// The server's per-connection counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerConns {
    pub(crate) open: Gauge,
    pub(crate) accepted: Counter,
    pub(crate) bytes: ByteCounters,
    pub(crate) rejected_concurrency: Counter,
    pub(crate) rejected_qps: Counter,
    pub(crate) rejected_streams: Counter,
    pub(crate) unrouted: Counter,
}

impl ServerConns {
    /// Counts a connection accepted, open until the guard is dropped.
    pub(crate) fn opened(&self) -> OpenConnection {
        self.accepted.inc();
        self.open.inc();
        OpenConnection(self.open.clone())
    }
}

/// A connection in `rpc_server_open_connections` until dropped.
#[derive(Debug)]
pub(crate) struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One side's stream counters (see the module docs), the per-message ones striped.
#[derive(Debug, Clone)]
pub(crate) struct StreamCounters {
    pub(crate) open: Gauge,
    outcomes: Family<OutcomeOnly, Counter>,
    pub(crate) sent: StripedCounter,
    pub(crate) received: StripedCounter,
    pub(crate) sent_bytes: StripedCounter,
    pub(crate) received_bytes: StripedCounter,
}

/// `{outcome}` of a stream.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct OutcomeOnly {
    outcome: &'static str,
}

impl prometheus_client::encoding::EncodeLabelSet for OutcomeOnly {
    fn encode(&self, e: &mut prometheus_client::encoding::LabelSetEncoder<'_>) -> fmt::Result {
        use prometheus_client::encoding::EncodeLabel;
        ("outcome", self.outcome).encode(e.encode_label())
    }
}

impl StreamCounters {
    fn register(registry: &mut Registry, side: &str) -> Self {
        let open = Gauge::default();
        registry.register(
            format!("rpc_{side}_open_streams"),
            format!("Streams open on the {side} side"),
            open.clone(),
        );
        let outcomes = Family::<OutcomeOnly, Counter>::default();
        registry.register(
            format!("rpc_{side}_streams"),
            format!("Streams the {side} side ended, by outcome"),
            outcomes.clone(),
        );
        let messages = Family::<ReasonLabels, StripedCounter>::default();
        let bytes = Family::<ReasonLabels, StripedCounter>::default();
        registry.register(
            format!("rpc_{side}_stream_messages"),
            format!("Stream messages of the {side} side, by direction"),
            messages.clone(),
        );
        registry.register(
            format!("rpc_{side}_stream_bytes"),
            format!("Bytes of stream messages of the {side} side, by direction"),
            bytes.clone(),
        );
        let of = |f: &Family<ReasonLabels, StripedCounter>, d: &'static str| {
            f.get_or_create_owned(&ReasonLabels::direction(d))
        };
        StreamCounters {
            open,
            sent: of(&messages, "sent"),
            received: of(&messages, "received"),
            sent_bytes: of(&bytes, "sent"),
            received_bytes: of(&bytes, "received"),
            outcomes,
        }
    }

    /// Counts a stream refused before it was open.
    pub(crate) fn refused(&self) {
        self.outcomes
            .get_or_create(&OutcomeOnly { outcome: "refused" })
            .inc();
    }

    /// Counts a stream that ended with `outcome` (one of the module docs' names).
    pub(crate) fn ended(&self, outcome: &'static str) {
        self.open.dec();
        self.outcomes.get_or_create(&OutcomeOnly { outcome }).inc();
    }
}

/// Bytes in and out (added per frame, so striped like the per-call counts).
#[derive(Debug, Clone, Default)]
pub(crate) struct ByteCounters {
    pub(crate) received: StripedCounter,
    pub(crate) sent: StripedCounter,
}

impl Metrics {
    /// A registry with every family of the [module docs](self) registered and no
    /// series yet.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let server_calls = CallFamilies::new();
        server_calls.register(&mut registry, "server");
        let client_calls = CallFamilies::new();
        client_calls.register(&mut registry, "client");

        let server_conns = ServerConns::default();
        registry.register(
            "rpc_server_open_connections",
            "Server connections open",
            server_conns.open.clone(),
        );
        registry.register(
            "rpc_server_connections",
            "Server connections accepted",
            server_conns.accepted.clone(),
        );
        registry.register(
            "rpc_server_received_bytes",
            "Bytes of request frames the server read, framing included",
            server_conns.bytes.received.clone(),
        );
        registry.register(
            "rpc_server_sent_bytes",
            "Bytes of replies the server wrote, framing included",
            server_conns.bytes.sent.clone(),
        );
        let rejections = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "rpc_server_limiter_rejections",
            "Calls the server's limiter refused before decoding them, by reason",
            rejections.clone(),
        );
        registry.register(
            "rpc_server_unrouted_requests",
            "Calls a multiplexed server routed to no service (answered with an exception)",
            server_conns.unrouted.clone(),
        );
        let server_conns = ServerConns {
            rejected_concurrency: rejections
                .get_or_create_owned(&ReasonLabels::reason("concurrency")),
            rejected_qps: rejections.get_or_create_owned(&ReasonLabels::reason("qps")),
            rejected_streams: rejections.get_or_create_owned(&ReasonLabels::reason("streams")),
            ..server_conns
        };

        let client_bytes = ByteCounters::default();
        registry.register(
            "rpc_client_sent_bytes",
            "Bytes of request frames the client wrote, framing included",
            client_bytes.sent.clone(),
        );
        registry.register(
            "rpc_client_received_bytes",
            "Bytes of reply frames the client read, framing included",
            client_bytes.received.clone(),
        );
        let client_retries = Family::<CallLabels, Counter>::default();
        registry.register(
            "rpc_client_retries",
            "Retries the client's retry layer made, by service and method",
            client_retries.clone(),
        );
        let client_backups = Family::<CallLabels, Counter>::default();
        registry.register(
            "rpc_client_backup_requests",
            "Backup requests the client sent, by service and method",
            client_backups.clone(),
        );
        let client_tiers = Family::<TierLabels, Counter>::default();
        registry.register(
            "rpc_client_tier_calls",
            "Attempts a locality-tiered balancer sent to each tier, by service",
            client_tiers.clone(),
        );
        let breakers = Arc::new(Breakers::default());
        registry.register_collector(Box::new(Arc::clone(&breakers)));
        let governance = Arc::new(governance::Watched::default());
        registry.register_collector(Box::new(Arc::clone(&governance)));
        let server_streams = StreamCounters::register(&mut registry, "server");
        let client_streams = StreamCounters::register(&mut registry, "client");

        Metrics {
            inner: Arc::new(Inner {
                registry,
                server_streams,
                client_streams,
                server_calls,
                client_calls,
                server_methods: MethodTable::default(),
                client_methods: MethodTable::default(),
                client_retries,
                client_backups,
                client_tiers,
                server_conns,
                client_bytes,
                breakers,
                governance,
            }),
        }
    }

    /// The metrics in the OpenMetrics text format (what Prometheus scrapes; the
    /// content type is [`CONTENT_TYPE`]), ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String fails only if an encoder does, and ours do not.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry);
        out
    }

    /// The server's per-connection counters.
    pub(crate) fn server_conns(&self) -> &ServerConns {
        &self.inner.server_conns
    }

    /// One side's stream counters.
    pub(crate) fn streams(&self, server: bool) -> &StreamCounters {
        match server {
            true => &self.inner.server_streams,
            false => &self.inner.client_streams,
        }
    }

    /// The client's byte counters.
    pub(crate) fn client_bytes(&self) -> &ByteCounters {
        &self.inner.client_bytes
    }

    /// The counters of attempts sent to each locality tier by `service`'s client,
    /// nearest first (`host`, `rack`, `zone`, `any`).
    pub fn tier_calls(&self, service: &str) -> [Counter; 4] {
        let service: Arc<str> = Arc::from(service);
        crate::registry::Tier::ALL.map(|t| {
            self.inner.client_tiers.get_or_create_owned(&TierLabels {
                service: Arc::clone(&service),
                tier: t.name(),
            })
        })
    }

    /// Reports the values in force in `governance` (a client's) at each scrape, and
    /// the values it took and refused, for as long as it lives. A client built with
    /// [`ClientBuilder::governance`](crate::client::ClientBuilder::governance) and
    /// metrics on is watched already.
    pub fn watch_client_governance(&self, governance: &crate::governance::ClientGovernance) {
        self.inner.governance.watch(governance.downgrade());
    }

    /// [`watch_client_governance`](Self::watch_client_governance) for a server's
    /// limits.
    pub fn watch_server_governance(&self, governance: &crate::governance::ServerGovernance) {
        self.inner.governance.watch(governance.downgrade());
    }

    /// Reports `breaker`'s state as the service breaker of `service` at each scrape,
    /// for as long as it lives.
    pub(crate) fn watch_breaker(&self, service: &str, breaker: Box<dyn BreakerProbe>) {
        lock(&self.inner.breakers.services).push((service.into(), breaker));
    }

    /// Reports how many of `breakers` (a client's instance breakers, its count of
    /// those not closed) are not closed, under `service`, for as long as they live.
    pub(crate) fn watch_instance_breakers(&self, service: &str, breakers: Box<dyn BreakerProbe>) {
        lock(&self.inner.breakers.instances).push((service.into(), breakers));
    }
}

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Reads a breaker's figure at a scrape, while the breaker lives: a service
/// breaker's state (0 closed, 1 half open, 2 open), or the number of a client's instance breakers
/// that are not closed.
pub(crate) trait BreakerProbe: Send + Sync {
    /// The figure; `None` once the breaker is gone.
    fn value(&self) -> Option<i64>;
}

/// A service's name and its breaker.
type Watched = (Arc<str>, Box<dyn BreakerProbe>);

/// The service breakers reported at each scrape.
#[derive(Default)]
struct Breakers {
    /// Service breakers: the worst state per service is reported.
    services: Mutex<Vec<Watched>>,
    /// Instance breakers of each client: their counts are added per service.
    instances: Mutex<Vec<Watched>>,
}

impl fmt::Debug for Breakers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breakers").finish_non_exhaustive()
    }
}

/// The live probes of `list`, folded per service with `fold` (the dead forgotten),
/// sorted by service.
fn gather(list: &Mutex<Vec<Watched>>, fold: fn(i64, i64) -> i64) -> Vec<(Arc<str>, i64)> {
    let mut values: Vec<(Arc<str>, i64)> = Vec::new();
    lock(list).retain(|(service, probe)| {
        let Some(v) = probe.value() else {
            return false;
        };
        match values.iter_mut().find(|(s, _)| s == service) {
            Some((_, acc)) => *acc = fold(*acc, v),
            None => values.push((Arc::clone(service), v)),
        }
        true
    });
    values.sort();
    values
}

/// Writes a gauge family of one value per service.
fn encode_gauges(
    encoder: &mut DescriptorEncoder<'_>,
    (name, help): (&str, &str),
    values: &[(Arc<str>, i64)],
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (service, v) in values {
        let labels = ServiceLabels {
            service: Arc::clone(service),
        };
        ConstGauge::new(*v).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Breakers {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let states = gather(&self.services, i64::max);
        let service = (
            "rpc_client_breaker_state",
            "The client's service breaker: 0 closed, 1 half-open, 2 open",
        );
        encode_gauges(&mut encoder, service, &states)?;
        let counts = gather(&self.instances, |a, b| a + b);
        let instances = (
            "rpc_client_instance_breakers_not_closed",
            "The client's instance breakers that are open or half-open",
        );
        encode_gauges(&mut encoder, instances, &counts)
    }
}

#[cfg(test)]
pub(crate) mod tests;
