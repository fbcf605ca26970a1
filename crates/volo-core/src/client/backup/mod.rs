//! Backup requests: when a call is slow, a second attempt on another instance, and the
//! first answer wins.
//!
//! A call's latency has a tail: a garbage collection, a full queue or a slow disk on one
//! instance makes a few calls in a hundred far slower than the rest, and a retry after
//! a timeout comes too late to help. [`Backup`] waits a short delay instead (by default
//! the recent p99 of the calls' latencies); a call that has not answered by then gets a
//! second attempt on another instance, and whichever answers first successfully is the
//! answer, the other attempt being dropped (cancelled). Since both attempts may run,
//! only methods marked idempotent ([`BackupPolicy::idempotent`]) get backups; oneway
//! calls never do.
//!
//! The delay is [`BackupDelay::Fixed`] or [`BackupDelay::Percentile`]: the quantile of
//! the latencies of the last 1,000 successful attempts (measured on the layer's clock),
//! within `min..=max`, and `max` until 100 have succeeded.
//!
//! # Defaults
//!
//! [`BackupPolicy::default`]: the p99 within 10 ms ..= 1 s (1 s while warming up); no
//! method idempotent; budget 0.1 backups per call, at most 10 held; chain stop on.
//!
//! ```
//! use volo_core::client::{BackupDelay, BackupLayer, BackupPolicy};
//! use volo_core::client::{ClientContext, ClientRequest, ClientResponse, Error};
//! use volo_core::service::{ServiceBuilder, service_fn};
//!
//! let transport = service_fn(|_cx: &mut ClientContext, _req: ClientRequest| async {
//!     Ok::<_, Error>(ClientResponse::none())
//! });
//! let client = ServiceBuilder::new()
//!     .layer(BackupLayer::new(
//!         BackupPolicy::new(BackupDelay::default()).idempotent(["get_user"]),
//!     ))
//!     .service(transport);
//! # let _ = client;
//! ```

mod layer;
mod policy;

pub use layer::BackupLayer;
pub use policy::{BackupDelay, BackupPolicy};

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use policy::Latencies;

use super::retry::{mark, marked_upstream, restore_mark, saved_mark};
use super::{ClientCall, ClientContext, Error, RetryBudget};
use crate::clock::{Clock, SystemClock};
use crate::governance::{ClientGovernance, RetryRule};
use crate::service::{Layer, Service};
use crate::transport::lock;

/// Backups a budget holds at most.
const BUDGET_MAX: u32 = 10;

/// Sends a second attempt of a slow call to another instance and takes the first
/// success. Made by a [`BackupLayer`].
///
/// The rules:
///
/// - at most one backup per call;
/// - the backup goes out only if the first attempt has neither answered nor failed
///   after the delay (a failure is [`Retry`](super::Retry)'s business), and the delay
///   ends before the call's deadline;
/// - a budget bounds the extra load: every call through the layer adds
///   [`BackupPolicy::budget_ratio`] of a backup to it (at most 10 held), every backup
///   takes one;
/// - the backup carries [`ClientContext::attempt`] one more than the first attempt,
///   the persistent metainfo [`RETRY_KEY`](super::RETRY_KEY) set to that number, and
///   the instances the first attempt picked marked tried, so the balancer sends it
///   elsewhere;
/// - chain stop, as for retries: a call that enters the layer on its first attempt
///   carrying [`RETRY_KEY`](super::RETRY_KEY) (a server forwarding a retried request)
///   gets no backup;
/// - when one attempt fails while the other runs, the other's outcome is the call's;
///   when both fail, the last error is, and both instances count as tried;
/// - the context of the attempt whose outcome is the call's is given back to the
///   caller (the callee address, the backward metainfo, the attempt number...), with
///   the caller's [`RETRY_KEY`](super::RETRY_KEY) value put back.
#[derive(Debug, Clone)]
pub struct Backup<S, C = SystemClock> {
    inner: S,
    policy: Arc<BackupPolicy>,
    budget: Arc<RetryBudget>,
    latencies: Arc<Latencies>,
    governance: Option<ClientGovernance>,
    clock: C,
}

impl<S> Backup<S> {
    /// `inner` with backups by `policy` on the system clock, with a budget of its own.
    pub fn new(inner: S, policy: BackupPolicy) -> Self {
        BackupLayer::new(policy).layer(inner)
    }
}

/// One attempt on its own context, which it gives back with its outcome.
async fn attempt<S, R>(
    inner: &S,
    mut cx: ClientContext,
    req: R,
) -> (Result<S::Response, Error>, ClientContext)
where
    S: Service<ClientContext, R, Error = Error> + Sync,
{
    let result = inner.call(&mut cx, req).await;
    (result, cx)
}

