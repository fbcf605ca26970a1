//! The drivers, behind one seam, as mio keeps its selectors in `sys/`: everything the
//! crate asks of the kernel is done here, and the rest of the crate names no driver.
//!
//! - [`socket`]: the sockets (TCP and Unix-domain streams and listeners, reads,
//!   `sendmsg`, options, listen and connect): every socket call of the crate.
//! - [`epoll`]: the readiness driver (`epoll_wait` through `mio::Poll`).
//! - [`uring`]: the completion driver (an io_uring per poller), with its tests.
//! - [`driver`]: which driver a reactor asks for ([`Driver`], public) and what it is
//!   built with ([`Setup`]).
//! - [`event`]: the words the poller and the drivers share ([`Ready`], [`Received`],
//!   [`Event`], [`Op`]).
//!
//! The interface is three enums, each matched here and nowhere else, chosen once when
//! a poller starts ([`Selector::new`]):
//!
//! - [`Selector`]: the poller's own side: wait, hand each event or completion of the
//!   turn to the poller ([`dispatch`](Selector::dispatch)), submit what the turn
//!   asked for ([`end_turn`](Selector::end_turn)).
//! - [`Remote`]: how other threads reach the poller: wake it, register a socket with
//!   it, let go of a closed one, queue what a connection asks of its driver.
//! - [`ConnIo`]: a connection's slot in its state, the one field the connection's
//!   state machine keeps for its driver: it asks it "how does a send go, what is in
//!   flight, should the receive go on" and never which driver it is.
//!
//! Enums rather than trait objects: the poller calls its selector in every turn and a
//! connection calls its slot for every event and every flush, and a match on a value
//! that never changes is predicted for nothing, where a `dyn` call is an indirect call
//! and a trait's generic parameter would make `Connection` generic (or boxed) too.
//! Each method is a `match` of two arms, inlined.

mod driver;
mod epoll;
mod event;
mod socket;
mod uring;

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mio::Token;
use thrift_wire::LinkBuffer;

pub use self::driver::Driver;
pub(crate) use self::driver::Setup;
pub(crate) use self::event::{Event, Lent, Op, Ready, Received};
pub use self::socket::{BufferSizes, SocketOptions};
pub(crate) use self::socket::{ListenSocket, Registered, Socket, Stream};
pub(crate) use self::socket::{tcp_connect, tcp_listen, unix_connect, unix_listen};

/// A poller's own side of its driver: an epoll instance, or an io_uring.
#[derive(Debug)]
pub(crate) enum Selector {
    Epoll(epoll::Selector),
    Uring(Box<uring::Ring>),
}

/// How other threads reach a poller's driver: epoll's registry and waker, or the
/// ring's queue and eventfd.
#[derive(Debug)]
pub(crate) enum Remote {
    Epoll(epoll::Remote),
    Uring(Arc<uring::RingShared>),
}

impl Selector {
    /// The driver `setup` asks for, and its remote. Where io_uring was asked for and
    /// the kernel refuses a ring, an epoll one comes with the reason, for the caller
    /// to log.
    pub(crate) fn new(setup: &Setup) -> io::Result<(Selector, Remote, Option<io::Error>)> {
        let mut refused = None;
        if setup.driver == Driver::IoUring {
            match uring::Ring::new(setup) {
                Ok(ring) => {
                    let remote = Remote::Uring(Arc::clone(&ring.shared));
                    return Ok((Selector::Uring(Box::new(ring)), remote, None));
                }
                Err(e) => refused = Some(e),
            }
        }
        let (selector, remote) = epoll::Selector::new(setup.events_capacity)?;
        Ok((Selector::Epoll(selector), Remote::Epoll(remote), refused))
    }

    /// Which driver this is.
    pub(crate) fn kind(&self) -> Driver {
        match self {
            Selector::Epoll(_) => Driver::Epoll,
            Selector::Uring(_) => Driver::IoUring,
        }
    }

    /// The file descriptor that is readable while events or completions wait.
    pub(crate) fn raw_fd(&self) -> RawFd {
        match self {
            Selector::Epoll(s) => s.raw_fd(),
            Selector::Uring(ring) => ring.raw_fd(),
        }
    }

    /// Called first on the poller's own thread: a ring made for it starts (the
    /// thread becomes its one submitter).
    pub(crate) fn start(&self) -> io::Result<()> {
        match self {
            Selector::Epoll(_) => Ok(()),
            Selector::Uring(ring) => ring.enable(),
        }
    }

