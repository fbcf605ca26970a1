//! The `thrift-call` binary, run as a process against the generated echo server of
//! `idl/echo.thrift` (served by this test process on loopback or a Unix socket): what
//! it prints and the status it exits with, for replies and for each kind of failure.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;

use examples::echo::EchoServiceServer;
use examples::echo_service::{ECHO_ERROR_CODE, Echo};
use support::{closed_port, loopback, offline, served, thrift_call};
use thrift_wire::{ApplicationException, ApplicationExceptionKind};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{DispatchError, Multiplex, Server, ServerConfig, ServerRequest};
use volo_core::service::{Service, layer_fn};
use volo_core::transport::tls::{ClientAuth, ServerTls};

fn echo_idl() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../idl/echo.thrift")
        .display()
        .to_string()
}

/// A directory of this test's own, under cargo's temporary directory for tests.
fn scratch(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("thrift-call-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The echo server on loopback.
fn with_echo<F, Fut>(f: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    served(
        Server::new(EchoServiceServer::new(Echo::default())).bind(&loopback()),
        f,
    );
}

const HI: &str = r#"{"req":{"action":"echo","msg":"hi"}}"#;
const HI_REPLY: &str = r#"{"action":"echo","msg":"hi"}"#;

#[test]
fn list_prints_every_method_of_every_service() {
    offline(|| async {
        let idl = echo_idl();
        let run = thrift_call(&["--idl", &idl, "--list"], "").await;
        assert_eq!(
            (run.status, run.stdout.as_str(), run.stderr.as_str()),
            (
                0,
                "EchoService.echo\nEchoService.echo_test\nEchoService.echo_ids\n\
                 EchoService.echo_or_fail\nEchoService.notify\n",
                ""
            )
        );
    });
}

/// Inherited methods come after a service's own; a base's methods under its own
/// name too; a service that two files define is printed qualified.
#[test]
fn list_includes_inherited_methods() {
    let dir = scratch("list");
    std::fs::write(
        dir.join("base.thrift"),
        "service Base { void ping() }\nservice Twice { void a() }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("child.thrift"),
        "include \"base.thrift\"\n\
         service Child extends base.Base { i32 add(1: i32 a, 2: i32 b) }\n\
         service Twice { void b() }\n",
    )
    .unwrap();
    let child = dir.join("child.thrift").display().to_string();
    offline(|| async {
        let run = thrift_call(&["--idl", &child, "--list"], "").await;
        assert_eq!(run.status, 0, "{run:?}");
        let mut lines: Vec<&str> = run.stdout.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "Base.ping",
                "Child.add",
                "Child.ping",
                "base.Twice.a",
                "child.Twice.b"
            ],
            "{run:?}"
        );
        let own_first =
            run.stdout.find("Child.add").unwrap() < run.stdout.find("Child.ping").unwrap();
        assert!(own_first, "{run:?}");
    });
}

#[test]
fn a_call_takes_its_json_from_the_command_line() {
    with_echo(|addr| async move {
        let idl = echo_idl();
        thrift_call(&["--idl", &idl, &addr, "EchoService.echo", HI], "")
            .await
            .replied(HI_REPLY);
        // The service qualified by its file's stem.
        thrift_call(&["--idl", &idl, &addr, "echo.EchoService.echo", HI], "")
            .await
            .replied(HI_REPLY);
    });
}

/// Tells of each call that reaches the server, by method, before it runs.
struct Arrivals<S> {
    inner: S,
    tell: tokio::sync::mpsc::UnboundedSender<String>,
}

impl<S> Service<ServerContext, ServerRequest> for Arrivals<S>
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
        let _ = self.tell.send(cx.rpc.method.as_str().to_string());
        self.inner.call(cx, req).await
    }
}

