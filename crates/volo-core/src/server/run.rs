//! Binding, accepting, limits, registration and graceful shutdown.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::conn;
use super::conn_core::peer_name;
use super::deadline::{DEFAULT_GRACE, Deadline, DeadlineLayer};
use super::inline;
use super::multiplex::{Multiplex, Services};
use super::state::ServerState;
use super::{
    Dispatch, LimitConfig, NoStreams, ServerConfig, ServesStreams, ServiceFacts, ServiceInfo,
    StreamSupport, Streams,
};
use crate::context::Address;
use crate::governance::ServerGovernance;
use crate::metrics::ServerConns;
use crate::registry::{Registration, Registry, RegistryInfo};
use crate::service::{Identity, Layer, Stack};
use crate::transport::tls::{self, ServerTls};
use crate::transport::{Acceptor, Conn, TransportKind};

/// A server for one service ([`Server::new`]), or for several
/// ([`Server::multiplexed`]): bind it to an address, then serve.
///
/// `D` is the dispatcher the server runs (a generated `<Service>Server`, or a
/// [`Multiplex`] of them), `L` the layers added with [`layer`](Server::layer), the
/// first added outermost, and `St` whether it serves streams ([`NoStreams`], or
/// [`Streams`] after [`streams`](Server::streams)). When bound, the server composes
/// its stack in one place: its built-in layers around `L` around a [`Deadline`] around
/// `D` (beside the stream handler, for a server of streams: see
/// [the stack of one call](super#the-stack-of-one-call) and
/// [one stack for calls and streams](super#one-stack-for-calls-and-streams)).
///
/// ```no_run
/// # use volo_core::server::{Server, Dispatch, ServiceInfo};
/// # async fn run<D: Dispatch + ServiceInfo>(dispatcher: D) -> std::io::Result<()> {
/// let bound = Server::new(dispatcher).bind(&"127.0.0.1:8080".parse().unwrap()).await?;
/// println!("listening on {:?}", bound.local_addr());
/// bound.serve_with_shutdown(async { let _ = tokio::signal::ctrl_c().await; }).await
/// # }
/// ```
pub struct Server<D, L = Identity, St = NoStreams> {
    dispatch: D,
    layers: L,
    grace: Duration,
    services: Services,
    config: ServerConfig,
    limit: LimitConfig,
    governance: Option<ServerGovernance>,
    registry: Option<(Arc<dyn Registry>, RegistryInfo)>,
    /// Whether the server serves streams, and with what handler.
    streams: St,
}

impl<D: std::fmt::Debug, L, St> std::fmt::Debug for Server<D, L, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("dispatch", &self.dispatch)
            .field("grace", &self.grace)
            .field("services", &self.services)
            .field("config", &self.config)
            .field("limit", &self.limit)
            .field("registry", &self.registry.as_ref().map(|(_, info)| info))
            .finish_non_exhaustive()
    }
}

impl<D: Dispatch + ServiceInfo> Server<D> {
    /// A server for `dispatch` (a generated `<Service>Server`) with the default
    /// [`ServerConfig`]. It learns the service's name and oneway methods from
    /// [`ServiceInfo`], and puts a [`Deadline`] layer around the dispatcher, so that a
    /// call whose caller's deadline passed is dropped and answered.
    pub fn new(dispatch: D) -> Self {
        Server::with_facts(dispatch, ServiceFacts::of::<D>())
    }
}

impl<D: Dispatch> Server<D> {
    /// A server for `dispatch`, a service whose name and oneway methods `facts` gives
    /// (a dispatcher without generated code, whose IDL is read at run time), with the
    /// default [`ServerConfig`] and a [`Deadline`] layer, as [`Server::new`] makes.
    pub fn with_facts(dispatch: D, facts: ServiceFacts) -> Self {
        Server {
            services: Services::One(facts),
            dispatch,
            layers: Identity,
            grace: DEFAULT_GRACE,
            config: ServerConfig::default(),
            limit: LimitConfig::default(),
            governance: None,
            registry: None,
            streams: NoStreams,
        }
    }
}

