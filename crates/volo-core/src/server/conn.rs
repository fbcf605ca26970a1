//! A connection served by a tokio task of its own, on any transport: the driver of
//! [`ConnCore`] that does the I/O, runs the calls and keeps the time.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::future::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{Notify, watch};

use super::Dispatch;
use super::call::{Done, MakeCall};
use super::conn_core::ConnCore;
use super::spare;
use super::state::ServerState;
use crate::transport::{Conn, FrameIo};

/// Serves `conn` until the peer closes, a frame cannot be read, a timeout passes, or
/// the server shuts down (then after the calls in hand are answered).
///
/// The calls of the connection run concurrently inside this task (no task per call),
/// as many at once as the core allows. A new call is polled once as it starts, in the
/// thread's spare box, as the poller does (see [`spare`]): most finish there, without a
/// place among the waiting calls. The calls of frames already in hand start before the
/// replies written meanwhile go out, and replies that are ready together go out in one
/// flush. One timer serves the connection's timeouts: it is moved only when the core's
/// next deadline comes earlier than the one set, so that calls that push the idle
/// timeout later do not touch tokio's timer.
pub(crate) async fn serve<D: Dispatch>(
    conn: Conn,
    shared: Arc<ServerState<D>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let streams = shared.streams.clone();
    let metrics = shared.config.observability.metrics.clone();
    let mut core = ConnCore::new(shared, conn.peer(), Instant::now());
    // With streams served too, the first frame says which kind the connection is.
    let mut first = None;
    if let Some(streams) = streams {
        let limits = streams.config().frame;
        let mut streaming = false;
        let wait = core.first_frame_timeout();
        let read = conn.read_frame(|input| match input.peek(8) {
            None => Ok(None),
            Some(head) if crate::stream::frame::is_streaming(head) == Some(true) => {
                streaming = true;
                crate::stream::frame::frame_len(head, &limits)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            }
            Some(_) => core.frame_len(input, Instant::now()),
        });
        let Ok(Ok(Some(frame))) = tokio::time::timeout(wait, read).await else {
            return;
        };
        if streaming {
            streams
                .serve_conn(conn, frame, shutdown, metrics.as_ref())
                .await;
            return;
        }
        first = Some(frame);
    }
    let mut calls = FuturesUnordered::new();
    // Told when a frame begins while the timer is set later than its read timeout.
    let sooner = Notify::new();
    let mut timer = pin!(tokio::time::sleep_until(Instant::now().into()));
    let mut armed: Option<Instant> = None;
    loop {
        if !core.is_stopping() && *shutdown.borrow() {
            let now = Instant::now();
            let told = conn.write_with(|out| {
                core.shutdown(out, now);
                !out.is_empty()
            });
            if told && conn.flush().await.is_err() {
                return;
            }
        }
        let reading = core.wants_frame();
        if !reading && calls.is_empty() {
            return;
        }
        let stopping = core.is_stopping();
        let due = core.poll_timeout();
        if sooner_than(due, armed) {
            armed = due;
            if let Some(at) = due {
                timer.as_mut().reset(at.into());
            }
        }
        let read = conn.read_frame(|input| {
            let len = core.frame_len(input, Instant::now());
            if sooner_than(core.poll_timeout(), armed) {
                sooner.notify_one();
            }
            len
        });
        tokio::select! {
            biased;
            Some(done) = calls.next(), if !calls.is_empty() => {
                let mut now = Instant::now();
                let mut written = conn.write_with(|out| core.finish(out, done, now));
                while written.is_ok() {
                    let Some(Some(done)) = calls.next().now_or_never() else {
                        break;
                    };
                    now = Instant::now();
                    written = conn.write_with(|out| core.finish(out, done, now));
                }
                if written.is_err() || conn.flush().await.is_err() {
                    return;
                }
            }
            frame = async { match first.take() {
                Some(frame) => Ok(Some(frame)),
                None => read.await,
            } }, if reading => {
                let Ok(Some(mut frame)) = frame else {
                    return;
                };
                // The frame's call, then those of frames already in hand, are started
                // before the replies written meanwhile go out, in one flush.
                let mut answered = false;
                loop {
                    let now = Instant::now();
                    match conn.write_with(|out| core.start(out, frame, now)) {
                        Ok(Some(make)) => {
                            if let Some(done) = first_poll(make, &mut calls) {
                                let now = Instant::now();
                                if conn.write_with(|out| core.finish(out, done, now)).is_err() {
                                    let _ = conn.flush().await;
                                    return;
                                }
                                answered = true;
                            }
                        }
                        // Answered already (an exception).
                        Ok(None) => answered = true,
                        Err(_) => {
                            let _ = conn.flush().await;
                            return;
                        }
                    }
                    if !core.wants_frame() || conn.input_len() == 0 {
                        break;
                    }
                    let next = conn.read_frame(|input| core.frame_len(input, Instant::now()));
                    match next.now_or_never() {
                        Some(Ok(Some(next))) => frame = next,
                        // Only part of a frame: the loop's top arms its read timeout.
                        None => break,
                        Some(_) => {
                            let _ = conn.flush().await;
                            return;
                        }
                    }
                }
                if answered && conn.flush().await.is_err() {
                    return;
                }
            }
            () = &mut timer, if armed.is_some() => {
                armed = None;
                if core.handle_timeout(Instant::now()).is_err() {
                    return;
                }
            }
            () = sooner.notified() => {}
            // Told at the top of the loop.
            _ = shutdown.changed(), if !stopping => {}
        }
    }
}

/// Polls a new call once, in this thread's spare box: most calls finish in that poll
/// (their reply goes out with the turn's flush, the box serves the next call); one
/// that waits joins `calls`, which polls it again with the task's waker.
fn first_poll<R, M: MakeCall<R>>(
    make: M,
    calls: &mut FuturesUnordered<Waiting<M::Call>>,
) -> Option<Done<R>> {
    match spare::poll_first(make) {
        Ok(done) => Some(done),
        Err(slot) => {
            calls.push(Waiting(slot));
            None
        }
    }
}

/// A call that waited at its first poll, in the box it was made in.
struct Waiting<F>(Pin<Box<Option<F>>>);

impl<F: Future> Future for Waiting<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.0.as_mut().as_pin_mut() {
            Some(call) => call.poll(cx),
            // Never: `first_poll` pushes a box holding its call, and a finished call
            // is not polled again.
            None => Poll::Pending,
        }
    }
}

/// Whether the core's deadline `due` comes before the timer's, `armed` (or the timer
/// is not set): only then is the timer moved.
fn sooner_than(due: Option<Instant>, armed: Option<Instant>) -> bool {
    due.is_some_and(|due| armed.is_none_or(|at| due < at))
}
