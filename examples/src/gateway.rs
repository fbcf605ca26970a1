//! An HTTP/JSON to Thrift gateway driven by IDL read at run time: the reusable part
//! of the `gateway` program (which is this, a command line and a listener).
//!
//! # What maps to what
//!
//! `POST /{service}/{method}` with a JSON object as the body (the method's arguments
//! keyed by field name, with [`thrift_dynamic::json`]'s conventions: `i64` as numbers
//! or strings, `binary` as base64, enums by name or number) becomes a call of
//! `method` on the upstream's `service`, through
//! [`GenericClient::call_json`](thrift_generic::GenericClient::call_json): the JSON
//! is transcoded straight into the client's protocol and the reply's result struct
//! straight back into JSON, with no value tree in between. `{service}` is the IDL
//! name of the service, bare (`EchoService`) or qualified by its file's stem
//! (`echo.EchoService`, needed when two files define a service of that name). The
//! body is not required to say `content-type: application/json`; it is parsed as JSON
//! whatever it says, up to axum's default limit of 2 MiB.
//!
//! A oneway method answers `null` once the call is written. Any HTTP method but
//! `POST` on these paths answers 405, any other path 404 (both with empty bodies).
//! A streaming method is streamed: see [Streams](#streams).
//!
//! # Status codes
//!
//! | status | when | body |
//! |---|---|---|
//! | 200 | the method returned | the return value as JSON (`null` for `void`) |
//! | 422 | the method threw an exception its IDL declares | the exception as JSON; its type name in `x-thrift-exception`, the result field that carried it in `x-thrift-exception-field` |
//! | 400 | the JSON does not fit the method's arguments (nothing was sent) | an error object with the field `path` and the byte `offset` |
//! | 404 | the IDL has no such service, or the service no such method (nothing was sent) | an error object |
//! | 504 | the call's deadline (`--timeout`) passed | an error object |
//! | 503 | the call was refused unsent or unrun: a circuit breaker is open, no instance, the upstream's limiter refused it, or it is shutting down | an error object |
//! | 502 | the upstream failed: connect or I/O error, a reply that is not valid Thrift or does not fit the IDL, an application exception (`TApplicationException`), or anything else | an error object |
//! | 500 | the gateway could not make a client for the service (its settings) | an error object |
//!
//! A declared exception answers 422, not 400: the call was sent and the service
//! answered, so the request was well formed and the service refused it; 400 stays
//! for requests the gateway refused itself, before sending anything, and a caller
//! can tell the two apart by the status alone. The error object of the other
//! failures is `{"error": CODE, "message": TEXT}`, `CODE` one of `bad_arguments`,
//! `unknown_service`, `unknown_method`, `upstream_timeout`, `upstream_unavailable`,
//! `upstream_failure`, `bad_reply`, `client_config`; the upstream's failures add
//! `"kind"` (the [`ErrorKind`] as `Connect`, `Timeout`...), a JSON argument failure
//! adds `"path"` (`req.msg`, `""` for the top level) and `"offset"` (the JSON byte
//! where it went wrong, or `null` for a check made at the end of an object such as
//! a missing required field).
//!
//! Every failure is logged through `tracing` (the target is this module): `warn` for
//! 5xx, `info` for 4xx, with the service, method and error.
//!
//! # Streams
//!
//! A method annotated `streaming.mode` (Kitex's StreamX) is served on the same path
//! by a stream to the upstream ([`GenericStreamClient`]). A stream message, either
//! way, is the method's request or response struct itself as a JSON object keyed by
//! field name (`{"action":"a","msg":"b"}`, not `{"req":{...}}` as a call's
//! arguments), with the same JSON conventions; NDJSON is one such object a line.
//!
//! | mode | request body | answer |
//! |---|---|---|
//! | `server` | the one request, as a call's arguments come (a JSON object, up to 2 MiB) | 200, `content-type: application/x-ndjson`, chunked: one response a line, each written (and flushed) as it arrives |
//! | `client` | NDJSON: each line one request, sent as it arrives; blank lines skipped; the end of the body ends the requests | 200, `application/json`: the one response, once the stream ended |
//! | `bidirectional` | NDJSON, as a client stream's | NDJSON, as a server stream's, written while the body is still read |
//!
//! hyper's HTTP/1 server reads a request body while the response is written, so a
//! bidirectional stream is full duplex for an HTTP client that does both (an
//! interactive one sees each answer before it sends its next line); one that sends
//! its whole body first gets the same answers after it.
//!
//! A stream's failure is answered as a call's, by the table above, while nothing of
//! the answer was sent: before a server or bidirectional stream's first response, or
//! any time for a client stream. After a response line was sent, the status is
//! already 200: the failure comes as a last line holding the error object the status
//! answer would have carried, and the body ends:
//!
//! ```text
//! {"action":"a","msg":"1"}
//! {"error":"upstream_failure","kind":"Application","message":"application exception InternalError: boom"}
//! ```
//!
//! A client reads the lines until the body ends; a line with an `error` key (a
//! response struct with a field named `error` would look alike: check the method's
//! response type) is the failure. How a stream's failures map:
//!
//! - an exception in the upstream's trailer (a handler's error) is a call's
//!   application exception: 502 `upstream_failure`, `"kind": "Application"`
//!   (`Overloaded` 503, its deadline `Timeout` 504);
//! - a business status in the trailer: 502 `upstream_failure`, `"kind": "Biz"` and
//!   `"biz_status"`, the status code;
//! - the stream's deadline, the calls' timeout (`timeouts.rpc`, from the opening):
//!   504 `upstream_timeout`;
//! - a connection failure: 502 `upstream_failure` (`"kind"` `Connect` or `Io`); a
//!   reset or cancel from the upstream: 502, `"kind": "Stream"`; a stream the
//!   upstream's connection could not take: 503, `"kind": "Refused"`;
//! - a request line that does not fit: 400 `bad_arguments` with `path` and `offset`
//!   as a call's, and `"line"`, its number in the body (from 1, blank lines
//!   counted); a line longer than 2 MiB, or a body that breaks off: 400
//!   `bad_arguments`. The lines before it were sent; the stream is cancelled.
//! - a client stream that ends cleanly without its response: 502 `bad_reply`.
//!
//! If the HTTP client goes away, the stream is cancelled.
//!
//! # Reload
//!
//! The IDL is an [`IdlProvider`], read by each call once
//! ([`Idl::Watched`]). [`Gateway::serve`] has it look
//! at its files every [`Gateway::reload_every`] (1 s by default) while it serves:
//! a method or service added to the files is served from the next look on, without a
//! restart, and one removed answers 404. A change that does not load (a syntax
//! error, an unknown type) keeps the last good IDL serving, and the provider logs
//! once, at `warn`, why it did not load; the next change is tried again. A call
//! already under way goes on with the IDL it started with.
//!
//! There is one [`GenericClient`] per service (made at its first call, kept for the
//! gateway's life), and one [`GenericStreamClient`] per service that is streamed,
//! all to the one upstream address.
//!
//! ```no_run
//! use std::sync::Arc;
//! use examples::gateway::Gateway;
//! use thrift_dynamic::IdlProvider;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let idl = Arc::new(IdlProvider::new(&["idl/echo.thrift"], &["idl"])?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! Gateway::new(idl, "127.0.0.1:8888".parse()?)
//!     .serve(listener, std::future::pending())
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use thrift_dynamic::IdlProvider;
use thrift_generic::{GenericClient, GenericError, GenericStreamClient, Idl};
use volo_core::client::{Client, ClientConfig, ClientContext, DefaultStack, ErrorKind};
use volo_core::context::Address;
use volo_core::stream::StreamError;