    /// Submits what is queued and waits for events, at most `timeout` (none: for
    /// ever). `Ok(false)`: a signal cut the wait short, nothing to dispatch.
    #[inline]
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        match self {
            Selector::Epoll(s) => s.wait(timeout),
            Selector::Uring(ring) => ring.wait(timeout).map(|()| true),
        }
    }

    /// Before a poller on a runtime waits (on tokio's reactor, not here): what is
    /// queued goes in, without waiting.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        match self {
            Selector::Epoll(_) => Ok(()),
            Selector::Uring(ring) => ring.wait(Some(Duration::ZERO)),
        }
    }

    /// Hands each event or completion of the last wait to `f`, with the token it
    /// names. Returns whether there was any, and whether they filled the driver's
    /// buffer (more may wait).
    #[inline]
    pub(crate) fn dispatch(&mut self, f: impl FnMut(Token, Event<'_>)) -> (bool, bool) {
        match self {
            Selector::Epoll(s) => s.dispatch(f),
            Selector::Uring(ring) => ring.dispatch(f),
        }
    }

    /// The end of a turn: submits what its entries asked for (`ops`, drained; never
    /// any under epoll).
    #[inline]
    pub(crate) fn end_turn(&mut self, ops: &mut Vec<Op>) -> io::Result<()> {
        match self {
            Selector::Epoll(_) => Ok(()),
            Selector::Uring(ring) => ring.end_turn(ops),
        }
    }

    /// The poller stops. A ring has `close_all` close its sockets first, each ending
    /// what the kernel still does on it, so that the sends on the ring complete and
    /// the ring's drop (which lets go of what it lent the kernel) has nothing to wait
    /// for; epoll's sockets are closed by the reactor's shutdown.
    pub(crate) fn finish(self, close_all: impl FnOnce()) {
        if let Selector::Uring(_) = self {
            close_all();
        }
    }
}

impl Remote {
    /// Wakes the poller from its wait (a failed wake leaves it to its next turn).
    pub(crate) fn wake(&self) {
        match self {
            Remote::Epoll(r) => r.wake(),
            Remote::Uring(ring) => ring.wake(),
        }
    }

    /// A new connection's slot for this driver.
    pub(crate) fn conn_io(&self) -> ConnIo {
        match self {
            Remote::Epoll(_) => ConnIo::Epoll,
            Remote::Uring(_) => ConnIo::Uring(uring::ConnRing::new()),
        }
    }

    /// Watches a new connection's socket (a ring's receive is asked for by the
    /// connection's slot instead).
    pub(crate) fn register_stream(&self, stream: &mut Stream, token: Token) -> io::Result<()> {
        match self {
            Remote::Epoll(r) => r.register_stream(stream, token),
            Remote::Uring(_) => Ok(()),
        }
    }

    /// Watches a listening socket for connections.
    pub(crate) fn register_listener(
        &self,
        socket: &mut ListenSocket,
        token: Token,
    ) -> io::Result<()> {
        match self {
            Remote::Epoll(r) => r.register_listener(socket, token),
            Remote::Uring(ring) => {
                ring.register_listener(socket, token);
                Ok(())
            }
        }
    }

    /// Makes the poller look at a connection's socket again, for data that came while
    /// nobody read (a ring's receive delivers it anyway).
    pub(crate) fn rearm(&self, stream: &mut Stream, token: Token) -> io::Result<()> {
        match self {
            Remote::Epoll(r) => r.rearm(stream, token),
            Remote::Uring(_) => Ok(()),
        }
    }

    /// Lets go of a closed socket of `token`: deregistered from epoll now, or shut
    /// down (ending what the ring does on it) and handed to the ring's poller, which
    /// closes it once what names it on the ring is cancelled.
    pub(crate) fn release<S: Registered>(&self, token: Token, socket: S) {
        match self {
            Remote::Epoll(r) => r.release(socket),
            Remote::Uring(ring) => ring.release(token, socket),
        }
    }

    /// Queues what `f` puts in its list (a connection's [`ConnIo::take_ops`], under
    /// its lock) for the poller, from another thread; `f` is not called under epoll,
    /// where nothing is ever asked.
    pub(crate) fn queue_with(&self, f: impl FnOnce(&mut Vec<Op>)) {
        match self {
            Remote::Epoll(_) => {}
            Remote::Uring(ring) => ring.queue_with(f),
        }
    }
}

/// How a flush goes, as a connection's slot says ([`ConnIo::send_route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendRoute {
    /// `sendmsg` now, on this thread.
    Now,
    /// Nothing to do now: the driver sends (a send is on the ring), or there is
    /// nothing to send.
    Nothing,
    /// The driver takes the output, with the turn's other submissions: the write is
    /// pending until it completes.
    Driver,
}