impl<R> Server<Multiplex<R>>
where
    Multiplex<R>: Dispatch,
{
    /// A server for the services of `multiplex` (one server, several services: see
    /// [`Multiplex`]), with the default [`ServerConfig`] and a [`Deadline`] layer
    /// around the dispatcher, as [`Server::new`] puts one. Each call is routed by its
    /// method name's `Service:` prefix (Apache's `TMultiplexedProtocol`), by
    /// TTHeader's `isn` key (Kitex, Volo), or to the default service, before the
    /// layers see it.
    ///
    /// [`bind`](Server::bind) fails when `multiplex` has no service, two services of
    /// one name, or more than one default.
    pub fn multiplexed(multiplex: Multiplex<R>) -> Self {
        Server {
            services: Services::Many(multiplex.table().clone()),
            dispatch: multiplex,
            layers: Identity,
            grace: DEFAULT_GRACE,
            config: ServerConfig::default(),
            limit: LimitConfig::default(),
            governance: None,
            registry: None,
            streams: NoStreams,
        }
    }
}

impl<D, L, St> Server<D, L, St> {
    /// How long after a caller's deadline the server answers a call it gave up on
    /// (default [`DEFAULT_GRACE`], 100 ms; see [`deadline`](super::deadline)). The
    /// handler is dropped at the deadline whatever this is.
    pub fn deadline_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Adds `layer` to the service stack, inside the layers added so far: the first
    /// added is the outermost, as on the client
    /// ([`ClientBuilder::layer`](crate::client::ClientBuilder::layer)). A server-side
    /// layer is a [`Layer`] whose service is again a [`Dispatch`], so it sees every
    /// call (method, context, the encoded request, the reply or error) and may answer
    /// it itself. The layers run outside the [`Deadline`] and inside the server's
    /// built-ins.
    pub fn layer<N>(self, layer: N) -> Server<D, Stack<N, L>, St> {
        Server {
            dispatch: self.dispatch,
            layers: Stack::new(layer, self.layers),
            grace: self.grace,
            services: self.services,
            config: self.config,
            limit: self.limit,
            governance: self.governance,
            registry: self.registry,
            streams: self.streams,
        }
    }

    /// Serves streaming calls too (Kitex's StreamX over TTHeader, see
    /// [`stream`](crate::stream)) with `handler`, on the same addresses: a connection
    /// whose first frame carries TTHeader's streaming flag is a streaming connection,
    /// any other serves ping-pong calls, as Kitex's server tells them apart. Such a
    /// server serves its netpoll-rs connections on tasks (as with
    /// [`ServerConfig::inline_dispatch`] off), since which kind a connection is is
    /// known only once its first bytes arrive.
    ///
    /// Each stream's opening goes down the server's stack as a call does (see
    /// [one stack for calls and streams](super#one-stack-for-calls-and-streams)), so
    /// every layer added with [`layer`](Self::layer), before or after, must serve
    /// streams too: be written over [`ServerCall`](super::ServerCall).
    pub fn streams(self, handler: impl super::StreamHandler) -> Server<D, L, Streams> {
        Server {
            dispatch: self.dispatch,
            layers: self.layers,
            grace: self.grace,
            services: self.services,
            config: self.config,
            limit: self.limit,
            governance: self.governance,
            registry: self.registry,
            streams: Streams::new(handler),
        }
    }

    /// Sets the limits and window of the streams: the configuration's
    /// [`streams`](ServerConfig::streams) (a later [`config`](Self::config) replaces
    /// them with its own).
    pub fn stream_config(mut self, config: crate::stream::StreamConfig) -> Self {
        self.config.streams = config;
        self
    }

    /// Registers the server's instance with `registry`, described by `info`, once it
    /// listens; deregisters it on a graceful shutdown before the drain starts (see
    /// [`registry`](crate::registry)). One registration per service the server serves,
    /// each with every address it listens on.
    pub fn registry(mut self, registry: impl Registry, info: RegistryInfo) -> Self {
        self.registry = Some((Arc::new(registry), info));
        self
    }

    /// Replaces the configuration.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Limits on calls in progress and calls per second, checked by the outermost
    /// built-in layer ([`Limit`](super::limit::Limit)) before the arguments are
    /// decoded: a call over them is refused at once with
    /// a `TApplicationException` (`INTERNAL_ERROR`, message starting with
    /// [`OVERLOAD_PREFIX`](crate::refusal::OVERLOAD_PREFIX); clients of this crate see
    /// [`ErrorKind::Overloaded`](crate::client::ErrorKind::Overloaded) and may retry
    /// elsewhere), never queued. Default: no limits (see [`LimitConfig`]).
    pub fn limit(mut self, limit: LimitConfig) -> Self {
        self.limit = limit;
        self
    }

