//! Volo's server and client on the benchmark IDL, over loopback: the calls answer as the IDL
//! says, in each framing, and the server stops when asked. Every test is bounded in time.

use std::{
    future::Future,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use volo_peer::{
    ECHO_ERROR_CODE, Framing, ServerHandle, VoloClient,
    echo::{Ano, Ids, MyTest},
    serve,
};

/// Generous against a loaded CI machine; a healthy run takes well under a second.
const LIMIT: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test did not finish in time")
}

async fn start() -> ServerHandle {
    let server = serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("bind 127.0.0.1:0");
    assert!(server.local_addr().ip().is_loopback());
    assert_ne!(server.local_addr().port(), 0);
    server
}

#[tokio::test]
async fn echo_100_times_then_fail_then_stop() {
    bounded(async {
        let server = start().await;
        let client = VoloClient::new(server.local_addr());

        for i in 0..100 {
            let msg = format!("hello {i}");
            let resp = client.echo("echo", &msg).await.expect("echo");
            assert_eq!(resp.action.as_str(), "echo");
            assert_eq!(resp.msg.as_str(), msg);
        }

        let resp = client
            .echo_or_fail("pass", "fine")
            .await
            .expect("echo_or_fail");
        assert_eq!((resp.action.as_str(), resp.msg.as_str()), ("pass", "fine"));

        let err = client
            .echo_or_fail("fail", "it broke")
            .await
            .expect_err("action \"fail\" fails");
        let echo_error = err.echo_error().expect("an EchoError, not a client error");
        assert_eq!(echo_error.code, Some(ECHO_ERROR_CODE));
        assert_eq!(echo_error.message.as_deref(), Some("it broke"));
        assert!(err.client_error().is_none());

        // The connection is still usable after the exception.
        let resp = client.echo("after", "fail").await.expect("echo after fail");
        assert_eq!(resp.msg.as_str(), "fail");

        drop(client);
        server.stop().await.expect("stop");
    })
    .await;
}

#[tokio::test]
async fn structs_lists_and_oneway() {
    bounded(async {
        let server = start().await;
        let client = VoloClient::new(server.local_addr());

        let t = MyTest {
            num: Some(7),
            ano: Some(Ano { num: Some(8) }),
            nums: Some((0..1024).collect()),
        };
        assert_eq!(client.echo_test(t.clone()).await.expect("echo_test"), t);

        let ids = Ids {
            ids32: Some(vec![1, -2, 3]),
            ids64: Some(vec![i64::MIN, 0, i64::MAX]),
            scores: Some(vec![0.5, -1.25]),
            blob: Some(pilota::Bytes::from_static(b"\x00\x01blob")),
        };
        assert_eq!(client.echo_ids(ids.clone()).await.expect("echo_ids"), ids);

        client.notify("started").await.expect("notify");
        // A oneway call leaves the connection usable for the next two-way one.
        assert_eq!(client.echo("a", "b").await.expect("echo").msg.as_str(), "b");

        drop(client);
        server.stop().await.expect("stop");
    })
    .await;
}

#[tokio::test]
async fn server_answers_every_framing() {
    bounded(async {
        let server = start().await;
        for framing in [Framing::TTHeaderFramed, Framing::Framed, Framing::Buffered] {
            let client = VoloClient::with_framing(server.local_addr(), framing);
            for i in 0..10 {
                let msg = format!("{framing:?} {i}");
                let resp = client.echo("echo", &msg).await.expect("echo");
                assert_eq!(resp.msg.as_str(), msg, "{framing:?}");
            }
            let err = client.echo_or_fail("fail", "x").await.expect_err("fails");
            assert_eq!(
                err.echo_error().and_then(|e| e.code),
                Some(ECHO_ERROR_CODE),
                "{framing:?}"
            );
        }
        server.stop().await.expect("stop");
    })
    .await;
}

#[tokio::test]
async fn stopped_server_refuses_connections() {
    bounded(async {
        let server = start().await;
        let addr = server.local_addr();
        server.stop().await.expect("stop");

        let client = VoloClient::new(addr);
        let err = client
            .echo("echo", "nobody")
            .await
            .expect_err("server is gone");
        assert!(err.client_error().is_some(), "{err}");
    })
    .await;
}