/// A connection's slot for its poller's driver, in the connection's state: nothing
/// under epoll (the state reads and writes its socket itself), the connection's side
/// of the ring under io_uring. The state machine calls it where the drivers differ
/// and never asks which one it is.
#[derive(Debug)]
pub(crate) enum ConnIo {
    Epoll,
    Uring(uring::ConnRing),
}

impl ConnIo {
    /// A new connection's slot on a ring, for the state machine's tests.
    #[cfg(test)]
    pub(crate) fn uring() -> ConnIo {
        ConnIo::Uring(uring::ConnRing::new())
    }

    /// Bytes the driver holds for sending (a send on the ring): still unsent.
    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        match self {
            ConnIo::Epoll => 0,
            ConnIo::Uring(ring) => ring.in_flight(),
        }
    }

    /// Whether the connection should take input now: a ring's receive is armed or
    /// cancelled to match; under epoll the state reads only when it should anyway.
    #[inline]
    pub(crate) fn set_reading(&mut self, reading: bool) {
        match self {
            ConnIo::Epoll => {}
            ConnIo::Uring(ring) => ring.set_reading(reading),
        }
    }

    /// A receive completion that was the receive's last came.
    #[inline]
    pub(crate) fn recv_ended(&mut self) {
        match self {
            ConnIo::Epoll => {}
            ConnIo::Uring(ring) => ring.recv_ended(),
        }
    }

    /// A send the driver made completed: `rest` goes back in front of `output`.
    /// `None` when the driver makes no sends (the completion is for no one).
    #[inline]
    pub(crate) fn sent(
        &mut self,
        rest: io::Result<Vec<Bytes>>,
        output: &mut LinkBuffer,
    ) -> Option<io::Result<()>> {
        match self {
            ConnIo::Epoll => None,
            ConnIo::Uring(ring) => Some(ring.sent(rest, output)),
        }
    }

    /// How a flush goes: `on_poller`, in the poller's turn; `idle`, a write is pending
    /// already or the output is empty.
    #[inline]
    pub(crate) fn send_route(&mut self, on_poller: bool, idle: bool) -> SendRoute {
        match self {
            ConnIo::Epoll => SendRoute::Now,
            ConnIo::Uring(_) if idle => SendRoute::Nothing,
            ConnIo::Uring(ring) if on_poller => {
                ring.send_on_poller();
                SendRoute::Driver
            }
            ConnIo::Uring(_) => SendRoute::Now,
        }
    }

    /// A `sendmsg` now left the output in the kernel (`full` false) or stopped on a
    /// full socket: epoll's poller resumes it on WRITABLE, a ring takes the rest.
    #[inline]
    pub(crate) fn sent_now(&mut self, full: bool) {
        match self {
            ConnIo::Epoll => {}
            ConnIo::Uring(ring) => ring.socket_full(full),
        }
    }

    /// What the connection asks of its driver since the last call, into `out` (see
    /// [`uring::ConnRing::take_ops`]); nothing under epoll.
    #[inline]
    pub(crate) fn take_ops(&mut self, lent: Lent<'_>, out: &mut Vec<Op>) {
        match self {
            ConnIo::Epoll => {}
            ConnIo::Uring(ring) => ring.take_ops(lent, out),
        }
    }
}

/// The one log line of a reactor that asked for io_uring and got epoll.
pub(crate) fn log_fallback(e: &io::Error) {
    uring::log_fallback(e);
}

/// CPUs in this thread's affinity mask (which a new thread inherits).
pub(crate) fn affinity_count() -> Option<usize> {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    let set = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let n = (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .count();
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poller that asks for io_uring where the kernel refuses the ring (here: a ring
    /// of no entries) gets epoll, and the reason, for the reactor's one log line.
    #[test]
    fn a_refused_ring_falls_back_to_epoll_with_the_reason() {
        let setup = Setup {
            driver: Driver::IoUring,
            own_thread: true,
            events_capacity: 64,
            ring_entries: 0,
            ring_buffers: 8,
            ring_buffer_size: 4096,
        };
        let (selector, remote, refused) = Selector::new(&setup).unwrap();
        assert_eq!(selector.kind(), Driver::Epoll);
        assert!(matches!(remote, Remote::Epoll(_)));
        assert!(matches!(remote.conn_io(), ConnIo::Epoll));
        let refused = refused.expect("the reason");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
        // (A plain ring: one made for a thread of its own stays disabled until that
        // thread starts it, and this test has no poller to.)
        let asked = Setup {
            ring_entries: 64,
            own_thread: false,
            ..setup
        };
        let (selector, _, refused) = Selector::new(&asked).unwrap();
        assert_eq!(selector.kind(), Driver::IoUring, "{refused:?}");
    }
}
