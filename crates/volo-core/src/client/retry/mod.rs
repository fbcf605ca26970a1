//! Failure retry: another attempt, on another instance, for calls that failed in a
//! way another attempt may fix.
//!
//! An instance that refuses connections, resets them or stalls fails the calls sent
//! to it, while its peers would have answered; [`Retry`] sends such a call again,
//! and the balancer below it picks an instance this call has not tried. Retrying is
//! only safe when running the call twice does no harm, and only useful when it does
//! not pile load on a service that fails because it is overloaded, so a failed attempt
//! is retried only when it may help and the budget allows: [`Retry`] has the rules.
//!
//! # Defaults
//!
//! [`RetryPolicy::new`]: at most 2 retries (3 attempts); no method idempotent (only
//! failed connects are retried); exponential backoff, base 10 ms, cap 1 s, with full
//! jitter; budget 0.1 retries per call, at most 10 held; chain stop on.
//!
//! ```
//! use volo_core::client::{ClientContext, ClientRequest, ClientResponse, Error};
//! use volo_core::client::{RetryLayer, RetryPolicy};
//! use volo_core::service::{ServiceBuilder, service_fn};
//!
//! let transport = service_fn(|_cx: &mut ClientContext, _req: ClientRequest| async {
//!     Ok::<_, Error>(ClientResponse::none())
//! });
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(RetryPolicy::new().idempotent(["get_user"])))
//!     .service(transport);
//! # let _ = client;
//! ```

mod backoff;
mod budget;
mod layer;
mod policy;

pub use backoff::Backoff;
pub use budget::RetryBudget;
pub use layer::RetryLayer;
pub use policy::RetryPolicy;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::random::Xorshift;

use super::{ClientCall, ClientContext, Error, ErrorKind};
use crate::clock::{Clock, SystemClock};
use crate::governance::{ClientGovernance, RetryRule};
use crate::service::{Layer, Service};

/// The persistent metainfo key that marks a retried (or backup) request; its value is
/// the attempt number (1 for the first retry). Kitex's `TransitKey`, sent on the wire
/// as `RPC_PERSIST_RetryReq`.
pub const RETRY_KEY: &str = "RetryReq";

/// Retries a retry budget holds at most.
const BUDGET_MAX: u32 = 10;

/// Whether `cx` came in carrying the mark of a request retried upstream: the mark on a
/// first attempt (later attempts were marked by this client's own layers).
pub(crate) fn marked_upstream(cx: &ClientContext) -> bool {
    cx.attempt == 0 && cx.metainfo.persistent(RETRY_KEY).is_some()
}

/// The caller's [`RETRY_KEY`] value, to put back with [`restore_mark`].
pub(crate) fn saved_mark(cx: &ClientContext) -> Option<String> {
    cx.metainfo.persistent(RETRY_KEY).map(str::to_owned)
}

/// Puts the caller's [`RETRY_KEY`] value back after a layer marked its attempts.
pub(crate) fn restore_mark(cx: &mut ClientContext, saved: Option<String>) {
    match saved {
        Some(v) => cx.metainfo.set_persistent(RETRY_KEY, v),
        None => cx.metainfo.remove_persistent(RETRY_KEY),
    }
}

/// Marks `cx` as attempt `cx.attempt` of a call.
pub(crate) fn mark(cx: &mut ClientContext) {
    cx.metainfo
        .set_persistent(RETRY_KEY, cx.attempt.to_string());
}

