//! Poller threads: each owns a `mio::Poll` and runs the latency-tuned loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mio::{Events, Poll, Registry, Waker};

use crate::config::Config;
use crate::conn::ConnShared;
use crate::listener::ListenerShared;
use crate::slab::{Slab, WAKER_TOKEN};

/// Locks a mutex; a panic elsewhere while it was held does not make the state unusable
/// here (every critical section leaves it consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a token names.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Conn(Arc<ConnShared>),
    Listener(Arc<ListenerShared>),
}

/// The part of a poller that other threads use: its registry (to register sockets), its
/// waker (to stop it) and the slab its tokens index.
#[derive(Debug)]
pub(crate) struct PollerShared {
    pub(crate) registry: Registry,
    pub(crate) waker: Waker,
    pub(crate) slab: Mutex<Slab<Entry>>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) config: Arc<Config>,
}

impl PollerShared {
    pub(crate) fn new(poll: &Poll, config: Arc<Config>) -> std::io::Result<Self> {
        Ok(PollerShared {
            registry: poll.registry().try_clone()?,
            waker: Waker::new(poll.registry(), WAKER_TOKEN)?,
            slab: Mutex::new(Slab::default()),
            shutdown: AtomicBool::new(false),
            config,
        })
    }

    /// Stores `make`'s entry under a fresh token and returns it.
    pub(crate) fn insert(&self, make: impl FnOnce(mio::Token) -> Entry) -> std::io::Result<Entry> {
        let mut slab = lock(&self.slab);
        let token = slab
            .insert_with(make)
            .ok_or_else(|| std::io::Error::other("the poller holds as many sockets as it can"))?;
        slab.get(token)
            .cloned()
            .ok_or_else(|| std::io::Error::other("a slab entry vanished while it was locked"))
    }
}

/// The poll loop. With `busy_poll`, a batch with events is followed by a zero-timeout
/// poll; when one of those finds nothing the thread yields once and polls again, and only
/// then blocks. Connections with input left after their read budget are served again on
/// the next turn, which then does not block either.
pub(crate) fn run(mut poll: Poll, shared: Arc<PollerShared>) {
    let mut events = Events::with_capacity(shared.config.events_capacity);
    let mut again: Vec<Arc<ConnShared>> = Vec::new();
    let mut serving: Vec<Arc<ConnShared>> = Vec::new();
    let mut spinning = false;
    let mut yielded = false;
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            break;
        }
        let timeout = (spinning || !again.is_empty()).then_some(Duration::ZERO);
        if let Err(e) = poll.poll(&mut events, timeout)
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            // An epoll_wait that fails for another reason will fail again: stop the
            // poller rather than spin; its connections see no more events.
            break;
        }
        std::mem::swap(&mut again, &mut serving);
        let mut busy = !serving.is_empty();
        for conn in serving.drain(..) {
            conn.on_event(false, false, &mut again);
        }
        for event in events.iter() {
            busy = true;
            if event.token() == WAKER_TOKEN {
                continue;
            }
            let entry = lock(&shared.slab).get(event.token()).cloned();
            match entry {
                Some(Entry::Conn(conn)) => conn.on_event(
                    event.is_readable() || event.is_read_closed() || event.is_error(),
                    event.is_writable() || event.is_write_closed() || event.is_error(),
                    &mut again,
                ),
                Some(Entry::Listener(listener)) => listener.on_ready(),
                // A stale token: the socket closed after the event was queued.
                None => {}
            }
        }
        if busy {
            spinning = shared.config.busy_poll;
            yielded = false;
        } else if spinning {
            if yielded {
                spinning = false;
            } else {
                std::thread::yield_now();
                yielded = true;
            }
        }
    }
}
