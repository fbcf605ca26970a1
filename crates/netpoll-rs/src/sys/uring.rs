//! The io_uring driver ([`Driver::IoUring`](crate::Driver::IoUring)): a poller whose
//! ring reads and writes its sockets.
//!
//! - **Receives**: each connection has one multishot receive on the ring, into the
//!   buffers of a provided buffer ring the poller lends the kernel. A completion names
//!   the buffer it filled; the poller copies those bytes into the connection's input
//!   (the same pooled blocks as under epoll) and gives the buffer back to the ring at
//!   once, so a ring of a few hundred buffers serves any number of connections. A
//!   connection whose input reaches its high-water mark has its receive cancelled, and
//!   armed again once its consumer takes input.
//! - **Sends**: output written on the poller (an inline handler's replies) is taken out
//!   of the connection's `LinkBuffer` node by node, without a copy, and queued as one
//!   `send` or `sendmsg` (`MSG_WAITALL`: the kernel sends it all or fails); the nodes
//!   stay with the driver until the completion. One send per connection is in flight;
//!   what is written meanwhile goes out with the next.
//! - **One system call per turn**: the submissions of a turn (sends, receives to arm,
//!   cancels) go in with the wait for completions, in one `io_uring_enter`, whose
//!   timeout is the earliest deadline.
//! - **Other threads** queue what they ask of the ring ([`Op`]) with the poller's
//!   [`RingShared`] and wake it through an eventfd the ring reads.
//! - **A connection's side** of the ring is a [`ConnRing`] in its state (the
//!   `Uring` case of [`ConnIo`](super::ConnIo)): its receive's state, the bytes of its
//!   send in flight, and what it asks of the ring until the poller takes it.
//! - **File descriptors** are closed only by the poller, after the submissions that
//!   name them went in: a connection closed elsewhere shuts its socket down (which
//!   ends the kernel's operations on it: a cancel can miss a send the kernel is
//!   retrying) and hands it to the poller ([`Op::Close`]), which cancels what is
//!   left and drops it after its next submission, so an operation never lands on a
//!   number the process reused.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use io_uring::types::{BufRingEntry, CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue};
use mio::Token;
use nix::libc;
use thrift_wire::LinkBuffer;

use super::driver::Setup;
use super::event::{Event, Lent, Op, Received};
use super::socket::{ListenSocket, Registered};
use crate::sync::lock;

/// The kind of operation, in the low two bits of its `user_data`; the token is above.
const RECV: u64 = 0;
const SEND: u64 = 1;
const POLL: u64 = 2;
// Kind 3: the two below, which name no token.

/// The eventfd read that wakes the poller.
const WAKE: u64 = u64::MAX;
/// Operations whose completion says nothing (cancels).
const QUIET: u64 = u64::MAX - 4;

/// The buffer group of every poller's provided buffers (each ring has its own groups).
const GROUP: u16 = 0;

fn user_data(token: Token, kind: u64) -> u64 {
    ((token.0 as u64) << 2) | kind
}

fn split(user_data: u64) -> (Token, u64) {
    (Token((user_data >> 2) as usize), user_data & 3)
}

/// The part of a ring poller that other threads use: the operations they queue, and
/// the eventfd that wakes the poller to take them.
#[derive(Debug)]
pub(crate) struct RingShared {
    queued: Mutex<Queued>,
    wake_fd: OwnedFd,
    /// A wake-up was written and its read has not completed: later wakers need not
    /// write again. Cleared as the read's completion is handled, before the poller
    /// looks again at anything a waker may have changed (its queue, its stop flag, its
    /// deadlines): a wake-up that finds it still set is one the poller will see.
    woken: AtomicBool,
}

/// The operations other threads queued, and whether the ring is gone (then an
/// operation is dropped at once: a socket it names can close, no submission is left
/// to name it).
#[derive(Debug, Default)]
struct Queued {
    ops: Vec<Op>,
    gone: bool,
}

/// A connection's side of the ring, kept in its state: what its receive is doing,
/// the bytes of its send on the ring, and what it asks of the ring until the poller
/// (or the thread that holds its lock) takes it ([`take_ops`](Self::take_ops)).
#[derive(Debug, Default)]
pub(crate) struct ConnRing {
    recv: RecvState,
    /// Bytes of the send on the ring: still this connection's output until the
    /// completion says they went.
    in_flight: usize,
    /// The node list of the last send, back from the ring, for the next one (no
    /// allocation per send).
    spare: Vec<Bytes>,
    want_recv: bool,
    want_cancel: bool,
    want_send: bool,
}

/// The connection's multishot receive on the ring.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum RecvState {
    /// None armed (not yet, paused, or ended: end of stream, an error).
    #[default]
    Idle,
    Armed,
    /// Cancelled (the input is above its mark); completions may still bring data.
    Cancelling,
}

impl ConnRing {
    /// A new connection's side: its receive is asked for at once.
    pub(crate) fn new() -> Self {
        ConnRing {
            recv: RecvState::Armed,
            want_recv: true,
            ..ConnRing::default()
        }
    }

    /// Bytes of the send on the ring.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Arms the receive when the connection should read and none is armed, or
    /// cancels it when it should not (its input is above its mark, it is closing, it
    /// ended).
    pub(crate) fn set_reading(&mut self, reading: bool) {
        match self.recv {
            RecvState::Armed if !reading => {
                self.recv = RecvState::Cancelling;
                self.want_cancel = true;
                self.want_recv = false;
            }
            RecvState::Idle if reading => {
                self.recv = RecvState::Armed;
                self.want_recv = true;
            }
            _ => {}
        }
    }

    /// The receive's last completion came.
    pub(crate) fn recv_ended(&mut self) {
        self.recv = RecvState::Idle;
    }

