//! `echo-server --addr ADDR[,ADDR...]`: serves idl/echo.thrift's EchoService until
//! killed (Ctrl-C or SIGTERM shuts it down gracefully). It accepts every framing
//! (TTHeader, THeader, Framed, Buffered) and protocol (Binary, Compact, JSON) and
//! answers each connection in kind, so Apache Thrift, Kitex and Volo clients all work.
//! `echo-server --help` lists the flags.
//!
//! With several addresses (`host:port`, `unix:PATH`, `shm:PATH`) it listens on all of
//! them, one server. It prints `echo-server listening on <addr>` for each, in order,
//! once all are bound.
//!
//! With `--registry etcd://HOST:PORT[,HOST:PORT...]` it registers in etcd, under
//! `EchoService`, every address it listens on, its `--weight` (default 100) and its
//! host identity (`/etc/machine-id`, or `--host-id`, which makes it look like an
//! instance of another machine) and its `--tag KEY=VALUE`s (`rack` and `zone` give
//! its locality: `echo-client --rack --zone`), with a lease of `--lease-ttl` seconds
//! (default 10) kept alive while it runs; on a graceful shutdown it deregisters before it drains.
//! Clients that follow the registry (`echo-client --discover`) call it over shared
//! memory or its Unix socket when they run on the same host, and over TCP otherwise.
//! The flag needs the `etcd` feature (see the crate docs); without it, it is refused.
//!
//! With `--metrics-addr` it counts its calls, connections, bytes and limiter
//! refusals (`volo_core::metrics`) and serves them as Prometheus (OpenMetrics) text
//! at `http://HOST:PORT/metrics`; it prints `echo-server metrics on <addr>`.
//!
//! With `--access-log N` it logs one call in N on stderr (method, service, peer,
//! status, duration, request and reply bytes: the server's access log, see
//! `volo_core::server::trace`).
//!
//! With `--show-metainfo` it prints a line per call on stdout, `echo-server: call
//! method=<name> seq=<id> transport=<framing> protocol=<protocol> forward=<k=v,...>
//! persistent=<k=v,...> backward=<k=v,...>` (`-` for none): the transient
//! ("forward") and persistent metainfo the caller sent, and the backward value the
//! handler sends back, `srv_back=<method>` (see `examples::echo_service::call_line`).
//!
//! Its runtime has `--workers N` worker threads, by default as many as the CPUs the
//! process may use (its affinity mask and cgroup CPU quota, rounded up: see
//! `netpoll_rs::cpus`), not the host's; with `--access-log` the sizes chosen are
//! logged at start.
//!
//! `--spin adaptive|fixed|off` sets how the reactor's pollers poll between events
//! (`netpoll_rs::Config::adaptive_spin`): `fixed` is the 50 µs spin after every burst
//! that was the default before.
//!
//! For fault tests, `--delay-us N` makes `echo` wait N µs before it answers; with
//! `--delay-on-usr1` the delay starts off and each SIGUSR1 turns it on or off (so a
//! running instance can be made slow, and well again).
//!
//! `--governance etcd://HOST:PORT` (the `etcd` feature) follows the server's limits
//! in etcd, in Kitex's config-etcd layout: `{prefix}/EchoService/limit` holding
//! `{"connection_limit": N, "qps_limit": N, "concurrency_limit": N}`, taken up while
//! it serves (`--governance-prefix`, default `/KitexConfig`; see
//! `etcd_registry::governance`).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use examples::cli::{Usage, fail};
use examples::echo::EchoServiceServer;
use examples::echo_service::Echo;
use examples::options::{self, IoArg, SpinArg};
use examples::registry::{GovernanceArgs, Registration};
use tokio::signal::unix::{SignalKind, signal};
use volo_core::config::{Observability, TransportConfig};
use volo_core::context::Address;
use volo_core::metrics::Metrics;
use volo_core::server::{Server, ServerConfig};

