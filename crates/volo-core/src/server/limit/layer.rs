//! The limiter as a layer of the server's stack: the outermost of its built-ins, so a
//! refused call runs nothing else (no span, no metrics, no slot).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use super::{LimitConfig, LimitPermit, Limiter, Overloaded};
use crate::clock::SystemClock;
use crate::context::ServerContext;
use crate::governance::ServerGovernance;
use crate::metrics::ServerConns;
use crate::server::{DispatchError, ServerCall};
use crate::service::{Layer, Service};

/// Refuses the calls over a [`Limiter`]'s limits with
/// [`DispatchError::Overloaded`] (answered with the overload exception, [`refusal`](super::refusal)),
/// and lets the others through, each holding its concurrency slot until the service
/// beneath has answered it (or the call is dropped). The QPS limit counts from the
/// time the call's frame was taken ([`ServerContext::arrived`]).
///
/// Streams ([`StreamOpening`](crate::server::StreamOpening)s) have a limiter of their
/// own ([`LimitLayer::stream_limit`], from
/// [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight) in a
/// server): a stream over it is refused with [`Overloaded::Streams`], and one let
/// through holds its slot until it ends. Calls and streams do not share slots: a
/// server's long streams cannot starve its calls, nor a burst of calls its streams.
///
/// Still before the arguments are decoded (the dispatcher beneath decodes them), as
/// Kitex limits in `OnRead`.
#[derive(Debug, Clone)]
pub struct Limit<S> {
    inner: S,
    limiter: Arc<Limiter>,
    /// The limits a governance sets, when it has a rule in force.
    governed: Option<Arc<Governed>>,
    /// The limit of streams in progress, if any.
    streams: Option<Arc<Limiter>>,
    /// The refusals are counted here, when metrics are on.
    counters: Option<ServerConns>,
}

/// Makes [`Limit`]s sharing one [`Limiter`] (and one of streams).
#[derive(Debug, Clone)]
pub struct LimitLayer {
    limiter: Arc<Limiter>,
    governed: Option<Arc<Governed>>,
    streams: Option<Arc<Limiter>>,
    counters: Option<ServerConns>,
}

impl LimitLayer {
    /// A layer enforcing `config` on calls, and no limit on streams.
    pub fn new(config: LimitConfig) -> Self {
        LimitLayer {
            limiter: Arc::new(Limiter::new(config, SystemClock)),
            governed: None,
            streams: None,
            counters: None,
        }
    }

    /// The same layer, enforcing `governance`'s limit rule instead of its own
    /// config while the governance has one (see
    /// [`LimitRule`](crate::governance::LimitRule): its `qps` and `concurrency`).
    /// A change of the rule starts a new limiter: its QPS bucket full, its count of
    /// calls in progress at zero (calls admitted before are not counted by it).
    pub fn governed(mut self, governance: Option<ServerGovernance>) -> Self {
        self.governed = governance.map(|governance| {
            Arc::new(Governed {
                governance,
                seen: AtomicU64::new(u64::MAX),
                current: ArcSwapOption::empty(),
                change: Mutex::new(()),
            })
        });
        self
    }

    /// The same layer, refusing streams while `max` are in progress (`None`: no
    /// limit; `Some(0)` refuses every stream).
    pub fn stream_limit(mut self, max: Option<usize>) -> Self {
        self.streams = max.map(|n| {
            let config = LimitConfig {
                max_concurrency: Some(n),
                max_qps: None,
            };
            Arc::new(Limiter::new(config, SystemClock))
        });
        self
    }

    /// The same layer, counting its refusals in `counters` (a server's metrics).
    pub(crate) fn counted(mut self, counters: Option<ServerConns>) -> Self {
        self.counters = counters;
        self
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(self, inner: S) -> Limit<S> {
        Limit {
            inner,
            limiter: self.limiter,
            governed: self.governed,
            streams: self.streams,
            counters: self.counters,
        }
    }
}

impl<S> Limit<S> {
    /// Admits `req` or says which limit refuses it.
    fn admit(&self, cx: &ServerContext, req: &impl ServerCall) -> Result<LimitPermit, Overloaded> {
        if req.opens_stream() {
            let Some(streams) = &self.streams else {
                return Ok(LimitPermit::none());
            };
            // The stream limiter has no rate: it reads no time.
            return streams
                .try_acquire_at(std::time::Instant::now)
                .map_err(|over| match over {
                    Overloaded::Concurrency { limit } => Overloaded::Streams { limit },
                    other => other,
                });
        }
        let arrived = cx.arrived;
        let now = || arrived.unwrap_or_else(std::time::Instant::now);
        match &self.governed {
            None => self.limiter.try_acquire_at(now),
            Some(g) => match &*g.current() {
                Some(limiter) => limiter.try_acquire_at(now),
                None => self.limiter.try_acquire_at(now),
            },
        }
    }
}

/// The limiter of a governance's rule, remade when the rule changes.
#[derive(Debug)]
struct Governed {
    governance: ServerGovernance,
    /// The governance version `current` was made for (`u64::MAX`: none yet).
    seen: AtomicU64,
    /// The rule's limiter; `None`: no rule, the layer's own limiter holds.
    current: ArcSwapOption<Limiter>,
    /// Held while a change is taken up, so one limiter is made per change.
    change: Mutex<()>,
}

impl Governed {
    /// The limiter in force, after taking up a change of the rule.
    fn current(&self) -> arc_swap::Guard<Option<Arc<Limiter>>> {
        let version = self.governance.version();
        if self.seen.load(Ordering::Acquire) != version {
            self.follow();
        }
        self.current.load()
    }

    #[cold]
    fn follow(&self) {
        let _one = self.change.lock().unwrap_or_else(PoisonError::into_inner);
        // Read the version before the rule: a change after this is taken up later.
        let version = self.governance.version();
        if self.seen.load(Ordering::Acquire) == version {
            return;
        }
        let limiter = self.governance.limit().map(|rule| {
            let config = LimitConfig {
                max_concurrency: rule.concurrency,
                max_qps: rule.qps,
            };
            Arc::new(Limiter::new(config, SystemClock))
        });
        self.current.store(limiter);
        self.seen.store(version, Ordering::Release);
    }
}

impl<S, R> Service<ServerContext, R> for Limit<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Send + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let _permit = match self.admit(cx, &req) {
            Ok(permit) => permit,
            Err(over) => {
                if let Some(c) = &self.counters {
                    match over {
                        Overloaded::Qps { .. } => c.rejected_qps.inc(),
                        Overloaded::Streams { .. } => c.rejected_streams.inc(),
                        Overloaded::Concurrency { .. } => c.rejected_concurrency.inc(),
                    };
                }
                return Err(DispatchError::Overloaded(over));
            }
        };
        self.inner.call(cx, req).await
    }
}
