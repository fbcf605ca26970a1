//! One stream as the core keeps it: what each direction has done, its queue, its
//! credit and its timers.

use std::time::Instant;

use thrift_wire::Utf8Bytes;

use crate::stream::error::{Metadata, StreamError};
use crate::stream::flow::{Inbox, SendWindow};

/// The state of one stream.
#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) method: Utf8Bytes,
    /// In the connection's table: frames are routed to it and it counts against
    /// the stream limit. A stream leaves the table when it is over (or this side
    /// finished with it); its state stays until the application releases it.
    pub(super) routed: bool,
    pub(super) inbox: Inbox,
    /// The peer's header, once it came.
    pub(super) peer_header: Option<Metadata>,
    pub(super) send: SendWindow,
    /// Whether `send` is the answer for this stream: the server's window, or no
    /// limit (it takes no part). Until then a client spends [`INITIAL_CREDIT`].
    ///
    /// [`INITIAL_CREDIT`]: crate::stream::flow::INITIAL_CREDIT
    pub(super) send_decided: bool,
    /// The cost sent before the answer, counted against the window once it comes.
    pub(super) spent_before: u64,
    /// The peer granted a window (it counts this side's messages).
    pub(super) peer_granted: bool,
    pub(super) header_sent: bool,
    pub(super) header_out: Metadata,
    pub(super) trailer_out: Metadata,
    /// This side ended its direction (its trailer is written).
    pub(super) sent_trailer: bool,
    /// The outcome of the error this side's trailer carried, if any.
    pub(super) sent_error: Option<&'static str>,
    /// The peer ended its direction: its trailer's metadata, or its error.
    pub(super) peer_end: Option<Result<Metadata, StreamError>>,
    /// The server refused the stream (a trailer naming the refusal, sent or
    /// received): it was never served.
    pub(super) refused: bool,
    /// The stream is over (reset either way, connection failed, deadline).
    pub(super) reset: Option<StreamError>,
    /// The reset came in the peer's rst.
    pub(super) reset_by_peer: bool,
    /// When the stream is reset for its deadline (a client's).
    pub(super) deadline: Option<Instant>,
    /// When a client stops waiting for the server's window and stops counting.
    pub(super) decision_at: Option<Instant>,
}

impl StreamState {
    pub(super) fn new(method: Utf8Bytes, inbox: Inbox, send: SendWindow, decided: bool) -> Self {
        StreamState {
            method,
            routed: true,
            inbox,
            peer_header: None,
            send,
            send_decided: decided,
            spent_before: 0,
            peer_granted: false,
            header_sent: false,
            header_out: Metadata::new(),
            trailer_out: Metadata::new(),
            sent_trailer: false,
            sent_error: None,
            peer_end: None,
            refused: false,
            reset: None,
            reset_by_peer: false,
            deadline: None,
            decision_at: None,
        }
    }

    /// Why this side can send no more on the stream, if it cannot.
    pub(super) fn send_error(&self) -> Option<StreamError> {
        if let Some(e) = &self.reset {
            return Some(e.clone());
        }
        if self.sent_trailer {
            return Some(StreamError::SendClosed);
        }
        // A peer that ended with an error ended the stream; one that ended cleanly
        // still reads this side's messages (a client stream's answer comes last).
        match &self.peer_end {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Reset, ended by the peer with an error, or ended both ways.
    pub(super) fn is_over(&self) -> bool {
        self.reset.is_some()
            || matches!(self.peer_end, Some(Err(_)))
            || (self.sent_trailer && self.peer_end.is_some())
    }

    /// How the stream ended (or stands), as metrics and spans name it.
    pub(super) fn outcome(&self) -> &'static str {
        if let Some(e) = &self.reset {
            return e.outcome();
        }
        if self.refused {
            return "refused";
        }
        if let Some(failure) = self.sent_error {
            return failure;
        }
        match &self.peer_end {
            Some(Err(e)) => e.outcome(),
            _ => "ok",
        }
    }

    /// Ends the stream here with `error`, unless something ended it first.
    pub(super) fn fail(&mut self, error: StreamError) {
        if self.reset.is_none() {
            self.reset = Some(error);
        }
    }
}
