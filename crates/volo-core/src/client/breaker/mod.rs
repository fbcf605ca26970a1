//! Circuit breakers: stop calling a callee that keeps failing, for a while, then try it
//! again with a few calls.
//!
//! A callee that fails most calls (it is down, overloaded, cut off) gains nothing from
//! more of them: each costs the caller a connection attempt or a timeout, and piles
//! load on a service that needs room to recover. A breaker watches the outcomes of
//! calls and, past a threshold, *opens*: calls fail at once with
//! [`super::ErrorKind::CircuitOpen`] instead of going out.
//! After [`open_for`](BreakerConfig::open_for) it turns *half-open* and lets a few
//! trial calls through; enough successes in a row *close* it, a failure opens it again.
//!
//! There are two, as in Kitex, at two places in the client stack:
//!
//! - [`ServiceBreaker`] ([`ServiceBreakerLayer`]) around retries, for the callee
//!   service as a whole: when the service is failing, calls fail fast without
//!   spending retries or instances.
//! - [`InstanceBreakers`], used by the balancer for each attempt: an instance that
//!   fails is left out of the picks (and the call retried elsewhere) while the others
//!   go on serving.
//!
//! # When a breaker opens
//!
//! Over a sliding window of [`window`](BreakerConfig::window) (counted in
//! [`buckets`](BreakerConfig::buckets), so memory does not grow with traffic), once it
//! holds at least [`min_samples`](BreakerConfig::min_samples) calls and the share of
//! failures reaches [`error_rate`](BreakerConfig::error_rate); or after
//! [`consecutive_failures`](BreakerConfig::consecutive_failures) failures in a row.
//! Which errors are failures is [`counts_as_failure`]'s rule.
//!
//! # Cost per call
//!
//! A closed breaker (the common case) lets a call through without a lock or a clock
//! read: its phase is mirrored in an atomic. Counting the outcome takes the breaker's
//! lock once and reads the clock's coarse time ([`Clock::now_coarse`]: the window's
//! buckets are a second long, a few milliseconds do not matter). Deadlines, and whether
//! an open spell is over, are judged on the precise clock.
//!
//! [`Clock::now_coarse`]: crate::clock::Clock::now_coarse
//!
//! # Defaults
//!
//! | | service ([`BreakerConfig::service`]) | instance ([`BreakerConfig::instance`]) |
//! | --- | --- | --- |
//! | error rate | 50% | 50% |
//! | minimum calls in the window | 200 | 10 |
//! | failures in a row | off | 10 |
//! | window | 10 s in 10 buckets | 10 s in 10 buckets |
//! | open for | 5 s | 5 s |
//! | trial calls at once (half-open) | 3 | 3 |
//! | successful trials that close it | 3 | 3 |
//!
//! The service breaker follows Kitex's defaults (50%, at least 200 calls): it should
//! open only when a real share of traffic fails. The instance breaker judges from 10
//! calls and also opens after 10 failures in a row, so that at tens of calls a second a
//! dead instance leaves the rotation within a fraction of a second even after a long
//! healthy run (whose successes fill the window and hold the rate down).
//!
//! # Example
//!
//! ```
//! use volo_core::client::{
//!     BreakerConfig, BreakerState, ClientContext, Error, ErrorKind, ServiceBreakerLayer,
//! };
//! use volo_core::service::{Layer, Service, service_fn};
//!
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let config = BreakerConfig {
//!     min_samples: 4,
//!     ..BreakerConfig::service()
//! };
//! let down = service_fn(|_: &mut ClientContext, _: &str| async {
//!     Err::<(), _>(Error::io(std::io::ErrorKind::ConnectionReset.into()))
//! });
//! let svc = ServiceBreakerLayer::new(config).layer(down);
//! let mut cx = ClientContext::new();
//! for _ in 0..4 {
//!     let e = svc.call(&mut cx, "ping").await.unwrap_err();
//!     assert_eq!(e.kind(), ErrorKind::Io);
//! }
//! assert_eq!(svc.state(), BreakerState::Open);
//! assert!(svc.call(&mut cx, "ping").await.unwrap_err().is_circuit_open());
//! # });
//! ```

mod error;
mod governed;
mod instance;
mod layer;
mod state;
mod window;

#[cfg(test)]
mod tests;

pub use error::CircuitOpen;
pub use instance::{InstanceBreakers, InstancePermit};
pub use layer::ServiceBreakerLayer;
pub use state::{BreakerConfig, BreakerState};

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::ClientContext;
use super::error::{Error, ErrorKind};
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::service::Service;
use governed::{Governed, Route};
use state::{Breaker, Guarded, Outcome, Permit};

/// Whether `error` counts against the callee (a service or an instance) in a breaker.
///
/// - **Failures**: the callee did not answer, or not usably: connecting failed
///   ([`Connect`](ErrorKind::Connect)), the connection failed
///   ([`Io`](ErrorKind::Io)), no answer in time ([`Timeout`](ErrorKind::Timeout)), the
///   reply was not a valid reply ([`Protocol`](ErrorKind::Protocol)); and, for an
///   instance's breaker only, the server refused the call for load
///   ([`Overloaded`](ErrorKind::Overloaded)).
/// - **Answers**, counted as successes: an application exception
///   ([`Application`](ErrorKind::Application)) and, above this error type, a
///   declared IDL exception. The callee is up and said no; a breaker would not help.
/// - **Neither**, not counted at all: the call never reached the callee because of
///   something on this side: a breaker ([`CircuitOpen`](ErrorKind::CircuitOpen)), no
///   instance to call ([`NoInstance`](ErrorKind::NoInstance)), a request that could not
///   be encoded ([`Encode`](ErrorKind::Encode)), a layer that refused it
///   ([`Rejected`](ErrorKind::Rejected)); a server that is shutting down refused
///   it unrun ([`Closing`](ErrorKind::Closing)): it is leaving, not failing; and, for
///   the service's breaker, a refusal for load.
///
/// A refusal for load moves calls away from the instance that refused (its breaker
/// opens, the balancer sends calls to others, a [`Tiered`](crate::client::Tiered)
/// balancer spills to the next tier), but does not stop calls to the service: the
/// servers' limiters already shed what is over their limits, and a service breaker
/// that opened on their refusals would turn a rate limit into an outage (under a
/// limit of 20 calls a second, none would get through while it is open). For the
/// same reason the balancer still sends a call when every instance's breaker is open
/// (see [`Balance`](crate::client::Balance)).
///
/// A call cancelled before its outcome (its future dropped) is not counted either,
/// unless its deadline had passed: then it is counted as a timeout (see
/// [`ServiceBreaker`] and [`InstancePermit::with_deadline`]).
pub fn counts_as_failure(error: &Error) -> bool {
    classify(error, Level::Instance) == Outcome::Failure
}

/// Which breaker a result is counted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Service,
    Instance,
}

