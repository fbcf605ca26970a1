//! RPC interop with Apache Thrift's Python library (`interop/rpc.py`), both ways, over
//! Framed and Buffered, Binary, Compact and JSON (`TJSONProtocol`), and THeader
//! (Apache's `THeaderProtocol`, over Framed and Buffered, Binary and Compact inside, with
//! and without zlib; Python's has no JSON inside):
//!
//! - Apache's generated Python client calls our `EchoService` server (the one
//!   `echo-server` runs): every method, the declared exception and the oneway one.
//! - Our generated client calls Apache's Python server the same way, and the
//!   `echo-client` program runs a short load against it.
//! - The multiplexed protocol, both ways: Apache's Python client, through
//!   `TMultiplexedProtocol`, calls `EchoService` and `SecondService` (idl/second.thrift)
//!   on one server of ours and on one connection, and our clients, bound to each
//!   service, call Apache's `TMultiplexedProcessor` serving both. Both servers also
//!   take unprefixed calls to `EchoService`, their default service.
//!
//! - The same over TLS, with Apache's test keys (`../shared/xtest/keys` beside the
//!   repository, or `$THRIFT_TEST_KEYS`): Apache's `TSSLSocket` client against our TLS
//!   server, and our TLS client against Apache's `TSSLServerSocket` server.
//!
//! Skipped with a message when `thrift`, the Python library or the keys are missing,
//! unless `CI` is set (then it fails). Everything talks to loopback and is bounded in
//! time.

#[path = "../../interop/harness.rs"]
mod harness;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use examples::echo::{
    Ano, EchoError, EchoServiceClient, EchoServiceEchoOrFailException, EchoServiceServer, Ids,
    MyTest, Request,
};
use examples::echo_service::{ECHO_ERROR_CODE, Echo};
use harness::{PythonServer, TempDir, rpc_py};
use thrift_wire::Utf8Bytes;
use volo_core::client::{ClientConfig, ClientError};
use volo_core::codec::{Framing, Protocol, theader};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{Multiplex, Server, ServerConfig, ServerError};
use volo_core::transport::TransportKind;
use volo_core::transport::tls::{ClientAuth, ClientTls, ServerTls};

#[allow(dead_code, missing_docs, unreachable_pub)]
mod second_gen {
    include!(concat!(env!("OUT_DIR"), "/second_gen.rs"));
}

use second_gen::second::{SecondService, SecondServiceClient, SecondServiceServer};
use volo_core::client::{ClientTimeouts, WireFormat};
use volo_core::config::TransportConfig;

/// Plain transports and protocols: the Python transport and protocol, and ours.
const COMBOS: [(&str, Framing, &str, Protocol); 6] = [
    ("framed", Framing::Framed, "binary", Protocol::Binary),
    ("framed", Framing::Framed, "compact", Protocol::Compact),
    ("framed", Framing::Framed, "json", Protocol::Json),
    ("buffered", Framing::Buffered, "binary", Protocol::Binary),
    ("buffered", Framing::Buffered, "compact", Protocol::Compact),
    ("buffered", Framing::Buffered, "json", Protocol::Json),
];

/// THeader: the Python transport it runs over, the subprotocol, zlib or not.
const HEADER_COMBOS: [(&str, &str, Protocol, bool); 8] = [
    ("buffered", "binary", Protocol::Binary, false),
    ("buffered", "compact", Protocol::Compact, false),
    ("buffered", "binary", Protocol::Binary, true),
    ("buffered", "compact", Protocol::Compact, true),
    ("framed", "binary", Protocol::Binary, false),
    ("framed", "compact", Protocol::Compact, false),
    ("framed", "binary", Protocol::Binary, true),
    ("framed", "compact", Protocol::Compact, true),
];

/// Whether the tools are there; a failure under CI, a skip otherwise.
fn tools() -> bool {
    present(harness::tools_present())
}

