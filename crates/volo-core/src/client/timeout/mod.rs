//! The call timeout: a call that has not finished by its deadline fails with
//! [`ErrorKind::Timeout`](super::ErrorKind::Timeout), and what it was doing below (a
//! connect, retries, a backup request, the wait for a reply) is dropped.
//!
//! The timeout is the call's [`ClientContext::timeout`], or else the rule for its
//! method in the client's [governance](crate::governance) (when it has one: a timeout
//! set in a config center, which may also set the call's connect timeout), or else the
//! client's [`ClientTimeouts::rpc`](crate::client::ClientTimeouts::rpc) (10 s by
//! default).
//! It bounds the whole call, retries included. The layer sets `cx.rpc.deadline` (or
//! keeps an earlier one already there, such as a deadline carried over from the
//! server call being handled), and the transport sends the time left to the server in
//! TTHeader (Kitex's RPC timeout key), so the server can give up on the call when its
//! caller has.
//!
//! A call fails within 1% of its limit after its deadline (the layer reads the time
//! to within 1% of the limit, and calls of at least the client's default limit, or
//! 100 ms, are timed by one shared timer that looks at them once per 1% of that
//! limit: see `watchdog.rs`). Shorter calls get a timer of their own and fail at
//! their deadline.

mod layer;
mod watchdog;

pub use layer::TimeoutLayer;

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use watchdog::{Outcome, Watchdog};

use super::{ClientCall, ClientContext, Error};
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::service::Service;

/// Fails calls that outlast their timeout (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Timeout<S, C = SystemClock> {
    inner: S,
    default: Option<Duration>,
    /// Rules per method that come before `default`, when set.
    governance: Option<ClientGovernance>,
    clock: C,
    /// Times the calls with at least `default` (or 100 ms) left; shared by clones.
    watchdog: Arc<Watchdog<C>>,
}

impl<S, C: Clock> Timeout<S, C> {
    /// Calls without a timeout of their own get `default` (`None`: no limit).
    pub fn new(inner: S, default: Option<Duration>, clock: C) -> Self {
        Timeout {
            inner,
            default,
            governance: None,
            watchdog: Watchdog::new(clock.clone(), default.unwrap_or_default()),
            clock,
        }
    }
}

