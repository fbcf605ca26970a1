//! `echo-server --addr <host:port|unix:PATH|shm:PATH> [--io netpoll|tokio]`: serves
//! idl/echo.thrift's EchoService until killed (Ctrl-C shuts it down gracefully). It
//! accepts every framing (TTHeader, Framed, Buffered) and protocol (Binary, Compact) and
//! answers each connection in kind, so Apache Thrift, Kitex and Volo clients all work.

use examples::cli::{Args, Usage};
use examples::echo::EchoServiceServer;
use examples::echo_service::Echo;
use volo_core::context::Address;
use volo_core::server::{Server, ServerConfig};

const HELP: &str = "usage: echo-server --addr <host:port|unix:PATH|shm:PATH> [--io netpoll|tokio]";

fn main() {
    if let Err(e) = run() {
        eprintln!("echo-server: {e}\n{HELP}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Usage> {
    let args = Args::parse(std::env::args().skip(1), &[])?;
    args.only(&["addr", "io"])?;
    let addr: Address = args.required("addr")?;
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
        let bound = Server::new(EchoServiceServer::new(Echo::default()))
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