/// Serves EchoService (idl/echo.thrift) on every address given, in every framing and
/// protocol, until Ctrl-C or SIGTERM (then it drains).
#[derive(Debug, Parser)]
#[command(name = "echo-server", version, args_override_self = true)]
struct Cli {
    /// Where to listen: host:port, unix:PATH or shm:PATH, comma-separated.
    #[arg(long, required = true, value_name = "ADDR[,ADDR...]", value_delimiter = ',',
          value_parser = options::address)]
    addr: Vec<Address>,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,

    /// How the reactor's pollers poll between events (netpoll only): adaptive spins
    /// only while events come a few µs apart; fixed spins 50 µs after every burst
    /// (the old default: lower latency at low load, up to a core of CPU); off blocks
    /// as soon as the work is done.
    #[arg(long, value_enum, value_name = "MODE", default_value = "adaptive")]
    spin: SpinArg,

    /// Runtime worker threads [default: the CPUs the process may use, from its
    /// affinity mask and cgroup CPU quota].
    #[arg(long, value_name = "N", value_parser = options::at_least_one())]
    workers: Option<usize>,

    /// `echo` waits this long before it answers, in microseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    delay_us: u64,

    /// The delay starts off; each SIGUSR1 turns it on or off.
    #[arg(long)]
    delay_on_usr1: bool,

    // --registry, --weight, --host-id, --tag, --lease-ttl.
    #[command(flatten)]
    registration: Registration,

    // --governance, --governance-prefix.
    #[command(flatten)]
    governance: GovernanceArgs,

    /// Serves the server's metrics as Prometheus text at http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<SocketAddr>,

    /// Logs one call in N on stderr (the server's access log).
    #[arg(long, value_name = "N")]
    access_log: Option<u64>,

    /// Prints each call's method, sequence id, framing, protocol and metainfo on
    /// stdout, and sends a backward value (`srv_back=<method>`) with each reply.
    #[arg(long)]
    show_metainfo: bool,
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        fail("echo-server", e);
    }
}

fn run(cli: Cli) -> Result<(), Usage> {
    let access_log = options::access_log(cli.access_log);
    let delay = Duration::from_micros(cli.delay_us);
    let mut echo = Echo::default();
    if cli.show_metainfo {
        echo = echo.show_metainfo("echo-server");
    }
    if !cli.delay_on_usr1 {
        echo.set_delay(delay);
    }
    let workers = cli
        .workers
        .unwrap_or_else(|| netpoll_rs::cpus::CpuBudget::current().usable);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let mut config = ServerConfig {
            transport: {
                let mut transport = TransportConfig::default();
                cli.io.apply(&mut transport);
                transport
            },
            observability: Observability {
                metrics: cli.metrics_addr.map(|_| Metrics::new()),
                access_log,
            },
            ..ServerConfig::default()
        };
        cli.spin.apply(&mut config.transport.reactor);
        // Served until the process ends.
        let _endpoint = match (&config.observability.metrics, cli.metrics_addr) {
            (Some(metrics), Some(addr)) => {
                let endpoint = metrics
                    .serve(addr)
                    .await
                    .map_err(|e| Usage(format!("--metrics-addr {addr}: {e}")))?;
                println!("echo-server metrics on {}", endpoint.local_addr());
                Some(endpoint)
            }
            _ => None,
        };
        if cli.delay_on_usr1 {
            let echo = echo.clone();
            let mut usr1 =
                signal(SignalKind::user_defined1()).map_err(|e| Usage(format!("SIGUSR1: {e}")))?;
            tokio::spawn(async move {
                while usr1.recv().await.is_some() {
                    let now = if echo.delay().is_zero() {
                        delay
                    } else {
                        Duration::ZERO
                    };
                    echo.set_delay(now);
                    println!("echo-server delay {} us", now.as_micros());
                }
            });
        }
        let server = Server::new(EchoServiceServer::new(echo)).config(config);
        let server = cli.registration.apply(server).await?;
        // Followed until the process ends.
        let (server, _governed) = cli.governance.server(server, "EchoService").await?;
        let list: Vec<String> = cli.addr.iter().map(ToString::to_string).collect();
        let bound = server
            .bind_all(&cli.addr)
            .await
            .map_err(|e| Usage(format!("binding {}: {e}", list.join(","))))?;
        for local in bound.local_addrs() {
            println!("echo-server listening on {local}");
        }
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| Usage(format!("SIGTERM: {e}")))?;
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
