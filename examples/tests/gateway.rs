//! The HTTP/JSON gateway (`examples::gateway`) in process, in front of the generated
//! echo server on loopback, called by a real HTTP/1 client: each status code it
//! promises, and an IDL change served without a restart; then in front of the
//! streaming server of `idl/stream.thrift`: NDJSON in and out for each mode, and a
//! stream's failures before and after its first line. Every test is bounded in time;
//! the echo IDL is a copy in a directory of its own, removed at the end.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use examples::echo::{EchoServiceEchoArgs, EchoServiceEchoResult, EchoServiceServer, Response};
use examples::echo_service::{ECHO_ERROR_CODE, Echo};
use examples::gateway::{EXCEPTION_FIELD_HEADER, EXCEPTION_HEADER, Gateway, NDJSON};
use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
use examples::stream_service::{BIZ_STATUS, Streams};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use thrift_dynamic::IdlProvider;
use volo_core::client::ClientConfig;
use volo_core::codegen::{DispatchError, ServerRequest};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{
    BoundServer, Dispatch, Server, ServerStream, StreamHandler, with_fallback,
};
use volo_core::service::Service;
use volo_core::stream::HandlerError;

/// How often the gateway looks at its IDL files here.
const RELOAD_EVERY: Duration = Duration::from_millis(50);

/// The longest a reload may take to show (many looks, on a busy machine).
const RELOAD_DEADLINE: Duration = Duration::from_secs(10);

/// A method the IDL of the tests does not have until a test adds it; the upstream
/// answers it through its unknown-method handler ([`Again`]).
const ADDED: &str = "    Response echo_again(1: Request req),\n";

/// Answers `echo_again` (which the generated server does not know) with action
/// `again` and the message sent; any other method it does not know either.
#[derive(Clone)]
struct Again;

impl Service<ServerContext, ServerRequest> for Again {
    type Response = EchoServiceEchoResult;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<EchoServiceEchoResult, DispatchError> {
        if cx.rpc.method.as_str() != "echo_again" {
            return Err(DispatchError::UnknownMethod);
        }
        let args: EchoServiceEchoArgs = req.decode(cx)?;
        Ok(EchoServiceEchoResult {
            success: Some(Response {
                action: "again".into(),
                msg: args.req.msg,
            }),
        })
    }
}

/// A copy of idl/echo.thrift in a directory of its own under the system's temporary
/// directory, removed when dropped.
struct IdlDir {
    dir: PathBuf,
    file: PathBuf,
    original: String,
}

impl IdlDir {
    fn new() -> IdlDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gateway-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl/echo.thrift");
        let original = std::fs::read_to_string(source).unwrap();
        let file = dir.join("echo.thrift");
        std::fs::write(&file, &original).unwrap();
        IdlDir {
            dir,
            file,
            original,
        }
    }

    /// Replaces the file's text whole (a rename: a look at the file never finds it
    /// half-written).
    fn write(&self, text: &str) {
        let tmp = self.dir.join("echo.thrift.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.file).unwrap();
    }

    /// The original IDL with [`ADDED`] in EchoService.
    fn with_added_method(&self) -> String {
        let at = self.original.find("    oneway void notify").unwrap();
        let mut text = self.original.clone();
        text.insert_str(at, ADDED);
        text
    }
}

impl Drop for IdlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a test talks to: the gateway's base URL, its IDL, the upstream's handler.
struct Fixture {
    http: HttpClient<HttpConnector, Full<Bytes>>,
    base: String,
    idl: Arc<IdlProvider>,
    files: IdlDir,
    echo: Echo,
}

/// An answer: status, headers, body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A real HTTP/1 client.
type Http = HttpClient<HttpConnector, Full<Bytes>>;

fn http() -> Http {
    HttpClient::builder(TokioExecutor::new()).build_http()
}