/// Sends a call again when an attempt failed in a way another attempt may fix, on
/// another instance. Made by a [`RetryLayer`].
///
/// A failed attempt is retried when all of these hold:
///
/// - the failure is of a kind the policy retries ([`RetryPolicy::retry_on`]; by
///   default those another attempt may fix, [`Error::is_retryable`]: connect,
///   I/O, timeout, an open instance breaker, a server's over-limit refusal);
/// - the request cannot have reached a server ([`Error::may_have_run`] is false: the
///   connect failed), or the method is marked idempotent
///   ([`RetryPolicy::idempotent`]);
/// - fewer than [`RetryPolicy::max_retries`] retries were made for this call;
/// - the call does not carry the mark of a retried request from upstream (chain stop,
///   below);
/// - the backoff wait would end before the call's deadline (`cx.rpc.deadline`, when
///   it has one);
/// - the retry budget has a retry left: every call through the layer adds
///   [`RetryPolicy::budget_ratio`] of a retry to it (at most 10 held), every retry
///   takes one, so a failing service sees at most that share of extra calls. A
///   retry after a failure that reached no server (the connect failed, or the
///   connection failed before anything was written) takes none: it costs no server
///   anything (gRPC's transparent retries are not throttled either), and when an
///   instance dies under many callers at once, more of them meet it before its
///   breaker opens than a budget of 10 could send elsewhere.
///
/// Before a retry the layer counts the attempt in [`ClientContext::attempt`], marks the
/// instance that failed as tried ([`ClientContext::mark_tried`]; the error's
/// instance, else the callee address the balancer set), sets the persistent metainfo
/// [`RETRY_KEY`] to the attempt number, and waits the [`Backoff`] on its clock. When
/// the call ends the key is put back as the caller had it.
///
/// # Chain stop
///
/// As in Kitex: a retried request carries persistent metainfo `RetryReq` (on the wire
/// `RPC_PERSIST_RetryReq`), which a server passes on to the calls it makes while
/// handling it ([`ClientContext::forward_from`]). A call that enters the layer with
/// that mark on its first attempt (`cx.attempt == 0`) is never retried, so one failure
/// deep in a chain of services is not retried at every hop above it. Attempts made by
/// a layer of this client (attempt 1 and on) carry the mark themselves and are not
/// stopped by it. [`RetryPolicy::chain_stop`] turns the rule off.
///
/// # Rules from a config center
///
/// With a [`ClientGovernance`] ([`RetryLayer::governed`]), a rule for the call's
/// method replaces the policy's retry count, backoff and chain stop for it
/// ([`RetryRule::Failure`], which also bounds the time spent retrying and counts the
/// method as idempotent, as a Kitex failure policy does), or turns retries off
/// ([`RetryRule::Off`], and [`RetryRule::Backup`], which the backup layer takes). The
/// kinds of failure retried and the budget stay the policy's.
#[derive(Debug, Clone)]
pub struct Retry<S, C = SystemClock> {
    inner: S,
    policy: Arc<RetryPolicy>,
    budget: Arc<RetryBudget>,
    jitter: Arc<Xorshift>,
    governance: Option<ClientGovernance>,
    clock: C,
}

/// What one call is retried by: the policy, or a governance rule for its method.
#[derive(Debug, Clone, Copy)]
struct Plan {
    max_retries: u32,
    backoff: Backoff,
    chain_stop: bool,
    /// Whether a failure that may have run is retried (the method is idempotent).
    idempotent: bool,
    /// No retry after this long since the call began.
    max_duration: Option<Duration>,
}

impl<S> Retry<S> {
    /// `inner` retried by `policy` on the system clock, with a budget of its own.
    pub fn new(inner: S, policy: RetryPolicy) -> Self {
        RetryLayer::new(policy).layer(inner)
    }
}

impl<S, C: Clock> Retry<S, C> {
    /// How long to wait before retrying after `err`, when it is to be retried (this
    /// takes the retry from the budget).
    #[cold]
    fn retry_after(
        &self,
        cx: &ClientContext,
        (req, plan, start): (&impl ClientCall, &Plan, Option<Instant>),
        err: &Error,
        retries: u32,
    ) -> Option<Duration> {
        if retries >= plan.max_retries
            || !self.policy.retries(err)
            || (err.may_have_run() && (req.opens_stream() || !plan.idempotent))
        {
            return None;
        }
        let wait = plan.backoff.delay(retries + 1, &self.jitter);
        let now = self.clock.now();
        let past_deadline = cx.rpc.deadline.is_some_and(|d| now + wait >= d);
        let past_duration = match (plan.max_duration, start) {
            (Some(max), Some(start)) => now + wait >= start + max,
            _ => false,
        };
        if past_deadline || past_duration {
            return None;
        }
        // Last: only a retry that will happen spends the budget.
        (reached_no_server(err) || self.budget.withdraw()).then_some(wait)
    }
}

