//! The client: a stack of [`Service`]s that every call goes down, with the transport at
//! the bottom.
//!
//! Generated `<Service>Client<T>` types are generic over the stack beneath them, as
//! tonic's generated clients are over any tower service. `<Service>Client::builder()`
//! builds the default stack, with the service name from the IDL. A call goes down it
//! from the outermost layer (the [`Client`] names the call in the context first):
//!
//! ```text
//!   your layers (.layer)             around the whole call, the first added outermost
//!   Trace                            the call's `rpc.client` span, and the access log
//!   MeteredClient                    counts the call (with Observability::metrics)
//!   Timeout                          the call's deadline, retries included
//!   ServiceBreaker                   fails fast while the service's breaker is open
//!   Retry                            another attempt for a failure another may fix
//!   Backup                           a second attempt when the first is slow
//!   Balance                          picks the instance for each attempt, skipping
//!                                    those whose instance breaker is open
//!   TraceAttempt                     each attempt's `rpc.attempt` span
//!   your inner layers (.layer_inner) around each attempt, the instance known
//!   Transport                        pools per instance, framing, the wire
//! ```
//!
//! [`DefaultStack`] is the type of the part from [`Trace`](trace::Trace) down.
//!
//! Each layer is a [`Service`] of its own, in a module of its own, taking its clock as
//! an input, so it can be used, replaced and tested alone.
//!
//! # Defaults
//!
//! Every default of the stack, in one place (the server's limiter and deadline are in
//! [`crate::server`]):
//!
//! | what | default | set with |
//! |---|---|---|
//! | framing, protocol | TTHeader, Binary | [`ClientConfig::format`] |
//! | connect timeout | 1 s | [`ClientTimeouts::connect`] |
//! | call timeout | 10 s, retries and backups included; the time left goes to the server in TTHeader; a call fails within 1% of its limit after its deadline (calls of at least the client's limit share one timer per client) | [`ClientTimeouts::rpc`], [`ClientContext::timeout`] |
//! | connections per instance | 64, one call at a time on each; mux: 2 | [`ConnectionPool::max_per_instance`], [`ConnectionPool::mux`] |
//! | service breaker | on: opens at 50% failures over 10 s once 200 calls were seen, fails fast for 5 s, then 3 trial calls, closed again after 3 successes | [`ClientBuilder::service_breaker`], [`BreakerConfig::service`] |
//! | failure retry | up to 2 retries; a call that may have run is retried only if its method is marked idempotent (failed connects always); exponential backoff from 10 ms to 1 s with full jitter; a budget of 10% extra calls; never past the deadline; a retried request is marked (`RPC_PERSIST_RetryReq`) and not retried again downstream | [`ClientBuilder::retry`], [`ClientBuilder::idempotent`], [`RetryPolicy`] |
//! | backup requests | off; on: after the recent p99 of successful attempts (within 10 ms..1 s, 1 s until 100 are seen), idempotent methods only, one backup per call, to another instance, within a budget of 10% | [`ClientBuilder::backup`], [`BackupPolicy`] |
//! | balancing | weighted random (also: round robin, smooth weighted round robin, power of two choices on calls in flight, consistent hash on [`ClientContext::hash_key`]) | [`ClientBuilder::load_balance`] |
//! | instance breakers | on: an instance is skipped after 10 failures in a row, or 50% over 10 s with at least 10 calls; for 5 s, then 3 trial calls; with every instance's open, calls go to them anyway (by weight) | [`ClientBuilder::instance_breaker`], [`BreakerConfig::instance`] |
//! | what a breaker counts as a failure | connect, I/O, timeout, protocol errors; servers' over-limit refusals in instance breakers only (the service breaker leaves them to the servers' limiters); application exceptions and IDL exceptions are answers | [`counts_as_failure`] |
//! | frame, reply header limits | 16,384,000 bytes, 64 KiB | [`ClientConfig::wire`] |
//!
//! A call that finds all connections busy waits for one; mux connections (off by
//! default as in Kitex and Volo) need TTHeader framing: replies are matched to calls by
//! the sequence id in their header.
//!
//! # Errors
//!
//! Below the IDL every failure is one [`Error`]: match on its [`ErrorKind`], or ask
//! [`Error::is_timeout`], [`Error::is_circuit_open`], [`Error::is_retryable`]; it names
//! the instance that failed ([`Error::instance`]) and keeps its cause
//! ([`std::error::Error::source`]). Generated methods return [`ClientError`]: the
//! method's declared exception, or that [`Error`].

