//! `stream-check --addr ADDR`: runs the interop checks of a StreamService server
//! (idl/stream.thrift; ours, `stream-server`, or one built from Kitex's StreamX) and
//! prints `PASS <check>` or `FAIL <check>: <why>` for each: a ping-pong `echo` call;
//! server, client and bidirectional streams (a client stream of 1 MiB too), header
//! metadata, a cancelled stream, an exception and a business status in the trailer,
//! failing server and client streams; and a passed deadline: a server stream of 5
//! answers 100 ms apart, under a deadline of `--deadline-ms` (default 250; it must be
//! under the stream's 500 ms for the check to pass). Exits 0 when every check
//! passed, 1 otherwise, 2 on bad flags. `stream-check --help` lists the flags.

use std::time::Duration;

use clap::Parser;
use examples::cli::{Usage, fail};
use examples::options::{self, IoArg};
use examples::stream::{StreamServiceClient, StreamServiceStreamClient};
use examples::stream_service::check_peer;
use volo_core::client::{ClientConfig, StreamClient};
use volo_core::context::Address;

/// Checks a StreamService server's calls and streams, one line per check.
#[derive(Debug, Parser)]
#[command(name = "stream-check", version, args_override_self = true)]
struct Cli {
    /// The server: host:port, unix:PATH or shm:PATH.
    #[arg(long, value_name = "ADDR", value_parser = options::address)]
    addr: Address,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,

    /// The deadline check's deadline, in milliseconds (its stream takes 500 ms).
    #[arg(long, value_name = "MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(1..))]
    deadline_ms: u64,
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| {
        eprintln!("stream-check: no runtime: {e}");
        std::process::exit(1)
    });
    match rt.block_on(checks(&cli, &cli.addr)) {
        Ok(passed) => std::process::exit(i32::from(!passed)),
        Err(e) => fail("stream-check", e),
    }
}

/// Runs the checks against `addr`, a line each; whether all passed.
async fn checks(cli: &Cli, addr: &Address) -> Result<bool, Usage> {
    let mut config = ClientConfig::default();
    cli.io.apply(&mut config.transport);
    let no_client = |e: std::io::Error| Usage(format!("no client: {e}"));
    let open = |timeout: Option<Duration>| {
        StreamClient::new("StreamService", addr.clone(), &config).map(|c| {
            let c = match timeout {
                Some(t) => c.with_timeout(t),
                None => c,
            };
            StreamServiceStreamClient::new(c)
        })
    };
    let c = open(None).map_err(no_client)?;
    let slow = open(Some(Duration::from_millis(cli.deadline_ms))).map_err(no_client)?;
    let calls = StreamServiceClient::builder()
        .address(addr.clone())
        .config(config.clone())
        .build()
        .map_err(no_client)?;
    let mut failed = 0;
    for (name, result) in check_peer(&calls, &c, &slow).await {
        match result {
            Ok(()) => println!("PASS {name}"),
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    Ok(failed == 0)
}
