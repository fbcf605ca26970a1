//! `echo-server --addr <host:port|unix:PATH|shm:PATH>[,<addr>...] [--io netpoll|tokio]
//! [--delay-us N] [--delay-on-usr1] [--registry etcd://HOST:PORT[,HOST:PORT...]]
//! [--weight N] [--host-id ID] [--lease-ttl SECS] [--metrics-addr HOST:PORT]
//! [--access-log N]`: serves idl/echo.thrift's
//! EchoService until killed (Ctrl-C or SIGTERM shuts it down gracefully). It accepts
//! every framing (TTHeader, Framed, Buffered) and protocol (Binary, Compact, JSON) and
//! answers each connection in kind, so Apache Thrift, Kitex and Volo clients all work.
//!
//! With several addresses it listens on all of them, one server. It prints
//! `echo-server listening on <addr>` for each, in order, once all are bound.
//!
//! With `--registry` it registers in etcd, under `EchoService`, every address it
//! listens on, its `--weight` (default 100) and its host identity (`/etc/machine-id`,
//! or `--host-id`, which makes it look like an instance of another machine), with a
//! lease of `--lease-ttl` seconds (default 10) kept alive while it runs; on a graceful
//! shutdown it deregisters before it drains. Clients that follow the registry
//! (`echo-client --discover`) call it over shared memory or its Unix socket when they
//! run on the same host, and over TCP otherwise.
//!
//! With `--metrics-addr` it counts its calls, connections, bytes and limiter
//! refusals (`volo_core::metrics`) and serves them as Prometheus (OpenMetrics) text
//! at `http://HOST:PORT/metrics`; it prints `echo-server metrics on <addr>`.
//!
//! With `--access-log N` it logs one call in N on stderr (method, service, peer,
//! status, duration, request and reply bytes: the server's access log, see
//! `volo_core::server::trace`).
//!
//! For fault tests, `--delay-us N` makes `echo` wait N µs before it answers; with
//! `--delay-on-usr1` the delay starts off and each SIGUSR1 turns it on or off (so a
//! running instance can be made slow, and well again).

use std::time::Duration;

use etcd_registry::{EtcdConfig, EtcdRegistry};
use examples::cli::{Args, Usage};
use examples::echo::EchoServiceServer;
use examples::echo_service::Echo;
use tokio::signal::unix::{SignalKind, signal};
use volo_core::metrics::Metrics;
use volo_core::registry::RegistryInfo;
use volo_core::server::{Server, ServerConfig};

const HELP: &str = "usage: echo-server --addr <host:port|unix:PATH|shm:PATH>[,<addr>...] \
[--io netpoll|tokio] [--delay-us N] [--delay-on-usr1] [--registry etcd://HOST:PORT] [--weight N] \
[--host-id ID] [--lease-ttl SECS] [--metrics-addr HOST:PORT] [--access-log N]";

fn main() {
    if let Err(e) = run() {
        eprintln!("echo-server: {e}\n{HELP}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Usage> {
    let args = Args::parse(std::env::args().skip(1), &["delay-on-usr1"])?;
    args.only(&[
        "addr",
        "io",
        "delay-us",
        "delay-on-usr1",
        "registry",
        "weight",
        "host-id",
        "lease-ttl",
        "metrics-addr",
        "access-log",
    ])?;
    let metrics_addr: Option<std::net::SocketAddr> = args.optional("metrics-addr")?;
    let access_log = examples::options::access_log(args.optional("access-log")?);
    let addrs = examples::options::addresses(&args.required::<String>("addr")?)?;
    let registry: Option<String> = args.optional("registry")?;
    let info = RegistryInfo {
        weight: args.get("weight", 100u32)?,
        host: match args.optional::<String>("host-id")? {
            Some(id) => Some(id),
            None => RegistryInfo::default().host,
        },
        ..RegistryInfo::default()
    };
    let lease_ttl: f64 = args.get("lease-ttl", 10.0)?;
    let delay = Duration::from_micros(args.get("delay-us", 0u64)?);
    let on_signal = args.flag("delay-on-usr1");
    let echo = Echo::default();
    if !on_signal {
        echo.set_delay(delay);
    }
    let transport = examples::options::io(&args.get("io", "netpoll".to_string())?)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let config = ServerConfig {
            transport,
            metrics: metrics_addr.map(|_| Metrics::new()),
            access_log,
            ..ServerConfig::default()
        };
        // Served until the process ends.
        let _endpoint = match (&config.metrics, metrics_addr) {
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
        if on_signal {
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
        let mut server = Server::new(EchoServiceServer::new(echo)).with_config(config);
        if let Some(url) = registry {
            let mut etcd = EtcdConfig::new(examples::options::etcd(&url)?);
            etcd.lease_ttl = Duration::try_from_secs_f64(lease_ttl)
                .map_err(|e| Usage(format!("--lease-ttl {lease_ttl}: {e}")))?;
            let registry = EtcdRegistry::connect(etcd)
                .await
                .map_err(|e| Usage(format!("--registry {url}: {e}")))?;
            server = server.registry(registry, info);
        }
        let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        let bound = server
            .bind_all(&addrs)
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
