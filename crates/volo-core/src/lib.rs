//! The RPC core: `Service` and `Layer`, framing, contexts, the server and the client.
//!
//! - [`service`]: `Service<Cx, Req>` with an `async fn call(&self, cx, req)`, `Layer`,
//!   `ServiceBuilder`, `service_fn` and `layer_fn`, in the shape Volo (motore) users know.
//! - [`tower_compat`]: adapters to and from `tower::Service`, so tower's middleware can wrap
//!   these services.
//! - [`codec`]: TTHeader (Kitex), THeader (Apache, with zlib), Framed and Buffered
//!   framing over the Binary, Compact and JSON protocols (JSON not in TTHeader), with
//!   detection from a connection's first bytes and size limits.
//! - [`context`]: addresses (`ip:port`, `name:port`, `unix:/path`, `shm:/path`), the call's
//!   description and metainfo (persistent, transient, backward) as Kitex and Volo
//!   carry it in TTHeader.
//! - [`server`]: `Server::new(<Service>Server::new(handler)).bind(addr)`: framing and
//!   protocol detected per connection and answered in kind (the calls of a TTHeader
//!   connection concurrently, those of THeader, Framed and Buffered ones in order), IDL
//!   exceptions in the result struct, `TApplicationException` for unknown methods, bad
//!   arguments and handler panics, connection / in-flight / size limits, read and idle
//!   timeouts, graceful shutdown. Each call, once the server has read its message
//!   header, let it past the limiter ([`server::Server::limit`]) and opened its
//!   `rpc.server` span, goes through a stack of [`service::Service`]s:
//!   [`server::metered`] (which counts it), the user's layers, then
//!   [`server::deadline`] (which drops a call once its TTHeader caller's timeout has
//!   passed, and answers it), then the generated dispatcher, a
//!   `Service<ServerContext, ServerRequest>` that decodes the arguments zero-copy and
//!   runs the handler; tower middleware fits in through [`tower_compat`]. Oneway methods are
//!   known from the IDL ([`server::ServiceInfo`]) and never answered, whatever message
//!   type they come in. On netpoll-rs each call starts on the poller that read its
//!   frame, and only a call that waits moves to a task
//!   ([`server::ServerConfig::inline_dispatch`]). One server may serve several
//!   services ([`server::Multiplex`]), routed by Apache's `Service:method` names or
//!   TTHeader's `isn`. A server that serves streams too ([`server::Server::streams`])
//!   takes each stream's opening down the same stack, the stream handler at its
//!   bottom, so one layer written over [`server::ServerCall`] wraps calls and streams
//!   alike ([one stack for calls and streams](server#one-stack-for-calls-and-streams)).
//! - [`client`]: every call goes down a stack of services: your layers, the call's
//!   span, its metrics, the call timeout, the service breaker, failure retry (budget,
//!   idempotency marks, chain stop), backup requests, the balancer (weighted random,
//!   round robin, smooth weighted round robin, power of two choices, consistent hash;
//!   instance breakers), each attempt's span, your inner layers and the transport
//!   (pooled ping-pong or multiplexed connections). Generated
//!   `<Service>Client<T>`s are generic over the stack and built by
//!   `<Service>Client::builder()`; failures are one typed [`client::Error`].
//! - [`config`]: the groups of settings both sides' configurations hold (see
//!   [Configuration](#configuration)).
//! - [`clock`]: time as an input, so every time-dependent layer is tested with a
//!   [`clock::ManualClock`].
//! - [`transport`]: netpoll-rs (the default) or plain tokio sockets, per server and per
//!   client; `shm:/path` addresses go over shared memory (shm-ipc sessions) on both;
//!   TLS (rustls) over TCP on both, server and client ([`transport::tls`]).
//! - [`metrics`]: Prometheus metrics of servers and clients (calls by service, method
//!   and outcome, latencies, connections, bytes, retries, breakers, limiter refusals),
//!   counted by layers of the stacks and served at `/metrics`.
//! - [`registry`]: what a server registers with a service registry, the host identity
//!   and the routing of a client to the nearest address of an instance (local first,
//!   over shared memory or a Unix socket); discovery ([`registry::Instance`],
//!   [`registry::Discover`]) that follows a registry feeds a [`registry::DiscoverList`]
//!   and yields its changes as a stream. The etcd registry is the `etcd-registry` crate.
//! - [`refusal`]: the answers of a server that did not run a call to the end
//!   (overloaded, closing, past the caller's deadline), and how a client tells them
//!   apart.
//!
//! # How the modules stand on each other
//!
//! The client and the server never use each other: what both need lies below them
//! (`codec`, `config`, `envelope` (every frame opened and its header read and written, in all
//! four framings, and replies matched to calls, for both sides), `refusal`, `registry`, `metrics`, `trace`, `transport`, `context`, `clock`,
//! `service`), and each side keeps its own layers over those (the metered
//! ones in [`client::metered`] and [`server::metered`]). [`tower_compat`] adapts both and
//! sits on top, as does [`codegen`], the one module generated code names. The test `tests/module_graph.rs` fails on a cycle between modules or
//! on a shared module that uses a side.
//!
//! # Configuration
//!
//! A side's settings are one value ([`client::ClientConfig`], [`server::ServerConfig`]),
//! given to its builder by one method of one name on both:
//! [`client::ClientBuilder::config`], [`server::Server::config`]. Its fields are groups
//! by concern, each a type with its docs and a `Default`, so that a change to one
//! concern names that group (`..Default::default()` fills the rest of it):
//!
//! | field | type | holds | on |
//! |---|---|---|---|
//! | `wire` | [`config::WireLimits`] | the frame and TTHeader/THeader header size limits on what is read | both: a server checks requests, a client replies |
//! | `transport` | [`config::TransportConfig`] | the sockets (netpoll-rs or tokio) and the reactor's settings | both |
//! | `tls` | [`transport::tls::ServerTls`], [`transport::tls::ClientTls`] | TLS over TCP | both, a type per side (a certificate to show, or servers to trust) |
//! | `observability` | [`config::Observability`] | metrics and the access log | both |
//! | `timeouts` | [`client::ClientTimeouts`], [`server::ServerTimeouts`] | connect and call; read, idle, drain and exit wait | both, a type per side: no timeout is the same on both |
//! | `format` | [`client::WireFormat`] | framing, protocol, TTHeader's inner framing, THeader's options | client: a server detects them per connection and answers in kind |
//! | `pool` | [`client::ConnectionPool`] | connections per instance, ping-pong or mux | client |
//! | `caller` | `String` | the service name sent as the caller | client |
//! | `capacity` | [`server::ServerCapacity`] | connections, calls in progress (all, per connection), buffered bytes | server |
//! | `inline_dispatch` | `bool` | calls started on the reactor's poller | server |
//!
//! What both sides read the same way has one type under one name on both; what only
//! looks alike does not: a client's `pool.max_per_instance` caps its connections to
//! each instance, a server's `capacity.max_connections` all the connections it
//! accepts. Policies, which decide what to do with a call rather than describe the
//! machinery, are builder methods, not settings: retry, backup requests, breakers and
//! balancing on the [`client::ClientBuilder`], the limiter on the server
//! ([`server::Server::limit`]).
//!
//! # Names
//!
//! Two words that sound alike mean one thing each:
//! - **multiplexed**: several services under one address, told apart by a service
//!   name: Apache's `TMultiplexedProtocol` (`Service:method`) or TTHeader's `isn`
//!   ([`client::Client::with_multiplexed_service`], [`server::Multiplex`]);
//! - **mux**: many calls in flight on one connection, replies matched by sequence id
//!   ([`client::ConnectionPool::mux`], `mux_per_instance`; `echo-client --mux`).
//!
//! Names changed while the crate took its present shape (it has not been published,
//! so the old names are gone, not deprecated):
//!
//! | old name | new name | why |
//! |---|---|---|
//! | `server::core` (module) | `server::conn_core` | shadowed the `core` crate; it is one connection's core |
//! | `tower` (module) | [`tower_compat`] | shadowed the `tower` crate |
//! | `ClientConfig::multiplex`, `--multiplex` | [`client::ConnectionPool::mux`], `--mux` | "multiplexed" is Apache's service names |
//! | `server::multiplex::SEPARATOR` | [`codec::SERVICE_SEPARATOR`] | both sides use it |
//! | `server::multiplex::Route`, `RouteReply` | [`server::multiplex::NamedService`], [`server::multiplex::EitherReply`] | "route" is the registry's (which address of an instance) |
//! | `metrics::client::MeteredClient`, `metrics::server::MeteredServer` | [`client::metered::MeteredClient`], [`server::metered::MeteredServer`] | each lives beside the side it wraps |
//! | `client::balance::{Instance, Tags, Discover, StaticDiscover, DiscoverList}` | [`registry::Instance`] and the rest (still re-exported by `client`) | discovery is shared by both sides |
//! | `server::{OVERLOAD_PREFIX, CLOSING_PREFIX, is_overload, is_closing}`, `server::deadline::{PREFIX, is_deadline_passed}` | [`refusal`] (still re-exported by `server`) | both sides use them |
//! | `Extra` (client context) | `ExtraAttempts` | the retries and backup requests made |
//! | `Wire` (client context) | `FrameSizes` | the byte sizes of an attempt's frames |
//! | `Described` (server) | `ServiceFacts` | what the server knows of a service from its IDL |
//! | `Shared` (server) | `ServerState` | what every connection of a server shares |
//! | `Shared` (instance breakers) | `BreakerTable` | the breakers by instance, and their counts |
//! | `PerList` (balancers) | `ListCache` | a value derived from each of the last instance lists |
//! | generated code's paths into `client`, `server`, `context`, `service` | [`codegen`] | one module for generated code |
//! | `server::EncodeReply`, `client::EncodeArgs` | [`codec::Body`], [`codec::ErasedBody`] | one body trait for arguments and replies; the erased form is what a client's call carries |
//! | `ClientConfig::{framing, protocol, ttheader_framed, theader}` | [`client::ClientConfig::format`]: [`client::WireFormat`] | how requests are encoded, the client's choice alone |
//! | `ClientConfig::limits` (frame) | `ClientConfig::wire.frame` ([`config::WireLimits`]) | one type of limits on both sides, with the header's |
//! | (none: default header limits) | `ClientConfig::wire.header` | a client can limit reply headers as a server limits request headers |
//! | `ServerConfig::limits`, `ServerConfig::header_limits` | `ServerConfig::wire.frame`, `ServerConfig::wire.header` ([`config::WireLimits`]) | one type on both sides; `limits` stood beside `limit` |
//! | `ClientConfig::{connect_timeout, rpc_timeout}` | `ClientConfig::timeouts.{connect, rpc}` ([`client::ClientTimeouts`]) | timeouts grouped |
//! | `ServerConfig::{read_timeout, idle_timeout, drain_timeout, exit_wait}` | `ServerConfig::timeouts.{read, idle, drain, exit_wait}` ([`server::ServerTimeouts`]) | timeouts grouped |
//! | `ClientConfig::max_connections` | `ClientConfig::pool.max_per_instance` ([`client::ConnectionPool`]) | per instance; the server's `max_connections` is all connections |
//! | `ClientConfig::{mux, mux_connections}` | `ClientConfig::pool.{mux, mux_per_instance}` | connections grouped; per instance, as `max_per_instance` |
//! | `ServerConfig::{max_connections, max_inflight, max_inflight_per_connection, max_buffered_input}` | `ServerConfig::capacity.*` ([`server::ServerCapacity`]) | what the server holds at once, grouped |
//! | `ClientConfig::{transport, reactor}`, `ServerConfig::{transport, reactor}` | `transport.kind`, `transport.reactor` ([`config::TransportConfig`]) | one type on both sides |
//! | `ClientConfig::{metrics, access_log}`, `ServerConfig::{metrics, access_log}` | `observability.{metrics, access_log}` ([`config::Observability`]) | one type on both sides |
//! | `ServerConfig::limit` | [`server::Server::limit`] | a policy, set on the builder as the client's are |
//! | `Server::with_config` | [`server::Server::config`] | the client builder's name |
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod client;
pub mod clock;
pub mod codec;
pub mod codegen;
pub mod config;
pub mod context;
mod envelope;
mod error_kind;
pub mod metrics;
mod random;
pub mod refusal;
pub mod registry;
pub mod server;
pub mod service;
pub mod stream;
mod sys;
#[cfg(test)]
mod test_support;
pub mod tower_compat;
pub mod trace;
pub mod transport;
