//! Generic JSON streams against the generated streaming server of
//! `idl/stream.thrift` (the examples' `Streams`): each mode, metadata, requests that
//! do not fit, the errors a trailer carries, and methods of the wrong kind.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

mod support;

use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
use examples::stream_service::{BIZ_STATUS, ECHO_KEY, Streams};
use thrift_dynamic::{Descriptor, StreamingMode};
use thrift_generic::{GenericClient, GenericError, GenericStreamClient};
use volo_core::client::{Client, ClientConfig, ClientContext, ErrorKind};
use volo_core::context::Address;
use volo_core::server::Server;
use volo_core::stream::{Metadata, StreamError};

fn descriptor() -> Descriptor {
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/stream.thrift");
    Descriptor::from_files(&[idl], &[] as &[PathBuf]).unwrap()
}

/// Runs `f` with the stream server on a loopback port.
fn with_server<F, Fut>(f: F)
where
    F: FnOnce(Address) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Server::new(StreamServiceServer::new(Streams))
        .streams(StreamServiceStreamServer::new(Streams));
    support::served(server.bind(&support::loopback()), f);
}

fn client(addr: &Address) -> GenericStreamClient {
    GenericStreamClient::connect(
        addr.clone(),
        &ClientConfig::default(),
        descriptor(),
        "stream.StreamService",
    )
    .unwrap()
}

/// Every response of a stream until its end, as text; then the end's error, if any.
async fn drain(rx: &mut thrift_generic::JsonReceiver) -> (Vec<String>, Result<(), GenericError>) {
    let mut got = Vec::new();
    loop {
        match rx.recv().await {
            Ok(Some(json)) => got.push(String::from_utf8(json.to_vec()).unwrap()),
            Ok(None) => return (got, Ok(())),
            Err(e) => return (got, Err(e)),
        }
    }
}

