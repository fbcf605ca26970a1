//! Reactor settings, with the defaults an RPC server wants.

use std::time::Duration;

use crate::sys::{self, Driver};

/// How the reactor runs. `Config::default()` suits an RPC server; every field can be
/// changed before [`Reactor::new`](crate::Reactor::new).
#[derive(Debug, Clone)]
pub struct Config {
    /// Poller threads. Default: one per 20 CPUs plus one (Netpoll's rule: a poller
    /// thread keeps up with many cores' worth of handlers), so 1 on small machines;
    /// the CPUs counted are those the process may use (its affinity mask and cgroup
    /// CPU quota, see [`crate::cpus`]), not all the host's.
    pub pollers: usize,
    /// The latency-tuned loop: after a batch with events, keep polling with a zero
    /// timeout, yielding the thread (or, on a runtime, the task) between polls, for
    /// [`spin`](Self::spin) after the last event, then block. Default on. Off, the
    /// poller blocks in `epoll_wait` as soon as a batch is handled.
    pub busy_poll: bool,
    /// How long the busy loop goes on after the last event, at most. A message that
    /// arrives within it is picked up by a thread that is still running, without the
    /// wake-up of a sleeping one, which at low load is most of a round trip on
    /// loopback; the price is up to this much CPU time after each burst of events.
    /// Zero: one more poll and one yield, then block. Default 50 µs.
    pub spin: Duration,
    /// The spin follows the load (default): each poller learns the average idle gap
    /// between the end of its work and the next event, and spins (for twice that gap,
    /// at most [`spin`](Self::spin)) only while the gap is short enough, 3 µs or
    /// less, that spinning through it costs no more CPU than a sleep and a wake-up
    /// would; otherwise it blocks as soon as its work is done. So a busy
    /// poller does not sleep between close events, and one whose events are spread
    /// out (a server at partial load, a lone caller across a slow network) sleeps
    /// instead of spinning through every gap. A reply that a reader waits for
    /// ([`Connection::read_reply`](crate::Connection::read_reply), a client's after
    /// its call) is spun for when it usually comes within [`spin`](Self::spin): for
    /// twice its usual delay, while one to four are due. `false`: the whole
    /// [`spin`](Self::spin) after every burst, a fixed window (lower latency at
    /// partial load, for up to a whole core of CPU).
    pub adaptive_spin: bool,
    /// Bytes asked of the kernel per read, and the smallest pooled block's size. A
    /// frame whose length is known and that needs more is read in larger pieces, into a
    /// block that holds it whole. Default 64 KiB.
    pub read_chunk: usize,
    /// Reads per connection per event before the poller moves on to other connections
    /// (it comes back on its next turn). Default 16.
    pub reads_per_turn: usize,
    /// Unconsumed input above which a connection stops reading until the consumer takes
    /// some (the kernel buffer then fills and TCP pushes back on the peer). Default 4 MiB.
    pub input_high_water: usize,
    /// Most `iovec`s handed to one `sendmsg`. Default 64.
    pub max_iovecs: usize,
    /// Events taken per `epoll_wait`. Default 1024.
    pub events_capacity: usize,
    /// Read blocks each poller keeps for reuse, in the smallest size class
    /// (`read_chunk` bytes); the larger classes (4, 16 and 64 times that, for frames
    /// that do not fit one read) keep an eighth as many per step, at least one. A
    /// connection holds a block only while it has unconsumed input. Default 256.
    pub pooled_blocks: usize,
    /// How the pollers learn of I/O and do it: epoll readiness and a system call per
    /// read and write (default), or an io_uring per poller. See [`Driver`]. The
    /// default comes from the `NETPOLL_DRIVER` environment variable
    /// ([`Driver::from_env`]), epoll when it is unset.
    pub driver: Driver,
    /// With [`Driver::IoUring`]: submission queue entries per ring (the completion
    /// queue has twice as many). A turn that queues more submits early. Default 1024.
    pub ring_entries: u32,
    /// With [`Driver::IoUring`]: receive buffers each poller lends its ring (a power of
    /// two, at most 32768; rounded down to one). Default 128. The kernel fills them
    /// without asking, as data arrives, so a connection's input can pass
    /// [`input_high_water`](Self::input_high_water) by what they hold together (4 MiB
    /// by default) before its receive is cancelled, where epoll passes it by one read.
    pub ring_buffers: u16,
    /// With [`Driver::IoUring`]: the size of each receive buffer, the most one
    /// completion delivers. Default 32 KiB: room for most of the 20-odd 1 KiB requests
    /// a mux client sends together (`rpc-bench --server-only --server-io uring
    /// --mux`: 10 calls per completion with 16 KiB buffers, 17 with 32 KiB).
    pub ring_buffer_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        let cpus = crate::cpus::CpuBudget::current().usable;
        Config {
            pollers: cpus / 20 + 1,
            busy_poll: true,
            spin: Duration::from_micros(50),
            adaptive_spin: true,
            read_chunk: 64 * 1024,
            reads_per_turn: 16,
            input_high_water: 4 * 1024 * 1024,
            max_iovecs: 64,
            events_capacity: 1024,
            pooled_blocks: 256,
            driver: Driver::from_env(),
            ring_entries: 1024,
            ring_buffers: 128,
            ring_buffer_size: 32 * 1024,
        }
    }
}

impl Config {
    /// Clamps values that cannot work (zero pollers, zero-sized reads...) to the least
    /// that does.
    pub(crate) fn sanitized(mut self) -> Self {
        self.pollers = self.pollers.max(1);
        self.read_chunk = self.read_chunk.max(512);
        self.reads_per_turn = self.reads_per_turn.max(1);
        self.input_high_water = self.input_high_water.max(self.read_chunk);
        self.max_iovecs = self.max_iovecs.clamp(1, 1024);
        self.events_capacity = self.events_capacity.max(16);
        self.ring_entries = self.ring_entries.clamp(16, 32768);
        let buffers = self.ring_buffers.clamp(1, 32768);
        self.ring_buffers = 1 << (15 - buffers.leading_zeros());
        self.ring_buffer_size = self.ring_buffer_size.clamp(512, 1 << 20);
        self
    }

    /// What a poller's driver is built with; `own_thread`: the poller runs on a
    /// thread of its own.
    pub(crate) fn setup(&self, own_thread: bool) -> sys::Setup {
        sys::Setup {
            driver: self.driver,
            own_thread,
            events_capacity: self.events_capacity,
            ring_entries: self.ring_entries,
            ring_buffers: self.ring_buffers,
            ring_buffer_size: self.ring_buffer_size,
        }
    }
}