pub mod backup;
pub mod balance;
pub mod breaker;
mod builder;
mod error;
pub mod metered;
#[cfg(test)]
pub(crate) mod mock;
mod multiplexed;
mod mux;
pub(crate) mod pool;
mod request;
pub mod retry;
pub mod stream;
pub mod timeout;
pub mod trace;
mod transport;

pub use backup::{Backup, BackupDelay, BackupLayer, BackupPolicy};
pub use balance::{
    Balance, BalanceLayer, Change, Changes, ConsistentHash, Discover, DiscoverList, Instance,
    InstanceList, LoadBalance, LocalFirst, Locality, PowerOfTwoChoices, RoundRobin, StaticDiscover,
    Step, Tags, Tier, Tiered, WeightedRandom, WeightedRoundRobin,
};
pub use breaker::{
    BreakerConfig, BreakerState, CircuitOpen, InstanceBreakers, InstancePermit, ServiceBreaker,
    ServiceBreakerLayer, counts_as_failure,
};
pub use builder::{ClientBuilder, DefaultStack, MakeClient, Untyped};
pub use error::{BoxError, ClientError, Error, ErrorKind};
pub use request::{ClientCall, ClientRequest, ClientResponse, MethodName};
pub use retry::{Backoff, RETRY_KEY, Retry, RetryBudget, RetryLayer, RetryPolicy};
pub use stream::{ClientStream, ClientStreams, OpenedStream, StreamClient, StreamRequest};
pub use timeout::{Timeout, TimeoutLayer};
pub use transport::Transport;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thrift_wire::{Message, Utf8Bytes};

use crate::codec::{Framing, Protocol};
use crate::config::{Observability, TransportConfig, WireLimits};
use crate::context::{Address, MetaInfo};
use crate::service::Service;
use crate::stream::StreamError;

/// Client settings, in groups by concern (see [Configuration](crate#configuration)):
/// how calls are encoded, what is accepted off the wire, timeouts, connections, the
/// sockets and what is recorded. The policies (retry, backup requests, breakers,
/// balancing) are set on the [`ClientBuilder`].
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// How requests are framed and encoded.
    pub format: WireFormat,
    /// Size limits on replies: frames and TTHeader/THeader headers.
    pub wire: WireLimits,
    /// How long a connect and a call may take.
    pub timeouts: ClientTimeouts,
    /// How many connections to each instance, and whether calls share them.
    pub pool: ConnectionPool,
    /// This client's service name, sent in TTHeader as the caller.
    pub caller: String,
    /// The sockets and their reactor.
    pub transport: TransportConfig,
    /// TLS to TCP instances (`ip:port`, `name:port`): whom to trust, a client
    /// certificate, the server name; see [`crate::transport::tls`]. The handshake
    /// counts towards the connect timeout. Default `None`: plain TCP.
    pub tls: Option<crate::transport::tls::ClientTls>,
    /// How streams are carried: their connections' limits and window, connections
    /// per instance, a stream deadline (see [`stream`](crate::stream)).
    pub streams: ClientStreams,
    /// Metrics and the access log. With metrics, the client counts its calls,
    /// retries, backup requests, bytes and service breaker state: the builder puts a
    /// [`MeteredClient`](metered::MeteredClient) in its default stack, right inside
    /// the call's [`Trace`](trace::Trace) span and around the timeout (see the
    /// [module docs](self)).
    pub observability: Observability,
}

/// How a client frames and encodes its requests. A server detects these per
/// connection and answers in kind, so only the client chooses them.
#[derive(Debug, Clone)]
pub struct WireFormat {
    /// The framing of requests. Default TTHeader.
    pub framing: Framing,
    /// With TTHeader: put a Framed length in front of the message inside the header
    /// too (Kitex's "TTHeaderFramed", what Volo's client sends by default). Default off.
    pub ttheader_framed: bool,
    /// With THeader: zlib, and an outer Framed length. Default neither.
    pub theader: crate::codec::theader::Options,
    /// The protocol of requests: Binary, Compact or JSON (Apache's `TJSONProtocol`,
    /// over Framed, Buffered or THeader; TTHeader has no protocol id for it, and a
    /// client configured with both fails when it is made). Default Binary.
    pub protocol: Protocol,
}

