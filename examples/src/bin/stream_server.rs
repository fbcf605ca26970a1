//! `stream-server --addr ADDR`: serves idl/stream.thrift's StreamService (its
//! ping-pong `echo` and its server, client and bidirectional streams over TTHeader,
//! as Kitex's StreamX speaks them) until Ctrl-C or SIGTERM. It prints
//! `stream-server listening on <addr>` once bound. `--help` lists the flags.
//!
//! With `--registry etcd://HOST:PORT[,HOST:PORT...]` it registers in etcd, under
//! `StreamService`, the address it listens on, its `--weight` (default 100) and its
//! host identity (`/etc/machine-id`, or `--host-id`), with a lease of `--lease-ttl`
//! seconds (default 10) kept alive while it runs, as `echo-server --registry` does;
//! clients that follow the registry (`stream-check --load N --discover`) open streams
//! on it. The flag needs the `etcd` feature (see the crate docs); without it, it is
//! refused.
//!
//! Ctrl-C or SIGTERM stops it gracefully (see `volo_core::server`'s "A graceful
//! stop"): registered, it deregisters and serves on for the exit wait (1 s), so that
//! its clients learn it left; then it accepts no more connections and refuses new
//! streams, lets the streams and calls in progress run to their end (within the
//! drain timeout, 10 s), and exits with status 0.

use clap::Parser;
use examples::cli::{Usage, fail};
use examples::options::{self, IoArg};
use examples::registry::Registration;
use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
use examples::stream_service::Streams;
use tokio::signal::unix::{SignalKind, signal};
use volo_core::context::Address;
use volo_core::server::{Server, ServerConfig};

/// Serves StreamService (idl/stream.thrift): ping-pong calls and streams on one
/// address, until Ctrl-C or SIGTERM (then it drains).
#[derive(Debug, Parser)]
#[command(name = "stream-server", version, args_override_self = true)]
struct Cli {
    /// Where to listen: host:port, unix:PATH or shm:PATH.
    #[arg(long, value_name = "ADDR", value_parser = options::address)]
    addr: Address,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,

    // --registry, --weight, --host-id, --lease-ttl.
    #[command(flatten)]
    registration: Registration,
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        fail("stream-server", e);
    }
}

fn run(cli: Cli) -> Result<(), Usage> {
    let rt = tokio::runtime::Runtime::new().map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let mut config = ServerConfig::default();
        cli.io.apply(&mut config.transport);
        let server = Server::new(StreamServiceServer::new(Streams))
            .streams(StreamServiceStreamServer::new(Streams))
            .config(config);
        let bound = cli
            .registration
            .apply(server)
            .await?
            .bind(&cli.addr)
            .await
            .map_err(|e| Usage(format!("binding {}: {e}", cli.addr)))?;
        // Caught from here on: a SIGTERM after the line below stops it gracefully.
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| Usage(format!("SIGTERM: {e}")))?;
        println!("stream-server listening on {}", bound.local_addr());
        bound
            .serve_with_shutdown(async move {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await
            .map_err(|e| Usage(format!("serving: {e}")))
    })
}
