//! A mio epoll reactor in the manner of Kitex's Netpoll.
//!
//! Poller threads read sockets into [`LinkBuffer`](thrift_wire::LinkBuffer) chains
//! and write them with vectored sends; tokio tasks await whole frames and flushes.
//! An echo of one length-prefixed frame over loopback, server and client on one
//! reactor:
//!
//! ```
//! use std::time::Duration;
//! use bytes::Bytes;
//! use netpoll_rs::{Config, Reactor};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! // Frames are a 4-byte big-endian length and that many bytes.
//! fn frame_len(b: &mut thrift_wire::LinkBuffer) -> std::io::Result<Option<usize>> {
//!     Ok(b.peek(4).map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
//! }
//!
//! let reactor = Reactor::new(Config::default())?;
//! let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap())?;
//! let addr = listener.local_addr().expect("a TCP listener has an address");
//!
//! // The server: every frame back as it came.
//! tokio::spawn(async move {
//!     let conn = listener.accept().await?;
//!     while let Some(frame) = conn.read_frame(frame_len).await? {
//!         conn.write(frame);
//!         conn.flush().await?;
//!     }
//!     std::io::Result::Ok(())
//! });
//!
//! // The client, on the same reactor.
//! let client = reactor.connect_tcp(addr, Duration::from_secs(1))?;
//! client.write(Bytes::from_static(b"\0\0\0\x05hello"));
//! client.flush().await?;
//! let echoed = client.read_frame(frame_len).await?.expect("the echoed frame");
//! assert_eq!(&echoed[..], b"\0\0\0\x05hello");
//! # Ok(())
//! # }
//! ```
//!
//! How it works:
//!
//! - **Poller threads** ([`Config::pollers`]), each owning a `mio::Poll` and a waker;
//!   sockets are spread over them round-robin. A socket's mio token is its slot in a
//!   slab plus the slot's generation, so an event for a socket that has closed never
//!   reaches the socket that reuses the slot.
//! - **The poll loop** ([`Config::busy_poll`], [`Config::adaptive_spin`]): after a
//!   batch with events the poller may keep polling with a zero timeout, yielding
//!   between polls, before it blocks. By default it learns the idle gaps between its
//!   work and the next event and spins only while they are a few microseconds long
//!   (a busy poller, where spinning costs less than a sleep and a wake-up), for
//!   twice the gap; otherwise it blocks as soon as its work is done, so that a server
//!   at partial load sleeps between calls instead of spinning through every gap. With
//!   `adaptive_spin` off it spins for the whole [`Config::spin`] (50 µs) after every
//!   burst: the lowest latency at low load, for up to a whole core of CPU.
//! - **Reads** happen on the poller thread, into the connection's input
//!   [`LinkBuffer`](thrift_wire::LinkBuffer), at most [`Config::reads_per_turn`] per
//!   event (the rest on the next turn, for fairness). Readiness is edge-triggered and
//!   tracked in user space. Above [`Config::input_high_water`] unconsumed bytes the
//!   connection stops reading until the consumer takes some, so a slow handler cannot
//!   make memory grow without bound. When the peer closes, what it sent before is still
//!   delivered, then end of stream.
//! - **Writes** are queued in the output `LinkBuffer` (zero-copy for `Bytes`) and
//!   [`flush`](Connection::flush) issues a vectored send (`sendmsg`) inline on the
//!   caller's thread; only a partial write involves the poller, which finishes it on
//!   WRITABLE, from where it stopped.
//! - **The async face**: tokio tasks await "a whole frame is in the input"
//!   ([`Connection::read_frame`]) and "the output drained" ([`Connection::flush`]),
//!   woken by the poller threads; handlers run on tokio, socket I/O stays here.
//! - **Handlers on the poller** ([`Connection::serve_inline`], Netpoll's `OnRequest`):
//!   a [`Handler`] is called on the poller right after new input is read, takes whole
//!   frames from the input, writes answers to the output, and the poller sends them at
//!   once: no task, no waker, no thread switch. For short work that never waits (an
//!   echo, a forwarding proxy, a client's closed loop). Such a connection also stops
//!   reading while the peer does not take its output and that is above the high-water
//!   mark, so a peer that sends without reading cannot grow it without bound (it can
//!   pass the mark by one turn's reads: `reads_per_turn` × `read_chunk`).
//! - **Deadlines for handlers**: a [`Handler`] sets its connection's one deadline with
//!   [`Io::wake_at`] (from [`Io::now`], the clock reading the poller took once for its
//!   turn) and is called at [`Handler::on_timer`] once it has passed, so a server ends
//!   idle or slow connections with no timer or task per connection. Each poller keeps
//!   its connections' deadlines in one heap, invalidated lazily and bounded by twice
//!   the connections with a deadline (plus a constant), and waits for events no longer
//!   than the earliest of them: in `epoll_wait` on its thread, or on one tokio sleep on
//!   a runtime. With no deadline and no events a poller blocks and uses no CPU.
//! - **Where the pollers run**: [`Reactor::new`] gives each poller a thread of its own
//!   (Netpoll's layout). [`Reactor::on_runtime`] runs them as tasks of a tokio runtime
//!   instead: tokio's reactor watches each poller's epoll fd and the task drains it, so a
//!   handler on that runtime is woken without a thread switch. On a small machine where
//!   handlers and pollers compete for cores, that saves a context switch and an eventfd
//!   wake per message (see `cargo bench -p benches --bench netpoll_echo`).
//! - **io_uring** ([`Config::driver`], [`Driver::IoUring`]): instead of epoll, each
//!   poller may own an io_uring. Every connection then has a multishot receive on the
//!   ring, into receive buffers the poller lends the kernel (a provided buffer ring),
//!   whose bytes are copied into the same input blocks; what the inline handlers write
//!   in a turn leaves as sends queued on the ring, the output's nodes handed over
//!   without a copy; and one `io_uring_enter` per turn submits them, reaps every
//!   completion and waits, its timeout the earliest deadline. Flushes from other
//!   threads still call `sendmsg` themselves. Where the kernel refuses a ring the
//!   reactor runs on epoll and logs it once ([`Reactor::driver`] says which).
//!   `NETPOLL_DRIVER=io_uring` picks it for every `Config::default()`.
//! - **One seam for the drivers** (the private `sys` module, laid out as mio's
//!   `sys/`): `sys/epoll.rs` and `sys/uring.rs` are the two drivers, `sys/socket.rs`
//!   the sockets, and every system call of the crate is made in `sys`. Its `mod.rs`
//!   is the interface: a poller's driver (wait, hand over each event or completion,
//!   submit what the turn asked for), the handle other threads wake and register
//!   with, and a connection's slot for its driver, each an enum chosen once when the
//!   poller starts and matched in `sys` alone. The poller, the connections and the
//!   listeners name no driver: a connection's state asks its slot how a flush goes,
//!   what is in flight and whether to go on receiving, and takes input either way,
//!   read from the socket while an event left it readable (epoll) or handed over by
//!   a receive completion (io_uring). Enums rather than trait objects or generic
//!   parameters: a match on a value that never changes costs nothing measurable in
//!   every turn and on every event, where a `dyn` call is an indirect call per event
//!   and a generic driver would make [`Connection`] generic (or boxed) too.
//! - **Memory**: input blocks come from a per-poller pool in four size classes
//!   ([`Config::read_chunk`] × 1, 4, 16, 64) and go back to it when a connection's input
//!   is all consumed, so an idle connection holds no input block. A frame of known
//!   length that does not fit its block moves once to a block of the class that holds
//!   it whole, so it is handed out without a copy. A block is reused once the frames cut
//!   from it are dropped, so steady request/response traffic allocates nothing per
//!   message for I/O, from 1 KiB frames to 3 MiB ones (`tests/allocs.rs` counts).
//!   When a task reader falls behind the socket, its backlog stays in the blocks it
//!   was read into (they join the input's chain) and only a frame that straddles two
//!   blocks is copied: the backlog is never moved to make room.
//!
//! # An echo server
//!
//! On tokio tasks (the async face):
//!
//! ```no_run
//! use netpoll_rs::{Config, Reactor};
//!
//! # async fn run() -> std::io::Result<()> {
//! let reactor = Reactor::new(Config::default())?;
//! let listener = reactor.listen_tcp("127.0.0.1:9000".parse().unwrap())?;
//! loop {
//!     let conn = listener.accept().await?;
//!     tokio::spawn(async move {
//!         // Frames are a 4-byte big-endian length and that many bytes.
//!         let len = |b: &mut thrift_wire::LinkBuffer| {
//!             Ok(b.peek(4).map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
//!         };
//!         while let Ok(Some(frame)) = conn.read_frame(len).await {
//!             conn.write(frame);
//!             if conn.flush().await.is_err() {
//!                 break;
//!             }
//!         }
//!     });
//! }
//! # }
//! ```
//!
//! The same with the echo done on the poller:
//!
//! ```no_run
//! use netpoll_rs::{Config, Handler, Io, Reactor};
//!
//! struct Echo;
//!
//! impl Handler for Echo {
//!     fn on_input(&mut self, io: &mut Io<'_>) {
//!         while let Some(h) = io.input().peek(4) {
//!             let len = 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
//!             if io.input().len() < len {
//!                 break;
//!             }
//!             let frame = io.input().next(len);
//!             io.output().insert(frame);
//!         }
//!     }
//! }
//!
//! # async fn run() -> std::io::Result<()> {
//! let reactor = Reactor::new(Config::default())?;
//! let listener = reactor.listen_tcp("127.0.0.1:9000".parse().unwrap())?;
//! loop {
//!     listener.accept().await?.serve_inline(Echo);
//! }
//! # }
//! ```
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

// Each module uses only those above it in this list (see each `use crate::`), so the
// graph is acyclic: leaves first (`sys`, the drivers and every system call, among
// them), then the connection's state machine, the poller that knows its sockets only
// as `poller::Entry`, and the sockets and reactor on top.
mod slab;
mod stats;
mod sync;
mod sys;

pub mod cpus;

mod config;
mod handler;
mod timer;

mod pool;

mod conn_state;

mod poller;

mod conn;
mod poller_set;

mod listener;
mod reactor;

pub use config::Config;
pub use conn::{Connection, InlineHandle};
pub use handler::{Handler, Io};
pub use listener::Listener;
pub use poller::ReplyDue;
pub use reactor::Reactor;
pub use stats::{IoCounts, io_counts};
pub use sys::{BufferSizes, Driver, SocketOptions};
