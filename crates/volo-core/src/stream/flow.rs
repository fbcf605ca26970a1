//! Flow control of one stream: the bounded queue a receiver keeps, and the credit a
//! sender spends, so that a fast sender into a slow receiver waits instead of growing
//! the receiver's memory, without stalling the other streams of its connection.
//!
//! Kitex's streaming has no flow control: each side queues whatever arrives, without
//! bound, and only TCP slows a sender down. This crate adds a credit window, carried
//! in frames Kitex already defines (a header frame's string pairs, which a Kitex peer
//! hands its application as one more header, and meta frames, which are only sent to
//! a peer that granted a window, so never to Kitex), and keeps Kitex's behaviour, with
//! a bound, for peers that do not take part:
//!
//! - A client's header frame may carry the string key [`WINDOW_KEY`], the credit in
//!   bytes it grants the server on that stream; a server grants its own in a meta
//!   frame with the same key (below). A side that grants none (Kitex) is not limited
//!   by this side, and does not limit it.
//! - A message costs its payload's length plus [`MESSAGE_COST`] bytes of credit, so
//!   that a window bounds the count of queued messages as well as their bytes.
//! - A sender with a window spends credit per message and waits while it has none
//!   left ([`SendWindow::can_send`]). A message may overdraw the credit (a message
//!   larger than the window would otherwise never go): the receiver's queue is
//!   therefore bounded by the window plus one message, and the frame limit bounds a
//!   message.
//! - The receiver grants credit back as its application takes messages: once the
//!   taken cost reaches half the window, it sends a meta frame for the stream with
//!   [`CREDIT_KEY`], the bytes granted ([`Inbox::pop`] says when and how much).
//! - From a peer that takes part, a message beyond the credit it was given is a
//!   protocol error ([`FlowError::WindowExceeded`]): the stream is reset, nothing else.
//! - A client sends its header and its first messages before it can know whether the
//!   server takes part. Until it knows, it may send [`INITIAL_CREDIT`] bytes of cost
//!   (and one message beyond), which every server of this crate grants: its window
//!   is never smaller. A server of this crate grants its window at once to a client
//!   that granted one, in a meta frame with [`WINDOW_KEY`] (its header waits for the
//!   handler's metadata, as Kitex's does), and counts that client's messages
//!   strictly from the first; the client then counts what it sent so far against
//!   that window. A server's header that comes with no window before it (Kitex's)
//!   tells the client that the server takes no part: its sends are no longer
//!   limited, and its queue holds the reader when full.
//! - A Kitex server sends its header only with its first message or when its
//!   handler returns, so a client stream to it could wait for a window for ever. A
//!   client whose initial credit is spent waits for the server's word at most
//!   [`StreamConfig::decision_wait`](super::StreamConfig::decision_wait) (100 ms by
//!   default), then stops counting: it tells the server so with a meta frame
//!   carrying [`UNCOUNTED_KEY`] (a Kitex server ignores meta frames; one of this
//!   crate then holds that stream's messages as an uncounted peer's) and sends on.
//!   The connection remembers the answer: its later streams do not ask a server that
//!   took no part. The server's own messages never need
//!   this: the client's header, with its window, is the first frame of a stream.
//! - From a peer that does not (Kitex), the queue holds at most the same window; when
//!   it is full ([`Inbox::has_room`] is false) the connection's reader stops reading
//!   until the application takes a message. That is the only brake Kitex's protocol
//!   leaves, and it holds back that connection's other streams too, as TCP does for
//!   Kitex itself; streams between two peers of this crate never come to it.

use std::collections::VecDeque;

use bytes::Bytes;

/// The string key of a header frame that grants a window, in bytes, as decimal digits.
pub const WINDOW_KEY: &str = "x-stream-window";

/// The string key of a meta frame that grants more credit, in bytes, as decimal
/// digits.
pub const CREDIT_KEY: &str = "x-stream-credit";

