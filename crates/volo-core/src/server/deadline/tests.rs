//! The deadline layer against a mock handler, on a [`ManualClock`]: no sockets, no
//! sleeps; futures are polled by hand.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use thrift_wire::ApplicationExceptionKind;
use tokio::sync::oneshot;

use super::*;
use crate::clock::ManualClock;
use crate::codec::{Framing, Protocol};
use crate::refusal::is_deadline_passed;
use crate::server::ServerRequest;
use crate::service::{Layer, service_fn};

/// Sets its flag when dropped: proof that the handler's future was dropped.
struct DropGuard(Arc<AtomicBool>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What the mock handler did.
#[derive(Default)]
struct Seen {
    started: AtomicUsize,
    dropped: Arc<AtomicBool>,
}

/// A handler that starts (counting), holds a drop guard, and answers `7` once `go`
/// fires (never, if it is dropped).
fn handler(
    seen: Arc<Seen>,
    go: Arc<std::sync::Mutex<Option<oneshot::Receiver<()>>>>,
) -> impl Service<ServerContext, ServerRequest, Response = u32, Error = DispatchError> {
    service_fn(move |_: &mut ServerContext, _: ServerRequest| {
        seen.started.fetch_add(1, Ordering::SeqCst);
        let guard = DropGuard(Arc::clone(&seen.dropped));
        let go = go.lock().unwrap().take();
        async move {
            let _guard = guard;
            match go {
                Some(go) => {
                    let _ = go.await;
                }
                None => std::future::pending::<()>().await,
            }
            Ok(7)
        }
    })
}

fn context(method: &str) -> ServerContext {
    let mut cx = ServerContext::new(Framing::TTHeader, Protocol::Binary);
    cx.rpc.method = method.to_string().into();
    cx
}

fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_call_past_its_deadline_is_dropped_and_answered_with_the_exception() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let svc = DeadlineLayer::with_clock(clock.clone()).layer(handler(
        Arc::clone(&seen),
        Arc::default(), // no signal: it waits for ever
    ));
    let mut cx = context("stuck");
    cx.rpc.deadline = Some(clock.now() + Duration::from_millis(100));
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(seen.started.load(Ordering::SeqCst), 1);
    clock.advance(Duration::from_millis(99));
    assert!(poll(call.as_mut()).is_pending());
    assert!(
        !seen.dropped.load(Ordering::SeqCst),
        "not before the deadline"
    );
    clock.advance(Duration::from_millis(1));
    assert!(
        poll(call.as_mut()).is_pending(),
        "the answer waits for the grace"
    );
    assert!(
        seen.dropped.load(Ordering::SeqCst),
        "the handler's future is dropped at the deadline"
    );
    clock.advance(DEFAULT_GRACE - Duration::from_millis(1));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(1));
    let Poll::Ready(outcome) = poll(call.as_mut()) else {
        panic!("not answered after the grace")
    };
    match outcome {
        Err(e @ DispatchError::DeadlinePassed(GivenUp::DroppedUnfinished)) => {
            let ex = e.into_exception("stuck");
            assert_eq!(ex.kind, ApplicationExceptionKind::InternalError);
            assert_eq!(
                ex.message.as_str(),
                "the caller's deadline passed: stuck was dropped unfinished"
            );
            assert!(is_deadline_passed(&ex));
        }
        other => panic!("{other:?}"),
    }
    drop(call);
    assert_eq!(clock.sleepers(), 0, "no timer left behind");
    assert_eq!(seen.started.load(Ordering::SeqCst), 1);
}

#[test]
fn a_call_whose_deadline_passed_before_it_came_does_not_start() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let svc =
        DeadlineLayer::with_clock(clock.clone()).layer(handler(Arc::clone(&seen), Arc::default()));
    let mut cx = context("late");
    cx.rpc.deadline = Some(clock.now());
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(DEFAULT_GRACE);
    match poll(call.as_mut()) {
        Poll::Ready(Err(e @ DispatchError::DeadlinePassed(GivenUp::NotStarted))) => assert_eq!(
            e.into_exception("late").message.as_str(),
            "the caller's deadline passed: late was not started"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.started.load(Ordering::SeqCst), 0);
}

#[test]
fn a_call_that_finishes_in_time_is_untouched() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let (go, wait) = oneshot::channel();
    let svc = DeadlineLayer::with_clock(clock.clone()).layer(handler(
        Arc::clone(&seen),
        Arc::new(std::sync::Mutex::new(Some(wait))),
    ));
    let mut cx = context("quick");
    cx.rpc.deadline = Some(clock.now() + Duration::from_secs(1));
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(999));
    go.send(()).unwrap();
    assert!(matches!(poll(call.as_mut()), Poll::Ready(Ok(7))));
    drop(call);
    assert_eq!(clock.sleepers(), 0, "the timer went with the call");
    // The handler's future ended normally (its guard drops then too); the clock
    // moving on afterwards changes nothing.
    clock.advance(Duration::from_secs(5));
    assert_eq!(seen.started.load(Ordering::SeqCst), 1);
}

#[test]
fn a_call_without_a_deadline_runs_as_long_as_it_takes_and_sets_no_timer() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let (go, wait) = oneshot::channel();
    let svc = DeadlineLayer::with_clock(clock.clone()).layer(handler(
        Arc::clone(&seen),
        Arc::new(std::sync::Mutex::new(Some(wait))),
    ));
    let mut cx = context("patient");
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(clock.sleepers(), 0);
    clock.advance(Duration::from_secs(3600));
    assert!(poll(call.as_mut()).is_pending());
    assert!(!seen.dropped.load(Ordering::SeqCst));
    go.send(()).unwrap();
    assert!(matches!(poll(call.as_mut()), Poll::Ready(Ok(7))));
}

#[test]
fn the_grace_is_set_on_the_layer() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let svc = DeadlineLayer::with_clock(clock.clone())
        .grace(Duration::ZERO)
        .layer(handler(Arc::clone(&seen), Arc::default()));
    let mut cx = context("stuck");
    cx.rpc.deadline = Some(clock.now() + Duration::from_millis(5));
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(5));
    assert!(matches!(
        poll(call.as_mut()),
        Poll::Ready(Err(DispatchError::DeadlinePassed(
            GivenUp::DroppedUnfinished
        )))
    ));
    assert!(seen.dropped.load(Ordering::SeqCst));
    drop(call);
    // A grace too long to add to an instant answers at the deadline.
    let svc = DeadlineLayer::with_clock(clock.clone())
        .grace(Duration::MAX)
        .layer(handler(Arc::clone(&seen), Arc::default()));
    cx.rpc.deadline = Some(clock.now() + Duration::from_millis(5));
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(5));
    assert!(poll(call.as_mut()).is_ready());
}

#[test]
fn a_call_done_in_its_first_poll_is_answered_at_once() {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let (go, wait) = oneshot::channel();
    go.send(()).unwrap();
    let svc = DeadlineLayer::with_clock(clock.clone()).layer(handler(
        Arc::clone(&seen),
        Arc::new(std::sync::Mutex::new(Some(wait))),
    ));
    let mut cx = context("quick");
    cx.rpc.deadline = Some(clock.now() + Duration::from_secs(1));
    let mut call = Box::pin(svc.call(&mut cx, ServerRequest::default()));
    assert!(matches!(poll(call.as_mut()), Poll::Ready(Ok(7))));
    assert_eq!(clock.sleepers(), 0);
}