impl<S, C> Retry<S, C> {
    /// How a call of `method` is retried: by the governance rule for it, if there is
    /// one, else by the policy; `None`: not at all.
    fn plan(&self, method: &str) -> Option<Plan> {
        let policy = &*self.policy;
        let rule = match &self.governance {
            Some(g) => g.load().retry.get(method).copied(),
            None => None,
        };
        match rule {
            None => Some(Plan {
                max_retries: policy.max_retries,
                backoff: policy.backoff,
                chain_stop: policy.chain_stop,
                idempotent: policy.is_idempotent(method),
                max_duration: None,
            }),
            // A backup rule replaces retries for the method, as in Kitex.
            Some(RetryRule::Off | RetryRule::Backup { .. }) => None,
            Some(RetryRule::Failure {
                max_retries,
                max_duration,
                backoff,
                chain_stop,
            }) => Some(Plan {
                max_retries,
                backoff: backoff.map_or(policy.backoff, Backoff::from),
                chain_stop,
                idempotent: true,
                max_duration,
            }),
        }
    }
}

/// Whether `err` says the request reached no server: the connect failed, or the
/// connection failed before anything was written.
fn reached_no_server(err: &Error) -> bool {
    !err.may_have_run() && matches!(err.kind(), ErrorKind::Connect | ErrorKind::Io)
}

