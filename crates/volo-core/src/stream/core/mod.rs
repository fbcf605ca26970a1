//! The rules of one streaming connection, without I/O ([`StreamCore`]).
//!
//! In the manner of quinn-proto (and of the server's `conn_core`), the core owns no
//! socket, spawns nothing and reads no clock. Its driver hands it the frames that
//! arrive ([`handle_input`](StreamCore::handle_input)), the application's
//! operations on its streams (open, send, take a message, close, reset), and the
//! time; the core writes the frames to send into the output buffer it is given and
//! says what happened as [`Event`]s: a stream opened, a message queued, a stream
//! readable or writable again, a stream ended, the connection broken. When it needs
//! the time next it says so ([`poll_timeout`](StreamCore::poll_timeout)) and the
//! driver calls [`handle_timeout`](StreamCore::handle_timeout) then.
//!
//! Every rule of a streaming connection lives here once:
//!
//! - **routing**: a header opens a stream (at a server) or answers its opening (at
//!   a client); data goes to the stream's queue; a trailer ends the peer's direction;
//!   an rst ends the stream; a meta frame grants credit or says the peer's window
//!   ([`flow`]). A frame for a stream that is not open is dropped, one
//!   for a stream never opened gets an rst, and a frame that cannot be read fails
//!   the connection;
//! - **each stream's lifecycle**: header, messages and trailer each way, resets,
//!   what may be sent when, and its outcome;
//! - **flow control**: the credit a counting peer spends and is granted, and the
//!   bounded queue of a peer that does not count (Kitex), which holds the reader
//!   ([`wants_frame`](StreamCore::wants_frame)) while full;
//! - **limits**: streams per connection, windows;
//! - **time**: a client stream's deadline, and the wait for the server's window.
//!
//! The core keeps a stream's state from its opening until the application lets it
//! go ([`release`](StreamCore::release)), so that messages queued before the stream
//! ended can still be taken; the stream leaves the connection's table (frames are
//! no longer routed to it, it no longer counts against the limit) as soon as it is
//! over.

mod incoming;
mod ops;
mod state;
#[cfg(test)]
mod tests;
mod timers;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::time::Instant;

use thrift_wire::{LinkBuffer, Utf8Bytes};

use super::StreamConfig;
use super::error::{Metadata, StreamError};
use super::flow::{self, INITIAL_CREDIT, Inbox, SendWindow, WINDOW_KEY};
use super::frame::{Frame, FrameKind, exception_payload, str_key};
use state::StreamState;
use timers::{Due, Timers};

/// Which end of the connection a core is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// It opens streams.
    Client,
    /// Its peer opens streams.
    Server,
}

/// A stream the peer opened (at a server).
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The stream id.
    pub id: i32,
    /// The method its header named.
    pub method: Utf8Bytes,
    /// The service its header named (the `isn` key), if any.
    pub service: Option<Utf8Bytes>,
    /// The application's pairs of its header.
    pub header: Metadata,
}

/// What happened on the connection, for the driver to act on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// (Server) A client opened a stream. The driver hands it to the application,
    /// or resets and releases it.
    Opened(Accepted),
    /// (Server) A stream was refused before it opened (the limit, a bad window).
    Refused(i32),
    /// A message of `len` bytes was queued for stream `id`.
    Message {
        /// The stream.
        id: i32,
        /// The payload's length.
        len: usize,
    },
    /// Stream `id` has something new for its receiving half: the peer's header,
    /// its trailer, an error.
    Readable(i32),
    /// Stream `id` may send again: credit came, the window was decided, or the
    /// stream ended.
    Writable(i32),
    /// Stream `id` left the connection's table with `outcome` (as
    /// [`StreamError`]'s outcomes name it, `"ok"` for a clean end).
    Ended {
        /// The stream.
        id: i32,
        /// How it ended.
        outcome: &'static str,
    },
    /// The reader, held by a full queue, may read again.
    Room,
    /// The connection broke (failed, or the peer closed it) under open streams, one
    /// of which was opened here; not when this side closed it.
    Broken,
    /// The connection was let go ([`orphan`](StreamCore::orphan)) and its last
    /// stream ended: the driver closes it.
    Idle,
}

