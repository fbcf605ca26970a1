//! The benchmark IDL (`idl/echo.thrift`) on CloudWeGo Volo, the framework we measure against.
//!
//! Volo's server and client for that IDL, a reply and a declared exception:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = volo_peer::serve("127.0.0.1:0".parse()?).await?;
//! let client = volo_peer::VoloClient::new(server.local_addr());
//!
//! let resp = client.echo("echo", "hello").await?;
//! assert_eq!((&*resp.action, &*resp.msg), ("echo", "hello"));
//!
//! let err = client.echo_or_fail("fail", "boom").await.unwrap_err();
//! let echo_error = err.echo_error().expect("the server's EchoError");
//! assert_eq!(echo_error.code, Some(volo_peer::ECHO_ERROR_CODE));
//! assert_eq!(echo_error.message.as_deref(), Some("boom"));
//!
//! drop(client);
//! server.stop().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Comparisons are only fair when both sides run the same IDL, the same payload and the same
//! machine. This crate builds Volo's own generated code for `idl/echo.thrift` (with
//! `volo-build` from `build.rs`, as Volo's docs describe) and wraps it in the few calls a
//! benchmark or an interop test needs:
//!
//! - [`serve`] starts a volo-thrift `EchoService` server with the IDL's semantics and returns a
//!   [`ServerHandle`] that knows the bound address and stops the server.
//! - [`VoloClient`] is a volo-thrift client for one address, with one method per IDL call, for
//!   closed-loop load generators.
//! - [`echo`] re-exports Volo's generated types (`Request`, `Response`, `MyTest`, `Ids`, ...).
//!
//! Both sides keep Volo's defaults unless told otherwise ([`Framing`] picks the client's
//! framing), so that what we measure is Volo as its users run it.
//!
//! # What Volo does by default, and what that means for our side
//!
//! Read from the sources of the versions this crate locks (volo-thrift 0.12.7, volo 0.12.4);
//! the links point at those files on docs.rs.
//!
//! **Framing.** Volo's client writes `TTHeader<Framed<Binary>>`: the generated
//! `EchoServiceClientBuilder::new` and `EchoServiceServer::new` both name
//! `DefaultMakeCodec<MakeTTHeaderCodec<MakeFramedCodec<MakeThriftCodec>>>`, which is
//! `DefaultMakeCodec::default()`, and `MakeThriftCodec` defaults to `Protocol::Binary`
//! ([codec/default/mod.rs], [codec/default/thrift.rs]). Volo's server *detects* the framing from
//! each connection's first bytes: TTHeader when bytes 4..6 are `10 00`, Framed when they are a
//! Binary (`80 01`) or Compact (`82`) message header, else unframed ("buffered"), and Binary or
//! Compact likewise; it answers in the framing it detected (the TTHeader and Framed encoders
//! only write their header "if role is client or server has detected" it, [ttheader.rs],
//! [framed.rs]). So a default Volo server serves TTHeader, Framed and Buffered clients alike,
//! and a like-for-like comparison against Volo's default client means our client speaking
//! TTHeader+Framed+Binary; [`Framing::Framed`] makes Volo's client speak plain Framed instead
//! (`DefaultMakeCodec::framed()`; `buffered()` and `ttheader_framed()` also exist, and
//! `Server::make_codec` swaps the server's codec the same way).
//!
//! **Connections.** Without volo-thrift's `multiplex` cargo feature (off by default; on here,
//! for [`serve_mux`], and unused otherwise) the client is ping-pong: one request in
//! flight per connection. A pool keyed by address hands out an idle connection or dials a
//! new one, so N concurrent callers end up with N connections; idle connections are kept up
//! to `max_idle_per_key = 10240` for `timeout = 15 s` ([transport/pool/mod.rs],
//! `pool::Config::default`). The server is ping-pong as well: one tokio task per connection
//! that reads a request, awaits the handler, writes the response, and only then reads the
//! next ([transport/pingpong/server.rs]); no pipelining.
//! Mux connections need the `multiplex` feature plus `ClientBuilder::multiplex(true)` and
//! `Server::multiplex(true)` ([client/mod.rs], [server/mod.rs]).
//!
//! **Sockets and timeouts.** Both sides set `TCP_NODELAY` ([net/conn.rs], [net/dial.rs]); the
//! listener sets `SO_REUSEADDR` and `SO_REUSEPORT` and listens with the kernel's
//! `somaxconn` backlog ([net/incoming.rs]). No timeout applies by default: the builder's doc says
//! the RPC timeout defaults to 1 s, but `Config::default()` leaves it `None` and the timeout
//! layer then applies none; connect, read and write timeouts are `None` too
//! ([context.rs], [net/dial.rs]). Retries: 0; load balancing: weighted random over the one
//! address.
//!
//! **Signals.** `Server::run` registers SIGINT, SIGHUP and SIGTERM handlers and shuts down
//! gracefully on any of them ([server/mod.rs]); tokio never unregisters a signal handler, so once
//! [`serve`] has run, Ctrl-C no longer kills the process by default. On shutdown Volo waits 2 s
//! if connections are still open, then closes them and waits up to 28 s more for them to finish;
//! see [`ServerHandle::stop`].
//!
//! [codec/default/mod.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/codec/default/mod.rs
//! [codec/default/thrift.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/codec/default/thrift.rs
//! [ttheader.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/codec/default/ttheader.rs
//! [framed.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/codec/default/framed.rs
//! [transport/pool/mod.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/transport/pool/mod.rs
//! [transport/pingpong/server.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/transport/pingpong/server.rs
//! [client/mod.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/client/mod.rs
//! [server/mod.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/server/mod.rs
//! [context.rs]: https://docs.rs/crate/volo-thrift/0.12.7/source/src/context.rs
//! [net/conn.rs]: https://docs.rs/crate/volo/0.12.4/source/src/net/conn.rs
//! [net/dial.rs]: https://docs.rs/crate/volo/0.12.4/source/src/net/dial.rs
//! [net/incoming.rs]: https://docs.rs/crate/volo/0.12.4/source/src/net/incoming.rs
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
// Our own code needs no unsafe; Volo's generated code has some, allowed in its module only.
#![deny(unsafe_code)]

mod client;
mod error;
mod server;

/// Volo's generated code for `idl/echo.thrift`, written by `build.rs` into `OUT_DIR`.
///
/// The file already carries `#![allow(warnings, clippy::all)]` on its outer module, which covers
/// the workspace's lints; the allow here covers what that does not, this crate's
/// `deny(unsafe_code)`: the generated code decodes with pilota's unchecked Binary protocol.
#[allow(unsafe_code)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/volo_gen.rs"));
}

/// Volo's generated types for the IDL's `echo` namespace: `Request`, `Response`, `MyTest`,
/// `Ids`, `EchoError`, the `EchoService` trait, `EchoServiceServer` and `EchoServiceClient`.
pub use generated::volo_gen::echo;

pub use client::{Framing, VoloClient};
pub use error::CallError;
pub use server::{ECHO_ERROR_CODE, EchoHandler, ServerHandle, serve, serve_mux};
