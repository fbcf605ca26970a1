//! `thrift-test-server`: Apache Thrift's cross-language test server (`ThriftTest`, and
//! `SecondService` when multiplexed) on this framework. See the `thrift-test` crate
//! docs for the options and exit codes.

use std::process::ExitCode;

use thrift_test::checks::UNKNOWN;
use thrift_test::options::ServerOptions;

fn main() -> ExitCode {
    let opts = match ServerOptions::read(std::env::args_os()) {
        Ok(o) => o,
        Err(why) => return thrift_test::refuse(&why),
    };
    thrift_test::init_logging(opts.common.verbose);
    let runtime = match thrift_test::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("thrift-test-server: cannot start the runtime: {e}");
            return ExitCode::from(UNKNOWN);
        }
    };
    let served = runtime.block_on(thrift_test::serve::serve(&opts, stop_signal(), |_| {}));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thrift-test-server: {e}");
            ExitCode::from(UNKNOWN)
        }
    }
}

/// Completes on SIGINT or SIGTERM (what a test runner sends to stop a server).
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        // No handler: Ctrl-C alone stops it.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
}
