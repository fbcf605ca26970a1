//! Which driver a reactor's pollers run, and what a poller's driver is built with.

/// How a reactor's pollers wait for I/O and do it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// Readiness from `epoll_wait`, then a `recv` per read and a `sendmsg` per flush,
    /// on the poller (or inline, on the caller's thread, for a flush). The default.
    #[default]
    Epoll,
    /// One io_uring per poller: each connection has a multishot receive on the ring,
    /// into buffers the poller lends it (a provided buffer ring); what a poller's
    /// handlers write in one turn goes out as sends queued on the ring; and one
    /// `io_uring_enter` per turn submits them all, reaps every completion and waits,
    /// with the earliest deadline as its timeout. Flushes from other threads still
    /// call `sendmsg` directly, and hand the rest to the ring when the socket is
    /// full. Where the kernel refuses a ring (too old, `io_uring_disabled`, a seccomp
    /// filter), the reactor falls back to epoll and logs it once;
    /// [`Reactor::driver`](crate::Reactor::driver) says which one runs.
    IoUring,
}

impl Driver {
    /// The driver named by the `NETPOLL_DRIVER` environment variable (`epoll`, or
    /// `io_uring`/`uring`), read once per process; epoll when it is unset or names
    /// neither (with one warning). [`Config::default`](crate::Config::default) takes
    /// its driver from here, so a program, or a whole test suite, moves to io_uring
    /// without a code change.
    pub fn from_env() -> Driver {
        static CHOSEN: std::sync::OnceLock<Driver> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| match std::env::var("NETPOLL_DRIVER") {
            Err(_) => Driver::Epoll,
            Ok(name) => name.parse().unwrap_or_else(|e: String| {
                tracing::warn!("netpoll-rs: NETPOLL_DRIVER: {e}; using epoll");
                Driver::Epoll
            }),
        })
    }
}

impl std::str::FromStr for Driver {
    type Err = String;

    /// `epoll`, or `io_uring` (also `uring`, `io-uring`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "epoll" => Ok(Driver::Epoll),
            "io_uring" | "io-uring" | "uring" => Ok(Driver::IoUring),
            other => Err(format!("{other:?} names no driver (epoll or io_uring)")),
        }
    }
}

/// What a poller's driver is built with: the reactor's [`Config`](crate::Config)'s
/// share of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    pub(crate) driver: Driver,
    /// The poller runs on a thread of its own (see [`Ring::new`](super::uring::Ring::new)).
    pub(crate) own_thread: bool,
    pub(crate) events_capacity: usize,
    pub(crate) ring_entries: u32,
    pub(crate) ring_buffers: u16,
    pub(crate) ring_buffer_size: usize,
}