/// No future yet, of the type of `_like` (so a slot can wait for the backup attempt).
fn empty_like<F>(_like: &F) -> Option<F> {
    None
}

/// What woke the race.
enum Event<T> {
    /// The delay passed.
    Delay,
    /// The first attempt (`true`) or the backup ended.
    Done(bool, T),
}

impl<S, C> Backup<S, C>
where
    C: Clock,
{
    /// The first attempt, and the backup if the first is slow; the first success wins.
    /// `delay`: the backup's delay, when a governance rule fixes it.
    async fn race<R>(
        &self,
        cx: &mut ClientContext,
        req: R,
        delay: Option<Duration>,
    ) -> Result<S::Response, Error>
    where
        R: ClientCall,
        S: Service<ClientContext, R, Error = Error> + Sync,
        S::Response: Send,
    {
        let picks = Arc::new(Mutex::new(Vec::new()));
        let outer_picks = cx.picks.take();
        let caller_mark = saved_mark(cx);
        let mut first_cx = cx.clone();
        first_cx.picks = Some(picks.clone());

        let start = self.clock.now();
        let fire = start + delay.unwrap_or_else(|| self.latencies.delay());
        let before_deadline = cx.rpc.deadline.is_none_or(|d| fire < d);
        let first_attempt = attempt(&self.inner, first_cx, req.clone());
        let backup_slot = empty_like(&first_attempt);
        let mut first = pin!(Some(first_attempt));
        let mut backup = pin!(backup_slot);
        let mut delay = pin!(before_deadline.then(|| self.clock.sleep_until(fire)));
        let mut backup_start = start;

        let (result, done_cx) = loop {
            let event = poll_fn(|task| {
                if let Some(f) = first.as_mut().as_pin_mut()
                    && let Poll::Ready(out) = f.poll(task)
                {
                    return Poll::Ready(Event::Done(true, out));
                }
                if let Some(f) = backup.as_mut().as_pin_mut()
                    && let Poll::Ready(out) = f.poll(task)
                {
                    return Poll::Ready(Event::Done(false, out));
                }
                if let Some(d) = delay.as_mut().as_pin_mut()
                    && d.poll(task).is_ready()
                {
                    return Poll::Ready(Event::Delay);
                }
                Poll::Pending
            })
            .await;
            match event {
                Event::Delay => {
                    delay.set(None);
                    if !self.budget.withdraw() {
                        continue;
                    }
                    cx.backups = cx.backups.wrapping_add(1);
                    let mut backup_cx = cx.clone();
                    backup_cx.attempt = cx.attempt + 1;
                    let tried = lock(&picks).clone();
                    for addr in tried {
                        backup_cx.mark_tried(addr);
                    }
                    backup_cx.picks = Some(picks.clone());
                    mark(&mut backup_cx);
                    backup_start = self.clock.now();
                    backup.set(Some(attempt(&self.inner, backup_cx, req.clone())));
                }
                Event::Done(was_first, (result, done_cx)) => {
                    if was_first {
                        first.set(None);
                    } else {
                        backup.set(None);
                    }
                    match result {
                        Ok(reply) => {
                            let started = if was_first { start } else { backup_start };
                            self.latencies.record(self.clock.now() - started);
                            break (Ok(reply), done_cx);
                        }
                        // The other attempt may still answer.
                        Err(_) if first.is_some() || backup.is_some() => {}
                        Err(e) => break (Err(e), done_cx),
                    }
                }
            }
        };
        // The loser, if any, is cancelled here, before the caller sees the answer.
        first.set(None);
        backup.set(None);

        // The winner's context, with the count of backups sent for the call.
        let backups = cx.backups;
        *cx = done_cx;
        cx.backups = backups;
        cx.picks = outer_picks;
        restore_mark(cx, caller_mark);
        if result.is_err() {
            let tried = lock(&picks).clone();
            for addr in tried {
                cx.mark_tried(addr);
            }
        }
        result
    }
}

impl<S, C, R> Service<ClientContext, R> for Backup<S, C>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Send + Sync,
    C: Clock,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        let (delay, chain_stop) = match self.plan(req.method()) {
            Plan::Off => return self.inner.call(cx, req).await,
            Plan::Fed(None) => {
                self.budget.deposit();
                return self.inner.call(cx, req).await;
            }
            Plan::Fed(Some(race)) => race,
        };
        self.budget.deposit();
        if req.is_oneway() || req.opens_stream() || (chain_stop && marked_upstream(cx)) {
            return self.inner.call(cx, req).await;
        }
        // Boxed: the race holds two attempts' futures, which inline would make this
        // layer's future (and every call's above it) three times an attempt's size,
        // backups on or off: 11.5 KB per call in flight over the transport, not 3.7.
        Box::pin(self.race(cx, req, delay)).await
    }
}

