//! [`Multiplex`]: several services on one server, each call routed to one of them, the
//! way Apache Thrift's `TMultiplexedProcessor` serves several processors and the way
//! Kitex and Volo route a server with several services.
//!
//! ```
//! use volo_core::server::{Dispatch, Multiplex, Server, ServiceInfo};
//!
//! // Any generated `<Service>Server<T>` is a `Dispatch + ServiceInfo`.
//! fn serve_both<A, B>(first: A, second: B)
//! where
//!     A: Dispatch + ServiceInfo,
//!     B: Dispatch + ServiceInfo,
//! {
//!     // `first` also takes the calls that name no service (non-multiplexed callers).
//!     let _server = Server::multiplexed(Multiplex::new().default_service(first).service(second));
//! }
//! ```
//!
//! # How a call finds its service
//!
//! The server routes a call before any layer sees it, in this order:
//!
//! 1. **The name prefix.** A method name `Service:method` (Apache's
//!    `TMultiplexedProtocol`; the first `:` separates them, as in Apache's Java, Python
//!    and Go libraries) goes to the service registered under `Service`. A prefix that
//!    names no registered service is an error, whatever else the call says.
//! 2. **TTHeader's `isn` string key** (the IDL service name, which Kitex's and Volo's
//!    clients send) goes to the service whose IDL name ([`ServiceInfo::NAME`]) it is.
//!    An `isn` that names none is passed over, as Volo's router does.
//! 3. **The default service**, when one is set ([`Multiplex::default_service`]), takes
//!    every other call: a client that does not multiplex keeps working, as with Apache's
//!    `registerDefault`.
//!
//! A call that finds no service is answered with an `UNKNOWN_METHOD`
//! `TApplicationException` saying why (a ONEWAY message is not answered) and the
//! connection lives on. Apache's bindings disagree here (Java, Python and Go close the
//! connection, C++ answers `PROTOCOL_ERROR`, C# `INTERNAL_ERROR`); `UNKNOWN_METHOD` is
//! what Volo's router answers, and what an unknown method gets from any server.
//!
//! # What the service and the layers see, and the reply
//!
//! The routed call carries the bare method name in `cx.rpc.method` (the prefix is
//! gone, as Apache's processor hands the bare name on) and the name the service is
//! registered under in `cx.rpc.callee.service`. The layers added with
//! [`Server::layer`](super::Server::layer) wrap the whole multiplexed dispatcher, so
//! they see every call, routed. The reply carries the bare method name, as Apache's
//! `TMultiplexedProcessor` writes it (clients of multiplexed servers, Apache's Go
//! client for one, compare the reply's name with the bare method).
//!
//! Whether a call is answered is decided per routed service from its
//! [`ServiceInfo::is_oneway`]: a method that is oneway in the service the call was
//! routed to gets no reply, even when it came as a CALL message; the same method name
//! may be oneway in one service and answered in another.
//!
//! A layer that changes `cx.rpc.callee.service` sends the call to another registered
//! service; whether the call is answered was settled by the first routing.
//!
//! # Cost
//!
//! A server made with [`Server::new`](super::Server::new) does none of this: its calls
//! are not searched for a prefix. A multiplexed server does one scan of the method name
//! for `:`, compares the prefix with the registered names, and takes the bare name as a
//! slice of the frame (no copy, no allocation); the dispatcher then compares
//! `cx.rpc.callee.service` with the registered names, newest first. The services are
//! held in a chain of types (no boxing, no dynamic dispatch), so each is called as
//! directly as a single service is.

use std::borrow::Cow;
use std::fmt;

use thrift_wire::{ApplicationException, ApplicationExceptionKind, Encoder, Sizer, Utf8Bytes};

use super::{Body, Dispatch, DispatchError, ServerRequest, ServiceFacts, ServiceInfo};
use crate::codec::SERVICE_SEPARATOR;
use crate::codec::ttheader::{Header, str_key};
use crate::context::ServerContext;
use crate::service::Service;

/// Several services behind one server: a dispatcher that runs each call in the service
/// it was routed to (see the [module docs](self)), made with [`Multiplex::new`] and
/// [`service`](Multiplex::service), and served with
/// [`Server::multiplexed`](super::Server::multiplexed).
///
/// `R` is the chain of services ([`NamedService`]s ending in [`NoRoute`]); it grows with each
/// service added, so that each is called without boxing.
pub struct Multiplex<R = NoRoute> {
    routes: R,
    table: Table,
}

impl<R> fmt::Debug for Multiplex<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Multiplex")
            .field("services", &self.table)
            .finish_non_exhaustive()
    }
}

impl Default for Multiplex {
    fn default() -> Self {
        Self::new()
    }
}

impl Multiplex {
    /// No services yet.
    pub fn new() -> Self {
        Multiplex {
            routes: NoRoute,
            table: Table::default(),
        }
    }
}

