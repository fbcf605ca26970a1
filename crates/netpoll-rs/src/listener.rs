//! Listening sockets, registered with a poller; accepting hands connections out
//! round-robin to all pollers.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Instant;

use mio::Token;

use crate::conn::Connection;
use crate::poller::{Entry, Outbox, PollerShared};
use crate::poller_set::PollerSet;
use crate::sync::lock;
use crate::sys::{ListenSocket, Op, Ready, SocketOptions};

/// What the poller and the listener's users share.
#[derive(Debug)]
struct ListenerShared {
    token: Token,
    poller: Arc<PollerShared>,
    state: Mutex<ListenerState>,
}

#[derive(Debug)]
struct ListenerState {
    /// `None` once closed.
    socket: Option<ListenSocket>,
    /// The task waiting to accept.
    waker: Option<Waker>,
}

impl Entry for ListenerShared {
    fn on_event(self: Arc<Self>, _: Ready, _: Instant, _: &mut Outbox) {
        let waker = lock(&self.state).waker.take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn on_listen(self: Arc<Self>, more: bool, out: &mut Outbox) {
        let waker = {
            let mut st = lock(&self.state);
            // The watch ended (the kernel ends a multishot poll now and then): again.
            if !more && let Some(socket) = st.socket.as_ref() {
                out.ops.push(Op::Listen {
                    token: self.token,
                    fd: socket.raw_fd(),
                });
            }
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn close(&self) {
        let (socket, waker) = {
            let mut st = lock(&self.state);
            (st.socket.take(), st.waker.take())
        };
        if let Some(s) = socket {
            self.poller.release(self.token, s);
        }
        self.poller.remove(self.token);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A listening socket on the reactor. Dropping it stops listening.
#[derive(Debug)]
pub struct Listener {
    shared: Arc<ListenerShared>,
    /// Where accepted connections go; held so the pollers outlive the listener.
    pollers: Arc<PollerSet>,
    options: SocketOptions,
}

impl Listener {
    /// Registers `socket` with the next poller of `pollers`.
    pub(crate) fn register(
        pollers: &Arc<PollerSet>,
        socket: ListenSocket,
        options: SocketOptions,
    ) -> io::Result<Listener> {
        let poller = pollers.next_poller();
        let shared = poller.insert(|token| {
            Arc::new(ListenerShared {
                token,
                poller: Arc::clone(poller),
                state: Mutex::new(ListenerState {
                    socket: Some(socket),
                    waker: None,
                }),
            })
        })?;
        let registered = {
            let mut st = lock(&shared.state);
            match st.socket.as_mut() {
                Some(s) => poller.io.register_listener(s, shared.token),
                None => Err(io::Error::other("the listener closed while registering")),
            }
        };
        // Dropped on an error, it closes and leaves the slab.
        let listener = Listener {
            shared,
            pollers: Arc::clone(pollers),
            options,
        };
        registered?;
        Ok(listener)
    }

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
        self.pollers.add_stream(stream, &self.options)
    }

    /// The address it listens on (TCP only).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        lock(&self.shared.state).socket.as_ref()?.local_addr()
    }

    /// Stops listening (as dropping does).
    pub fn close(&self) {
        Entry::close(&*self.shared);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        Entry::close(&*self.shared);
    }
}
