//! The `thrift-call` binary on the streaming methods of `idl/stream.thrift`, against
//! the examples' stream server (served by this test process on loopback): what it
//! prints for each mode, and the status it exits with when a trailer carries an
//! error, a line is not a request, or a flag does not apply.

use std::future::Future;
use std::path::PathBuf;

mod support;

use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
use examples::stream_service::{BIZ_STATUS, Streams};
use support::{RUN_LIMIT, closed_port, loopback, offline, served, spawn, thrift_call};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use volo_core::server::Server;

fn stream_idl() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../idl/stream.thrift")
        .display()
        .to_string()
}

/// The stream server on loopback.
fn with_streams<F, Fut>(f: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Server::new(StreamServiceServer::new(Streams))
        .streams(StreamServiceStreamServer::new(Streams));
    served(server.bind(&loopback()), f);
}

/// `n` lines of `json` and a newline each.
fn lines(json: &str, n: usize) -> String {
    format!("{json}\n").repeat(n)
}

#[test]
fn a_server_stream_prints_one_json_object_per_line() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let request = r#"{"action":"push","msg":"m","count":3}"#;
        let want = lines(r#"{"action":"push","msg":"m"}"#, 3);
        let run = thrift_call(
            &["--idl", &idl, &addr, "StreamService.server_echo", request],
            "",
        )
        .await;
        assert_eq!(
            (run.status, run.stdout.as_str(), run.stderr.as_str()),
            (0, want.as_str(), ""),
            "{run:?}"
        );
        // The request from stdin, as a call's arguments come.
        let run = thrift_call(
            &["--idl", &idl, &addr, "stream.StreamService.server_echo"],
            &format!("{request}\n"),
        )
        .await;
        assert_eq!(
            (run.status, run.stdout.as_str()),
            (0, want.as_str()),
            "{run:?}"
        );
    });
}

#[test]
fn a_client_stream_sends_each_stdin_line_and_prints_the_one_response() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let stdin = "{\"action\":\"up\",\"msg\":\"1\"}\n\n  \n{\"action\":\"up\",\"msg\":\"2\"}";
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.client_count"], stdin).await;
        run.replied(r#"{"action":"received","msg":"2"}"#);
        // No requests at all: the server counts none.
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.client_count"], "").await;
        run.replied(r#"{"action":"received","msg":"0"}"#);
        // The JSON argument's lines, in place of stdin's.
        let given = "{\"action\":\"up\",\"msg\":\"1\"}\n{\"action\":\"up\",\"msg\":\"2\"}";
        let run = thrift_call(
            &["--idl", &idl, &addr, "StreamService.client_count", given],
            "",
        )
        .await;
        run.replied(r#"{"action":"received","msg":"2"}"#);
    });
}

#[test]
fn a_bidirectional_stream_prints_each_response_in_order() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let stdin: String = (0..5)
            .map(|i| format!("{{\"action\":\"{i}\",\"msg\":\"m\"}}\n"))
            .collect();
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.bidi_echo"], &stdin).await;
        assert_eq!(
            (run.status, run.stdout.as_str(), run.stderr.as_str()),
            (0, stdin.as_str(), ""),
            "{run:?}"
        );
    });
}

/// Each line goes as it is read and each response is printed as it comes: the
/// response to a line is read before the next line is written, with stdin open.
#[test]
fn a_bidirectional_stream_answers_a_line_before_the_next_is_typed() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let mut child = spawn(&["--idl", &idl, &addr, "StreamService.bidi_echo"]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        for i in 0..3 {
            let line = format!("{{\"action\":\"{i}\",\"msg\":\"typed\"}}");
            stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            stdin.flush().await.unwrap();
            let echoed = tokio::time::timeout(RUN_LIMIT, stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to line {i} while stdin is open"))
                .unwrap();
            assert_eq!(echoed.as_deref(), Some(line.as_str()));
        }
        drop(stdin);
        let status = tokio::time::timeout(RUN_LIMIT, child.wait())
            .await
            .expect("thrift-call did not end after stdin did")
            .unwrap();
        assert_eq!(status.code(), Some(0));
        assert_eq!(stdout.next_line().await.unwrap(), None);
    });
}

