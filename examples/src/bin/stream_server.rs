//! `stream-server --addr ADDR`: serves idl/stream.thrift's StreamService (its
//! ping-pong `echo` and its server, client and bidirectional streams over TTHeader,
//! as Kitex's StreamX speaks them) until Ctrl-C or SIGTERM, then drains. It prints
//! `stream-server listening on <addr>` once bound. `--help` lists the flags.

use clap::Parser;
use examples::options::{self, IoArg};
use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
use examples::stream_service::Streams;
use tokio::signal::unix::{SignalKind, signal};
use volo_core::context::Address;
use volo_core::server::{Server, ServerConfig};

/// Serves StreamService (idl/stream.thrift): ping-pong calls and streams on one
/// address.
#[derive(Debug, Parser)]
#[command(name = "stream-server", version, args_override_self = true)]
struct Cli {
    /// Where to listen: host:port, unix:PATH or shm:PATH.
    #[arg(long, value_name = "ADDR", value_parser = options::address)]
    addr: Address,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| {
        eprintln!("stream-server: no runtime: {e}");
        std::process::exit(1)
    });
    let served = rt.block_on(async {
        let mut config = ServerConfig::default();
        cli.io.apply(&mut config.transport);
        let bound = Server::new(StreamServiceServer::new(Streams))
            .streams(StreamServiceStreamServer::new(Streams))
            .config(config)
            .bind(&cli.addr)
            .await?;
        println!("stream-server listening on {}", bound.local_addr());
        let mut term = signal(SignalKind::terminate())?;
        bound
            .serve_with_shutdown(async move {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await
    });
    if let Err(e) = served {
        eprintln!("stream-server: {e}");
        std::process::exit(1);
    }
}
