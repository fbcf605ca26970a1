//! What the example programs share: the code generated from idl/echo.thrift, the
//! service implementation, a closed-loop load generator and a command-line reader.
//!
//! Programs (`cargo run --release -p examples --bin NAME -- ...`):
//! - `echo-server --addr <host:port|unix:PATH|shm:PATH>[,<addr>...] [--registry
//!   etcd://HOST:PORT]`: serves `EchoService` on every address given, registered in
//!   etcd with `--registry`.
//! - `echo-client (--addr <addr>[,<addr>...] | --discover etcd://HOST:PORT)
//!   [--local-share F] [--transport ttheader|theader|framed|buffered]
//!   [--protocol binary|compact|json] [--concurrency N] [--size BYTES] [--duration SECS]
//!   [--balance random|rr|wrr|p2c|hash] [--backup-ms N] [--timeline] ...`: closed-loop
//!   load over one instance or several; its last line is `qps=<n> p50_us=<n> p99_us=<n>
//!   p999_us=<n> errors=<n>`.
//! - `rpc-bench`: server and client in one process, one run per transport; with
//!   `--server-only`, each server (ours, Volo's) in a pinned process of its own, driven
//!   by one load generator, its CPU time per call measured ([`server_only`]).
//! - `local-first`: two instances in etcd, one on this host and one registered as
//!   another's; QPS and p99 with local-first routing (over shared memory) and without.
//! - `layered`: EchoService behind a custom server-side layer.
//! - `two-hops`: metainfo through a chain of two services.
//! - `wire-dump`: the bytes of the benchmark types on the wire.
#![allow(unreachable_pub)]

pub mod attempts;
pub mod cli;
pub mod echo_service;
pub mod load;
pub mod options;
pub mod server_only;

#[allow(missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
}

pub use generated::echo;
