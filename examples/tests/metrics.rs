//! Metrics end to end: a server and clients on loopback share one `Metrics`; after a
//! known number of calls (answered, failed by the application, of an unknown method,
//! refused by a dead instance and retried), `/metrics` is scraped over TCP and every
//! count is checked.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use examples::echo::{
    EchoServiceClient, EchoServiceEchoArgs, EchoServiceEchoResult, EchoServiceServer, Ids, Request,
};
use examples::echo_service::Echo;
use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};
use volo_core::client::retry::Backoff;
use volo_core::client::{
    ClientBuilder, ClientConfig, ClientContext, ErrorKind, RetryPolicy, Untyped,
};
use volo_core::config::Observability;
use volo_core::context::{Address, ServerContext};
use volo_core::metrics::Metrics;
use volo_core::server::{DispatchError, LimitConfig, Server, ServerConfig, ServerRequest};
use volo_core::service::{Service, layer_fn};

/// Fails every `echo_ids` with an application exception, before the handler.
struct FailIds<S>(S);

impl<S> Service<ServerContext, ServerRequest> for FailIds<S>
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        if cx.rpc.method.as_str() == "echo_ids" {
            return Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                "no ids today",
            )));
        }
        self.0.call(cx, req).await
    }
}

/// The value of the sample `name{labels}` in `text` (0 if it is not there).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// `GET /metrics` on `addr` over a plain socket: the status line and the body.
fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn a_scrape_counts_every_call_by_outcome() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let metrics = Metrics::new();
    let _guard = rt.enter();
    let endpoint = rt
        .block_on(metrics.serve("127.0.0.1:0".parse().unwrap()))
        .unwrap();

    let server = rt
        .block_on(
            Server::new(EchoServiceServer::new(Echo::default()))
                .layer(layer_fn(FailIds))
                .config(ServerConfig {
                    observability: Observability {
                        metrics: Some(metrics.clone()),
                        ..Default::default()
                    },
                    ..ServerConfig::default()
                })
                .bind(&"127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let addr = server.local_addr().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = rt.spawn(server.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    // A port nothing listens on: connects are refused.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        Address::Tcp(l.local_addr().unwrap())
    };

    let config = ClientConfig {
        observability: Observability {
            metrics: Some(metrics.clone()),
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    // The clients live until after the scrape: their breakers are read then.
    let _clients = rt
        .block_on(tokio::time::timeout(Duration::from_secs(30), async {
            let client = EchoServiceClient::builder()
                .address(addr.clone())
                .config(config.clone())
                .build()
                .unwrap();
            for i in 0..5 {
                let req = Request {
                    action: Utf8Bytes::from("echo"),
                    msg: Utf8Bytes::from(format!("call {i}")),
                };
                client.echo(req).await.unwrap();
            }
            for _ in 0..2 {
                let e = client.echo_ids(Ids::default()).await.unwrap_err();
                assert!(format!("{e}").contains("no ids today"), "{e}");
            }
            // A method the service does not have, through an untyped client.
            let untyped = ClientBuilder::<Untyped>::new("EchoService")
                .address(addr.clone())
                .config(config.clone())
                .build()
                .unwrap();
            let args = EchoServiceEchoArgs::default();
            let e = untyped
                .call::<_, EchoServiceEchoResult>(&mut ClientContext::new(), "no_such_method", args)
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Application);
            // A dead instance: the first attempt and two retries are refused.
            let to_dead = EchoServiceClient::builder()
                .service_name("Dead")
                .address(dead)
                .config(config.clone())
                .retry(RetryPolicy::new().backoff(Backoff::None).max_retries(2))
                .instance_breaker(None)
                .build()
                .unwrap();
            let e = to_dead.echo(Request::default()).await.unwrap_err();
            assert!(format!("{e:?}").contains("Connect"), "{e:?}");
            (client, untyped, to_dead)
        }))
        .expect("the calls end within 30 s");

    let (status, text) = scrape(endpoint.local_addr());
    assert_eq!(status, "HTTP/1.1 200 OK");
    let at = |series: &str| sample(&text, series);
    let server = |method: &str, outcome: &str| {
        at(&format!(
            r#"rpc_server_requests_total{{service="EchoService",method="{method}",outcome="{outcome}"}}"#
        ))
    };
    assert_eq!(server("echo", "ok"), 5.0, "{text}");
    assert_eq!(server("echo_ids", "application_error"), 2.0);
    assert_eq!(
        server("_other", "unknown_method"),
        1.0,
        "the name sent is not a label"
    );
    assert!(!text.contains("no_such_method\",outcome=\"unknown_method"));
    assert_eq!(
        at(r#"rpc_server_duration_seconds_count{service="EchoService",method="echo"}"#),
        5.0
    );
    assert_eq!(
        at(
            r#"rpc_server_duration_seconds_bucket{le="+Inf",service="EchoService",method="echo_ids"}"#
        ),
        2.0
    );
    assert_eq!(
        at(r#"rpc_server_inflight_requests{service="EchoService"}"#),
        0.0
    );

    let client = |service: &str, method: &str, outcome: &str| {
        at(&format!(
            r#"rpc_client_requests_total{{service="{service}",method="{method}",outcome="{outcome}"}}"#
        ))
    };
    assert_eq!(client("EchoService", "echo", "ok"), 5.0);
    assert_eq!(client("EchoService", "echo_ids", "application"), 2.0);
    assert_eq!(client("EchoService", "no_such_method", "application"), 1.0);
    assert_eq!(
        client("Dead", "echo", "connect"),
        1.0,
        "one call, however many attempts"
    );
    assert_eq!(
        at(r#"rpc_client_retries_total{service="Dead",method="echo"}"#),
        2.0
    );
    assert_eq!(
        at(r#"rpc_client_retries_total{service="EchoService",method="echo"}"#),
        0.0
    );
    assert_eq!(
        at(r#"rpc_client_duration_seconds_count{service="EchoService",method="echo"}"#),
        5.0
    );
    assert_eq!(
        at(r#"rpc_client_inflight_requests{service="EchoService"}"#),
        0.0
    );
    // Read at the scrape: every breaker closed; the dead instance failed 3 times, not
    // the 10 in a row that open an instance breaker.
    for series in [
        r#"rpc_client_breaker_state{service="Dead"} 0"#,
        r#"rpc_client_breaker_state{service="EchoService"} 0"#,
        r#"rpc_client_instance_breakers_not_closed{service="EchoService"} 0"#,
    ] {
        assert!(text.contains(&format!("\n{series}\n")), "{series}: {text}");
    }

    // One connection per client that reached the server (calls one after another).
    assert_eq!(at("rpc_server_connections_total"), 2.0);
    // Both sides count whole frames: what one sent, the other received.
    let sent = at("rpc_client_sent_bytes_total");
    assert!(sent > 0.0);
    assert_eq!(at("rpc_server_received_bytes_total"), sent);
    assert_eq!(
        at("rpc_server_sent_bytes_total"),
        at("rpc_client_received_bytes_total")
    );
    assert_eq!(
        at(r#"rpc_server_limiter_rejections_total{reason="qps"}"#),
        0.0
    );

    let _ = stop.send(());
    rt.block_on(serving).unwrap().unwrap();
    // The clients are gone and the server closed: no connection open.
    let (_, text) = scrape(endpoint.local_addr());
    assert_eq!(sample(&text, "rpc_server_open_connections"), 0.0);
}

/// Calls a limiter refuses are counted by reason, and as `overloaded` by the client;
/// they never reach the server's stack.
#[test]
fn limiter_refusals_are_counted_by_reason() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let metrics = Metrics::new();
    // `Some(0)` refuses every call: one server by concurrency, one by rate.
    let limits = [
        LimitConfig {
            max_concurrency: Some(0),
            max_qps: None,
        },
        LimitConfig {
            max_concurrency: None,
            max_qps: Some(0),
        },
    ];
    rt.block_on(tokio::time::timeout(Duration::from_secs(30), async {
        for (limit, calls) in limits.into_iter().zip([2, 3]) {
            let bound = Server::new(EchoServiceServer::new(Echo::default()))
                .config(ServerConfig {
                    observability: Observability {
                        metrics: Some(metrics.clone()),
                        ..Default::default()
                    },
                    ..ServerConfig::default()
                })
                .limit(limit)
                .bind(&"127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let client = EchoServiceClient::builder()
                .address(bound.local_addr().clone())
                .config(ClientConfig {
                    observability: Observability {
                        metrics: Some(metrics.clone()),
                        ..Default::default()
                    },
                    ..ClientConfig::default()
                })
                .retry(RetryPolicy::new().max_retries(0))
                .build()
                .unwrap();
            let serving = tokio::spawn(bound.serve());
            for _ in 0..calls {
                let e = client.echo(Request::default()).await.unwrap_err();
                assert!(format!("{e:?}").contains("Overloaded"), "{e:?}");
            }
            serving.abort();
        }
    }))
    .expect("the calls end within 30 s");
    let text = metrics.encode();
    let at = |series: &str| sample(&text, series);
    assert_eq!(
        at(r#"rpc_server_limiter_rejections_total{reason="concurrency"}"#),
        2.0
    );
    assert_eq!(
        at(r#"rpc_server_limiter_rejections_total{reason="qps"}"#),
        3.0
    );
    assert_eq!(
        at(
            r#"rpc_client_requests_total{service="EchoService",method="echo",outcome="overloaded"}"#
        ),
        5.0
    );
    assert!(!text.contains("rpc_server_requests_total{"), "{text}");
}
