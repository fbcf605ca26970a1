//! Building a client: where the instances are, the settings, and the layers.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use super::backup::{Backup, BackupLayer, BackupPolicy};
use super::balance::{
    Balance, BalanceLayer, Discover, Instance, LoadBalance, StaticDiscover, WeightedRandom,
};
use super::breaker::{BreakerConfig, InstanceBreakers, ServiceBreaker, ServiceBreakerLayer};
use super::metered::MeteredClient;
use super::retry::{Retry, RetryLayer, RetryPolicy};
use super::timeout::{Timeout, TimeoutLayer};
use super::trace::{Trace, TraceAttempt, TraceAttemptLayer};
use super::{Client, ClientConfig, Transport};
use crate::context::Address;
use crate::governance::ClientGovernance;
use crate::service::{Identity, Layer, Stack};

/// The stack a builder makes around `T` (the transport, with any inner layers): the
/// call's span, metrics (counting only with [`Observability::metrics`](crate::config::Observability::metrics)), timeout,
/// service breaker, failure retry, backup requests, balancing (with the instance
/// breakers), each attempt's span.
pub type DefaultStack<T = Transport> =
    Trace<MeteredClient<Timeout<ServiceBreaker<Retry<Backup<Balance<TraceAttempt<T>>>>>>>>;

/// What a builder gives back: how a client type wraps the stack it built. Generated
/// clients have a `Maker` of their own; [`Untyped`] gives a [`Client`].
pub trait MakeClient<S> {
    /// The client.
    type Client;

    /// Wraps `client`.
    fn make_client(client: Client<S>) -> Self::Client;
}

/// Makes the untyped [`Client`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Untyped;

impl<S> MakeClient<S> for Untyped {
    type Client = Client<S>;

    fn make_client(client: Client<S>) -> Client<S> {
        client
    }
}

/// Builds a client: its instances (one address, a list, or a [`Discover`]), its
/// [`ClientConfig`], a balancer, and layers: [`layer`](Self::layer) around the whole
/// call, [`layer_inner`](Self::layer_inner) around each attempt (below the balancer,
/// so they see the instance picked in `cx.rpc.callee.address`). Layers added first
/// are outermost.
#[must_use]
pub struct ClientBuilder<M, O = Identity, I = Identity> {
    settings: Settings,
    outer: O,
    inner: I,
    make: std::marker::PhantomData<fn() -> M>,
}

/// What a builder knows besides its layers (which change its type as they are added).
struct Settings {
    service: Cow<'static, str>,
    discover: Option<Arc<dyn Discover>>,
    balance: Option<Arc<dyn LoadBalance>>,
    config: ClientConfig,
    retry: RetryPolicy,
    backup: Option<BackupPolicy>,
    idempotent: Vec<String>,
    service_breaker: BreakerConfig,
    instance_breaker: Option<BreakerConfig>,
    multiplexed: Option<Cow<'static, str>>,
    governance: Option<ClientGovernance>,
}

impl<M, O: std::fmt::Debug, I: std::fmt::Debug> std::fmt::Debug for ClientBuilder<M, O, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("service", &self.settings.service)
            .field("config", &self.settings.config)
            .field("outer", &self.outer)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<M> ClientBuilder<M> {
    /// A builder of a client of `service` (the callee's name, sent in TTHeader), with
    /// the default settings and no instances yet.
    pub fn new(service: impl Into<Cow<'static, str>>) -> Self {
        ClientBuilder {
            settings: Settings {
                service: service.into(),
                discover: None,
                balance: None,
                config: ClientConfig::default(),
                retry: RetryPolicy::default(),
                backup: None,
                idempotent: Vec::new(),
                service_breaker: BreakerConfig::service(),
                instance_breaker: Some(BreakerConfig::instance()),
                multiplexed: None,
                governance: None,
            },
            outer: Identity,
            inner: Identity,
            make: std::marker::PhantomData,
        }
    }
}

impl<M, O, I> ClientBuilder<M, O, I> {
    /// One instance at `addr`.
    pub fn address(self, addr: Address) -> Self {
        self.addresses([addr])
    }