    /// Follows `governance`'s limits while it has a rule in force (a config
    /// center's, see [`crate::governance`]): its QPS and concurrency limits replace
    /// those of [`limit`](Self::limit), and its connection limit closes connections
    /// accepted beyond it (within `max_connections`, which still holds). With
    /// metrics on, the limits in force are reported. Default: none.
    pub fn governance(mut self, governance: ServerGovernance) -> Self {
        self.governance = Some(governance);
        self
    }

    /// What the server's connections share: the stack composed
    /// ([`compose`](super::stack::compose)), and the rest.
    pub(super) fn into_shared(self) -> ServerState<L::Service>
    where
        St: StreamSupport<D> + ServesStreams<L::Service>,
        L: Layer<Deadline<St::Bottom>>,
        L::Service: Dispatch,
    {
        let bottom = self.streams.bottom(self.dispatch);
        let stack = self
            .layers
            .layer(DeadlineLayer::new().layer(bottom).with_grace(self.grace));
        if let (Some(metrics), Some(g)) = (&self.config.observability.metrics, &self.governance) {
            metrics.watch_server_governance(g);
        }
        let mut state = ServerState::new(
            stack,
            self.services,
            self.config,
            (self.limit, self.governance),
        );
        state.streams = self
            .streams
            .serving(Arc::clone(&state.stack), state.config.streams);
        state
    }

    /// Listens on `addr` (`ip:port`, `name:port`, `unix:/path` or `shm:/path`; port 0
    /// picks a free port). A host name is resolved, and the server listens on the
    /// first of its addresses that it can bind. Must run inside a tokio runtime: the
    /// reactor's pollers become tasks of it. Fails (`InvalidInput`) when the services
    /// of a multiplexed server cannot be routed (see [`Server::multiplexed`]).
    ///
    /// With [`ServerConfig::tls`], connections to a TCP address are TLS ones; those to
    /// a Unix socket or shared memory are not (see [`tls`](crate::transport::tls)).
    pub async fn bind(self, addr: &Address) -> io::Result<BoundServer<L::Service>>
    where
        St: StreamSupport<D> + ServesStreams<L::Service>,
        L: Layer<Deadline<St::Bottom>>,
        L::Service: Dispatch,
    {
        self.bind_all(std::slice::from_ref(addr)).await
    }

    /// Listens on every address of `addrs` (as [`bind`](Self::bind) does on one):
    /// one server, whose calls share its limits, on TCP, a Unix socket and shared
    /// memory at once, say. A registry gets them all, so that a client on the same
    /// host can pick the nearest (see [`registry`](crate::registry)). Fails when
    /// `addrs` is empty or any of them cannot be bound.
    pub async fn bind_all(self, addrs: &[Address]) -> io::Result<BoundServer<L::Service>>
    where
        St: StreamSupport<D> + ServesStreams<L::Service>,
        L: Layer<Deadline<St::Bottom>>,
        L::Service: Dispatch,
    {
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a server needs an address to listen on",
            ));
        }
        self.services
            .check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // Read once: logged with the sizes chosen, and the baseline the serving server
        // compares later readings with.
        let cpus = netpoll_rs::cpus::CpuBudget::current();
        let reactor = match self.config.transport.kind {
            TransportKind::Netpoll => {
                let runtime = tokio::runtime::Handle::current();
                let mut reactor = self.config.transport.reactor.clone();
                // A server of streams serves its connections on tasks (which kind a
                // connection is shows only in its first bytes): pollers on the runtime
                // wake them without a thread switch.
                Some(
                    if self.config.inline_dispatch && !self.streams.serves_streams() {
                        // Calls start on the pollers: one per worker thread spreads them as
                        // tasks per connection would be. On threads of their own, each wait
                        // is one `epoll_wait`; as tasks of the runtime it would be two
                        // (tokio's, then the poller's).
                        reactor.pollers = reactor.pollers.max(runtime.metrics().num_workers());
                        log_sizes(&reactor, &runtime, &cpus, "threads of their own");
                        netpoll_rs::Reactor::new(reactor)?
                    } else {
                        // Calls run on the connections' tasks: pollers on the runtime wake
                        // them without a thread switch.
                        log_sizes(&reactor, &runtime, &cpus, "tasks of the runtime");
                        netpoll_rs::Reactor::on_runtime(&runtime, reactor)?
                    },
                )
            }
            TransportKind::Tokio => None,
        };
        let mut listeners = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let (acceptor, local) =
                Acceptor::bind(self.config.transport.kind, addr, reactor.as_ref()).await?;
            let tls = self.config.tls.clone().filter(|_| acceptor.is_tcp());
            listeners.push(Listening {
                acceptor,
                local,
                tls,
            });
        }
        let connections = Arc::new(Semaphore::new(self.config.capacity.max_connections));
        let registrations = match &self.registry {
            Some((registry, info)) => {
                let addresses: Vec<Address> = listeners.iter().map(|l| l.local.clone()).collect();
                warn_unroutable(&addresses);
                let each = self
                    .services
                    .names()
                    .into_iter()
                    .map(|service| Registration {
                        service: service.to_string(),
                        addresses: addresses.clone(),
                        weight: info.weight,
                        tags: info.tags.clone(),
                        host: info.host.clone(),
                    });
                Some((Arc::clone(registry), each.collect()))
            }
            None => None,
        };
        Ok(BoundServer {
            registrations,
            shared: Arc::new(self.into_shared()),
            reactor,
            listeners,
            connections,
            cpus_at_start: cpus.usable,
        })
    }
}

