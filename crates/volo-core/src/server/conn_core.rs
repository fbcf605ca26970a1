//! The rules of one server connection, without I/O ([`ConnCore`]).
//!
//! In the manner of quinn-proto, the core owns no socket, spawns nothing and reads no
//! clock: a driver gives it the connection's input and output buffers and the time,
//! and it says what to do. Every rule of a connection lives here once:
//!
//! - **framing**: detected from the first bytes (a connection that speaks no protocol
//!   is logged and closed), then frames cut one after another;
//! - **the call cap**: up to [`ServerCapacity::max_inflight_per_connection`] calls at
//!   once on TTHeader (answered as they finish, matched by sequence id), one at a time
//!   on THeader, Framed and Buffered (so answered in request order);
//! - **the input budget** ([`ServerCapacity::max_buffered_input`], across connections):
//!   a frame holds its share from the moment its length is known until its call is
//!   done;
//! - **timeouts**: a frame that has begun must arrive whole within
//!   [`ServerTimeouts::read`]; a connection with no call in progress and nothing
//!   arriving is closed after [`ServerTimeouts::idle`]. The core says when it
//!   next needs the time ([`ConnCore::poll_timeout`]) and the driver calls
//!   [`ConnCore::handle_timeout`] then;
//! - **the graceful drain**: after [`ConnCore::shutdown`], the calls in hand are run
//!   and answered; every frame taken after it is answered at once, unrun, with the
//!   closing refusal ([`CLOSING_PREFIX`](crate::refusal::CLOSING_PREFIX)), except oneway calls,
//!   which run (their caller cannot be told). TTHeader replies carry `crrst`, Kitex's
//!   mark that the connection is closing, so clients send nothing more on it; a
//!   connection that has carried calls at once (a mux connection) gets Kitex's control
//!   frame (sequence id 0, `crrst`) once no call is in hand: not before, since Kitex's
//!   mux client (v0.16) fails the calls it has in flight when the frame
//!   comes, and ignores `crrst` in replies. Once no call is in hand, the connection
//!   lingers for [`DRAIN_LINGER`], still refusing what comes (a request that crossed
//!   the news on the way), then closes.
//!
//! A driver runs the calls the core starts (they are futures that own what they need)
//! and hands each back to [`ConnCore::finish`] when it is done. There are two: a tokio
//! task per connection (`conn.rs`, any transport) and handlers on netpoll-rs's poller
//! (`inline.rs`). The harness in `harness.rs` drives the core with bytes and a fake
//! clock, and most server tests run on it.
//!
//! [`ServerCapacity::max_inflight_per_connection`]: super::ServerCapacity::max_inflight_per_connection
//! [`ServerCapacity::max_buffered_input`]: super::ServerCapacity::max_buffered_input
//! [`ServerTimeouts::read`]: super::ServerTimeouts::read
//! [`ServerTimeouts::idle`]: super::ServerTimeouts::idle

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use thrift_wire::LinkBuffer;

use super::Dispatch;
use super::call::{Arrival, Done, MakeCall, answer, start_call};
use super::state::{Held, ServerState};
use crate::codec::ttheader::Header;
use crate::codec::{DETECT_LEN, FrameError, FrameSplitter, Framing, Protocol, detect};
use crate::context::Address;

/// The framing of a connection, detected from its first bytes, and the input budget
/// taken by the frame being read: all of it once its length is known, and before that
/// what has arrived of it.
#[derive(Default)]
struct FrameReader {
    splitter: Option<FrameSplitter>,
    reserved: Option<Held>,
}

