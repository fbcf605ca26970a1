//! The breakers against a scripted inner service, with a manual clock: time moves only
//! when a test says so, and no test sleeps.

use std::error::Error as _;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::*;
use crate::client::balance::{Instance, InstanceList, Step};
use crate::client::{ClientRequest, ClientResponse};
use crate::clock::ManualClock;
use crate::context::Address;
use crate::service::Layer;
use crate::test_support::Text;

const MS: Duration = Duration::from_millis(1);
const OPEN_FOR: Duration = Duration::from_secs(5);

/// What the scripted service does with the calls that reach it.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Ok,
    Fail(ErrorKind),
    /// Never answers (until its future is dropped).
    Hang,
}

/// An inner service that answers as told and counts the calls that reach it.
#[derive(Clone)]
struct Scripted {
    calls: Arc<AtomicUsize>,
    reply: Arc<Mutex<Reply>>,
}

impl Scripted {
    fn new() -> Self {
        Scripted {
            calls: Arc::default(),
            reply: Arc::new(Mutex::new(Reply::Ok)),
        }
    }

    fn set(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<ClientContext, ClientRequest> for Scripted {
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        _cx: &mut ClientContext,
        _req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let reply = *self.reply.lock().unwrap();
        match reply {
            Reply::Ok => Ok(ClientResponse::none()),
            Reply::Fail(kind) => Err(Error::new(kind, "scripted")),
            Reply::Hang => std::future::pending().await,
        }
    }
}

/// Polls `f` once.
fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// The output of a future that must be ready at once (the scripted service never
/// waits unless told to hang).
fn ready<F: Future>(f: F) -> F::Output {
    match poll_once(pin!(f)) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the call waited"),
    }
}

fn context() -> ClientContext {
    let mut cx = ClientContext::new();
    cx.rpc.callee.service = "EchoService".into();
    cx
}

fn request() -> ClientRequest {
    ClientRequest::new("echo", Text::default())
}

/// A service breaker over a scripted service, on a manual clock.
struct Rig {
    clock: ManualClock,
    inner: Scripted,
    svc: ServiceBreaker<Scripted, ManualClock>,
}

impl Rig {
    /// Service defaults (50%, 5 s open, 3 trials), judged from 20 calls.
    fn new() -> Self {
        Self::with(BreakerConfig {
            min_samples: 20,
            ..BreakerConfig::service()
        })
    }

    fn with(config: BreakerConfig) -> Self {
        let clock = ManualClock::new();
        let inner = Scripted::new();
        let svc = ServiceBreakerLayer::with_clock(config, clock.clone()).layer(inner.clone());
        Rig { clock, inner, svc }
    }

    fn call(&self) -> Result<ClientResponse, Error> {
        ready(self.svc.call(&mut context(), request()))
    }

    /// `n` calls answered with `reply`.
    fn calls(&self, n: usize, reply: Reply) {
        self.inner.set(reply);
        for _ in 0..n {
            let _ = self.call();
        }
    }

    fn open(&self) {
        self.calls(20, Reply::Fail(ErrorKind::Io));
        assert_eq!(self.svc.state(), BreakerState::Open);
    }

    /// Opened, then `open_for` later.
    fn half_open(&self) {
        self.open();
        self.clock.advance(OPEN_FOR);
        assert_eq!(self.svc.state(), BreakerState::HalfOpen);
    }
}

fn assert_fails_fast(result: Result<ClientResponse, Error>) {
    let e = result.expect_err("refused");
    assert!(e.is_circuit_open(), "{e}");
    assert!(!e.may_have_run());
    let which = e.source().and_then(|s| s.downcast_ref::<CircuitOpen>());
    assert_eq!(which, Some(&CircuitOpen::Service("EchoService".into())));
}

#[test]
fn service_breaker_opens_at_min_samples_not_before() {
    let rig = Rig::new();
    rig.calls(19, Reply::Fail(ErrorKind::Connect));
    assert_eq!(
        rig.svc.state(),
        BreakerState::Closed,
        "19 calls are too few"
    );
    let e = rig.call().unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::Connect,
        "the 20th call itself went out"
    );
    assert_eq!(rig.svc.state(), BreakerState::Open);
    assert_eq!(rig.inner.calls(), 20);
}