/// Warns of registered addresses no client can call (a wildcard IP).
fn warn_unroutable(addresses: &[Address]) {
    for a in addresses {
        if let Address::Tcp(ip) = a
            && ip.ip().is_unspecified()
        {
            tracing::warn!(
                address = %a,
                "registering a wildcard address, which clients cannot call: bind the \
                 address clients should use"
            );
        }
    }
}

/// One address a server listens on.
#[derive(Debug)]
struct Listening {
    acceptor: Acceptor,
    /// The address it listens on (for TCP, with the port picked).
    local: Address,
    /// The TLS settings, when on and the listener is a TCP one.
    tls: Option<ServerTls>,
}

/// A server that listens and has not started serving yet.
pub struct BoundServer<D> {
    shared: Arc<ServerState<D>>,
    pub(super) reactor: Option<netpoll_rs::Reactor>,
    listeners: Vec<Listening>,
    connections: Arc<Semaphore>,
    /// The registry and what to register with it, one per service.
    registrations: Option<(Arc<dyn Registry>, Vec<Registration>)>,
    /// The CPUs the process could use when it was bound (see
    /// [`netpoll_rs::cpus::CpuBudget::usable`]).
    cpus_at_start: usize,
}

impl<D> std::fmt::Debug for BoundServer<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundServer")
            .field("shared", &self.shared)
            .field("listeners", &self.listeners)
            .field(
                "registrations",
                &self.registrations.as_ref().map(|(_, r)| r),
            )
            .finish_non_exhaustive()
    }
}

impl<D> std::fmt::Debug for ServerState<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<D> BoundServer<D> {
    /// Whether the connections open, the one just accepted among them, pass a
    /// governance's connection limit (they count as the permits taken from
    /// `connections`).
    fn over_governed_connections(&self) -> bool {
        let Some(limit) = self
            .shared
            .governance
            .as_ref()
            .and_then(|g| g.limit())
            .and_then(|rule| rule.connections)
        else {
            return false;
        };
        let open =
            self.shared.config.capacity.max_connections - self.connections.available_permits();
        if open > limit {
            tracing::debug!(
                open,
                limit,
                "server: over the governed connection limit; closed"
            );
            return true;
        }
        false
    }
}

impl<D: Dispatch> BoundServer<D> {
    /// The (first) address it listens on (for TCP, with the port picked).
    pub fn local_addr(&self) -> &Address {
        &self.listeners[0].local
    }

    /// Every address it listens on, in the order given to
    /// [`bind_all`](Server::bind_all).
    pub fn local_addrs(&self) -> impl Iterator<Item = &Address> {
        self.listeners.iter().map(|l| &l.local)
    }

    /// Serves until the process ends.
    pub async fn serve(self) -> io::Result<()> {
        self.serve_with_shutdown(std::future::pending()).await
    }