    /// The send completed: `rest` (what the kernel did not take) goes back in front
    /// of `output`, in order, or the error is returned.
    pub(crate) fn sent(
        &mut self,
        rest: io::Result<Vec<Bytes>>,
        output: &mut LinkBuffer,
    ) -> io::Result<()> {
        self.in_flight = 0;
        let mut rest = rest?;
        while let Some(node) = rest.pop() {
            output.push_front(node);
        }
        self.spare = rest;
        Ok(())
    }

    /// On the poller, a send is left to the ring, with the turn's other submissions.
    pub(crate) fn send_on_poller(&mut self) {
        self.want_send = true;
    }

    /// A `sendmsg` from another thread filled the socket (`full`): the rest goes to
    /// the ring, which waits for room.
    pub(crate) fn socket_full(&mut self, full: bool) {
        self.want_send = full;
    }

    /// What the connection asks of the ring since the last call, into `out`: to arm
    /// or cancel its receive, to send its output (taken out of `lent.output` here,
    /// node by node, up to `lent.max_iovecs` nodes; with none to take, the pending
    /// write ends). Nothing once the socket closed: the close cancels what is on the
    /// ring.
    pub(crate) fn take_ops(&mut self, lent: Lent<'_>, out: &mut Vec<Op>) {
        let Lent {
            token,
            fd,
            output,
            write_pending,
            max_iovecs,
        } = lent;
        let Some(fd) = fd else {
            self.want_recv = false;
            self.want_cancel = false;
            self.want_send = false;
            return;
        };
        if std::mem::take(&mut self.want_cancel) {
            out.push(Op::CancelRecv { token });
        }
        if std::mem::take(&mut self.want_recv) {
            out.push(Op::Recv { token, fd });
        }
        if std::mem::take(&mut self.want_send) {
            let mut chunks = std::mem::take(&mut self.spare);
            while chunks.len() < max_iovecs.max(1)
                && let Some(node) = output.pop_node()
            {
                self.in_flight += node.len();
                chunks.push(node);
            }
            if chunks.is_empty() {
                *write_pending = false;
                self.spare = chunks;
            } else {
                out.push(Op::Send { token, fd, chunks });
            }
        }
    }
}

