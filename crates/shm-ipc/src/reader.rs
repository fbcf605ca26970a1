//! The session's reader: one task per session that takes descriptors from the peer's
//! ring, slices back from this side's release ring, and frames from the socket, and
//! parks when there is nothing to do.
//!
//! Parking: the reader polls for as long as [`spin`](crate::spin) says (at most
//! [`Config::spin`](crate::Config::spin)), then parks by the protocol of
//! [`park`](crate::park) (a flag in shared memory that writers check before they wake
//! it): on that flag itself through a futex wait ([`futex`](crate::futex)), or on the
//! socket, where writers send a wake byte. Either way it also watches the socket
//! (data frames, goodbyes) and, with no reply due, for one to become due.

use std::sync::Arc;
use std::sync::atomic::Ordering as StdOrdering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use crate::conn::{Ended, Entry, Inner, Item, lock};
use crate::control::{self, DATA_HEAD, Frame};
use crate::desc::Desc;
use crate::error::{Error, Violation};
use crate::futex::Waiter;
use crate::message::Message;
use crate::park;
use crate::spin::SpinRule;
use crate::sync::Ordering;

/// Socket bytes read ahead while a stream's inbox is full (frames wait behind it).
const BLOCKED_READ_LIMIT: usize = 256 << 10;
const READ_CHUNK: usize = 64 << 10;

pub(crate) struct Reader {
    /// Where it parks when it waits on its `parked` word (the peer wakes it with
    /// `FUTEX_WAKE`); `None`: it parks on the socket. Declared before `inner`: the ring
    /// goes before this side's region can.
    waiter: Option<Waiter>,
    inner: Arc<Inner>,
    /// Our index into the peer's descriptor ring.
    head: u32,
    rbuf: BytesMut,
    /// A `Socket` descriptor whose data frame has not been read yet: the ring waits.
    stalled: Option<(u32, u32)>,
    /// A message for a full inbox: everything waits.
    blocked: Option<(mpsc::Sender<Item>, Item)>,
    goodbye: bool,
    eof: bool,
    /// How long to poll before parking.
    spin: SpinRule,
}

impl Reader {
    pub(crate) fn new(inner: Arc<Inner>, waiter: Option<Waiter>) -> Reader {
        Reader {
            waiter,
            spin: SpinRule::new(inner.config.spin),
            inner,
            head: 0,
            rbuf: BytesMut::new(),
            stalled: None,
            blocked: None,
            goodbye: false,
            eof: false,
        }
    }

    pub(crate) async fn run(mut self) {
        let why = match self.serve().await {
            Ok(()) => Ended::Peer,
            Err(e) => Ended::Failed(e),
        };
        // Drop what we hold before the session forgets the streams.
        self.blocked = None;
        self.inner.finish(why);
    }