mod stream;

/// The header that names the declared exception of a 422 answer (its IDL type name).
pub const EXCEPTION_HEADER: &str = "x-thrift-exception";

/// The header that names the result struct's field that carried the exception of a
/// 422 answer (the name in the method's `throws`).
pub const EXCEPTION_FIELD_HEADER: &str = "x-thrift-exception-field";

/// The gateway's settings, then its HTTP side ([`serve`](Self::serve) or
/// [`into_router`](Self::into_router)): see the [module docs](self).
#[derive(Debug)]
pub struct Gateway {
    idl: Arc<IdlProvider>,
    upstream: Address,
    config: ClientConfig,
    reload_every: Duration,
}

impl Gateway {
    /// Calls the services of `idl` at `upstream`, with the default client settings
    /// (`ClientConfig::default()`: TTHeader, Binary, a 10 s call timeout) and a look at
    /// the IDL files every second.
    pub fn new(idl: Arc<IdlProvider>, upstream: Address) -> Self {
        Gateway {
            idl,
            upstream,
            config: ClientConfig::default(),
            reload_every: Duration::from_secs(1),
        }
    }

    /// The settings of the clients of the upstream: framing, protocol (the one the
    /// JSON is transcoded into), timeouts (`timeouts.rpc` is the deadline past which
    /// a call answers 504)... Default `ClientConfig::default()`.
    pub fn client_config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    /// How often [`serve`](Self::serve) looks at the IDL files for a change. Default
    /// 1 s.
    pub fn reload_every(mut self, every: Duration) -> Self {
        self.reload_every = every;
        self
    }

