//! Giving up on a call whose caller has: the [`Deadline`] server layer.
//!
//! A TTHeader caller sends its timeout with each call (Kitex's `RPC_TIMEOUT` int key,
//! in milliseconds); the server turns it into `cx.rpc.deadline` when the frame is read.
//! Past that instant the caller has stopped waiting, so whatever the handler still
//! does is wasted work that holds memory, a call slot, and perhaps calls of its own
//! further down. [`Deadline`] drops the handler's future at the deadline (dropping is
//! how a Rust future is cancelled: it stops at its current `.await` and its
//! destructors run), and a call whose deadline has passed when it reaches the layer
//! does not start. Calls without a deadline (Framed and Buffered ones, or TTHeader
//! ones without the key) pass through untouched.
//!
//! The layer fails the call with [`DispatchError::DeadlinePassed`], which the caller
//! gets as an `INTERNAL_ERROR` `TApplicationException` whose message starts with
//! [`DEADLINE_PREFIX`](crate::refusal::DEADLINE_PREFIX) (for a oneway call the server sends nothing, as always), but only a
//! grace after the deadline ([`DEFAULT_GRACE`], 100 ms, unless
//! set otherwise): the caller's own timer fires at the deadline (a little before the
//! server's, which counts from when the frame arrived), and it should be that timer
//! the caller sees, not an exception that raced it. When both timers are late, as on
//! a loaded machine, an answer sent at the deadline often reaches the caller before
//! its timer is looked at. A caller still waiting after the grace learns why from the
//! answer. While it waits, the call holds its slot (in the server's and the
//! connection's limits) but runs nothing.
//!
//! The server puts this layer directly around the dispatcher, inside the user's
//! layers, so those see the exception like any other outcome. A stream carries no
//! deadline on the wire (Kitex sends none), so its context has none and it passes
//! through; a client's stream deadline is kept by the client, which resets the stream
//! when it passes. It reads the time from a
//! [`Clock`] (the [`SystemClock`] in a server), so its tests move a
//! [`ManualClock`](crate::clock::ManualClock) instead of sleeping.
//!
//! ```
//! use std::time::Duration;
//! use volo_core::clock::{Clock, ManualClock};
//! use volo_core::codec::{Framing, Protocol};
//! use volo_core::context::ServerContext;
//! use volo_core::refusal::{Refusal, is_deadline_passed};
//! use volo_core::server::deadline::{DEFAULT_GRACE, DeadlineLayer};
//! use volo_core::server::{DispatchError, ServerRequest};
//! use volo_core::service::{Layer, Service, service_fn};
//!
//! let clock = ManualClock::new();
//! // A handler that never finishes.
//! let stuck = service_fn(|_: &mut ServerContext, _: ServerRequest| async {
//!     std::future::pending::<Result<(), DispatchError>>().await
//! });
//! let svc = DeadlineLayer::with_clock(clock.clone()).layer(stuck);
//!
//! let mut cx = ServerContext::new(Framing::TTHeader, Protocol::Binary);
//! cx.rpc.deadline = Some(clock.now() + Duration::from_millis(50));
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let call = svc.call(&mut cx, ServerRequest::default());
//! let advance = async {
//!     tokio::task::yield_now().await;
//!     // At the deadline the handler is dropped; the answer comes after the grace.
//!     clock.advance(Duration::from_millis(50) + DEFAULT_GRACE);
//! };
//! let (outcome, ()) = tokio::join!(call, advance);
//! match outcome {
//!     Err(e @ DispatchError::DeadlinePassed(_)) => {
//!         // A refusal as a value: what the reply's header names, the metrics and
//!         // the access log say.
//!         assert_eq!(e.refusal(), Some(Refusal::DeadlinePassed));
//!         // What the caller is answered with, its message as a client reads it.
//!         assert!(is_deadline_passed(&e.into_exception("stuck")));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! # });
//! ```

mod layer;

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::future::{Either, select};

pub use layer::DeadlineLayer;

use super::{DispatchError, ServerCall};
use crate::clock::{Clock, SystemClock};
use crate::context::ServerContext;
use crate::service::Service;

/// How long after the deadline a [`Deadline`] answers a call it gave up on, unless set
/// otherwise (see the [module docs](self)).
pub const DEFAULT_GRACE: Duration = Duration::from_millis(100);

/// What became of a call a [`Deadline`] gave up on: the value of its
/// [`DispatchError::DeadlinePassed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GivenUp {
    /// The deadline had passed when the call reached the layer: the handler never ran.
    NotStarted,
    /// The handler was dropped at the deadline, perhaps half done.
    DroppedUnfinished,
}

impl GivenUp {
    /// How the answer's message says it, after the method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            GivenUp::NotStarted => "was not started",
            GivenUp::DroppedUnfinished => "was dropped unfinished",
        }
    }
}

/// A server service that stops running a call once the caller's deadline
/// (`cx.rpc.deadline`) has passed (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Deadline<S, C = SystemClock> {
    inner: S,
    clock: C,
    grace: Duration,
}

impl<S, C: Clock> Deadline<S, C> {
    /// Wraps `inner`, reading the time from `clock`, with the [`DEFAULT_GRACE`].
    pub fn new(inner: S, clock: C) -> Self {
        Deadline {
            inner,
            clock,
            grace: DEFAULT_GRACE,
        }
    }

    /// Answers a call it gave up on `grace` after the deadline instead (zero: at the
    /// deadline).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

impl<S, C> Deadline<S, C> {
    /// The service inside.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Gives back the service inside.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, R> Service<ServerContext, R> for Deadline<S, C>
where
    S: Service<ServerContext, R, Error = DispatchError> + Sync,
    C: Clock,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let Some(deadline) = cx.rpc.deadline else {
            return self.inner.call(cx, req).await;
        };
        // A tenth of the grace early or late is nothing to a call answered a grace
        // after its deadline, and lets the clock be read coarsely.
        let what = if self.clock.now_within(self.grace / 10) >= deadline {
            GivenUp::NotStarted
        } else {
            // In a block of its own, so that the handler's future is dropped at the
            // deadline, not when the answer is made.
            let mut call = pin!(self.inner.call(cx, req));
            // Most calls finish in their first poll; those need no timer.
            if let Poll::Ready(outcome) = poll_fn(|c| Poll::Ready(call.as_mut().poll(c))).await {
                return outcome;
            }
            let timer = pin!(self.clock.sleep_until(deadline));
            if let Either::Left((outcome, _)) = select(call, timer).await {
                return outcome;
            }
            GivenUp::DroppedUnfinished
        };
        // A grace too long to add to an instant: answer at the deadline.
        let answer_at = deadline.checked_add(self.grace).unwrap_or(deadline);
        self.clock.sleep_until(answer_at).await;
        Err(DispatchError::DeadlinePassed(what))
    }
}

#[cfg(test)]
mod tests;