    async fn serve(&mut self) -> Result<(), Error> {
        loop {
            if let Some((tx, item)) = self.blocked.take() {
                let mut item = Some(item);
                let read_more = self.rbuf.len() < BLOCKED_READ_LIMIT && !self.eof;
                let read = tokio::select! {
                    permit = tx.reserve() => {
                        // A receiver that went away drops the message (and its slices).
                        if let (Ok(p), Some(item)) = (permit, item.take()) {
                            p.send(item);
                        }
                        None
                    }
                    r = self.read_socket(), if read_more => Some(r),
                };
                if let Some(r) = read {
                    r?;
                    if let Some(item) = item {
                        self.blocked = Some((tx, item));
                    }
                    self.inner.space.notify_waiters();
                    // At end of stream too: whether the peer said goodbye or died is in
                    // the input not parsed yet, behind the blocked message.
                    continue;
                }
            }
            let progressed = self.process()?;
            if self.goodbye {
                return Ok(());
            }
            if self.eof && self.blocked.is_none() {
                return Err(Error::PeerClosed);
            }
            if progressed || self.blocked.is_some() {
                continue;
            }
            let due = self.inner.replies_due.load(StdOrdering::Relaxed) > 0;
            let start = Instant::now();
            self.spin.idle(start, due);
            let budget = self.spin.budget(due);
            let mut last_yield = None;
            let mut now = start;
            let mut found = self.has_work()?;
            // One clock read a turn: the yield's end is the next turn's now.
            while !found && !self.spin.may_park(start, budget, now, last_yield) {
                tokio::task::yield_now().await;
                let after = Instant::now();
                last_yield = Some(after.saturating_duration_since(now));
                now = after;
                found = self.has_work()?;
            }
            if found {
                self.message_came()?;
                continue;
            }
            let inner = self.inner.clone();
            let parked = inner.mine.parked();
            if !park::prepare_park(parked, || self.has_work())? {
                self.message_came()?;
                continue;
            }
            // Parked with no reply due, the reader gets up when one becomes due (a wake
            // byte the peer sends meanwhile is read later, as any). Parked on the
            // futex, it gets up on the peer's FUTEX_WAKE too; the socket still brings
            // data frames, goodbyes and the wakes for a send waiting for room.
            let got_due = async {
                match due {
                    false => inner.due.notified().await,
                    true => std::future::pending().await,
                }
            };
            let mut waiter = self.waiter.take();
            if let Some(w) = waiter.as_mut() {
                w.arm(parked).map_err(Error::from)?;
            }
            let woken = async {
                match waiter.as_mut() {
                    Some(w) => w.done().await,
                    None => std::future::pending().await,
                }
            };
            let r = tokio::select! {
                read = self.read_socket() => read,
                () = got_due => Ok(()),
                woken = woken => woken.map_err(Error::from),
            };
            self.waiter = waiter;
            r?;
            parked.store(0, Ordering::Relaxed);
            self.message_came()?;
            self.inner.space.notify_waiters();
        }
    }

    /// Ends the spin rule's idle gap if a message came (slices given back are not
    /// traffic the rule learns from: they follow our own messages).
    fn message_came(&mut self) -> Result<(), Violation> {
        if self.stalled.is_none() && self.inner.peer.desc_ring().pending(self.head)? > 0 {
            self.spin.work(Instant::now());
        }
        Ok(())
    }

    /// Whether a ring has something for us that we can take now (not while the ring
    /// waits for a data frame), or we have closes to push.
    fn has_work(&self) -> Result<bool, Violation> {
        let ring = self.stalled.is_none() && self.inner.peer.desc_ring().pending(self.head)? > 0;
        Ok(ring || self.inner.releases_pending()? || self.inner.deferred_ready())
    }

    /// Reads what the socket has (waiting for it); sets `eof` at end of stream.
    async fn read_socket(&mut self) -> Result<(), Error> {
        // The frame's length is the peer's word: reserve at most what a message may be
        // (a longer frame is refused once its header is parsed).
        let max = self.inner.config.max_message_len as usize + DATA_HEAD;
        let reserve = control::frame_need(&self.rbuf).min(max).max(READ_CHUNK);
        if control::read_some(&*self.inner.sock, &mut self.rbuf, reserve).await? {
            self.eof = true;
        }
        Ok(())
    }

    /// Does everything that can be done without waiting; whether anything was.
    fn process(&mut self) -> Result<bool, Error> {
        let mut any = false;
        loop {
            let mut step = self.inner.drain_releases()? > 0;
            step |= self.inner.flush_deferred()?;
            if self.blocked.is_none() && self.stalled.is_none() {
                let mut taken = 0;
                let inner = self.inner.clone();
                let ring = inner.peer.desc_ring();
                while self.blocked.is_none() && self.stalled.is_none() {
                    let Some(words) = ring.pop(&mut self.head)? else {
                        break;
                    };
                    taken += 1;
                    let d = Desc::decode(
                        words,
                        self.inner.peer.layout(),
                        self.inner.config.max_message_len,
                    )?;
                    self.handle(d)?;
                }
                if taken > 0 {
                    step = true;
                    self.inner.notify_peer_waiting();
                }
            }
            if self.blocked.is_none() {
                step |= self.frames()?;
            }
            if self.goodbye || !step {
                break;
            }
            any = true;
        }
        if any {
            self.inner.space.notify_waiters();
        }
        Ok(any)
    }

