//! Apache Thrift's cross-language test programs, written on this framework as a user
//! would write them: `thrift-test-server` and `thrift-test-client`.
//!
//! Every Apache Thrift binding proves itself with the suite in Apache's `test/`: the
//! IDL `ThriftTest.thrift`, a test server and a test client per language, run
//! pairwise over every transport, protocol and socket they share (`test/tests.json`).
//! These two programs take the suite's command line, so any Apache binding's programs
//! can be paired with them, and `tests/matrix.rs` runs them against the suite's Python
//! side.
//!
//! The server and the client in one process, every check of the suite over Compact:
//!
//! ```
//! use thrift_test::checks::{self, Report};
//! use thrift_test::options::{ClientOptions, ServerOptions};
//! use volo_core::context::Address;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = ServerOptions::read(["thrift-test-server", "--port=0", "--protocol=compact"])?;
//! let (ready, listening) = tokio::sync::oneshot::channel();
//! tokio::spawn(async move {
//!     let ready = |addr: &Address| drop(ready.send(addr.clone()));
//!     thrift_test::serve::serve(&server, std::future::pending(), ready).await
//! });
//! let Address::Tcp(addr) = listening.await? else { unreachable!("--port listens on TCP") };
//!
//! let port = format!("--port={}", addr.port());
//! let client = ClientOptions::read(["thrift-test-client", &port, "--protocol=compact"])?;
//! let clients = thrift_test::connect::connect(&client).map_err(|e| e.to_string())?;
//! let mut report = Report::default();
//! checks::run(&clients, &mut report).await;
//! assert!(report.passed >= 20, "{} checks passed", report.passed);
//! assert!(report.failures.is_empty(), "{:?}", report.failures);
//! assert_eq!(report.exit_code(), 0);
//! # Ok(())
//! # }
//! ```
//!
//! ```text
//! thrift-test-server [--port=N | --domain-socket=PATH] [--transport=buffered|framed]
//!     [--protocol=binary|compact|json|header|multi|multic|multij|multih]
//!     [--ssl [--keys-dir=DIR]] [--port-file=PATH] [--verbose]
//! thrift-test-client [--host=HOST] [--port=N | --domain-socket=PATH] [--transport=..]
//!     [--protocol=..] [--ssl [--keys-dir=DIR]] [-n N | --testloops=N] [--verbose]
//! ```
//!
//! Both take `--help` and `--version` too ([`options`], parsed by clap).
//!
//! - The port defaults to 9090, the host to `localhost`, the transport to `buffered`,
//!   the protocol to `binary`. The suite's runner passes `--port` with
//!   `--domain-socket` too: the Unix socket wins.
//! - The server listens on 127.0.0.1 (loopback only); `--port=0` picks a free port,
//!   and `--port-file=PATH` writes the bound port there (the option Apache's
//!   `TestServer.py` has), so a runner needs no port guessing.
//! - `--ssl` reads the suite's key layout from `--keys-dir` (`server.crt`,
//!   `server.key`, `client.crt`, `client.key`, `CA.pem`), by default
//!   `../shared/xtest/keys` when it exists. The server asks for a client certificate
//!   and checks one that comes against `client.crt`, but takes clients that present
//!   none, as Apache's C++, Go and Rust test servers do (Go's and Rust's test clients
//!   have no certificate; Python's server alone requires one). The client trusts
//!   `CA.pem` and presents `client.crt` with `client.key` when the directory has
//!   them. TLS is for TCP only: `--ssl` with `--domain-socket` is refused.
//! - `header` is Apache's THeader with Binary inside; with `--transport=framed` the
//!   client puts each THeader frame inside a Framed length, as Apache's programs do
//!   over `TFramedTransport`.
//! - Both use only volo-core's public API and the code `thrift-codegen` generates in
//!   `build.rs` from `idl/thrift_test.thrift`: the suite's interface (its services,
//!   methods, fields, ids and types, which are what crosses the wire), declared here
//!   with this crate's own comments and only the types the services use.
//!
//! # Exit codes
//!
//! As the suite's `test/README.md` defines them: the client exits 0 when every check
//! passed, otherwise with the bits of the failed categories ([`checks::BASETYPES`] 1,
//! [`checks::STRUCTS`] 2, [`checks::CONTAINERS`] 4, [`checks::EXCEPTIONS`] 8, and
//! [`checks::TIMEOUT`] 128 when a call timed out), naming each failed check on
//! stderr. Both programs exit with [`checks::UNKNOWN`] (64, "failed to prepare the
//! environment") on an unknown option or value (clap's message names the flag), on a
//! combination they do not speak (the message says `not supported`: the suite's `http`
//! and `zlib` transports, TLS over a Unix socket), on unreadable TLS files, or (the
//! server) when it cannot listen. A client that cannot connect fails every check, each
//! naming the connect error.
//!
//! # Decisions
//!
//! - The server answers every framing and protocol it detects, whatever
//!   `--transport` and `--protocol` say (see [`serve`]); the client speaks exactly
//!   what they say.
//! - `testOneway` sleeps in a task of its own, so it holds up no other call
//!   ([`handler`]).
//! - The client checks what Apache's Python client checks, and requires the declared
//!   exceptions where the Python client only inspects them if they come
//!   ([`checks`]).
//! - Where a peer departs from the specification in a way Apache's own clients
//!   accept, the client passes the check and prints a `note:` line instead of
//!   failing: `testDouble(-0.0)` answered as `0.0` (Apache's Node.js writers drop the
//!   sign of zero; Apache's clients compare doubles as numbers and never send -0.0).
//!
//! # Against Apache's other bindings
//!
//! Besides the Python side that CI runs (`tests/matrix.rs`), these programs were
//! paired both ways with Apache's C++, Go, Rust, Java and Node.js test programs
//! (Apache Thrift c8f876181, built from its source; not part of this repository or of
//! CI) over every combination each speaks; the workspace guide's chapter on protocols
//! and transports (`docs/protocols-and-transports.md`) gives the counts. What that
//! found in the peers, and how this side meets it:
//!
//! - Go's and Rust's test clients present no client certificate, and Apache's C++,
//!   Go and Rust test servers ask for none; only Python's server requires one. So
//!   the server asks for one and checks one that comes, but takes a client without
//!   ([`serve`]).
//! - Node.js writes the negative `i64`s it echoes in JSON with leading zeros
//!   (`-000000000005`); thrift-wire reads them, as every Apache reader does.
//! - Go's programs have no Unix sockets, and Java's client cannot reconnect over TLS
//!   (`--testloops` above 1 with `--ssl` fails against any server).
#![allow(unreachable_pub)]

pub mod checks;
pub mod connect;
pub mod handler;
pub mod options;
pub mod serve;

// The generated argument and result types have no IDL comments to become docs.
#[allow(missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
}

pub use generated::thrift_test;

use std::fmt;

/// Why a program could not start its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setup {
    /// Listening, connecting or a file failed.
    Failed(String),
}

impl fmt::Display for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setup::Failed(m) => f.write_str(m),
        }
    }
}

/// Logs to stderr: info, or every call with `verbose`.
pub fn init_logging(verbose: bool) {
    let level = if verbose {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .try_init();
}

/// The runtime both programs run on: two worker threads (the suite runs client and
/// server side by side, often several pairs at once).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// What a program prints and returns for a command line it will not run: clap's help
/// or version on `--help` or `--version` (exit 0), else clap's message, which names
/// the flag, and exit [`checks::UNKNOWN`], the suite's code for a run that could not
/// start.
pub fn refuse(why: &clap::Error) -> std::process::ExitCode {
    // Nowhere to report a failed write to stdout or stderr.
    let _ = why.print();
    if why.use_stderr() {
        std::process::ExitCode::from(checks::UNKNOWN)
    } else {
        std::process::ExitCode::SUCCESS
    }
}
