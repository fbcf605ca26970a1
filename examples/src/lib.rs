//! What the example programs share: the code generated from idl/echo.thrift, the
//! service implementation, a closed-loop load generator, and the values their command
//! lines read ([`options`], [`cli`]).
//!
//! Programs (`cargo run --release -p examples --bin NAME -- ...`; each takes `--help`
//! and `--version`):
//! - `echo-server --addr ADDR[,ADDR...]` (`host:port`, `unix:PATH`, `shm:PATH`): serves
//!   `EchoService` on every address given; registered in etcd with `--registry
//!   etcd://HOST:PORT`; `--show-metainfo` prints each call's metainfo.
//! - `echo-client (--addr ADDR[,ADDR...] | --discover etcd://HOST:PORT)`: closed-loop
//!   load over one instance or several, `--transport`, `--protocol`, `--balance`,
//!   `--meta`/`--persistent` metainfo...; its last line is `qps=<n> p50_us=<n>
//!   p99_us=<n> p999_us=<n> errors=<n>`.
//! - `rpc-bench`: server and client in one process, one run per transport; with
//!   `--server-only`, each server (ours, Volo's) in a pinned process of its own, driven
//!   by one load generator, its CPU time per call measured ([`server_only`]).
//! - `local-first`: two instances in etcd, one on this host and one registered as
//!   another's; QPS and p99 with local-first routing (over shared memory) and without.
//! - `layered`: EchoService behind a custom server-side layer.
//! - `one-layer`: one server-side layer that wraps calls and streams alike.
//! - `middleware`: two custom client layers on a generated client.
//! - `two-hops`: metainfo through a chain of two services.
//! - `gateway --idl FILE --upstream ADDR`: HTTP/JSON in (`POST /{service}/{method}`),
//!   Thrift calls out, driven by IDL read (and re-read when it changes) at run time;
//!   streaming methods as NDJSON streams ([`gateway`]).
//! - `stream-server --addr ADDR`: serves idl/stream.thrift's StreamService, ping-pong
//!   and streams (Kitex's StreamX over TTHeader) on one address ([`stream_service`]);
//!   registered in etcd with `--registry etcd://HOST:PORT` ([`registry`]).
//! - `stream-check --addr ADDR`: the interop checks of a StreamService server (ours or
//!   Kitex's), a `PASS`/`FAIL` line each; with `--load N (--addr ADDR[,ADDR...] |
//!   --discover etcd://HOST:PORT)`, N bidirectional streams kept going through the
//!   generated client, and a last line `streams opened=<n> open_failures=<n>
//!   broken=<n> msgs=<n> errors=<n>` ([`stream_load`]).
//! - `wire-dump`: the bytes of the benchmark types on the wire.
//!
//! # The `etcd` feature
//!
//! The etcd pieces (`echo-server` and `stream-server --registry`, `echo-client` and
//! `stream-check --discover`, `local-first`, the churn and stream_fleet tests) need
//! the `etcd` feature, off by default:
//! `cargo run -p examples --features etcd --bin ...`, and `--features examples/etcd`
//! (or `--all-features`) from the workspace. The etcd client's build compiles etcd's
//! protobuf API with protoc, and the main job (`rpc-bench`) should build on a machine
//! with rustup alone. Running them needs an etcd (3.4 or later; `local-first` and the
//! churn and stream_fleet tests start their own, which needs the `etcd` binary).
//!
//! Without the feature, `--registry` and `--discover` still exist, are listed by
//! `--help`, and are refused with a message naming the feature (status 2): a flag
//! that vanished would read as a typo, where this says what to rebuild with.
//! `local-first` is a measurement of etcd-driven routing and nothing else, so it is
//! not built at all (`required-features`); `cargo run --bin local-first` says which
//! feature it needs.
#![allow(unreachable_pub)]

pub mod attempts;
pub mod cli;
pub mod echo_service;
pub mod gateway;
pub mod load;
pub mod open_loop;
pub mod options;
pub mod registry;
pub mod server_only;
pub mod stream_bench;
pub mod stream_load;
pub mod stream_service;

#[allow(missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
}

pub use generated::echo;

#[allow(missing_docs)]
mod stream_generated {
    include!(concat!(env!("OUT_DIR"), "/stream_gen.rs"));
}

pub use stream_generated::stream;
