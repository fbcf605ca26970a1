//! A reactor's pollers, which sockets are spread over round-robin, and their shutdown.
//! Listeners and [`Reactor`](crate::Reactor) handles hold it; the last to go stops the
//! pollers.

use std::io;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crate::conn::{ConnShared, Connection};
use crate::poller::PollerShared;
use crate::sync::lock;
use crate::sys::{SocketOptions, Stream};

#[derive(Debug)]
pub(crate) struct PollerSet {
    pollers: Vec<Arc<PollerShared>>,
    next: AtomicUsize,
    /// The pollers' threads (none when they are tasks of a runtime).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl PollerSet {
    pub(crate) fn new(pollers: Vec<Arc<PollerShared>>, threads: Vec<JoinHandle<()>>) -> Self {
        PollerSet {
            pollers,
            next: AtomicUsize::new(0),
            threads: Mutex::new(threads),
        }
    }

    /// The poller the next socket goes to.
    pub(crate) fn next_poller(&self) -> &Arc<PollerShared> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        &self.pollers[i % self.pollers.len()]
    }

    /// Registers a connected stream with the next poller.
    pub(crate) fn add_stream(
        &self,
        stream: Stream,
        options: &SocketOptions,
    ) -> io::Result<Connection> {
        stream.configure(options)?;
        ConnShared::register(self.next_poller(), stream)
    }

    /// Pollers (threads, or tasks on a runtime).
    pub(crate) fn len(&self) -> usize {
        self.pollers.len()
    }

    /// Sockets (connections and listeners) currently registered.
    pub(crate) fn socket_count(&self) -> usize {
        self.pollers.iter().map(|p| p.len()).sum()
    }

    /// Stops the pollers and closes every socket. Idempotent.
    pub(crate) fn shutdown(&self) {
        for p in &self.pollers {
            // SeqCst with the poller's load, and with the wake-up flag of an io_uring
            // poller (cleared, then this flag read): a wake-up skipped because one
            // was pending is then one whose poller sees the flag.
            p.shutdown.store(true, Ordering::SeqCst);
            p.wake();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
        for p in &self.pollers {
            for entry in p.drain() {
                entry.close();
            }
        }
    }
}

impl Drop for PollerSet {
    fn drop(&mut self) {
        self.shutdown();
    }
}
