//! The client against this crate's server, over TCP, in every framing and protocol.

use std::future::Future;
use std::time::Duration;

use thrift_wire::ApplicationExceptionKind;

use super::*;
use crate::client::{ClientTimeouts, ConnectionPool, WireFormat};
use crate::config::TransportConfig;
use crate::server::ServerConfig;
use crate::test_support::*;
use crate::transport::TransportKind;

/// Runs `f` with a server and a client configured by `tune`, bounded in time.
fn with_client<F, Fut>(tune: impl FnOnce(&mut ClientConfig), f: F)
where
    F: FnOnce(Client, Running) -> Fut,
    Fut: Future<Output = Running>,
{
    with_server_and_client(ServerConfig::default(), tune, f);
}

fn with_server_and_client<F, Fut>(
    server_config: ServerConfig,
    tune: impl FnOnce(&mut ClientConfig),
    f: F,
) where
    F: FnOnce(Client, Running) -> Fut,
    Fut: Future<Output = Running>,
{
    runtime().block_on(async {
        let server = start(server_config).await;
        let mut config = ClientConfig::default();
        tune(&mut config);
        let client = build(Address::Tcp(server.addr), config);
        let mut server = tokio::time::timeout(Duration::from_secs(60), f(client, server))
            .await
            .expect("the test ran out of time");
        let _ = server.stop.take().map(|s| s.send(()));
        tokio::time::timeout(Duration::from_secs(20), &mut server.done)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    });
}

/// A client of the test service at `addr`.
fn build(addr: Address, config: ClientConfig) -> Client {
    Client::builder("Test")
        .address(addr)
        .config(config)
        .build()
        .unwrap()
}

async fn echo<S>(client: &Client<S>, cx: &mut ClientContext, t: &str) -> Result<Text, Error>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>,
{
    client.call::<Text, Text>(cx, "echo", text(1, t)).await
}

/// A client of `server` with `config` that does not tell the server its calls'
/// deadlines (a layer around each attempt takes the deadline out of the context, the
/// call's timeout still bounding the call): a call the server holds (`wait`) then
/// ends only when the test lets it, not at the deadline plus the server's grace, which
/// a client held up for that long would see before its own timeout.
fn with_no_deadline(
    server: &Running,
    config: ClientConfig,
) -> Client<
    impl Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + use<>,
> {
    Client::builder("Test")
        .address(Address::Tcp(server.addr))
        .config(config)
        .layer_inner(crate::service::layer_fn(NoDeadline))
        .build()
        .unwrap()
}

/// Sends its attempts without their deadline (see [`with_no_deadline`]).
struct NoDeadline<S>(S);

impl<S> Service<ClientContext, ClientRequest> for NoDeadline<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let deadline = cx.rpc.deadline.take();
        let out = self.0.call(cx, req).await;
        cx.rpc.deadline = deadline;
        out
    }
}

/// `n` echo calls at once, of "0" to "n - 1", each on a task of its own.
fn spawn_echoes(client: &Client, n: usize) -> Vec<tokio::task::JoinHandle<Result<Text, Error>>> {
    (0..n)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(
                async move { echo(&client, &mut ClientContext::new(), &i.to_string()).await },
            )
        })
        .collect()
}

/// Calls `method`, which must fail with an application exception of `kind`; returns
/// its message.
async fn application_exception(
    client: &Client,
    cx: &mut ClientContext,
    method: &'static str,
    kind: ApplicationExceptionKind,
) -> String {
    match client.call::<Text, Text>(cx, method, text(1, "x")).await {
        Err(e) if e.kind() == ErrorKind::Application => {
            let e = e.application_exception().unwrap();
            assert_eq!(e.kind, kind, "{method}");
            e.message.to_string()
        }
        other => panic!("{method}: {other:?}"),
    }
}