#[test]
fn service_breaker_opens_at_the_error_rate_not_below() {
    let rig = Rig::new();
    rig.calls(11, Reply::Ok);
    rig.calls(9, Reply::Fail(ErrorKind::Timeout));
    assert_eq!(rig.svc.state(), BreakerState::Closed, "9 of 20: 45%");
    rig.calls(1, Reply::Fail(ErrorKind::Timeout));
    assert_eq!(rig.svc.state(), BreakerState::Closed, "10 of 21: 48%");
    rig.calls(1, Reply::Fail(ErrorKind::Timeout));
    assert_eq!(rig.svc.state(), BreakerState::Open, "11 of 22: 50%");
}

#[test]
fn open_breaker_fails_fast_without_calling_inner() {
    let rig = Rig::new();
    rig.open();
    let before = rig.inner.calls();
    rig.inner.set(Reply::Ok);
    for _ in 0..100 {
        assert_fails_fast(rig.call());
    }
    rig.clock.advance(OPEN_FOR - MS);
    assert_fails_fast(rig.call());
    assert_eq!(
        rig.inner.calls(),
        before,
        "nothing reached the inner service"
    );
    assert_eq!(rig.svc.state(), BreakerState::Open);
}

#[test]
fn half_open_lets_probes_through_and_closes_after_the_successes() {
    let rig = Rig::new();
    rig.half_open();
    let before = rig.inner.calls();
    rig.inner.set(Reply::Ok);
    rig.call().unwrap();
    rig.call().unwrap();
    assert_eq!(
        rig.svc.state(),
        BreakerState::HalfOpen,
        "two of three successes"
    );
    rig.call().unwrap();
    assert_eq!(rig.svc.state(), BreakerState::Closed);
    for _ in 0..50 {
        rig.call().unwrap();
    }
    assert_eq!(rig.inner.calls(), before + 53);
    // The count starts afresh: the failures that opened it are forgotten.
    rig.calls(19, Reply::Fail(ErrorKind::Io));
    assert_eq!(rig.svc.state(), BreakerState::Closed);
}

#[test]
fn half_open_lets_at_most_the_probes_through_at_once() {
    let rig = Rig::new();
    rig.half_open();
    rig.inner.set(Reply::Hang);
    let mut probes: Vec<_> = (0..3)
        .map(|_| {
            let svc = &rig.svc;
            Box::pin(async move { svc.call(&mut context(), request()).await })
        })
        .collect();
    for p in &mut probes {
        assert!(poll_once(p.as_mut()).is_pending());
    }
    assert_eq!(rig.inner.calls(), 23, "three trial calls went out");
    assert_fails_fast(rig.call());
    assert_eq!(rig.inner.calls(), 23, "the fourth did not");
}

#[test]
fn a_failed_probe_reopens_the_breaker() {
    let rig = Rig::new();
    rig.half_open();
    rig.calls(1, Reply::Ok);
    rig.calls(1, Reply::Fail(ErrorKind::Timeout));
    assert_eq!(rig.svc.state(), BreakerState::Open);
    assert_fails_fast(rig.call());
    rig.clock.advance(OPEN_FOR - MS);
    assert_fails_fast(rig.call());
    rig.clock.advance(MS);
    assert_eq!(rig.svc.state(), BreakerState::HalfOpen);
    rig.calls(3, Reply::Ok);
    assert_eq!(rig.svc.state(), BreakerState::Closed);
}

#[test]
fn a_cancelled_probe_frees_its_slot() {
    let rig = Rig::with(BreakerConfig {
        min_samples: 20,
        half_open_probes: 1,
        half_open_successes: 1,
        ..BreakerConfig::service()
    });
    rig.half_open();
    rig.inner.set(Reply::Hang);
    {
        let mut cx = context();
        let mut probe = pin!(rig.svc.call(&mut cx, request()));
        assert!(poll_once(probe.as_mut()).is_pending());
        assert_fails_fast(rig.call());
        // Dropped here: cancelled, before any deadline.
    }
    assert_eq!(
        rig.svc.state(),
        BreakerState::HalfOpen,
        "a cancel is no failure"
    );
    rig.inner.set(Reply::Ok);
    rig.call().expect("the slot is free again");
    assert_eq!(rig.svc.state(), BreakerState::Closed);
}

#[test]
fn a_call_cut_short_at_its_deadline_counts_as_a_failure() {
    for (cut_at, state) in [
        (Duration::from_secs(1), BreakerState::Open),
        (Duration::from_secs(1) - MS, BreakerState::Closed),
    ] {
        let rig = Rig::new();
        rig.calls(19, Reply::Fail(ErrorKind::Io));
        rig.inner.set(Reply::Hang);
        let mut cx = context();
        cx.rpc.deadline = Some(rig.clock.now() + Duration::from_secs(1));
        {
            let mut call = pin!(rig.svc.call(&mut cx, request()));
            assert!(poll_once(call.as_mut()).is_pending());
            rig.clock.advance(cut_at);
        }
        assert_eq!(rig.svc.state(), state, "cut at {cut_at:?}");
    }
}

