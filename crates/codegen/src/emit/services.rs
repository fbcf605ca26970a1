//! Services: handler traits, exception and reply enums, dispatchers and clients.
//!
//! For each IDL service: the enum of each method's declared exceptions, the trait a
//! handler implements, the reply enum the server encodes, the `<Service>Server`
//! dispatcher that routes calls by method name, and the `<Service>Client`.

use std::fmt::Write as _;

use crate::model::{MethodDef, ServiceDef, TypePath};

use super::{ERR, Emitter, NONE, OK, SOME, bare, str_lit, type_path};

/// The one volo-core module generated code names: it re-exports every runtime item a
/// generated service, dispatcher and client uses.
const RT: &str = "::volo_core::codegen";
/// `Send`, by path, for the bounds and futures of generated services.
const SEND: &str = "::std::marker::Send";

impl Emitter<'_> {
    /// A service: its methods' exception enums, its trait, its reply enum and its
    /// dispatcher.
    pub(super) fn service(&mut self, s: &ServiceDef) {
        for m in &s.methods {
            if let Some(e) = &m.exception {
                self.exception_enum(m, &e.name);
                self.out.blank();
            }
        }
        self.service_trait(s);
        self.out.blank();
        self.reply_enum(s);
        self.out.blank();
        self.dispatcher(s);
        self.out.blank();
        self.client(s);
        self.streams(s);
    }

    /// The trait users implement: one method per IDL function of the service (the
    /// inherited ones come with the base trait).
    fn service_trait(&mut self, s: &ServiceDef) {
        self.out.doc(s.doc.as_deref());
        if s.doc.is_some() {
            line!(self.out, "///");
        }
        line!(
            self.out,
            "/// The `{}` service: implement it, and serve it with [`{}`].",
            s.thrift_name,
            s.server
        );
        let bounds = match &s.extends {
            Some(base) => type_path(base),
            None => format!("{SEND} + ::std::marker::Sync + 'static"),
        };
        if s.methods.is_empty() {
            line!(self.out, "pub trait {}: {bounds} {{}}", s.name);
            return;
        }
        open!(self.out, "pub trait {}: {bounds}", s.name);
        for (i, m) in s.methods.iter().enumerate() {
            if i > 0 {
                self.out.blank();
            }
            match &m.doc {
                Some(doc) => self.out.doc(Some(doc)),
                None => line!(self.out, "/// Handles `{}` calls.", m.thrift_name),
            }
            if m.oneway {
                line!(self.out, "///");
                line!(
                    self.out,
                    "/// Oneway: the caller waits for no reply, and what this returns is dropped."
                );
            }
            let cx = context_name(m);
            line!(self.out, "fn {}(", m.name);
            self.out.depth += 1;
            line!(self.out, "&self,");
            line!(self.out, "{cx}: &mut {RT}::ServerContext,");
            for p in &m.params {
                line!(self.out, "{}: {},", p.name, self.field_type(p));
            }
            self.out.depth -= 1;
            let (ret, exception) = self.outcome_types(m);
            line!(
                self.out,
                ") -> impl ::std::future::Future<Output = ::std::result::Result<{ret}, {RT}::ServerError<{exception}>>> + {SEND};"
            );
        }
        self.out.close("");
    }

    /// `<Owner><Method>Exception`: one variant per declared exception, each convertible
    /// from its type when no other variant holds the same type.
    fn exception_enum(&mut self, m: &MethodDef, name: &str) {
        line!(
            self.out,
            "/// The exceptions `{}` declares: a handler returns one as",
            m.thrift_name
        );
        line!(
            self.out,
            "/// `ServerError::User`, and the caller gets it in the result struct."
        );
        line!(self.out, "#[derive(Debug, Clone, PartialEq)]");
        open!(self.out, "pub enum {name}");
        for t in &m.throws {
            line!(self.out, "/// The result's `{}`.", bare(&t.field));
            line!(self.out, "{}({}),", t.variant, type_path(&t.ty));
        }
        self.out.close("");
        for t in &m.throws {
            if m.throws.iter().filter(|o| o.ty == t.ty).count() > 1 {
                continue;
            }
            let ty = type_path(&t.ty);
            self.out.blank();
            open!(self.out, "impl ::std::convert::From<{ty}> for {name}");
            open!(self.out, "fn from(e: {ty}) -> Self");
            line!(self.out, "Self::{}(e)", t.variant);
            self.out.close("");
            self.out.close("");
        }
        self.out.blank();
        open!(self.out, "impl ::std::fmt::Display for {name}");
        open!(
            self.out,
            "fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result"
        );
        open!(self.out, "match self");
        for t in &m.throws {
            line!(
                self.out,
                "Self::{}(e) => ::std::fmt::Display::fmt(e, f),",
                t.variant
            );
        }
        self.out.close("");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        line!(self.out, "impl ::std::error::Error for {name} {{}}");
    }

    /// `<Service>Reply`: the result struct of whichever method of the chain was called.
    fn reply_enum(&mut self, s: &ServiceDef) {
        let methods: Vec<&MethodDef> = s.methods.iter().chain(&s.inherited).collect();
        let oneway = methods.iter().any(|m| m.oneway);
        let name = &s.reply;
        let bases = if s.extends.is_some() {
            " or of the services it extends"
        } else {
            ""
        };
        line!(
            self.out,
            "/// The reply to a call of any method of [`{}`]{bases}:",
            s.name
        );
        line!(
            self.out,
            "/// the result struct of the method called (a oneway call has none and gets no reply)."
        );
        line!(self.out, "#[derive(Debug, Clone, PartialEq)]");
        if methods.is_empty() {
            line!(self.out, "pub enum {name} {{}}");
        } else {
            open!(self.out, "pub enum {name}");
            for m in methods.iter().filter(|m| !m.oneway) {
                if let Some(result) = &m.result {
                    line!(self.out, "/// The reply of `{}`.", m.thrift_name);
                    line!(self.out, "{}({}),", m.variant, type_path(result));
                }
            }
            if oneway {
                line!(self.out, "/// A oneway call: nothing is sent.");
                line!(self.out, "Oneway,");
            }
            self.out.close("");
        }
        self.out.blank();
        open!(self.out, "impl {RT}::Body for {name}");
        // Without result structs there is nothing to size or write.
        let (s_, e_) = if methods.iter().all(|m| m.oneway) {
            ("_s", "_e")
        } else {
            ("s", "e")
        };
        let arms = |this: &mut Self, call: &str, oneway_arm: &str| {
            if methods.is_empty() {
                line!(this.out, "match *self {{}}");
                return;
            }
            open!(this.out, "match self");
            for m in methods.iter().filter(|m| !m.oneway) {
                line!(this.out, "Self::{}(r) => __tc::Message::{call},", m.variant);
            }
            if oneway {
                line!(this.out, "Self::Oneway => {oneway_arm},");
            }
            this.out.close("");
        };
        open!(
            self.out,
            "fn size<S: __tc::Sizer>(&self, {s_}: &mut S) -> usize"
        );
        arms(self, "size(r, s)", "0");
        self.out.close("");
        open!(self.out, "fn encode<E: __tc::Encoder>(&self, {e_}: &mut E)");
        arms(self, "encode(r, e)", "{}");
        self.out.close("");
        self.out.close("");
    }

    /// `<Service>Server<T>`: a `Service<ServerContext, ServerRequest>` that decodes each
    /// call by method name, runs the handler and turns its outcome into the reply, and
    /// the `ServiceInfo` that tells the server which methods are oneway.
    fn dispatcher(&mut self, s: &ServiceDef) {
        let server = &s.server;
        line!(
            self.out,
            "/// Serves an implementation of [`{}`]: a `volo_core::service::Service` that",
            s.name
        );
        line!(
            self.out,
            "/// decodes each call's arguments by method name in the call's protocol, runs the"
        );
        line!(
            self.out,
            "/// handler and returns its [`{}`]. Hand it to `volo_core::server::Server::new`,",
            s.reply
        );
        line!(
            self.out,
            "/// which learns from its `ServiceInfo` which methods are oneway."
        );
        line!(self.out, "#[derive(Debug, Clone, Default)]");
        open!(self.out, "pub struct {server}<T>");
        line!(self.out, "inner: T,");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl<T> {server}<T>");
        line!(self.out, "/// Serves `inner`.");
        open!(self.out, "pub fn new(inner: T) -> Self");
        line!(self.out, "Self {{ inner }}");
        self.out.close("");
        self.out.blank();
        line!(self.out, "/// The implementation served.");
        open!(self.out, "pub fn inner(&self) -> &T");
        line!(self.out, "&self.inner");
        self.out.close("");
        self.out.blank();
        line!(self.out, "/// Gives back the implementation.");
        open!(self.out, "pub fn into_inner(self) -> T");
        line!(self.out, "self.inner");
        self.out.close("");
        self.out.close("");
        self.out.blank();

        let methods: Vec<&MethodDef> = s.methods.iter().chain(&s.inherited).collect();
        open!(self.out, "impl<T> {RT}::ServiceInfo for {server}<T>");
        line!(
            self.out,
            "const NAME: &'static str = {};",
            str_lit(&s.thrift_name)
        );
        self.out.blank();
        let oneway: Vec<String> = methods
            .iter()
            .filter(|m| m.oneway)
            .map(|m| str_lit(&m.thrift_name))
            .collect();
        if oneway.is_empty() {
            open!(self.out, "fn is_oneway(_method: &str) -> bool");
            line!(self.out, "false");
        } else {
            open!(self.out, "fn is_oneway(method: &str) -> bool");
            line!(self.out, "::std::matches!(method, {})", oneway.join(" | "));
        }
        self.out.close("");
        self.out.close("");
        self.out.blank();

        let trait_path = type_path(&TypePath {
            module: self.module.to_string(),
            name: s.name.clone(),
        });
        open!(
            self.out,
            "impl<T: {trait_path}> {RT}::Service<{RT}::ServerContext, {RT}::ServerRequest> for {server}<T>"
        );
        line!(self.out, "type Response = {};", s.reply);
        line!(self.out, "type Error = {RT}::DispatchError;");
        self.out.blank();
        line!(self.out, "async fn call(");
        self.out.depth += 1;
        line!(self.out, "&self,");
        line!(self.out, "cx: &mut {RT}::ServerContext,");
        line!(self.out, "req: {RT}::ServerRequest,");
        self.out.depth -= 1;
        open!(
            self.out,
            ") -> ::std::result::Result<{}, {RT}::DispatchError>",
            s.reply
        );
        if methods.is_empty() {
            line!(self.out, "let _ = (cx, req);");
            line!(self.out, "{ERR}({RT}::DispatchError::UnknownMethod)");
        } else {
            open!(self.out, "match cx.rpc.method.as_str()");
            for m in methods {
                open!(self.out, "{} =>", str_lit(&m.thrift_name));
                self.dispatch_arm(s, m);
                self.out.close("");
            }
            line!(self.out, "_ => {ERR}({RT}::DispatchError::UnknownMethod),");
            self.out.close("");
        }
        self.out.close("");
        self.out.close("");
    }

    /// One method's arm of `call`: decode, call, reply.
    fn dispatch_arm(&mut self, s: &ServiceDef, m: &MethodDef) {
        let decode = format!("req.decode::<{}>(cx)?;", type_path(&m.args));
        if m.params.is_empty() {
            line!(self.out, "{decode}");
        } else {
            line!(self.out, "let a = {decode}");
        }
        let mut call = format!("<T as {}>::{}(&self.inner, cx", type_path(&m.owner), m.name);
        for p in &m.params {
            let _ = write!(call, ", a.{}", p.name);
        }
        call.push_str(").await");
        let Some(result) = &m.result else {
            line!(
                self.out,
                "// A oneway call has no reply: what the handler returns goes nowhere."
            );
            line!(self.out, "let _ = {call};");
            line!(self.out, "{OK}({}::Oneway)", s.reply);
            return;
        };
        // The result struct with one field set (or none: a void method's success).
        let reply = |set: Option<&str>, value: &str| {
            let mut fields = Vec::new();
            if m.returns.is_some() {
                fields.push("success".to_string());
            }
            fields.extend(m.throws.iter().map(|t| t.field.clone()));
            let fields: Vec<String> = fields
                .iter()
                .map(|f| {
                    if Some(f.as_str()) == set {
                        format!("{f}: {SOME}({value})")
                    } else {
                        format!("{f}: {NONE}")
                    }
                })
                .collect();
            let body = if fields.is_empty() {
                "{}".to_string()
            } else {
                format!("{{ {} }}", fields.join(", "))
            };
            format!(
                "{OK}({}::{}({} {body}))",
                s.reply,
                m.variant,
                type_path(result)
            )
        };
        open!(self.out, "match {call}");
        if m.returns.is_some() {
            line!(self.out, "{OK}(v) => {},", reply(Some("success"), "v"));
        } else {
            line!(self.out, "{OK}(()) => {},", reply(None, ""));
        }
        if let Some(exception) = &m.exception {
            for t in &m.throws {
                line!(
                    self.out,
                    "{ERR}({RT}::ServerError::User({}::{}(e))) => {},",
                    type_path(exception),
                    t.variant,
                    reply(Some(&t.field), "e")
                );
            }
        }
        line!(
            self.out,
            "{ERR}({RT}::ServerError::Application(e)) => {ERR}({RT}::DispatchError::Application(e)),"
        );
        self.out.close("");
    }

    /// `<Service>Client<T>`: one `async fn` per method of the chain (and a `_with` twin
    /// that takes the call's context) over any client stack `T`, returning the
    /// method's result, its declared exception, or why the call failed; `builder()`
    /// builds the default stack with the IDL's service name.
    fn client(&mut self, s: &ServiceDef) {
        let client = &s.client;
        let maker = &s.maker;
        let stack = format!(
            "{RT}::Service<{RT}::ClientContext, {RT}::ClientRequest, Response = {RT}::ClientResponse, Error = {RT}::Error>"
        );
        line!(
            self.out,
            "/// A client of the `{}` service: one method per IDL function (those of the",
            s.thrift_name
        );
        line!(
            self.out,
            "/// services it extends included), over the client stack `T` (by default the one"
        );
        line!(self.out, "/// [`{client}::builder`] builds).");
        line!(self.out, "#[derive(Debug)]");
        open!(self.out, "pub struct {client}<T = {RT}::DefaultStack>");
        line!(self.out, "client: {RT}::Client<T>,");
        self.out.close("");
        self.out.blank();
        // By hand, not derived: a derive would ask `T: Clone`, and the stack is shared
        // behind the inner client's `Arc`.
        open!(self.out, "impl<T> ::std::clone::Clone for {client}<T>");
        open!(self.out, "fn clone(&self) -> Self");
        line!(self.out, "Self {{ client: self.client.clone() }}");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        line!(
            self.out,
            "/// Makes a [`{client}`] from the stack a `volo_core::client::ClientBuilder` built."
        );
        line!(self.out, "#[derive(Debug, Clone, Copy, Default)]");
        line!(self.out, "pub struct {maker};");
        self.out.blank();
        open!(self.out, "impl<T> {RT}::MakeClient<T> for {maker}");
        line!(self.out, "type Client = {client}<T>;");
        self.out.blank();
        open!(
            self.out,
            "fn make_client(client: {RT}::Client<T>) -> {client}<T>"
        );
        line!(self.out, "{client}::new(client)");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl {client}");
        line!(
            self.out,
            "/// A builder of a client of `{}` (the name sent as the callee): add an",
            s.thrift_name
        );
        line!(
            self.out,
            "/// address, a list of addresses or a `Discover`, settings and layers, then `build()`."
        );
        open!(self.out, "pub fn builder() -> {RT}::ClientBuilder<{maker}>");
        line!(
            self.out,
            "{RT}::ClientBuilder::new({})",
            str_lit(&s.thrift_name)
        );
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl<T> {client}<T>");
        line!(self.out, "/// Calls go through `client`.");
        open!(self.out, "pub fn new(client: {RT}::Client<T>) -> Self");
        line!(self.out, "Self {{ client }}");
        self.out.close("");
        self.out.blank();
        line!(self.out, "/// The untyped client underneath.");
        open!(self.out, "pub fn client(&self) -> &{RT}::Client<T>");
        line!(self.out, "&self.client");
        self.out.close("");
        self.out.close("");
        let methods: Vec<&MethodDef> = s.methods.iter().chain(&s.inherited).collect();
        if methods.is_empty() {
            return;
        }
        self.out.blank();
        open!(self.out, "impl<T: {stack}> {client}<T>");
        for (i, m) in methods.into_iter().enumerate() {
            if i > 0 {
                self.out.blank();
            }
            self.client_method(m);
        }
        self.out.close("");
    }

    /// A client method and its `_with` twin.
    fn client_method(&mut self, m: &MethodDef) {
        let (ret, exception) = self.outcome_types(m);
        let output = format!("::std::result::Result<{ret}, {RT}::ClientError<{exception}>>");
        let params: Vec<String> = m
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, self.field_type(p)))
            .collect();
        let names: Vec<&str> = m.params.iter().map(|p| p.name.as_str()).collect();
        let cx = context_name(m);
        match &m.doc {
            Some(doc) => self.out.doc(Some(doc)),
            None => line!(self.out, "/// Calls `{}`.", m.thrift_name),
        }
        if m.oneway {
            line!(self.out, "///");
            line!(
                self.out,
                "/// Oneway: done once the request is sent; no reply comes."
            );
        }
        open!(
            self.out,
            "pub async fn {}(&self{}) -> {output}",
            m.name,
            params.iter().map(|p| format!(", {p}")).collect::<String>()
        );
        line!(
            self.out,
            "self.{}_with(&mut {RT}::ClientContext::new(){}).await",
            m.name,
            names.iter().map(|n| format!(", {n}")).collect::<String>()
        );
        self.out.close("");
        self.out.blank();
        line!(
            self.out,
            "/// Calls `{}` with a context: metainfo to send (and, after the call, the",
            m.thrift_name
        );
        line!(
            self.out,
            "/// backward values received), a timeout, a hash key."
        );
        open!(
            self.out,
            "pub async fn {}_with(&self, {cx}: &mut {RT}::ClientContext{}) -> {output}",
            m.name,
            params.iter().map(|p| format!(", {p}")).collect::<String>()
        );
        let args = if names.is_empty() {
            format!("{} {{}}", type_path(&m.args))
        } else {
            format!("{} {{ {} }}", type_path(&m.args), names.join(", "))
        };
        let Some(result) = &m.result else {
            line!(
                self.out,
                "self.client.oneway({cx}, {}, {args}).await.map_err({RT}::ClientError::from)",
                str_lit(&m.thrift_name)
            );
            self.out.close("");
            return;
        };
        // A void method without exceptions looks at nothing in its result.
        let r = if m.returns.is_none() && m.throws.is_empty() {
            "_"
        } else {
            "r"
        };
        line!(
            self.out,
            "let {r}: {} = self.client.call({cx}, {}, {args}).await?;",
            type_path(result),
            str_lit(&m.thrift_name)
        );
        if let Some(exception) = &m.exception {
            for t in &m.throws {
                open!(self.out, "if let {SOME}(e) = r.{}", t.field);
                line!(
                    self.out,
                    "return {ERR}({RT}::ClientError::User({}::{}(e)));",
                    type_path(exception),
                    t.variant
                );
                self.out.close("");
            }
        }
        if m.returns.is_some() {
            open!(self.out, "match r.success");
            line!(self.out, "{SOME}(v) => {OK}(v),");
            line!(
                self.out,
                "{NONE} => {ERR}({RT}::ClientError::missing_result({})),",
                str_lit(&m.thrift_name)
            );
            self.out.close("");
        } else {
            line!(self.out, "{OK}(())");
        }
        self.out.close("");
    }

    /// A method's success type and its declared-exception type (`Infallible` without
    /// `throws`), as the trait and the client spell them.
    fn outcome_types(&self, m: &MethodDef) -> (String, String) {
        let ret = m
            .returns
            .as_ref()
            .map_or_else(|| "()".to_string(), |t| self.rust_type(t));
        let exception = m
            .exception
            .as_ref()
            .map_or_else(|| "::std::convert::Infallible".to_string(), type_path);
        (ret, exception)
    }
}

/// The name of a method's context parameter: `cx`, or `cx_` when an argument is named
/// `cx` (no snake-case field name ends in `_`, so they never clash).
fn context_name(m: &MethodDef) -> &'static str {
    if m.params.iter().any(|p| p.name == "cx") {
        "cx_"
    } else {
        "cx"
    }
}