fn present(found: Result<(), String>) -> bool {
    match found {
        Ok(()) => true,
        Err(missing) if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) => {
            panic!("the RPC interop test needs {missing}; CI is set, so this is a failure")
        }
        Err(missing) => {
            eprintln!("skipped: the RPC interop test needs {missing}");
            false
        }
    }
}

/// Apache's test keys (`test/keys` of Apache Thrift), when the tools and they are there.
fn keys() -> Option<PathBuf> {
    if !tools() {
        return None;
    }
    let dir = std::env::var_os("THRIFT_TEST_KEYS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/xtest/keys"),
        PathBuf::from,
    );
    let found = if dir.join("server.crt").is_file() {
        Ok(())
    } else {
        Err(format!("Apache's test keys in {}", dir.display()))
    };
    present(found).then_some(dir)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs the Python client (`rpc.py client`, with `extra` options) against 127.0.0.1:`port`
/// over every combination; fails with its output if a run fails.
fn run_python_client(tmp: &TempDir, port: u16, extra: &[&str]) {
    for (transport, _, protocol, _) in COMBOS {
        let out = rpc_py(tmp)
            .args(["client", "--port", &port.to_string()])
            .args(["--transport", transport, "--protocol", protocol])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the Python client {extra:?} over {transport}/{protocol} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Binds `server` on a loopback port (TCP) and serves it on `rt`.
fn serve<D: volo_core::server::Dispatch>(
    rt: &tokio::runtime::Runtime,
    server: Server<D>,
) -> (u16, tokio::task::JoinHandle<std::io::Result<()>>) {
    let bound = rt
        .block_on(server.bind(&"127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let Address::Tcp(addr) = bound.local_addr().clone() else {
        panic!("a TCP address")
    };
    (addr.port(), rt.spawn(bound.serve()))
}

#[test]
fn the_apache_python_client_calls_our_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-server");
    let rt = runtime();
    let echo = Echo::default();
    let (port, serving) = serve(&rt, Server::new(EchoServiceServer::new(echo.clone())));
    run_python_client(&tmp, port, &[]);
    for (transport, sub, _, zlib) in HEADER_COMBOS {
        let mut args = vec!["--transport", transport, "--protocol", "header"];
        args.extend(["--header-protocol", sub]);
        if zlib {
            args.push("--zlib");
        }
        let out = rpc_py(&tmp)
            .args(["client", "--port", &port.to_string()])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the Python client with {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        echo.notified(),
        (COMBOS.len() + HEADER_COMBOS.len()) as u64,
        "one notify per run reached the handler"
    );
    serving.abort();
}

/// `SecondService` (idl/second.thrift): `echo` answers "second:" + text, `notify` and
/// the oneway `ping` count events, `notify` returns the count. Clones share the count.
#[derive(Debug, Clone, Default)]
struct Second {
    events: std::sync::Arc<std::sync::atomic::AtomicI32>,
}

impl SecondService for Second {
    async fn echo(
        &self,
        cx: &mut ServerContext,
        text: Utf8Bytes,
    ) -> Result<Utf8Bytes, ServerError<std::convert::Infallible>> {
        // Routed by its prefix (or isn): the handler sees the service and the bare name.
        assert_eq!(
            (&*cx.rpc.callee.service, cx.rpc.method.as_str()),
            ("SecondService", "echo")
        );
        Ok(Utf8Bytes::from(format!("second:{}", text.as_str())))
    }

    async fn notify(
        &self,
        _cx: &mut ServerContext,
        _event: Utf8Bytes,
    ) -> Result<i32, ServerError<std::convert::Infallible>> {
        Ok(self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1)
    }

    async fn ping(
        &self,
        _cx: &mut ServerContext,
        _event: Utf8Bytes,
    ) -> Result<(), ServerError<std::convert::Infallible>> {
        self.events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

/// Apache's Python client, through `TMultiplexedProtocol`, calls both services of one
/// multiplexed server of ours over one connection: every method of `EchoService` under
/// `EchoService:` (its oneway `notify` sent as a ONEWAY message, not answered), then
/// `SecondService`'s, then an unprefixed call that goes to the default service.
#[test]
fn the_apache_python_multiplexed_client_calls_our_multiplexed_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-mux-server");
    let rt = runtime();
    let echo = Echo::default();
    let second = Second::default();
    let services = Multiplex::new()
        .default_service(EchoServiceServer::new(echo.clone()))
        .service(SecondServiceServer::new(second.clone()));
    let (port, serving) = serve(&rt, Server::multiplexed(services));
    run_python_client(&tmp, port, &["--multiplexed"]);
    assert_eq!(
        echo.notified(),
        COMBOS.len() as u64,
        "one notify per run reached EchoService"
    );
    let events = second.events.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        events,
        3 * COMBOS.len() as i32,
        "a ping and two notifies per run reached SecondService"
    );
    serving.abort();
}

impl PythonServer {
    /// Where it listens.
    fn address(&self) -> Address {
        Address::Tcp(([127, 0, 0, 1], self.port).into())
    }
}

/// A client configuration for `framing` and `protocol`, the rest by default.
fn client_config(framing: Framing, protocol: Protocol) -> ClientConfig {
    ClientConfig {
        format: WireFormat {
            framing,
            protocol,
            ..Default::default()
        },
        ..ClientConfig::default()
    }
}

/// Runs `calls` on `rt`; fails naming `what` if they take more than a minute.
fn bounded(rt: &tokio::runtime::Runtime, what: &str, calls: impl std::future::Future<Output = ()>) {
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), calls)
            .await
            .unwrap_or_else(|_| panic!("{what}: out of time"));
    });
}