    /// The HTTP routes, for a server of the caller's own (which must run on a tokio
    /// runtime: the clients' transport is made at the first call of each service).
    /// The IDL is read again only when someone calls the provider's
    /// [`reload`](IdlProvider::reload) or [`watch`](IdlProvider::watch).
    pub fn into_router(self) -> Router {
        let shared = Arc::new(Shared {
            idl: self.idl,
            upstream: self.upstream,
            config: self.config,
            clients: Mutex::new(HashMap::new()),
            streams: Mutex::new(HashMap::new()),
        });
        Router::new()
            .route("/{service}/{method}", post(call))
            .with_state(shared)
    }

    /// Serves HTTP/1 on `listener` until `shutdown` completes, then stops accepting
    /// and waits for the requests under way. The IDL files are looked at every
    /// [`reload_every`](Self::reload_every) meanwhile.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let _watch = self.idl.watch(self.reload_every);
        axum::serve(listener, self.into_router())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// What the handler shares: the IDL, the upstream and the clients made so far.
#[derive(Debug)]
struct Shared {
    idl: Arc<IdlProvider>,
    upstream: Address,
    config: ClientConfig,
    /// By qualified service name (`module.Name`), so both spellings share one.
    clients: Mutex<HashMap<String, GenericClient<DefaultStack>>>,
    /// The stream clients, likewise.
    streams: Mutex<HashMap<String, GenericStreamClient>>,
}

impl Shared {
    /// The qualified and the bare name of `service` (bare or qualified) in the
    /// current IDL.
    fn names(&self, service: &str) -> Result<(String, String), Failure> {
        let desc = self.idl.current();
        let s = desc
            .service(service)
            .ok_or_else(|| GenericError::UnknownService(service.to_string()))?;
        Ok((format!("{}.{}", s.module, s.name), s.name.clone()))
    }

    /// The client of `service` (bare or qualified), made at its first call.
    fn client(&self, service: &str) -> Result<GenericClient<DefaultStack>, Failure> {
        let (key, bare) = self.names(service)?;
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let client = Client::builder(bare)
            .address(self.upstream.clone())
            .config(self.config.clone())
            .build()
            .map_err(Failure::Client)?;
        let generic = GenericClient::new(client, Idl::Watched(Arc::clone(&self.idl)), &key)?
            .with_protocol(self.config.format.protocol);
        clients.insert(key, generic.clone());
        Ok(generic)
    }