/// Three oneway calls, then a call behind them: the server has run all three.
async fn three_oneways_arrive(client: &Client, server: &Running) {
    let mut cx = ClientContext::new();
    for _ in 0..3 {
        client
            .oneway(&mut cx, "notify", text(1, "e"))
            .await
            .unwrap();
    }
    echo(client, &mut cx, "sync").await.unwrap();
    assert_eq!(server.notified.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn calls_work_in_every_framing_and_protocol() {
    for framing in [
        Framing::TTHeader,
        Framing::THeader,
        Framing::Framed,
        Framing::Buffered,
    ] {
        for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
            if (framing, protocol) == (Framing::TTHeader, Protocol::Json) {
                continue; // no protocol id for it: see `json_is_refused_over_ttheader`
            }
            with_client(
                |c| {
                    c.format.framing = framing;
                    c.format.protocol = protocol;
                },
                |client, server| async move {
                    for i in 0..5 {
                        let got = echo(&client, &mut ClientContext::new(), &format!("m{i}"))
                            .await
                            .unwrap_or_else(|e| panic!("{framing:?}/{protocol:?}: {e}"));
                        assert_eq!(got, text(0, &format!("m{i}")), "{framing:?}/{protocol:?}");
                    }
                    // Sequential calls share one connection.
                    assert_eq!(server.peers.lock().unwrap().len(), 1);
                    server
                },
            );
        }
    }
}

/// A call whose method name comes at run time and whose arguments were encoded
/// beforehand goes down the same stack, and gives back the result struct's bytes as
/// they came: those a typed call of the same arguments decodes. In each protocol, the
/// bytes being that protocol's.
#[test]
fn encoded_arguments_under_a_runtime_name_get_the_result_bytes() {
    use thrift_wire::{Binary, Codec, Compact, Json, LinkBuffer};

    fn encode<P: thrift_wire::Protocol>(t: &Text) -> bytes::Bytes {
        let mut buf = LinkBuffer::new();
        let n = Codec::<P>::new().encode(t, &mut buf).unwrap();
        buf.next(n)
    }
    for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
        with_client(
            |c| {
                c.format.protocol = protocol;
                c.format.framing = Framing::Framed; // TTHeader carries no JSON
            },
            |client, server| async move {
                let args = text(1, "raw");
                let encoded = match protocol {
                    Protocol::Binary => encode::<Binary>(&args),
                    Protocol::Compact => encode::<Compact>(&args),
                    Protocol::Json => encode::<Json>(&args),
                };
                let name = MethodName::from(String::from("echo"));
                let req = ClientRequest::new(name, crate::codec::Encoded(encoded));
                let mut cx = ClientContext::new();
                let reply = client.send(&mut cx, req).await.unwrap();
                assert_eq!(cx.rpc.method.as_str(), "echo");
                assert_eq!(reply.protocol(), protocol);
                let typed = client
                    .call::<Text, Text>(&mut ClientContext::new(), "echo", args)
                    .await
                    .unwrap();
                let expected = match protocol {
                    Protocol::Binary => encode::<Binary>(&typed),
                    Protocol::Compact => encode::<Compact>(&typed),
                    Protocol::Json => encode::<Json>(&typed),
                };
                assert_eq!(reply.encoded(), &expected, "{protocol:?}");
                server
            },
        );
    }
}

/// Plain tokio sockets on either side or both, against netpoll-rs on the other.
#[test]
fn the_tokio_transport_works_on_either_side() {
    use crate::transport::TransportKind::{Netpoll, Tokio};
    for (server_side, client_side) in [(Tokio, Tokio), (Tokio, Netpoll), (Netpoll, Tokio)] {
        for framing in [
            Framing::TTHeader,
            Framing::THeader,
            Framing::Framed,
            Framing::Buffered,
        ] {
            let server_config = ServerConfig {
                transport: TransportConfig {
                    kind: server_side,
                    ..Default::default()
                },
                ..ServerConfig::default()
            };
            with_server_and_client(
                server_config,
                |c| {
                    c.transport.kind = client_side;
                    c.format.framing = framing;
                },
                |client, server| async move {
                    let what =
                        format!("{server_side:?} server, {client_side:?} client, {framing:?}");
                    for i in 0..3 {
                        let mut cx = ClientContext::new();
                        cx.metainfo.set_persistent("logid", "t");
                        let got = echo(&client, &mut cx, &format!("m{i}"))
                            .await
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(got, text(0, &format!("m{i}")), "{what}");
                    }
                    let big = "b".repeat(300_000);
                    let got = echo(&client, &mut ClientContext::new(), &big)
                        .await
                        .unwrap();
                    assert_eq!(got, text(0, &big), "{what}: a large frame");
                    server
                },
            );
        }
    }
}