#[test]
fn a_call_takes_its_json_from_stdin() {
    let (tell, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let server =
        Server::new(EchoServiceServer::new(Echo::default())).layer(layer_fn(move |inner| {
            Arrivals {
                inner,
                tell: tell.clone(),
            }
        }));
    served(server.bind(&loopback()), |addr| async move {
        let idl = echo_idl();
        let stdin = format!("{HI}\n");
        thrift_call(&["--idl", &idl, &addr, "EchoService.echo"], &stdin)
            .await
            .replied(HI_REPLY);
        thrift_call(&["--idl", &idl, &addr, "EchoService.echo", "-"], &stdin)
            .await
            .replied(HI_REPLY);
        // Blank input: no arguments, `{}` (echo's `req` is optional in the IDL, and
        // the generated server fills in its default).
        thrift_call(&["--idl", &idl, &addr, "EchoService.echo"], " \n")
            .await
            .replied(r#"{"action":"","msg":""}"#);
        for _ in 0..3 {
            assert_eq!(arrived.recv().await.as_deref(), Some("echo"));
        }
        // A oneway method answers null once sent, and the call reaches the server.
        thrift_call(
            &["--idl", &idl, &addr, "EchoService.notify"],
            r#"{"event":"e"}"#,
        )
        .await
        .replied("null");
        let notify = tokio::time::timeout(Duration::from_secs(10), arrived.recv()).await;
        assert_eq!(notify.unwrap().as_deref(), Some("notify"));
    });
}

#[test]
fn every_transport_and_protocol_calls_through() {
    with_echo(|addr| async move {
        let idl = echo_idl();
        for transport in ["ttheader", "framed", "buffered", "theader"] {
            for protocol in ["binary", "compact"] {
                let run = thrift_call(
                    &[
                        "--idl",
                        &idl,
                        "--transport",
                        transport,
                        "--protocol",
                        protocol,
                        &addr,
                        "EchoService.echo_ids",
                        r#"{"ids":{"ids32":[1,-2],"ids64":["9007199254740993"],"blob":"AAEC"}}"#,
                    ],
                    "",
                )
                .await;
                assert_eq!(
                    (run.status, run.stdout.as_str()),
                    (
                        0,
                        "{\"ids32\":[1,-2],\"ids64\":[9007199254740993],\"scores\":[],\"blob\":\"AAEC\"}\n"
                    ),
                    "{transport} {protocol}: {run:?}"
                );
            }
        }
    });
}

#[test]
fn a_declared_exception_exits_4_with_its_json_on_stdout() {
    with_echo(|addr| async move {
        let idl = echo_idl();
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                &addr,
                "EchoService.echo_or_fail",
                r#"{"req":{"action":"fail","msg":"boom"}}"#,
            ],
            "",
        )
        .await;
        run.failed(4, "echo_or_fail threw EchoError (as err)");
        assert_eq!(
            run.stdout,
            format!("{{\"code\":{ECHO_ERROR_CODE},\"message\":\"boom\"}}\n")
        );
    });
}

/// An unknown service or method, or JSON that does not fit, fails before anything is
/// sent: nothing listens at the address these runs are given.
#[test]
fn calls_the_idl_does_not_allow_exit_1() {
    offline(|| async {
        let idl = echo_idl();
        let nowhere = closed_port();
        let run = thrift_call(&["--idl", &idl, &nowhere, "EchoService.nope", "{}"], "").await;
        run.failed(1, "EchoService has no method nope");
        let run = thrift_call(&["--idl", &idl, &nowhere, "Nope.echo", "{}"], "").await;
        run.failed(1, "the IDL has no service \"Nope\" (it has: EchoService)");
        let run = thrift_call(&["--idl", &idl, &nowhere, "echo", "{}"], "").await;
        run.failed(1, "expected SERVICE.METHOD");

        let bad = r#"{"req":{"action":"echo","msg":5}}"#;
        let run = thrift_call(&["--idl", &idl, &nowhere, "EchoService.echo", bad], "").await;
        run.failed(1, "req.msg");
        let missing = r#"{"req":{"action":"echo"}}"#;
        let run = thrift_call(&["--idl", &idl, &nowhere, "EchoService.echo"], missing).await;
        run.failed(1, "`msg`");
        let run = thrift_call(&["--idl", &idl, &nowhere, "EchoService.echo", "{"], "").await;
        run.failed(1, "the JSON arguments of echo");
    });
}

#[test]
fn bad_command_lines_and_idl_exit_1_help_and_version_0() {
    offline(|| async {
        let idl = echo_idl();
        let run = thrift_call(&["--idl", &idl, "--bogus"], "").await;
        run.failed(1, "--bogus");
        let run = thrift_call(&["127.0.0.1:1", "EchoService.echo"], "").await;
        run.failed(1, "--idl <FILE>");
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--timeout",
                "5",
                "127.0.0.1:1",
                "EchoService.echo",
            ],
            "",
        )
        .await;
        run.failed(1, "--timeout");
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--transport",
                "http",
                "127.0.0.1:1",
                "EchoService.echo",
            ],
            "",
        )
        .await;
        run.failed(1, "--transport");
        let run = thrift_call(&["--idl", "/nonexistent.thrift", "--list"], "").await;
        run.failed(1, "reading the IDL");
        let run = thrift_call(&["--idl", &idl, "a.sock", "EchoService.echo", "{}"], "").await;
        run.failed(1, "bad address");

        for flag in ["--help", "--version"] {
            let run = thrift_call(&[flag], "").await;
            assert_eq!((run.status, run.stderr.as_str()), (0, ""), "{run:?}");
            assert!(run.stdout.contains("thrift-call"), "{run:?}");
        }
    });
}