/// The string key of the meta frame a client sends when it stops counting its sends
/// on a stream (the server's window did not come in time); the value is empty.
pub const UNCOUNTED_KEY: &str = "x-stream-uncounted";

/// The credit a client may spend before it knows whether the server takes part:
/// 64 KiB. A window is never smaller.
pub const INITIAL_CREDIT: u64 = 64 * 1024;

/// The credit each message costs beyond its payload's bytes.
pub const MESSAGE_COST: u64 = 64;

/// The largest window or grant accepted: 1 GiB.
pub const MAX_WINDOW: u64 = 1 << 30;

/// The credit `payload` costs.
pub fn cost(payload: &Bytes) -> u64 {
    payload.len() as u64 + MESSAGE_COST
}

/// A flow-control rule broken by the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// The peer sent more than the credit it was given (and one message beyond).
    #[error("the peer sent {sent} bytes of credit beyond its window of {window}")]
    WindowExceeded {
        /// What its messages cost beyond the credit.
        sent: u64,
        /// The window granted.
        window: u64,
    },
    /// A window or a grant above [`MAX_WINDOW`], or a grant that would take the
    /// credit above it.
    #[error("a window or grant of {0} bytes is above the limit")]
    WindowTooLarge(u64),
}

/// Parses a window or grant (decimal digits, at most [`MAX_WINDOW`]).
pub fn parse_window(value: &str) -> Option<Result<u64, FlowError>> {
    let n: u64 = value.parse().ok()?;
    Some(if n > MAX_WINDOW {
        Err(FlowError::WindowTooLarge(n))
    } else {
        Ok(n)
    })
}

/// The send side of one stream: the credit the peer granted, if it takes part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWindow {
    /// `None`: the peer grants no window, and nothing limits this side.
    credit: Option<i64>,
}

impl SendWindow {
    /// A peer that takes no part in flow control (Kitex).
    pub fn unlimited() -> Self {
        SendWindow { credit: None }
    }

    /// A peer that granted `window` bytes.
    pub fn new(window: u64) -> Result<Self, FlowError> {
        if window > MAX_WINDOW {
            return Err(FlowError::WindowTooLarge(window));
        }
        Ok(SendWindow {
            credit: Some(window as i64),
        })
    }

    /// Whether a message may go now: always for an unlimited peer, else while some
    /// credit is left.
    pub fn can_send(&self) -> bool {
        self.credit.is_none_or(|c| c > 0)
    }

    /// The credit left (`None` for an unlimited peer); negative after an overdraw.
    pub fn credit(&self) -> Option<i64> {
        self.credit
    }

    /// Spends the credit of a message of `cost` bytes.
    pub fn spend(&mut self, cost: u64) {
        if let Some(c) = &mut self.credit {
            *c = c.saturating_sub(cost as i64);
        }
    }

    /// Adds a grant from the peer. Ignored for an unlimited peer (a grant it never
    /// promised is harmless).
    pub fn grant(&mut self, n: u64) -> Result<(), FlowError> {
        let Some(c) = &mut self.credit else {
            return Ok(());
        };
        let after = (*c).saturating_add(n as i64);
        if n > MAX_WINDOW || after > MAX_WINDOW as i64 {
            return Err(FlowError::WindowTooLarge(n));
        }
        *c = after;
        Ok(())
    }
}

/// The receive side of one stream: the queue of messages the application has not
/// taken yet, bounded by the window this side grants.
#[derive(Debug)]
pub struct Inbox {
    queue: VecDeque<Bytes>,
    /// The cost of the queued messages.
    queued: u64,
    /// The window granted to the peer.
    window: u64,
    /// Whether the peer takes part (it was told the window and spends credit).
    counted: bool,
    /// Credit the peer has left, as this side counts it (counted peers only).
    peer_credit: i64,
    /// The cost taken by the application since the last grant.
    taken: u64,
}

