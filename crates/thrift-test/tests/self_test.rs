//! The two halves against each other, in one process and without Python: our client's
//! checks pass against our server over the framings, protocols (multiplexed or not)
//! and sockets volo-core speaks, and they fail, by name and with the suite's exit-code bits,
//! against a server that answers wrong.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use thrift_test::checks::{self, CONTAINERS, EXCEPTIONS, Report, STRUCTS};
use thrift_test::handler::TestHandler;
use thrift_test::options::{ClientOptions, ServerOptions};
use thrift_test::thrift_test::{ThriftTestReply, ThriftTestServer, Xtruct};
use thrift_wire::{ApplicationException, ApplicationExceptionKind};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{DispatchError, Server, ServerRequest};
use volo_core::service::{Service, layer_fn};

mod support;

/// The client's options for `server_args`' transport and protocol, at `addr`.
fn client_options(line: &str, addr: &Address) -> ClientOptions {
    let mut args: Vec<String> = line.split_whitespace().map(String::from).collect();
    match addr {
        Address::Tcp(sa) => {
            args.push("--host=127.0.0.1".into());
            args.push(format!("--port={}", sa.port()));
        }
        Address::Unix(path) => args.push(format!("--domain-socket={}", path.display())),
        other => panic!("unexpected address {other}"),
    }
    ClientOptions::read(std::iter::once("thrift-test-client".to_string()).chain(args)).unwrap()
}

/// Runs the checks once against `addr`.
async fn check(line: &str, addr: &Address) -> Report {
    let clients = thrift_test::connect::connect(&client_options(line, addr)).unwrap();
    let mut report = Report::default();
    checks::run(&clients, &mut report).await;
    report
}

/// Serves with `line` and `socket`, runs the checks once with `line`, and stops the
/// server; panics on any failed check.
fn serve_and_check(rt: &tokio::runtime::Runtime, line: &str, socket: &str) {
    let report = serve_and_run(rt, line, line, socket);
    assert!(
        report.failures.is_empty(),
        "{line} {socket}: {:#?}",
        report.failures
    );
    assert_eq!(report.exit_code(), 0);
    assert!(report.passed >= 20, "{line} {socket}: {}", report.passed);
}

/// Serves with `line` and `socket`, runs the checks once with `client_line`, stops
/// the server, and gives the client's report.
fn serve_and_run(
    rt: &tokio::runtime::Runtime,
    line: &str,
    client_line: &str,
    socket: &str,
) -> Report {
    let opts = ServerOptions::read(
        format!("thrift-test-server {line} {socket}")
            .split_whitespace()
            .map(String::from),
    )
    .unwrap();
    rt.block_on(async {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = tokio::sync::oneshot::channel();
        let serving = tokio::spawn(async move {
            thrift_test::serve::serve(
                &opts,
                async {
                    let _ = stopped.await;
                },
                |addr| {
                    let _ = ready.send(addr.clone());
                },
            )
            .await
        });
        let addr = bound.await.expect("the server listens");
        let report = check(client_line, &addr).await;
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        report
    })
}

#[test]
fn our_client_passes_against_our_server() {
    let rt = thrift_test::runtime().unwrap();
    let dir = support::TempDir::new("self");
    let domain = format!("--domain-socket={}", dir.path("sock").display());
    for line in [
        "--transport=buffered --protocol=binary",
        "--transport=buffered --protocol=compact",
        "--transport=framed --protocol=binary",
        "--transport=framed --protocol=compact",
        "--transport=buffered --protocol=header",
        "--transport=framed --protocol=header",
        "--transport=buffered --protocol=multi",
        "--transport=framed --protocol=multic",
        "--transport=framed --protocol=multih",
        "--transport=buffered --protocol=json",
        "--transport=framed --protocol=multij",
    ] {
        for socket in ["--port=0", &domain] {
            serve_and_check(&rt, line, socket);
        }
        assert!(
            !dir.path("sock").exists(),
            "the server removes its socket file"
        );
    }
}