impl<S, C, R> Service<ClientContext, R> for Timeout<S, C>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Sync,
    C: Clock,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        let governed = match &self.governance {
            None => None,
            Some(g) => {
                let rule = g.load().timeouts.get(&cx.rpc.method).copied();
                cx.connect_timeout = rule.and_then(|r| r.connect);
                rule
            }
        };
        let limit = match (cx.timeout, governed) {
            (Some(own), _) => Some(own),
            (None, Some(rule)) => rule.rpc,
            (None, None) => self.default,
        };
        let Some(limit) = limit else {
            return self.inner.call(cx, req).await;
        };
        // Read to within 1% of the limit: a coarse reading for the usual limits of a
        // second or more saves a precise one on every call.
        let start = self.clock.now_within(limit / 100);
        let ours = start + limit;
        let (deadline, left) = match cx.rpc.deadline {
            // An earlier deadline already there (from the server call being handled).
            Some(d) if d < ours => (d, d.saturating_duration_since(start)),
            _ => (ours, limit),
        };
        cx.rpc.deadline = Some(deadline);
        let watched = left >= self.watchdog.min_left();
        let answered = {
            // The call, then the timer, polled by hand: `select!` over the call and an
            // `async` block for the timer cost a fifth of the layer (its branch
            // bookkeeping, and dropping the block's state).
            let mut call = pin!(self.inner.call(cx, req));
            let mut wait = watched.then(|| self.watchdog.wait(deadline));
            let mut own_timer = pin!(None);
            poll_fn(|task| {
                if let Poll::Ready(done) = call.as_mut().poll(task) {
                    return Poll::Ready(Some(done));
                }
                if let Some(w) = wait.as_mut() {
                    match Pin::new(w).poll(task) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Outcome::Expired) => return Poll::Ready(None),
                        // No sweeper to be had: a timer of the call's own.
                        Poll::Ready(Outcome::Unwatched) => wait = None,
                    }
                }
                if own_timer.is_none() {
                    own_timer.set(Some(self.clock.sleep_until(deadline)));
                }
                match own_timer.as_mut().as_pin_mut() {
                    Some(timer) => timer.poll(task).map(|()| None),
                    None => Poll::Pending,
                }
            })
            .await
        };
        answered.unwrap_or_else(|| {
            // The attempt cut short is gone; the instance it was on (which the balancer
            // below put in the context) is the one that did not answer in time.
            let e = Error::timeout(limit);
            Err(match cx.rpc.callee.address.clone() {
                Some(addr) => e.with_instance(addr),
                None => e,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll};
    use std::time::Instant;

    use futures_util::task::noop_waker_ref;

    use super::*;
    use crate::client::{ClientRequest, ClientResponse};
    use crate::clock::ManualClock;
    use crate::service::{Layer, service_fn};

    /// Answers `delay` after it was called, on the clock; records the deadline it saw.
    fn slow(
        clock: ManualClock,
        delay: Duration,
        seen: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
    ) -> impl Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync
    {
        service_fn(move |cx: &mut ClientContext, _req: ClientRequest| {
            *seen.lock().unwrap() = cx.rpc.deadline;
            let wait = clock.sleep_until(clock.now() + delay);
            async move {
                wait.await;
                Ok(ClientResponse::none())
            }
        })
    }

    fn req() -> ClientRequest {
        ClientRequest::new("m", thrift_wire::fixtures::echo::Request::default())
    }

    fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(noop_waker_ref()))
    }

    /// The timeout error a call ended with (it must have ended with one).
    fn timed_out(polled: Poll<Result<ClientResponse, Error>>) -> Error {
        match polled {
            Poll::Ready(Err(e)) if e.is_timeout() => e,
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    /// A governance rule for the method comes between the call's own timeout and
    /// the client's, and sets the call's connect timeout; when it goes, the client's
    /// holds again.
    #[test]
    fn a_governance_rule_times_its_method() {
        use crate::governance::{MethodRules, TimeoutRule};
        let clock = ManualClock::new();
        let gov = ClientGovernance::new("svc");
        let svc = TimeoutLayer::new(Some(Duration::from_millis(100)))
            .governed(Some(gov.clone()))
            .with_clock(clock.clone())
            .layer(slow(
                clock.clone(),
                Duration::from_millis(50),
                Default::default(),
            ));
        let rule = TimeoutRule {
            rpc: Some(Duration::from_millis(30)),
            connect: Some(Duration::from_millis(7)),
        };
        gov.set_timeouts(MethodRules::new().method("m", rule));
        // Started, then `wait` later.
        let run = |cx: &mut ClientContext, wait: Duration| {
            let mut call = Box::pin(svc.call(cx, req()));
            assert!(poll(call.as_mut()).is_pending());
            clock.advance(wait);
            poll(call.as_mut())
        };
        let mut cx = ClientContext::new();
        cx.rpc.method = "m".into();
        let e = timed_out(run(&mut cx, Duration::from_millis(30)));
        assert!(e.to_string().contains("30ms"), "{e}");
        assert_eq!(cx.connect_timeout, Some(Duration::from_millis(7)));

        // Another method: the client's 100 ms, and its own connect timeout.
        let mut other = ClientContext::new();
        other.rpc.method = "n".into();
        assert!(matches!(
            run(&mut other, Duration::from_millis(50)),
            Poll::Ready(Ok(_))
        ));
        assert_eq!(other.connect_timeout, None);

        // The call's own timeout comes first.
        cx.rpc.deadline = None;
        cx.timeout = Some(Duration::from_millis(60));
        assert!(matches!(
            run(&mut cx, Duration::from_millis(50)),
            Poll::Ready(Ok(_))
        ));

        // The rule removed: the client's 100 ms again.
        gov.set_timeouts(MethodRules::new());
        cx.rpc.deadline = None;
        cx.timeout = None;
        assert!(matches!(
            run(&mut cx, Duration::from_millis(50)),
            Poll::Ready(Ok(_))
        ));
        assert_eq!(cx.connect_timeout, None);
    }

    #[test]
    fn a_call_past_its_deadline_fails_and_one_in_time_does_not() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        let seen = Default::default();
        let svc = Timeout::new(
            slow(
                clock.clone(),
                Duration::from_millis(50),
                std::sync::Arc::clone(&seen),
            ),
            Some(Duration::from_millis(100)),
            clock.clone(),
        );
        // In time: answered at 50 ms of a 100 ms limit.
        let mut cx = ClientContext::new();
        let mut call = pin!(svc.call(&mut cx, req()));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(50));
        assert!(matches!(poll(call.as_mut()), Poll::Ready(Ok(_))));
        assert_eq!(*seen.lock().unwrap(), Some(t0 + Duration::from_millis(100)));

        // Too slow: a per-call timeout of 20 ms wins over the client's 100 ms.
        let mut cx = ClientContext::new();
        cx.timeout = Some(Duration::from_millis(20));
        let start = clock.now();
        let mut call = pin!(svc.call(&mut cx, req()));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(19));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(1));
        timed_out(poll(call.as_mut()));
        assert_eq!(
            *seen.lock().unwrap(),
            Some(start + Duration::from_millis(20))
        );
    }

    #[test]
    fn a_timeout_names_the_instance_the_attempt_was_on() {
        let clock = ManualClock::new();
        let on = crate::context::Address::Tcp(([127, 0, 0, 1], 7).into());
        let picked = on.clone();
        // As a balancer below would: the instance goes into the context, then the
        // attempt waits for an answer that never comes.
        let hang = service_fn(move |cx: &mut ClientContext, _req: ClientRequest| {
            cx.rpc.callee.address = Some(picked.clone());
            std::future::pending::<Result<ClientResponse, Error>>()
        });
        let svc = Timeout::new(hang, Some(Duration::from_millis(10)), clock.clone());
        let mut cx = ClientContext::new();
        let mut call = pin!(svc.call(&mut cx, req()));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(10));
        assert_eq!(timed_out(poll(call.as_mut())).instance(), Some(&on));
    }

    #[test]
    fn an_earlier_deadline_in_the_context_is_kept() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        let seen = Default::default();
        let svc = Timeout::new(
            slow(
                clock.clone(),
                Duration::from_secs(60),
                std::sync::Arc::clone(&seen),
            ),
            Some(Duration::from_secs(10)),
            clock.clone(),
        );
        let mut cx = ClientContext::new();
        cx.rpc.deadline = Some(t0 + Duration::from_secs(1));
        let mut call = pin!(svc.call(&mut cx, req()));
        assert!(poll(call.as_mut()).is_pending());
        assert_eq!(*seen.lock().unwrap(), Some(t0 + Duration::from_secs(1)));
        clock.advance(Duration::from_secs(1));
        timed_out(poll(call.as_mut()));
    }

    /// Waits for nothing, ever.
    fn hang() -> impl Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>
    + Send
    + Sync
    + 'static {
        service_fn(|_cx: &mut ClientContext, _req: ClientRequest| {
            std::future::pending::<Result<ClientResponse, Error>>()
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        // No timers of tokio's: every timer here is the manual clock's.
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    }

    /// Lets every task that can run on a current-thread runtime run.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn calls_of_the_default_limit_share_one_timer_and_fail_within_a_tick() {
        let clock = ManualClock::new();
        let limit = Duration::from_secs(1);
        let tick = limit / 100;
        let svc = std::sync::Arc::new(Timeout::new(hang(), Some(limit), clock.clone()));
        runtime().block_on(async {
            let calls: Vec<_> = (0..100)
                .map(|_| {
                    let svc = std::sync::Arc::clone(&svc);
                    tokio::spawn(async move { svc.call(&mut ClientContext::new(), req()).await })
                })
                .collect();
            settle().await;
            // One timer (the sweeper's) for a hundred calls waiting.
            assert_eq!(svc.watchdog.watched(), 100);
            assert_eq!(clock.sleepers(), 1);

            clock.advance(limit - Duration::from_millis(1));
            settle().await;
            assert!(
                calls.iter().all(|c| !c.is_finished()),
                "none before the deadline"
            );

            clock.advance(Duration::from_millis(1) + tick);
            settle().await;
            for call in calls {
                let e = call.await.expect("the call task").expect_err("a timeout");
                assert!(e.is_timeout(), "{e:?}");
            }
            assert_eq!(svc.watchdog.watched(), 0, "ended calls free their slots");
        });
    }

    #[test]
    fn a_call_with_a_shorter_limit_of_its_own_gets_its_own_timer() {
        let clock = ManualClock::new();
        let svc = std::sync::Arc::new(Timeout::new(
            hang(),
            Some(Duration::from_secs(1)),
            clock.clone(),
        ));
        runtime().block_on(async {
            let call = {
                let svc = std::sync::Arc::clone(&svc);
                tokio::spawn(async move {
                    let mut cx = ClientContext::new();
                    cx.timeout = Some(Duration::from_millis(20));
                    svc.call(&mut cx, req()).await
                })
            };
            settle().await;
            assert_eq!(svc.watchdog.watched(), 0);
            assert_eq!(clock.sleepers(), 1, "the call's own timer");
            clock.advance(Duration::from_millis(19));
            settle().await;
            assert!(!call.is_finished());
            // Exactly at its deadline, not a tick later.
            clock.advance(Duration::from_millis(1));
            settle().await;
            assert!(call.is_finished());
            assert!(call.await.unwrap().unwrap_err().is_timeout());
        });
    }

    #[test]
    fn a_call_outside_a_runtime_times_itself() {
        let clock = ManualClock::new();
        let svc = Timeout::new(hang(), Some(Duration::from_secs(1)), clock.clone());
        let mut cx = ClientContext::new();
        let mut call = pin!(svc.call(&mut cx, req()));
        assert!(poll(call.as_mut()).is_pending());
        // No runtime to start a sweeper on: the call has a timer of its own.
        assert_eq!(svc.watchdog.watched(), 0);
        assert_eq!(clock.sleepers(), 1);
        clock.advance(Duration::from_secs(1));
        timed_out(poll(call.as_mut()));
    }

    #[test]
    fn when_the_sweepers_runtime_shuts_down_a_call_moves_to_its_own() {
        let clock = ManualClock::new();
        let limit = Duration::from_secs(1);
        let svc = Timeout::new(hang(), Some(limit), clock.clone());
        let mut cx = ClientContext::new();
        let mut call = Box::pin(svc.call(&mut cx, req()));
        async fn once<F: Future + Unpin>(call: &mut F) -> Poll<F::Output> {
            std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *call).poll(cx))).await
        }

        // Polled first on runtime A, which starts the sweeper there...
        let first = runtime();
        assert!(first.block_on(once(&mut call)).is_pending());
        assert_eq!(svc.watchdog.watched(), 1);
        // ...and shuts down before the sweeper ever ran.
        drop(first);

        let second = runtime();
        second.block_on(async {
            assert!(once(&mut call).await.is_pending());
            settle().await;
            assert_eq!(clock.sleepers(), 1, "a sweeper again, on this runtime");
            clock.advance(limit + limit / 100);
            settle().await;
            timed_out(once(&mut call).await);
        });
    }

    #[test]
    fn a_dropped_client_stops_its_sweeper() {
        let clock = ManualClock::new();
        let answer = service_fn(|_cx: &mut ClientContext, _req: ClientRequest| async {
            tokio::task::yield_now().await;
            Ok(ClientResponse::none())
        });
        let svc = Timeout::new(answer, Some(Duration::from_secs(1)), clock.clone());
        runtime().block_on(async {
            for _ in 0..1000 {
                svc.call(&mut ClientContext::new(), req())
                    .await
                    .expect("answered");
            }
            assert_eq!(svc.watchdog.watched(), 0);
            // One call at a time: each reuses the slot the one before freed.
            assert!(
                svc.watchdog.slots_held() < 16,
                "{}",
                svc.watchdog.slots_held()
            );
            settle().await;
            assert_eq!(clock.sleepers(), 1, "the sweeper");
            drop(svc);
            // At its next look the sweeper finds the client gone and ends.
            clock.advance(Duration::from_secs(1));
            settle().await;
            assert_eq!(clock.sleepers(), 0);
        });
    }
}
