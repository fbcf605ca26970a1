//! What the core does with each frame that arrives: routing by stream id, a
//! server's new streams (accepted or refused), and each kind of frame on an open
//! stream.

use std::io;

use bytes::Bytes;
use thrift_wire::{ApplicationException, ApplicationExceptionKind, LinkBuffer, Utf8Bytes};

use super::state::StreamState;
use super::timers::Due;
use super::{Accepted, Event, PeerCounts, Side, StreamCore, protocol, write, write_rst};
use crate::stream::error::{Metadata, StreamError};
use crate::stream::flow::{self, CREDIT_KEY, Inbox, SendWindow, UNCOUNTED_KEY, WINDOW_KEY};
use crate::stream::frame::{
    BizStatus, Frame, FrameKind, exception_payload, read_exception, str_key,
};

impl StreamCore {
    /// Takes one whole frame as it arrived (its LENGTH field included). A frame
    /// that cannot be read fails the connection (every stream with it) and the
    /// error is returned: the driver closes the connection.
    pub fn handle_input(&mut self, out: &mut LinkBuffer, bytes: &Bytes) -> Result<(), StreamError> {
        match Frame::decode(bytes, &self.config.frame) {
            Ok(frame) => {
                self.handle_frame(out, frame);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "stream connection: a frame that cannot be read; closing");
                let error = StreamError::Connection {
                    kind: io::ErrorKind::InvalidData,
                    message: format!("a frame that cannot be read: {e}"),
                };
                self.connection_lost(error.clone());
                Err(error)
            }
        }
    }

    /// Routes one frame that arrived. Answers (a window, a refusal, an rst) are
    /// written to `out`.
    pub fn handle_frame(&mut self, out: &mut LinkBuffer, frame: Frame) {
        if self.closed.is_some() {
            return;
        }
        let id = frame.stream_id;
        let routed = self.streams.get(&id).is_some_and(|st| st.routed);
        if !routed {
            self.unrouted(out, frame);
            return;
        }
        match frame.kind {
            FrameKind::Header if self.side == Side::Server => {
                tracing::debug!(stream = id, "a second header for a stream; dropped");
            }
            FrameKind::Header => self.header_arrived(id, frame),
            FrameKind::Data => self.data_arrived(out, id, frame.payload),
            FrameKind::Trailer => self.trailer_arrived(id, frame),
            FrameKind::Rst => self.rst_arrived(id, frame.payload),
            FrameKind::Meta => {
                if self.side == Side::Client
                    && let Some(value) = frame.meta_value(WINDOW_KEY)
                {
                    self.window_arrived(out, id, value);
                }
                self.meta_arrived(out, id, &frame);
            }
        }
    }

    /// A frame for a stream that is not in the table.
    fn unrouted(&mut self, out: &mut LinkBuffer, frame: Frame) {
        let id = frame.stream_id;
        let kept = self.streams.contains_key(&id);
        if frame.kind == FrameKind::Header && self.side == Side::Server && !kept {
            self.highest = self.highest.max(id);
            self.accept(out, frame);
        } else if self.side == Side::Server
            && id > self.highest
            && frame.kind != FrameKind::Rst
            && !kept
        {
            // Never opened: the peer sent a stream's frames before its header.
            let error = StreamError::Protocol(format!(
                "a {:?} frame before the stream's header",
                frame.kind
            ));
            tracing::warn!(stream = id, error = %error, "stream connection: resetting a stream");
            write_rst(out, id, &frame.method.unwrap_or_default(), &error);
        } else {
            // Ended here already (reset, finished): what was in flight is dropped.
            tracing::debug!(
                stream = id,
                kind = ?frame.kind,
                "stream connection: a frame for a stream that is not open; dropped"
            );
        }
    }

    /// A server's new stream: refused (a bad window, the limit) or put in the table
    /// and told ([`Event::Opened`]).
    fn accept(&mut self, out: &mut LinkBuffer, frame: Frame) {
        let id = frame.stream_id;
        let method = frame.method.clone().unwrap_or_default();
        let window = match frame.meta_value(WINDOW_KEY).map(flow::parse_window) {
            None => None,
            Some(Some(Ok(w))) => Some(w),
            Some(_) => {
                let why = "its window is not a decimal number of at most 1 GiB";
                return self.refuse(out, id, &method, why);
            }
        };
        let (inbox, send) = match window {
            Some(w) => (Inbox::new(self.window(), true), SendWindow::new(w)),
            None => (
                Inbox::new(self.window(), false),
                Ok(SendWindow::unlimited()),
            ),
        };
        let (Ok(inbox), Ok(send)) = (inbox, send) else {
            return self.refuse(out, id, &method, "its window is above the limit");
        };
        if self.routed >= self.config.max_streams {
            tracing::warn!(
                stream = id,
                open = self.routed,
                "stream connection: a stream beyond the limit; refused"
            );
            let why = format!(
                "{} streams are open on the connection, its limit",
                self.routed
            );
            return self.refuse(out, id, &method, &why);
        }
        if window.is_some() {
            // A peer that counts learns this side's window at once, in a meta frame:
            // the header waits for the handler's metadata, as Kitex's does.
            let mut meta = Frame::new(FrameKind::Meta, id).with_method(method.clone());
            meta.meta.push((
                Utf8Bytes::from_static(WINDOW_KEY),
                Utf8Bytes::from(self.window().to_string()),
            ));
            if let Err(e) = write(out, &meta) {
                tracing::debug!(stream = id, error = %e, "a window could not be written");
            }
        }
        self.streams
            .insert(id, StreamState::new(method.clone(), inbox, send, true));
        self.routed += 1;
        let service = frame
            .meta_value(str_key::SERVICE)
            .map(|s| Utf8Bytes::from(s.to_owned()));
        self.events.push_back(Event::Opened(Accepted {
            id,
            method,
            service,
            header: Metadata::from_frame(frame.meta),
        }));
    }

    /// Ends a stream the server will not serve: a trailer with an exception, as a
    /// handler's error travels, so that any client reads it.
    fn refuse(&mut self, out: &mut LinkBuffer, id: i32, method: &Utf8Bytes, why: &str) {
        self.events.push_back(Event::Refused(id));
        let error = ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            format!("stream refused: {why}"),
        );
        let mut frame = Frame::new(FrameKind::Trailer, id).with_method(method.clone());
        if let Ok(p) = exception_payload(&error, method, id) {
            frame.payload = p;
        }
        if let Err(e) = write(out, &frame) {
            tracing::debug!(stream = id, error = %e, "a refusal could not be written");
        }
    }

    /// A client's stream gets the server's header. A server that has not granted a
    /// window by now (Kitex's) does not count: the client's sends are not limited,
    /// and its queue holds the reader when full.
    fn header_arrived(&mut self, id: i32, frame: Frame) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if st.peer_header.is_some() {
            return;
        }
        if !st.send_decided {
            st.send_decided = true;
            st.send = SendWindow::unlimited();
            if let Some(at) = st.decision_at.take() {
                self.timers.remove(at, id, Due::Decision);
            }
            self.peer_counts = PeerCounts::Uncounted;
        }
        if !st.peer_granted {
            // It counts nothing of this side's either (a server of this crate grants
            // its window before its header).
            st.inbox.uncount();
        }
        st.peer_header = Some(Metadata::from_frame(frame.meta));
        self.wake(id);
    }

    /// A client's stream gets the server's window (a meta frame, before any
    /// header): what it sent so far counts against it from now on.
    fn window_arrived(&mut self, out: &mut LinkBuffer, id: i32, value: &str) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        st.peer_granted = true;
        if st.send_decided {
            // This side stopped counting before the window came.
            return;
        }
        let send = match flow::parse_window(value) {
            Some(Ok(w)) => SendWindow::new(w).map_err(protocol),
            Some(Err(e)) => Err(protocol(e)),
            None => Err(StreamError::Protocol(format!("a window of {value:?}"))),
        };
        match send {
            Ok(mut send) => {
                send.spend(st.spent_before);
                st.send = send;
                st.send_decided = true;
                if let Some(at) = st.decision_at.take() {
                    self.timers.remove(at, id, Due::Decision);
                }
                self.peer_counts = PeerCounts::Counted;
                self.events.push_back(Event::Writable(id));
            }
            Err(e) => self.reset(out, id, e),
        }
    }

    /// A message for a stream: queued, or the stream reset for a broken rule.
    fn data_arrived(&mut self, out: &mut LinkBuffer, id: i32, payload: Bytes) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        let len = payload.len();
        let pushed = if st.peer_end.is_some() {
            Err(StreamError::Protocol(
                "a message after the peer's trailer".into(),
            ))
        } else if st.reset.is_some() {
            return;
        } else {
            st.inbox.push(payload).map_err(protocol)
        };
        match pushed {
            Ok(()) => {
                if !st.inbox.has_room() {
                    // A peer that does not count filled the queue: the reader waits
                    // for the application to take a message.
                    self.held = Some(id);
                }
                self.events.push_back(Event::Message { id, len });
            }
            Err(e) => {
                tracing::warn!(stream = id, error = %e, "stream connection: resetting a stream");
                self.reset(out, id, e);
            }
        }
    }

    /// The peer ended its direction.
    fn trailer_arrived(&mut self, id: i32, frame: Frame) {
        let refusal = frame.meta_value(crate::refusal::HEADER_KEY);
        let refused = self.side == Side::Client && refusal.is_some();
        if refused && refusal == Some(crate::refusal::Refusal::Closing.as_str()) {
            // The server is shutting down: its connection takes no new stream.
            self.closing = true;
        }
        let end = match (BizStatus::of(&frame), frame.payload.is_empty()) {
            (Some(status), _) => Err(StreamError::Biz(status)),
            (None, true) => Ok(Metadata::from_frame(frame.meta)),
            (None, false) => Err(match read_exception(frame.payload) {
                Ok(e) => StreamError::from_trailer(e),
                Err(e) => StreamError::Protocol(format!("a trailer's payload: {e}")),
            }),
        };
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if st.peer_end.is_none() {
            st.refused = end.is_err() && refused;
            st.peer_end = Some(end);
        }
        if st.is_over() {
            self.forget(id);
        }
        self.wake(id);
    }

    /// The peer reset the stream.
    fn rst_arrived(&mut self, id: i32, payload: Bytes) {
        let error = if payload.is_empty() {
            StreamError::Cancelled("the peer reset the stream".into())
        } else {
            match read_exception(payload) {
                Ok(e) => StreamError::from_rst(e),
                Err(e) => StreamError::Protocol(format!("an rst's payload: {e}")),
            }
        };
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if st.reset.is_none() {
            st.reset = Some(error);
            st.reset_by_peer = true;
        }
        self.forget(id);
        self.wake(id);
    }

    /// A meta frame: credit granted, or (at a server) the client stopped counting.
    fn meta_arrived(&mut self, out: &mut LinkBuffer, id: i32, frame: &Frame) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if frame.meta_value(UNCOUNTED_KEY).is_some() && self.side == Side::Server {
            // The client did not get this side's window in time: its messages are
            // held by the reader from now on.
            st.inbox.uncount();
        }
        if let Some(value) = frame.meta_value(CREDIT_KEY) {
            let granted = match flow::parse_window(value) {
                Some(Ok(n)) => st.send.grant(n).map_err(protocol),
                _ => Err(StreamError::Protocol(format!("a credit of {value:?}"))),
            };
            match granted {
                Ok(()) => self.events.push_back(Event::Writable(id)),
                Err(e) => self.reset(out, id, e),
            }
        }
    }
}
