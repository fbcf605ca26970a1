//! JSON generic calls against Apache Thrift's Python server of `idl/echo.thrift`
//! (`interop/rpc.py server`) and against our generated server: every method, over
//! Framed and Buffered, in Binary, Compact and Apache's JSON protocol, must give the
//! same JSON from both.
//!
//! And Apache's Python client (`interop/rpc.py client`, which checks every answer)
//! calls our generic server of the same IDL, whose handler is `json_echo_server`'s.
//!
//! Skipped with a message when `thrift` or the Python library is missing, unless `CI`
//! is set (then it fails). Everything talks to loopback and is bounded in time.

#[path = "../../../interop/harness.rs"]
mod harness;

#[path = "../examples/json_echo_server/handler.rs"]
mod handler;

use std::path::PathBuf;
use std::time::Duration;

use examples::echo::EchoServiceServer;
use examples::echo_service::Echo;
use harness::PythonServer;
use thrift_dynamic::Descriptor;
use thrift_generic::{GenericClient, GenericError, GenericService};
use volo_core::client::{Client, ClientConfig, ClientContext};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;
use volo_core::server::Server;

/// Every method of echo's service with JSON arguments, and what each must answer.
const CALLS: [(&str, &str, &str); 7] = [
    (
        "echo",
        r#"{"req":{"action":"hello","msg":"w\u00f6rld \"q\" \\ \t"}}"#,
        r#"{"action":"hello","msg":"wörld \"q\" \\ \t"}"#,
    ),
    (
        "echo_test",
        r#"{"t":{"num":7,"ano":{"num":-1},"nums":[-3,0,"9007199254740993"]}}"#,
        r#"{"num":7,"ano":{"num":-1},"nums":[-3,0,9007199254740993]}"#,
    ),
    (
        "echo_ids",
        r#"{"ids":{"ids32":[1,-2,2147483647],"ids64":[-9223372036854775808,9223372036854775807],"scores":[0.5,-1.25],"blob":"AP9iaW4="}}"#,
        r#"{"ids32":[1,-2,2147483647],"ids64":[-9223372036854775808,9223372036854775807],"scores":[0.5,-1.25],"blob":"AP9iaW4="}"#,
    ),
    (
        "echo_or_fail",
        r#"{"req":{"action":"pass","msg":"fine"}}"#,
        r#"{"action":"pass","msg":"fine"}"#,
    ),
    (
        "echo_or_fail",
        r#"{"req":{"action":"fail","msg":"on purpose"}}"#,
        r#"threw EchoError as err: {"code":1,"message":"on purpose"}"#,
    ),
    ("notify", r#"{"event":"e"}"#, "null"),
    (
        "echo",
        r#"{"req":{"action":"after","msg":"notify"}}"#,
        r#"{"action":"after","msg":"notify"}"#,
    ),
];

const COMBOS: [(&str, Framing, &str, Protocol); 6] = [
    ("framed", Framing::Framed, "binary", Protocol::Binary),
    ("framed", Framing::Framed, "compact", Protocol::Compact),
    ("framed", Framing::Framed, "json", Protocol::Json),
    ("buffered", Framing::Buffered, "binary", Protocol::Binary),
    ("buffered", Framing::Buffered, "compact", Protocol::Compact),
    ("buffered", Framing::Buffered, "json", Protocol::Json),
];

/// Whether the tools are there; a failure under CI, a skip otherwise.
fn tools() -> bool {
    match harness::tools_present() {
        Ok(()) => true,
        Err(missing) if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) => {
            panic!("the generic interop test needs {missing}; CI is set, so this is a failure")
        }
        Err(missing) => {
            eprintln!("skipped: the generic interop test needs {missing}");
            false
        }
    }
}

/// Every call of [`CALLS`] through a JSON generic client of `addr`: the answers, as
/// text.
async fn call_all(addr: Address, framing: Framing, protocol: Protocol) -> Vec<String> {
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift");
    let desc = Descriptor::from_files(&[idl], &[] as &[PathBuf]).unwrap();
    let mut config = ClientConfig::default();
    config.format.framing = framing;
    config.format.protocol = protocol;
    let client = Client::builder("EchoService")
        .address(addr)
        .config(config)
        .build()
        .unwrap();
    let generic = GenericClient::new(client, desc, "EchoService")
        .unwrap()
        .with_protocol(protocol);
    let mut answers = Vec::new();
    for (method, args, _) in CALLS {
        let got = generic
            .call_json(&mut ClientContext::new(), method, args.as_bytes())
            .await;
        answers.push(match got {
            Ok(json) => String::from_utf8(json.to_vec()).unwrap(),
            Err(GenericError::DeclaredJson {
                exception,
                field,
                json,
                ..
            }) => format!(
                "threw {exception} as {field}: {}",
                String::from_utf8_lossy(&json)
            ),
            Err(e) => format!("failed: {e}"),
        });
    }
    answers
}

#[test]
fn json_generic_calls_answer_alike_from_apache_python_and_from_us() {
    if !tools() {
        return;
    }
    let tmp = harness::TempDir::new("generic-interop");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let want: Vec<&str> = CALLS.iter().map(|c| c.2).collect();
    for (transport, framing, protocol, proto) in COMBOS {
        let what = format!("{transport}/{protocol}");
        let python = PythonServer::start(&tmp, transport, protocol, &[]);
        let from_python = rt.block_on(async {
            let addr = Address::Tcp(([127, 0, 0, 1], python.port).into());
            tokio::time::timeout(Duration::from_secs(60), call_all(addr, framing, proto))
                .await
                .unwrap_or_else(|_| panic!("{what}: out of time"))
        });
        assert_eq!(from_python, want, "Apache's Python server, {what}");
        let from_us = rt.block_on(async {
            let bound = Server::new(EchoServiceServer::new(Echo::default()))
                .bind(&"127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let addr = bound.local_addr().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let done = tokio::spawn(bound.serve_with_shutdown(async {
                let _ = stopped.await;
            }));
            let answers =
                tokio::time::timeout(Duration::from_secs(60), call_all(addr, framing, proto))
                    .await
                    .unwrap_or_else(|_| panic!("{what}: out of time"));
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(20), done).await;
            answers
        });
        assert_eq!(from_us, from_python, "our server against Python's, {what}");
    }
}

#[test]
fn the_apache_python_client_calls_our_json_generic_server() {
    if !tools() {
        return;
    }
    let tmp = harness::TempDir::new("generic-interop-server");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift");
    let desc = Descriptor::from_files(&[idl], &[] as &[PathBuf]).unwrap();
    let service = GenericService::json(desc, "EchoService", handler::JsonEcho).unwrap();
    let facts = service.facts();
    let bound = rt
        .block_on(Server::with_facts(service, facts).bind(&"127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let Address::Tcp(addr) = bound.local_addr().clone() else {
        panic!("bound to TCP")
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = rt.spawn(bound.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    for (transport, _, protocol, _) in COMBOS {
        let out = harness::rpc_py(&tmp)
            .args(["client", "--port", &addr.port().to_string()])
            .args(["--transport", transport, "--protocol", protocol])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{transport}/{protocol}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = stop.send(());
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    });
}
