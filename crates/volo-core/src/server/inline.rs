//! A netpoll-rs connection served on the poller ([`ServerConfig::inline_dispatch`]):
//! the driver of [`ConnCore`] that runs as a netpoll-rs [`Handler`].
//!
//! The reactor reads a connection's input and calls [`Handler::on_input`] at once, on
//! the poller: the core cuts whole frames and starts their calls, and each call is
//! polled once, there and then. A call that completes in that poll (most do: decode, a
//! handler that does not wait, encode) has its reply written into the output, which
//! the poller sends as soon as the handler returns: no task, no waker, no hop between
//! the poller and a connection task. A call that waits (a timer, another RPC, a lock)
//! moves to a tokio task of its own; when it is done, the task hands the result back
//! and resumes the handler ([`InlineHandle::resume`]), which writes the reply.
//!
//! The connection's timeouts use the poller's one timer structure
//! ([`netpoll_rs::Io::wake_at`], [`Handler::on_timer`]) and the poller's clock
//! reading ([`netpoll_rs::Io::now`]): no task or timer of tokio's per connection. The
//! server's drain reaches the connections through [`Live`], which also counts them.
//!
//! [`ServerConfig::inline_dispatch`]: super::ServerConfig::inline_dispatch

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use thrift_wire::LinkBuffer;

use netpoll_rs::{Handler, InlineHandle, Io};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::task::AbortHandle;

use super::Dispatch;
use super::call::{Done, MakeCall};
use super::conn_core::{ConnCore, Next};
use super::spare;
use super::state::ServerState;
use crate::context::Address;
use crate::metrics::OpenConnection;
use crate::transport::lock;

/// The connections a server serves on its pollers, for its drain: they are told of the
/// shutdown, waited for, and closed if they outstay the drain timeout.
#[derive(Debug, Default)]
pub(crate) struct Live {
    stopping: AtomicBool,
    conns: Mutex<LiveConns>,
    /// Told each time the last connection goes.
    empty: Notify,
}

#[derive(Debug, Default)]
struct LiveConns {
    handles: HashMap<u64, InlineHandle>,
    next: u64,
}

impl Live {
    fn insert(&self, handle: InlineHandle) -> u64 {
        let mut conns = lock(&self.conns);
        let key = conns.next;
        conns.next += 1;
        conns.handles.insert(key, handle);
        key
    }

    fn remove(&self, key: u64) {
        let mut conns = lock(&self.conns);
        conns.handles.remove(&key);
        if conns.handles.is_empty() {
            self.empty.notify_waiters();
        }
    }

    fn handles(&self) -> Vec<InlineHandle> {
        lock(&self.conns).handles.values().cloned().collect()
    }

    /// Tells every connection that the server is shutting down (each closes once its
    /// calls in hand are answered), and those to come, which close at once.
    pub(crate) fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        for handle in self.handles() {
            handle.resume();
        }
    }

    /// Waits until no connection is left.
    pub(crate) async fn drained(&self) {
        loop {
            let empty = self.empty.notified();
            if lock(&self.conns).handles.is_empty() {
                return;
            }
            empty.await;
        }
    }

    /// Closes every connection left.
    pub(crate) fn close_all(&self) {
        for handle in self.handles() {
            handle.close();
        }
    }
}

/// A connection's place under `max_connections` and, when metrics are on, its count
/// among the open connections: both given back when it closes.
pub(crate) type Admitted = (OwnedSemaphorePermit, Option<OpenConnection>);

/// What a call moved to a task gives back: its id and outcome.
type Moved<R> = Mutex<Vec<(u64, Done<R>)>>;

/// The connection's [`Handler`]. `S` is [`ConnCore::start`], taken as a function so
/// that the type of what it gives (`M`, which makes a call) can be named, and with it
/// the call's: the box of a call that finished in its first poll serves the next call
/// of the thread ([`spare`]), so a call allocates nothing unless it waits (then it
/// takes its box to its task).
struct InlineServer<D: Dispatch, S, M> {
    core: ConnCore<D>,
    start: S,
    _calls: PhantomData<fn() -> M>,
    /// Calls finished on their tasks, waiting to be answered.
    finished: Arc<Moved<D::Reply>>,
    handle: InlineHandle,
    runtime: tokio::runtime::Handle,
    /// Calls moved to tasks, by id (to abort them if the connection closes).
    moved: HashMap<u64, AbortHandle>,
    next_id: u64,
    live: Arc<Live>,
    key: u64,
    /// The connection's place under `max_connections`, given back when it closes
    /// (and its count among the open ones, when metrics are on).
    _permit: Admitted,
}