/// THeader with zlib, bare and inside a Framed length: answered in kind (the reply
/// inflated), metainfo and plain headers both ways.
#[test]
fn theader_requests_with_zlib_and_headers_are_answered() {
    for framed in [false, true] {
        with_client(
            |c| {
                c.format.framing = Framing::THeader;
                c.format.protocol = Protocol::Compact;
                c.format.theader = crate::codec::theader::Options { zlib: true, framed };
            },
            |client, server| async move {
                let mut cx = ClientContext::new();
                cx.metainfo.set_persistent("logid", "z");
                cx.metainfo.set_header("echo-me", "h");
                let big = "z".repeat(200_000);
                assert_eq!(echo(&client, &mut cx, &big).await.unwrap(), text(0, &big));
                assert_eq!(cx.metainfo.backward("seen"), Some("z"), "framed={framed}");
                assert_eq!(cx.metainfo.header("echoed"), Some("h"), "framed={framed}");
                assert_eq!(
                    cx.metainfo.header("RPC_BACKWARD_seen"),
                    Some("z"),
                    "every header of the reply, as received"
                );
                server
            },
        );
    }
}

#[test]
fn ttheader_framed_requests_are_answered() {
    with_client(
        |c| c.format.ttheader_framed = true,
        |client, server| async move {
            let mut cx = ClientContext::new();
            cx.metainfo.set_persistent("logid", "f");
            assert_eq!(echo(&client, &mut cx, "tf").await.unwrap(), text(0, "tf"));
            assert_eq!(cx.metainfo.backward("seen"), Some("f"));
            server
        },
    );
}

#[test]
fn metainfo_goes_out_and_backward_values_come_back() {
    with_client(
        |_| {},
        |client, server| async move {
            let mut cx = ClientContext::new();
            cx.metainfo.set_persistent("logid", "abc");
            echo(&client, &mut cx, "x").await.unwrap();
            assert_eq!(cx.metainfo.backward("seen"), Some("abc"));
            server
        },
    );
}