/// Sends `body` to `url` with `method`, and reads the whole answer.
async fn send(http: &Http, method: Method, url: &str, body: &str) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = http.request(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

impl Fixture {
    async fn send(&self, method: Method, path: &str, body: &str) -> Answer {
        send(&self.http, method, &format!("{}{path}", self.base), body).await
    }

    async fn post(&self, path: &str, body: &str) -> Answer {
        self.send(Method::POST, path, body).await
    }

    /// Posts until the answer has `status`, a short interval apart, for
    /// [`RELOAD_DEADLINE`] at most.
    async fn post_until(&self, path: &str, body: &str, status: StatusCode) -> Answer {
        let deadline = Instant::now() + RELOAD_DEADLINE;
        loop {
            let answer = self.post(path, body).await;
            if answer.status == status {
                return answer;
            }
            assert!(
                Instant::now() < deadline,
                "{path} still answers {} {} after {RELOAD_DEADLINE:?}",
                answer.status,
                answer.body
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How the gateway of a test is set up.
#[derive(Clone, Copy)]
struct Setup {
    /// The calls' deadline.
    timeout: Duration,
    /// The upstream is a closed port instead of the echo server.
    upstream_down: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            timeout: Duration::from_secs(10),
            upstream_down: false,
        }
    }
}

/// Runs `f` with the echo server (with [`Again`] for the methods it does not know)
/// and the gateway in front of it, both on loopback ports, bounded in time; then stops
/// both.
fn with_gateway<F, Fut>(setup: Setup, f: F)
where
    F: FnOnce(Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let echo = Echo::default();
    let upstream = Server::new(with_fallback(EchoServiceServer::new(echo.clone()), Again));
    let files = IdlDir::new();
    let idl = Arc::new(IdlProvider::new(&[&files.file], &[] as &[PathBuf]).unwrap());
    let served = Arc::clone(&idl);
    gateway_over(
        upstream.bind(&loopback()),
        served,
        setup,
        |base| async move {
            let fixture = Fixture {
                http: http(),
                base,
                idl,
                files,
                echo,
            };
            f(fixture).await;
        },
    );
}

fn loopback() -> Address {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `f` with the upstream `bind` makes serving and the gateway of `idl` in front
/// of it (or of a closed port, with `setup.upstream_down`), both on loopback ports,
/// given the gateway's base URL, bounded in time; then stops both.
fn gateway_over<S, B, F, Fut>(bind: B, idl: Arc<IdlProvider>, setup: Setup, f: F)
where
    S: Dispatch,
    B: Future<Output = io::Result<BoundServer<S>>>,
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let bound = bind.await.unwrap();
        let mut upstream: Address = bound.local_addr().clone();
        let (stop_upstream, upstream_stopped) = tokio::sync::oneshot::channel::<()>();
        let upstream_done = tokio::spawn(bound.serve_with_shutdown(async {
            let _ = upstream_stopped.await;
        }));
        if setup.upstream_down {
            // A port that was just free, and nobody listens on now.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            upstream = l.local_addr().unwrap().to_string().parse().unwrap();
        }

        let mut config = ClientConfig::default();
        config.timeouts.rpc = Some(setup.timeout);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop_gateway, gateway_stopped) = tokio::sync::oneshot::channel::<()>();
        let gateway_done = tokio::spawn(
            Gateway::new(idl, upstream)
                .client_config(config)
                .reload_every(RELOAD_EVERY)
                .serve(listener, async {
                    let _ = gateway_stopped.await;
                }),
        );

        tokio::time::timeout(Duration::from_secs(60), f(base))
            .await
            .expect("the requests ran out of time");

        let _ = stop_gateway.send(());
        tokio::time::timeout(Duration::from_secs(20), gateway_done)
            .await
            .expect("the gateway did not stop")
            .unwrap()
            .unwrap();
        let _ = stop_upstream.send(());
        tokio::time::timeout(Duration::from_secs(20), upstream_done)
            .await
            .expect("the upstream did not stop")
            .unwrap()
            .unwrap();
    });
}

const ECHO_HI: &str = r#"{"req":{"action":"echo","msg":"h\u00e9 \"you\""}}"#;