impl FrameReader {
    /// The length of the frame at the front of `input` once it can tell (detecting the
    /// framing first); takes the frame's share of the input budget as soon as the
    /// length is known (and, while it is not, as much as has arrived), and fails with
    /// [`FrameError::OverBudget`] when it is not there. First bytes that match no
    /// protocol, and frames that cannot be cut (a length or a Buffered message over
    /// the limit, a malformed Buffered message), are logged with `peer` before the
    /// error closes the connection.
    fn frame_len<D>(
        &mut self,
        input: &mut LinkBuffer,
        shared: &ServerState<D>,
        peer: Option<&Address>,
    ) -> io::Result<Option<usize>> {
        let s = match &mut self.splitter {
            Some(s) => s,
            None => {
                let n = input.len().min(DETECT_LEN);
                let Some(head) = input.peek(n) else {
                    return Ok(None);
                };
                match detect(head) {
                    Ok(Some((framing, protocol))) => self.splitter.insert(FrameSplitter::new(
                        framing,
                        protocol,
                        shared.config.wire.frame,
                    )),
                    Ok(None) => return Ok(None),
                    Err(e) => {
                        unrecognised(peer, head, &e);
                        return Err(e.into());
                    }
                }
            }
        };
        let len = s.frame_len(input).inspect_err(|e| {
            let peer = peer_name(peer);
            let (framing, protocol) = s.kind();
            tracing::warn!(%peer, ?framing, ?protocol, error = %e, "closing a connection: a frame cannot be read");
        })?;
        // The whole frame once its length is known; before that (a Buffered message is
        // measured by parsing all of it) what has arrived of it, as it grows.
        self.reserve(len.unwrap_or(input.len()), shared)?;
        Ok(len)
    }

    /// Makes the budget held for the frame being read cover `bytes`.
    fn reserve<D>(&mut self, bytes: usize, shared: &ServerState<D>) -> Result<(), FrameError> {
        let units = bytes.div_ceil(1024);
        let held = self.reserved.as_ref().map_or(0, |h| h.units);
        let more = units.saturating_sub(held);
        if more == 0 {
            return Ok(());
        }
        let taken = shared
            .input_budget
            .try_take(more)
            .ok_or(FrameError::OverBudget(bytes))?;
        match &mut self.reserved {
            Some(held) => held.merge(taken),
            None => self.reserved = Some(taken),
        }
        Ok(())
    }

    /// The framing and protocol, once detected.
    fn kind(&self) -> Option<(Framing, Protocol)> {
        self.splitter.as_ref().map(FrameSplitter::kind)
    }
}

/// How log lines name the peer of a connection.
pub(crate) fn peer_name(peer: Option<&Address>) -> String {
    peer.map_or_else(|| "an unknown peer".to_string(), Address::to_string)
}

/// The log line of a connection closed because its first bytes match no protocol
/// (Binary, Compact, JSON, Framed, TTHeader, THeader): what was seen, as hex, and from
/// where.
#[cold]
fn unrecognised(peer: Option<&Address>, head: &[u8], error: &FrameError) {
    let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
    let peer = peer_name(peer);
    tracing::warn!(
        %peer,
        first_bytes = %hex,
        %error,
        "closing a connection whose first bytes match no protocol"
    );
}

/// The log line of a connection closed because the call of a frame could not start (a
/// malformed header, an unreadable message).
#[cold]
fn bad_frame(peer: Option<&Address>, framing: Framing, protocol: Protocol, error: &io::Error) {
    let peer = peer_name(peer);
    tracing::warn!(%peer, ?framing, ?protocol, %error, "closing a connection: bad {framing:?} frame");
}

/// What [`ConnCore::next_frame`] found at the front of the input.
#[derive(Debug)]
pub(crate) enum Next {
    /// A whole frame, taken from the input: start its call ([`ConnCore::start`]).
    Frame(Bytes),
    /// Part of a frame: keep reading until the input holds this many bytes, even past
    /// the transport's high-water mark (the frame's budget is held already).
    Need(usize),
    /// Nothing to take now: the input is empty, or the connection may not start
    /// another call yet.
    Wait,
}

/// Why [`ConnCore::handle_timeout`] closes a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// A frame that had begun did not arrive whole within the read timeout.
    Read,
    /// No call in progress and nothing arriving for the idle timeout.
    Idle,
    /// Shutting down: no call in progress for [`DRAIN_LINGER`].
    Drained,
}

