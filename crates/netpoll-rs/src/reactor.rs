//! The reactor: its poller threads, and where sockets come from (listen, connect).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::Config;
use crate::conn::Connection;
use crate::listener::Listener;
use crate::poller::{self, Driver};
use crate::poller_set::PollerSet;
use crate::sys::{self, Driver as DriverKind, ListenSocket, SocketOptions};

/// A set of poller threads. Cheap to clone (a handle); the threads stop on
/// [`shutdown`](Self::shutdown) or when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Reactor {
    pollers: Arc<PollerSet>,
    kind: DriverKind,
}

impl Reactor {
    /// Starts `config.pollers` poller threads.
    pub fn new(config: Config) -> io::Result<Reactor> {
        Self::start(config, true, |i, driver| {
            std::thread::Builder::new()
                .name(format!("netpoll-{i}"))
                .spawn(move || poller::run(driver))
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
        Self::start(config, false, |_, driver| {
            runtime.spawn(poller::run_on_runtime(driver));
            Ok(None)
        })
    }

    fn start(
        config: Config,
        own_threads: bool,
        mut launch: impl FnMut(usize, Driver) -> io::Result<Option<JoinHandle<()>>>,
    ) -> io::Result<Reactor> {
        let mut config = config.sanitized();
        let mut drivers = Vec::with_capacity(config.pollers);
        for _ in 0..config.pollers {
            let (driver, refused) = Driver::new(Arc::new(config.clone()), own_threads)?;
            if let Some(e) = refused {
                // Every poller falls back, with one line for the reactor.
                sys::log_fallback(&e);
                config.driver = DriverKind::Epoll;
                drivers.clear();
                break;
            }
            drivers.push(driver);
        }
        let config = Arc::new(config);
        while drivers.len() < config.pollers {
            drivers.push(Driver::new(Arc::clone(&config), own_threads)?.0);
        }
        let kind = drivers.first().map_or(DriverKind::Epoll, Driver::kind);
        let pollers = drivers.iter().map(|d| Arc::clone(d.shared())).collect();
        let mut threads = Vec::new();
        for (i, driver) in drivers.into_iter().enumerate() {
            threads.extend(launch(i, driver)?);
        }
        Ok(Reactor {
            pollers: Arc::new(PollerSet::new(pollers, threads)),
            kind,
        })
    }

    /// The driver the pollers run: the one [`Config::driver`] asked for, or epoll
    /// where the kernel refused io_uring.
    pub fn driver(&self) -> DriverKind {
        self.kind
    }

    fn add_listener(&self, socket: ListenSocket, options: SocketOptions) -> io::Result<Listener> {
        Listener::register(&self.pollers, socket, options)
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
        self.add_listener(sys::tcp_listen(addr, options.reuse_port)?, options)
    }

    /// Listens on a Unix-domain socket path.
    pub fn listen_unix(&self, path: impl AsRef<Path>) -> io::Result<Listener> {
        let socket = sys::unix_listen(path.as_ref())?;
        self.add_listener(socket, SocketOptions::default())
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
        let stream = sys::tcp_connect(addr, timeout)?;
        self.pollers.add_stream(stream, &options)
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
        let stream = sys::unix_connect(path.as_ref(), timeout)?;
        self.pollers.add_stream(stream, &SocketOptions::default())
    }

    /// Pollers (threads, or tasks on a runtime) this reactor runs.
    pub fn pollers(&self) -> usize {
        self.pollers.len()
    }

    /// Sockets (connections and listeners) currently registered.
    pub fn socket_count(&self) -> usize {
        self.pollers.socket_count()
    }

    /// Stops the poller threads and closes every socket: tasks waiting on a connection
    /// or listener wake up with an error. Idempotent.
    pub fn shutdown(&self) {
        self.pollers.shutdown();
    }
}