#[test]
fn nothing_listening_exits_2() {
    offline(|| async {
        let idl = echo_idl();
        let nowhere = closed_port();
        let run = thrift_call(&["--idl", &idl, &nowhere, "EchoService.echo", HI], "").await;
        run.failed(2, "connecting failed");
    });
}

#[test]
fn a_timeout_exits_2() {
    let echo = Echo::default();
    echo.set_delay(Duration::from_secs(3));
    served(
        Server::new(EchoServiceServer::new(echo)).bind(&loopback()),
        |addr| async move {
            let idl = echo_idl();
            let run = thrift_call(
                &[
                    "--idl",
                    &idl,
                    "--timeout",
                    "200ms",
                    &addr,
                    "EchoService.echo",
                    HI,
                ],
                "",
            )
            .await;
            run.failed(2, "timed out");
        },
    );
}

#[test]
fn a_unix_socket_path_is_an_address() {
    let sock = scratch("unix").join("echo.sock");
    let at: Address = format!("unix:{}", sock.display()).parse().unwrap();
    served(
        Server::new(EchoServiceServer::new(Echo::default())).bind(&at),
        |addr| async move {
            assert!(addr.starts_with('/'), "{addr}");
            let idl = echo_idl();
            thrift_call(&["--idl", &idl, &addr, "EchoService.echo", HI], "")
                .await
                .replied(HI_REPLY);
        },
    );
}

/// A multiplexed server without a default service: `--multiplexed` calls reach it on
/// every transport; a Framed call without the prefix names no service, and the server
/// answers with an application exception.
#[test]
fn multiplexed_calls_carry_the_service_name() {
    let services = Multiplex::new().service(EchoServiceServer::new(Echo::default()));
    served(
        Server::multiplexed(services).bind(&loopback()),
        |addr| async move {
            let idl = echo_idl();
            for transport in ["framed", "ttheader", "buffered", "theader"] {
                let run = thrift_call(
                    &[
                        "--idl",
                        &idl,
                        "--multiplexed",
                        "--transport",
                        transport,
                        &addr,
                        "EchoService.echo",
                        HI,
                    ],
                    "",
                )
                .await;
                assert_eq!(run.status, 0, "{transport}: {run:?}");
                run.replied(HI_REPLY);
            }
            let run = thrift_call(
                &[
                    "--idl",
                    &idl,
                    "--transport",
                    "framed",
                    &addr,
                    "EchoService.echo",
                    HI,
                ],
                "",
            )
            .await;
            run.failed(3, "application exception UnknownMethod");
        },
    );
}

/// Refuses calls that carry no transient `tenant` value with an application
/// exception; records the tenants it saw.
struct Tenants<S> {
    inner: S,
    seen: Arc<Mutex<Vec<String>>>,
}

impl<S> Service<ServerContext, ServerRequest> for Tenants<S>
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
        let Some(tenant) = cx.metainfo.transient("tenant") else {
            return Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::Unknown,
                format!("{} needs a tenant", cx.rpc.method.as_str()),
            )));
        };
        self.seen.lock().unwrap().push(tenant.to_string());
        self.inner.call(cx, req).await
    }
}

/// `-H` sends a transient value that the server's layer reads; without it the layer
/// refuses the call with an application exception (status 3).
#[test]
fn metainfo_reaches_the_server_and_application_exceptions_exit_3() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let server =
        Server::new(EchoServiceServer::new(Echo::default())).layer(layer_fn(move |inner| {
            Tenants {
                inner,
                seen: record.clone(),
            }
        }));
    served(server.bind(&loopback()), |addr| async move {
        let idl = echo_idl();
        for transport in ["ttheader", "theader"] {
            let run = thrift_call(
                &[
                    "--idl",
                    &idl,
                    "--transport",
                    transport,
                    "-H",
                    &format!("tenant=acme-{transport}"),
                    "--meta",
                    "other=1",
                    &addr,
                    "EchoService.echo",
                    HI,
                ],
                "",
            )
            .await;
            run.replied(HI_REPLY);
        }
        assert_eq!(
            *seen.lock().unwrap(),
            ["acme-ttheader", "acme-theader"],
            "the tenants the server saw"
        );

        let run = thrift_call(&["--idl", &idl, &addr, "EchoService.echo", HI], "").await;
        run.failed(3, "echo needs a tenant");

        // Framed calls have no header: metainfo is refused, not dropped.
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--transport",
                "framed",
                "-H",
                "tenant=x",
                &addr,
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.failed(1, "-H");
    });
}