impl<R> Multiplex<R> {
    /// Adds `service` under its IDL name ([`ServiceInfo::NAME`]): calls named
    /// `<NAME>:method`, and TTHeader calls whose `isn` is `NAME`, go to it.
    pub fn service<S: Dispatch + ServiceInfo>(self, service: S) -> Multiplex<NamedService<S, R>> {
        self.service_as(S::NAME, service)
    }

    /// Adds `service` under `name` instead of its IDL name (Apache's
    /// `registerProcessor(name, processor)`): calls named `<name>:method` go to it;
    /// TTHeader's `isn` still finds it by its IDL name. A name may be given to one
    /// service only, and may not be empty or hold a `:` ([`Server::bind`] fails
    /// otherwise).
    ///
    /// [`Server::bind`]: super::Server::bind
    pub fn service_as<S: Dispatch + ServiceInfo>(
        self,
        name: &'static str,
        service: S,
    ) -> Multiplex<NamedService<S, R>> {
        self.add(ServiceFacts::of::<S>().named(name), S::NAME, service)
    }

    /// Adds `service` under the name of `facts`, which say which of its methods are
    /// oneway (a service whose IDL is read at run time: see [`ServiceFacts::new`]).
    /// TTHeader's `isn` finds it by that name too.
    pub fn service_with_facts<S: Dispatch>(
        self,
        facts: ServiceFacts,
        service: S,
    ) -> Multiplex<NamedService<S, R>> {
        let name = facts.name();
        self.add(facts, name, service)
    }

    fn add<S: Dispatch>(
        mut self,
        served: ServiceFacts,
        idl: &'static str,
        service: S,
    ) -> Multiplex<NamedService<S, R>> {
        let name = served.name();
        self.table.add(Entry { served, idl });
        Multiplex {
            routes: NamedService {
                name,
                service,
                rest: self.routes,
            },
            table: self.table,
        }
    }

    /// Adds `service` under its IDL name, as [`service`](Multiplex::service) does, and
    /// makes it the default: calls that name no service (no `Service:` prefix, no
    /// TTHeader `isn` of a registered service) go to it, as Apache's
    /// `registerDefault` does for clients that do not multiplex. One service at most
    /// may be the default.
    pub fn default_service<S: Dispatch + ServiceInfo>(
        mut self,
        service: S,
    ) -> Multiplex<NamedService<S, R>> {
        self.table.set_default();
        self.service(service)
    }

    /// The names the services are registered under, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.table.entries.iter().map(|e| e.served.name())
    }

    /// The routing table, for the server.
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }
}

impl<R> Service<ServerContext, ServerRequest> for Multiplex<R>
where
    R: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = R::Response;
    type Error = DispatchError;

    /// Runs the call in the service registered under `cx.rpc.callee.service` (where
    /// the server's routing put it), with the bare method name in `cx.rpc.method`.
    fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> impl Future<Output = Result<R::Response, DispatchError>> + Send {
        self.routes.call(cx, req)
    }
}

/// One service of a [`Multiplex`] and the services added before it.
#[derive(Debug, Clone)]
pub struct NamedService<S, Rest> {
    name: &'static str,
    service: S,
    rest: Rest,
}

impl<S, Rest> Service<ServerContext, ServerRequest> for NamedService<S, Rest>
where
    S: Dispatch,
    Rest: Service<ServerContext, ServerRequest, Error = DispatchError> + Send + Sync + 'static,
    Rest::Response: Body,
{
    type Response = EitherReply<S::Reply, Rest::Response>;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<Self::Response, DispatchError> {
        if cx.rpc.callee.service == self.name {
            self.service.call(cx, req).await.map(EitherReply::This)
        } else {
            self.rest.call(cx, req).await.map(EitherReply::Rest)
        }
    }
}

/// The end of a [`Multiplex`]'s chain: the call names no service registered (a layer
/// changed `cx.rpc.callee.service`, or the dispatcher runs outside a server). Fails
/// with `UNKNOWN_METHOD`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRoute;

impl Service<ServerContext, ServerRequest> for NoRoute {
    type Response = NoReply;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        _req: ServerRequest,
    ) -> Result<NoReply, DispatchError> {
        Err(DispatchError::Application(ApplicationException::new(
            ApplicationExceptionKind::UnknownMethod,
            format!("unknown service {}", cx.rpc.callee.service),
        )))
    }
}

/// The reply [`NoRoute`] never gives (it has no values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {}

impl Body for NoReply {
    fn size<Sz: Sizer>(&self, _s: &mut Sz) -> usize {
        match *self {}
    }

    fn encode<E: Encoder>(&self, _e: &mut E) {
        match *self {}
    }
}

/// The reply of a [`NamedService`]: its own service's, or one from the services before it.
#[derive(Debug, Clone, PartialEq)]
pub enum EitherReply<A, B> {
    /// From the route's own service.
    This(A),
    /// From a service added before it.
    Rest(B),
}