    /// Parses socket frames. Frames are looked at only after the ring was drained, so
    /// everything the peer published before writing a frame has been handled.
    fn frames(&mut self) -> Result<bool, Error> {
        let start = self.rbuf.len();
        match control::next_frame(&mut self.rbuf, self.stalled.map(|(_, len)| len))? {
            Some(Frame::Goodbye) => {
                self.goodbye = true;
                Ok(true)
            }
            Some(Frame::Data(bytes)) => {
                // A data frame is only taken for the descriptor that promised it.
                if let Some((stream, _)) = self.stalled.take() {
                    self.chunk(stream, bytes, false)?;
                }
                // The ring may go on now.
                Ok(true)
            }
            None => Ok(self.rbuf.len() != start),
        }
    }

    fn handle(&mut self, d: Desc) -> Result<(), Error> {
        match d {
            Desc::Data {
                stream,
                slice,
                len,
                more,
            } => {
                let held = &self.inner.held[slice as usize];
                if held.swap(true, StdOrdering::Relaxed) {
                    return Err(Violation::Descriptor("slice lent twice").into());
                }
                // From here on, dropping the bytes gives the slice back.
                let bytes = self.inner.peer_bytes(slice, len as usize);
                self.chunk(stream, bytes, more)
            }
            Desc::Empty { stream } => self.chunk(stream, Bytes::new(), false),
            Desc::Socket { stream, len } => {
                self.route(stream, |e| {
                    if e.partial.is_empty() {
                        Ok(())
                    } else {
                        Err(Violation::Descriptor(
                            "socket message inside another message",
                        ))
                    }
                })?;
                self.stalled = Some((stream, len));
                Ok(())
            }
            Desc::Close { stream } => {
                let item = self.route(stream, |e| {
                    if !e.partial.is_empty() {
                        return Err(Violation::Descriptor("close inside a message"));
                    }
                    e.peer_done = true;
                    Ok(Some((e.tx.clone(), Item::End)))
                })?;
                if let Some(Some((tx, item))) = item {
                    self.deliver(tx, item);
                }
                Ok(())
            }
        }
    }

    /// Adds a chunk to `stream`'s message; delivers it when `more` is false.
    fn chunk(&mut self, stream: u32, bytes: Bytes, more: bool) -> Result<(), Error> {
        let max = self.inner.config.max_message_len as usize;
        let done = self.route(stream, |e| {
            e.partial_len += bytes.len();
            if e.partial_len > max {
                return Err(Violation::Descriptor("message over the length limit"));
            }
            e.partial.push(bytes);
            if more {
                return Ok(None);
            }
            e.partial_len = 0;
            let msg = Message::from_chunks(std::mem::take(&mut e.partial));
            Ok(Some((e.tx.clone(), Item::Msg(msg))))
        })?;
        if let Some(Some((tx, item))) = done {
            self.deliver(tx, item);
        }
        Ok(())
    }