/// Certificates made for the test, in a directory removed on drop: a CA, a server
/// certificate it issued (for `localhost` and 127.0.0.1) and a client certificate it
/// issued; another CA.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn new() -> Certs {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair,
        };
        let dir = scratch("tls");
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        for ca in ["ca", "other-ca"] {
            let ca_key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, ca);
            write(
                &format!("{ca}.crt"),
                &params.self_signed(&ca_key).unwrap().pem(),
            );
            if ca != "ca" {
                continue;
            }
            let issuer = Issuer::new(params, ca_key);
            for (leaf, names, purpose) in [
                (
                    "server",
                    vec!["localhost".to_string(), "127.0.0.1".to_string()],
                    ExtendedKeyUsagePurpose::ServerAuth,
                ),
                ("client", vec![], ExtendedKeyUsagePurpose::ClientAuth),
            ] {
                let key = KeyPair::generate().unwrap();
                let mut params = CertificateParams::new(names).unwrap();
                params.extended_key_usages = vec![purpose];
                write(
                    &format!("{leaf}.crt"),
                    &params.signed_by(&key, &issuer).unwrap().pem(),
                );
                write(&format!("{leaf}.key"), &key.serialize_pem());
            }
        }
        Certs { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS server that requires client certificates: a call with the CA and a client
/// certificate goes through; one without a client certificate, or trusting another
/// CA, fails on the connection (status 2).
#[test]
fn tls_with_a_client_certificate() {
    let certs = Certs::new();
    let tls = ServerTls::builder(certs.path("server.crt"), certs.path("server.key"))
        .client_certs(certs.path("ca.crt"), ClientAuth::Required)
        .build()
        .unwrap();
    let config = ServerConfig {
        tls: Some(tls),
        ..ServerConfig::default()
    };
    let server = Server::new(EchoServiceServer::new(Echo::default())).config(config);
    served(server.bind(&loopback()), |addr| async move {
        let idl = echo_idl();
        let (ca, cert, key) = (
            certs.path("ca.crt"),
            certs.path("client.crt"),
            certs.path("client.key"),
        );
        let port = addr.rsplit_once(':').unwrap().1;
        let by_name = format!("localhost:{port}");
        for at in [&addr, &by_name] {
            let run = thrift_call(
                &[
                    "--idl",
                    &idl,
                    "--tls",
                    "--ca",
                    &ca,
                    "--cert",
                    &cert,
                    "--key",
                    &key,
                    at,
                    "EchoService.echo",
                    HI,
                ],
                "",
            )
            .await;
            run.replied(HI_REPLY);
        }
        // The name the certificate holds, asked for explicitly.
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--tls",
                "--ca",
                &ca,
                "--cert",
                &cert,
                "--key",
                &key,
                "--server-name",
                "localhost",
                &addr,
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.replied(HI_REPLY);

        // No client certificate: TLS 1.3 lets the client finish its handshake, and
        // the server's refusal arrives with the reply.
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--tls",
                "--ca",
                &ca,
                &addr,
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.failed(2, "CertificateRequired");
        let other = certs.path("other-ca.crt");
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--tls",
                "--ca",
                &other,
                "--cert",
                &cert,
                "--key",
                &key,
                &addr,
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.failed(2, "connecting failed");

        // Plain text to a TLS server fails too; TLS settings that do not read, and
        // TLS to a Unix socket, are usage errors.
        let run = thrift_call(&["--idl", &idl, &addr, "EchoService.echo", HI], "").await;
        run.failed(2, "the connection failed");
        let missing = certs.path("missing.crt");
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--tls",
                "--ca",
                &missing,
                &addr,
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.failed(1, "TLS settings");
        let run = thrift_call(
            &[
                "--idl",
                &idl,
                "--tls",
                "--ca",
                &ca,
                "/tmp/x.sock",
                "EchoService.echo",
                HI,
            ],
            "",
        )
        .await;
        run.failed(1, "--tls needs a host:port address");
        let run = thrift_call(&["--idl", &idl, "--tls", &addr, "EchoService.echo", HI], "").await;
        run.failed(1, "--ca");
    });
}
