//! The call timeout: a call that has not finished by its deadline fails with
//! [`ErrorKind::Timeout`](super::ErrorKind::Timeout), and what it was doing below (a
//! connect, retries, a backup request, the wait for a reply) is dropped.
//!
//! The timeout is the call's [`ClientContext::timeout`], or else the client's
//! [`ClientConfig::rpc_timeout`](super::ClientConfig::rpc_timeout) (10 s by default).
//! It bounds the whole call, retries included. The layer sets `cx.rpc.deadline` (or
//! keeps an earlier one already there, such as a deadline carried over from the
//! server call being handled), and the transport sends the time left to the server in
//! TTHeader (Kitex's RPC timeout key), so the server can give up on the call when its
//! caller has.

mod layer;

pub use layer::TimeoutLayer;

use std::time::Duration;

use super::{ClientContext, ClientRequest, ClientResponse, Error};
use crate::clock::{Clock, SystemClock};
use crate::service::Service;

/// Fails calls that outlast their timeout (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Timeout<S, C = SystemClock> {
    inner: S,
    default: Option<Duration>,
    clock: C,
}

impl<S, C> Timeout<S, C> {
    /// Calls without a timeout of their own get `default` (`None`: no limit).
    pub fn new(inner: S, default: Option<Duration>, clock: C) -> Self {
        Timeout {
            inner,
            default,
            clock,
        }
    }
}

impl<S, C> Service<ClientContext, ClientRequest> for Timeout<S, C>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
    C: Clock,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let Some(limit) = cx.timeout.or(self.default) else {
            return self.inner.call(cx, req).await;
        };
        // Read to within 1% of the limit: a coarse reading for the usual limits of a
        // second or more saves a precise one on every call.
        let deadline = self.clock.now_within(limit / 100) + limit;
        let deadline = cx.rpc.deadline.map_or(deadline, |d| d.min(deadline));
        cx.rpc.deadline = Some(deadline);
        let expired = self.clock.sleep_until(deadline);
        let answered = tokio::select! {
            biased;
            done = self.inner.call(cx, req) => Some(done),
            () = expired => None,
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
    use crate::clock::ManualClock;
    use crate::service::service_fn;

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
        ClientRequest::new("m", thrift_codec::fixtures::echo::Request::default())
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
}