/// The client reads a reply's header within its `wire.header` limit: the test
/// service sends the caller's logid back, so a long one makes a reply header over it,
/// which fails the call as a bad reply.
#[test]
fn a_reply_header_over_the_clients_limit_is_a_protocol_error() {
    with_client(
        |c| c.wire.header.max_header = 1024,
        |client, server| async move {
            let mut cx = ClientContext::new();
            cx.metainfo.set_persistent("logid", "a".repeat(2048));
            let e = echo(&client, &mut cx, "x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
            let mut cx = ClientContext::new();
            cx.metainfo.set_persistent("logid", "a".repeat(100));
            echo(&client, &mut cx, "x").await.unwrap();
            server
        },
    );
}

#[test]
fn exceptions_timeouts_and_oneways() {
    with_client(
        |_| {},
        |client, server| async move {
            let mut cx = ClientContext::new();
            let internal = ApplicationExceptionKind::InternalError;
            application_exception(&client, &mut cx, "fail", internal).await;
            let unknown = ApplicationExceptionKind::UnknownMethod;
            application_exception(&client, &mut cx, "missing", unknown).await;
            let mut quick = ClientContext {
                timeout: Some(Duration::from_millis(50)),
                ..ClientContext::new()
            };
            // `wait` answers only once the test lets it (and the server is not told
            // the deadline, after which it would answer on its own): the timeout
            // surely comes first.
            let held = with_no_deadline(&server, ClientConfig::default());
            match held
                .call::<Text, Text>(&mut quick, "wait", text(1, "x"))
                .await
            {
                Err(e) if e.is_timeout() => {
                    assert!(e.to_string().contains("50ms"), "{e}");
                }
                other => panic!("{other:?}"),
            }
            // Its reply comes late, on the connection the call was on.
            server.gate.add_permits(1);
            // The timed-out call's connection was closed, not reused: the next call
            // gets its own reply, not the late one.
            assert_eq!(
                echo(&held, &mut cx, "after").await.unwrap(),
                text(0, "after")
            );
            three_oneways_arrive(&client, &server).await;
            server
        },
    );
}

/// JSON over Framed and Buffered: exceptions come back as exceptions, oneways get no
/// reply (the call after them gets its own), and a large text with characters JSON
/// escapes comes back whole.
#[test]
fn json_exceptions_oneways_and_escapes() {
    for framing in [Framing::Framed, Framing::Buffered] {
        with_client(
            |c| {
                c.format.framing = framing;
                c.format.protocol = Protocol::Json;
            },
            |client, server| async move {
                let mut cx = ClientContext::new();
                let unknown = ApplicationExceptionKind::UnknownMethod;
                assert_eq!(
                    application_exception(&client, &mut cx, "missing", unknown).await,
                    "unknown method missing",
                    "{framing:?}"
                );
                let escapes = "\"q\" \\ ]} \n\t\u{1} é ".repeat(10_000);
                assert_eq!(
                    echo(&client, &mut cx, &escapes).await.unwrap(),
                    text(0, &escapes),
                    "{framing:?}"
                );
                three_oneways_arrive(&client, &server).await;
                server
            },
        );
    }
}

/// Kitex's TTHeader has no protocol id for JSON: a client configured with both is
/// refused when it is made, with an error that says why.
#[test]
fn json_is_refused_over_ttheader() {
    let err = refused(ClientConfig {
        format: WireFormat {
            framing: Framing::TTHeader,
            protocol: Protocol::Json,
            ..Default::default()
        },
        ..ClientConfig::default()
    });
    assert!(
        err.to_string()
            .contains("TTHeader has no protocol id for Json"),
        "{err}"
    );
}

/// The error of building a client with `config`, which must be `InvalidInput`.
fn refused(config: ClientConfig) -> std::io::Error {
    runtime().block_on(async {
        let err = Client::builder("Test")
            .address("127.0.0.1:1".parse().unwrap())
            .config(config)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        err
    })
}

#[test]
fn concurrent_calls_open_at_most_the_cap() {
    with_client(
        |c| c.pool.max_per_instance = 3,
        |client, server| async move {
            let calls: Vec<_> = (0..12)
                .map(|i| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        client
                            .call::<Text, Text>(
                                &mut ClientContext::new(),
                                "slow",
                                text(1, &i.to_string()),
                            )
                            .await
                    })
                })
                .collect();
            for (i, call) in calls.into_iter().enumerate() {
                assert_eq!(call.await.unwrap().unwrap(), text(0, &i.to_string()));
            }
            let peers = server.peers.lock().unwrap().len();
            assert!(
                (1..=3).contains(&peers),
                "{peers} connections for a cap of 3"
            );
            server
        },
    );
}

#[test]
fn a_connect_to_nothing_is_a_connect_error() {
    runtime().block_on(async {
        // A port that was free a moment ago.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let client = build(Address::Tcp(addr), ClientConfig::default());
        match echo(&client, &mut ClientContext::new(), "x").await {
            Err(e) if e.kind() == ErrorKind::Connect => {}
            other => panic!("{other:?}"),
        }
    });
}

/// Two servers and a closed port, for discovery and balancing.
fn with_two_servers<F, Fut>(f: F)
where
    F: FnOnce(Address, Address, Address, [Running; 2]) -> Fut,
    Fut: Future<Output = [Running; 2]>,
{
    runtime().block_on(async {
        let a = start(ServerConfig::default()).await;
        let b = start(ServerConfig::default()).await;
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let (aa, ba) = (Address::Tcp(a.addr), Address::Tcp(b.addr));
        let servers = tokio::time::timeout(
            Duration::from_secs(60),
            f(aa, ba, Address::Tcp(dead), [a, b]),
        )
        .await
        .expect("the test ran out of time");
        for mut s in servers {
            let _ = s.stop.take().map(|t| t.send(()));
            let _ = tokio::time::timeout(Duration::from_secs(20), &mut s.done).await;
        }
    });
}

fn calls_seen(s: &Running) -> usize {
    s.peers.lock().unwrap().len()
}

