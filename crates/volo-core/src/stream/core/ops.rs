//! What the application does with a stream: send, take messages, close its
//! direction, reset it, let it go.

use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use thrift_wire::{LinkBuffer, Utf8Bytes};

use super::state::StreamState;
use super::timers::Due;
use super::{Event, StreamCore, disarm, gone, write, write_rst};
use crate::stream::error::{HandlerError, Metadata, StreamError};
use crate::stream::flow::{self, CREDIT_KEY};
use crate::stream::frame::{self, Frame, FrameKind, exception_payload};

impl StreamCore {
    /// Sends one message of `size` bytes on stream `id`, which `encode` writes into
    /// `out` after the frame's head (and this side's header, if it is still due).
    /// `Pending` while the peer's credit is spent: [`Event::Writable`] says when to
    /// try again. A client whose initial credit is spent before the server said
    /// whether it counts waits [`StreamConfig::decision_wait`](crate::stream::StreamConfig::decision_wait) from `now` at most.
    pub fn send(
        &mut self,
        out: &mut LinkBuffer,
        id: i32,
        size: usize,
        encode: impl FnOnce(&mut LinkBuffer),
        now: Instant,
    ) -> Poll<Result<(), StreamError>> {
        let Some(st) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(gone(self.closed.as_ref())));
        };
        if let Some(e) = st.send_error() {
            return Poll::Ready(Err(e));
        }
        if !st.send.can_send() {
            if !st.send_decided && st.decision_at.is_none() {
                // A Kitex server says nothing until its first message or its end,
                // which may wait for this side's messages: wait for it a while.
                let at = now + self.config.decision_wait;
                st.decision_at = Some(at);
                self.timers.insert(at, id, Due::Decision);
            }
            return Poll::Pending;
        }
        let header = header_due(st, id);
        if let Some(h) = &header {
            write(out, h)?;
        }
        let head = frame::write_head(FrameKind::Data, id, Some(&st.method), &[], size, out);
        head.map_err(|e| StreamError::Encode(e.to_string()))?;
        encode(out);
        let cost = size as u64 + flow::MESSAGE_COST;
        st.send.spend(cost);
        if !st.send_decided {
            st.spent_before += cost;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes stream `id`'s next message (`Ok(None)` once the peer ended its
    /// direction cleanly), writing a credit grant to `out` when one is due.
    /// `Pending` while nothing is queued: [`Event::Message`] or
    /// [`Event::Readable`] says when to try again.
    pub fn recv(
        &mut self,
        out: &mut LinkBuffer,
        id: i32,
    ) -> Poll<Result<Option<Bytes>, StreamError>> {
        let Some(st) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(gone(self.closed.as_ref())));
        };
        let Some((message, grant)) = st.inbox.pop() else {
            if let Some(e) = &st.reset {
                return Poll::Ready(Err(e.clone()));
            }
            return match &st.peer_end {
                Some(end) => Poll::Ready(end.clone().map(|_| None)),
                None => Poll::Pending,
            };
        };
        if let Some(n) = grant
            && st.routed
            && st.reset.is_none()
        {
            let mut frame = Frame::new(FrameKind::Meta, id).with_method(st.method.clone());
            frame.meta.push((
                Utf8Bytes::from_static(CREDIT_KEY),
                Utf8Bytes::from(n.to_string()),
            ));
            if let Err(e) = write(out, &frame) {
                tracing::debug!(stream = id, error = %e, "a credit grant could not be written");
            }
        }
        self.check_room();
        Poll::Ready(Ok(Some(message)))
    }

    /// Stream `id`'s peer header; `Pending` until it came (or the stream ended).
    pub fn peer_header(&self, id: i32) -> Poll<Result<Metadata, StreamError>> {
        let Some(st) = self.streams.get(&id) else {
            return Poll::Ready(Err(gone(self.closed.as_ref())));
        };
        if let Some(h) = &st.peer_header {
            return Poll::Ready(Ok(h.clone()));
        }
        if let Some(e) = &st.reset {
            return Poll::Ready(Err(e.clone()));
        }
        match &st.peer_end {
            // A peer that ended without a header sent none.
            Some(end) => Poll::Ready(end.clone().map(|_| Metadata::new())),
            None => Poll::Pending,
        }
    }

    /// Stream `id`'s peer trailer, once its direction ended cleanly.
    pub fn peer_trailer(&self, id: i32) -> Option<Metadata> {
        match &self.streams.get(&id)?.peer_end {
            Some(Ok(m)) => Some(m.clone()),
            _ => None,
        }
    }

    /// Sets what this side's header carries (it goes with the first message or the
    /// trailer).
    pub fn set_header(&mut self, id: i32, header: Metadata) {
        if let Some(st) = self.streams.get_mut(&id) {
            st.header_out = header;
        }
    }

    /// Sets what this side's trailer carries.
    pub fn set_trailer(&mut self, id: i32, trailer: Metadata) {
        if let Some(st) = self.streams.get_mut(&id) {
            st.trailer_out = trailer;
        }
    }

    /// Why stream `id` was reset, if it was.
    pub fn reset_reason(&self, id: i32) -> Option<StreamError> {
        match self.streams.get(&id) {
            Some(st) => st.reset.clone(),
            None => Some(gone(self.closed.as_ref())),
        }
    }

    /// Whether stream `id` is over (both directions ended, or reset); a stream the
    /// core does not keep is.
    pub fn is_over(&self, id: i32) -> bool {
        self.streams.get(&id).is_none_or(StreamState::is_over)
    }

    /// The cost of the messages queued for stream `id`.
    pub fn queued(&self, id: i32) -> u64 {
        self.streams.get(&id).map_or(0, |st| st.inbox.queued())
    }

    /// Ends this side's direction of stream `id`: writes its header if it is still
    /// due, and a trailer carrying `error`, if any. Nothing is written on a stream
    /// that is reset, except, with `after_rst`, one the peer reset (a server's
    /// handler that returns after its client's rst answers it, as Kitex's does).
    pub fn close_send(
        &mut self,
        out: &mut LinkBuffer,
        id: i32,
        error: Option<&HandlerError>,
        after_rst: bool,
    ) -> Result<(), StreamError> {
        let Some(st) = self.streams.get_mut(&id) else {
            return Err(gone(self.closed.as_ref()));
        };
        if let Some(e) = &st.reset
            && !(after_rst && st.reset_by_peer)
        {
            return Err(e.clone());
        }
        if st.sent_trailer {
            return Ok(());
        }
        st.sent_trailer = true;
        let header = header_due(st, id);
        let mut trailer = Frame::new(FrameKind::Trailer, id).with_method(st.method.clone());
        trailer.meta = std::mem::take(&mut st.trailer_out).pairs().to_vec();
        // A stream the server refused (its stack's limit, a closing server) names the
        // refusal in its trailer: its outcome is `refused`.
        st.refused = trailer.meta_value(crate::refusal::HEADER_KEY).is_some();
        st.sent_error = error.map(|e| match e {
            HandlerError::Exception(_) => "application_error",
            HandlerError::Biz(_) => "biz_error",
        });
        match error {
            Some(HandlerError::Exception(e)) => {
                if let Ok(payload) = exception_payload(e, &st.method, id) {
                    trailer.payload = payload;
                }
            }
            Some(HandlerError::Biz(status)) => status.put(&mut trailer),
            None => {}
        }
        if st.is_over() {
            self.forget(id);
        }
        if let Some(h) = &header {
            write(out, h)?;
        }
        write(out, &trailer)
    }

    /// Ends stream `id` here with `error`, and tells the peer with an rst (in
    /// `out`) unless the stream was over already.
    pub fn reset(&mut self, out: &mut LinkBuffer, id: i32, error: StreamError) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if !st.is_over() {
            if st.routed && self.closed.is_none() {
                write_rst(out, id, &st.method, &error);
            }
            st.reset = Some(error);
        }
        self.forget(id);
        self.wake(id);
    }

    /// Takes stream `id` out of the connection's table, without telling the peer:
    /// what it still sends on the stream is dropped.
    pub fn forget(&mut self, id: i32) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        if st.is_over() {
            disarm(&mut self.timers, st, id);
        }
        if st.routed {
            st.routed = false;
            self.routed -= 1;
            let outcome = st.outcome();
            self.events.push_back(Event::Ended { id, outcome });
            if self.routed == 0 && self.orphaned {
                self.events.push_back(Event::Idle);
            }
        }
        self.check_room();
    }

    /// The application let stream `id` go: it leaves the table (without telling
    /// the peer) and the core forgets it.
    pub fn release(&mut self, id: i32) {
        self.forget(id);
        if let Some(mut st) = self.streams.remove(&id) {
            disarm(&mut self.timers, &mut st, id);
        }
        self.check_room();
    }
}

/// This side's header frame, if it is still to be sent (it is marked sent).
fn header_due(st: &mut StreamState, id: i32) -> Option<Frame> {
    if st.header_sent {
        return None;
    }
    st.header_sent = true;
    let mut frame = Frame::new(FrameKind::Header, id).with_method(st.method.clone());
    frame.meta = std::mem::take(&mut st.header_out).pairs().to_vec();
    Some(frame)
}