    /// Serves until `signal` completes, then shuts down gracefully (see
    /// [A graceful stop](super#a-graceful-stop)): deregisters and keeps serving for
    /// [`ServerTimeouts::exit_wait`](super::ServerTimeouts::exit_wait) (when it has a [registry](Server::registry)), stops
    /// accepting, tells its connections it is closing, answers the calls in hand and
    /// refuses the rest unrun, for up to [`ServerTimeouts::drain`](super::ServerTimeouts::drain), then closes
    /// what is left.
    ///
    /// With a registry, the instance is registered first; a failed registration
    /// ends it at once with that error (kind `Other`), before any call is served.
    pub async fn serve_with_shutdown(mut self, signal: impl Future<Output = ()>) -> io::Result<()> {
        let registered = match self.registrations.take() {
            Some((registry, list)) => match Registered::register(registry, list).await {
                Ok(done) => Some(done),
                Err(e) => {
                    for l in std::mem::take(&mut self.listeners) {
                        l.acceptor.close();
                    }
                    if let Some(r) = &self.reactor {
                        r.shutdown();
                    }
                    return Err(e);
                }
            },
            None => None,
        };
        let listeners = std::mem::take(&mut self.listeners);
        let mut accepts = stream::select_all(listeners.iter().map(|l| {
            Box::pin(stream::unfold(l, |l| async move {
                let accepted = l.acceptor.accept().await;
                Some(((accepted, l.tls.clone()), l))
            }))
        }));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        // Connections served on the pollers have no task: they are reached through
        // `live`, and closed if this future is dropped.
        let live = Arc::new(inline::Live::default());
        let _close_live = CloseAll(&live);
        // After the signal: deregistered, the clients are given the exit wait to learn
        // of it, while the server serves on as before.
        let exit_wait = self.shared.config.timeouts.exit_wait;
        let mut leaving = std::pin::pin!(async move {
            signal.await;
            if let Some(registered) = registered {
                registered.deregister().await;
                tracing::info!(?exit_wait, "deregistered: serving on for the exit wait");
                tokio::time::sleep(exit_wait).await;
            }
        });
        // The CPUs the process may use, read again now and then: the pools keep the
        // sizes chosen at start, so a change is worth a warning.
        let mut cpus = netpoll_rs::cpus::BudgetWatch::new(self.cpus_at_start);
        let mut recheck =
            tokio::time::interval_at(tokio::time::Instant::now() + CPU_RECHECK, CPU_RECHECK);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let outcome = loop {
            while tasks.try_join_next().is_some() {}
            tokio::select! {
                () = &mut leaving => break Ok(()),
                _ = recheck.tick() => {
                    if let Some(change) = cpus.observe(netpoll_rs::cpus::CpuBudget::current()) {
                        tracing::warn!(
                            was = change.was,
                            cpus = %change.now,
                            sized_for = change.sized_for,
                            "server: the CPUs this process may use changed; its reactor \
                             and runtime keep the thread counts chosen at start"
                        );
                    }
                }
                Some((accepted, tls)) = accepts.next() => {
                    let conn = match accepted {
                        Ok(c) => c,
                        Err(e) if is_transient(&e) => continue,
                        Err(e) => break Err(e),
                    };
                    // Over the connection limit: closed at once (dropping it).
                    let Ok(permit) = Arc::clone(&self.connections).try_acquire_owned() else {
                        continue;
                    };
                    if self.over_governed_connections() {
                        continue;
                    }
                    let shared = Arc::clone(&self.shared);
                    // Counted open while its place is held.
                    let permit = (permit, shared.counters.as_ref().map(ServerConns::opened));
                    let conn = match conn {
                        Conn::Netpoll(c)
                            if shared.config.inline_dispatch
                                && tls.is_none()
                                && shared.streams.is_none() =>
                        {
                            inline::serve(c, shared, &live, permit);
                            continue;
                        }
                        conn => conn,
                    };
                    let mut stop = stop_rx.clone();
                    tasks.spawn(async move {
                        // A TLS handshake runs here, on the connection's own task.
                        let conn = match tls {
                            Some(tls) => {
                                let timeout = shared.config.timeouts.read;
                                match tls_accept(conn, &tls, timeout, &mut stop).await {
                                    Some(conn) => conn,
                                    None => return,
                                }
                            }
                            None => conn,
                        };
                        conn::serve(conn, shared, stop).await;
                        drop(permit);
                    });
                }
            }
        };
        drop(accepts);
        for l in listeners {
            l.acceptor.close();
        }
        let _ = stop_tx.send(true);
        live.shutdown();
        let drained = tokio::time::timeout(self.shared.config.timeouts.drain, async {
            while tasks.join_next().await.is_some() {}
            live.drained().await;
        })
        .await;
        if drained.is_err() {
            tasks.abort_all();
            live.close_all();
            while tasks.join_next().await.is_some() {}
        }
        if let Some(r) = &self.reactor {
            r.shutdown();
        }
        outcome
    }
}