impl Inbox {
    /// A queue of at most `window` bytes of cost (plus one message from a counted
    /// peer); `counted` when the peer takes part in flow control.
    pub fn new(window: u64, counted: bool) -> Result<Self, FlowError> {
        if window > MAX_WINDOW {
            return Err(FlowError::WindowTooLarge(window));
        }
        Ok(Inbox {
            queue: VecDeque::new(),
            queued: 0,
            window,
            counted,
            peer_credit: window as i64,
            taken: 0,
        })
    }

    /// The peer turned out not to take part (its header granted no window): no
    /// grants, held by the reader at a window's worth.
    pub fn uncount(&mut self) {
        self.counted = false;
    }

    /// Whether a message from a peer that does not take part may be queued now: false
    /// once the queue holds a window's worth, when the connection's reader must wait.
    /// Always true for a counted peer, whose credit bounds it.
    pub fn has_room(&self) -> bool {
        self.counted || self.queued < self.window
    }

    /// Queues a message that arrived. From a counted peer, a message sent with no
    /// credit left is a [`FlowError::WindowExceeded`] (and is not queued).
    pub fn push(&mut self, message: Bytes) -> Result<(), FlowError> {
        let cost = cost(&message);
        if self.counted {
            if self.peer_credit <= 0 {
                return Err(FlowError::WindowExceeded {
                    sent: cost,
                    window: self.window,
                });
            }
            self.peer_credit = self.peer_credit.saturating_sub(cost as i64);
        }
        self.queued += cost;
        self.queue.push_back(message);
        Ok(())
    }

    /// Takes the oldest message, and the credit to grant the peer now, if any: once
    /// the cost taken since the last grant reaches half the window (counted peers).
    pub fn pop(&mut self) -> Option<(Bytes, Option<u64>)> {
        let message = self.queue.pop_front()?;
        let cost = cost(&message);
        self.queued -= cost;
        if !self.counted {
            return Some((message, None));
        }
        self.taken += cost;
        if self.taken * 2 < self.window.max(1) {
            return Some((message, None));
        }
        let grant = std::mem::take(&mut self.taken);
        self.peer_credit = self.peer_credit.saturating_add(grant as i64);
        Some((message, Some(grant)))
    }