impl Default for WireFormat {
    fn default() -> Self {
        WireFormat {
            framing: Framing::TTHeader,
            ttheader_framed: false,
            theader: crate::codec::theader::Options::default(),
            protocol: Protocol::Binary,
        }
    }
}

/// How long a client's connects and calls may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    /// How long a connect may take (a TLS handshake included). Default 1 s.
    pub connect: Duration,
    /// How long a call may take, retries included (unless the call's context says
    /// otherwise); `None`: no limit. Default 10 s.
    pub rpc: Option<Duration>,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        ClientTimeouts {
            connect: Duration::from_secs(1),
            rpc: Some(Duration::from_secs(10)),
        }
    }
}

/// A client's connections to each instance: one call at a time on each (ping-pong),
/// or several calls on each (mux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionPool {
    /// Open connections per instance at most, one call at a time on each; a call
    /// that finds them all busy waits for one. Default 64.
    pub max_per_instance: usize,
    /// Mux calls over a few connections per instance instead of one call at a
    /// time per connection. Needs TTHeader framing: replies are matched to calls by
    /// the sequence id in their header. Default off.
    pub mux: bool,
    /// Connections per instance when `mux` is on; calls take them in turn. Default 2.
    pub mux_per_instance: usize,
}

impl Default for ConnectionPool {
    fn default() -> Self {
        ConnectionPool {
            max_per_instance: 64,
            mux: false,
            mux_per_instance: 2,
        }
    }
}

/// A call's context on the client: what the layers of the stack read and write as the
/// call goes down (the method, the callee, the deadline, metainfo...) and what comes
/// back up (backward metainfo, the instance that answered).
#[derive(Debug, Clone, Default)]
pub struct ClientContext {
    /// The call: caller and callee (the service from the IDL; the instance's address
    /// once the balancer picked one), the method, the deadline.
    pub rpc: crate::context::RpcInfo,
    /// Metainfo to send; after the call, backward values received.
    pub metainfo: MetaInfo,
    /// This call's timeout, instead of the client's.
    pub timeout: Option<Duration>,
    /// The connect timeout of this call's connects, instead of the client's: set by
    /// the timeout layer from a governance rule.
    pub(crate) connect_timeout: Option<Duration>,
    /// The key a consistent-hash balancer routes by (calls with the same key go to the
    /// same instance).
    pub hash_key: Option<u64>,
    /// Which attempt of the call this is: 0 for the first, 1 and on for retries and
    /// backup requests.
    pub attempt: u32,
    /// Instances this call tried already: the balancer picks another when it can.
    pub(crate) avoid: Vec<Address>,
    /// Where the balancer also reports its picks, when a layer above must know them
    /// while the attempt is still running (a backup request goes elsewhere).
    pub(crate) picks: Option<Arc<Mutex<Vec<Address>>>>,
    /// The call's span ids, when its `rpc.client` span is recorded: the parent of its
    /// attempts' spans.
    pub(crate) trace: Option<crate::trace::TraceParent>,
    /// Retries the retry layer made with this context (for the metrics layer).
    pub(crate) retries: u32,
    /// Backup requests the backup layer sent with this context (for the metrics
    /// layer).
    pub(crate) backups: u32,
    /// The frame sizes of the attempt that answered (for the access log).
    pub(crate) frame_sizes: FrameSizes,
    /// The method of the server's call this call is made for
    /// ([`forward_from`](Self::forward_from)), sent in TTHeader as the caller's method.
    pub(crate) caller_method: Option<Utf8Bytes>,
}

/// The retries and backup requests made with a context so far. A context may be
/// reused for call after call, so a layer takes them when a call starts, and the
/// difference at its end ([`since`](Self::since)) is that call's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExtraAttempts {
    pub(crate) retries: u32,
    pub(crate) backups: u32,
}

impl ExtraAttempts {
    /// Those made after `before` was taken.
    pub(crate) fn since(self, before: ExtraAttempts) -> ExtraAttempts {
        ExtraAttempts {
            retries: self.retries.wrapping_sub(before.retries),
            backups: self.backups.wrapping_sub(before.backups),
        }
    }
}

/// The bytes of one attempt's request and reply frames, framing included.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrameSizes {
    pub(crate) sent: usize,
    pub(crate) received: usize,
}