/// How long a connection of a server that is shutting down stays open after its last
/// call was answered (or after the shutdown began, if it had none), refusing what
/// comes: requests the client sent before it saw the connection was closing get an
/// answer that says they did not run, rather than a reset that says nothing. 100 ms,
/// as long as Kitex waits before it closes idle connections, covers the round trip of
/// a data centre many times over.
pub(crate) const DRAIN_LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// One connection's rules, without I/O (see the [module docs](self)).
pub(crate) struct ConnCore<D> {
    shared: Arc<ServerState<D>>,
    reader: FrameReader,
    peer: Option<Address>,
    /// Calls started and not answered yet.
    in_progress: usize,
    /// The server is shutting down: refuse what comes, answer the calls in hand,
    /// linger, close.
    stopping: bool,
    /// Calls have been in progress at once here: the client is a mux client.
    mux: bool,
    /// The control frame went out (shutting down, mux, no call in hand).
    told: bool,
    /// Since when the front of the input has held part of a frame that the connection
    /// waits for (not whole frames held back by the call cap).
    partial_since: Option<Instant>,
    /// When a frame was last taken or a call last finished (or the connection began).
    last_active: Instant,
    /// A TTHeader a finished call gave back, for the next request to be decoded into:
    /// its lists keep their room, so steady traffic allocates none.
    spare_header: Option<Header>,
}

impl<D: Dispatch> ConnCore<D> {
    /// How long a server that serves streams too waits for a connection's first
    /// frame, which says its kind: the idle timeout, or the read timeout when it is
    /// longer or there is none (then a silent connection is closed after it, where a
    /// ping-pong one would be kept).
    pub(crate) fn first_frame_timeout(&self) -> std::time::Duration {
        let t = &self.shared.config.timeouts;
        t.idle.map_or(t.read, |idle| idle.max(t.read))
    }

    /// The core of a connection from `peer`, accepted at `now`.
    pub(crate) fn new(shared: Arc<ServerState<D>>, peer: Option<Address>, now: Instant) -> Self {
        ConnCore {
            shared,
            reader: FrameReader::default(),
            peer,
            in_progress: 0,
            stopping: false,
            mux: false,
            told: false,
            partial_since: None,
            last_active: now,
            spare_header: None,
        }
    }

    /// What the server's connections share.
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<ServerState<D>> {
        &self.shared
    }

    /// Calls this connection may have in progress: many on TTHeader (matched by
    /// sequence id), one on the others (answered in order).
    fn call_cap(&self) -> usize {
        match self.reader.kind() {
            Some((Framing::TTHeader, _)) => self
                .shared
                .config
                .capacity
                .max_inflight_per_connection
                .max(1),
            _ => 1,
        }
    }

    /// Whether the connection takes a frame now: it may start another call (after a
    /// shutdown too: the frame is refused, unrun, see the [module docs](self)).
    pub(crate) fn wants_frame(&self) -> bool {
        self.in_progress < self.call_cap()
    }

    /// The length of the frame at the front of `input`, when it can tell; the input
    /// arrived by `now`. `Err` when the connection must close (first bytes of no
    /// protocol, a frame that cannot be cut, a frame over the input budget), logged
    /// here. For a driver whose transport cuts the frames; the others use
    /// [`next_frame`](Self::next_frame).
    pub(crate) fn frame_len(
        &mut self,
        input: &mut LinkBuffer,
        now: Instant,
    ) -> io::Result<Option<usize>> {
        let len = self
            .reader
            .frame_len(input, &self.shared, self.peer.as_ref())?;
        let whole = len.is_some_and(|len| input.len() >= len);
        self.partial_since = if input.is_empty() || whole {
            None
        } else {
            Some(self.partial_since.unwrap_or(now))
        };
        Ok(len)
    }

    /// Takes the next whole frame from `input` if the connection wants one.
    pub(crate) fn next_frame(&mut self, input: &mut LinkBuffer, now: Instant) -> io::Result<Next> {
        if !self.wants_frame() {
            return Ok(Next::Wait);
        }
        Ok(match self.frame_len(input, now)? {
            // Length unknown yet (a Buffered message is measured by parsing it): one
            // byte more at least; the splitter fails a message that grows past the
            // frame limit.
            None if input.is_empty() => Next::Wait,
            None => Next::Need(input.len() + 1),
            Some(len) if input.len() < len => Next::Need(len),
            Some(len) => Next::Frame(input.next(len)),
        })
    }

