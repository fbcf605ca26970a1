//! Listening sockets, registered with a poller; accepting hands connections out
//! round-robin to all pollers.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use mio::Token;
use mio::event::Source;
use mio::net::{TcpListener, UnixListener};

use crate::conn::Connection;
use crate::poller::{PollerShared, lock};
use crate::reactor::{Reactor, SocketOptions};
use crate::sys::Stream;

#[derive(Debug)]
pub(crate) enum ListenSocket {
    Tcp(TcpListener),
    Unix(UnixListener),
}

#[derive(Debug)]
pub(crate) struct ListenerShared {
    pub(crate) token: Token,
    pub(crate) poller: Arc<PollerShared>,
    pub(crate) state: Mutex<ListenerState>,
}

#[derive(Debug)]
pub(crate) struct ListenerState {
    pub(crate) socket: Option<ListenSocket>,
    waker: Option<Waker>,
}

impl ListenerState {
    pub(crate) fn new(socket: ListenSocket) -> Self {
        ListenerState {
            socket: Some(socket),
            waker: None,
        }
    }
}

impl ListenSocket {
    pub(crate) fn register(&mut self, registry: &mio::Registry, token: Token) -> io::Result<()> {
        match self {
            ListenSocket::Tcp(l) => l.register(registry, token, mio::Interest::READABLE),
            ListenSocket::Unix(l) => l.register(registry, token, mio::Interest::READABLE),
        }
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        match self {
            ListenSocket::Tcp(l) => l.deregister(registry),
            ListenSocket::Unix(l) => l.deregister(registry),
        }
    }

    fn accept(&self) -> io::Result<Stream> {
        match self {
            ListenSocket::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
            ListenSocket::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        }
    }
}

impl ListenerShared {
    pub(crate) fn on_ready(&self) {
        let waker = lock(&self.state).waker.take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn close(&self) {
        let (socket, waker) = {
            let mut st = lock(&self.state);
            (st.socket.take(), st.waker.take())
        };
        if let Some(mut s) = socket {
            let _ = s.deregister(&self.poller.registry);
        }
        lock(&self.poller.slab).remove(self.token);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A listening socket on the reactor. Dropping it stops listening.
#[derive(Debug)]
pub struct Listener {
    pub(crate) shared: Arc<ListenerShared>,
    pub(crate) reactor: Reactor,
    pub(crate) options: SocketOptions,
}

impl Listener {
    /// Waits for the next connection and puts it on a poller (round-robin).
    pub async fn accept(&self) -> io::Result<Connection> {
        let stream = poll_fn(|cx| {
            let mut st = lock(&self.shared.state);
            loop {
                let result = match st.socket.as_ref() {
                    Some(socket) => socket.accept(),
                    None => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::NotConnected,
                            "the listener is closed",
                        )));
                    }
                };
                match result {
                    Ok(stream) => return Poll::Ready(Ok(stream)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        st.waker = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The connection was reset before we took it: take the next one.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        })
        .await?;
        self.reactor.add_stream(stream, &self.options)
    }

    /// The address it listens on (TCP only).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match lock(&self.shared.state).socket.as_ref()? {
            ListenSocket::Tcp(l) => l.local_addr().ok(),
            ListenSocket::Unix(_) => None,
        }
    }

    /// Stops listening (as dropping does).
    pub fn close(&self) {
        self.shared.close();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shared.close();
    }
}