#[test]
fn a_call_answers_200_with_the_reply_as_json() {
    with_gateway(Setup::default(), |fx| async move {
        for service in ["EchoService", "echo.EchoService"] {
            let a = fx.post(&format!("/{service}/echo"), ECHO_HI).await;
            assert_eq!(a.status, StatusCode::OK, "{service}: {}", a.body);
            assert_eq!(a.header("content-type"), Some("application/json"));
            assert_eq!(a.body, r#"{"action":"echo","msg":"hé \"you\""}"#);
        }
        let a = fx
            .post(
                "/EchoService/echo_ids",
                r#"{"ids":{"ids64":["9007199254740993"]}}"#,
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.json()["ids64"], json!([9007199254740993_u64]));

        // Oneway: `null` once written, and the server gets it.
        let a = fx.post("/EchoService/notify", r#"{"event":"e"}"#).await;
        assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "null"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while fx.echo.notified() == 0 {
            assert!(Instant::now() < deadline, "notify never arrived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

#[test]
fn a_declared_exception_answers_422_with_its_json_and_type() {
    with_gateway(Setup::default(), |fx| async move {
        let a = fx
            .post(
                "/EchoService/echo_or_fail",
                r#"{"req":{"action":"fail","msg":"boom"}}"#,
            )
            .await;
        assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.body);
        assert_eq!(a.header(EXCEPTION_HEADER), Some("EchoError"));
        assert_eq!(a.header(EXCEPTION_FIELD_HEADER), Some("err"));
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(
            a.json(),
            json!({"code": ECHO_ERROR_CODE, "message": "boom"})
        );

        let a = fx
            .post(
                "/EchoService/echo_or_fail",
                r#"{"req":{"action":"echo","msg":"fine"}}"#,
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.header(EXCEPTION_HEADER), None);
    });
}

#[test]
fn json_that_does_not_fit_answers_400_naming_the_field() {
    with_gateway(Setup::default(), |fx| async move {
        // A value of the wrong type: its path and offset.
        let a = fx
            .post("/EchoService/echo", r#"{"req":{"action":7,"msg":"x"}}"#)
            .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        let e = a.json();
        assert_eq!(e["error"], "bad_arguments");
        assert_eq!(e["path"], "req.action");
        assert_eq!(e["offset"], 17, "the byte of the `7`");
        assert!(e["message"].as_str().unwrap().contains("req.action"), "{e}");

        // A required field missing: the struct that lacks it, and its name.
        let a = fx
            .post("/EchoService/echo", r#"{"req":{"action":"x"}}"#)
            .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        let e = a.json();
        assert_eq!(e["path"], "req");
        assert!(e["message"].as_str().unwrap().contains("msg"), "{e}");

        // Not JSON at all.
        let a = fx.post("/EchoService/echo", r#"{"req": [1, }"#).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        assert_eq!(a.json()["error"], "bad_arguments");
        assert!(a.json()["offset"].is_u64(), "{}", a.body);
    });
}

#[test]
fn an_unknown_service_or_method_answers_404() {
    with_gateway(Setup::default(), |fx| async move {
        let a = fx.post("/EchoService/nope", "{}").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
        assert_eq!(a.json()["error"], "unknown_method");
        let a = fx.post("/NoService/echo", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
        assert_eq!(a.json()["error"], "unknown_service");
        // Not a route at all, and not POST.
        let a = fx.post("/EchoService", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND);
        let a = fx.send(Method::GET, "/EchoService/echo", "").await;
        assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    });
}

#[test]
fn an_upstream_that_is_down_answers_502() {
    let setup = Setup {
        upstream_down: true,
        ..Setup::default()
    };
    with_gateway(setup, |fx| async move {
        let a = fx.post("/EchoService/echo", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.body);
        let e = a.json();
        assert_eq!(e["error"], "upstream_failure");
        assert_eq!(e["kind"], "Connect");
    });
}

#[test]
fn an_upstream_slower_than_the_timeout_answers_504() {
    let setup = Setup {
        timeout: Duration::from_millis(300),
        ..Setup::default()
    };
    with_gateway(setup, |fx| async move {
        fx.echo.set_delay(Duration::from_secs(2));
        let started = Instant::now();
        let a = fx.post("/EchoService/echo", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.body);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let e = a.json();
        assert_eq!(
            (e["error"].as_str(), e["kind"].as_str()),
            (Some("upstream_timeout"), Some("Timeout"))
        );
        // Well again: answered.
        fx.echo.set_delay(Duration::ZERO);
        let a = fx.post("/EchoService/echo", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    });
}

/// A method added to the IDL file is served without a restart; a broken IDL keeps
/// the last good one serving; a good one after it is taken again (here, one without
/// the method, which then answers 404).
#[test]
fn the_idl_is_followed_while_serving_and_a_broken_one_is_not_taken() {
    with_gateway(Setup::default(), |fx| async move {
        let again = r#"{"req":{"action":"x","msg":"once more"}}"#;
        let a = fx.post("/EchoService/echo_again", again).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);

        fx.files.write(&fx.files.with_added_method());
        let a = fx
            .post_until("/EchoService/echo_again", again, StatusCode::OK)
            .await;
        assert_eq!(a.json(), json!({"action": "again", "msg": "once more"}));

        // Broken: a syntax error. Once the provider has looked at it (here, or its
        // watch did first: then this look finds nothing new), the last good IDL serves.
        let broken = format!("{}\nservice Broken {{ oops", fx.files.with_added_method());
        fx.files.write(&broken);
        let looked = fx.idl.reload();
        assert!(!matches!(looked, Ok(true)), "a broken IDL was taken");
        for _ in 0..5 {
            let a = fx.post("/EchoService/echo_again", again).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.body);
            let a = fx.post("/EchoService/echo", ECHO_HI).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.body);
            tokio::time::sleep(RELOAD_EVERY).await;
        }

        // Good again, without the method: taken, and the method is gone.
        fx.files.write(&fx.files.original);
        let a = fx
            .post_until("/EchoService/echo_again", again, StatusCode::NOT_FOUND)
            .await;
        assert_eq!(a.json()["error"], "unknown_method");
        let a = fx.post("/EchoService/echo", ECHO_HI).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    });
}

// ---------------------------------------------------------------------- streams

/// Runs `f` with the gateway of idl/stream.thrift in front of its ping-pong server
/// and of `streams` serving its streams, given the gateway's base URL.
fn with_streams<H, F, Fut>(streams: H, setup: Setup, f: F)
where
    H: StreamHandler,
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let idl = Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl/stream.thrift");
    let idl = Arc::new(IdlProvider::new(&[idl], &[] as &[PathBuf]).unwrap());
    let upstream = Server::new(StreamServiceServer::new(Streams)).streams(streams);
    gateway_over(upstream.bind(&loopback()), idl, setup, f);
}

/// The examples' stream server.
fn streams() -> StreamServiceStreamServer<Streams> {
    StreamServiceStreamServer::new(Streams)
}

/// A server stream whose every response waits for a permit the test gives: its
/// `server_echo` answers `count` times with the request's action and message.
struct Gated(Arc<tokio::sync::Semaphore>);

impl StreamHandler for Gated {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        if stream.method() != "server_echo" {
            return Err(HandlerError::unknown_method(stream.method()));
        }
        let (mut rx, mut tx) =
            stream.halves::<examples::stream::Request, examples::stream::Response>();
        let Some(req) = rx.recv().await? else {
            return Err(HandlerError::internal("no request"));
        };
        let answer = examples::stream::Response {
            action: req.action,
            msg: req.msg,
        };
        for _ in 0..req.count {
            tokio::select! {
                permit = self.0.acquire() => permit.expect("open").forget(),
                // Reset (its deadline passed, the gateway cancelled it): done.
                e = tx.cancelled() => return Err(e.into()),
            }
            tx.send(&answer).await?;
        }
        Ok(())
    }
}

/// An HTTP/1 client whose request bodies are streams.
type StreamingHttp = HttpClient<HttpConnector, Body>;

/// A request body fed line by line through the sender.
fn body_channel() -> (tokio::sync::mpsc::Sender<Bytes>, Body) {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    (tx, Body::from_stream(chunks))
}

/// The next line of an NDJSON body as it comes (`None` at its end).
async fn next_line<B>(body: &mut B, buf: &mut Vec<u8>) -> Option<String>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    loop {
        if let Some(at) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            return Some(String::from_utf8(line[..at].to_vec()).unwrap());
        }
        match body.frame().await {
            Some(frame) => {
                if let Ok(data) = frame.unwrap().into_data() {
                    buf.extend_from_slice(&data);
                }
            }
            None if buf.is_empty() => return None,
            None => panic!("a last line without its end: {buf:?}"),
        }
    }
}

/// Posts `body` to `method` of StreamService through the gateway at `base`, and
/// reads the whole answer.
async fn post_stream(base: &str, method: &str, body: &str) -> Answer {
    let url = format!("{base}/StreamService/{method}");
    send(&http(), Method::POST, &url, body).await
}

/// A server stream answers NDJSON, chunked, each line written as its response
/// arrives: the first is read while the upstream holds the second back.
#[test]
fn a_server_stream_answers_ndjson_a_line_as_each_arrives() {
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let gate = Arc::clone(&permits);
    with_streams(Gated(permits), Setup::default(), |base| async move {
        let request = Request::post(format!("{base}/StreamService/server_echo"))
            .body(Full::new(Bytes::from_static(
                br#"{"action":"push","msg":"m","count":2}"#,
            )))
            .unwrap();
        gate.add_permits(1);
        let response = http().request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("content-type"), Some(NDJSON));
        assert_eq!(header("transfer-encoding"), Some("chunked"));
        let mut body = response.into_body();
        let mut buf = Vec::new();
        let want = r#"{"action":"push","msg":"m"}"#;
        assert_eq!(next_line(&mut body, &mut buf).await.as_deref(), Some(want));
        // The upstream sends the second only now.
        gate.add_permits(1);
        assert_eq!(next_line(&mut body, &mut buf).await.as_deref(), Some(want));
        assert_eq!(next_line(&mut body, &mut buf).await, None);
    });
}

#[test]
fn a_server_stream_answers_every_response_as_a_line() {
    with_streams(streams(), Setup::default(), |base| async move {
        let a = post_stream(
            &base,
            "server_echo",
            r#"{"action":"push","msg":"m","count":3}"#,
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(
            a.body,
            format!("{}\n", r#"{"action":"push","msg":"m"}"#).repeat(3)
        );
        // No responses: an empty body (the service named by its qualified name).
        let url = format!("{base}/stream.StreamService/server_echo");
        let count0 = r#"{"action":"push","msg":"m","count":0}"#;
        let a = send(&http(), Method::POST, &url, count0).await;
        assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, ""));
        assert_eq!(a.header("content-type"), Some(NDJSON));
    });
}

/// A client stream takes its requests from the NDJSON body (blank lines skipped,
/// the last line without its end too) and answers its one response as JSON.
#[test]
fn a_client_stream_takes_ndjson_and_answers_its_one_response() {
    with_streams(streams(), Setup::default(), |base| async move {
        let body = "{\"action\":\"up\",\"msg\":\"1\"}\n\n \r\n{\"action\":\"up\",\"msg\":\"2\"}\r\n{\"action\":\"up\",\"msg\":\"3\"}";
        let a = post_stream(&base, "client_count", body).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(a.json(), json!({"action": "received", "msg": "3"}));
        let a = post_stream(&base, "client_count", "").await;
        assert_eq!(a.json(), json!({"action": "received", "msg": "0"}));
    });
}

/// A bidirectional stream answers each line while the request body is still being
/// written: the answer to a line is read before the next line is sent. A line that
/// does not fit, once lines were answered, ends the answer with an error line.
#[test]
fn a_bidirectional_stream_is_full_duplex() {
    with_streams(streams(), Setup::default(), |base| async move {
        let client: StreamingHttp = HttpClient::builder(TokioExecutor::new()).build_http();
        let (lines, body) = body_channel();
        let request = Request::post(format!("{base}/StreamService/bidi_echo"))
            .body(body)
            .unwrap();
        let line = |i: usize| format!("{{\"action\":\"{i}\",\"msg\":\"m\"}}");
        lines.send(Bytes::from(line(0) + "\n")).await.unwrap();
        let response = client.request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let mut buf = Vec::new();
        assert_eq!(next_line(&mut body, &mut buf).await, Some(line(0)));
        // A line in two pieces, then the next.
        let second = line(1) + "\n";
        let (a, b) = second.split_at(7);
        lines.send(Bytes::from(a.to_string())).await.unwrap();
        lines.send(Bytes::from(b.to_string())).await.unwrap();
        assert_eq!(next_line(&mut body, &mut buf).await, Some(line(1)));

        lines
            .send(Bytes::from_static(b"{\"msg\":[]}\n"))
            .await
            .unwrap();
        let last = next_line(&mut body, &mut buf).await.expect("an error line");
        let e: Value = serde_json::from_str(&last).unwrap();
        assert_eq!(
            (e["error"].as_str(), e["line"].as_u64(), e["path"].as_str()),
            (Some("bad_arguments"), Some(3), Some("msg")),
            "{e}"
        );
        assert_eq!(
            next_line(&mut body, &mut buf).await,
            None,
            "the answer ends"
        );
    });
}

/// Before the first line, a stream's failure answers as a call's: a handler's error
/// 502, a business status 502 with its code, a line that does not fit 400 with its
/// number, a deadline 504.
#[test]
fn a_stream_s_failure_before_its_first_line_answers_a_call_s_status() {
    with_streams(streams(), Setup::default(), |base| async move {
        let a = post_stream(
            &base,
            "server_echo",
            r#"{"action":"fail","msg":"early","count":0}"#,
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.body);
        let e = a.json();
        assert_eq!(
            (e["error"].as_str(), e["kind"].as_str()),
            (Some("upstream_failure"), Some("Application"))
        );
        assert!(e["message"].as_str().unwrap().contains("early"), "{e}");

        let a = post_stream(
            &base,
            "client_count",
            "{\"action\":\"bizfail\",\"msg\":\"no\"}\n",
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.body);
        let e = a.json();
        assert_eq!(
            (e["kind"].as_str(), e["biz_status"].as_i64()),
            (Some("Biz"), Some(BIZ_STATUS.into()))
        );

        let a = post_stream(
            &base,
            "client_count",
            "{\"action\":\"up\",\"msg\":\"1\"}\n{\"action\":\"up\",\"msg\":2}\n",
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        let e = a.json();
        assert_eq!(
            (e["error"].as_str(), e["line"].as_u64(), e["path"].as_str()),
            (Some("bad_arguments"), Some(2), Some("msg")),
            "{e}"
        );
        assert!(
            e["message"].as_str().unwrap().starts_with("line 2: "),
            "{e}"
        );

        let a = post_stream(&base, "server_echo", r#"{"action":1}"#).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        assert_eq!(a.json()["path"], "action");
    });
    let setup = Setup {
        timeout: Duration::from_millis(300),
        ..Setup::default()
    };
    // No permit: the stream's deadline passes before its first response.
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    with_streams(Gated(permits), setup, |base| async move {
        let a = post_stream(
            &base,
            "server_echo",
            r#"{"action":"a","msg":"b","count":1}"#,
        )
        .await;
        assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.body);
        assert_eq!(a.json()["error"], "upstream_timeout");
    });
}

/// After lines were sent, a stream's failure is the last line: the error object the
/// status answer would have carried.
#[test]
fn a_stream_s_failure_after_lines_is_a_last_error_line() {
    with_streams(streams(), Setup::default(), |base| async move {
        let a = post_stream(
            &base,
            "server_echo",
            r#"{"action":"fail","msg":"late","count":2}"#,
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        let lines: Vec<&str> = a.body.lines().collect();
        assert_eq!(lines.len(), 3, "{}", a.body);
        assert_eq!(lines[..2], [r#"{"action":"fail","msg":"late"}"#; 2]);
        let e: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(
            (e["error"].as_str(), e["kind"].as_str()),
            (Some("upstream_failure"), Some("Application")),
            "{e}"
        );
        assert!(e["message"].as_str().unwrap().contains("late"), "{e}");
        assert!(a.body.ends_with('\n'));
    });
}