impl<D, S, M> InlineServer<D, S, M>
where
    D: Dispatch,
    S: Fn(&mut ConnCore<D>, &mut LinkBuffer, Bytes, Instant) -> std::io::Result<Option<M>>,
    M: MakeCall<D::Reply>,
{
    /// Runs a call: makes it in its box, polls it once here; if it must wait, moves it
    /// to a task.
    fn run(&mut self, io: &mut Io<'_>, make: M) -> std::io::Result<()> {
        // Boxed before the first poll, so that a call that waits can move to a task;
        // in the thread's spare box, which it gives back if it does not wait. On the
        // poller's thread, in the runtime's context: a handler may start a timer or a
        // task in its first poll.
        let polled = {
            let _runtime = self.runtime.enter();
            spare::poll_first(make)
        };
        let mut slot = match polled {
            Ok(done) => {
                let now = io.now();
                return self.core.finish(io.output(), done, now);
            }
            Err(slot) => slot,
        };
        let id = self.next_id;
        self.next_id += 1;
        let finished = Arc::clone(&self.finished);
        let handle = self.handle.clone();
        // The first poll on the task registers its real waker (the no-op one above is
        // forgotten, as a future must allow).
        let task = self.runtime.spawn(async move {
            let Some(call) = slot.as_mut().as_pin_mut() else {
                return;
            };
            let done = call.await;
            lock(&finished).push((id, done));
            handle.resume();
        });
        self.moved.insert(id, task.abort_handle());
        Ok(())
    }

    /// Answers the calls that finished on their tasks, then takes whole frames from the
    /// input and starts their calls while the core wants them. `Err` when the
    /// connection must close.
    fn serve(&mut self, io: &mut Io<'_>) -> std::io::Result<()> {
        if !self.moved.is_empty() {
            let finished = std::mem::take(&mut *lock(&self.finished));
            for (id, done) in finished {
                self.moved.remove(&id);
                let now = io.now();
                self.core.finish(io.output(), done, now)?;
            }
        }
        loop {
            let now = io.now();
            match self.core.next_frame(io.input(), now)? {
                Next::Frame(frame) => {
                    if let Some(call) = (self.start)(&mut self.core, io.output(), frame, now)? {
                        self.run(io, call)?;
                    }
                }
                Next::Need(len) => {
                    io.need(len);
                    return Ok(());
                }
                Next::Wait => return Ok(()),
            }
        }
    }
}

impl<D, S, M> Handler for InlineServer<D, S, M>
where
    D: Dispatch,
    S: Fn(&mut ConnCore<D>, &mut LinkBuffer, Bytes, Instant) -> std::io::Result<Option<M>>
        + Send
        + 'static,
    M: MakeCall<D::Reply>,
{
    fn on_input(&mut self, io: &mut Io<'_>) {
        if !self.core.is_stopping() && self.live.stopping.load(Ordering::Acquire) {
            let now = io.now();
            self.core.shutdown(io.output(), now);
        }
        if self.serve(io).is_err() {
            io.close();
            return;
        }
        io.wake_at(self.core.poll_timeout());
    }

    fn on_timer(&mut self, io: &mut Io<'_>) {
        if self.core.handle_timeout(io.now()).is_err() {
            io.close();
            return;
        }
        io.wake_at(self.core.poll_timeout());
    }

    fn on_close(&mut self, _error: Option<std::io::Error>) {
        // Calls still in progress have no one to answer to.
        for (_, task) in self.moved.drain() {
            task.abort();
        }
        self.live.remove(self.key);
    }
}

/// Serves `conn` on its poller until it closes (see the module docs); `permit` is its
/// place under the connection limit, held until then.
pub(crate) fn serve<D: Dispatch>(
    conn: netpoll_rs::Connection,
    shared: Arc<ServerState<D>>,
    live: &Arc<Live>,
    permit: Admitted,
) {
    let handle = conn.inline_handle();
    let peer = conn.peer_addr().map(Address::Tcp);
    let key = live.insert(handle.clone());
    let now = Instant::now();
    let mut core = ConnCore::new(shared, peer, now);
    if live.stopping.load(Ordering::Acquire) {
        // Nothing to tell a connection that has carried no call.
        core.shutdown(&mut LinkBuffer::new(), now);
    }
    conn.serve_inline(InlineServer {
        core,
        start: ConnCore::<D>::start,
        _calls: PhantomData,
        finished: Arc::default(),
        handle: handle.clone(),
        runtime: tokio::runtime::Handle::current(),
        moved: HashMap::new(),
        next_id: 0,
        live: Arc::clone(live),
        key,
        _permit: permit,
    });
    // The first deadline (the idle timeout) is set when the handler first runs; until
    // input comes, that is now.
    handle.resume();
}