impl ClientContext {
    /// A context with no metainfo and the client's timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context for a call made while handling a server's call: its persistent
    /// metainfo goes on (and with it the mark of a retried request, which stops
    /// retries further down the chain), and so does its caller's deadline.
    pub fn forward_from(server: &crate::context::ServerContext) -> Self {
        let mut cx = ClientContext {
            metainfo: server.metainfo.forward(),
            ..ClientContext::default()
        };
        // The caller's deadline bounds the calls made for it too.
        cx.rpc.deadline = server.rpc.deadline;
        cx.caller_method = Some(server.rpc.method.clone());
        cx
    }

    /// The retries and backup requests made with this context so far.
    pub(crate) fn extra(&self) -> ExtraAttempts {
        ExtraAttempts {
            retries: self.retries,
            backups: self.backups,
        }
    }

    /// Instances this call tried already.
    pub fn tried(&self) -> &[Address] {
        &self.avoid
    }

    /// Records that `addr` was tried (the balancer avoids it for the next attempt).
    pub fn mark_tried(&mut self, addr: Address) {
        if !self.avoid.contains(&addr) {
            self.avoid.push(addr);
        }
    }
}

/// A client of one service over the stack `S`: it names the call (service, method)
/// in the context, sends the argument struct down the stack and decodes the result
/// struct of the reply. Generated `<Service>Client`s wrap one.
///
/// The stack is shared behind an `Arc`: a clone of the client (one per task, or one
/// per call as closures that move a client tend to make) is one atomic increment
/// whatever the stack holds, and needs no `Clone` of the stack's layers.
///
/// # Multiplexed servers
///
/// A server that serves several services under one address (Apache's
/// `TMultiplexedProcessor`, or [`Server::multiplexed`](crate::server::Server::multiplexed))
/// tells them apart by the method name: `Service:method`. A client bound to one of them
/// ([`with_multiplexed_service`](Client::with_multiplexed_service), or
/// [`ClientBuilder::multiplexed_service`]) sends every call so (Apache's
/// `TMultiplexedProtocol`) and takes a reply under the bare method name, as those
/// servers write it, or under the prefixed one. With TTHeader it also sends the callee's
/// service name (the IDL's, for a generated client) as the `isn` string key, by which
/// Kitex's and Volo's multi-service servers route. Layers see the bare method in
/// `cx.rpc.method` and in [`ClientRequest::method`] (retry and backup marks name bare
/// methods), and the prefixed name in [`ClientRequest::multiplexed_name`].
///
/// Each method's prefixed name is made once, on its first call, and shared by the
/// calls after it: no allocation per call.
#[derive(Debug)]
pub struct Client<S = DefaultStack> {
    /// Shared with every call's context: a clone per call costs no allocation.
    service: Utf8Bytes,
    inner: Arc<S>,
    /// Bound to a service of a multiplexed server: its method names.
    multiplexed: Option<Arc<multiplexed::MethodNames>>,
    /// The transport at the bottom of the stack, when the builder made it: what
    /// [`close_streams`](Self::close_streams) closes.
    transport: Option<Transport>,
}

impl<S> Clone for Client<S> {
    fn clone(&self) -> Self {
        Client {
            service: self.service.clone(),
            inner: Arc::clone(&self.inner),
            multiplexed: self.multiplexed.clone(),
            transport: self.transport.clone(),
        }
    }
}

impl Client {
    /// A builder of a client of `service` (the callee's name, sent in TTHeader) over
    /// the default stack.
    pub fn builder(service: impl Into<Cow<'static, str>>) -> ClientBuilder<Untyped> {
        ClientBuilder::new(service)
    }
}

impl<S> Client<S> {
    /// A client of `service` whose calls go down `stack`.
    pub fn new(service: impl Into<Cow<'static, str>>, stack: S) -> Self {
        let service = match service.into() {
            Cow::Borrowed(s) => Utf8Bytes::from_static(s),
            Cow::Owned(s) => Utf8Bytes::from(s),
        };
        Client {
            service,
            inner: Arc::new(stack),
            multiplexed: None,
            transport: None,
        }
    }