/// No stream has shown yet whether the server counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerCounts {
    Unknown,
    /// The server granted a window.
    Counted,
    /// The server sent a header with no window before it, or none in time.
    Uncounted,
}

/// The rules of one streaming connection, driven by frames, operations and the
/// time (see the [module](self) docs).
#[derive(Debug)]
pub struct StreamCore {
    side: Side,
    config: StreamConfig,
    /// Every stream the core keeps, in the table or not.
    streams: HashMap<i32, StreamState>,
    /// Streams in the table.
    routed: usize,
    /// The next id a client opens.
    next_id: i32,
    /// The highest id a client opened (at a server): a frame for a higher one came
    /// before its stream's header.
    highest: i32,
    peer_counts: PeerCounts,
    /// Why the connection ended, once it did.
    closed: Option<StreamError>,
    /// (Client) The server refused a stream as closing: new streams go elsewhere.
    closing: bool,
    /// A stream's header was written here: a break from then on is the
    /// connection's.
    established: bool,
    /// Its owner let it go: it ends with its last stream.
    orphaned: bool,
    /// The stream whose full queue holds the reader (a peer that does not count).
    held: Option<i32>,
    timers: Timers,
    events: VecDeque<Event>,
}

impl StreamCore {
    /// A core for `side` with `config`'s limits and window.
    pub fn new(side: Side, config: StreamConfig) -> Self {
        StreamCore {
            side,
            config,
            streams: HashMap::new(),
            routed: 0,
            next_id: 1,
            highest: 0,
            peer_counts: PeerCounts::Unknown,
            closed: None,
            closing: false,
            established: false,
            orphaned: false,
            held: None,
            timers: Timers::default(),
            events: VecDeque::new(),
        }
    }

    /// Which end it is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The settings.
    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Why the connection ended, once it did.
    pub fn closed(&self) -> Option<&StreamError> {
        self.closed.as_ref()
    }

    /// Whether streams can still be opened on it (a client's).
    pub fn is_open(&self) -> bool {
        self.closed.is_none() && !self.closing
    }

    /// Streams in the connection's table.
    pub fn open_streams(&self) -> usize {
        self.routed
    }

    /// Streams whose state the core keeps (in the table or held by the
    /// application).
    pub fn kept_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether the driver should read the next frame: not while a peer that does
    /// not count has filled a stream's queue (the only brake it leaves).
    pub fn wants_frame(&self) -> bool {
        self.closed.is_none() && self.held.is_none()
    }

    /// The window this side grants: the configured one, at least
    /// [`INITIAL_CREDIT`].
    pub fn window(&self) -> u64 {
        self.config.window.max(INITIAL_CREDIT)
    }

    /// Opens a stream (client): writes its header to `out` and returns its id. Its
    /// deadline, if any, resets it at `deadline`.
    pub fn open(
        &mut self,
        out: &mut LinkBuffer,
        method: Utf8Bytes,
        service: &str,
        header: &Metadata,
        deadline: Option<Instant>,
    ) -> Result<i32, StreamError> {
        if let Some(e) = &self.closed {
            return Err(e.clone());
        }
        if self.routed >= self.config.max_streams {
            return Err(StreamError::Refused(format!(
                "{} streams are open on the connection, its limit",
                self.routed
            )));
        }
        let id = self.next_free_id();
        // A server known not to count (a stream already told) is not asked.
        let counted = self.peer_counts != PeerCounts::Uncounted;
        let inbox = Inbox::new(self.window(), counted).map_err(protocol)?;
        let send = match counted {
            true => SendWindow::new(INITIAL_CREDIT).map_err(protocol)?,
            false => SendWindow::unlimited(),
        };
        let mut frame = Frame::new(FrameKind::Header, id).with_method(method.clone());
        frame.meta.push((
            Utf8Bytes::from_static(str_key::SERVICE),
            Utf8Bytes::from(service.to_owned()),
        ));
        frame.meta.extend(header.pairs().iter().cloned());
        if counted {
            frame.meta.push((
                Utf8Bytes::from_static(WINDOW_KEY),
                Utf8Bytes::from(self.window().to_string()),
            ));
        }
        write(out, &frame)?;
        let mut st = StreamState::new(method, inbox, send, !counted);
        st.header_sent = true;
        st.deadline = deadline;
        if let Some(at) = deadline {
            self.timers.insert(at, id, Due::Deadline);
        }
        self.streams.insert(id, st);
        self.routed += 1;
        self.established = true;
        Ok(id)
    }