/// Every method of the service through our generated client.
async fn call_every_method(client: &EchoServiceClient, what: &str) {
    let s = |v: &str| Utf8Bytes::from(v.to_string());
    let r = client
        .echo(Request {
            action: s("hello"),
            msg: s("wörld"),
        })
        .await
        .unwrap_or_else(|e| panic!("{what}: echo: {e}"));
    assert_eq!(
        (r.action.as_str(), r.msg.as_str()),
        ("hello", "wörld"),
        "{what}"
    );
    let t = MyTest {
        num: 7,
        ano: Ano { num: -1 },
        nums: (-500..500).collect(),
    };
    assert_eq!(client.echo_test(t.clone()).await.unwrap(), t, "{what}");
    let ids = Ids {
        ids32: vec![1, -2, i32::MAX],
        ids64: vec![i64::MIN, i64::MAX],
        scores: vec![0.5, -1.25],
        blob: bytes::Bytes::from_static(b"\x00\xffbin"),
    };
    assert_eq!(client.echo_ids(ids.clone()).await.unwrap(), ids, "{what}");
    let ok = client
        .echo_or_fail(Request {
            action: s("pass"),
            msg: s("fine"),
        })
        .await
        .unwrap();
    assert_eq!(ok.msg.as_str(), "fine", "{what}");
    match client
        .echo_or_fail(Request {
            action: s("fail"),
            msg: s("on purpose"),
        })
        .await
    {
        Err(ClientError::User(EchoServiceEchoOrFailException::Err(EchoError {
            code,
            message,
        }))) => {
            assert_eq!(
                (code, message.as_str()),
                (ECHO_ERROR_CODE, "on purpose"),
                "{what}"
            );
        }
        other => panic!("{what}: echo_or_fail(fail): {other:?}"),
    }
    client.notify(s("event")).await.unwrap();
    let after = client
        .echo(Request {
            action: s("after"),
            msg: s("notify"),
        })
        .await
        .unwrap();
    assert_eq!(after.action.as_str(), "after", "{what}");
}