/// The three groups of [`counts_as_failure`]'s rule.
fn classify(error: &Error, level: Level) -> Outcome {
    match error.kind() {
        ErrorKind::Connect | ErrorKind::Io | ErrorKind::Timeout | ErrorKind::Protocol => {
            Outcome::Failure
        }
        ErrorKind::Overloaded => match level {
            Level::Instance => Outcome::Failure,
            Level::Service => Outcome::Ignored,
        },
        ErrorKind::Application => Outcome::Success,
        ErrorKind::CircuitOpen
        | ErrorKind::NoInstance
        | ErrorKind::Encode
        | ErrorKind::Rejected
        | ErrorKind::Closing => Outcome::Ignored,
    }
}

/// What a call's result tells a breaker of `level`.
fn outcome<T>(result: &Result<T, Error>, level: Level) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(e) => classify(e, level),
    }
}

/// What a call dropped before its end tells a breaker: nothing, unless its deadline
/// had passed (a timeout above cancelled it: the callee was too slow).
#[cold]
fn cancelled(deadline: Option<Instant>, now: Instant) -> Outcome {
    match deadline {
        Some(d) if now >= d => Outcome::Failure,
        _ => Outcome::Ignored,
    }
}

/// The breaker of the callee service, around the layers below it: while open, calls
/// fail at once with `Error::circuit_open(CircuitOpen::Service(name))` (the name from
/// the context's `rpc.callee.service`) without reaching the inner service.
///
/// Each call's result is counted by [`counts_as_failure`]'s rule. A call whose future
/// is dropped before it ends (cancelled) frees its half-open trial slot, if it held
/// one, and counts as a failure only if the context's deadline
/// (`cx.rpc.deadline`, as it was when the call came in) had passed by then: the call
/// timeout above cut it short.
///
/// One breaker per service value (clones share it): a client calls one service, so
/// one [`ServiceBreakerLayer`] in its stack is one breaker for that service. Made by
/// [`ServiceBreakerLayer`].
pub struct ServiceBreaker<S, C: Clock = SystemClock> {
    inner: S,
    breaker: Arc<Guarded<()>>,
    /// Thresholds and breakers per method from a governance, when it has one.
    governed: Option<Arc<Governed>>,
    clock: C,
}

impl<S, C: Clock> ServiceBreaker<S, C> {
    /// A closed breaker with `config` around `inner`, reading the time from `clock`.
    pub fn new(inner: S, config: BreakerConfig, clock: C) -> Self {
        let now = clock.now();
        ServiceBreaker {
            inner,
            breaker: Arc::new(Guarded::new(Breaker::new(config, now), ())),
            governed: None,
            clock,
        }
    }