/// Whether a call of a method may get a backup ([`Backup::plan`]).
enum Plan {
    /// Backups are off for it, and the budget is not fed: with no method marked and
    /// no governance rule (backups off, as in the default stack) no call can ever take
    /// from the budget, so none adds to it, and no atomic is touched per call.
    Off,
    /// The call feeds the budget; `Some((delay, chain_stop))` when it may get a
    /// backup (`delay`: a governance rule's fixed one, else the policy's).
    Fed(Option<(Option<Duration>, bool)>),
}

impl<S, C> Backup<S, C> {
    /// How a call of `method` is backed up: by the governance rule for it, if there
    /// is one, else by the policy.
    fn plan(&self, method: &str) -> Plan {
        let rule = match &self.governance {
            Some(g) => g.load().retry.get(method).copied(),
            None => None,
        };
        let policy = &*self.policy;
        match rule {
            Some(RetryRule::Backup { delay, chain_stop }) => {
                Plan::Fed(Some((Some(delay), chain_stop)))
            }
            Some(RetryRule::Off | RetryRule::Failure { .. }) => Plan::Off,
            None if policy.idempotent.is_empty() => Plan::Off,
            None if !policy.is_idempotent(method) => Plan::Fed(None),
            None => Plan::Fed(Some((None, policy.chain_stop))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::ClientRequest;
    use crate::client::mock::{Mock, Outcome, Step, Wait, addr, after, now, poll, request};
    use crate::client::{ErrorKind, RETRY_KEY};
    use crate::clock::ManualClock;
    use crate::test_support::Text;
    use tokio::sync::Notify;

    const MS: Duration = Duration::from_millis(1);

    fn backup(policy: BackupPolicy, clock: &ManualClock, mock: &Mock) -> Backup<Mock, ManualClock> {
        BackupLayer::new(policy)
            .with_clock(clock.clone())
            .layer(mock.clone())
    }

    /// A fixed 20 ms delay for `echo`.
    fn fixed() -> BackupPolicy {
        BackupPolicy::new(BackupDelay::Fixed(20 * MS)).idempotent(["echo"])
    }

    fn forever() -> Step {
        Step {
            wait: Wait::Forever,
            outcome: Outcome::Ok,
        }
    }

    /// A governance rule for a method sends backups after its fixed delay, for a
    /// method the policy does not mark; any other rule for it sends none.
    #[test]
    fn a_governance_rule_sets_the_backups_of_its_method() {
        use crate::governance::{ClientGovernance, MethodRules, RetryRule};
        let clock = ManualClock::new();
        let gov = ClientGovernance::new("svc");
        let governed = |policy, mock: &Mock| {
            BackupLayer::new(policy)
                .governed(Some(gov.clone()))
                .with_clock(clock.clone())
                .layer(mock.clone())
        };
        let script = vec![forever(), after(10 * MS, Outcome::Ok)];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let svc = governed(BackupPolicy::default(), &mock);
        let rule = RetryRule::Backup {
            delay: 5 * MS,
            chain_stop: true,
        };
        gov.set_retry(MethodRules::new().method("add_user", rule));
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("add_user")));
        assert!(poll(&mut call).is_none());
        clock.advance(4 * MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 1, "no backup before the rule's delay");
        clock.advance(MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 2, "the backup at 5 ms");
        clock.advance(10 * MS);
        assert!(poll(&mut call).expect("answered").is_ok());
        drop(call);

        // Off for a method the policy marks: no backup.
        gov.set_retry(MethodRules::new().any(RetryRule::Off));
        let mock = Mock::new(&clock, vec![after(30 * MS, Outcome::Ok)], now(Outcome::Ok));
        let svc = governed(fixed(), &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(30 * MS);
        assert!(poll(&mut call).expect("answered").is_ok());
        assert_eq!(mock.attempts(), 1);
    }

    #[test]
    fn a_fast_first_attempt_sends_no_backup() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![after(19 * MS, Outcome::Ok)], now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(19 * MS);
        assert!(poll(&mut call).expect("answered").is_ok());
        drop(call);
        assert_eq!((mock.attempts(), mock.cancelled()), (1, 0));
        assert_eq!(clock.sleepers(), 0, "the delay's timer is gone");
        assert_eq!(cx.rpc.callee.address, Some(addr(0)));
        assert!(cx.picks.is_none(), "the layer's picks cell stays inside");
    }

    #[test]
    fn the_backup_goes_to_another_instance_after_the_delay_and_wins() {
        let clock = ManualClock::new();
        let script = vec![forever(), after(10 * MS, Outcome::Ok)];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));

