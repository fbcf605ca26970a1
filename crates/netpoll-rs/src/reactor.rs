//! The reactor: its poller threads, and where sockets come from (listen, connect).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::Poll;

use crate::config::Config;
use crate::conn::{ConnShared, ConnState, Connection};
use crate::listener::{ListenSocket, Listener, ListenerShared, ListenerState};
use crate::poller::{self, Driver, Entry, PollerShared, lock};
use crate::sys::{self, BufferSizes, Stream};

/// Socket options for listeners (applied to each accepted connection) and connects.
#[derive(Debug, Clone, Copy)]
pub struct SocketOptions {
    /// `TCP_NODELAY` (default on: RPC frames should leave at once).
    pub nodelay: bool,
    /// `SO_SNDBUF`/`SO_RCVBUF` (default: the kernel's).
    pub buffers: BufferSizes,
    /// `SO_REUSEPORT` on a TCP listener (default off).
    pub reuse_port: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            nodelay: true,
            buffers: BufferSizes::default(),
            reuse_port: false,
        }
    }
}

/// A set of poller threads. Cheap to clone (a handle); the threads stop on
/// [`shutdown`](Self::shutdown) or when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Reactor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pollers: Vec<Arc<PollerShared>>,
    next: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Reactor {
    /// Starts `config.pollers` poller threads.
    pub fn new(config: Config) -> io::Result<Reactor> {
        Self::start(config, |i, poll, driver| {
            std::thread::Builder::new()
                .name(format!("netpoll-{i}"))
                .spawn(move || poller::run(poll, driver))
                .map(Some)
        })
    }

    /// Runs the `config.pollers` pollers as tasks of the tokio runtime `runtime` instead
    /// of threads of their own: tokio's reactor watches each poller's epoll fd and the
    /// task drains it. Reads still go into the connections' `LinkBuffer`s and writes
    /// are still inline, but a handler on that runtime is woken without a thread switch,
    /// and no threads are added to the runtime's.
    ///
    /// The runtime needs its I/O driver, and its time driver for handlers' deadlines
    /// ([`Io::wake_at`](crate::Io::wake_at)); `Builder::enable_all` enables both.
    /// Without the time driver, the first deadline's sleep fails (tokio's panic message
    /// is printed once per poller, and caught) and deadlines fire only when the poller
    /// next wakes for an event.
    pub fn on_runtime(runtime: &tokio::runtime::Handle, config: Config) -> io::Result<Reactor> {
        Self::start(config, |_, poll, driver| {
            runtime.spawn(poller::run_on_runtime(poll, driver));
            Ok(None)
        })
    }

    fn start(
        config: Config,
        mut launch: impl FnMut(usize, Poll, Driver) -> io::Result<Option<JoinHandle<()>>>,
    ) -> io::Result<Reactor> {
        let config = Arc::new(config.sanitized());
        let mut pollers = Vec::new();
        let mut threads = Vec::new();
        for i in 0..config.pollers {
            let poll = Poll::new()?;
            let shared = Arc::new(PollerShared::new(&poll, Arc::clone(&config))?);
            let driver = Driver::new(Arc::clone(&shared));
            pollers.push(shared);
            threads.extend(launch(i, poll, driver)?);
        }
        Ok(Reactor {
            inner: Arc::new(Inner {
                pollers,
                next: AtomicUsize::new(0),
                threads: Mutex::new(threads),
            }),
        })
    }

    fn next_poller(&self) -> &Arc<PollerShared> {
        let i = self.inner.next.fetch_add(1, Ordering::Relaxed);
        &self.inner.pollers[i % self.inner.pollers.len()]
    }

    /// Registers a connected stream with the next poller.
    pub(crate) fn add_stream(
        &self,
        stream: Stream,
        options: &SocketOptions,
    ) -> io::Result<Connection> {
        if let Stream::Tcp(s) = &stream {
            s.set_nodelay(options.nodelay)?;
        }
        sys::set_buffer_sizes(&stream, options.buffers)?;
        let poller = self.next_poller();
        let entry = poller.insert(|token| {
            Entry::Conn(Arc::new(ConnShared {
                token,
                poller: Arc::clone(poller),
                state: Mutex::new(ConnState::new(stream)),
            }))
        })?;
        let Entry::Conn(shared) = entry else {
            return Err(io::Error::other("a connection slot held a listener"));
        };
        let registered = {
            let mut st = lock(&shared.state);
            match st.stream_mut() {
                Some(s) => s.register(&poller.registry, shared.token),
                None => Err(io::Error::other("the connection closed while registering")),
            }
        };
        let conn = Connection::new(shared);
        registered?;
        Ok(conn)
    }

    fn add_listener(&self, socket: ListenSocket, options: SocketOptions) -> io::Result<Listener> {
        let poller = self.next_poller();
        let entry = poller.insert(|token| {
            Entry::Listener(Arc::new(ListenerShared {
                token,
                poller: Arc::clone(poller),
                state: Mutex::new(ListenerState::new(socket)),
            }))
        })?;
        let Entry::Listener(shared) = entry else {
            return Err(io::Error::other("a listener slot held a connection"));
        };
        let registered = {
            let mut st = lock(&shared.state);
            match st.socket.as_mut() {
                Some(s) => s.register(&poller.registry, shared.token),
                None => Err(io::Error::other("the listener closed while registering")),
            }
        };
        let listener = Listener {
            shared,
            reactor: self.clone(),
            options,
        };
        registered?;
        Ok(listener)
    }

    /// Listens on a TCP address (port 0 picks a free port: see
    /// [`Listener::local_addr`]).
    pub fn listen_tcp(&self, addr: SocketAddr) -> io::Result<Listener> {
        self.listen_tcp_with(addr, SocketOptions::default())
    }

    /// Listens on a TCP address with these options.
    pub fn listen_tcp_with(
        &self,
        addr: SocketAddr,
        options: SocketOptions,
    ) -> io::Result<Listener> {
        let std = sys::tcp_listener(addr, options.reuse_port)?;
        self.add_listener(
            ListenSocket::Tcp(mio::net::TcpListener::from_std(std)),
            options,
        )
    }

    /// Listens on a Unix-domain socket path.
    pub fn listen_unix(&self, path: impl AsRef<Path>) -> io::Result<Listener> {
        let listener = mio::net::UnixListener::bind(path)?;
        self.add_listener(ListenSocket::Unix(listener), SocketOptions::default())
    }

    /// Connects to a TCP address, failing with `TimedOut` after `timeout`. The connect
    /// blocks the calling thread (from async code, run it with `spawn_blocking`).
    pub fn connect_tcp(&self, addr: SocketAddr, timeout: Duration) -> io::Result<Connection> {
        self.connect_tcp_with(addr, timeout, SocketOptions::default())
    }

    /// Connects with these options.
    pub fn connect_tcp_with(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        options: SocketOptions,
    ) -> io::Result<Connection> {
        let std = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        std.set_nonblocking(true)?;
        self.add_stream(Stream::Tcp(mio::net::TcpStream::from_std(std)), &options)
    }

    /// Connects to a Unix-domain socket path, failing with `TimedOut` when the
    /// listener's backlog stays full for `timeout` (a listener that does not accept).
    /// Blocks the calling thread at most that long, like
    /// [`connect_tcp`](Self::connect_tcp).
    pub fn connect_unix(
        &self,
        path: impl AsRef<Path>,
        timeout: Duration,
    ) -> io::Result<Connection> {
        let std = sys::unix_connect(path.as_ref(), timeout)?;
        self.add_stream(
            Stream::Unix(mio::net::UnixStream::from_std(std)),
            &SocketOptions::default(),
        )
    }

    /// Pollers (threads, or tasks on a runtime) this reactor runs.
    pub fn pollers(&self) -> usize {
        self.inner.pollers.len()
    }

    /// Sockets (connections and listeners) currently registered.
    pub fn socket_count(&self) -> usize {
        self.inner.pollers.iter().map(|p| lock(&p.slab).len()).sum()
    }

    /// Stops the poller threads and closes every socket: tasks waiting on a connection
    /// or listener wake up with an error. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl Inner {
    fn shutdown(&self) {
        for p in &self.pollers {
            p.shutdown.store(true, Ordering::Release);
            let _ = p.waker.wake();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
        for p in &self.pollers {
            let entries = lock(&p.slab).drain();
            for entry in entries {
                match entry {
                    Entry::Conn(c) => c.close(),
                    Entry::Listener(l) => l.close(),
                }
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