#[test]
fn our_client_calls_the_apache_python_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-client");
    let rt = runtime();
    for (transport, framing, protocol, proto) in COMBOS {
        let server = PythonServer::start(&tmp, transport, protocol, &[]);
        let what = format!("{transport}/{protocol}");
        bounded(&rt, &what, async {
            let client = EchoServiceClient::builder()
                .address(server.address())
                .config(client_config(framing, proto))
                .build()
                .unwrap();
            call_every_method(&client, &what).await;
        });
        // The echo-client program against the same server: a short load, no errors.
        let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
            .args(["--addr", &format!("127.0.0.1:{}", server.port)])
            .args(["--transport", transport, "--protocol", protocol])
            .args(["--concurrency", "2", "--duration", "0.5", "--size", "100"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        assert!(out.status.success(), "{what}: echo-client failed: {stdout}");
        assert!(
            last.starts_with("qps=") && last.contains(" p50_us=") && last.ends_with(" errors=0"),
            "{what}: echo-client's last line: {last:?}"
        );
        assert!(
            !last.starts_with("qps=0 "),
            "{what}: no call succeeded: {last:?}"
        );
    }
    // Apache's THeader server: our THeader client in each subprotocol, zlib or not,
    // bare (over its buffered transport) or in a Framed length (over its framed one).
    for (transport, sub, proto, zlib) in HEADER_COMBOS {
        let server = PythonServer::start(&tmp, transport, "header", &[]);
        let what = format!("header over {transport}/{sub} zlib={zlib}");
        let mut config = client_config(Framing::THeader, proto);
        config.format.theader = theader::Options {
            zlib,
            framed: transport == "framed",
        };
        call_python(&rt, &server, config, &what);
    }
    // ... which also answers plain framed and unframed clients in kind, as ours are
    // (Binary and Compact: Python's THeaderProtocol takes no JSON client).
    for (transport, framing, protocol, proto) in COMBOS {
        if proto == Protocol::Json {
            continue;
        }
        let server = PythonServer::start(&tmp, transport, "header", &[]);
        let what = format!("{transport}/{protocol} to a header server");
        call_python(&rt, &server, client_config(framing, proto), &what);
    }
}

/// Our generated client with `config` calls every method of the Python `server`.
fn call_python(
    rt: &tokio::runtime::Runtime,
    server: &PythonServer,
    config: ClientConfig,
    what: &str,
) {
    bounded(rt, what, async {
        let client = EchoServiceClient::builder()
            .address(server.address())
            .config(config)
            .build()
            .unwrap();
        call_every_method(&client, what).await;
    });
}

/// Our clients against Apache's `TMultiplexedProcessor` (EchoService registered as
/// `EchoService` and as the default, SecondService as `SecondService`): a client bound to
/// each service calls every method of it, the server answering under the bare names, and
/// a client that is not bound reaches the default service.
#[test]
fn our_bound_clients_call_the_apache_python_multiplexed_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-mux-client");
    let rt = runtime();
    for (transport, framing, protocol, proto) in COMBOS {
        let server = PythonServer::start(&tmp, transport, protocol, &["--multiplexed"]);
        let what = format!("{transport}/{protocol} multiplexed");
        bounded(&rt, &what, async {
            let (addr, config) = (server.address(), client_config(framing, proto));
            let echo = EchoServiceClient::builder()
                .address(addr.clone())
                .config(config.clone())
                .multiplexed_service("EchoService")
                .build()
                .unwrap();
            let second = SecondServiceClient::builder()
                .address(addr.clone())
                .config(config.clone())
                .multiplexed_service("SecondService")
                .build()
                .unwrap();
            let plain = EchoServiceClient::builder()
                .address(addr)
                .config(config)
                .build()
                .unwrap();
            call_every_method(&echo, &what).await;
            let s = |v: &str| Utf8Bytes::from(v.to_string());
            let got = second.echo(s("hi")).await.unwrap();
            assert_eq!(got.as_str(), "second:hi", "{what}");
            let before = second.notify(s("n1")).await.unwrap();
            second.ping(s("p")).await.unwrap();
            let after = second.notify(s("n2")).await.unwrap();
            assert_eq!(after - before, 2, "{what}: the ping arrived");
            let r = plain
                .echo(Request {
                    action: s("default"),
                    msg: s("service"),
                })
                .await
                .unwrap_or_else(|e| panic!("{what}: unprefixed echo: {e}"));
            assert_eq!(r.action.as_str(), "default", "{what}");
        });
    }
}