/// Over TLS, with the suite's client certificate and without one (the server asks
/// for one, checks one that comes, and takes a client that has none).
#[test]
fn our_client_passes_against_our_server_over_tls() {
    let keys = support::xtest_dir().join("keys");
    if !keys.join("server.crt").is_file() {
        assert!(!support::required(), "no suite keys in {}", keys.display());
        eprintln!("skipped: no suite keys in {}", keys.display());
        return;
    }
    let rt = thrift_test::runtime().unwrap();
    // A client without a certificate, as Apache's Go and Rust test clients are: the
    // suite's keys but `client.crt` and `client.key`.
    let bare = support::TempDir::new("bare-keys");
    for name in ["CA.pem", "server.crt", "server.key"] {
        std::fs::copy(keys.join(name), bare.path(name)).unwrap();
    }
    for protocol in ["binary", "compact"] {
        let line = format!(
            "--transport=framed --protocol={protocol} --ssl --keys-dir={}",
            keys.display()
        );
        serve_and_check(&rt, &line, "--port=0");
        let without_cert = format!(
            "--transport=framed --protocol={protocol} --ssl --keys-dir={}",
            bare.0.display()
        );
        let report = serve_and_run(&rt, &line, &without_cert, "--port=0");
        assert!(report.failures.is_empty(), "{:#?}", report.failures);
        assert!(report.passed >= 20, "{}", report.passed);
    }
    // A certificate that is not the suite's `client.crt` (here the server's own) is
    // still refused.
    let wrong = support::TempDir::new("wrong-keys");
    std::fs::copy(keys.join("CA.pem"), wrong.path("CA.pem")).unwrap();
    std::fs::copy(keys.join("server.crt"), wrong.path("client.crt")).unwrap();
    std::fs::copy(keys.join("server.key"), wrong.path("client.key")).unwrap();
    let line = |dir: &std::path::Path| {
        format!(
            "--transport=framed --protocol=binary --ssl --keys-dir={}",
            dir.display()
        )
    };
    let report = serve_and_run(&rt, &line(&keys), &line(&wrong.0), "--port=0");
    let void = report.failures.iter().find(|f| f.check == "testVoid");
    assert!(
        void.is_some_and(|f| f.detail.contains("CertificateUnknown")),
        "{:#?}",
        report.failures
    );
    // In TLS 1.3 the client's side of the handshake ends before the server has
    // checked its certificate: a oneway call, done once sent, can pass. No other.
    assert!(report.passed <= 1, "{:#?}", report.failures);
}

/// Around the dispatcher: fails `testStruct` with an application exception, answers
/// `testI64` and `testMapMap` wrong, drops `testMultiException`'s Xception2, and
/// answers `testDouble(-0.0)` with 0.0.
struct Liar<S>(S);

impl<S> Service<ServerContext, ServerRequest> for Liar<S>
where
    S: Service<ServerContext, ServerRequest, Response = ThriftTestReply, Error = DispatchError>
        + Sync,
{
    type Response = ThriftTestReply;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<ThriftTestReply, DispatchError> {
        if cx.rpc.method.as_str() == "testStruct" {
            return Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                "no structs today",
            )));
        }
        let mut reply = self.0.call(cx, req).await?;
        match &mut reply {
            ThriftTestReply::TestI64(r) => r.success = r.success.map(|v| v.wrapping_add(1)),
            // As Apache's Node.js writers do: the sign of zero is lost.
            ThriftTestReply::TestDouble(r) => {
                r.success = r.success.map(|v| if v == 0.0 { 0.0 } else { v });
            }
            ThriftTestReply::TestMapMap(r) => r.success = Some(BTreeMap::new()),
            ThriftTestReply::TestMultiException(r) if r.err2.is_some() => {
                r.err2 = None;
                r.success = Some(Xtruct::default());
            }
            _ => {}
        }
        Ok(reply)
    }
}

#[test]
fn the_checks_fail_by_name_against_a_server_that_answers_wrong() {
    let rt = thrift_test::runtime().unwrap();
    rt.block_on(async {
        let server = Server::new(ThriftTestServer::new(TestHandler::new()))
            .layer(layer_fn(Liar))
            .bind(&Address::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
            .await
            .unwrap();
        let addr = server.local_addr().clone();
        let serving = tokio::spawn(server.serve());
        let report = check("--transport=framed --protocol=compact", &addr).await;
        serving.abort();
        let failed: Vec<&str> = report.failures.iter().map(|f| f.check).collect();
        assert_eq!(
            failed,
            ["testI64", "testStruct", "testMapMap", "testMultiException"],
            "{:#?}",
            report.failures
        );
        let detail = |name: &str| {
            &report
                .failures
                .iter()
                .find(|f| f.check == name)
                .unwrap()
                .detail
        };
        assert!(
            detail("testI64").contains("expected 1, got 2"),
            "{}",
            detail("testI64")
        );
        assert!(detail("testStruct").contains("no structs today"));
        assert!(detail("testMultiException").contains("expected Xception2"));
        assert_eq!(
            report.exit_code(),
            checks::BASETYPES | STRUCTS | CONTAINERS | EXCEPTIONS
        );
        assert!(!report.timed_out);
        // -0.0 answered as 0.0 is equal as a number (testDouble passed), with a note.
        assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
        assert!(
            report.notes[0].contains("sign of zero"),
            "{:?}",
            report.notes
        );
    });
}