#[test]
fn old_failures_leave_the_window() {
    for (gap, state) in [
        // Slot 9 of 1 s slots still holds the failures of slot 0...
        (Duration::from_secs(10) - MS, BreakerState::Open),
        // ...slot 10 no longer does.
        (Duration::from_secs(10), BreakerState::Closed),
    ] {
        let rig = Rig::new();
        rig.calls(15, Reply::Fail(ErrorKind::Io));
        rig.clock.advance(gap);
        rig.calls(5, Reply::Fail(ErrorKind::Io));
        assert_eq!(rig.svc.state(), state, "after {gap:?}");
    }
}

#[test]
fn answers_count_as_successes_and_local_errors_not_at_all() {
    // Refusals on this side are not samples: 20 failures after them still open it.
    let rig = Rig::new();
    for kind in [
        ErrorKind::CircuitOpen,
        ErrorKind::NoInstance,
        ErrorKind::Encode,
        ErrorKind::Rejected,
    ] {
        rig.calls(50, Reply::Fail(kind));
    }
    rig.calls(20, Reply::Fail(ErrorKind::Protocol));
    assert_eq!(rig.svc.state(), BreakerState::Open);

    // Application exceptions are answers: 20 of them and 19 failures stay closed.
    let rig = Rig::new();
    rig.calls(20, Reply::Fail(ErrorKind::Application));
    rig.calls(19, Reply::Fail(ErrorKind::Io));
    assert_eq!(rig.svc.state(), BreakerState::Closed);
    rig.calls(1, Reply::Fail(ErrorKind::Io));
    assert_eq!(rig.svc.state(), BreakerState::Open);
}

#[test]
fn refusals_for_load_do_not_open_the_service_breaker() {
    // A server's limiter refusing most calls: the service breaker stays closed, so
    // what the limit lets through still gets through.
    let rig = Rig::new();
    rig.calls(500, Reply::Fail(ErrorKind::Overloaded));
    assert_eq!(rig.svc.state(), BreakerState::Closed);
    assert_eq!(rig.inner.calls(), 500, "every call went out");
    // Nor are they samples: 20 real failures among them still open it.
    rig.calls(20, Reply::Fail(ErrorKind::Io));
    assert_eq!(rig.svc.state(), BreakerState::Open);
    // And a trial refused for load neither closes nor reopens it.
    rig.clock.advance(OPEN_FOR);
    rig.calls(1, Reply::Fail(ErrorKind::Overloaded));
    assert_eq!(rig.svc.state(), BreakerState::HalfOpen);
    rig.calls(3, Reply::Ok);
    assert_eq!(rig.svc.state(), BreakerState::Closed);
}

#[test]
fn counts_as_failure_follows_the_kinds() {
    let failure = |kind| counts_as_failure(&Error::new(kind, "x"));
    for kind in [
        ErrorKind::Connect,
        ErrorKind::Io,
        ErrorKind::Timeout,
        ErrorKind::Overloaded,
        ErrorKind::Protocol,
    ] {
        assert!(failure(kind), "{kind:?}");
    }
    for kind in [
        ErrorKind::Application,
        ErrorKind::CircuitOpen,
        ErrorKind::NoInstance,
        ErrorKind::Encode,
        ErrorKind::Rejected,
    ] {
        assert!(!failure(kind), "{kind:?}");
    }
}

#[test]
fn clones_share_one_breaker() {
    let rig = Rig::new();
    let other = rig.svc.clone();
    rig.open();
    assert_eq!(other.state(), BreakerState::Open);
    assert_fails_fast(ready(other.call(&mut context(), request())));
}

fn addr(port: u16) -> Address {
    Address::Tcp(([10, 0, 0, 1], port).into())
}

fn instances(clock: &ManualClock) -> InstanceBreakers<ManualClock> {
    InstanceBreakers::with_clock(BreakerConfig::instance(), clock.clone())
}

fn attempt(breakers: &InstanceBreakers<ManualClock>, at: &Address, failed: bool) {
    breakers.allow(at).expect("let through").record(failed);
}