    /// A closed breaker with `config` whose thresholds follow `governance`'s breaker
    /// rules: the rule for any method (`"*"`) sets this breaker's error rate and
    /// minimum of calls (or turns it off), and a method with a rule of its own gets a
    /// breaker of its own with those thresholds (and the rest of `config`), or none
    /// when its rule turns it off. Without rules, `config` holds.
    pub fn governed(
        inner: S,
        config: BreakerConfig,
        clock: C,
        governance: ClientGovernance,
    ) -> Self {
        let mut breaker = Self::new(inner, config.clone(), clock);
        breaker.governed = Some(Arc::new(Governed::new(governance, config)));
        breaker
    }

    /// Where the breaker stands now.
    pub fn state(&self) -> BreakerState {
        self.breaker.lock().breaker.state(self.clock.now())
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Reads the breaker's state for the metrics, while the breaker lives.
    pub(crate) fn probe(&self) -> Box<dyn crate::metrics::BreakerProbe> {
        Box::new(Probe {
            breaker: Arc::downgrade(&self.breaker),
            clock: self.clock.clone(),
        })
    }
}

/// A service breaker seen from the metrics ([`ServiceBreaker::probe`]).
struct Probe<C> {
    breaker: std::sync::Weak<Guarded<()>>,
    clock: C,
}

impl<C: Clock> crate::metrics::BreakerProbe for Probe<C> {
    fn value(&self) -> Option<i64> {
        let breaker = self.breaker.upgrade()?;
        let now = self.clock.now();
        let state = breaker.lock().breaker.state(now);
        Some(breaker_value(state))
    }
}

impl<S: Clone, C: Clock> Clone for ServiceBreaker<S, C> {
    /// The same breaker around a clone of the inner service.
    fn clone(&self) -> Self {
        ServiceBreaker {
            inner: self.inner.clone(),
            breaker: Arc::clone(&self.breaker),
            governed: self.governed.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<S: fmt::Debug, C: Clock> fmt::Debug for ServiceBreaker<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceBreaker")
            .field("inner", &self.inner)
            .field("state", &self.state())
            .finish()
    }
}

impl<S, C, Req> Service<ClientContext, Req> for ServiceBreaker<S, C>
where
    S: Service<ClientContext, Req, Error = Error> + Sync,
    C: Clock,
    Req: Send,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: Req) -> Result<S::Response, Error> {
        let route = match &self.governed {
            None => Route::Service,
            Some(g) => g.route(&cx.rpc.method, &self.breaker, || self.clock.now_coarse()),
        };
        let breaker = match &route {
            Route::Service => &self.breaker,
            Route::Own(own) => own,
            Route::Bypass => return self.inner.call(cx, req).await,
        };
        let admitted = breaker.try_acquire_at(|| self.clock.now());
        let Some(permit) = admitted else {
            let name = cx.rpc.callee.service.to_string();
            return Err(Error::circuit_open(CircuitOpen::Service(name)));
        };
        let mut call = Admitted {
            breaker,
            clock: &self.clock,
            permit: Some(permit),
            deadline: cx.rpc.deadline,
        };
        let result = self.inner.call(cx, req).await;
        call.finish(outcome(&result, Level::Service), self.clock.now_coarse());
        result
    }
}

/// A call the service breaker let through, until its outcome is counted; dropped
/// before that (the call was cancelled), it frees the call's trial slot.
struct Admitted<'a, C: Clock> {
    breaker: &'a Guarded<()>,
    clock: &'a C,
    permit: Option<Permit>,
    deadline: Option<Instant>,
}

impl<C: Clock> Admitted<'_, C> {
    /// Counts `outcome` at `now` (a coarse reading is enough: it only picks the
    /// window's bucket and, if the breaker opens, when its open time ends).
    fn finish(&mut self, outcome: Outcome, now: Instant) {
        if let Some(permit) = self.permit.take() {
            self.breaker.lock().breaker.finish(permit, outcome, now);
        }
    }
}

impl<C: Clock> Drop for Admitted<'_, C> {
    fn drop(&mut self) {
        if self.permit.is_some() {
            let now = self.clock.now();
            self.finish(cancelled(self.deadline, now), now);
        }
    }
}

/// A breaker's state as `rpc_client_breaker_state` gives it.
pub(crate) fn breaker_value(state: BreakerState) -> i64 {
    match state {
        BreakerState::Closed => 0,
        BreakerState::HalfOpen => 1,
        BreakerState::Open => 2,
    }
}