impl<A: Body, B: Body> Body for EitherReply<A, B> {
    fn size<Sz: Sizer>(&self, s: &mut Sz) -> usize {
        match self {
            EitherReply::This(r) => r.size(s),
            EitherReply::Rest(r) => r.size(s),
        }
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        match self {
            EitherReply::This(r) => r.encode(e),
            EitherReply::Rest(r) => r.encode(e),
        }
    }
}

/// What the server knows of the services it runs, to route and answer calls before any
/// layer sees them.
#[derive(Debug, Clone)]
pub(crate) enum Services {
    /// One service ([`Server::new`](super::Server::new)): every call is its, by the name
    /// it came with.
    One(ServiceFacts),
    /// Several ([`Server::multiplexed`](super::Server::multiplexed)), routed.
    Many(Table),
}

impl Services {
    /// The names the services are served under (and registered under).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        match self {
            Services::One(d) => vec![d.name()],
            Services::Many(table) => table.entries.iter().map(|e| e.served.name()).collect(),
        }
    }

    /// Whether the server can run with these services; why not, otherwise.
    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            Services::One(_) => Ok(()),
            Services::Many(table) => table.check(),
        }
    }
}

/// A registered service: the name it is routed by, its oneway methods, its IDL name.
#[derive(Clone)]
struct Entry {
    /// Registered under `served.name`.
    served: ServiceFacts,
    /// Its IDL name, which TTHeader's `isn` carries.
    idl: &'static str,
}

/// The services of a multiplexed server, in the order they were added.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    entries: Vec<Entry>,
    /// Which entry takes the calls that name no service.
    default: Option<usize>,
    /// Asked for the default more than once.
    defaults_asked: usize,
}

/// A call the table found no service for: the name to answer it under, and why.
#[derive(Debug)]
pub(crate) struct Unrouted {
    /// The bare method when the call had a prefix, else the name as it came.
    pub(crate) method: Utf8Bytes,
    /// What the caller is told.
    pub(crate) exception: ApplicationException,
}

impl Table {
    fn add(&mut self, entry: Entry) {
        self.entries.push(entry);
    }

    /// Makes the next entry added the default.
    fn set_default(&mut self) {
        self.default = Some(self.entries.len());
        self.defaults_asked += 1;
    }

    fn check(&self) -> Result<(), String> {
        if self.entries.is_empty() {
            return Err("a multiplexed server needs at least one service".into());
        }
        if self.defaults_asked > 1 {
            return Err("a multiplexed server has one default service at most".into());
        }
        for (i, e) in self.entries.iter().enumerate() {
            let name = e.served.name();
            if name.is_empty() || name.contains(SERVICE_SEPARATOR) {
                return Err(format!(
                    "{name:?} cannot be a service name: calls are routed by the name \
                     before the first {SERVICE_SEPARATOR:?}"
                ));
            }
            if self.entries[..i].iter().any(|o| o.served.name() == name) {
                return Err(format!("two services are registered as {name:?}"));
            }
        }
        Ok(())
    }

    fn by_name(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.served.name() == name)
    }

    /// The service a call named `name` goes to (see the [module docs](self)), and the
    /// bare method name, a slice of `name`.
    pub(crate) fn route(
        &self,
        name: &Utf8Bytes,
        ttheader: Option<&Header>,
    ) -> Result<(&ServiceFacts, Utf8Bytes), Unrouted> {
        let unrouted = |method: Utf8Bytes, why: String| Unrouted {
            method,
            exception: ApplicationException::new(ApplicationExceptionKind::UnknownMethod, why),
        };
        if let Some(at) = name.find(SERVICE_SEPARATOR) {
            // The separator is one byte: the method starts on a character boundary.
            let method = name.slice_from(at + 1).unwrap_or_default();
            let service = &name[..at];
            return match self.by_name(service) {
                Some(e) => Ok((&e.served, method)),
                None => Err(unrouted(
                    method,
                    format!("unknown service {service} (in the method name {name})"),
                )),
            };
        }
        let isn = ttheader.and_then(|h| h.str_value(str_key::IDL_SERVICE_NAME));
        if let Some(e) = isn.and_then(|isn| self.entries.iter().find(|e| e.idl == isn)) {
            return Ok((&e.served, name.clone()));
        }
        match self.default.and_then(|i| self.entries.get(i)) {
            Some(e) => Ok((&e.served, name.clone())),
            None => {
                let why = match isn {
                    Some(isn) => Cow::Owned(format!("unknown service {isn} (TTHeader isn)")),
                    None => Cow::Borrowed("no service named (expected Service:method)"),
                };
                Err(unrouted(
                    name.clone(),
                    format!("{why}, and the server has no default service for {name}"),
                ))
            }
        }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.served.name(), self.idl)
    }
}

#[cfg(test)]
mod tests;