    /// Starts the call of `frame`, the frame just cut (by [`next_frame`], or by the
    /// transport with [`frame_len`]), taken at `now`. Returns what makes the call to
    /// run: the driver calls it where the call is to stay (see
    /// [`start_call`](super::call::start_call) why), polls the call and hands its
    /// outcome to [`finish`](Self::finish). `Ok(None)`
    /// when the frame was answered already (an exception, written into `out`); `Err`
    /// when the connection must close (logged here).
    ///
    /// [`next_frame`]: Self::next_frame
    /// [`frame_len`]: Self::frame_len
    pub(crate) fn start(
        &mut self,
        out: &mut LinkBuffer,
        frame: Bytes,
        now: Instant,
    ) -> io::Result<Option<impl MakeCall<D::Reply> + use<D>>> {
        self.partial_since = None;
        self.last_active = now;
        let Some((framing, protocol)) = self.reader.kind() else {
            return Err(io::Error::other("a frame before the framing was known"));
        };
        let peer = self.peer.clone();
        let spare = &mut self.spare_header;
        let counted = self.shared.counters.as_ref().map(|c| {
            c.bytes.received.inc_by(frame.len() as u64);
            (c, out.len())
        });
        let arrival = Arrival {
            frame,
            now,
            closing: self.stopping,
            // The frame's budget is given back when its call is done.
            held: self.reader.reserved.take(),
        };
        let call = start_call(out, &self.shared, peer, (framing, protocol), arrival, spare)
            .inspect_err(|e| bad_frame(self.peer.as_ref(), framing, protocol, e))?;
        // An exception answered at once (a refusal, an unknown service...).
        if let Some((c, before)) = counted {
            c.bytes.sent.inc_by(out.len().saturating_sub(before) as u64);
        }
        if call.is_some() {
            self.mux |= self.in_progress > 0;
            self.in_progress += 1;
        }
        Ok(call)
    }

    /// Writes the reply of a call [`start`](Self::start) gave (nothing for a oneway
    /// one) into `out`; the call finished at `now`. `Err` when the connection must
    /// close.
    pub(crate) fn finish(
        &mut self,
        out: &mut LinkBuffer,
        done: Done<D::Reply>,
        now: Instant,
    ) -> io::Result<()> {
        self.in_progress = self.in_progress.saturating_sub(1);
        self.last_active = now;
        let header = answer(out, &self.shared, done, self.stopping)?;
        if self.spare_header.is_none() {
            self.spare_header = header;
        }
        self.tell_if_idle(out);
        Ok(())
    }

    /// The server is shutting down, from `now` on (see the [module docs](self)): the
    /// calls in hand are answered; what comes is refused; a mux connection is
    /// told by Kitex's control frame, written into `out` once no call is in hand; the
    /// connection closes [`DRAIN_LINGER`] after its last call, through
    /// [`handle_timeout`](Self::handle_timeout). Once is enough; later calls do
    /// nothing.
    pub(crate) fn shutdown(&mut self, out: &mut LinkBuffer, now: Instant) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.last_active = self.last_active.max(now);
        self.tell_if_idle(out);
    }

    /// Writes the control frame into `out` when it is due: shutting down, a
    /// mux TTHeader connection, no call in hand, not written yet.
    fn tell_if_idle(&mut self, out: &mut LinkBuffer) {
        if !self.stopping || !self.mux || self.told || self.in_progress > 0 {
            return;
        }
        if let Some((Framing::TTHeader, protocol)) = self.reader.kind() {
            super::call::closing_frame(out, protocol);
            self.told = true;
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next, if ever: the read
    /// timeout of a frame that has begun, or the idle timeout of a connection with no
    /// call in progress. It changes when input comes and calls start and finish.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let config = &self.shared.config;
        if let Some(since) = self.partial_since {
            return Some(since + config.timeouts.read);
        }
        if self.in_progress > 0 {
            return None;
        }
        if self.stopping {
            return Some(self.last_active + DRAIN_LINGER);
        }
        config.timeouts.idle.map(|limit| self.last_active + limit)
    }

    /// The time is `now`: `Err` when a timeout has passed and the connection must
    /// close. Early calls are harmless.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Result<(), Expired> {
        let Some(due) = self.poll_timeout() else {
            return Ok(());
        };
        if now < due {
            return Ok(());
        }
        let why = if self.partial_since.is_some() {
            Expired::Read
        } else if self.stopping {
            Expired::Drained
        } else {
            Expired::Idle
        };
        tracing::debug!(peer = %peer_name(self.peer.as_ref()), ?why, "closing a connection: timed out");
        Err(why)
    }
}
