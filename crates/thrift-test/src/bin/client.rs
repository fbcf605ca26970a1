//! `thrift-test-client`: Apache Thrift's cross-language test client on this framework:
//! every check Apache's Python test client makes. See the `thrift-test` crate docs for
//! the options and exit codes.

use std::process::ExitCode;

use thrift_test::checks::{self, Report, UNKNOWN};
use thrift_test::options::ClientOptions;

fn main() -> ExitCode {
    let opts = match ClientOptions::read(std::env::args_os()) {
        Ok(o) => o,
        Err(why) => return thrift_test::refuse(&why),
    };
    thrift_test::init_logging(opts.common.verbose);
    let runtime = match thrift_test::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("thrift-test-client: cannot start the runtime: {e}");
            return ExitCode::from(UNKNOWN);
        }
    };
    let report = runtime.block_on(async {
        let clients = thrift_test::connect::connect(&opts)?;
        let mut report = Report::default();
        for _ in 0..opts.testloops {
            checks::run(&clients, &mut report).await;
            if report.timed_out {
                break;
            }
        }
        Ok::<_, thrift_test::Setup>(report)
    });
    match report {
        Err(e) => {
            eprintln!("thrift-test-client: {e}");
            ExitCode::from(UNKNOWN)
        }
        Ok(report) => {
            for note in &report.notes {
                eprintln!("note: {note}");
            }
            for f in &report.failures {
                eprintln!("FAILED {}: {}", f.check, f.detail);
            }
            eprintln!(
                "{} checks passed, {} failed",
                report.passed,
                report.failures.len()
            );
            ExitCode::from(report.exit_code())
        }
    }
}
