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
//! gateway's life), all calling the one upstream address.
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
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use thrift_dynamic::IdlProvider;
use thrift_generic::{GenericClient, GenericError, Idl};
use volo_core::client::{Client, ClientConfig, ClientContext, DefaultStack, ErrorKind};
use volo_core::context::Address;

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
}

impl Shared {
    /// The client of `service` (bare or qualified), made at its first call.
    fn client(&self, service: &str) -> Result<GenericClient<DefaultStack>, Failure> {
        let desc = self.idl.current();
        let Some(s) = desc.service(service) else {
            return Err(GenericError::UnknownService(service.to_string()).into());
        };
        let key = format!("{}.{}", s.module, s.name);
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let client = Client::builder(s.name.clone())
            .address(self.upstream.clone())
            .config(self.config.clone())
            .build()
            .map_err(Failure::Client)?;
        let generic = GenericClient::new(client, Idl::Watched(Arc::clone(&self.idl)), &key)?
            .with_protocol(self.config.format.protocol);
        clients.insert(key, generic.clone());
        Ok(generic)
    }
}

/// Why a request failed: the call, or making its client.
#[derive(Debug)]
enum Failure {
    Call(GenericError),
    Client(std::io::Error),
}

impl From<GenericError> for Failure {
    fn from(e: GenericError) -> Self {
        Failure::Call(e)
    }
}

/// `POST /{service}/{method}`.
async fn call(
    State(shared): State<Arc<Shared>>,
    Path((service, method)): Path<(String, String)>,
    body: Bytes,
) -> Response {
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

/// The content type of every answer with a body.
const JSON: &str = "application/json";

/// The answer to a failed request, logged.
fn failure(service: &str, method: &str, f: Failure) -> Response {
    let e = match f {
        Failure::Call(e) => e,
        Failure::Client(e) => {
            tracing::error!(service, method, error = %e, "cannot make a client of the service");
            let body = error_body("client_config", &e.to_string(), &[]);
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(CONTENT_TYPE, JSON)],
                body,
            )
                .into_response();
        }
    };
    let (status, code, extra): (StatusCode, &str, Vec<(&str, serde_json::Value)>) = match &e {
        GenericError::DeclaredJson {
            field,
            exception,
            json,
            ..
        } => {
            tracing::info!(service, method, exception, field, "declared exception");
            let mut r = (
                StatusCode::UNPROCESSABLE_ENTITY,
                [(CONTENT_TYPE, JSON)],
                json.clone(),
            )
                .into_response();
            for (name, value) in [
                (EXCEPTION_HEADER, exception),
                (EXCEPTION_FIELD_HEADER, field),
            ] {
                if let Ok(v) = HeaderValue::from_str(value) {
                    r.headers_mut().insert(name, v);
                }
            }
            return r;
        }
        // Not made by `call_json`, which gives `DeclaredJson`; kept for completeness.
        GenericError::Declared { exception, .. } => (
            StatusCode::UNPROCESSABLE_ENTITY,
            "declared_exception",
            vec![("exception", exception.as_str().into())],
        ),
        GenericError::JsonArgs { source, .. } => (
            StatusCode::BAD_REQUEST,
            "bad_arguments",
            vec![
                ("path", source.path().into()),
                ("offset", source.offset().into()),
            ],
        ),
        GenericError::Args { .. } => (StatusCode::BAD_REQUEST, "bad_arguments", vec![]),
        GenericError::UnknownService(_) => (StatusCode::NOT_FOUND, "unknown_service", vec![]),
        GenericError::UnknownMethod { .. } => (StatusCode::NOT_FOUND, "unknown_method", vec![]),
        GenericError::JsonReply { .. }
        | GenericError::Reply { .. }
        | GenericError::MissingResult(_) => (StatusCode::BAD_GATEWAY, "bad_reply", vec![]),
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
        // `GenericError` is non-exhaustive.
        _ => (StatusCode::BAD_GATEWAY, "upstream_failure", vec![]),
    };
    let message = e.to_string();
    if status.is_server_error() {
        tracing::warn!(service, method, status = status.as_u16(), error = %e, "call failed");
    } else {
        tracing::info!(service, method, status = status.as_u16(), error = %e, "call refused");
    }
    let body = error_body(code, &message, &extra);
    (status, [(CONTENT_TYPE, JSON)], body).into_response()
}

/// `{"error": code, "message": message, extra...}`.
fn error_body(code: &str, message: &str, extra: &[(&str, serde_json::Value)]) -> String {
    let mut o = serde_json::Map::new();
    o.insert("error".into(), code.into());
    o.insert("message".into(), message.into());
    for (k, v) in extra {
        o.insert((*k).into(), v.clone());
    }
    serde_json::Value::Object(o).to_string()
}
