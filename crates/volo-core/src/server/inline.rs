//! A netpoll-rs connection served on the poller ([`ServerConfig::inline_dispatch`]).
//!
//! The reactor reads a connection's input and calls [`InlineServer::on_input`] at once,
//! on the poller: it cuts whole frames, starts each call and polls it once, there and
//! then. A call that completes in that poll (most do: decode, a handler that does not
//! wait, encode) has its reply written into the output, which the poller sends as soon
//! as the handler returns: no task, no waker, no hop between the poller and a
//! connection task. A call that waits (a timer, another RPC, a lock) moves to a tokio
//! task of its own; when it is done, the task hands the result back and resumes the
//! handler ([`InlineHandle::resume`]), which writes the reply.
//!
//! The rules are those of the task-per-connection layout (`conn::serve`): up to
//! [`ServerConfig::max_inflight_per_connection`] calls at once on TTHeader, one at a
//! time in request order on THeader, Framed and Buffered, the same input budget. The timeouts
//! and the graceful shutdown, which need a clock and a signal rather than input, live
//! in a small watchdog task per connection ([`serve`]), which also stands for the
//! connection in the server's drain.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use futures_util::FutureExt;
use netpoll_rs::{Handler, InlineHandle, Io};
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;

use super::conn::{Done, FrameReader, Shared, answer, bad_frame, start_call};
use super::{Dispatch, ServerConfig};
use crate::context::Address;

/// What the handler, the calls moved to tasks and the watchdog share.
struct Ctl<R> {
    state: Mutex<CtlState<R>>,
    /// Told once the connection closed (a permit is kept if the watchdog is not
    /// waiting yet).
    closed: Notify,
}

struct CtlState<R> {
    /// Calls finished on their tasks, with their task ids, waiting to be answered.
    done: Vec<(u64, Done<R>)>,
    /// The server is shutting down: take no new frame, close once the calls in hand
    /// are answered.
    stopping: bool,
    /// Since when the front of the input holds part of a frame.
    partial_since: Option<Instant>,
    /// The last time input came or a call finished.
    last_active: Instant,
    /// Calls in progress.
    busy: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connection's [`Handler`].
struct InlineServer<D: Dispatch> {
    shared: Arc<Shared<D>>,
    reader: FrameReader,
    peer: Option<Address>,
    ctl: Arc<Ctl<D::Reply>>,
    handle: InlineHandle,
    runtime: tokio::runtime::Handle,
    /// Calls moved to tasks, by task id (to abort them if the connection closes).
    moved: HashMap<u64, AbortHandle>,
    next_id: u64,
}

impl<D: Dispatch> InlineServer<D> {
    /// Runs a call: polls it once here; if it must wait, moves it to a task.
    fn run<F>(&mut self, io: &mut Io<'_>, call: F) -> std::io::Result<()>
    where
        F: Future<Output = Done<D::Reply>> + Send + 'static,
    {
        // Boxed before the first poll, so that a call that waits can move to a task.
        let mut call = Box::pin(call);
        if let Poll::Ready(done) = call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return answer(io.output(), &self.shared, done);
        }
        let id = self.next_id;
        self.next_id += 1;
        let ctl = Arc::clone(&self.ctl);
        let handle = self.handle.clone();
        // The first poll on the task registers its real waker (the no-op one above is
        // forgotten, as a future must allow).
        let task = self.runtime.spawn(async move {
            let done = call.await;
            lock(&ctl.state).done.push((id, done));
            handle.resume();
        });
        self.moved.insert(id, task.abort_handle());
        Ok(())
    }

    /// Writes the replies of calls that finished on their tasks. `Err` when the
    /// connection must close.
    fn answer_moved(
        &mut self,
        io: &mut Io<'_>,
        done: Vec<(u64, Done<D::Reply>)>,
    ) -> std::io::Result<()> {
        for (id, done) in done {
            self.moved.remove(&id);
            answer(io.output(), &self.shared, done)?;
        }
        Ok(())
    }