/// How long a shutdown waits for the registry to deregister, at most.
const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(5);

/// A server's registrations, deregistered when the server shuts down, or (in a task)
/// when its future is dropped first: an instance whose server is gone must not stay
/// registered while its registry keeps it alive.
struct Registered {
    registry: Arc<dyn Registry>,
    list: Vec<Registration>,
}

impl Registered {
    /// Registers each of `list`; on a failure, deregisters those done and fails.
    async fn register(registry: Arc<dyn Registry>, list: Vec<Registration>) -> io::Result<Self> {
        for (i, r) in list.iter().enumerate() {
            if let Err(error) = registry.register(r).await {
                tracing::error!(service = %r.service, %error, "registering the instance failed");
                let done = Registered {
                    registry,
                    list: list[..i].to_vec(),
                };
                done.deregister().await;
                return Err(io::Error::other(error));
            }
            tracing::info!(service = %r.service, addresses = ?r.addresses, "registered");
        }
        Ok(Registered { registry, list })
    }

    /// Deregisters every registration, each within [`DEREGISTER_TIMEOUT`]; failures
    /// are logged (the registration then ends with its lease).
    async fn deregister(mut self) {
        let list = std::mem::take(&mut self.list);
        deregister_all(&*self.registry, &list).await;
    }
}

async fn deregister_all(registry: &dyn Registry, list: &[Registration]) {
    for r in list {
        match tokio::time::timeout(DEREGISTER_TIMEOUT, registry.deregister(r)).await {
            Ok(Ok(())) => tracing::info!(service = %r.service, "deregistered"),
            Ok(Err(error)) => {
                tracing::warn!(service = %r.service, %error, "deregistering the instance failed");
            }
            Err(_) => tracing::warn!(
                service = %r.service,
                "deregistering the instance timed out after {DEREGISTER_TIMEOUT:?}"
            ),
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if self.list.is_empty() {
            return;
        }
        let list = std::mem::take(&mut self.list);
        let registry = Arc::clone(&self.registry);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { deregister_all(&*registry, &list).await });
        }
    }
}

/// Runs the TLS handshake of an accepted connection within `timeout`. On failure the
/// connection is closed (dropped) after one warning naming the peer; a shutdown
/// abandons the handshake.
async fn tls_accept(
    conn: Conn,
    tls: &ServerTls,
    timeout: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Option<Conn> {
    let peer = crate::transport::FrameIo::peer(&conn);
    tokio::select! {
        done = tls::accept(conn, tls, timeout) => match done {
            Ok(conn) => Some(conn),
            Err(error) => {
                let peer = peer_name(peer.as_ref());
                tracing::warn!(%peer, %error, "closing a connection whose TLS handshake failed");
                None
            }
        },
        Ok(_) = stop.wait_for(|stopping| *stopping) => None,
    }
}

/// Closes the connections of a [`inline::Live`] when dropped: when the server's future
/// ends, or is dropped before it ends.
struct CloseAll<'a>(&'a inline::Live);

impl Drop for CloseAll<'_> {
    fn drop(&mut self) {
        self.0.close_all();
    }
}

/// Accept errors that concern one connection or a passing shortage, not the listener.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || e.raw_os_error().is_some_and(|c| c == 24 || c == 23) // EMFILE, ENFILE
}

/// How long a registered server serves on after deregistering, by default: an etcd
/// watch brings the news in milliseconds; a second covers a watcher on a busy machine.
pub(crate) const DEFAULT_EXIT_WAIT: Duration = Duration::from_secs(1);

/// How long a drained server waits at most, by default.
pub(crate) const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// How often a serving server reads its CPU budget again (see
/// [`BudgetWatch`](netpoll_rs::cpus::BudgetWatch)).
const CPU_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Logs, once per server, the sizes its threads were given and the CPU budget they
/// come from (see `netpoll_rs::cpus`): a pod whose quota is not what its pools were
/// sized for shows it here.
fn log_sizes(
    reactor: &netpoll_rs::Config,
    runtime: &tokio::runtime::Handle,
    cpus: &netpoll_rs::cpus::CpuBudget,
    pollers_as: &'static str,
) {
    tracing::info!(
        pollers = reactor.pollers,
        pollers_as,
        runtime_workers = runtime.metrics().num_workers(),
        cpus = %cpus,
        "server: netpoll reactor sized"
    );
}