impl<S, C, R> Service<ClientContext, R> for Retry<S, C>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Send + Sync,
    C: Clock,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        self.budget.deposit();
        let Some(plan) = self.plan(req.method()) else {
            return self.inner.call(cx, req).await;
        };
        if plan.chain_stop && marked_upstream(cx) {
            return self.inner.call(cx, req).await;
        }
        let start = plan.max_duration.map(|_| self.clock.now());
        // The attempts, in this one future (not one of their own awaited here: a
        // layer on every call, and each level of futures costs its polls).
        let mut retries = 0;
        // The caller's mark, once a retry has set one, to put back at the end.
        let mut saved = None;
        let result = loop {
            let err = match self.inner.call(cx, req.clone()).await {
                Ok(reply) => break Ok(reply),
                Err(e) => e,
            };
            let Some(wait) = self.retry_after(cx, (&req, &plan, start), &err, retries) else {
                break Err(err);
            };
            retries += 1;
            cx.retries = cx.retries.wrapping_add(1);
            if let Some(addr) = err.instance().or(cx.rpc.callee.address.as_ref()).cloned() {
                cx.mark_tried(addr);
            }
            cx.attempt += 1;
            saved.get_or_insert_with(|| saved_mark(cx));
            mark(cx);
            if !wait.is_zero() {
                self.clock.sleep_until(self.clock.now() + wait).await;
            }
        };
        if let Some(mark) = saved {
            restore_mark(cx, mark);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::ClientResponse;
    use crate::client::mock::{Mock, Outcome, addr, now, poll, request};
    use crate::clock::ManualClock;
    use crate::codec::{Framing, Protocol};
    use crate::context::ServerContext;

    fn retry(policy: RetryPolicy, clock: &ManualClock, mock: &Mock) -> Retry<Mock, ManualClock> {
        RetryLayer::new(policy.jitter_seed(1))
            .with_clock(clock.clone())
            .layer(mock.clone())
    }

    /// Runs a call that must finish without the clock moving.
    fn call_now(
        svc: &Retry<Mock, ManualClock>,
        cx: &mut ClientContext,
        method: &'static str,
    ) -> Result<ClientResponse, Error> {
        poll(&mut Box::pin(svc.call(cx, request(method)))).expect("the call waits")
    }

    #[test]
    fn a_failed_connect_is_retried_on_another_instance_even_if_not_idempotent() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![now(Outcome::Connect)], now(Outcome::Ok));
        let svc = retry(RetryPolicy::new().backoff(Backoff::None), &clock, &mock);
        let mut cx = ClientContext::new();
        assert!(call_now(&svc, &mut cx, "add_user").is_ok());

        let seen = mock.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!((seen[0].attempt, seen[0].instance.clone()), (0, addr(0)));
        assert!(seen[0].avoid.is_empty() && seen[0].mark.is_none());
        assert_eq!((seen[1].attempt, seen[1].instance.clone()), (1, addr(1)));
        assert_eq!(seen[1].avoid, [addr(0)]);
        assert_eq!(
            seen[1].mark.as_deref(),
            Some("1"),
            "a retry carries the mark"
        );
        assert_eq!(cx.attempt, 1);
        assert_eq!(
            cx.metainfo.persistent(RETRY_KEY),
            None,
            "the caller's context is given back without the mark"
        );
    }

    /// A closing server's refusal says the call never ran: it goes to another
    /// instance, though the method is not idempotent.
    #[test]
    fn a_closing_servers_refusal_is_retried_elsewhere_even_if_not_idempotent() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![now(Outcome::Closing)], now(Outcome::Ok));
        let svc = retry(RetryPolicy::new().backoff(Backoff::None), &clock, &mock);
        let mut cx = ClientContext::new();
        assert!(call_now(&svc, &mut cx, "add_user").is_ok());
        let seen = mock.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].instance, addr(0));
        assert_eq!(seen[1].instance, addr(1));
        assert_eq!(seen[1].avoid, [addr(0)]);

        let e = Error::application(crate::refusal::closing());
        assert_eq!(e.kind(), super::super::ErrorKind::Closing);
        assert!(!e.may_have_run() && e.is_retryable());
    }

    #[test]
    fn a_failure_after_sending_is_retried_only_for_idempotent_methods() {
        for outcome in [Outcome::Io, Outcome::Timeout] {
            let clock = ManualClock::new();
            let mock = Mock::new(&clock, vec![now(outcome)], now(Outcome::Ok));
            let policy = RetryPolicy::new()
                .backoff(Backoff::None)
                .idempotent(["echo"]);
            let svc = retry(policy, &clock, &mock);

            let err = call_now(&svc, &mut ClientContext::new(), "add_user").unwrap_err();
            assert!(err.may_have_run(), "{outcome:?}");
            assert_eq!(mock.attempts(), 1, "{outcome:?}: not idempotent");

            let mock = Mock::new(&clock, vec![now(outcome)], now(Outcome::Ok));
            let svc = retry(
                RetryPolicy::new()
                    .backoff(Backoff::None)
                    .idempotent(["echo"]),
                &clock,
                &mock,
            );
            assert!(call_now(&svc, &mut ClientContext::new(), "echo").is_ok());
            assert_eq!(mock.attempts(), 2, "{outcome:?}: idempotent");
        }
    }

    #[test]
    fn an_answer_from_the_server_is_not_retried() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![], now(Outcome::Application));
        let policy = RetryPolicy::new()
            .backoff(Backoff::None)
            .idempotent(["echo"]);
        let svc = retry(policy, &clock, &mock);
        let err = call_now(&svc, &mut ClientContext::new(), "echo").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Application);
        assert_eq!(mock.attempts(), 1);
    }

    #[test]
    fn retry_on_chooses_the_kinds_of_failure_retried() {
        // Application exceptions retried for an idempotent method when asked...
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![], now(Outcome::Application));
        let policy = RetryPolicy::new()
            .backoff(Backoff::None)
            .idempotent(["echo"])
            .retry_on([ErrorKind::Application, ErrorKind::Connect]);
        let svc = retry(policy, &clock, &mock);
        assert!(call_now(&svc, &mut ClientContext::new(), "echo").is_err());
        assert_eq!(mock.attempts(), 3, "one attempt and two retries");
        // ...and timeouts no longer are once the list leaves them out.
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![], now(Outcome::Timeout));
        let policy = RetryPolicy::new()
            .backoff(Backoff::None)
            .idempotent(["echo"])
            .retry_on([ErrorKind::Connect]);
        let svc = retry(policy, &clock, &mock);
        let err = call_now(&svc, &mut ClientContext::new(), "echo").unwrap_err();
        assert!(err.is_timeout());
        assert_eq!(mock.attempts(), 1);
    }

    #[test]
    fn max_retries_bounds_the_attempts() {
        for (max, attempts) in [(0, 1), (1, 2), (2, 3), (3, 4)] {
            let clock = ManualClock::new();
            let mock = Mock::new(&clock, vec![], now(Outcome::Connect));
            let policy = RetryPolicy::new().backoff(Backoff::None).max_retries(max);
            let svc = retry(policy, &clock, &mock);
            let mut cx = ClientContext::new();
            let err = call_now(&svc, &mut cx, "add_user").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Connect);
            assert_eq!(mock.attempts(), attempts, "max_retries {max}");
            assert_eq!(cx.attempt, max);
        }
        // The default: two retries.
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![], now(Outcome::Connect));
        let svc = retry(RetryPolicy::new().backoff(Backoff::None), &clock, &mock);
        assert!(call_now(&svc, &mut ClientContext::new(), "add_user").is_err());
        assert_eq!(mock.attempts(), 3);
    }

    #[test]
    fn a_spent_budget_stops_retries() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![], now(Outcome::Io));
        let policy = RetryPolicy::new()
            .backoff(Backoff::None)
            .idempotent(["echo"]);
        let svc = retry(policy, &clock, &mock);
        for _ in 0..100 {
            assert!(call_now(&svc, &mut ClientContext::new(), "echo").is_err());
        }
        // Without a budget: 100 calls and 200 retries. With ratio 0.1: the 10 retries
        // the budget starts with, and one per ten calls (19: the first call's deposit
        // finds the budget full).
        let retries = mock.attempts() - 100;
        assert!((18..=21).contains(&retries), "{retries} retries");
    }

    /// A failed connect reached no server: its retry spends no budget, so a burst
    /// of them (an instance that died under many callers) all go elsewhere, and the
    /// budget is whole after them.
    #[test]
    fn a_failed_connect_is_retried_without_spending_the_budget() {
        let clock = ManualClock::new();
        let connects = (0..300).map(|_| now(Outcome::Connect)).collect();
        let mock = Mock::new(&clock, connects, now(Outcome::Io));
        let policy = RetryPolicy::new()
            .backoff(Backoff::None)
            .idempotent(["echo"]);
        let svc = retry(policy, &clock, &mock);
        for _ in 0..100 {
            assert!(call_now(&svc, &mut ClientContext::new(), "add_user").is_err());
        }
        assert_eq!(mock.attempts(), 300, "each call tried 3 times");
        // A failure after sending is retried from the budget, still full.
        assert!(call_now(&svc, &mut ClientContext::new(), "echo").is_err());
        assert_eq!(mock.attempts(), 303, "retried twice from the budget");
    }

    #[test]
    fn a_request_retried_upstream_is_not_retried_again() {
        let mut server = ServerContext::new(Framing::TTHeader, Protocol::Binary);
        server.metainfo.set_persistent(RETRY_KEY, "1");
        let clock = ManualClock::new();

        let mock = Mock::new(&clock, vec![], now(Outcome::Connect));
        let svc = retry(RetryPolicy::new().backoff(Backoff::None), &clock, &mock);
        let mut cx = ClientContext::forward_from(&server);
        assert!(call_now(&svc, &mut cx, "add_user").is_err());
        assert_eq!(mock.attempts(), 1, "chain stop");
        assert_eq!(cx.metainfo.persistent(RETRY_KEY), Some("1"));

        let mock = Mock::new(&clock, vec![now(Outcome::Connect)], now(Outcome::Ok));
        let policy = RetryPolicy::new().backoff(Backoff::None).chain_stop(false);
        let svc = retry(policy, &clock, &mock);
        let mut cx = ClientContext::forward_from(&server);
        assert!(call_now(&svc, &mut cx, "add_user").is_ok());
        assert_eq!(mock.attempts(), 2, "chain stop off");
        assert_eq!(mock.seen()[1].mark.as_deref(), Some("1"));
        assert_eq!(
            cx.metainfo.persistent(RETRY_KEY),
            Some("1"),
            "the upstream mark is kept"
        );
    }

    #[test]
    fn the_backoff_waits_on_the_clock() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![now(Outcome::Connect)], now(Outcome::Ok));
        let wait = Duration::from_millis(50);
        let svc = retry(
            RetryPolicy::new().backoff(Backoff::Fixed(wait)),
            &clock,
            &mock,
        );
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));

        assert!(poll(&mut call).is_none());
        assert_eq!((mock.attempts(), clock.sleepers()), (1, 1));
        clock.advance(wait - Duration::from_millis(1));
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 1, "no retry before the wait is over");
        clock.advance(Duration::from_millis(1));
        assert!(poll(&mut call).expect("retried").is_ok());
        let seen = mock.seen();
        assert_eq!(seen[1].started - seen[0].started, wait);
    }

    #[test]
    fn the_exponential_backoff_waits_at_most_its_cap() {
        let clock = ManualClock::new();
        let script = vec![now(Outcome::Connect), now(Outcome::Connect)];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let backoff = Backoff::Exponential {
            base: Duration::from_millis(10),
            max: Duration::from_secs(1),
        };
        let svc = retry(RetryPolicy::new().backoff(backoff), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));
        let mut result = poll(&mut call);
        // The first wait is at most 10 ms, the second at most 20 ms.
        for _ in 0..30 {
            if result.is_some() {
                break;
            }
            clock.advance(Duration::from_millis(1));
            result = poll(&mut call);
        }
        assert!(result.expect("done within 30 ms").is_ok());
        let seen = mock.seen();
        assert_eq!(seen.len(), 3);
        assert!(seen[1].started - seen[0].started <= Duration::from_millis(10));
        assert!(seen[2].started - seen[1].started <= Duration::from_millis(20));
    }

    #[test]
    fn no_retry_whose_wait_would_pass_the_deadline() {
        let clock = ManualClock::new();
        let wait = Duration::from_millis(50);
        let policy = RetryPolicy::new().backoff(Backoff::Fixed(wait));

        let mock = Mock::new(&clock, vec![now(Outcome::Connect)], now(Outcome::Ok));
        let svc = retry(policy.clone(), &clock, &mock);
        let mut cx = ClientContext::new();
        cx.rpc.deadline = Some(clock.now() + Duration::from_millis(30));
        let err = call_now(&svc, &mut cx, "add_user").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connect);
        assert_eq!(mock.attempts(), 1);

        let mock = Mock::new(&clock, vec![now(Outcome::Connect)], now(Outcome::Ok));
        let svc = retry(policy, &clock, &mock);
        let mut cx = ClientContext::new();
        cx.rpc.deadline = Some(clock.now() + Duration::from_millis(100));
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));
        assert!(poll(&mut call).is_none());
        clock.advance(wait);
        assert!(poll(&mut call).expect("retried").is_ok());
        assert_eq!(mock.attempts(), 2);
    }

    /// Polls `call` until it ends, moving `clock` 10 ms between polls.
    fn run_out<F: std::future::Future + Unpin>(call: &mut F, clock: &ManualClock) -> F::Output {
        loop {
            if let Some(out) = poll(call) {
                return out;
            }
            clock.advance(Duration::from_millis(10));
        }
    }

    /// A governance rule for a method replaces the policy for it, as the rule
    /// changes: retries for a method the policy does not mark, a limit on the time
    /// spent retrying, and none at all.
    #[test]
    fn a_governance_rule_replaces_the_policy_for_its_method() {
        use crate::governance::{BackoffRule, ClientGovernance, MethodRules, RetryRule};
        let clock = ManualClock::new();
        let gov = ClientGovernance::new("svc");
        let governed = |mock: &Mock| {
            RetryLayer::new(RetryPolicy::new().backoff(Backoff::None).jitter_seed(1))
                .governed(Some(gov.clone()))
                .with_clock(clock.clone())
                .layer(mock.clone())
        };
        let mock = Mock::new(&clock, vec![], now(Outcome::Io));
        let svc = governed(&mock);
        assert!(call_now(&svc, &mut ClientContext::new(), "add_user").is_err());
        assert_eq!(mock.attempts(), 1, "no rule: not idempotent, not retried");

        let failure = |max_duration| RetryRule::Failure {
            max_retries: 3,
            max_duration,
            backoff: Some(BackoffRule::Fixed(Duration::from_millis(10))),
            chain_stop: true,
        };
        gov.set_retry(MethodRules::new().method("add_user", failure(None)));
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));
        assert!(run_out(&mut call, &clock).is_err());
        drop(call);
        assert_eq!(mock.attempts(), 1 + 4, "the rule's 3 retries");

        // At most 25 ms of retrying: attempts at 0, 10 and 20 ms; the next would
        // start at 30.
        let mock = Mock::new(&clock, vec![], now(Outcome::Io));
        let svc = governed(&mock);
        gov.set_retry(MethodRules::new().any(failure(Some(Duration::from_millis(25)))));
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));
        assert!(run_out(&mut call, &clock).is_err());
        drop(call);
        assert_eq!(mock.attempts(), 3, "stopped by max_duration");

        // Off: not even a failed connect, which the policy retries, is retried.
        gov.set_retry(MethodRules::new().any(RetryRule::Off));
        let mock = Mock::new(&clock, vec![], now(Outcome::Connect));
        let svc = governed(&mock);
        assert!(call_now(&svc, &mut ClientContext::new(), "add_user").is_err());
        assert_eq!(mock.attempts(), 1);
    }
}