/// A handler's error in the trailer exits as a call's application exception does
/// (3, the same message), after the responses sent before it; a business status
/// likewise; a stream past its deadline as a call that timed out (2).
#[test]
fn a_trailer_s_error_exits_as_a_call_s_failure() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                &addr,
                "StreamService.server_echo",
                r#"{"action":"fail","msg":"late","count":2}"#,
            ],
            "",
        )
        .await;
        run.failed(3, "application exception InternalError: late");
        assert_eq!(run.stdout, lines(r#"{"action":"fail","msg":"late"}"#, 2));

        let stdin = "{\"action\":\"a\",\"msg\":\"b\"}\n{\"action\":\"fail\",\"msg\":\"boom\"}\n";
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.bidi_echo"], stdin).await;
        run.failed(3, "application exception InternalError: boom");
        assert_eq!(run.stdout, "{\"action\":\"a\",\"msg\":\"b\"}\n");

        let stdin = "{\"action\":\"bizfail\",\"msg\":\"no\"}\n";
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.client_count"], stdin).await;
        run.failed(3, &format!("business status {BIZ_STATUS} (no)"));

        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--timeout",
                "300ms",
                &addr,
                "StreamService.server_echo",
                r#"{"action":"slow","msg":"z","count":50}"#,
            ],
            "",
        )
        .await;
        run.failed(2, "timed out");
    });
}

/// A line that is not a request ends the run with status 1 and its line number
/// (blank lines counted); the lines before it were sent, the stream is cancelled.
#[test]
fn a_bad_line_exits_1_naming_it() {
    with_streams(|addr| async move {
        let idl = stream_idl();
        let stdin = "{\"action\":\"up\",\"msg\":\"1\"}\n\n{\"action\":\"up\",\"msg\":2}\n";
        let run = thrift_call(&["--idl", &idl, &addr, "StreamService.client_count"], stdin).await;
        run.failed(1, "line 3: the JSON request of client_count");
        assert!(run.stderr.contains("msg"), "the field path: {run:?}");
        assert_eq!(run.stdout, "");

        let run = thrift_call(
            &["--idl", &idl, &addr, "StreamService.bidi_echo"],
            "{\"action\":\"a\",\"msg\":\"b\"}\nnot json\n",
        )
        .await;
        run.failed(1, "line 2:");
        // A server stream's request that does not fit opens nothing.
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                &addr,
                "StreamService.server_echo",
                r#"{"action":7}"#,
            ],
            "",
        )
        .await;
        run.failed(1, "the JSON request of server_echo");
    });
}

/// `--list` names the streams too; flags a stream cannot follow are refused before
/// anything is sent (nothing listens at the address); nothing listening is 2.
#[test]
fn streams_are_listed_and_flags_they_cannot_follow_exit_1() {
    offline(|| async {
        let idl = stream_idl();
        let run = thrift_call(&["--idl", &idl, "--list"], "").await;
        assert_eq!(
            (run.status, run.stdout.as_str()),
            (
                0,
                "StreamService.echo\nStreamService.server_echo\n\
                 StreamService.client_count\nStreamService.bidi_echo\n"
            ),
            "{run:?}"
        );
        let nowhere = closed_port();
        let request = r#"{"action":"a","msg":"b"}"#;
        let refused: [&[&str]; 3] = [
            &["--transport", "framed"],
            &["--protocol", "compact"],
            &["--multiplexed"],
        ];
        for flags in refused {
            let mut args = vec!["--idl", &idl];
            args.extend(flags);
            args.extend([nowhere.as_str(), "StreamService.server_echo", request]);
            let run = thrift_call(&args, "").await;
            run.failed(1, flags[0]);
            assert!(run.stderr.contains("server stream"), "{run:?}");
        }
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                &nowhere,
                "StreamService.server_echo",
                request,
            ],
            "",
        )
        .await;
        run.failed(2, "connecting failed");
    });
}
