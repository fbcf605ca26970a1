//! A service's streaming methods (Kitex's `streaming.mode`): the trait a handler
//! implements, the dispatcher that serves it through `Server::streams`, and the typed
//! stream client.
//!
//! Handlers get each stream's context (`StreamContext`: the client's header, the
//! metadata sent back) and, by mode:
//! - server streams: the request, read first as Kitex's generated code reads it, and
//!   the sending half;
//! - client streams: the receiving half; the response they return is sent, then the
//!   stream ends;
//! - bidirectional streams: both halves.
//!
//! The dispatcher tells the server its service's name and streaming methods, so
//! that a stream of another service or method is reset as unknown before any
//! handler runs. Returning `Ok` ends the stream cleanly; an error ends it with the
//! error in the trailer. The client opens a server stream with its request sent and its side
//! closed, and returns the receiving half; client and bidirectional streams return
//! the whole `ClientStream`.

use crate::model::{ServiceDef, StreamMethodDef, StreamNames, StreamingMode};

use super::{Emitter, SOME, str_lit, type_path};

const RT: &str = "::volo_core::codegen";
const RESULT: &str = "::std::result::Result";

impl Emitter<'_> {
    /// The streaming side of `s`, if it has streaming methods.
    pub(super) fn streams(&mut self, s: &ServiceDef) {
        let Some(names) = &s.stream_names else {
            return;
        };
        self.out.blank();
        self.stream_trait(s, names);
        self.out.blank();
        self.stream_server(s, names);
        self.out.blank();
        self.stream_client(s, names);
        self.out.blank();
        self.stack_streams(s);
    }

    /// The streaming methods of the service's client (`<Service>Client<T>`): each
    /// stream is opened through the client's stack, as its calls are made.
    fn stack_streams(&mut self, s: &ServiceDef) {
        line!(
            self.out,
            "/// The streaming methods of `{}`: each stream is opened through the client's stack",
            s.thrift_name
        );
        line!(
            self.out,
            "/// (discovery, balancing, breakers, the retry of an opening that never left, layers)."
        );
        open!(
            self.out,
            "impl<T: {RT}::Service<{RT}::ClientContext, {RT}::StreamRequest, Response = {RT}::OpenedStream, Error = {RT}::Error>> {}<T>",
            s.client
        );
        for (i, m) in s.streams.iter().enumerate() {
            if i > 0 {
                self.out.blank();
            }
            self.stream_client_method(m, Opener::Stack);
        }
        self.out.close("");
    }

    fn stream_trait(&mut self, s: &ServiceDef, names: &StreamNames) {
        line!(
            self.out,
            "/// The streaming methods of the `{}` service (Kitex's StreamX over TTHeader):",
            s.thrift_name
        );
        line!(
            self.out,
            "/// implement it, and serve it with [`{}`] through `Server::streams`.",
            names.server
        );
        open!(
            self.out,
            "pub trait {}: ::std::marker::Send + ::std::marker::Sync + 'static",
            names.handler
        );
        for (i, m) in s.streams.iter().enumerate() {
            if i > 0 {
                self.out.blank();
            }
            match &m.doc {
                Some(doc) => self.out.doc(Some(doc)),
                None => line!(self.out, "/// Serves `{}` streams.", m.thrift_name),
            }
            let (req, resp) = (type_path(&m.request), type_path(&m.response));
            let (params, ok) = match m.mode {
                StreamingMode::Server => (
                    format!("req: {req}, tx: {RT}::Sender<{resp}>"),
                    "()".to_owned(),
                ),
                StreamingMode::Client => (format!("rx: {RT}::Receiver<{req}>"), resp),
                StreamingMode::Bidirectional => (
                    format!("rx: {RT}::Receiver<{req}>, tx: {RT}::Sender<{resp}>"),
                    "()".to_owned(),
                ),
            };
            line!(
                self.out,
                "fn {}(&self, cx: &{RT}::StreamContext, {params}) -> impl ::std::future::Future<Output = {RESULT}<{ok}, {RT}::HandlerError>> + ::std::marker::Send;",
                m.name
            );
        }
        self.out.close("");
    }

    fn stream_server(&mut self, s: &ServiceDef, names: &StreamNames) {
        let (server, handler) = (&names.server, &names.handler);
        line!(
            self.out,
            "/// Serves the streams of `{}`: routes each by its method to a [`{handler}`].",
            s.thrift_name
        );
        line!(self.out, "#[derive(Debug)]");
        open!(self.out, "pub struct {server}<T>");
        line!(self.out, "inner: T,");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl<T> {server}<T>");
        line!(self.out, "/// Streams go to `inner`.");
        open!(self.out, "pub fn new(inner: T) -> Self");
        line!(self.out, "Self {{ inner }}");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(
            self.out,
            "impl<T: {handler}> {RT}::StreamHandler for {server}<T>"
        );
        line!(
            self.out,
            "async fn serve(&self, stream: {RT}::ServerStream) -> {RESULT}<(), {RT}::HandlerError> {{"
        );
        self.out.depth += 1;
        open!(self.out, "match stream.method()");
        for m in &s.streams {
            self.stream_arm(m);
        }
        line!(
            self.out,
            "other => {RESULT}::Err({RT}::HandlerError::unknown_method(other)),"
        );
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(
            self.out,
            "fn service_name(&self) -> ::std::option::Option<&str>"
        );
        line!(self.out, "{SOME}({})", str_lit(&s.thrift_name));
        self.out.close("");
        self.out.blank();
        open!(self.out, "fn serves_method(&self, method: &str) -> bool");
        let methods: Vec<String> = s.streams.iter().map(|m| str_lit(&m.thrift_name)).collect();
        line!(self.out, "::std::matches!(method, {})", methods.join(" | "));
        self.out.close("");
        self.out.close("");
    }

    /// The dispatcher's arm of one streaming method.
    fn stream_arm(&mut self, m: &StreamMethodDef) {
        let (req, resp) = (type_path(&m.request), type_path(&m.response));
        open!(self.out, "{} =>", str_lit(&m.thrift_name));
        match m.mode {
            StreamingMode::Server => {
                line!(
                    self.out,
                    "let (cx, mut rx, tx) = stream.into_parts::<{req}, {resp}>();"
                );
                line!(self.out, "// The request first, as Kitex's code reads it.");
                open!(self.out, "let req = match rx.recv().await?");
                line!(self.out, "::std::option::Option::Some(req) => req,");
                line!(
                    self.out,
                    "::std::option::Option::None => return {RESULT}::Err({RT}::HandlerError::internal(\"the stream ended before its request\")),"
                );
                self.out.close(";");
                line!(self.out, "self.inner.{}(&cx, req, tx).await", m.name);
            }
            StreamingMode::Client => {
                line!(
                    self.out,
                    "let (cx, rx, mut tx) = stream.into_parts::<{req}, {resp}>();"
                );
                line!(
                    self.out,
                    "let resp = self.inner.{}(&cx, rx).await?;",
                    m.name
                );
                line!(self.out, "tx.send(&resp).await?;");
                line!(self.out, "{RESULT}::Ok(())");
            }
            StreamingMode::Bidirectional => {
                line!(
                    self.out,
                    "let (cx, rx, tx) = stream.into_parts::<{req}, {resp}>();"
                );
                line!(self.out, "self.inner.{}(&cx, rx, tx).await", m.name);
            }
        }
        self.out.close("");
    }

    fn stream_client(&mut self, s: &ServiceDef, names: &StreamNames) {
        let client = &names.client;
        line!(
            self.out,
            "/// A client of the streaming methods of `{}`, over a `StreamClient`.",
            s.thrift_name
        );
        line!(self.out, "#[derive(Debug)]");
        open!(self.out, "pub struct {client}");
        line!(self.out, "inner: {RT}::StreamClient,");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl {client}");
        line!(self.out, "/// Streams go through `inner`.");
        open!(self.out, "pub fn new(inner: {RT}::StreamClient) -> Self");
        line!(self.out, "Self {{ inner }}");
        self.out.close("");
        self.out.blank();
        line!(
            self.out,
            "/// A client of `{}` at `addr` with `config`'s transport, TLS and connect timeout.",
            s.thrift_name
        );
        open!(
            self.out,
            "pub fn connect(addr: {RT}::Address, config: &{RT}::ClientConfig) -> ::std::io::Result<Self>"
        );
        line!(
            self.out,
            "{RT}::StreamClient::new({}, addr, config).map(Self::new)",
            str_lit(&s.thrift_name)
        );
        self.out.close("");
        self.out.blank();
        line!(self.out, "/// The untyped stream client underneath.");
        open!(self.out, "pub fn client(&self) -> &{RT}::StreamClient");
        line!(self.out, "&self.inner");
        self.out.close("");
        for m in &s.streams {
            self.out.blank();
            self.stream_client_method(m, Opener::Direct);
        }
        self.out.close("");
    }

    /// A client method and its `_with` twin, which sends header metadata (and, on a
    /// stack, takes the opening's context).
    fn stream_client_method(&mut self, m: &StreamMethodDef, opener: Opener) {
        let (req, resp) = (type_path(&m.request), type_path(&m.response));
        let (params, args, output) = match m.mode {
            StreamingMode::Server => (
                format!(", req: &{req}"),
                ", req",
                format!("{RT}::Receiver<{resp}>"),
            ),
            _ => (
                String::new(),
                "",
                format!("{RT}::ClientStream<{req}, {resp}>"),
            ),
        };
        let output = format!("{RESULT}<{output}, {RT}::StreamError>");
        match &m.doc {
            Some(doc) => self.out.doc(Some(doc)),
            None => line!(self.out, "/// Opens a `{}` stream.", m.thrift_name),
        }
        open!(
            self.out,
            "pub async fn {}(&self{params}) -> {output}",
            m.name
        );
        let (with_params, with_args, open) = match opener {
            Opener::Direct => (
                format!("header: &{RT}::Metadata"),
                format!("&{RT}::Metadata::new()"),
                format!(
                    "self.inner.open::<{req}, {resp}>({}, header)",
                    str_lit(&m.thrift_name)
                ),
            ),
            Opener::Stack => (
                format!("cx: &mut {RT}::ClientContext, header: {RT}::Metadata"),
                format!("&mut {RT}::ClientContext::new(), {RT}::Metadata::new()"),
                format!(
                    "self.client.open_stream::<{req}, {resp}>(cx, {RT}::StreamRequest::new({}, header))",
                    str_lit(&m.thrift_name)
                ),
            ),
        };
        line!(self.out, "self.{}_with({with_args}{args}).await", m.name);
        self.out.close("");
        self.out.blank();
        match opener {
            Opener::Direct => line!(
                self.out,
                "/// [`Self::{}`] with `header` as the stream header's metadata.",
                m.name
            ),
            Opener::Stack => line!(
                self.out,
                "/// [`Self::{}`] with a context (metainfo, a timeout for the opening, a hash key) and `header` as the stream header's metadata.",
                m.name
            ),
        }
        open!(
            self.out,
            "pub async fn {}_with(&self, {with_params}{params}) -> {output}",
            m.name
        );
        line!(
            self.out,
            "let {}stream = {open}.await?;",
            if m.mode == StreamingMode::Server {
                "mut "
            } else {
                ""
            }
        );
        if m.mode == StreamingMode::Server {
            line!(self.out, "stream.send(req).await?;");
            line!(self.out, "stream.close_send().await?;");
            line!(self.out, "let (_, rx) = stream.split();");
            line!(self.out, "{RESULT}::Ok(rx)");
        } else {
            line!(self.out, "{RESULT}::Ok(stream)");
        }
        self.out.close("");
    }
}

/// How a generated stream client opens its streams.
#[derive(Clone, Copy)]
enum Opener {
    /// `<Service>StreamClient`: a `StreamClient` to one address.
    Direct,
    /// `<Service>Client<T>`: through the client's stack.
    Stack,
}