/// An instance discovery no longer lists loses its pool (and its idle connections);
/// listed again, it gets a new one.
#[test]
fn the_pools_of_removed_instances_are_dropped() {
    with_two_servers(|a, b, _, servers| async move {
        let list = Arc::new(DiscoverList::new(vec![
            Instance::new(a.clone()),
            Instance::new(b.clone()),
        ]));
        let transport = Transport::new(ClientConfig::default()).unwrap();
        transport.follow(list.changes());
        let client = Client::builder("Test")
            .discover(Arc::clone(&list))
            .load_balance(RoundRobin::new())
            .build_on(transport.clone())
            .unwrap();
        for i in 0..4 {
            echo(&client, &mut ClientContext::new(), &i.to_string())
                .await
                .unwrap();
        }
        let mut pooled = transport.pooled();
        pooled.sort_by_key(ToString::to_string);
        let mut both = vec![a.clone(), b.clone()];
        both.sort_by_key(ToString::to_string);
        assert_eq!(pooled, both);

        list.set(vec![Instance::new(b.clone())]);
        while transport.pooled().len() != 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(transport.pooled(), std::slice::from_ref(&b));
        echo(&client, &mut ClientContext::new(), "b").await.unwrap();
        assert_eq!(
            transport.pooled(),
            std::slice::from_ref(&b),
            "calls go to b alone"
        );

        list.set(vec![Instance::new(a.clone()), Instance::new(b.clone())]);
        for i in 0..4 {
            echo(&client, &mut ClientContext::new(), &i.to_string())
                .await
                .unwrap();
        }
        assert_eq!(transport.pooled().len(), 2, "a listed again, pooled again");
        servers
    });
}

#[test]
fn weighted_random_spreads_calls_and_consistent_hash_pins_them() {
    with_two_servers(|a, b, _, servers| async move {
        let both = StaticDiscover::new([Instance::new(a.clone()), Instance::new(b.clone())]);
        let client = Client::builder("Test")
            .discover(both.clone())
            .load_balance(WeightedRandom::with_seed(3))
            .build()
            .unwrap();
        for i in 0..40 {
            echo(&client, &mut ClientContext::new(), &i.to_string())
                .await
                .unwrap();
        }
        assert!(
            calls_seen(&servers[0]) > 0 && calls_seen(&servers[1]) > 0,
            "weighted random used both instances"
        );
        let pinned = Client::builder("Test")
            .discover(both)
            .load_balance(ConsistentHash::default())
            .config(ClientConfig {
                pool: ConnectionPool {
                    max_per_instance: 1,
                    ..Default::default()
                },
                ..ClientConfig::default()
            })
            .build()
            .unwrap();
        let before = [calls_seen(&servers[0]), calls_seen(&servers[1])];
        for i in 0..20 {
            let mut cx = ClientContext {
                hash_key: Some(42),
                ..ClientContext::new()
            };
            echo(&pinned, &mut cx, &i.to_string()).await.unwrap();
        }
        let after = [calls_seen(&servers[0]), calls_seen(&servers[1])];
        // One connection, to one instance: exactly one server saw one new peer.
        assert_eq!(
            (after[0] - before[0]) + (after[1] - before[1]),
            1,
            "{before:?} -> {after:?}"
        );
        servers
    });
}

