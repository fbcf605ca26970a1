//! RPC interop with Apache Thrift's Python library (`interop/rpc.py`), both ways, over
//! Framed and Buffered, Binary and Compact:
//!
//! - Apache's generated Python client calls our `EchoService` server (the one
//!   `echo-server` runs): every method, the declared exception and the oneway one.
//! - Our generated client calls Apache's Python server the same way, and the
//!   `echo-client` program runs a short load against it.
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

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use examples::echo::{
    Ano, EchoError, EchoServiceClient, EchoServiceEchoOrFailException, EchoServiceServer, Ids,
    MyTest, Request,
};
use examples::echo_service::{ECHO_ERROR_CODE, Echo};
use harness::TempDir;
use thrift_codec::Utf8Bytes;
use volo_core::client::{ClientConfig, ClientError};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;
use volo_core::server::{Server, ServerConfig};
use volo_core::transport::TransportKind;
use volo_core::transport::tls::{ClientAuth, ClientTls, ServerTls};

const COMBOS: [(&str, Framing, &str, Protocol); 4] = [
    ("framed", Framing::Framed, "binary", Protocol::Binary),
    ("framed", Framing::Framed, "compact", Protocol::Compact),
    ("buffered", Framing::Buffered, "binary", Protocol::Binary),
    ("buffered", Framing::Buffered, "compact", Protocol::Compact),
];

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../interop/rpc.py")
}

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

fn rpc_py(tmp: &TempDir) -> Command {
    let mut cmd = Command::new(harness::python());
    cmd.arg(script())
        .arg("--gen-dir")
        .arg(tmp.0.join("gen-py"))
        .arg("--thrift")
        .arg(harness::thrift());
    cmd
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Our `EchoService` server with `config`, called by the Python client once per
/// framing and protocol, with `extra` arguments.
fn python_clients_call_our_server(
    rt: &tokio::runtime::Runtime,
    tmp: &TempDir,
    config: ServerConfig,
    extra: &[&std::ffi::OsStr],
) {
    let what = format!("{:?}, tls {}", config.transport, config.tls.is_some());
    let echo = Echo::default();
    let bound = rt
        .block_on(
            Server::new(EchoServiceServer::new(echo.clone()))
                .with_config(config)
                .bind(&"127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let Address::Tcp(addr) = bound.local_addr().clone() else {
        panic!("a TCP address")
    };
    let serving = rt.spawn(bound.serve());
    for (transport, _, protocol, _) in COMBOS {
        let out = rpc_py(tmp)
            .args(["client", "--port", &addr.port().to_string()])
            .args(["--transport", transport, "--protocol", protocol])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the Python client over {transport}/{protocol} to our server ({what}) failed \
             ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        echo.notified(),
        4,
        "{what}: one notify per run reached the handler"
    );
    serving.abort();
}

#[test]
fn the_apache_python_client_calls_our_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-server");
    python_clients_call_our_server(&runtime(), &tmp, ServerConfig::default(), &[]);
}

/// A Python server for one framing and protocol; stopped when dropped.
struct PythonServer {
    child: std::process::Child,
    port: u16,
}

impl PythonServer {
    fn start(tmp: &TempDir, transport: &str, protocol: &str) -> PythonServer {
        Self::start_with(tmp, transport, protocol, &[])
    }

    fn start_with(tmp: &TempDir, transport: &str, protocol: &str, extra: &[&str]) -> PythonServer {
        let mut child = rpc_py(tmp)
            .args(["server", "--transport", transport, "--protocol", protocol])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the Python server printed {line:?}, not its port"));
        PythonServer { child, port }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        // Closing its stdin ends it; kill in case it hangs.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

/// A client of `addr` with `config` makes every call, within a minute.
async fn call_with(addr: Address, config: ClientConfig, what: &str) {
    let client = EchoServiceClient::builder()
        .address(addr)
        .config(config)
        .build()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), call_every_method(&client, what))
        .await
        .unwrap_or_else(|_| panic!("{what}: out of time"));
}

#[test]
fn our_client_calls_the_apache_python_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-client");
    let rt = runtime();
    for (transport, framing, protocol, proto) in COMBOS {
        let server = PythonServer::start(&tmp, transport, protocol);
        let what = format!("{transport}/{protocol}");
        rt.block_on(async {
            let config = ClientConfig {
                framing,
                protocol: proto,
                ..ClientConfig::default()
            };
            let addr = Address::Tcp(([127, 0, 0, 1], server.port).into());
            call_with(addr, config, &what).await;
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
    let extra = ["--ssl", "--host", "localhost", "--keys-dir"].map(std::ffi::OsStr::new);
    let extra = [&extra[..], &[keys.as_os_str()]].concat();
    for transport in [TransportKind::Netpoll, TransportKind::Tokio] {
        let config = ServerConfig {
            tls: Some(tls.clone()),
            transport,
            ..ServerConfig::default()
        };
        python_clients_call_our_server(&rt, &tmp, config, &extra);
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
        let server = PythonServer::start_with(&tmp, transport, protocol, &extra);
        for transport_kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let what = format!("TLS {transport}/{protocol} from {transport_kind:?}");
            rt.block_on(async {
                let config = ClientConfig {
                    framing,
                    protocol: proto,
                    transport: transport_kind,
                    tls: Some(tls.clone()),
                    connect_timeout: Duration::from_secs(10),
                    ..ClientConfig::default()
                };
                let addr: Address = format!("localhost:{}", server.port).parse().unwrap();
                call_with(addr, config, &what).await;
            });
        }
    }
}
