//! `gateway --idl FILE --upstream ADDR`: an HTTP/JSON to Thrift gateway. It answers
//! `POST /{service}/{method}` with a JSON body by calling `method` of `service` at
//! the upstream, both as the IDL names them, and answers with the return value as
//! JSON; the IDL is read at run time and read again when its files change, so a
//! method added to them is served without a restart. `gateway --help` lists the
//! flags.
//!
//! The mapping, the status codes (200; 422 for a declared exception, named in
//! `x-thrift-exception`; 400 for JSON that does not fit; 404; 502, 503, 504 for the
//! upstream's failures) and what a reload does are in `examples::gateway`'s docs.
//! A streaming method (`streaming.mode`) is streamed: a server stream answers
//! NDJSON (`application/x-ndjson`, one response a line, written as each arrives), a
//! client stream takes an NDJSON body and answers its one response, a bidirectional
//! stream does both; the same docs say how a stream's failures are answered.
//!
//! It prints `gateway listening on http://<addr>` once bound, logs each failed
//! request and each IDL reload (or failed one) on stderr, and stops on Ctrl-C or
//! SIGTERM, after the requests under way.
//!
//! ```text
//! cargo run -p examples --bin echo-server -- --addr 127.0.0.1:8888 &
//! cargo run -p examples --bin gateway -- --idl idl/echo.thrift --upstream 127.0.0.1:8888 &
//! curl -d '{"req":{"action":"hi","msg":"there"}}' http://127.0.0.1:8080/EchoService/echo
//!
//! cargo run -p examples --bin stream-server -- --addr 127.0.0.1:8889 &
//! cargo run -p examples --bin gateway -- --idl idl/stream.thrift --upstream 127.0.0.1:8889 \
//!     --listen 127.0.0.1:8081 &
//! curl -N -d '{"action":"hi","msg":"there","count":3}' \
//!     http://127.0.0.1:8081/StreamService/server_echo
//! printf '%s\n' '{"action":"a","msg":"1"}' '{"action":"b","msg":"2"}' |
//!     curl -N --data-binary @- http://127.0.0.1:8081/StreamService/bidi_echo
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use examples::cli::{Usage, fail, refuse};
use examples::gateway::Gateway;
use examples::options::{self, ClientFramingArg, ProtocolArg};
use thrift_dynamic::IdlProvider;
use tokio::signal::unix::{SignalKind, signal};
use volo_core::client::{ClientConfig, WireFormat};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;

/// Answers `POST /{service}/{method}` with a JSON body by calling the upstream Thrift
/// service, as IDL read at run time (and re-read when it changes) describes it.
#[derive(Debug, Parser)]
#[command(name = "gateway", version, args_override_self = true)]
struct Cli {
    /// The IDL files whose services are served (repeat for several).
    #[arg(long, required = true, value_name = "FILE")]
    idl: Vec<PathBuf>,

    /// Where included files are looked for, after the including file's directory
    /// (repeat for several).
    #[arg(long, value_name = "DIR")]
    include: Vec<PathBuf>,

    /// The Thrift server called: host:port, unix:PATH or shm:PATH.
    #[arg(long, value_name = "ADDR", value_parser = options::address)]
    upstream: Address,

    /// Where the HTTP server listens.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

    /// The framing of the calls to the upstream.
    #[arg(long, value_enum, value_name = "FRAMING", default_value = "ttheader")]
    transport: ClientFramingArg,

    /// The protocol of the calls to the upstream.
    #[arg(long, value_enum, default_value = "binary")]
    protocol: ProtocolArg,

    /// Each call's deadline, in seconds (fractions allowed), retries included; past
    /// it the request answers 504.
    #[arg(long, value_name = "SECS", default_value = "10",
          value_parser = options::positive_seconds)]
    timeout: Duration,

    /// How often the IDL files are looked at for a change, in seconds.
    #[arg(long, value_name = "SECS", default_value = "1",
          value_parser = options::positive_seconds)]
    reload_every: Duration,
}

fn main() {
    let cli = Cli::parse();
    if cli.protocol.0 == Protocol::Json && cli.transport.0.0 == Framing::TTHeader {
        refuse::<Cli>(
            "--protocol json needs another --transport than ttheader, which has no \
             protocol id for it",
        );
    }
    if let Err(e) = run(cli) {
        fail("gateway", e);
    }
}

fn run(cli: Cli) -> Result<(), Usage> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();
    let idl = IdlProvider::new(&cli.idl, &cli.include).map_err(|e| Usage(format!("--idl: {e}")))?;
    let mut config = ClientConfig {
        format: WireFormat {
            framing: cli.transport.0.0,
            ttheader_framed: cli.transport.0.1,
            protocol: cli.protocol.0,
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    config.timeouts.rpc = Some(cli.timeout);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .map_err(|e| Usage(format!("--listen {}: {e}", cli.listen)))?;
        let local = listener
            .local_addr()
            .map_err(|e| Usage(format!("--listen {}: {e}", cli.listen)))?;
        println!("gateway listening on http://{local}");
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| Usage(format!("SIGTERM: {e}")))?;
        let shutdown = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        Gateway::new(Arc::new(idl), cli.upstream)
            .client_config(config)
            .reload_every(cli.reload_every)
            .serve(listener, shutdown)
            .await
            .map_err(|e| Usage(format!("serving: {e}")))
    })
}