    fn deliver(&mut self, tx: mpsc::Sender<Item>, item: Item) {
        match tx.try_send(item) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(item)) => self.blocked = Some((tx, item)),
            // The stream was closed here: drop it.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Runs `f` on the live stream `id`, opening it if the peer starts a new one.
    /// `Ok(None)`: the stream is closed here (or refused), its data is dropped.
    fn route<T>(
        &mut self,
        id: u32,
        f: impl FnOnce(&mut Entry) -> Result<T, Violation>,
    ) -> Result<Option<T>, Violation> {
        let inner = self.inner.clone();
        let mut st = lock(&inner.state);
        if let Some(e) = st.streams.get_mut(&id) {
            if e.peer_done {
                return Err(Violation::Descriptor(
                    "data after the peer closed the stream",
                ));
            }
            return f(e).map(Some);
        }
        if !inner.is_peer_id(id) {
            // One of ours: closed here already, or never opened (a lie).
            return if id < st.next_id {
                Ok(None)
            } else {
                Err(Violation::StreamId(id))
            };
        }
        if id <= st.highest_peer {
            // The peer's, closed here already.
            return Ok(None);
        }
        st.highest_peer = id;
        if st.peer_live >= inner.config.max_streams {
            drop(st);
            inner.push_close(id);
            return Ok(None);
        }
        let (mut entry, stream) = inner.peer_stream(id);
        let accepted = match &st.accept_tx {
            Some(tx) => tx.try_send(stream).is_ok(),
            None => false,
        };
        if !accepted {
            drop(st);
            inner.push_close(id);
            return Ok(None);
        }
        st.peer_live += 1;
        let r = f(&mut entry);
        st.streams.insert(id, entry);
        r.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind::{ConnectionReset, Interrupted, PermissionDenied, WouldBlock};
    use std::pin::pin;
    use std::task::Poll;

    use super::*;
    use crate::control::{FRAME_DATA, FRAME_GOODBYE, FRAME_WAKE, data_head};
    use crate::sys::fake::{Script, Step, block_on, poll_times};

    /// Runs a reader of a server session (the peer's streams are odd) over `script` to
    /// its end; how the session ended.
    fn ended(script: &Script) -> Ended {
        let inner = Inner::scripted(script, false);
        block_on(Reader::new(inner.clone(), None).run());
        inner.end.get().expect("the reader ends the session")
    }

    #[test]
    fn a_goodbye_after_hiccups_ends_the_session_cleanly() {
        let s = Script::new([
            Step::NotReady,
            Step::Fail(WouldBlock),
            Step::Read(vec![FRAME_WAKE]),
            Step::Fail(Interrupted),
            Step::Read(vec![FRAME_WAKE, FRAME_GOODBYE]),
        ]);
        assert!(matches!(ended(&s), Ended::Peer));
        assert!(s.is_shut());
        assert!(s.written().is_empty(), "no goodbye back");
    }

    #[test]
    fn a_hang_up_or_a_reset_is_peer_closed() {
        for end in [Step::Eof, Step::Fail(ConnectionReset)] {
            let s = Script::new([Step::Read(vec![FRAME_WAKE]), end]);
            assert!(matches!(ended(&s), Ended::Failed(Error::PeerClosed)));
            assert!(s.is_shut());
        }
    }

    #[test]
    fn a_read_error_fails_the_session() {
        let s = Script::new([Step::Fail(PermissionDenied)]);
        match ended(&s) {
            Ended::Failed(Error::Io(e)) => assert_eq!(e.kind(), PermissionDenied),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_malformed_frame_is_a_protocol_error() {
        let s = Script::new([Step::Read(vec![FRAME_WAKE, 0x7f])]);
        assert!(matches!(
            ended(&s),
            Ended::Failed(Error::Protocol(Violation::Frame("unknown frame type")))
        ));
        let s = Script::new([Step::Read(data_head(1).to_vec())]);
        assert!(matches!(
            ended(&s),
            Ended::Failed(Error::Protocol(Violation::Frame(
                "data frame without a descriptor"
            )))
        ));
    }

    /// The peer announces a message in its ring and sends the bytes in a data frame that
    /// arrives in pieces: the message reaches the new stream's inbox whole, once, and the
    /// reader then waits for the socket.
    #[test]
    fn a_socket_message_is_delivered_from_pieces() {
        let s = Script::new([
            Step::Read(vec![FRAME_WAKE, FRAME_DATA, 6, 0]),
            Step::Fail(WouldBlock),
            Step::Read(vec![0, 0, b'h', b'e']),
            Step::NotReady,
            Step::Read(b"llo!".to_vec()),
        ]);
        let inner = Inner::scripted(&s, false);
        let d = Desc::Socket { stream: 1, len: 6 };
        assert!(inner.peer.desc_ring().push(&mut 0, d.encode()).unwrap());
        let mut run = pin!(Reader::new(inner.clone(), None).run());
        assert!(poll_times(run.as_mut(), 20).is_pending(), "waits for more");
        assert_eq!(s.left(), 0);
        assert_eq!(inner.mine.parked().load(Ordering::Relaxed), 1, "parked");

        let mut accept = inner.accept_rx.try_lock().unwrap();
        let mut stream = accept.try_recv().expect("the peer's new stream");
        assert_eq!(stream.slot.id(), 1);
        match stream.rx.try_recv() {
            Ok(Item::Msg(m)) => assert_eq!(m.into_bytes(), &b"hello!"[..]),
            other => panic!("{other:?}"),
        }
        assert!(stream.rx.try_recv().is_err(), "delivered once");
        assert!(inner.check_open().is_ok());

        s.push(Step::Read(vec![FRAME_GOODBYE]));
        assert!(matches!(poll_times(run, 20), Poll::Ready(())));
        assert!(matches!(inner.end.get(), Some(Ended::Peer)));
    }

    /// The peer lends two slices of its region for one message: the stream gets it
    /// without a copy, and dropping it gives both slices back in the peer's ring.
    #[test]
    fn a_message_in_shared_memory_is_read_in_place_and_given_back() {
        let s = Script::default();
        let inner = Inner::scripted(&s, false);
        inner
            .peer
            .with_slice_mut(0, 6, |b| b.copy_from_slice(b"hello "));
        inner
            .peer
            .with_slice_mut(1, 5, |b| b.copy_from_slice(b"world"));
        let ring = inner.peer.desc_ring();
        let mut tail = 0;
        for (slice, len, more) in [(0, 6, true), (1, 5, false)] {
            let d = Desc::Data {
                stream: 1,
                slice,
                len,
                more,
            };
            assert!(ring.push(&mut tail, d.encode()).unwrap());
        }
        let mut run = pin!(Reader::new(inner.clone(), None).run());
        assert!(poll_times(run.as_mut(), 20).is_pending());

        let mut stream = inner.accept_rx.try_lock().unwrap().try_recv().unwrap();
        let Ok(Item::Msg(m)) = stream.rx.try_recv() else {
            panic!("no message");
        };
        let chunks = m.into_chunks();
        assert_eq!(chunks, [&b"hello "[..], &b"world"[..]]);
        let held = |inner: &Inner| {
            inner
                .held
                .iter()
                .filter(|h| h.load(StdOrdering::Relaxed))
                .count()
        };
        assert_eq!(held(&inner), 2);
        drop(chunks);
        assert_eq!(held(&inner), 0);
        let mut head = 0;
        let back = inner.peer.release_ring();
        assert_eq!(back.pop(&mut head), Ok(Some([0])));
        assert_eq!(back.pop(&mut head), Ok(Some([1])));
        assert_eq!(back.pop(&mut head), Ok(None));
    }

    #[test]
    fn a_hang_up_before_a_promised_frame_is_peer_closed() {
        let s = Script::new([Step::Read(data_head(6)[..3].to_vec()), Step::Eof]);
        let inner = Inner::scripted(&s, false);
        let d = Desc::Socket { stream: 1, len: 6 };
        assert!(inner.peer.desc_ring().push(&mut 0, d.encode()).unwrap());
        block_on(Reader::new(inner.clone(), None).run());
        assert!(matches!(
            inner.end.get(),
            Some(Ended::Failed(Error::PeerClosed))
        ));
    }
}