#[test]
fn a_bidirectional_stream_answers_each_json_request_in_order() {
    with_server(|addr| async move {
        // The client goes at once: its streams keep what they need.
        let mut s = client(&addr)
            .open_json("bidi_echo", &Metadata::new())
            .await
            .unwrap();
        assert_eq!(
            (s.method(), s.mode()),
            ("bidi_echo", StreamingMode::Bidirectional)
        );
        for i in 0..3 {
            let json = format!(r#"{{"action":"a{i}","msg":"h\u00e9 \"{i}\""}}"#);
            s.send(json.as_bytes()).await.unwrap();
            let got = s.recv().await.unwrap().expect("an echo");
            assert_eq!(
                std::str::from_utf8(&got).unwrap(),
                format!(r#"{{"action":"a{i}","msg":"hé \"{i}\""}}"#)
            );
        }
        s.close_send().await.unwrap();
        assert_eq!(s.recv().await.unwrap(), None, "the server ended the stream");
        assert!(s.trailer().is_some(), "a clean end has a trailer");
    });
}

#[test]
fn a_server_stream_takes_one_request_and_sends_its_header() {
    with_server(|addr| async move {
        let mut header = Metadata::new();
        header.insert(ECHO_KEY, "hello");
        let c = client(&addr);
        let mut rx = c
            .server_stream_json(
                "server_echo",
                &header,
                br#"{"action":"push","msg":"m","count":3}"#,
            )
            .await
            .unwrap();
        let (got, end) = drain(&mut rx).await;
        end.unwrap();
        assert_eq!(got, vec![r#"{"action":"push","msg":"m"}"#; 3]);
        assert_eq!(rx.header().await.unwrap().get(ECHO_KEY), Some("hello"));

        // Opened by hand, the request is the one message it takes.
        let mut s = c.open_json("server_echo", &Metadata::new()).await.unwrap();
        s.send(br#"{"action":"a","msg":"b","count":1}"#)
            .await
            .unwrap();
        let err = s.send(br#"{"action":"a","msg":"b"}"#).await.unwrap_err();
        assert!(matches!(err, GenericError::SecondRequest { .. }), "{err}");
        s.close_send().await.unwrap();
        let (_, mut rx) = s.split();
        let (got, end) = drain(&mut rx).await;
        end.unwrap();
        assert_eq!(got.len(), 1, "the second request was not sent: {got:?}");
    });
}

/// A request that does not fit is refused with its field path and not sent: the
/// server counts the others only.
#[test]
fn a_client_stream_counts_the_requests_that_fit() {
    with_server(|addr| async move {
        let mut s = client(&addr)
            .open_json("client_count", &Metadata::new())
            .await
            .unwrap();
        s.send(br#"{"action":"up","msg":"1"}"#).await.unwrap();
        let err = s.send(br#"{"action":"up","msg":2}"#).await.unwrap_err();
        let GenericError::JsonMessage { method, source } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            (method.as_str(), source.path().as_str()),
            ("client_count", "msg")
        );
        assert!(err.to_string().contains("msg"), "{err}");
        let err = s.send(br#"{"action":"up"}"#).await.unwrap_err();
        assert!(err.to_string().contains("`msg`"), "a missing field: {err}");
        s.send(br#"{"action":"up","msg":"3"}"#).await.unwrap();
        s.close_send().await.unwrap();
        let answer = s.recv().await.unwrap().expect("the answer");
        assert_eq!(&answer[..], br#"{"action":"received","msg":"2"}"#);
        assert_eq!(s.recv().await.unwrap(), None);
    });
}

/// A handler's error in the trailer comes as a call's application exception, after
/// what was sent before it; a business status as the stream's own error.
#[test]
fn a_trailer_s_error_comes_as_a_call_s() {
    with_server(|addr| async move {
        let c = client(&addr);
        let mut rx = c
            .server_stream_json(
                "server_echo",
                &Metadata::new(),
                br#"{"action":"fail","msg":"late","count":2}"#,
            )
            .await
            .unwrap();
        let (got, end) = drain(&mut rx).await;
        assert_eq!(got.len(), 2, "the responses before the error");
        let err = end.unwrap_err();
        let GenericError::Call(call) = &err else {
            panic!("{err}")
        };
        assert_eq!(call.kind(), ErrorKind::Application, "{err}");
        assert!(err.to_string().contains("late"), "{err}");

        let mut s = c.open_json("bidi_echo", &Metadata::new()).await.unwrap();
        s.send(br#"{"action":"bizfail","msg":"no"}"#).await.unwrap();
        match s.recv().await {
            Err(GenericError::Stream(StreamError::Biz(b))) => {
                assert_eq!((b.code, b.message.as_str()), (BIZ_STATUS, "no"));
            }
            other => panic!("{other:?}"),
        }
    });
}

/// A stream whose deadline passes fails as a call that timed out.
#[test]
fn a_stream_past_its_deadline_times_out() {
    with_server(|addr| async move {
        let c = client(&addr).with_timeout(Duration::from_millis(200));
        // Fifty answers 100 ms apart: far longer than the deadline.
        let mut rx = c
            .server_stream_json(
                "server_echo",
                &Metadata::new(),
                br#"{"action":"slow","msg":"z","count":50}"#,
            )
            .await
            .unwrap();
        let (got, end) = drain(&mut rx).await;
        let err = end.unwrap_err();
        assert!(
            matches!(&err, GenericError::Call(e) if e.is_timeout()),
            "{err} after {} answers",
            got.len()
        );
        assert!(got.len() < 50);
    });
}

/// A ping-pong method is not opened, a streaming one not called, a server stream's
/// request that does not fit opens nothing: all before anything is sent.
#[test]
fn methods_of_the_wrong_kind_are_refused_unsent() {
    with_server(|addr| async move {
        let c = client(&addr);
        let err = c.open_json("echo", &Metadata::new()).await.unwrap_err();
        assert!(matches!(err, GenericError::NotStreaming { .. }), "{err}");
        let err = c.open_json("nope", &Metadata::new()).await.unwrap_err();
        assert!(matches!(err, GenericError::UnknownMethod { .. }), "{err}");
        let err = c
            .server_stream_json("bidi_echo", &Metadata::new(), b"{}")
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                GenericError::Streaming {
                    mode: StreamingMode::Bidirectional,
                    ..
                }
            ),
            "{err}"
        );
        let err = c
            .server_stream_json("server_echo", &Metadata::new(), br#"{"action":[]}"#)
            .await
            .unwrap_err();
        assert!(matches!(err, GenericError::JsonMessage { .. }), "{err}");

        let calls = Client::builder("StreamService")
            .address(addr.clone())
            .build()
            .unwrap();
        let calls = GenericClient::new(calls, descriptor(), "StreamService").unwrap();
        let err = calls
            .call_json(&mut ClientContext::new(), "server_echo", b"{}")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "server_echo is a server streaming method: open a stream of it"
        );
        // The ping-pong method of the same service is still called.
        let reply = calls
            .call_json(
                &mut ClientContext::new(),
                "echo",
                br#"{"req":{"action":"a","msg":"b"}}"#,
            )
            .await
            .unwrap();
        assert_eq!(&reply[..], br#"{"action":"a","msg":"b"}"#);
    });
}

#[test]
fn nothing_listening_fails_to_connect() {
    support::runtime().block_on(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr: Address = listener.local_addr().unwrap().to_string().parse().unwrap();
        drop(listener);
        let err = client(&addr)
            .open_json("bidi_echo", &Metadata::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, GenericError::Call(e) if e.kind() == ErrorKind::Connect),
            "{err}"
        );
        assert!(err.to_string().starts_with("connecting failed"), "{err}");
    });
}

/// Through a client's stack: an instance that refuses connections is passed over
/// (the opening never left, so the stack retries it on the live one), and the
/// stream works as one opened without a stack.
#[test]
fn streams_open_through_a_client_stack() {
    with_server(|addr| async move {
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            Address::Tcp(l.local_addr().unwrap())
        };
        let stack = Client::builder("StreamService")
            .addresses([dead, addr.clone()])
            .load_balance(volo_core::client::RoundRobin::default())
            .build()
            .unwrap();
        let client =
            GenericStreamClient::from_client(stack, descriptor(), "stream.StreamService").unwrap();
        for i in 0..4 {
            let mut rx = client
                .server_stream_json(
                    "server_echo",
                    &Metadata::new(),
                    format!(r#"{{"action":"push","msg":"m{i}","count":2}}"#).as_bytes(),
                )
                .await
                .expect("opened on the live instance");
            let (got, end) = drain(&mut rx).await;
            end.unwrap();
            let want = format!(r#"{{"action":"push","msg":"m{i}"}}"#);
            assert_eq!(got, [want.clone(), want]);
        }
    });
}