        assert!(poll(&mut call).is_none());
        clock.advance(19 * MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 1, "no backup before the delay");
        clock.advance(MS);
        assert!(poll(&mut call).is_none());
        let seen = mock.seen();
        assert_eq!(seen.len(), 2, "the backup went out at 20 ms");
        assert_eq!((seen[1].attempt, seen[1].instance.clone()), (1, addr(1)));
        assert_eq!(
            seen[1].avoid,
            [addr(0)],
            "the first attempt's pick is avoided"
        );
        assert_eq!(seen[1].mark.as_deref(), Some("1"));
        assert_eq!(mock.cancelled(), 0);

        clock.advance(10 * MS);
        assert!(poll(&mut call).expect("the backup answered").is_ok());
        assert_eq!(mock.cancelled(), 1, "the first attempt was dropped");
        drop(call);
        assert_eq!(cx.rpc.callee.address, Some(addr(1)), "the winner's context");
        assert_eq!(cx.attempt, 1);
        assert_eq!(
            cx.metainfo.persistent(RETRY_KEY),
            None,
            "the mark is not kept"
        );
        assert!(cx.picks.is_none());
    }

    #[test]
    fn the_first_attempt_may_still_win_and_cancel_the_backup() {
        let clock = ManualClock::new();
        let answer = Arc::new(Notify::new());
        let first = Step {
            wait: Wait::On(answer.clone()),
            outcome: Outcome::Ok,
        };
        let mock = Mock::new(&clock, vec![first, forever()], now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(20 * MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 2);
        answer.notify_one();
        assert!(poll(&mut call).expect("the first answered").is_ok());
        assert_eq!(mock.cancelled(), 1, "the backup was dropped");
        drop(call);
        assert_eq!((cx.rpc.callee.address, cx.attempt), (Some(addr(0)), 0));
    }

    #[test]
    fn a_failed_attempt_waits_for_the_other_and_both_failing_give_the_last_error() {
        let clock = ManualClock::new();
        let script = vec![
            after(30 * MS, Outcome::Timeout),
            after(50 * MS, Outcome::Ok),
        ];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(20 * MS);
        assert!(poll(&mut call).is_none());
        clock.advance(10 * MS);
        assert!(
            poll(&mut call).is_none(),
            "the first failed, the backup runs"
        );
        clock.advance(40 * MS);
        assert!(poll(&mut call).expect("the backup answered").is_ok());
        drop(call);
        assert_eq!(mock.cancelled(), 0);

        let script = vec![
            after(30 * MS, Outcome::Timeout),
            after(20 * MS, Outcome::Io),
        ];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(20 * MS);
        assert!(poll(&mut call).is_none());
        clock.advance(10 * MS);
        assert!(
            poll(&mut call).is_none(),
            "the first failed, the backup runs"
        );
        clock.advance(10 * MS);
        let err = poll(&mut call).expect("both failed").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io, "the last error");
        drop(call);
        assert_eq!(
            cx.tried(),
            [addr(0), addr(1)],
            "both instances count as tried"
        );
    }

    #[test]
    fn a_first_attempt_failing_before_the_delay_gets_no_backup() {
        let clock = ManualClock::new();
        let mock = Mock::new(
            &clock,
            vec![after(5 * MS, Outcome::Connect)],
            now(Outcome::Ok),
        );
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(5 * MS);
        let err = poll(&mut call).expect("failed").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connect);
        assert_eq!(mock.attempts(), 1);
    }

    #[test]
    fn only_idempotent_calls_with_a_reply_get_backups() {
        let clock = ManualClock::new();
        for req in [
            request("add_user"),
            ClientRequest::oneway("echo", Text::default()),
        ] {
            let mock = Mock::new(&clock, vec![after(100 * MS, Outcome::Ok)], now(Outcome::Ok));
            let svc = backup(fixed(), &clock, &mock);
            let mut cx = ClientContext::new();
            let mut call = Box::pin(svc.call(&mut cx, req.clone()));
            assert!(poll(&mut call).is_none());
            clock.advance(50 * MS);
            assert!(poll(&mut call).is_none());
            assert_eq!(mock.attempts(), 1, "{req:?}");
            clock.advance(50 * MS);
            assert!(poll(&mut call).expect("answered").is_ok());
        }
    }

    #[test]
    fn a_request_retried_upstream_gets_no_backup() {
        let clock = ManualClock::new();
        let mock = Mock::new(&clock, vec![after(100 * MS, Outcome::Ok)], now(Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let mut cx = ClientContext::new();
        cx.metainfo.set_persistent(RETRY_KEY, "2");
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(50 * MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 1);
        clock.advance(50 * MS);
        assert!(poll(&mut call).expect("answered").is_ok());
        drop(call);
        assert_eq!(cx.metainfo.persistent(RETRY_KEY), Some("2"));
    }

    #[test]
    fn a_retry_from_a_layer_above_may_get_a_backup() {
        use crate::client::{Backoff, RetryLayer, RetryPolicy};

        let clock = ManualClock::new();
        // The first attempt fails to connect; the retry is stuck; its backup answers.
        let script = vec![now(Outcome::Connect), forever(), now(Outcome::Ok)];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let svc = RetryLayer::new(RetryPolicy::new().backoff(Backoff::None))
            .with_clock(clock.clone())
            .layer(backup(fixed(), &clock, &mock));
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 2, "retried at once");
        clock.advance(20 * MS);
        assert!(poll(&mut call).expect("the backup answered").is_ok());
        drop(call);

        let seen = mock.seen();
        let view: Vec<_> = seen
            .iter()
            .map(|s| (s.attempt, s.instance.clone(), s.mark.as_deref()))
            .collect();
        assert_eq!(
            view,
            [
                (0, addr(0), None),
                (1, addr(1), Some("1")),
                (2, addr(2), Some("2")),
            ]
        );
        assert_eq!(seen[2].avoid, [addr(0), addr(1)]);
        assert_eq!(mock.cancelled(), 1);
        assert_eq!((cx.attempt, cx.metainfo.persistent(RETRY_KEY)), (2, None));
    }

    #[test]
    fn the_budget_bounds_the_backups() {
        let clock = ManualClock::new();
        // Every call is slow; every backup is slower still, so the first attempt wins.
        let mock = Mock::new(&clock, vec![], after(30 * MS, Outcome::Ok));
        let svc = backup(fixed(), &clock, &mock);
        let calls = 50;
        for _ in 0..calls {
            let mut cx = ClientContext::new();
            let mut call = Box::pin(svc.call(&mut cx, request("echo")));
            assert!(poll(&mut call).is_none());
            clock.advance(20 * MS);
            assert!(poll(&mut call).is_none());
            clock.advance(10 * MS);
            assert!(poll(&mut call).expect("answered").is_ok());
        }
        // Without a budget: one backup per call. With ratio 0.1: the 10 the budget
        // starts with and one per ten calls (14: the first deposit finds it full).
        let backups = mock.attempts() - calls;
        assert!((13..=16).contains(&backups), "{backups} backups");
        assert_eq!(mock.cancelled(), backups);
    }

    #[test]
    fn the_percentile_delay_follows_the_latencies() {
        let clock = ManualClock::new();
        let policy = BackupPolicy::new(BackupDelay::Percentile {
            pct: 0.99,
            min: MS,
            max: 500 * MS,
        })
        .idempotent(["echo"]);
        // One call of 100 ms, then 99 of 40 ms: 100 samples, their p99 40 ms.
        let mock = Mock::new(
            &clock,
            vec![after(100 * MS, Outcome::Ok)],
            after(40 * MS, Outcome::Ok),
        );
        let svc = backup(policy, &clock, &mock);
        let run = |latency: Duration| {
            let mut cx = ClientContext::new();
            let mut call = Box::pin(svc.call(&mut cx, request("echo")));
            assert!(poll(&mut call).is_none());
            clock.advance(latency);
            assert!(poll(&mut call).expect("answered").is_ok());
        };
        run(100 * MS);
        assert_eq!(mock.attempts(), 1, "warming up: the delay is max, 500 ms");
        for _ in 0..99 {
            run(40 * MS);
        }
        assert_eq!(mock.attempts(), 100, "no backups for calls under the delay");

        // A stuck first attempt now gets its backup at 40 ms.
        mock.push(forever());
        mock.push(now(Outcome::Ok));
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, request("echo")));
        assert!(poll(&mut call).is_none());
        clock.advance(39 * MS);
        assert!(poll(&mut call).is_none());
        assert_eq!(mock.attempts(), 101);
        clock.advance(MS);
        assert!(poll(&mut call).expect("the backup answered").is_ok());
        assert_eq!((mock.attempts(), mock.cancelled()), (102, 1));
    }
}
