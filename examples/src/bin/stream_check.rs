//! `stream-check --addr ADDR`: runs the interop checks of a StreamService server
//! (idl/stream.thrift; ours, `stream-server`, or one built from Kitex's StreamX) and
//! prints `PASS <check>` or `FAIL <check>: <why>` for each: server, client and
//! bidirectional streams (a client stream of 1 MiB too), header metadata, a
//! cancelled stream, an exception and a
//! business status in the trailer, failing server and client streams, and a passed
//! deadline (250 ms on a slow server stream). Exits 0 when every check passed, 1
//! otherwise, 2 on bad flags.

use std::time::Duration;

use clap::Parser;
use examples::options::{self, IoArg};
use examples::stream::StreamServiceStreamClient;
use examples::stream_service::check_peer;
use volo_core::client::{ClientConfig, StreamClient};
use volo_core::context::Address;

/// Checks a StreamService server's streams, one line per check.
#[derive(Debug, Parser)]
#[command(name = "stream-check", version, args_override_self = true)]
struct Cli {
    /// The server: host:port, unix:PATH or shm:PATH.
    #[arg(long, value_name = "ADDR", value_parser = options::address)]
    addr: Address,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| {
        eprintln!("stream-check: no runtime: {e}");
        std::process::exit(1)
    });
    let checks = rt.block_on(async {
        let mut config = ClientConfig::default();
        cli.io.apply(&mut config.transport);
        let open = |timeout: Option<Duration>| {
            StreamClient::new("StreamService", cli.addr.clone(), &config).map(|c| {
                let c = match timeout {
                    Some(t) => c.with_timeout(t),
                    None => c,
                };
                StreamServiceStreamClient::new(c)
            })
        };
        let (c, slow) = match (open(None), open(Some(Duration::from_millis(250)))) {
            (Ok(c), Ok(slow)) => (c, slow),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("stream-check: no client: {e}");
                std::process::exit(1);
            }
        };
        check_peer(&c, &slow).await
    });
    let mut failed = 0;
    for (name, result) in &checks {
        match result {
            Ok(()) => println!("PASS {name}"),
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
