//! The instants at which the core must act: a client stream's deadline, and the end
//! of a client's wait for the server's window. One ordered set for the connection,
//! from which a stream's entries are taken out when they stop mattering, so that it
//! holds at most two entries per stream the core keeps.

use std::collections::BTreeSet;
use std::time::Instant;

use thrift_wire::{LinkBuffer, Utf8Bytes};

use super::{Event, PeerCounts, StreamCore, write};
use crate::stream::error::StreamError;
use crate::stream::flow::{SendWindow, UNCOUNTED_KEY};
use crate::stream::frame::{Frame, FrameKind};

/// What falls due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    /// The stream's deadline passed: reset it.
    Deadline,
    /// The server did not say in time whether it counts: stop counting.
    Decision,
}

/// The timers of one connection's streams.
#[derive(Debug, Default)]
pub(super) struct Timers {
    set: BTreeSet<(Instant, i32, Due)>,
}

impl Timers {
    pub(super) fn insert(&mut self, at: Instant, id: i32, due: Due) {
        self.set.insert((at, id, due));
    }

    pub(super) fn remove(&mut self, at: Instant, id: i32, due: Due) {
        self.set.remove(&(at, id, due));
    }

    /// The earliest instant set.
    pub(super) fn next(&self) -> Option<Instant> {
        self.set.first().map(|&(at, _, _)| at)
    }

    /// Takes the earliest entry due at `now`, if any.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(Instant, i32, Due)> {
        if self.set.first().is_some_and(|&(at, _, _)| at <= now) {
            return self.set.pop_first();
        }
        None
    }

    pub(super) fn clear(&mut self) {
        self.set.clear();
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.len()
    }
}

impl StreamCore {
    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has
    /// something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Acts on what fell due by `now`: resets the streams whose deadline passed (an
    /// rst with Kitex's deadline code), and stops counting the sends of streams
    /// whose server did not say in time whether it counts (a meta frame telling it).
    pub fn handle_timeout(&mut self, out: &mut LinkBuffer, now: Instant) {
        while let Some((at, id, due)) = self.timers.pop_due(now) {
            let Some(st) = self.streams.get_mut(&id) else {
                continue;
            };
            match due {
                Due::Deadline if st.deadline == Some(at) => {
                    st.deadline = None;
                    if !st.is_over() {
                        tracing::debug!(stream = id, "a stream's deadline passed; reset");
                        self.reset(out, id, StreamError::DeadlineExceeded);
                    }
                }
                Due::Decision if st.decision_at == Some(at) => {
                    st.decision_at = None;
                    if !st.send_decided {
                        self.opt_out(out, id);
                    }
                }
                _ => {}
            }
        }
    }

    /// Stops counting stream `id`'s sends, and tells the server so (a meta frame
    /// with [`UNCOUNTED_KEY`], which a Kitex server ignores); later streams of the
    /// connection do not ask.
    fn opt_out(&mut self, out: &mut LinkBuffer, id: i32) {
        let Some(st) = self.streams.get_mut(&id) else {
            return;
        };
        st.send_decided = true;
        st.send = SendWindow::unlimited();
        self.peer_counts = PeerCounts::Uncounted;
        tracing::debug!(
            stream = id,
            "the server granted no window in time; sends are not counted"
        );
        if st.routed && st.reset.is_none() {
            let mut frame = Frame::new(FrameKind::Meta, id).with_method(st.method.clone());
            frame
                .meta
                .push((Utf8Bytes::from_static(UNCOUNTED_KEY), Utf8Bytes::new()));
            if let Err(e) = write(out, &frame) {
                tracing::debug!(stream = id, error = %e, "a meta frame could not be written");
            }
        }
        self.events.push_back(Event::Writable(id));
    }
}