#[test]
fn a_failed_connect_is_retried_on_another_instance() {
    with_two_servers(|a, _, dead, servers| async move {
        let list = StaticDiscover::new([Instance::new(dead.clone()), Instance::new(a)]);
        let retrying = Client::builder("Test")
            .discover(list.clone())
            .load_balance(WeightedRandom::with_seed(9))
            .build()
            .unwrap();
        for i in 0..20 {
            echo(&retrying, &mut ClientContext::new(), &i.to_string())
                .await
                .unwrap_or_else(|e| panic!("call {i}: {e}"));
        }
        let no_retries = Client::builder("Test")
            .discover(list)
            .load_balance(WeightedRandom::with_seed(9))
            .retry(RetryPolicy::default().max_retries(0))
            .build()
            .unwrap();
        let mut connect_errors = 0;
        for i in 0..20 {
            match echo(&no_retries, &mut ClientContext::new(), &i.to_string()).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Connect => {
                    assert_eq!(e.instance(), Some(&dead));
                    connect_errors += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(
            connect_errors > 0,
            "the dead instance was picked without a retry"
        );
        servers
    });
}

/// Mux calls over one connection on either transport: many calls at once share it,
/// a slow call does not hold back quick ones sent after it, every call gets its own
/// reply, and oneway calls go out on it too.
#[test]
fn mux_calls_share_one_connection_and_overtake_a_slow_one() {
    for transport in [TransportKind::Netpoll, TransportKind::Tokio] {
        with_client(
            |c| {
                c.pool.mux = true;
                c.pool.mux_per_instance = 1;
                c.transport.kind = transport;
            },
            |client, server| async move {
                // A call that answers only once the test lets it, and quick calls
                // sent while it runs: they are all answered before it is let go.
                let slow = {
                    let client = client.clone();
                    tokio::spawn(async move {
                        client
                            .call::<Text, Text>(&mut ClientContext::new(), "wait", text(1, "s"))
                            .await
                    })
                };
                server.gauge.reaches(1).await;
                let quick: Vec<_> = (0..40)
                    .map(|i| {
                        let client = client.clone();
                        tokio::spawn(async move {
                            echo(&client, &mut ClientContext::new(), &i.to_string()).await
                        })
                    })
                    .collect();
                for (i, call) in quick.into_iter().enumerate() {
                    let r = tokio::time::timeout(Duration::from_secs(20), call)
                        .await
                        .unwrap_or_else(|_| {
                            panic!("{transport:?}: the quick calls wait behind the slow one")
                        });
                    assert_eq!(
                        r.unwrap().unwrap(),
                        text(0, &i.to_string()),
                        "{transport:?}"
                    );
                }
                assert!(!slow.is_finished(), "{transport:?}: the slow call ended");
                server.gate.add_permits(1);
                assert_eq!(slow.await.unwrap().unwrap(), text(0, "s"));
                three_oneways_arrive(&client, &server).await;
                assert_eq!(server.peers.lock().unwrap().len(), 1, "{transport:?}");
                server
            },
        );
    }
}

/// A mux call that times out gives up its sequence id; its late reply is
/// discarded, and the connection goes on carrying calls (it is not closed).
#[test]
fn a_timed_out_mux_call_leaves_the_connection_in_use() {
    with_client(
        |_| {},
        |_, server| async move {
            let mut quick = ClientContext {
                timeout: Some(Duration::from_millis(50)),
                ..ClientContext::new()
            };
            // As above: `wait` answers only once the test lets it.
            let config = ClientConfig {
                pool: ConnectionPool {
                    mux: true,
                    mux_per_instance: 1,
                    ..Default::default()
                },
                ..ClientConfig::default()
            };
            let client = with_no_deadline(&server, config);
            match client
                .call::<Text, Text>(&mut quick, "wait", text(1, "x"))
                .await
            {
                Err(e) if e.is_timeout() => {}
                other => panic!("{other:?}"),
            }
            // The late reply is sent now; the calls below go across its arrival.
            server.gate.add_permits(1);
            server.gauge.reaches(0).await;
            let mut cx = ClientContext::new();
            for i in 0..40 {
                let t = format!("after {i}");
                assert_eq!(echo(&client, &mut cx, &t).await.unwrap(), text(0, &t));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(server.peers.lock().unwrap().len(), 1);
            server
        },
    );
}

#[test]
fn mux_needs_ttheader_framing() {
    refused(ClientConfig {
        pool: ConnectionPool {
            mux: true,
            ..Default::default()
        },
        format: WireFormat {
            framing: Framing::Framed,
            ..Default::default()
        },
        ..ClientConfig::default()
    });
}

/// A server that reads a request and hangs up: every call waiting on the connection
/// fails at once with an I/O error (not at its timeout), and the next call opens a new
/// connection.
#[test]
fn a_lost_mux_connection_fails_its_calls_and_is_replaced() {
    runtime().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // The first connection carries the five calls, the second the call after:
        // each is hung up once its calls' frames are all in.
        let accepted = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut n = 0;
            for frames in [5, 1] {
                let (mut s, _) = listener.accept().await.unwrap();
                for _ in 0..frames {
                    let mut len = [0u8; 4];
                    s.read_exact(&mut len).await.unwrap();
                    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                    s.read_exact(&mut frame).await.unwrap();
                }
                n += 1;
            }
            n
        });
        let config = ClientConfig {
            pool: ConnectionPool {
                mux: true,
                mux_per_instance: 1,
                ..Default::default()
            },
            timeouts: ClientTimeouts {
                rpc: Some(Duration::from_secs(30)),
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = build(Address::Tcp(addr), config);
        let started = std::time::Instant::now();
        let calls = spawn_echoes(&client, 5);
        for call in calls {
            match call.await.unwrap() {
                Err(e) if e.kind() == ErrorKind::Io => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the calls waited for their timeout"
        );
        match echo(&client, &mut ClientContext::new(), "again").await {
            Err(e) if e.kind() == ErrorKind::Io => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(10), accepted)
                .await
                .unwrap()
                .unwrap(),
            2,
            "the second call opened a second connection"
        );
    });
}

/// `shm:` addresses: a server and clients over shared-memory sessions, in every
/// framing and protocol, ping-pong and mux, with messages small and larger
/// than one slice of shared memory; all of one client's connections are streams of one
/// session, and the listener's socket file is gone after the server stops.
#[test]
fn calls_go_over_shared_memory() {
    let dir = std::env::temp_dir().join(format!("volo-core-shm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("echo.sock");
    let at = Address::Shm(path.as_path().into());
    runtime().block_on(async {
        let mut server = start_on(ServerConfig::default(), &at).await;
        assert_eq!(server.address, at);
        let big = "b".repeat(3 << 20);
        for framing in [
            Framing::TTHeader,
            Framing::THeader,
            Framing::Framed,
            Framing::Buffered,
        ] {
            for protocol in [Protocol::Binary, Protocol::Compact] {
                let config = ClientConfig {
                    format: WireFormat {
                        framing,
                        protocol,
                        ..Default::default()
                    },
                    ..ClientConfig::default()
                };
                let client = build(at.clone(), config);
                let mut cx = ClientContext::new();
                for t in ["one", "two", big.as_str()] {
                    let got =
                        tokio::time::timeout(Duration::from_secs(20), echo(&client, &mut cx, t))
                            .await
                            .expect("in time")
                            .unwrap();
                    assert_eq!(got, text(0, t), "{framing:?}/{protocol:?}");
                }
            }
        }
        let config = ClientConfig {
            pool: ConnectionPool {
                mux: true,
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = build(at.clone(), config);
        let calls = spawn_echoes(&client, 50);
        for (i, call) in calls.into_iter().enumerate() {
            let got = tokio::time::timeout(Duration::from_secs(20), call)
                .await
                .expect("in time")
                .unwrap()
                .unwrap();
            assert_eq!(got, text(0, &i.to_string()));
        }
        let peers = server.peers.lock().unwrap().clone();
        assert_eq!(
            peers.into_iter().collect::<Vec<_>>(),
            [format!("shm:{}", path.display())]
        );
        let _ = server.stop.take().map(|s| s.send(()));
        tokio::time::timeout(Duration::from_secs(20), &mut server.done)
            .await
            .expect("the server stopped")
            .unwrap()
            .unwrap();
    });
    assert!(!path.exists(), "the socket file is removed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An attempt whose future carries 4 KiB across its await, as a transport's does.
fn bulky()
-> impl Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync {
    crate::service::service_fn(|_cx: &mut ClientContext, _req: ClientRequest| async {
        let ballast = [7u8; 4096];
        tokio::task::yield_now().await;
        std::hint::black_box(&ballast);
        Ok(ClientResponse::none())
    })
}

/// With backups off (the default) a call's future through the whole default stack is
/// one attempt's future and a little per layer: the backup race, which holds two
/// attempts, is boxed and made only when a backup may be sent. Inline, it made every
/// call's future three times the size of an attempt's (11.5 KB over the transport).
#[test]
fn the_default_stack_future_holds_one_attempt_not_two() {
    let addr = Address::Tcp(([127, 0, 0, 1], 1).into());
    let client = Client::builder("S")
        .address(addr)
        .build_on(bulky())
        .expect("a client");
    let (mut a, mut b) = (ClientContext::new(), ClientContext::new());
    let attempt = std::mem::size_of_val(&bulky().call(&mut a, super::mock::request("m")));
    let whole = std::mem::size_of_val(&client.stack().call(&mut b, super::mock::request("m")));
    assert!(attempt >= 4096, "the ballast is in the attempt's future");
    assert!(
        whole < attempt + 2048,
        "{whole} bytes through the stack for a {attempt}-byte attempt"
    );
}

mod multiplexed;
mod streams;

/// A peer's exception reply is told apart by the refusal its TTHeader names
/// ([`HEADER_KEY`](crate::refusal::HEADER_KEY)) before its message, which decides only
/// when the header names nothing: a raw TTHeader peer answers each call with a scripted
/// header value and message.
#[test]
fn a_refusal_is_told_by_the_reply_header_before_its_message() {
    use crate::codec::ttheader::{Header, HeaderLimits};
    use crate::refusal::OVERLOAD_PREFIX;
    use bytes::Bytes;
    use thrift_wire::{ApplicationException, Binary, Decoder, MessageHeader, MessageType};
    let prefixed = format!("{OVERLOAD_PREFIX}busy");
    let script: Vec<(Option<&'static str>, String, ErrorKind)> = vec![
        (Some("overloaded"), "busy".into(), ErrorKind::Overloaded),
        (None, "busy".into(), ErrorKind::Application),
        (Some("closing"), prefixed.clone(), ErrorKind::Closing),
        (Some("deadline"), "late".into(), ErrorKind::Timeout),
        (Some("unheard of"), prefixed.clone(), ErrorKind::Application),
        (None, prefixed, ErrorKind::Overloaded),
    ];
    runtime().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let replies: Vec<_> = script.iter().map(|(h, m, _)| (*h, m.clone())).collect();
        let peer = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = listener.accept().await.unwrap();
            for (said, message) in replies {
                let mut len = [0u8; 4];
                s.read_exact(&mut len).await.unwrap();
                let mut frame = len.to_vec();
                frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
                s.read_exact(&mut frame[4..]).await.unwrap();
                let (asked, payload) =
                    Header::decode(&Bytes::from(frame), &HeaderLimits::default()).unwrap();
                let call = thrift_wire::Codec::<Binary>::new()
                    .decoder(payload)
                    .unwrap()
                    .read_message_begin()
                    .unwrap();
                let mut h = Header::new(asked.seq_id, asked.protocol);
                if let Some(said) = said {
                    h.str_kv
                        .push((crate::refusal::HEADER_KEY.into(), said.into()));
                }
                let reply = MessageHeader {
                    name: call.name,
                    ty: MessageType::Exception,
                    seq_id: call.seq_id,
                };
                let ex =
                    ApplicationException::new(ApplicationExceptionKind::InternalError, message);
                let mut out = thrift_wire::LinkBuffer::new();
                crate::codec::write_message::<Binary, _>(
                    &mut out,
                    Framing::TTHeader,
                    Some(&h),
                    &reply,
                    &ex,
                    usize::MAX,
                )
                .unwrap()
                .unwrap();
                let n = out.len();
                s.write_all(&out.next(n)).await.unwrap();
            }
        });
        let client = Client::builder("Test")
            .address(Address::Tcp(addr))
            .config(ClientConfig {
                format: WireFormat {
                    framing: Framing::TTHeader,
                    ..Default::default()
                },
                ..ClientConfig::default()
            })
            .retry(RetryPolicy::new().max_retries(0))
            .build()
            .unwrap();
        for (said, message, kind) in script {
            let err = echo(&client, &mut ClientContext::new(), "x")
                .await
                .unwrap_err();
            assert_eq!(
                err.kind(),
                kind,
                "header {said:?}, message {message:?}: {err}"
            );
            assert_eq!(
                err.application_exception().map(|ex| ex.message.to_string()),
                Some(message)
            );
        }
        tokio::time::timeout(Duration::from_secs(20), peer)
            .await
            .unwrap()
            .unwrap();
    });
}