    /// A fixed list of instances, of equal weight (static discovery).
    pub fn addresses(self, addrs: impl IntoIterator<Item = Address>) -> Self {
        self.discover(StaticDiscover::new(addrs.into_iter().map(Instance::new)))
    }

    /// The instances `discover` finds, asked on each attempt.
    pub fn discover(mut self, discover: impl Discover) -> Self {
        self.settings.discover = Some(Arc::new(discover));
        self
    }

    /// How an instance is picked for each attempt. Default [`WeightedRandom`].
    pub fn load_balance(mut self, balance: impl LoadBalance) -> Self {
        self.settings.balance = Some(Arc::new(balance));
        self
    }

    /// Replaces the settings.
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.settings.config = config;
        self
    }

    /// Marks `methods` idempotent: running one twice does no harm, so a call of one
    /// that failed after it was sent may be retried, and may get backup requests when
    /// they are on. Without marks only calls that never left (failed connects) are
    /// retried.
    pub fn idempotent<T: Into<String>>(mut self, methods: impl IntoIterator<Item = T>) -> Self {
        self.settings
            .idempotent
            .extend(methods.into_iter().map(Into::into));
        self
    }

    /// The failure retry policy. Default [`RetryPolicy::default`]: up to 2 retries,
    /// exponential backoff from 10 ms with jitter, a budget of 10% extra calls.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.settings.retry = policy;
        self
    }

    /// Turns backup requests on, for the methods marked idempotent (here or in the
    /// policy). Default off.
    pub fn backup(mut self, policy: BackupPolicy) -> Self {
        self.settings.backup = Some(policy);
        self
    }

    /// The breaker of the whole service: while open, calls fail at once with
    /// [`ErrorKind::CircuitOpen`](super::ErrorKind::CircuitOpen). Default
    /// [`BreakerConfig::service`]; [`BreakerConfig::disabled`] turns it off.
    pub fn service_breaker(mut self, config: BreakerConfig) -> Self {
        self.settings.service_breaker = config;
        self
    }

    /// The breakers of each instance: the balancer skips an instance whose breaker is
    /// open. Default [`BreakerConfig::instance`]; `None` turns them off.
    pub fn instance_breaker(mut self, config: Option<BreakerConfig>) -> Self {
        self.settings.instance_breaker = config;
        self
    }

    /// Takes timeouts, retry and backup rules and breaker thresholds per method from
    /// `governance` as they change (a config center's: see [`crate::governance`]);
    /// the settings given here hold where it has no rule. With metrics on, the rules
    /// in force are reported. Default: none.
    pub fn governance(mut self, governance: ClientGovernance) -> Self {
        self.settings.governance = Some(governance);
        self
    }

    /// The service name sent as the callee (the IDL's by default for generated
    /// clients).
    pub fn service_name(mut self, service: impl Into<Cow<'static, str>>) -> Self {
        self.settings.service = service.into();
        self
    }

    /// Binds the client to the service registered as `name` on a multiplexed server
    /// (Apache's `TMultiplexedProtocol`): calls go out as `name:method`, and with
    /// TTHeader name the callee's IDL service in the `isn` key (see
    /// [`Client`](super::Client#multiplexed-servers)). Default: not bound, calls go out
    /// under their bare method names.
    pub fn multiplexed_service(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.settings.multiplexed = Some(name.into());
        self
    }

    /// Adds `layer` around the whole call, inside the layers added so far.
    pub fn layer<L>(self, layer: L) -> ClientBuilder<M, Stack<L, O>, I> {
        ClientBuilder {
            settings: self.settings,
            outer: Stack::new(layer, self.outer),
            inner: self.inner,
            make: self.make,
        }
    }

    /// Adds `layer` around each attempt (below the balancer: the instance is in
    /// `cx.rpc.callee.address`), inside the inner layers added so far.
    pub fn layer_inner<L>(self, layer: L) -> ClientBuilder<M, O, Stack<L, I>> {
        ClientBuilder {
            settings: self.settings,
            outer: self.outer,
            inner: Stack::new(layer, self.inner),
            make: self.make,
        }
    }

    /// Builds the stack and the client. Must run inside a tokio runtime (the
    /// reactor's pollers are tasks of it). Fails without instances, or when the
    /// settings contradict each other (mux without TTHeader).
    pub fn build(self) -> io::Result<M::Client>
    where
        I: Layer<Transport>,
        O: Layer<DefaultStack<I::Service>>,
        M: MakeClient<O::Service>,
    {
        let transport = Transport::new(self.settings.config.clone())?;
        if let Some(discover) = &self.settings.discover {
            transport.follow(discover.changes());
        }
        let hooked = transport.clone();
        let closer = transport.clone();
        self.assemble(transport, Some(closer), move |breakers| {
            // A streaming connection that breaks under open streams counts against
            // its instance, as a failed attempt does.
            let breakers = breakers.clone();
            hooked.on_stream_break(Arc::new(move |addr| {
                if let Some(permit) = breakers.allow(addr) {
                    permit.record(true);
                }
            }));
        })
    }

    /// Builds the stack over `bottom` instead of a [`Transport`]: a service that
    /// sends each attempt to `cx.rpc.callee.address`. For tests of layers against a
    /// mock, and for transports of your own.
    pub fn build_on<T>(self, bottom: T) -> io::Result<M::Client>
    where
        I: Layer<T>,
        O: Layer<DefaultStack<I::Service>>,
        M: MakeClient<O::Service>,
    {
        self.assemble(bottom, None, |_| {})
    }

    /// Builds the stack over `bottom` (`transport` when it is one, for
    /// [`Client::close_streams`]); `with_breakers` gets the instance breakers, when
    /// they are on.
    fn assemble<T>(
        self,
        bottom: T,
        transport: Option<Transport>,
        with_breakers: impl FnOnce(&InstanceBreakers),
    ) -> io::Result<M::Client>
    where
        I: Layer<T>,
        O: Layer<DefaultStack<I::Service>>,
        M: MakeClient<O::Service>,
    {
        let s = self.settings;
        let discover = s.discover.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a client needs an address, a list of addresses or a Discover",
            )
        })?;
        let balance = s
            .balance
            .unwrap_or_else(|| Arc::new(WeightedRandom::default()));
        let attempt = TraceAttemptLayer.layer(self.inner.layer(bottom));
        let breakers = s.instance_breaker.map(InstanceBreakers::new);
        if let Some(b) = &breakers {
            with_breakers(b);
        }
        if let (Some(metrics), Some(b)) = (&s.config.observability.metrics, &breakers) {
            metrics.watch_instance_breakers(&s.service, b.probe());
        }
        let balanced = BalanceLayer::from_parts(discover, balance, breakers).layer(attempt);
        let marks = s.idempotent;
        // Off: a policy with no method marked lets every call through untouched.
        let backup = match s.backup {
            Some(policy) => policy.idempotent(marks.iter().cloned()),
            None => BackupPolicy::default(),
        };
        let governance = s.governance;
        let backed = BackupLayer::new(backup)
            .governed(governance.clone())
            .layer(balanced);
        let retried = RetryLayer::new(s.retry.idempotent(marks))
            .governed(governance.clone())
            .layer(backed);
        let guarded = ServiceBreakerLayer::new(s.service_breaker)
            .governed(governance.clone())
            .layer(retried);
        if let Some(metrics) = &s.config.observability.metrics {
            metrics.watch_breaker(&s.service, guarded.probe());
            if let Some(g) = &governance {
                metrics.watch_client_governance(g);
            }
        }
        let timed = TimeoutLayer::new(s.config.timeouts.rpc)
            .governed(governance)
            .layer(guarded);
        let metered = MeteredClient::new(timed, s.config.observability.metrics.clone());
        let stack = Trace::with_access_log(metered, s.config.observability.access_log);
        let mut client = Client::new(s.service, self.outer.layer(stack));
        if let Some(transport) = transport {
            client = client.with_transport(transport);
        }
        Ok(M::make_client(match s.multiplexed {
            Some(name) => client.with_multiplexed_service(name),
            None => client,
        }))
    }
}