impl RingShared {
    fn new() -> io::Result<Self> {
        // SAFETY: `eventfd` takes no pointers; a non-negative return is a new file
        // descriptor that nothing else owns, which `OwnedFd` then closes once.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RingShared {
            queued: Mutex::new(Queued::default()),
            // SAFETY: see above: `fd` is open and owned by no one else.
            wake_fd: unsafe { OwnedFd::from_raw_fd(fd) },
            woken: AtomicBool::new(false),
        })
    }

    /// Queues `op` for the poller's next turn and wakes it.
    pub(crate) fn queue(&self, op: Op) {
        let dropped = {
            let mut queued = lock(&self.queued);
            if queued.gone {
                Some(op)
            } else {
                queued.ops.push(op);
                None
            }
        };
        match dropped {
            // Outside the lock: a socket it owned closes now.
            Some(op) => drop(op),
            None => self.wake(),
        }
    }

    /// Queues what `f` asks of the ring (a connection's [`ConnRing::take_ops`], made
    /// under its lock so that two connections' requests never cross).
    pub(crate) fn queue_with(&self, f: impl FnOnce(&mut Vec<Op>)) {
        let mut ops = Vec::new();
        f(&mut ops);
        for op in ops {
            self.queue(op);
        }
    }

    /// Lets go of a closed socket of `token`: shut down (ending what the ring does on
    /// it) and handed to the poller, which closes it once what names it on the ring
    /// is cancelled.
    pub(crate) fn release<S: Registered>(&self, token: Token, socket: S) {
        socket.end_io();
        self.queue(Op::Close {
            token,
            owner: Box::new(socket),
        });
    }

    /// Has the poller watch a listening socket.
    pub(crate) fn register_listener(&self, socket: &ListenSocket, token: Token) {
        self.queue(Op::Listen {
            token,
            fd: socket.raw_fd(),
        });
    }

    /// Wakes the poller (its ring reads the eventfd); one write until it has woken.
    pub(crate) fn wake(&self) {
        if self.woken.swap(true, Ordering::SeqCst) {
            return;
        }
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local array to an eventfd this struct
        // owns. A full counter (EAGAIN) means a wake-up is pending anyway.
        let _ = unsafe { libc::write(self.wake_fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// The receive buffers a poller lends its ring: `count` buffers of `size` bytes in one
/// allocation, and the ring of entries that tells the kernel which are free.
struct BufRing {
    /// `count` entries, page-aligned, shared with the kernel once registered.
    entries: NonNull<BufRingEntry>,
    entries_layout: std::alloc::Layout,
    /// `count * size` bytes of buffers.
    data: NonNull<u8>,
    data_layout: std::alloc::Layout,
    size: usize,
    count: u16,
    /// Entries added so far (mod 2^16), published to the kernel by `publish`.
    tail: u16,
}

// SAFETY: the pointers name memory this struct alone allocated and frees; the kernel
// reads and writes it only through the ring this struct is registered with, which
// lives on the same poller. Moving the owner to another thread moves no memory.
unsafe impl Send for BufRing {}

impl BufRing {
    fn new(count: u16, size: usize) -> io::Result<Self> {
        let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "receive buffers too large");
        let entries_layout = std::alloc::Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(|_| too_big())?;
        let data_layout = std::alloc::Layout::from_size_align(
            usize::from(count).checked_mul(size).ok_or_else(too_big)?,
            64,
        )
        .map_err(|_| too_big())?;
        // SAFETY: both layouts have a non-zero size (count >= 1, size >= 512); a null
        // return is handled.
        let entries = unsafe { std::alloc::alloc_zeroed(entries_layout) };
        let Some(entries) = NonNull::new(entries.cast::<BufRingEntry>()) else {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        };
        // SAFETY: as above.
        let data = unsafe { std::alloc::alloc_zeroed(data_layout) };
        let Some(data) = NonNull::new(data) else {
            // SAFETY: allocated above with this layout, not shared with anyone yet.
            unsafe { std::alloc::dealloc(entries.as_ptr().cast(), entries_layout) };
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        };
        let mut ring = BufRing {
            entries,
            entries_layout,
            data,
            data_layout,
            size,
            count,
            tail: 0,
        };
        for bid in 0..count {
            ring.give_back(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Adds buffer `bid` at the tail (seen by the kernel at the next `publish`).
    fn give_back(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (self.count - 1));
        // SAFETY: `slot < count`, inside the entries allocation. The kernel reads only
        // entries between its head and the published tail, and this one is past the
        // tail until `publish`. The setters write addr, len and bid, never the `resv`
        // field that, in entry 0, is the ring's tail.
        let entry = unsafe { &mut *self.entries.as_ptr().add(slot) };
        let offset = usize::from(bid) * self.size;
        entry.set_addr(self.data.as_ptr() as u64 + offset as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the entries added since the last call.
    fn publish(&self) {
        // SAFETY: `entries` is the ring's base, its entry 0 initialised (zeroed); the
        // tail is a `u16` inside it, which the kernel only reads, and which an
        // `AtomicU16` may alias (same size and alignment).
        let tail = unsafe { BufRingEntry::tail(self.entries.as_ptr()) };
        // SAFETY: see above.
        let tail = unsafe { &*(tail as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion just handed back.
    ///
    /// # Safety
    /// A completion named `bid` and reported `len` bytes, and the buffer was not given
    /// back since: the kernel wrote those bytes and does not touch the buffer until it
    /// is given back.
    unsafe fn filled(&self, bid: u16, len: usize) -> &[u8] {
        let len = len.min(self.size);
        let bid = usize::from(bid.min(self.count - 1));
        // SAFETY: inside the data allocation (`bid < count`, `len <= size`); the
        // caller's contract makes the bytes initialised and not concurrently written.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr().add(bid * self.size), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts; the owner unregistered the
        // ring (or leaked this struct instead of dropping it when it could not).
        unsafe {
            std::alloc::dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            std::alloc::dealloc(self.data.as_ptr(), self.data_layout);
        }
    }
}

/// A send the kernel holds: the nodes it reads from and the `iovec`s and `msghdr` that
/// point at them, all kept here until its completion.
struct InFlight {
    chunks: Vec<Bytes>,
    iov: Vec<libc::iovec>,
    msg: libc::msghdr,
}

// SAFETY: the raw pointers in `iov` and `msg` point into `chunks` (heap memory of the
// `Bytes`, which does not move with them) and into `iov`'s own heap buffer; they are
// only read by the kernel, and the struct moves between threads only as a whole.
unsafe impl Send for InFlight {}

impl InFlight {
    fn empty() -> Box<Self> {
        Box::new(InFlight {
            chunks: Vec::new(),
            iov: Vec::new(),
            // SAFETY: `msghdr` is plain data; all zeros is an empty header.
            msg: unsafe { std::mem::zeroed() },
        })
    }

    /// Points the `iovec`s and the header at `chunks`, which it keeps. The struct is
    /// boxed, so the header's pointer to `iov` stays right when the box moves.
    fn load(&mut self, chunks: Vec<Bytes>) {
        self.chunks = chunks;
        self.iov.clear();
        self.iov.extend(self.chunks.iter().map(|c| libc::iovec {
            iov_base: c.as_ptr() as *mut libc::c_void,
            iov_len: c.len(),
        }));
        self.msg.msg_iov = self.iov.as_mut_ptr();
        self.msg.msg_iovlen = self.iov.len() as _;
    }

    /// Takes the nodes back, without the first `sent` bytes (what a short send left;
    /// none after a whole one), in the list they came in.
    fn rest(&mut self, mut sent: usize) -> Vec<Bytes> {
        let mut chunks = std::mem::take(&mut self.chunks);
        chunks.retain_mut(|c| {
            if sent >= c.len() {
                sent -= c.len();
                false
            } else {
                *c = c.slice(sent..);
                sent = 0;
                true
            }
        });
        self.iov.clear();
        chunks
    }
}

/// A completion, copied out of the queue.
#[derive(Debug, Clone, Copy)]
struct Completion {
    user_data: u64,
    result: i32,
    flags: u32,
}

/// A poller's ring and what it lends the kernel.
pub(crate) struct Ring {
    ring: IoUring,
    /// Freed in `drop` only once the kernel let go of it.
    bufs: ManuallyDrop<BufRing>,
    /// Sends in flight, by connection token.
    sends: HashMap<u64, Box<InFlight>>,
    /// Finished sends, for the next ones (no allocation per send). Boxed, as in
    /// `sends`: the kernel holds a pointer to the header inside.
    #[allow(clippy::vec_box, reason = "the header's address must not move")]
    free: Vec<Box<InFlight>>,
    /// The eventfd's 8 bytes, read by the ring.
    wake_buf: Box<u64>,
    pub(crate) shared: Arc<RingShared>,
    /// Operations submitted whose last completion has not come (multishot ones count
    /// once).
    outstanding: usize,
    /// Owners of closed sockets, dropped after the next submission.
    parked: Vec<Box<dyn Any + Send>>,
    completions: Vec<Completion>,
    taken: Vec<Op>,
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("sends", &self.sends.len())
            .field("outstanding", &self.outstanding)
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// A ring with `setup`'s sizes and its receive buffers registered, or the reason
    /// the kernel refused (the reactor then falls back to epoll).
    ///
    /// `setup.own_thread`: the poller runs on a thread of its own, which alone will submit
    /// (it calls [`enable`](Self::enable) first): the kernel then runs completion work
    /// only when that thread asks for completions (`DEFER_TASKRUN`), never by
    /// interrupting it. A poller on a runtime submits from whichever worker thread
    /// runs its task, and its receives must wake that thread while it sleeps in
    /// tokio's epoll, so it gets a plain ring.
    pub(crate) fn new(setup: &Setup) -> io::Result<Ring> {
        let mut builder = IoUring::builder();
        builder
            .setup_cqsize(setup.ring_entries * 2)
            .setup_submit_all();
        if setup.own_thread {
            builder
                .setup_r_disabled()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_taskrun_flag();
        }
        let ring = builder.build(setup.ring_entries)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        for code in [
            opcode::RecvMulti::CODE,
            opcode::Send::CODE,
            opcode::SendMsg::CODE,
            opcode::PollAdd::CODE,
            opcode::Read::CODE,
            opcode::AsyncCancel::CODE,
        ] {
            if !probe.is_supported(code) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the kernel's io_uring lacks operation {code}"),
                ));
            }
        }
        let bufs = BufRing::new(setup.ring_buffers, setup.ring_buffer_size)?;
        // SAFETY: `bufs.entries` holds `bufs.count` entries, page-aligned, and stays
        // allocated until after it is unregistered (`Ring::finish`) or is leaked.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries.as_ptr() as u64,
                bufs.count,
                GROUP,
                0,
            )?;
        }
        let mut ring = Ring {
            ring,
            bufs: ManuallyDrop::new(bufs),
            sends: HashMap::new(),
            free: Vec::new(),
            wake_buf: Box::new(0),
            shared: Arc::new(RingShared::new()?),
            outstanding: 0,
            parked: Vec::new(),
            completions: Vec::with_capacity(256),
            taken: Vec::new(),
        };
        ring.arm_wake();
        Ok(ring)
    }

    /// Makes the calling thread the ring's one submitter and starts it (a ring made
    /// for a thread of its own is disabled until then).
    pub(crate) fn enable(&self) -> io::Result<()> {
        self.ring.submitter().register_enable_rings()
    }

    /// The ring's file descriptor (readable while completions wait).
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    /// Queues an entry, submitting first when the queue is full.
    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // SAFETY: every entry pushed names memory that outlives its completion:
            // buffers of the provided ring, `InFlight`s in `sends`, `wake_buf`; and
            // file descriptors that are closed only after their submission
            // (`parked`).
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                self.outstanding += 1;
                return;
            }
            if self.ring.submit().is_err() {
                // The kernel takes nothing: wait for a completion to make room.
                let _ = self.ring.submit_and_wait(1);
            }
        }
    }

    fn arm_wake(&mut self) {
        let buf: *mut u64 = &mut *self.wake_buf;
        let entry = opcode::Read::new(Fd(self.shared.wake_fd.as_raw_fd()), buf.cast(), 8)
            .build()
            .user_data(WAKE);
        self.push(entry);
    }

    /// Queues `op` on the ring.
    fn submit_op(&mut self, op: Op) {
        match op {
            Op::Recv { token, fd } => {
                let entry = opcode::RecvMulti::new(Fd(fd), GROUP)
                    .build()
                    .user_data(user_data(token, RECV));
                self.push(entry);
            }
            Op::Send { token, fd, chunks } => self.send(token, fd, chunks),
            Op::CancelRecv { token } => self.cancel(user_data(token, RECV)),
            Op::Listen { token, fd } => {
                let entry = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
                    .multi(true)
                    .build()
                    .user_data(user_data(token, POLL));
                self.push(entry);
            }
            Op::Close { token, owner } => {
                for kind in [RECV, SEND, POLL] {
                    self.cancel(user_data(token, kind));
                }
                self.parked.push(owner);
            }
        }
    }

    fn cancel(&mut self, target: u64) {
        let entry = opcode::AsyncCancel2::new(CancelBuilder::user_data(target).all())
            .build()
            .user_data(QUIET);
        self.push(entry);
    }

    fn send(&mut self, token: Token, fd: RawFd, chunks: Vec<Bytes>) {
        if chunks.is_empty() {
            return;
        }
        let mut flight = self.free.pop().unwrap_or_else(InFlight::empty);
        flight.load(chunks);
        let flags = libc::MSG_NOSIGNAL | libc::MSG_WAITALL;
        let entry = if flight.chunks.len() == 1 {
            opcode::Send::new(
                Fd(fd),
                flight.iov[0].iov_base.cast(),
                flight.iov[0].iov_len as u32,
            )
            .flags(flags)
            .build()
        } else {
            let msg: *const libc::msghdr = &flight.msg;
            opcode::SendMsg::new(Fd(fd), msg)
                .flags(flags as u32)
                .build()
        };
        let key = user_data(token, SEND);
        // A connection sends one at a time; a send still here belongs to a closed
        // connection whose slot was reused under the same generation (not possible
        // within 2^30 reuses): keep the old one alive rather than free it early.
        if let Some(old) = self.sends.insert(key, flight) {
            Box::leak(old);
        }
        self.push(entry.user_data(key));
    }

    /// Takes what other threads queued and queues it on the ring.
    fn take_queued(&mut self) {
        std::mem::swap(&mut lock(&self.shared.queued).ops, &mut self.taken);
        let mut taken = std::mem::take(&mut self.taken);
        for op in taken.drain(..) {
            self.submit_op(op);
        }
        self.taken = taken;
    }

    /// Submits what is queued and waits for a completion, at most `timeout` (none: for
    /// ever; zero: not at all). Then drops the sockets closed before the submission.
    fn enter(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let result = match timeout {
            Some(t) if t.is_zero() => {
                // Nothing to submit, no completion work the kernel holds back for
                // this thread, nothing left in the queue's overflow: a poll costs no
                // system call (what completed is in the queue's shared memory).
                let mut sq = self.ring.submission();
                sq.sync();
                if sq.is_empty() && !sq.taskrun() && !sq.cq_overflow() {
                    drop(sq);
                    self.parked.clear();
                    return Ok(());
                }
                drop(sq);
                self.ring.submit()
            }
            Some(t) => {
                let ts = Timespec::from(t);
                let args = SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submit_and_wait(1),
        };
        let result = match result {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        };
        if self.ring.submission().is_empty() {
            self.parked.clear();
        }
        result
    }

    /// Takes what other threads queued and waits for completions, at most `timeout`
    /// (none: for ever; zero: not at all), submitting the turn's entries with it.
    #[inline]
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.take_queued();
        self.enter(timeout)
    }

    /// Copies the completions waiting into `self.completions`; whether the queue held
    /// as many as it could (more may be waiting).
    fn reap(&mut self) -> bool {
        self.completions.clear();
        let mut cq = self.ring.completion();
        let full = cq.len() >= cq.capacity();
        for cqe in &mut cq {
            self.completions.push(Completion {
                user_data: cqe.user_data(),
                result: cqe.result(),
                flags: cqe.flags(),
            });
        }
        full
    }

    /// Hands each completion waiting to `f`, for the token it names (a wake-up of the
    /// poller names none), giving a receive's buffer back to the ring once `f` is done
    /// with its bytes. Returns whether there was any, and whether they filled the
    /// queue (more may wait).
    #[inline]
    pub(crate) fn dispatch(&mut self, mut f: impl FnMut(Token, Event<'_>)) -> (bool, bool) {
        let full = self.reap();
        let mut completions = std::mem::take(&mut self.completions);
        for &c in &completions {
            self.complete(c, &mut f);
        }
        let any = !completions.is_empty();
        completions.clear();
        self.completions = completions;
        (any, full)
    }

    /// What `c` means, for `f` to act on; then its buffer (if any) goes back to the
    /// ring.
    fn complete(&mut self, c: Completion, f: &mut impl FnMut(Token, Event<'_>)) {
        let more = cqueue::more(c.flags);
        if !more {
            self.outstanding = self.outstanding.saturating_sub(1);
        }
        if c.user_data == WAKE {
            // Cleared here, not when the queue is next taken: the poller checks its
            // stop flag and its deadlines before that, and a waker that changed one
            // in between and found the flag still set would not write, leaving the
            // poller blocked in a wait that nothing ends (a reactor's shutdown then
            // waited for ever on the join of its poller thread).
            self.shared.woken.store(false, Ordering::SeqCst);
            self.arm_wake();
            return;
        }
        let (token, kind) = split(c.user_data);
        match kind {
            RECV => {
                let bid = cqueue::buffer_select(c.flags);
                let received = match (c.result, bid) {
                    (n, Some(bid)) if n > 0 => {
                        // SAFETY: the completion named `bid` and `n` bytes; the buffer
                        // goes back to the ring only below, after `f` is done with it.
                        let data = unsafe { self.bufs.filled(bid, n as usize) };
                        f(token, Event::Recv(Received::Data(data, more)));
                        self.bufs.give_back(bid);
                        return;
                    }
                    (0, _) => Received::Eof,
                    (n, _) if n == -libc::ECANCELED => Received::Ended,
                    (n, _) if n == -libc::ENOBUFS => Received::Ended,
                    (n, _) if n < 0 => Received::Failed(io::Error::from_raw_os_error(-n)),
                    _ => Received::Ended,
                };
                if let Some(bid) = bid {
                    self.bufs.give_back(bid);
                }
                f(token, Event::Recv(received));
            }
            SEND => {
                let Some(mut flight) = self.sends.remove(&c.user_data) else {
                    return;
                };
                let result = if c.result < 0 {
                    flight.rest(usize::MAX);
                    Err(io::Error::from_raw_os_error(-c.result))
                } else {
                    Ok(flight.rest(c.result as usize))
                };
                self.free.push(flight);
                f(token, Event::Sent(result));
            }
            POLL => f(token, Event::Listen(more && c.result >= 0)),
            _ => {}
        }
    }

    /// After a turn's completions and deadlines: queues what they asked of the ring
    /// (`ops`, drained), then publishes the buffers given back, before any receive
    /// that ran dry is armed again.
    pub(crate) fn end_turn(&mut self, ops: &mut Vec<Op>) -> io::Result<()> {
        let mut cancels = false;
        for op in ops.drain(..) {
            cancels |= matches!(op, Op::CancelRecv { .. });
            self.submit_op(op);
        }
        // A connection at its high-water mark stops receiving before the buffers of
        // this turn go back to the ring, so the kernel cannot fill them for it again:
        // its input passes the mark by one ring's worth at most.
        if cancels {
            self.enter(Some(Duration::ZERO))?;
        }
        self.bufs.publish();
        Ok(())
    }
}

impl Drop for Ring {
    /// The poller stops: cancels every operation and waits (a second at most) for the
    /// kernel to let go of the memory they name before it is freed. What it does not
    /// let go of in time is leaked rather than freed under it.
    fn drop(&mut self) {
        self.take_queued();
        let entry = opcode::AsyncCancel2::new(CancelBuilder::any())
            .build()
            .user_data(QUIET);
        self.push(entry);
        let deadline = Instant::now() + Duration::from_secs(1);
        // The cancel's own completion counts in `outstanding` too.
        while self.outstanding > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.enter(Some(left)).is_err() {
                break;
            }
            self.reap();
            for c in std::mem::take(&mut self.completions) {
                if !cqueue::more(c.flags) {
                    self.outstanding = self.outstanding.saturating_sub(1);
                }
                if let Some(bid) = cqueue::buffer_select(c.flags) {
                    self.bufs.give_back(bid);
                }
                self.sends.remove(&c.user_data);
            }
        }
        self.parked.clear();
        // From now on, what other threads queue is dropped at once.
        let late = {
            let mut queued = lock(&self.shared.queued);
            queued.gone = true;
            std::mem::take(&mut queued.ops)
        };
        drop(late);
        if self.outstanding == 0 && self.ring.submitter().unregister_buf_ring(GROUP).is_ok() {
            // SAFETY: unregistered, and no operation is left that could use it; it
            // is not used again.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
            return;
        }
        // The kernel may still write into the buffers or read from the sends.
        tracing::warn!(
            outstanding = self.outstanding,
            "netpoll-rs: io_uring operations outlived the poller; their buffers are leaked"
        );
        std::mem::forget(std::mem::take(&mut self.sends));
    }
}

/// The one log line of a reactor that asked for io_uring and got epoll.
pub(crate) fn log_fallback(e: &io::Error) {
    tracing::warn!(
        error = %e,
        "netpoll-rs: io_uring is unavailable here; the reactor runs on epoll"
    );
}

/// The driver on its own, with no poller: a ring made as a poller makes it, ops pushed
/// as connections push them, turns run as the poller runs them, over loopback TCP.
/// Every wait is bounded ([`LIMIT`] in all), and every test ends by dropping the ring
/// before its sockets.
#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::AtomicBool;

    use nix::sys::socket::{setsockopt, sockopt};

    use super::*;
    use crate::Driver;

    /// The most a test waits for what it expects.
    const LIMIT: Duration = Duration::from_secs(5);
    const TOKEN: Token = Token(7);

    fn setup(buffers: u16, size: usize, own_thread: bool) -> Setup {
        Setup {
            driver: Driver::IoUring,
            own_thread,
            events_capacity: 64,
            ring_entries: 64,
            ring_buffers: buffers,
            ring_buffer_size: size,
        }
    }

    /// A ring as a poller on a thread of its own makes it (this test's thread), or a
    /// plain one.
    fn ring(buffers: u16, size: usize, own_thread: bool) -> Ring {
        let ring = Ring::new(&setup(buffers, size, own_thread)).expect("io_uring works here");
        if own_thread {
            ring.enable().expect("the ring starts");
        }
        ring
    }

    /// A connected loopback pair: (ours, for the ring; the peer's).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(LIMIT)).unwrap();
        (ours, peer)
    }

    /// A loopback pair and a ring of eight 4 KiB buffers: the sockets first, so that
    /// the ring (dropped first) lets go of what names them before they close.
    fn rig(own_thread: bool) -> (TcpStream, TcpStream, Ring) {
        let (ours, peer) = pair();
        (ours, peer, ring(8, 4096, own_thread))
    }

    /// What a completion said, owned.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Data(Vec<u8>, bool),
        Eof,
        Ended,
        Failed(io::ErrorKind),
        /// Sent: the bytes left (the nodes, joined), or the error.
        Sent(Result<Vec<u8>, io::ErrorKind>),
        Listen(bool),
    }

    /// One turn: `ops` go in with a wait of at most `timeout`, then what completed.
    fn turn(ring: &mut Ring, ops: &mut Vec<Op>, timeout: Duration) -> Vec<(Token, Seen)> {
        ring.end_turn(ops).unwrap();
        ring.wait(Some(timeout)).unwrap();
        let mut seen = Vec::new();
        ring.dispatch(|token, event| {
            let s = match event {
                Event::Recv(Received::Data(data, more)) => Seen::Data(data.to_vec(), more),
                Event::Recv(Received::Eof) => Seen::Eof,
                Event::Recv(Received::Ended) => Seen::Ended,
                Event::Recv(Received::Failed(e)) => Seen::Failed(e.kind()),
                Event::Sent(rest) => Seen::Sent(rest.map(|r| r.concat()).map_err(|e| e.kind())),
                Event::Listen(more) => Seen::Listen(more),
                Event::Ready(r) => panic!("a ring reports no readiness: {r:?}"),
            };
            seen.push((token, s));
        });
        seen
    }

    /// Turns (with `ops` first) until `done` says what was seen is enough, at most
    /// [`LIMIT`]; returns all of it.
    fn until(
        ring: &mut Ring,
        ops: &mut Vec<Op>,
        mut done: impl FnMut(&[(Token, Seen)]) -> bool,
    ) -> Vec<(Token, Seen)> {
        let end = Instant::now() + LIMIT;
        let mut seen = Vec::new();
        while !done(&seen) {
            assert!(Instant::now() < end, "not seen within {LIMIT:?}: {seen:?}");
            seen.extend(turn(ring, ops, Duration::from_millis(50)));
        }
        seen
    }

    /// Turns for 100 ms: what completed meanwhile (a test expects nothing).
    fn quiet(ring: &mut Ring, ops: &mut Vec<Op>) -> Vec<(Token, Seen)> {
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.extend(turn(ring, ops, Duration::from_millis(25)));
        }
        seen
    }

    /// The bytes of every `Data` seen, in order.
    fn data(seen: &[(Token, Seen)]) -> Vec<u8> {
        seen.iter()
            .filter_map(|(_, s)| match s {
                Seen::Data(d, _) => Some(&d[..]),
                _ => None,
            })
            .collect::<Vec<_>>()
            .concat()
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    #[test]
    fn a_receive_delivers_the_peers_bytes_then_its_end() {
        let (ours, mut peer, mut ring) = rig(true);
        let mut ops = vec![Op::Recv {
            token: TOKEN,
            fd: ours.as_raw_fd(),
        }];
        peer.write_all(b"hello, ring").unwrap();
        let seen = until(&mut ring, &mut ops, |s| data(s).len() >= 11);
        assert_eq!(data(&seen), b"hello, ring");
        assert!(
            seen.iter()
                .all(|(t, s)| *t == TOKEN && matches!(s, Seen::Data(_, true))),
            "multishot: armed still after data: {seen:?}"
        );
        drop(peer);
        let seen = until(&mut ring, &mut ops, |s| !s.is_empty());
        assert_eq!(seen, [(TOKEN, Seen::Eof)]);
        drop(ring);
    }

    #[test]
    fn a_cancelled_receive_ends_and_takes_nothing_more_until_armed_again() {
        let (ours, mut peer, mut ring) = rig(false);
        let fd = ours.as_raw_fd();
        let mut ops = vec![Op::Recv { token: TOKEN, fd }];
        peer.write_all(b"a").unwrap();
        until(&mut ring, &mut ops, |s| data(s) == b"a");
        ops.push(Op::CancelRecv { token: TOKEN });
        let seen = until(&mut ring, &mut ops, |s| {
            s.iter().any(|(_, s)| *s == Seen::Ended)
        });
        assert_eq!(seen, [(TOKEN, Seen::Ended)]);
        peer.write_all(b"b").unwrap();
        assert_eq!(
            quiet(&mut ring, &mut ops),
            [],
            "a cancelled receive takes no data"
        );
        ops.push(Op::Recv { token: TOKEN, fd });
        let seen = until(&mut ring, &mut ops, |s| !data(s).is_empty());
        assert_eq!(data(&seen), b"b", "the data waited in the socket");
        drop(ring);
    }

    #[test]
    fn a_send_of_one_node_or_several_goes_whole_in_order() {
        let (ours, mut peer, mut ring) = rig(true);
        let fd = ours.as_raw_fd();
        for nodes in [
            vec![bytes(1000, 1)],
            vec![b"ab".to_vec(), bytes(3000, 2), b"c".to_vec()],
        ] {
            let whole = nodes.concat();
            let chunks = nodes.into_iter().map(Bytes::from).collect();
            let mut ops = vec![Op::Send {
                token: TOKEN,
                fd,
                chunks,
            }];
            let seen = until(&mut ring, &mut ops, |s| !s.is_empty());
            assert_eq!(
                seen,
                [(TOKEN, Seen::Sent(Ok(Vec::new())))],
                "all of it went"
            );
            let mut got = vec![0; whole.len()];
            peer.read_exact(&mut got).unwrap();
            assert_eq!(got, whole);
        }
        assert!(
            ring.sends.is_empty(),
            "the nodes went back with the completion"
        );
        assert_eq!(ring.free.len(), 1, "one send's bookkeeping, reused");
        drop(ring);
    }

    /// A send the kernel cannot finish (the peer does not read) ends when the socket
    /// is shut down, as a closing connection shuts it: the completion counts what went,
    /// and the nodes come back without it.
    #[test]
    fn a_send_cut_short_gives_back_exactly_the_rest() {
        let (ours, mut peer) = pair();
        setsockopt(&ours, sockopt::SndBuf, &4096).unwrap();
        setsockopt(&peer, sockopt::RcvBuf, &4096).unwrap();
        let mut ring = ring(8, 4096, true);
        let whole = [bytes(3 << 20, 3), bytes(1 << 20, 4)];
        let all = whole.concat();
        let chunks = whole.into_iter().map(Bytes::from).collect();
        let mut ops = vec![Op::Send {
            token: TOKEN,
            fd: ours.as_raw_fd(),
            chunks,
        }];
        assert_eq!(
            quiet(&mut ring, &mut ops),
            [],
            "MSG_WAITALL: no completion while the peer holds back"
        );
        ours.shutdown(std::net::Shutdown::Both).unwrap();
        let seen = until(&mut ring, &mut ops, |s| !s.is_empty());
        let [(TOKEN, Seen::Sent(Ok(rest)))] = &seen[..] else {
            panic!("a short send, not {seen:?}");
        };
        let sent = all.len() - rest.len();
        assert!(sent > 0 && !rest.is_empty(), "{sent} bytes sent");
        assert_eq!(
            rest[..],
            all[sent..],
            "the rest, from where the kernel stopped"
        );
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), sent, "the peer got what the completion counted");
        assert_eq!(got[..], all[..sent]);
        drop(ring);
    }

    /// Two buffers of 512 bytes carry 64 KiB: each goes back to the ring once its
    /// bytes are handed over, and a receive that ran dry is armed again.
    #[test]
    fn the_provided_buffers_are_given_back_and_serve_any_amount() {
        let (ours, mut peer) = pair();
        let mut ring = ring(2, 512, true);
        let fd = ours.as_raw_fd();
        let sent = bytes(64 << 10, 5);
        let writer = {
            let sent = sent.clone();
            std::thread::spawn(move || peer.write_all(&sent).map(|()| peer))
        };
        let mut ops = vec![Op::Recv { token: TOKEN, fd }];
        let mut got = Vec::new();
        let mut rearmed = 0;
        let end = Instant::now() + LIMIT;
        while got.len() < sent.len() {
            assert!(
                Instant::now() < end,
                "{} of {} bytes",
                got.len(),
                sent.len()
            );
            for (_, s) in turn(&mut ring, &mut ops, Duration::from_millis(50)) {
                match s {
                    Seen::Data(d, more) => {
                        assert!(d.len() <= 512);
                        got.extend_from_slice(&d);
                        if !more {
                            ops.push(Op::Recv { token: TOKEN, fd });
                        }
                    }
                    // The ring ran dry: arm again.
                    Seen::Ended => {
                        rearmed += 1;
                        ops.push(Op::Recv { token: TOKEN, fd });
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(got, sent);
        assert!(rearmed < 1000, "{rearmed} receives armed again");
        let _peer = writer.join().unwrap().unwrap();
        drop(ring);
    }

    #[test]
    fn another_threads_queue_wakes_the_wait_and_goes_in() {
        let (ours, mut peer, mut ring) = rig(false);
        let shared = Arc::clone(&ring.shared);
        let fd = ours.as_raw_fd();
        let asker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            shared.queue_with(|ops| ops.push(Op::Recv { token: TOKEN, fd }));
        });
        let start = Instant::now();
        ring.wait(Some(LIMIT)).unwrap();
        assert!(start.elapsed() < LIMIT, "woken by the eventfd");
        let mut none = Vec::new();
        let (any, _) = ring.dispatch(|t, e| none.push(format!("{t:?} {e:?}")));
        assert!(
            any && none.is_empty(),
            "the wake-up names no token: {none:?}"
        );
        asker.join().unwrap();
        peer.write_all(b"x").unwrap();
        let seen = until(&mut ring, &mut Vec::new(), |s| !data(s).is_empty());
        assert_eq!(data(&seen), b"x", "the queued receive went in");
        drop(ring);
    }

    /// A wake-up that comes after the last one was handled, but before the poller
    /// waits again (while it looks at its stop flag and deadlines, which is what a
    /// waker may have just changed), ends that next wait. When the pending flag was
    /// cleared only as the queue was next taken, this wake-up was skipped and the wait
    /// ran to its timeout; with none, for ever (a reactor's shutdown hung on it).
    #[test]
    fn a_wake_after_the_last_was_handled_ends_the_next_wait() {
        let (_ours, _peer, mut ring) = rig(false);
        let shared = Arc::clone(&ring.shared);
        shared.wake();
        ring.wait(Some(LIMIT)).unwrap();
        let (any, _) = ring.dispatch(|t, e| panic!("{t:?} {e:?}"));
        assert!(any, "the first wake-up came");
        // Between the turns: the poller is not waiting and has taken nothing.
        shared.wake();
        ring.wait(Some(LIMIT)).unwrap();
        let (any, _) = ring.dispatch(|t, e| panic!("{t:?} {e:?}"));
        assert!(
            any,
            "the second wake-up was skipped: the wait ran to its timeout"
        );
        drop(ring);
    }

    /// A closed socket's owner (here a flag) is dropped once the cancels of what names
    /// it went in; and a listener's watch reports connections.
    #[test]
    fn a_closed_sockets_owner_goes_after_its_cancels_and_a_watch_sees_connections() {
        struct Owner {
            _socket: TcpStream,
            dropped: Arc<AtomicBool>,
        }
        impl Drop for Owner {
            fn drop(&mut self) {
                self.dropped.store(true, Ordering::SeqCst);
            }
        }
        let (ours, _peer) = pair();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut ring = ring(8, 4096, true);
        let dropped = Arc::new(AtomicBool::new(false));
        let watch = Token(9);
        let mut ops = vec![
            Op::Recv {
                token: TOKEN,
                fd: ours.as_raw_fd(),
            },
            Op::Listen {
                token: watch,
                fd: listener.as_raw_fd(),
            },
        ];
        let _ = turn(&mut ring, &mut ops, Duration::ZERO);
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let seen = until(&mut ring, &mut ops, |s| !s.is_empty());
        assert_eq!(seen, [(watch, Seen::Listen(true))]);
        ops.push(Op::Close {
            token: TOKEN,
            owner: Box::new(Owner {
                _socket: ours,
                dropped: Arc::clone(&dropped),
            }),
        });
        let seen = until(&mut ring, &mut ops, |_| dropped.load(Ordering::SeqCst));
        assert!(
            seen.iter().all(|(_, s)| *s == Seen::Ended),
            "the receive was cancelled: {seen:?}"
        );
        drop(ring);
    }

    #[test]
    fn a_ring_the_kernel_refuses_is_an_error_of_its_own() {
        let mut bad = setup(8, 4096, false);
        bad.ring_entries = 0;
        let e = Ring::new(&bad).expect_err("a ring of no entries");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let mut huge = setup(4, usize::MAX / 2, false);
        huge.ring_entries = 16;
        let e = Ring::new(&huge).expect_err("buffers past the address space");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn a_short_send_keeps_the_nodes_after_what_went() {
        let mut flight = InFlight::empty();
        let nodes = || vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
        for (sent, rest) in [
            (0, "abcdefg"),
            (2, "cdefg"),
            (3, "defg"),
            (5, "fg"),
            (7, ""),
        ] {
            flight.load(nodes());
            assert_eq!(flight.iov.len(), 2);
            assert_eq!(flight.msg.msg_iovlen, 2);
            assert_eq!(flight.rest(sent).concat(), rest.as_bytes(), "{sent} sent");
            assert!(flight.chunks.is_empty() && flight.iov.is_empty());
        }
        flight.load(nodes());
        assert!(
            flight.rest(usize::MAX).is_empty(),
            "a failed send keeps nothing"
        );
    }
}