    /// The same client, closing `transport`'s streams on
    /// [`close_streams`](Self::close_streams).
    pub(crate) fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Closes the client's streaming connections and waits until they are closed:
    /// no new streams (an opening fails with [`StreamError::Open`]); once the
    /// streams open on a connection have ended, what was written on it (a dropped
    /// stream's rst, a deadline's) is sent and the connection closed. Calls go on as
    /// before. Clones share it; a later call returns at once. See
    /// [`Transport::close_streams`].
    ///
    /// Dropping the client closes its streaming connections the same way, but in the
    /// background: a program that exits right after would cut the rsts still on
    /// their way, and the server would see a closed connection instead of a cancel
    /// or a deadline. Await this before exiting. It waits for streams still open, so
    /// end or drop them first. A client built on a bottom of its own
    /// ([`ClientBuilder::build_on`]) has no streaming connections here: this returns
    /// at once.
    pub async fn close_streams(&self) {
        if let Some(transport) = &self.transport {
            transport.close_streams().await;
        }
    }

    /// The same client bound to the service registered as `name` on a multiplexed
    /// server: its calls go out as `name:method` (see [Multiplexed
    /// servers](Client#multiplexed-servers)). Clones share the binding; the client it was
    /// made from is not bound.
    pub fn with_multiplexed_service(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.multiplexed = Some(Arc::new(multiplexed::MethodNames::new(name.into())));
        self
    }

    /// The service of a multiplexed server this client is bound to, if it is.
    pub fn multiplexed_service(&self) -> Option<&str> {
        self.multiplexed
            .as_deref()
            .map(multiplexed::MethodNames::service)
    }

    /// The callee's service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The stack beneath.
    pub fn stack(&self) -> &S {
        &self.inner
    }

    /// Names the call in the context.
    fn begin(&self, cx: &mut ClientContext, method: &MethodName) {
        if cx.rpc.callee.service.is_empty() {
            cx.rpc.callee.service = self.service.clone();
        }
        cx.rpc.method = method.to_utf8();
    }

    /// `req` under its prefixed name when the client is bound to a multiplexed service.
    fn named(&self, req: ClientRequest) -> ClientRequest {
        match &self.multiplexed {
            None => req,
            Some(names) => {
                let name = names.get(req.method_name());
                req.multiplexed_shared(name)
            }
        }
    }
}

impl<S> Client<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>,
{
    /// Calls `method` with `args` (its argument struct) and decodes the reply's result
    /// struct `R`.
    pub async fn call<A, R>(
        &self,
        cx: &mut ClientContext,
        method: &'static str,
        args: A,
    ) -> Result<R, Error>
    where
        A: Message + Send + Sync + 'static,
        R: Message,
    {
        let reply = self.send(cx, ClientRequest::new(method, args)).await?;
        reply.decode()
    }

    /// Sends `req` down the stack and gives back its reply, checked (it answers the
    /// call, and is not an exception) but not decoded: the result struct's bytes in the
    /// client's protocol ([`ClientResponse::encoded`]). What calls without generated
    /// code build on: `req` may carry a method name known only at run time
    /// ([`MethodName::Shared`]) and arguments already encoded
    /// ([`Encoded`](crate::codec::Encoded)). A oneway request's response is empty.
    pub async fn send(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        self.begin(cx, req.method_name());
        let req = self.named(req);
        self.inner.call(cx, req).await
    }

    /// Sends a oneway call: no reply is read; done once the request is sent.
    pub async fn oneway<A>(
        &self,
        cx: &mut ClientContext,
        method: &'static str,
        args: A,
    ) -> Result<(), Error>
    where
        A: Message + Send + Sync + 'static,
    {
        self.send(cx, ClientRequest::oneway(method, args))
            .await
            .map(drop)
    }
}

impl<S> Client<S>
where
    S: Service<ClientContext, StreamRequest, Response = OpenedStream, Error = Error>,
{
    /// Opens a stream through the stack (see [`stream`]): the balancer
    /// picks its instance, the breakers, retry and timeout layers govern the opening,
    /// and the stream comes back with requests of type `Req` and responses of type
    /// `Resp`. A failed opening is [`StreamError::Open`] (the client's error, by
    /// kind) or [`StreamError::Refused`] (every connection at its stream limit).
    pub async fn open_stream<Req: Message, Resp: Message>(
        &self,
        cx: &mut ClientContext,
        req: StreamRequest,
    ) -> Result<ClientStream<Req, Resp>, StreamError> {
        self.begin(cx, req.method_name());
        match self.inner.call(cx, req).await {
            Ok(opened) => Ok(opened.typed()),
            Err(e) => Err(stream::open_error(e)),
        }
    }
}

#[cfg(test)]
mod tests;