#[test]
fn instance_breakers_open_per_address_independently() {
    let clock = ManualClock::new();
    let breakers = instances(&clock);
    let (a, b, c) = (addr(1), addr(2), addr(3));
    for i in 0..10 {
        assert!(breakers.is_available(&a), "failure {i}");
        attempt(&breakers, &a, true);
        attempt(&breakers, &b, false);
    }
    assert_eq!(
        breakers.state(&a),
        BreakerState::Open,
        "10 failures in a row"
    );
    assert!(!breakers.is_available(&a));
    assert!(breakers.allow(&a).is_none());
    assert_eq!(breakers.state(&b), BreakerState::Closed);
    assert!(breakers.is_available(&b) && breakers.allow(&b).is_some());
    // The rate rule: half of 10, never 10 in a row.
    for i in 0..10 {
        attempt(&breakers, &c, i % 2 == 0);
    }
    assert_eq!(breakers.state(&c), BreakerState::Open);
    assert_eq!(breakers.state(&addr(4)), BreakerState::Closed, "never seen");
    assert_eq!(breakers.len(), 3);
}

#[test]
fn instance_breaker_half_opens_probes_and_closes() {
    let clock = ManualClock::new();
    let breakers = instances(&clock);
    let a = addr(1);
    for _ in 0..10 {
        attempt(&breakers, &a, true);
    }
    clock.advance(OPEN_FOR - MS);
    assert!(!breakers.is_available(&a));
    clock.advance(MS);
    assert_eq!(breakers.state(&a), BreakerState::HalfOpen);
    assert!(breakers.is_available(&a));
    let probes: Vec<_> = (0..3).map(|_| breakers.allow(&a).unwrap()).collect();
    assert!(!breakers.is_available(&a) && breakers.allow(&a).is_none());
    for p in probes {
        p.record_result(&Ok::<_, Error>(()));
    }
    assert_eq!(breakers.state(&a), BreakerState::Closed);
}

#[test]
fn instance_probe_failure_reopens_and_answers_are_successes() {
    let clock = ManualClock::new();
    let breakers = instances(&clock);
    let a = addr(1);
    for _ in 0..10 {
        attempt(&breakers, &a, true);
    }
    clock.advance(OPEN_FOR);
    let p = breakers.allow(&a).unwrap();
    p.record_result(&Err::<(), _>(Error::new(ErrorKind::Application, "no")));
    assert_eq!(breakers.state(&a), BreakerState::HalfOpen);
    let p = breakers.allow(&a).unwrap();
    p.record_result(&Err::<(), _>(Error::new(ErrorKind::Timeout, "slow")));
    assert_eq!(breakers.state(&a), BreakerState::Open);
}

#[test]
fn a_cancelled_instance_probe_frees_its_slot() {
    let clock = ManualClock::new();
    let breakers = InstanceBreakers::with_clock(
        BreakerConfig {
            half_open_probes: 1,
            ..BreakerConfig::instance()
        },
        clock.clone(),
    );
    let a = addr(1);
    for _ in 0..10 {
        attempt(&breakers, &a, true);
    }
    clock.advance(OPEN_FOR);
    let probe = breakers.allow(&a).unwrap();
    assert!(breakers.allow(&a).is_none(), "the one slot is taken");
    drop(probe);
    assert_eq!(breakers.state(&a), BreakerState::HalfOpen);
    let deadline = clock.now() + Duration::from_millis(100);
    let probe = breakers
        .allow(&a)
        .expect("freed")
        .with_deadline(Some(deadline));
    clock.advance(Duration::from_millis(100));
    drop(probe);
    assert_eq!(
        breakers.state(&a),
        BreakerState::Open,
        "dropped past its deadline: the attempt timed out"
    );
}

#[test]
fn instance_breakers_stay_as_many_as_the_instances() {
    let clock = ManualClock::new();
    let breakers = instances(&clock);
    let five = |g: u16| (0..5).map(move |i| Instance::new(addr(g * 5 + i)));
    // Lists of their own (a pass over the breakers each) and versions of one list
    // (the steps that removed instances drop their breakers).
    let mut changed = InstanceList::new(five(0));
    for g in 0..200 {
        let current = if g % 2 == 0 {
            InstanceList::new(five(g))
        } else {
            let removed = changed.iter().map(|i| Step::Remove(i.address.clone()));
            let steps: Vec<Step> = removed.chain(five(g).map(Step::put)).collect();
            changed = changed.apply(steps).unwrap();
            changed.clone()
        };
        breakers.follow(&current);
        for i in current.iter() {
            attempt(&breakers, &i.address, g % 3 == 0);
        }
        assert!(breakers.len() <= 10, "{} breakers", breakers.len());
    }
    let last = changed.to_vec();
    breakers.follow(&changed);
    assert_eq!(breakers.len(), 5);
    let four = changed
        .apply([Step::Remove(last[4].address.clone())])
        .unwrap();
    breakers.follow(&four);
    assert_eq!(breakers.len(), 4);
    // An older version changes nothing.
    breakers.follow(&changed);
    assert_eq!(breakers.len(), 4);
    breakers.forget(&last[0].address);
    assert_eq!(breakers.len(), 3);
    assert!(!breakers.is_empty());
}

