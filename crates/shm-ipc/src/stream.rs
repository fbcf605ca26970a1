//! Streams: ordered messages in each direction, many per session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::Buf;
use tokio::sync::mpsc;

use crate::conn::{
    BufPayload, EndCell, Ended, FillPayload, Inner, Item, Payload, PeerStream, StreamSlot,
};
use crate::desc::Desc;
use crate::error::Error;
use crate::message::Message;

/// One stream of a session: messages in order in each direction.
///
/// Cloning gives another handle to the same stream: sends from several handles or tasks
/// are serialised (each message goes whole and in order); receive from one task at a
/// time. The stream closes when [`close`](Self::close) is called or the last handle is
/// dropped: the peer's `recv` then returns `Ok(None)` after the messages sent before, and
/// what the peer still sends to it is dropped (its slices given back).
#[derive(Debug, Clone)]
pub struct Stream(Arc<StreamShared>);

#[derive(Debug)]
struct StreamShared {
    slot: StreamSlot,
    session: Weak<Inner>,
    end: Arc<EndCell>,
    rx: tokio::sync::Mutex<mpsc::Receiver<Item>>,
    send_lock: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    close_pending: AtomicBool,
    peer_done: AtomicBool,
}

impl StreamShared {
    fn new(session: &Arc<Inner>, slot: StreamSlot, rx: mpsc::Receiver<Item>) -> Arc<Self> {
        Arc::new(StreamShared {
            slot,
            session: Arc::downgrade(session),
            end: session.end.clone(),
            rx: tokio::sync::Mutex::new(rx),
            send_lock: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            close_pending: AtomicBool::new(false),
            peer_done: AtomicBool::new(false),
        })
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.close_pending.store(true, Ordering::SeqCst);
        self.send_close_if_idle();
    }

    /// Sends the close unless a send is in progress, which sends it when it finishes
    /// (it checks after unlocking, we set the flag before trying the lock).
    fn send_close_if_idle(&self) {
        while self.close_pending.load(Ordering::SeqCst) {
            let Ok(g) = self.send_lock.try_lock() else {
                return;
            };
            if self.close_pending.swap(false, Ordering::SeqCst)
                && let Some(s) = self.session.upgrade()
            {
                s.close_stream(&self.slot);
            }
            drop(g);
        }
    }
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        self.close();
    }
}

impl Stream {
    /// Opens a stream of this side (it gets its id with its first message).
    pub(crate) fn open(session: &Arc<Inner>) -> Result<Stream, Error> {
        let (slot, rx) = session.open_local()?;
        Ok(Stream(StreamShared::new(session, slot, rx)))
    }

    /// The handle of a stream the peer opened.
    pub(crate) fn accepted(session: &Arc<Inner>, stream: PeerStream) -> Stream {
        Stream(StreamShared::new(session, stream.slot, stream.rx))
    }

    /// The stream's id: odd if the connecting side opened it, even otherwise. A stream
    /// opened here gets its id with its first message (`None` before), so that ids
    /// reach the peer in increasing order.
    pub fn id(&self) -> Option<u32> {
        Some(self.0.slot.id()).filter(|&id| id != 0)
    }

    fn session(&self) -> Result<Arc<Inner>, Error> {
        match self.0.session.upgrade() {
            Some(s) => Ok(s),
            None => Err(self.0.end.error()),
        }
    }

    /// Sends one message: its bytes are copied into this side's shared slices (a
    /// message may take several) and the peer receives them without a copy. When
    /// shared memory is full the configured [`Exhaustion`](crate::Exhaustion) policy
    /// applies. Messages of one stream arrive in the order they were sent.
    pub async fn send(&self, msg: impl Buf) -> Result<(), Error> {
        let s = self.session()?;
        let guard = self.0.send_lock.lock().await;
        let len = msg.remaining();
        let r = self.send_locked(&s, BufPayload(msg), len).await;
        s.fail_on_violation(&r);
        drop(guard);
        self.0.send_close_if_idle();
        r
    }

    /// Sends a message of `len` bytes written in place, straight into shared memory:
    /// `fill(offset, bytes)` is called for consecutive pieces that together cover the
    /// message in order (one per slice), and must write all of each piece. Saves the
    /// copy of [`send`](Self::send) for a message built on the fly. If the message goes
    /// over the socket (exhaustion fallback), `fill` is called once for all of it.
    pub async fn send_with(
        &self,
        len: usize,
        fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<(), Error> {
        let s = self.session()?;
        let guard = self.0.send_lock.lock().await;
        let r = self.send_locked(&s, FillPayload { fill, at: 0 }, len).await;
        s.fail_on_violation(&r);
        drop(guard);
        self.0.send_close_if_idle();
        r
    }

    async fn send_locked(&self, s: &Inner, msg: impl Payload, len: usize) -> Result<(), Error> {
        if self.0.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        s.check_open()?;
        if len > s.config.max_message_len as usize {
            return Err(Error::TooLarge(len));
        }
        if len == 0 {
            return s
                .push_descs(&self.0.slot, &[Desc::Empty { stream: 0 }])
                .await;
        }
        s.send_message(&self.0.slot, msg, len).await
    }

    /// The next message; `Ok(None)` once the peer closed the stream, or closed the
    /// session cleanly, and every message sent before was received. After a crash of
    /// the peer: [`Error::PeerClosed`] (messages already received come first); after
    /// this side closed the stream or session: [`Error::Closed`].
    pub async fn recv(&self) -> Result<Option<Message>, Error> {
        if self.0.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        if self.0.peer_done.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut rx = self.0.rx.lock().await;
        match rx.recv().await {
            Some(Item::Msg(m)) => Ok(Some(m)),
            Some(Item::End) => {
                self.0.peer_done.store(true, Ordering::SeqCst);
                Ok(None)
            }
            None if self.0.closed.load(Ordering::SeqCst) => Err(Error::Closed),
            None => match self.0.end.get() {
                Some(Ended::Peer) => Ok(None),
                Some(Ended::Failed(e)) => Err(e),
                Some(Ended::Local) | None => Err(Error::Closed),
            },
        }
    }

    /// Closes this stream for every handle: no more sends; the peer's `recv` ends after
    /// what was sent before; what the peer sends later is dropped. Idempotent.
    pub fn close(&self) {
        self.0.close();
    }
}
