//! The RPC core: `Service` and `Layer`, framing, contexts, the server and the client.
//!
//! Both sides are stacks of [`Service`](service::Service)s: a call goes down the
//! client's layers to the wire, and up from the wire through the server's layers to
//! the generated dispatcher. A service and a layer of your own, on a context of your
//! own, show the shape:
//!
//! ```
//! use std::convert::Infallible;
//! use volo_core::service::{Service, ServiceBuilder, layer_fn, service_fn};
//!
//! // The innermost service: a request in, a response out.
//! let echo = service_fn(|_cx: &mut Vec<String>, req: String| async move {
//!     Ok::<_, Infallible>(req)
//! });
//!
//! // A layer wraps a service in another: this one records each request in the
//! // call's context and shouts the reply.
//! struct Shout<S>(S);
//!
//! impl<S> Service<Vec<String>, String> for Shout<S>
//! where
//!     S: Service<Vec<String>, String, Response = String> + Sync,
//! {
//!     type Response = String;
//!     type Error = S::Error;
//!
//!     async fn call(&self, cx: &mut Vec<String>, req: String) -> Result<String, S::Error> {
//!         cx.push(req.clone());
//!         Ok(self.0.call(cx, req).await?.to_uppercase())
//!     }
//! }
//!
//! let stack = ServiceBuilder::new().layer(layer_fn(Shout)).service(echo);
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut seen = Vec::new();
//! let reply = stack.call(&mut seen, "hello".to_string()).await;
//! assert_eq!(reply, Ok("HELLO".to_string()));
//! assert_eq!(seen, ["hello"]);
//! # });
//! ```
//!
//! Generated services and clients are stacks of this kind; the
//! `codegen-check` crate's docs serve and call one over loopback, and the workspace
//! guide (`docs/`) walks through the rest.
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
//!   (pooled ping-pong or mux connections). Generated
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
//! Names that changed while the crate took its present shape are listed in the
//! workspace's `CHANGELOG.md`.
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
pub mod governance;
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
