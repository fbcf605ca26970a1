//! RPC interop with Apache Thrift's Python library (`interop/rpc.py`), both ways, over
//! Framed and Buffered, Binary and Compact, and THeader (Apache's `THeaderProtocol`, over
//! Framed and Buffered, Binary and Compact inside, with and without zlib):
//!
//! - Apache's generated Python client calls our `EchoService` server (the one
//!   `echo-server` runs): every method, the declared exception and the oneway one.
//! - Our generated client calls Apache's Python server the same way, and the
//!   `echo-client` program runs a short load against it.
//!
//! Skipped with a message when `thrift` or the Python library is missing, unless `CI` is
//! set (then it fails). Everything talks to 127.0.0.1 and is bounded in time.

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
use volo_core::codec::{Framing, Protocol, theader};
use volo_core::context::Address;
use volo_core::server::Server;

const COMBOS: [(&str, Framing, &str, Protocol); 4] = [
    ("framed", Framing::Framed, "binary", Protocol::Binary),
    ("framed", Framing::Framed, "compact", Protocol::Compact),
    ("buffered", Framing::Buffered, "binary", Protocol::Binary),
    ("buffered", Framing::Buffered, "compact", Protocol::Compact),
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

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../interop/rpc.py")
}

/// Whether the tools are there; a failure under CI, a skip otherwise.
fn tools() -> bool {
    match harness::tools_present() {
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

#[test]
fn the_apache_python_client_calls_our_server() {
    if !tools() {
        return;
    }
    let tmp = TempDir::new("rpc-interop-server");
    let rt = runtime();
    let echo = Echo::default();
    let bound = rt
        .block_on(
            Server::new(EchoServiceServer::new(echo.clone())).bind(&"127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let Address::Tcp(addr) = bound.local_addr().clone() else {
        panic!("a TCP address")
    };
    let serving = rt.spawn(bound.serve());
    let port = addr.port().to_string();
    let mut runs: Vec<Vec<&str>> = COMBOS
        .iter()
        .map(|&(transport, _, protocol, _)| vec!["--transport", transport, "--protocol", protocol])
        .collect();
    for (transport, sub, _, zlib) in HEADER_COMBOS {
        let mut args = vec!["--transport", transport, "--protocol", "header"];
        args.extend(["--header-protocol", sub]);
        if zlib {
            args.push("--zlib");
        }
        runs.push(args);
    }
    for args in &runs {
        let out = rpc_py(&tmp)
            .args(["client", "--port", &port])
            .args(args)
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
        runs.len() as u64,
        "one notify per run reached the handler"
    );
    serving.abort();
}

/// A Python server for one framing and protocol; stopped when dropped.
struct PythonServer {
    child: std::process::Child,
    port: u16,
}

impl PythonServer {
    fn start(tmp: &TempDir, transport: &str, protocol: &str) -> PythonServer {
        let mut child = rpc_py(tmp)
            .args(["server", "--transport", transport, "--protocol", protocol])
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
        let config = ClientConfig {
            framing,
            protocol: proto,
            ..ClientConfig::default()
        };
        call_python(&rt, server.port, config, &what);
        // The echo-client program against the same server: a short load, no errors.
        echo_client_load(server.port, transport, protocol, &what);
    }
    // Apache's THeader server: our THeader client in each subprotocol, zlib or not,
    // bare (over its buffered transport) or in a Framed length (over its framed one).
    for (transport, sub, proto, zlib) in HEADER_COMBOS {
        let server = PythonServer::start(&tmp, transport, "header");
        let what = format!("header over {transport}/{sub} zlib={zlib}");
        let config = ClientConfig {
            framing: Framing::THeader,
            protocol: proto,
            theader: theader::Options {
                zlib,
                framed: transport == "framed",
            },
            ..ClientConfig::default()
        };
        call_python(&rt, server.port, config, &what);
    }
    // ... which also answers plain framed and unframed clients in kind, as ours are.
    for (transport, framing, protocol, proto) in COMBOS {
        let server = PythonServer::start(&tmp, transport, "header");
        let what = format!("{transport}/{protocol} to a header server");
        let config = ClientConfig {
            framing,
            protocol: proto,
            ..ClientConfig::default()
        };
        call_python(&rt, server.port, config, &what);
    }
}

/// Our generated client with `config` calls every method of the Python server at
/// `port`.
fn call_python(rt: &tokio::runtime::Runtime, port: u16, config: ClientConfig, what: &str) {
    rt.block_on(async {
        let addr = Address::Tcp(([127, 0, 0, 1], port).into());
        let client = EchoServiceClient::builder()
            .address(addr)
            .config(config)
            .build()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(60), call_every_method(&client, what))
            .await
            .unwrap_or_else(|_| panic!("{what}: out of time"));
    });
}

/// The echo-client program against the Python server at `port`: a short load, no
/// errors.
fn echo_client_load(port: u16, transport: &str, protocol: &str, what: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args(["--addr", &format!("127.0.0.1:{port}")])
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