    /// A positive id not in use; after ids wrap, those still kept are skipped.
    fn next_free_id(&mut self) -> i32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            if !self.streams.contains_key(&id) {
                return id;
            }
        }
    }

    /// Its owner let the connection go: it ends once no stream is in its table
    /// ([`Event::Idle`], at once if none is).
    pub fn orphan(&mut self) {
        self.orphaned = true;
        if self.routed == 0 {
            self.events.push_back(Event::Idle);
        }
    }

    /// The connection ended with `error`: every stream in the table fails with it
    /// (those reset already keep their error), and nothing more is read or written.
    /// [`Event::Broken`] follows when it broke under an opened stream.
    pub fn connection_lost(&mut self, error: StreamError) {
        if self.closed.is_some() {
            return;
        }
        let broken = self.routed > 0 && self.established && is_break(&error);
        self.closed = Some(error.clone());
        if broken {
            self.events.push_back(Event::Broken);
        }
        let open: Vec<i32> = (self.streams.iter())
            .filter(|(_, st)| st.routed)
            .map(|(&id, _)| id)
            .collect();
        for id in open {
            if let Some(st) = self.streams.get_mut(&id) {
                st.fail(error.clone());
            }
            self.forget(id);
            self.wake(id);
        }
        self.timers.clear();
        if self.held.take().is_some() {
            self.events.push_back(Event::Room);
        }
    }

    /// Wakes both halves of stream `id`.
    fn wake(&mut self, id: i32) {
        self.events.push_back(Event::Readable(id));
        self.events.push_back(Event::Writable(id));
    }

    /// Lets the reader go on once the queue that held it has room, or its stream is
    /// over or gone.
    fn check_room(&mut self) {
        let Some(id) = self.held else {
            return;
        };
        let free = self
            .streams
            .get(&id)
            .is_none_or(|st| !st.routed || st.is_over() || st.inbox.has_room());
        if free {
            self.held = None;
            self.events.push_back(Event::Room);
        }
    }
}

/// Takes a stream's timers out of the set.
fn disarm(timers: &mut Timers, st: &mut StreamState, id: i32) {
    if let Some(at) = st.deadline.take() {
        timers.remove(at, id, Due::Deadline);
    }
    if let Some(at) = st.decision_at.take() {
        timers.remove(at, id, Due::Decision);
    }
}

/// Writes `frame` into `out` (nothing when it cannot be encoded).
fn write(out: &mut LinkBuffer, frame: &Frame) -> Result<(), StreamError> {
    frame
        .encode(out)
        .map(drop)
        .map_err(|e| StreamError::Encode(e.to_string()))
}

/// Writes an rst for stream `id` carrying `error`.
fn write_rst(out: &mut LinkBuffer, id: i32, method: &Utf8Bytes, error: &StreamError) {
    let mut frame = Frame::new(FrameKind::Rst, id).with_method(method.clone());
    if let Ok(payload) = exception_payload(&error.to_rst(), method, id) {
        frame.payload = payload;
    }
    if let Err(e) = write(out, &frame) {
        tracing::debug!(stream = id, error = %e, "an rst could not be written");
    }
}

/// The error of an operation on a stream the core no longer keeps.
fn gone(closed: Option<&StreamError>) -> StreamError {
    closed
        .cloned()
        .unwrap_or_else(|| StreamError::Cancelled("the stream was released".into()))
}

/// Whether a connection that ended with `error` broke (failed, or the peer closed
/// it), rather than being closed here.
pub fn is_break(error: &StreamError) -> bool {
    !matches!(error, StreamError::Connection { kind, .. } if *kind == io::ErrorKind::ConnectionAborted)
}

fn protocol(e: flow::FlowError) -> StreamError {
    StreamError::Protocol(e.to_string())
}