    /// Takes whole frames from the input and starts their calls, while the connection
    /// may have more calls in progress. `Err` when the connection must close.
    fn take_frames(&mut self, io: &mut Io<'_>, stopping: bool) -> std::io::Result<()> {
        loop {
            if self.moved.len() >= self.reader.call_cap(&self.shared.config) {
                return Ok(());
            }
            // After a shutdown starts, a frame that has begun is still read and answered.
            if stopping && io.input().is_empty() {
                return Ok(());
            }
            let Some(len) = self
                .reader
                .frame_len(io.input(), &self.shared, self.peer.as_ref())?
            else {
                // Length unknown yet (a Buffered message is measured by parsing it):
                // keep reading past the high-water mark; the splitter fails a message
                // that grows past the frame limit.
                if !io.input().is_empty() {
                    let more = io.input().len() + 1;
                    io.need(more);
                }
                return Ok(());
            };
            if io.input().len() < len {
                io.need(len);
                return Ok(());
            }
            let frame = io.input().next(len);
            let Some((framing, protocol)) = self.reader.kind() else {
                return Ok(());
            };
            let budget = self.reader.take_budget();
            let peer = self.peer.clone();
            let started = start_call(io.output(), &self.shared, peer, framing, protocol, frame)
                .inspect_err(|e| bad_frame(self.peer.as_ref(), framing, protocol, e));
            // `None`: answered already (an exception).
            if let Some(call) = started? {
                // The frame's budget is given back when its call is done.
                self.run(
                    io,
                    call.map(move |done| {
                        drop(budget);
                        done
                    }),
                )?;
            }
        }
    }
}

impl<D: Dispatch> Handler for InlineServer<D> {
    fn on_input(&mut self, io: &mut Io<'_>) {
        let (done, stopping) = {
            let mut st = lock(&self.ctl.state);
            (std::mem::take(&mut st.done), st.stopping)
        };
        if self.answer_moved(io, done).is_err() || self.take_frames(io, stopping).is_err() {
            io.close();
            return;
        }
        let busy = !self.moved.is_empty();
        let idle_input = io.input().is_empty();
        if stopping && !busy && idle_input {
            io.close();
        }
        // Part of a frame is awaited (not whole frames held back by the call limit).
        let partial = !idle_input && self.moved.len() < self.reader.call_cap(&self.shared.config);
        let now = Instant::now();
        let mut st = lock(&self.ctl.state);
        st.last_active = now;
        st.busy = busy;
        st.partial_since = match (partial, st.partial_since) {
            (false, _) => None,
            (true, Some(since)) => Some(since),
            (true, None) => Some(now),
        };
    }

    fn on_close(&mut self, _error: Option<std::io::Error>) {
        // Calls still in progress have no one to answer to.
        for (_, task) in self.moved.drain() {
            task.abort();
        }
        self.ctl.closed.notify_one();
    }
}

/// Closes the connection when the watchdog ends for any reason (the drain's abort
/// included).
struct CloseOnDrop(InlineHandle);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Serves `conn` on its poller, and watches it until it closes: closes it when a frame
/// takes longer than `read_timeout` to arrive, when it is idle (no call in progress,
/// nothing arriving) for `idle_timeout`, and, once `shutdown` is signalled, after the
/// calls in hand are answered.
pub(crate) async fn serve<D: Dispatch>(
    conn: netpoll_rs::Connection,
    shared: Arc<Shared<D>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ServerConfig {
        read_timeout,
        idle_timeout,
        ..
    } = shared.config;
    let ctl = Arc::new(Ctl {
        state: Mutex::new(CtlState {
            done: Vec::new(),
            stopping: false,
            partial_since: None,
            last_active: Instant::now(),
            busy: false,
        }),
        closed: Notify::new(),
    });
    let handle = conn.inline_handle();
    let peer = conn.peer_addr().map(Address::Tcp);
    conn.serve_inline(InlineServer {
        shared,
        reader: FrameReader::default(),
        peer,
        ctl: Arc::clone(&ctl),
        handle: handle.clone(),
        runtime: tokio::runtime::Handle::current(),
        moved: HashMap::new(),
        next_id: 0,
    });
    let _close = CloseOnDrop(handle.clone());
    let mut stopping = false;
    // The server went away without a signal: that counts as one too.
    let mut server_gone = false;
    loop {
        if !stopping && (server_gone || *shutdown.borrow()) {
            stopping = true;
            lock(&ctl.state).stopping = true;
            handle.resume();
        }
        let now = Instant::now();
        let wake_at = {
            let st = lock(&ctl.state);
            let read_by = st.partial_since.map(|since| since + read_timeout);
            let idle_by = match idle_timeout {
                Some(limit) if !st.busy && st.partial_since.is_none() => {
                    Some(st.last_active + limit)
                }
                _ => None,
            };
            let due = [read_by, idle_by].into_iter().flatten().min();
            if due.is_some_and(|due| due <= now) {
                return;
            }
            // Looked at again at least every read timeout, to notice a frame that began.
            let next_look = now + read_timeout;
            due.map_or(next_look, |due| due.min(next_look))
        };
        tokio::select! {
            () = ctl.closed.notified() => return,
            changed = shutdown.changed(), if !stopping => server_gone = changed.is_err(),
            () = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
}