    /// Messages queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The cost of what is queued.
    pub fn queued(&self) -> u64 {
        self.queued
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn message(len: usize) -> Bytes {
        Bytes::from(vec![7u8; len])
    }

    #[test]
    fn a_sender_waits_when_its_credit_is_spent_and_goes_on_when_granted() {
        let mut w = SendWindow::new(1000).expect("a window");
        assert!(w.can_send());
        w.spend(cost(&message(600)));
        assert!(w.can_send(), "336 bytes left");
        // Overdraws: one message may go beyond the credit.
        w.spend(cost(&message(600)));
        assert_eq!(w.credit(), Some(1000 - 2 * 664));
        assert!(!w.can_send());
        w.grant(664).expect("fits");
        assert!(w.can_send());
    }

    #[test]
    fn an_unlimited_peer_never_waits() {
        let mut w = SendWindow::unlimited();
        w.spend(u64::MAX);
        assert!(w.can_send());
        assert_eq!(w.grant(5), Ok(()));
        assert_eq!(w.credit(), None);
    }

    #[test]
    fn windows_and_grants_above_the_limit_are_refused() {
        assert_eq!(
            SendWindow::new(MAX_WINDOW + 1),
            Err(FlowError::WindowTooLarge(MAX_WINDOW + 1))
        );
        let mut w = SendWindow::new(MAX_WINDOW).expect("at the limit");
        assert_eq!(w.grant(1), Err(FlowError::WindowTooLarge(1)));
        assert!(Inbox::new(MAX_WINDOW + 1, true).is_err());
        assert_eq!(parse_window("1024"), Some(Ok(1024)));
        assert_eq!(parse_window("-1"), None);
        assert_eq!(parse_window("x"), None);
        assert_eq!(
            parse_window("2000000000"),
            Some(Err(FlowError::WindowTooLarge(2_000_000_000)))
        );
    }

    #[test]
    fn a_counted_peer_beyond_its_credit_is_an_error_and_nothing_is_queued() {
        let mut inbox = Inbox::new(1000, true).expect("a window");
        inbox.push(message(600)).expect("within");
        inbox.push(message(600)).expect("the one overdraw");
        assert_eq!(
            inbox.push(message(1)),
            Err(FlowError::WindowExceeded {
                sent: 65,
                window: 1000
            })
        );
        assert_eq!(inbox.len(), 2);
    }

    #[test]
    fn the_receiver_grants_credit_once_half_the_window_is_taken() {
        let mut inbox = Inbox::new(1000, true).expect("a window");
        for _ in 0..3 {
            inbox.push(message(200)).expect("within");
        }
        // 264 taken: below half.
        assert_eq!(inbox.pop().map(|(_, g)| g), Some(None));
        // 528 taken: half reached, all of it granted.
        assert_eq!(inbox.pop().map(|(_, g)| g), Some(Some(528)));
        assert_eq!(inbox.pop().map(|(_, g)| g), Some(None));
        assert!(inbox.pop().is_none());
        assert_eq!(inbox.queued(), 0);
    }

    #[test]
    fn an_uncounted_peer_fills_the_queue_to_the_window_then_the_reader_waits() {
        let mut inbox = Inbox::new(1000, false).expect("a window");
        while inbox.has_room() {
            inbox.push(message(100)).expect("never refused");
        }
        assert_eq!(inbox.len(), 7, "7 x 164 = 1148: the push that crossed");
        inbox.pop().expect("a message");
        assert!(inbox.has_room());
    }

    proptest! {
        /// A sender that follows its window and a receiver that takes messages at any
        /// pace: the receiver never refuses a message and never queues more than the
        /// window plus one message, and every message arrives in order.
        #[test]
        fn a_sender_and_a_receiver_following_the_rules_stay_within_the_bound(
            window in 1u64..4096,
            sizes in prop::collection::vec(0usize..2048, 1..200),
            takes in prop::collection::vec(any::<bool>(), 1..400),
        ) {
            let mut send = SendWindow::new(window).expect("a window");
            let mut inbox = Inbox::new(window, true).expect("a window");
            let mut pending = sizes.iter().enumerate().peekable();
            let mut received = Vec::new();
            let largest = sizes.iter().map(|&n| n as u64 + MESSAGE_COST).max().unwrap_or(0);
            let mut steps = takes.iter().cycle();
            while received.len() < sizes.len() {
                // The receiver takes a message when told to, or when the sender
                // cannot go on; the sender sends otherwise, so each step moves.
                let take = *steps.next().unwrap_or(&true);
                let sends = send.can_send() && pending.peek().is_some();
                if sends && (!take || inbox.is_empty()) {
                    let Some((i, &len)) = pending.next() else { break };
                    let mut payload = vec![0u8; len];
                    if let Some(b) = payload.first_mut() {
                        *b = i as u8;
                    }
                    let payload = Bytes::from(payload);
                    send.spend(cost(&payload));
                    prop_assert_eq!(inbox.push(payload), Ok(()));
                    prop_assert!(inbox.queued() <= window + largest);
                    continue;
                }
                let Some((m, grant)) = inbox.pop() else {
                    // Nothing to take and nothing the sender may send: a deadlock.
                    prop_assert!(false, "stuck: credit {:?}, nothing queued", send.credit());
                    break;
                };
                if let Some(g) = grant {
                    send.grant(g).expect("within the window");
                }
                received.push(m);
            }
            for (i, (m, &len)) in received.iter().zip(&sizes).enumerate() {
                prop_assert_eq!(m.len(), len);
                if len > 0 {
                    prop_assert_eq!(m[0], i as u8);
                }
            }
        }
    }
}