    /// The stream client of `service` (bare or qualified), made at its first stream;
    /// each stream's deadline is the calls' (`timeouts.rpc`), from its opening.
    fn stream_client(&self, service: &str) -> Result<GenericStreamClient, Failure> {
        let (key, _) = self.names(service)?;
        let mut clients = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let idl = Idl::Watched(Arc::clone(&self.idl));
        let mut client =
            GenericStreamClient::connect(self.upstream.clone(), &self.config, idl, &key)?;
        if let Some(timeout) = self.config.timeouts.rpc {
            client = client.with_timeout(timeout);
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// Why a request failed: the call or stream, making its client, or (a stream's)
/// request body.
#[derive(Debug)]
enum Failure {
    Call(GenericError),
    Client(std::io::Error),
    /// Line `number` of an NDJSON request body is not a request of the stream.
    Line {
        number: usize,
        error: Box<GenericError>,
    },
    /// The request body could not be read as the stream's requests.
    Body(String),
}

impl From<GenericError> for Failure {
    fn from(e: GenericError) -> Self {
        Failure::Call(e)
    }
}

/// `POST /{service}/{method}`: a call, or a stream when the IDL says the method is a
/// streaming one.
async fn call(
    State(shared): State<Arc<Shared>>,
    Path((service, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    let mode = shared
        .idl
        .current()
        .service(&service)
        .and_then(|s| s.stream(&method))
        .map(|m| m.mode);
    if let Some(mode) = mode {
        return stream::serve(&shared, service, method, mode, request).await;
    }
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) => return rejection.into_response(),
    };
    let client = match shared.client(&service) {
        Ok(c) => c,
        Err(f) => return failure(&service, &method, f),
    };
    let mut cx = ClientContext::new();
    match client.call_json(&mut cx, &method, &body).await {
        Ok(json) => (StatusCode::OK, [(CONTENT_TYPE, JSON)], json).into_response(),
        Err(e) => failure(&service, &method, Failure::Call(e)),
    }
}

/// The content type of every answer with a JSON body.
const JSON: &str = "application/json";

/// The content type of a stream's answer of responses, one JSON object a line.
pub const NDJSON: &str = "application/x-ndjson";

/// The answer to a failed request, logged.
fn failure(service: &str, method: &str, f: Failure) -> Response {
    let answer = judge(service, method, f);
    let mut r = (answer.status, [(CONTENT_TYPE, JSON)], answer.body).into_response();
    for (name, value) in answer.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(name, v);
        }
    }
    r
}

/// How a failure is answered: its status, the headers it adds, its JSON body.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

/// The answer to a failure (see the [module docs](self#status-codes)), logged.
fn judge(service: &str, method: &str, f: Failure) -> Answer {
    let (e, line) = match f {
        Failure::Call(e) => (e, None),
        Failure::Line { number, error } => (*error, Some(number)),
        Failure::Client(e) => {
            tracing::error!(service, method, error = %e, "cannot make a client of the service");
            return Answer {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                headers: Vec::new(),
                body: error_body("client_config", &e.to_string(), &[]),
            };
        }
        Failure::Body(message) => {
            tracing::info!(service, method, error = %message, "stream request body refused");
            return Answer {
                status: StatusCode::BAD_REQUEST,
                headers: Vec::new(),
                body: error_body("bad_arguments", &message, &[]),
            };
        }
    };
    let (status, code, mut extra): (StatusCode, &str, Vec<(&str, serde_json::Value)>) = match &e {
        GenericError::DeclaredJson {
            field,
            exception,
            json,
            ..
        } => {
            tracing::info!(service, method, exception, field, "declared exception");
            return Answer {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                headers: vec![
                    (EXCEPTION_HEADER, exception.clone()),
                    (EXCEPTION_FIELD_HEADER, field.clone()),
                ],
                body: json.clone(),
            };
        }
        // Not made by `call_json`, which gives `DeclaredJson`; kept for completeness.
        GenericError::Declared { exception, .. } => (
            StatusCode::UNPROCESSABLE_ENTITY,
            "declared_exception",
            vec![("exception", exception.as_str().into())],
        ),
        GenericError::JsonArgs { source, .. } | GenericError::JsonMessage { source, .. } => (
            StatusCode::BAD_REQUEST,
            "bad_arguments",
            vec![
                ("path", source.path().into()),
                ("offset", source.offset().into()),
            ],
        ),
        GenericError::Args { .. } | GenericError::SecondRequest { .. } => {
            (StatusCode::BAD_REQUEST, "bad_arguments", vec![])
        }
        GenericError::UnknownService(_) => (StatusCode::NOT_FOUND, "unknown_service", vec![]),
        GenericError::UnknownMethod { .. } => (StatusCode::NOT_FOUND, "unknown_method", vec![]),
        GenericError::JsonReply { .. }
        | GenericError::Reply { .. }
        | GenericError::MissingResult(_) => (StatusCode::BAD_GATEWAY, "bad_reply", vec![]),
        GenericError::Setup(_) => (StatusCode::INTERNAL_SERVER_ERROR, "client_config", vec![]),
        GenericError::Call(call) => {
            let (status, code) = match call.kind() {
                ErrorKind::Timeout => (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
                ErrorKind::CircuitOpen
                | ErrorKind::NoInstance
                | ErrorKind::Overloaded
                | ErrorKind::Closing => (StatusCode::SERVICE_UNAVAILABLE, "upstream_unavailable"),
                // Connect, Io, Protocol, Application, Encode, Rejected, and any kind
                // added later.
                _ => (StatusCode::BAD_GATEWAY, "upstream_failure"),
            };
            let kind = format!("{:?}", call.kind());
            (status, code, vec![("kind", kind.into())])
        }
        GenericError::Stream(StreamError::Biz(biz)) => (
            StatusCode::BAD_GATEWAY,
            "upstream_failure",
            vec![("kind", "Biz".into()), ("biz_status", biz.code.into())],
        ),
        GenericError::Stream(StreamError::Refused(_)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "upstream_unavailable",
            vec![("kind", "Refused".into())],
        ),
        GenericError::Stream(_) => (
            StatusCode::BAD_GATEWAY,
            "upstream_failure",
            vec![("kind", "Stream".into())],
        ),
        // `GenericError` is non-exhaustive.
        _ => (StatusCode::BAD_GATEWAY, "upstream_failure", vec![]),
    };
    let mut message = e.to_string();
    if let Some(number) = line {
        message = format!("line {number}: {message}");
        extra.push(("line", number.into()));
    }
    if status.is_server_error() {
        tracing::warn!(service, method, status = status.as_u16(), error = %message, "call failed");
    } else {
        tracing::info!(service, method, status = status.as_u16(), error = %message, "call refused");
    }
    Answer {
        status,
        headers: Vec::new(),
        body: error_body(code, &message, &extra),
    }
}

/// `{"error": code, "message": message, extra...}`.
fn error_body(code: &str, message: &str, extra: &[(&str, serde_json::Value)]) -> Bytes {
    let mut o = serde_json::Map::new();
    o.insert("error".into(), code.into());
    o.insert("message".into(), message.into());
    for (k, v) in extra {
        o.insert((*k).into(), v.clone());
    }
    Bytes::from(serde_json::Value::Object(o).to_string())
}