/// Apache's `TSSLSocket` client, set up as the suite's `TestClient.py` (trusting
/// `server.pem`, presenting the version 1 `client.crt`, checking the name
/// `localhost`), calls our TLS server, which presents the suite's `server.crt` (a CA
/// certificate, pinned by the client) and requires a client certificate trusted by
/// `client.crt` (pinned: webpki cannot read a version 1 certificate). On both server
/// transports.
#[test]
fn the_apache_python_tls_client_calls_our_tls_server() {
    let Some(keys) = keys() else {
        return;
    };
    let tmp = TempDir::new("rpc-interop-tls-server");
    let rt = runtime();
    let tls = ServerTls::builder(keys.join("server.crt"), keys.join("server.key"))
        .client_certs(keys.join("client.crt"), ClientAuth::Required)
        .build()
        .unwrap();
    let keys_dir = keys.to_string_lossy().into_owned();
    let extra = ["--ssl", "--host", "localhost", "--keys-dir", &keys_dir];
    for transport in [TransportKind::Netpoll, TransportKind::Tokio] {
        let config = ServerConfig {
            tls: Some(tls.clone()),
            transport: TransportConfig {
                kind: transport,
                ..Default::default()
            },
            ..ServerConfig::default()
        };
        let echo = Echo::default();
        let server = Server::new(EchoServiceServer::new(echo.clone())).config(config);
        let (port, serving) = serve(&rt, server);
        run_python_client(&tmp, port, &extra);
        assert_eq!(
            echo.notified(),
            COMBOS.len() as u64,
            "TLS on {transport:?}: one notify per run reached the handler"
        );
        serving.abort();
    }
}

/// Our TLS client calls Apache's `TSSLServerSocket` server (set up as the suite's
/// `TestServer.py`: `server.crt`, a client certificate required), by the name
/// `localhost`, trusting `CA.pem` (the server's own certificate, pinned). It presents
/// `client_v3.crt`, which the server is told to trust: thrift 0.25's server also
/// requires the client certificate to cover the client's IP address, which the
/// suite's `client.crt` does not (see `interop/rpc.py`). From both client transports.
#[test]
fn our_tls_client_calls_the_apache_python_tls_server() {
    let Some(keys) = keys() else {
        return;
    };
    let tmp = TempDir::new("rpc-interop-tls-client");
    let rt = runtime();
    let tls = ClientTls::builder(keys.join("CA.pem"))
        .client_cert(keys.join("client_v3.crt"), keys.join("client_v3.key"))
        .build()
        .unwrap();
    let keys_dir = keys.to_string_lossy().into_owned();
    let extra = [
        "--ssl",
        "--keys-dir",
        &keys_dir,
        "--client-ca",
        "client_v3.crt",
    ];
    for (transport, framing, protocol, proto) in COMBOS {
        let server = PythonServer::start(&tmp, transport, protocol, &extra);
        for transport_kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let what = format!("TLS {transport}/{protocol} from {transport_kind:?}");
            bounded(&rt, &what, async {
                let config = ClientConfig {
                    transport: TransportConfig {
                        kind: transport_kind,
                        ..Default::default()
                    },
                    tls: Some(tls.clone()),
                    timeouts: ClientTimeouts {
                        connect: Duration::from_secs(10),
                        ..Default::default()
                    },
                    ..client_config(framing, proto)
                };
                let client = EchoServiceClient::builder()
                    .address(format!("localhost:{}", server.port).parse().unwrap())
                    .config(config)
                    .build()
                    .unwrap();
                call_every_method(&client, &what).await;
            });
        }
    }
}
