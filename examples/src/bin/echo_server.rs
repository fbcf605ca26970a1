//! `echo-server --addr <host:port|unix:PATH|shm:PATH> [--io netpoll|tokio]
//! [--delay-us N] [--delay-on-usr1]`: serves idl/echo.thrift's EchoService until killed
//! (Ctrl-C shuts it down gracefully). It accepts every framing (TTHeader, Framed,
//! Buffered) and protocol (Binary, Compact, JSON) and answers each connection in kind, so
//! Apache Thrift, Kitex and Volo clients all work.
//!
//! For fault tests, `--delay-us N` makes `echo` wait N µs before it answers; with
//! `--delay-on-usr1` the delay starts off and each SIGUSR1 turns it on or off (so a
//! running instance can be made slow, and well again).

use std::time::Duration;

use examples::cli::{Args, Usage};
use examples::echo::EchoServiceServer;
use examples::echo_service::Echo;
use tokio::signal::unix::{SignalKind, signal};
use volo_core::context::Address;
use volo_core::server::{Server, ServerConfig};

const HELP: &str = "usage: echo-server --addr <host:port|unix:PATH|shm:PATH> [--io netpoll|tokio] \
[--delay-us N] [--delay-on-usr1]";

fn main() {
    if let Err(e) = run() {
        eprintln!("echo-server: {e}\n{HELP}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Usage> {
    let args = Args::parse(std::env::args().skip(1), &["delay-on-usr1"])?;
    args.only(&["addr", "io", "delay-us", "delay-on-usr1"])?;
    let addr: Address = args.required("addr")?;
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
            ..ServerConfig::default()
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
        let bound = Server::new(EchoServiceServer::new(echo))
            .with_config(config)
            .bind(&addr)
            .await
            .map_err(|e| Usage(format!("binding {addr}: {e}")))?;
        println!("echo-server listening on {}", bound.local_addr());
        bound
            .serve_with_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| Usage(format!("serving: {e}")))
    })
}