#[test]
fn a_breaker_dropped_while_open_comes_back_closed() {
    let clock = ManualClock::new();
    let breakers = instances(&clock);
    let (a, b) = (addr(1), addr(2));
    let late = breakers.allow(&a).unwrap();
    for _ in 0..10 {
        attempt(&breakers, &a, true);
    }
    attempt(&breakers, &b, false);
    assert!(!breakers.is_available(&a));
    // `a` leaves discovery's list: its open breaker goes, and the shortcut that skips
    // the map while every breaker is closed works again.
    breakers.follow(&InstanceList::new([Instance::new(b.clone())]));
    assert_eq!(breakers.len(), 1);
    assert_eq!(breakers.state(&a), BreakerState::Closed);
    assert!(breakers.is_available(&a));
    late.record(true);
    assert_eq!(breakers.not_closed(), 0);
    // Back in the list, it starts closed with an empty window.
    for _ in 0..9 {
        attempt(&breakers, &a, true);
    }
    assert_eq!(breakers.state(&a), BreakerState::Closed);
    attempt(&breakers, &a, true);
    assert_eq!(breakers.state(&a), BreakerState::Open);
    assert_eq!(breakers.not_closed(), 1);
}

/// Breaker rules from a governance: `*` sets the service breaker's thresholds as
/// the rule changes, a method named gets a breaker of its own, and a method whose
/// rule is off passes none.
#[test]
fn governance_rules_set_thresholds_and_breakers_per_method() {
    use crate::governance::{BreakerRule, ClientGovernance, MethodRules};
    let clock = ManualClock::new();
    let inner = Scripted::new();
    let gov = ClientGovernance::new("EchoService");
    let svc = ServiceBreakerLayer::with_clock(BreakerConfig::service(), clock.clone())
        .governed(Some(gov.clone()))
        .layer(inner.clone());
    let call = |method: &'static str| {
        let mut cx = context();
        cx.rpc.method = method.into();
        ready(svc.call(&mut cx, ClientRequest::new(method, Text::default())))
    };
    let rule = |error_rate, min_samples| BreakerRule {
        enabled: true,
        error_rate,
        min_samples,
    };
    inner.set(Reply::Fail(ErrorKind::Io));
    // The builder's 200 calls: 10 failures do not open it.
    for _ in 0..10 {
        assert_eq!(call("echo").unwrap_err().kind(), ErrorKind::Io);
    }
    assert_eq!(svc.state(), BreakerState::Closed);

    // `*` at 12 calls: the 10 already counted and 2 more open it.
    gov.set_breaker(MethodRules::new().any(rule(0.5, 12)));
    for _ in 0..2 {
        assert_eq!(call("echo").unwrap_err().kind(), ErrorKind::Io);
    }
    assert_eq!(svc.state(), BreakerState::Open);
    assert_fails_fast(call("echo"));

    // `ping` has a breaker of its own, closed; `off` passes none at all.
    gov.set_breaker(
        MethodRules::new()
            .any(rule(0.5, 12))
            .method("ping", rule(0.5, 3))
            .method(
                "off",
                BreakerRule {
                    enabled: false,
                    ..rule(0.5, 1)
                },
            ),
    );
    assert_fails_fast(call("echo"));
    let before = inner.calls();
    for _ in 0..3 {
        assert_eq!(call("ping").unwrap_err().kind(), ErrorKind::Io);
    }
    assert_fails_fast(call("ping"));
    for _ in 0..5 {
        assert_eq!(call("off").unwrap_err().kind(), ErrorKind::Io);
    }
    assert_eq!(inner.calls() - before, 3 + 5, "ping's 3, then off's 5");

    // A change elsewhere keeps ping's breaker (still open) as its rule is the same.
    gov.set_breaker(MethodRules::new().method("ping", rule(0.5, 3)));
    assert_fails_fast(call("ping"));
    // A new rule for ping is a new breaker, closed.
    gov.set_breaker(MethodRules::new().method("ping", rule(0.9, 50)));
    assert_eq!(call("ping").unwrap_err().kind(), ErrorKind::Io);
}
