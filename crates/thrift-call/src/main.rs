//! `thrift-call`: calls a Thrift service by hand, as grpcurl calls a gRPC service and
//! Kitex's kitexcall a Kitex one. The IDL is read when the program runs
//! ([`thrift_dynamic::Descriptor`]); the arguments go in as JSON and the reply comes
//! out as JSON ([`thrift_generic::GenericClient::call_json`], whose JSON conventions
//! are Kitex's: see [`thrift_dynamic::json`]). No generated code, no build step: an
//! IDL file and an address are enough. Streaming methods are streamed, one JSON
//! object a line each way, as grpcurl streams them (see [Streams](#streams)).
//!
//! # Usage
//!
//! ```text
//! thrift-call --idl FILE [--include DIR]... [OPTIONS] ADDR SERVICE.METHOD [JSON]
//! thrift-call --idl FILE [--include DIR]... --list
//! ```
//!
//! ```text
//! # What can be called:
//! $ thrift-call --idl idl/echo.thrift --list
//! EchoService.echo
//! EchoService.echo_test
//! ...
//!
//! # A call, the arguments on the command line, keyed by argument name:
//! $ thrift-call --idl idl/echo.thrift 127.0.0.1:8888 EchoService.echo \
//!     '{"req":{"action":"echo","msg":"hi"}}'
//! {"action":"echo","msg":"hi"}
//!
//! # The arguments from stdin (JSON absent, or `-`), over a Unix socket, Framed:
//! $ echo '{"req":{"action":"echo","msg":"hi"}}' |
//!     thrift-call --idl idl/echo.thrift --transport framed /tmp/echo.sock echo.EchoService.echo
//!
//! # A declared exception: its JSON on stdout, status 4.
//! $ thrift-call --idl idl/echo.thrift 127.0.0.1:8888 EchoService.echo_or_fail \
//!     '{"req":{"action":"fail","msg":"no"}}'
//! {"code":1,"message":"no"}
//! thrift-call: echo_or_fail threw EchoError (as err)
//!
//! # TLS with a client certificate, metainfo, a shorter timeout:
//! $ thrift-call --idl idl/echo.thrift --tls --ca ca.crt --cert me.crt --key me.key \
//!     -H tenant=acme --timeout 500ms echo.internal:8888 EchoService.echo '{...}'
//! ```
//!
//! # Streams
//!
//! A method annotated `streaming.mode` (Kitex's StreamX over TTHeader) is opened as
//! a stream ([`thrift_generic::GenericStreamClient`]), whatever its mode, with the
//! same command line as a call:
//!
//! ```text
//! # A server stream: its one request (from JSON, or stdin), then each response on
//! # a line of its own, printed as it comes:
//! $ thrift-call --idl idl/stream.thrift 127.0.0.1:8888 StreamService.server_echo \
//!     '{"action":"push","msg":"hi","count":2}'
//! {"action":"push","msg":"hi"}
//! {"action":"push","msg":"hi"}
//!
//! # A client stream: one request a line from stdin, each sent as it is read; the
//! # one response when stdin ends:
//! $ printf '%s\n' '{"action":"up","msg":"1"}' '{"action":"up","msg":"2"}' |
//!     thrift-call --idl idl/stream.thrift 127.0.0.1:8888 StreamService.client_count
//! {"action":"received","msg":"2"}
//!
//! # Bidirectional: each line sent as it is read, each response printed as it
//! # comes (here typed at a terminal; Ctrl-D ends the requests):
//! $ thrift-call --idl idl/stream.thrift 127.0.0.1:8888 StreamService.bidi_echo
//! {"action":"a","msg":"1"}          <- typed
//! {"action":"a","msg":"1"}          <- the server's answer
//!
//! # A handler's error in the trailer, after two responses: status 3, as a call's.
//! $ thrift-call --idl idl/stream.thrift 127.0.0.1:8888 StreamService.server_echo \
//!     '{"action":"fail","msg":"late","count":2}'
//! {"action":"fail","msg":"late"}
//! {"action":"fail","msg":"late"}
//! thrift-call: application exception InternalError: late
//! ```
//!
//! - **A message is the struct itself**: the method's one argument's struct for a
//!   request, its return type's for a response, as a JSON object keyed by field name
//!   (`{"action":"a","msg":"b"}`, not `{"req":{...}}` as a call's arguments): what
//!   goes on the wire, and Kitex's JSON form.
//! - **Requests.** A server stream's one request is read as a call's arguments are
//!   (`JSON`, or all of stdin; blank means `{}`). Client and bidirectional streams
//!   read one request a line, from `JSON` when it is given (its lines), else from
//!   stdin as lines come; blank lines are skipped; the end of the input ends the
//!   requests. A line that is not a request (bad JSON, a field that does not fit)
//!   ends the run with status 1 and `line N: ...` (lines counted from 1, blank ones
//!   too): the lines before it were sent, and the stream is cancelled.
//! - **Responses** are printed one a line as they come, compact, and stdout is
//!   flushed after each; a client stream's one response comes when the server
//!   answers, after the requests end.
//! - **The end.** A stream that ends cleanly exits 0. One that ends with an error
//!   exits as a call that fails the same way, with the same message: an exception
//!   in the trailer (a handler's error) 3, `application exception ...`; a business
//!   status in the trailer 3 too, `the stream ended with business status CODE
//!   (MESSAGE)`; a deadline 2, `timed out`; a failed connection 2 (`connecting
//!   failed` while opening); a reset or cancel by the server 2. What was printed
//!   before the error stays on stdout.
//! - **Flags.** `--timeout` bounds the connect and, separately, the whole stream,
//!   from its opening: give a longer one for a long stream. `-H KEY=VALUE` goes in
//!   the stream's header as transient metainfo (`RPC_TRANSIT_KEY`). Streams travel
//!   over TTHeader in Binary and name their service in their header, so
//!   `--transport` other than `ttheader`, `--protocol compact` and `--multiplexed`
//!   are refused (1). TLS and every address form apply.
//! - `--list` names streaming methods after the others of their service.
//!
//! # Arguments and flags
//!
//! - `ADDR`: `host:port` (an IP address or a name, looked up), a Unix socket path
//!   (anything with a `/` in it, or `unix:PATH`), or `shm:PATH` (shared memory,
//!   through the Unix socket at that path).
//! - `SERVICE.METHOD`: the service as the IDL names it, bare (`EchoService`) or
//!   qualified by the stem of its file (`echo.EchoService`, needed when two files
//!   define services of one name); the method may be inherited from a base service.
//! - `JSON`: the arguments struct as a JSON object keyed by argument name. Absent or
//!   `-`: read from stdin. Empty input (only blanks) means `{}`, no arguments. For a
//!   stream, its requests: see [Streams](#streams).
//! - `--idl FILE` (required; repeatable, for services in several files) and
//!   `--include DIR` (repeatable): where includes are looked for, after the directory
//!   of the including file.
//! - `--list`: prints every `Service.method` of every service in the IDL, one per
//!   line, the inherited methods included (after the service's own), then its
//!   streaming methods, and calls nothing. A service whose bare name two files define is printed qualified.
//! - `--transport ttheader|framed|buffered|theader` (default `ttheader`, Kitex's
//!   TTHeader) and `--protocol binary|compact` (default `binary`).
//! - `--multiplexed`: Apache's `TMultiplexedProtocol`: the method goes out as
//!   `Service:method`, `Service` the service's bare IDL name (with TTHeader, the
//!   `isn` key names it too).
//! - `--tls` with `--ca FILE` (the certificates the server's is verified against,
//!   PEM), optionally `--cert FILE --key FILE` (a client certificate and its key,
//!   PEM) and `--server-name NAME` (the name expected in the server's certificate;
//!   default the host of `ADDR`). TLS needs a `host:port` address: a Unix socket is
//!   refused with `--tls` rather than used in the clear, as the transport would.
//! - `--timeout DURATION` (default `5s`): `500ms`, `2s`, `1.5s`, `1m`. It bounds the
//!   connect (the TLS handshake included) and, separately, the call.
//! - `-H KEY=VALUE` (or `--meta`, repeatable): metainfo. Each pair is a **transient**
//!   value (`RPC_TRANSIT_KEY` on the wire), as kitexcall's `-meta` sends it: the
//!   server reads it with `MetaInfo::transient`, and it goes no further than this
//!   one hop, which suits a call made by hand. Metainfo travels in the header, so it
//!   needs `--transport ttheader` or `theader`; with `framed` or `buffered` it is
//!   refused rather than silently dropped.
//!
//! # Exit status
//!
//! | status | when | stdout | stderr |
//! |---|---|---|---|
//! | 0 | the method answered, or the stream ended cleanly (also `--help`, `--version`, `--list`) | the reply's JSON and a newline (`null` for `void` and `oneway`); a stream's responses, one a line | nothing |
//! | 1 | a usage or IDL error: bad flags, an IDL that does not read, an unknown service or method, JSON arguments that do not fit (the message names the field path), a stream's request line that does not fit (the message names its line), a request too large to encode, a client that cannot be made (unreadable certificates) | nothing (a stream: what was printed before) | one line |
//! | 2 | a connection or protocol failure: nothing listening, a failed TLS handshake, a timeout (a stream's deadline too), a reply that does not read, a stream reset | nothing (a stream: what was printed before) | one line |
//! | 3 | the server answered with a `TApplicationException` (an unknown method, a refused or failed call, a stream's trailer carrying one), a stream's trailer carried a business status, or a reply without a result (Apache's `MISSING_RESULT`) | nothing (a stream: what was printed before) | one line |
//! | 4 | the method threw an exception its IDL declares | the exception's JSON and a newline | one line |
//!
//! Every failure prints one line on stderr, `thrift-call: ...`; clap's own errors
//! too (exit status 1, not clap's 2, so that 2 always means the network).
//!
//! # Choices
//!
//! - **One attempt.** The client's retries are off: a call made by hand is made
//!   once, and its failure shown as it happened. Timeouts, breakers and the rest of
//!   the client stack are the framework's own.
//! - **tokio's sockets** on a current-thread runtime, not netpoll-rs: one call needs
//!   no reactor threads or busy polling.
//! - **The JSON is not pretty-printed**: it is printed as transcoded (compact, field
//!   order of the IDL), ready for `jq`.
//! - A timeout reported by the server (the caller's deadline passed there) counts as
//!   a timeout (2), though it comes as a `TApplicationException`; so do the server's
//!   over-limit and shutting-down refusals count as application exceptions (3).
//!
//! [`thrift_dynamic::json`]: thrift_dynamic::json

#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod args;
mod call;
mod failure;
mod stream;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::failure::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: printed on stdout, status 0.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => return Failure::from_clap(&e).report(),
    };
    match call::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
