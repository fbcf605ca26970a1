//! The epoll driver ([`Driver::Epoll`](crate::Driver::Epoll)): readiness from
//! `epoll_wait` (through `mio::Poll`), edge-triggered; the connections read and write
//! their sockets themselves, on the poller or on the caller's thread.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mio::{Events, Poll, Registry, Token, Waker};

use super::event::{Event, Ready};
use super::socket::{ListenSocket, Registered, Stream};
use crate::slab::WAKER_TOKEN;

/// A poller's epoll instance and the buffer its events land in.
#[derive(Debug)]
pub(crate) struct Selector {
    poll: Poll,
    events: Events,
}

/// How other threads reach an epoll poller: its registry and its waker.
#[derive(Debug)]
pub(crate) struct Remote {
    registry: Registry,
    waker: Waker,
}

impl Selector {
    /// An epoll instance taking at most `capacity` events per wait.
    pub(crate) fn new(capacity: usize) -> io::Result<(Selector, Remote)> {
        let poll = Poll::new()?;
        let remote = Remote {
            registry: poll.registry().try_clone()?,
            waker: Waker::new(poll.registry(), WAKER_TOKEN)?,
        };
        let events = Events::with_capacity(capacity);
        Ok((Selector { poll, events }, remote))
    }

    /// The epoll file descriptor (readable while events wait).
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// Waits for events, at most `timeout` (none: for ever). `Ok(false)`: a signal
    /// cut the wait short.
    #[inline]
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Hands each event of the last wait to `f` (the waker's are skipped). Returns
    /// whether there was any, and whether they filled the buffer (more may wait).
    #[inline]
    pub(crate) fn dispatch(&mut self, mut f: impl FnMut(Token, Event<'_>)) -> (bool, bool) {
        let mut handled = 0;
        for event in self.events.iter() {
            handled += 1;
            if event.token() == WAKER_TOKEN {
                continue;
            }
            let ready = Ready {
                readable: event.is_readable() || event.is_read_closed() || event.is_error(),
                writable: event.is_writable() || event.is_write_closed() || event.is_error(),
                closed: event.is_read_closed() || event.is_error(),
            };
            f(event.token(), Event::Ready(ready));
        }
        (handled > 0, handled >= self.events.capacity())
    }
}

impl Remote {
    /// Wakes the poller from its wait (a failed wake leaves it to its next turn).
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Stops epoll's watch on a closed socket, which is then dropped (closed).
    pub(crate) fn release<S: Registered>(&self, mut socket: S) {
        let _ = socket.deregister(&self.registry);
    }

    pub(crate) fn register_stream(&self, stream: &mut Stream, token: Token) -> io::Result<()> {
        stream.register(&self.registry, token)
    }

    pub(crate) fn register_listener(
        &self,
        socket: &mut ListenSocket,
        token: Token,
    ) -> io::Result<()> {
        socket.register(&self.registry, token)
    }

    /// Registers the stream again: epoll reports its current readiness as a new edge.
    pub(crate) fn rearm(&self, stream: &mut Stream, token: Token) -> io::Result<()> {
        stream.reregister(&self.registry, token)
    }
}
