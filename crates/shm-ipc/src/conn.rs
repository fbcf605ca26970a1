//! The core of a session, shared by its handle, its streams (weakly), its reader task
//! and the buffers it handed out (weakly): the two regions and their rings, this side's
//! slices, the streams' map, the send paths, and how the session ends.
//!
//! Streams appear here only as a [`StreamSlot`] (an id and, until it has one, the inbox
//! sender), a [`PeerStream`] waiting to be accepted, and the reader's [`Entry`]: the
//! `Stream` handles users hold are built on these by the module above.

use std::collections::HashMap;
use std::io;
use std::pin::pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Buf;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::{Config, Exhaustion};
use crate::control::{self, FRAME_GOODBYE, FRAME_WAKE};
use crate::desc::Desc;
use crate::error::{Error, Violation};
use crate::freelist::Slices;
use crate::message::Message;
use crate::park;
use crate::region::Region;
use crate::sync::{AtomicU32, Ordering, fence};
use crate::sys::Control;

/// The bytes of a message being sent, written slice by slice.
pub(crate) trait Payload {
    /// Writes the message's next `dst.len()` bytes into `dst`.
    fn write_next(&mut self, dst: &mut [u8]);
    /// The whole message (nothing written yet) as a buffer, for the socket.
    fn into_buf(self, len: usize) -> impl Buf;
}

/// A message given as a `Buf`: copied.
pub(crate) struct BufPayload<B>(pub(crate) B);

impl<B: Buf> Payload for BufPayload<B> {
    fn write_next(&mut self, dst: &mut [u8]) {
        self.0.copy_to_slice(dst);
    }

    fn into_buf(self, _len: usize) -> impl Buf {
        self.0
    }
}

/// A message written in place by a function of (offset, bytes to fill).
pub(crate) struct FillPayload<F> {
    pub(crate) fill: F,
    pub(crate) at: usize,
}

impl<F: FnMut(usize, &mut [u8])> Payload for FillPayload<F> {
    fn write_next(&mut self, dst: &mut [u8]) {
        (self.fill)(self.at, dst);
        self.at += dst.len();
    }

    fn into_buf(mut self, len: usize) -> impl Buf {
        let mut buf = vec![0u8; len];
        (self.fill)(0, &mut buf);
        bytes::Bytes::from(buf)
    }
}

/// How a session ended.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// This side closed it.
    Local,
    /// The peer said goodbye.
    Peer,
    /// It failed.
    Failed(Error),
}

/// The end of a session, shared with its streams (which outlive it).
#[derive(Debug, Default)]
pub(crate) struct EndCell(Mutex<Option<Ended>>);

impl EndCell {
    pub(crate) fn get(&self) -> Option<Ended> {
        lock(&self.0).clone()
    }

    /// The error a call on an ended session returns.
    pub(crate) fn error(&self) -> Error {
        match self.get() {
            Some(Ended::Failed(e)) => e,
            Some(Ended::Peer) => Error::PeerClosed,
            _ => Error::Closed,
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves consistent data (they guard
    // indices and maps updated in one step), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the session's reader puts in a stream's inbox.
#[derive(Debug)]
pub(crate) enum Item {
    Msg(Message),
    /// The peer closed its half of the stream.
    End,
}

/// What the session knows of one of its streams' handles: the stream's id and, until
/// it has one, the sender of its inbox.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    /// 0 until this side's first descriptor for a stream it opened: ids are given in
    /// ring order, so the peer sees each side's new ids grow.
    id: AtomicU32,
    /// The inbox's sender until the stream has an id and sits in the session's map.
    unplaced: Mutex<Option<mpsc::Sender<Item>>>,
}

impl StreamSlot {
    /// The id, 0 if none was given yet.
    pub(crate) fn id(&self) -> u32 {
        self.id.load(Ordering::SeqCst)
    }

    /// Gives the stream `id` and returns its inbox sender, the first time only (the
    /// caller holds the ring's producer lock).
    fn place(&self, id: u32) -> Option<mpsc::Sender<Item>> {
        let tx = lock(&self.unplaced).take()?;
        self.id.store(id, Ordering::SeqCst);
        Some(tx)
    }
}

/// A stream the peer opened, waiting to be accepted: its id and its inbox.
#[derive(Debug)]
pub(crate) struct PeerStream {
    pub(crate) slot: StreamSlot,
    pub(crate) rx: mpsc::Receiver<Item>,
}

/// The owner behind a `Bytes` over one of the peer's slices: keeps the mapping alive
/// and gives the slice back to the peer when dropped.
struct SliceRef {
    region: Arc<Region>,
    session: Weak<Inner>,
    index: u32,
    len: usize,
}

impl AsRef<[u8]> for SliceRef {
    fn as_ref(&self) -> &[u8] {
        // The index and length were checked against the layout when the descriptor was
        // decoded, so this is always `Some`.
        self.region.slice(self.index, self.len).unwrap_or(&[])
    }
}

impl Drop for SliceRef {
    fn drop(&mut self) {
        if let Some(session) = self.session.upgrade() {
            session.release_peer_slice(self.index);
        }
    }
}

/// A live stream as the session's reader sees it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) tx: mpsc::Sender<Item>,
    /// Chunks of the message being received.
    pub(crate) partial: Vec<bytes::Bytes>,
    pub(crate) partial_len: usize,
    /// The peer closed its half.
    pub(crate) peer_done: bool,
    /// Opened by this side.
    pub(crate) local: bool,
}

impl Entry {
    fn new(tx: mpsc::Sender<Item>, local: bool) -> Entry {
        Entry {
            tx,
            partial: Vec::new(),
            partial_len: 0,
            peer_done: false,
            local,
        }
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) streams: HashMap<u32, Entry>,
    pub(crate) next_id: u32,
    pub(crate) highest_peer: u32,
    pub(crate) local_live: usize,
    pub(crate) peer_live: usize,
    pub(crate) accept_tx: Option<mpsc::Sender<PeerStream>>,
}

/// Everything of a session, shared by its handle, its streams (weakly), its reader task
/// and the buffers it handed out (weakly).
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) sock: Box<dyn Control>,
    pub(crate) config: Config,
    pub(crate) client: bool,
    /// This side's region: its slices, its descriptor ring (we produce), its release
    /// ring (we consume).
    pub(crate) mine: Arc<Region>,
    /// The peer's region: its descriptor ring (we consume), its release ring (we
    /// produce), its slices (we read what it lends us).
    pub(crate) peer: Arc<Region>,
    pub(crate) slices: Slices,
    /// Peer slices this side holds now: a descriptor naming one twice is a lie.
    pub(crate) held: Box<[AtomicBool]>,
    desc_tail: Mutex<u32>,
    rel_head: Mutex<u32>,
    peer_rel_tail: Mutex<u32>,
    /// Serialises writes of frames to the socket (held across awaits of a data frame).
    wlock: tokio::sync::Mutex<()>,
    wake_pending: AtomicBool,
    /// Sends waiting for slices or ring room.
    pub(crate) space: Notify,
    pub(crate) state: Mutex<State>,
    pub(crate) accept_rx: tokio::sync::Mutex<mpsc::Receiver<PeerStream>>,
    /// Close descriptors that found the ring full; the reader pushes them later.
    deferred: Mutex<Vec<u32>>,
    pub(crate) end: Arc<EndCell>,
    reader: Mutex<Option<JoinHandle<()>>>,
    pub(crate) shm_sends: std::sync::atomic::AtomicU64,
    pub(crate) socket_sends: std::sync::atomic::AtomicU64,
    /// Wake-ups sent to the peer (futex wakes and wake frames).
    pub(crate) wakes: std::sync::atomic::AtomicU64,
    /// Wake frames sent to the peer.
    pub(crate) wake_bytes: std::sync::atomic::AtomicU64,
    /// The peer's reader parks on its `parked` word: wake it with `FUTEX_WAKE` (its
    /// hello said so).
    peer_futex: bool,
    /// Replies this side's user waits for ([`ReplyDue`](crate::ReplyDue) guards): while
    /// one is, the reader spins its whole window before it parks.
    pub(crate) replies_due: std::sync::atomic::AtomicUsize,
    /// Told when a reply becomes due while none was: a parked reader gets up to poll.
    pub(crate) due: Notify,
}

impl Inner {
    /// The core of a new session over `sock` and the two mapped regions (the peer's
    /// reader parks on a futex if `peer_futex`); its reader is started by the caller
    /// and handed over with [`set_reader`](Self::set_reader).
    pub(crate) fn new(
        sock: Box<dyn Control>,
        config: Config,
        client: bool,
        mine: Region,
        peer: Region,
        peer_futex: bool,
    ) -> Arc<Inner> {
        let counts: Vec<u32> = mine.layout().classes.iter().map(|c| c.count).collect();
        let held = (0..peer.layout().slices)
            .map(|_| AtomicBool::new(false))
            .collect();
        let (accept_tx, accept_rx) = mpsc::channel(config.max_streams);
        Arc::new(Inner {
            sock,
            client,
            slices: Slices::new(&counts),
            held,
            mine: Arc::new(mine),
            peer: Arc::new(peer),
            desc_tail: Mutex::new(0),
            rel_head: Mutex::new(0),
            peer_rel_tail: Mutex::new(0),
            wlock: tokio::sync::Mutex::new(()),
            wake_pending: AtomicBool::new(false),
            space: Notify::new(),
            state: Mutex::new(State {
                streams: HashMap::new(),
                next_id: if client { 1 } else { 2 },
                highest_peer: 0,
                local_live: 0,
                peer_live: 0,
                accept_tx: Some(accept_tx),
            }),
            accept_rx: tokio::sync::Mutex::new(accept_rx),
            deferred: Mutex::new(Vec::new()),
            end: Arc::new(EndCell::default()),
            reader: Mutex::new(None),
            shm_sends: Default::default(),
            socket_sends: Default::default(),
            wakes: Default::default(),
            wake_bytes: Default::default(),
            peer_futex,
            replies_due: Default::default(),
            due: Notify::new(),
            config,
        })
    }

    /// Keeps the reader's task, to stop it when the session ends.
    pub(crate) fn set_reader(&self, task: JoinHandle<()>) {
        *lock(&self.reader) = Some(task);
    }

    /// Ends the session once (the first reason wins): tells the peer when it is a local
    /// close, hangs up the socket, ends every stream, wakes every waiter, stops the
    /// reader. Buffers already received stay valid.
    pub(crate) fn finish(&self, why: Ended) {
        {
            let mut end = lock(&self.end.0);
            if end.is_some() {
                return;
            }
            *end = Some(why.clone());
        }
        if matches!(why, Ended::Local)
            && let Ok(_g) = self.wlock.try_lock()
        {
            // Best effort: if the socket is full or a frame is half written, the peer
            // sees a hang-up instead of a goodbye.
            self.sock.send_byte(FRAME_GOODBYE);
        }
        self.sock.shutdown();
        {
            let mut st = lock(&self.state);
            st.streams.clear();
            st.accept_tx = None;
        }
        // The session is over: whatever the peer held of ours is ours again (nothing
        // will be allocated from it any more; this keeps the accounting honest).
        self.slices.reclaim_all();
        self.space.notify_waiters();
        if let Some(task) = lock(&self.reader).take() {
            task.abort();
        }
    }

    /// A send that found the peer lying (its ring head, its releases) ends the session.
    pub(crate) fn fail_on_violation(&self, r: &Result<(), Error>) {
        if let Err(e @ Error::Protocol(_)) = r {
            self.finish(Ended::Failed(e.clone()));
        }
    }

    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if lock(&self.end.0).is_some() {
            return Err(self.end.error());
        }
        Ok(())
    }

    /// A stream opened here: its slot (no id yet) and its inbox. Fails if the session
    /// ended or [`Config::max_streams`] of this side's streams are open.
    pub(crate) fn open_local(&self) -> Result<(StreamSlot, mpsc::Receiver<Item>), Error> {
        self.check_open()?;
        let mut st = lock(&self.state);
        if st.local_live >= self.config.max_streams {
            return Err(io::Error::other("shm-ipc: too many open streams").into());
        }
        st.local_live += 1;
        drop(st);
        let (tx, rx) = mpsc::channel(self.config.stream_inbox);
        let slot = StreamSlot {
            id: AtomicU32::new(0),
            unplaced: Mutex::new(Some(tx)),
        };
        Ok((slot, rx))
    }

    /// A stream the peer opened: its entry for the map and what `accept` hands out.
    pub(crate) fn peer_stream(&self, id: u32) -> (Entry, PeerStream) {
        let (tx, rx) = mpsc::channel(self.config.stream_inbox);
        let slot = StreamSlot {
            id: AtomicU32::new(id),
            unplaced: Mutex::new(None),
        };
        (Entry::new(tx, false), PeerStream { slot, rx })
    }

    /// The id of `stream`, giving it the next one of this side if it has none; call
    /// with the ring's producer lock held, right before pushing its first descriptor.
    fn stream_id(&self, stream: &StreamSlot) -> Result<u32, Error> {
        let id = stream.id();
        if id != 0 {
            return Ok(id);
        }
        let mut st = lock(&self.state);
        let id = st.next_id;
        st.next_id = id
            .checked_add(2)
            .ok_or_else(|| io::Error::other("shm-ipc: stream ids exhausted"))?;
        if let Some(tx) = stream.place(id) {
            st.streams.insert(id, Entry::new(tx, true));
        }
        Ok(id)
    }

    /// Whether `id` is of the streams the peer opens.
    pub(crate) fn is_peer_id(&self, id: u32) -> bool {
        (id % 2 == 1) != self.client
    }

    /// A stream was closed here: forget it, tell the peer (in ring order, after the
    /// stream's data) if it ever heard of it.
    pub(crate) fn close_stream(&self, stream: &StreamSlot) {
        let id = stream.id();
        let mut st = lock(&self.state);
        let entry = if id == 0 {
            None
        } else {
            st.streams.remove(&id)
        };
        match entry {
            Some(e) if e.local => st.local_live -= 1,
            Some(_) => st.peer_live -= 1,
            // Opened here and never used: the peer does not know it.
            None if id == 0 => {
                st.local_live -= 1;
                return;
            }
            // Gone already (the session ended).
            None => return,
        }
        drop(st);
        if self.check_open().is_ok() {
            self.push_close(id);
        }
    }

    /// Pushes a `Close` descriptor now, or leaves it for the reader if the ring is full.
    pub(crate) fn push_close(&self, id: u32) {
        let pushed = {
            let mut t = lock(&self.desc_tail);
            self.mine
                .desc_ring()
                .push(&mut t, Desc::Close { stream: id }.encode())
        };
        match pushed {
            Ok(true) => self.notify_peer(),
            Ok(false) => {
                let mut d = lock(&self.deferred);
                // Bounded: each stream closes once, and refusals of streams past the
                // limit are simply not announced beyond this bound.
                if d.len() < 2 * self.config.max_streams + 64 {
                    d.push(id);
                }
            }
            Err(v) => self.finish(Ended::Failed(v.into())),
        }
    }

    /// Pushes deferred closes while there is room; whether any went.
    pub(crate) fn flush_deferred(&self) -> Result<bool, Violation> {
        let mut d = lock(&self.deferred);
        if d.is_empty() {
            return Ok(false);
        }
        let mut t = lock(&self.desc_tail);
        let ring = self.mine.desc_ring();
        let mut n = 0;
        while n < d.len() && ring.push(&mut t, Desc::Close { stream: d[n] }.encode())? {
            n += 1;
        }
        d.drain(..n);
        drop(t);
        if n > 0 {
            self.notify_peer();
        }
        Ok(n > 0)
    }

    /// Whether deferred closes can go now (there are some, and the ring has room). A
    /// full ring is not work for the reader: it waits for the peer like any sender.
    pub(crate) fn deferred_ready(&self) -> bool {
        if lock(&self.deferred).is_empty() {
            return false;
        }
        // The index is compared while the lock is held: a copy could be overtaken by
        // other producers and by the consumer, and look like a lie.
        let t = lock(&self.desc_tail);
        // A lying head is work too: pushing reports it.
        self.mine.desc_ring().room(*t).map_or(true, |room| room > 0)
    }

    /// After publishing to the peer: wake it if it parked (the Dekker half of the
    /// parked flag: our store, a full fence, its flag), with `FUTEX_WAKE` on that flag
    /// when its reader waits there, else with a byte on the socket.
    pub(crate) fn notify_peer(&self) {
        let parked = self.peer.parked();
        if !park::take_wake(parked) {
            return;
        }
        if self.peer_futex {
            crate::futex::wake(parked);
            self.wakes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else {
            self.wake_peer();
        }
    }

    /// After taking from the peer's ring or giving back its slices: wake it if one of
    /// its sends waits for room.
    pub(crate) fn notify_peer_waiting(&self) {
        Self::wake_if(self.peer.waiting(), self);
    }

    fn wake_if(flag: &AtomicU32, this: &Inner) {
        if park::take_wake(flag) {
            this.wake_peer();
        }
    }

    /// Sends a one-byte wake frame, never interleaved with another frame: if a writer
    /// holds the socket, it sends the wake when it lets go (it checks `wake_pending`
    /// after unlocking, we set it before trying the lock).
    pub(crate) fn wake_peer(&self) {
        self.wake_pending
            .store(true, std::sync::atomic::Ordering::SeqCst);
        while self.wake_pending.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok(g) = self.wlock.try_lock() else {
                return;
            };
            if self
                .wake_pending
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                // A full socket means the peer has unread bytes: it will look anyway.
                self.sock.send_byte(FRAME_WAKE);
                self.wakes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.wake_bytes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            drop(g);
        }
    }

    /// Gives back slices the peer returned; how many.
    pub(crate) fn drain_releases(&self) -> Result<usize, Violation> {
        let Ok(mut h) = self.rel_head.try_lock() else {
            return Ok(0);
        };
        let ring = self.mine.release_ring();
        let mut n = 0;
        while let Some([index]) = ring.pop(&mut h)? {
            self.slices.reclaim(index)?;
            n += 1;
        }
        Ok(n)
    }

    /// Whether the peer returned slices not yet taken back.
    pub(crate) fn releases_pending(&self) -> Result<bool, Violation> {
        // Compared under the lock: a copy could be overtaken by a drain and new releases.
        let h = lock(&self.rel_head);
        Ok(self.mine.release_ring().pending(*h)? > 0)
    }

    /// The first `len` bytes of the peer's slice `index` (checked against its layout by
    /// [`Desc::decode`]), without a copy; dropping the last `Bytes` over them gives the
    /// slice back.
    pub(crate) fn peer_bytes(self: &Arc<Self>, index: u32, len: usize) -> bytes::Bytes {
        bytes::Bytes::from_owner(SliceRef {
            region: self.peer.clone(),
            session: Arc::downgrade(self),
            index,
            len,
        })
    }

    /// A `Bytes` over the peer's slice `index` was dropped: give the slice back.
    pub(crate) fn release_peer_slice(&self, index: u32) {
        if let Some(h) = self.held.get(index as usize) {
            h.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        if self.check_open().is_err() {
            return;
        }
        let pushed = {
            let mut t = lock(&self.peer_rel_tail);
            self.peer.release_ring().push(&mut t, [u64::from(index)])
        };
        match pushed {
            Ok(true) => self.notify_peer_waiting(),
            // The ring holds every slice of the peer's region; it can only be full if
            // the peer lies about its head.
            Ok(false) => self.finish(Ended::Failed(
                Violation::RingIndex {
                    ring: "release",
                    what: "full: the owner does not take back its slices",
                }
                .into(),
            )),
            Err(v) => self.finish(Ended::Failed(v.into())),
        }
    }

    /// Waits until `attempt` yields something, with this side's `waiting` flag raised
    /// so the peer wakes the reader when it gives back slices or takes descriptors.
    async fn wait_for<T>(
        &self,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(&Self) -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        loop {
            if let Some(v) = attempt(self)? {
                return Ok(v);
            }
            let mut notified = pin!(self.space.notified());
            notified.as_mut().enable();
            self.mine.waiting().store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.drain_releases()?;
            if let Some(v) = attempt(self)? {
                return Ok(v);
            }
            self.check_open()?;
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        // One last look: the wake may have raced the deadline.
                        self.drain_releases()?;
                        return attempt(self)?.ok_or(Error::Exhausted);
                    }
                }
                None => notified.await,
            }
        }
    }

    /// `Some` when this side's descriptor ring has room.
    fn ring_room(&self) -> Result<Option<()>, Error> {
        let t = lock(&self.desc_tail);
        Ok((self.mine.desc_ring().room(*t)? > 0).then_some(()))
    }

    /// Takes slices for `len` bytes: `(slice, bytes in it)` in order; `None` if this
    /// side's region cannot hold it now.
    fn alloc(&self, len: usize) -> Option<Vec<(u32, usize)>> {
        let classes = &self.mine.layout().classes;
        let mut got = Vec::new();
        let mut left = len;
        while left > 0 {
            let want = classes
                .iter()
                .position(|c| c.size as usize >= left)
                .unwrap_or(classes.len() - 1);
            // The class that fits, then larger ones, then smaller ones.
            let order = (want..classes.len()).chain((0..want).rev());
            let Some((c, index)) = order
                .clone()
                .find_map(|c| self.slices.alloc(c).map(|i| (c, i)))
            else {
                for (i, _) in got {
                    self.slices.free_local(i);
                }
                return None;
            };
            let n = left.min(classes[c].size as usize);
            got.push((index, n));
            left -= n;
        }
        Some(got)
    }

    /// Sends one message of `len` (> 0) bytes on stream `id`; the caller holds the
    /// stream's send lock, so the stream's messages go in order.
    pub(crate) async fn send_message(
        &self,
        stream: &StreamSlot,
        mut msg: impl Payload,
        len: usize,
    ) -> Result<(), Error> {
        let fits_ever = len as u64 <= self.mine.layout().data_bytes;
        let slices = match self.config.exhaustion {
            Exhaustion::Fallback => {
                let mut s = self.alloc(len);
                if s.is_none() && self.drain_releases()? > 0 {
                    s = self.alloc(len);
                }
                s
            }
            Exhaustion::Wait(_) if !fits_ever => return Err(Error::Exhausted),
            Exhaustion::Wait(d) => {
                let deadline = Instant::now() + d;
                Some(
                    self.wait_for(Some(deadline), |me| Ok(me.alloc(len)))
                        .await?,
                )
            }
        };
        let Some(slices) = slices else {
            return self.send_on_socket(stream, msg.into_buf(len), len).await;
        };
        let mut descs = Vec::with_capacity(slices.len());
        let last = slices.len() - 1;
        for (k, &(index, n)) in slices.iter().enumerate() {
            self.mine
                .with_slice_mut(index, n, |dst| msg.write_next(dst));
            descs.push(Desc::Data {
                stream: 0,
                slice: index,
                len: n as u32,
                more: k != last,
            });
        }
        self.push_descs(stream, &descs).await?;
        self.shm_sends
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Pushes `stream`'s descriptors in order, waiting for ring room as needed.
    pub(crate) async fn push_descs(
        &self,
        stream: &StreamSlot,
        descs: &[Desc],
    ) -> Result<(), Error> {
        let mut done = 0;
        while done < descs.len() {
            self.check_open()?;
            let pushed = {
                let mut t = lock(&self.desc_tail);
                let ring = self.mine.desc_ring();
                let room = ring.room(*t)? as usize;
                let n = room.min(descs.len() - done);
                if n > 0 {
                    let id = self.stream_id(stream)?;
                    for d in &descs[done..done + n] {
                        if let Desc::Data { slice, .. } = *d {
                            self.slices.lend(slice);
                        }
                        ring.push(&mut t, d.with_stream(id).encode())?;
                    }
                }
                n
            };
            if pushed > 0 {
                done += pushed;
                self.notify_peer();
            }
            if done < descs.len() {
                self.wait_for(None, Self::ring_room).await?;
            }
        }
        Ok(())
    }

    /// The fallback: a `Socket` descriptor in the ring (so the stream's order holds) and
    /// the bytes in a data frame on the socket, the frame written while holding the
    /// socket, which the descriptor was pushed under too: frames and their descriptors
    /// are in the same order.
    async fn send_on_socket(
        &self,
        stream: &StreamSlot,
        mut msg: impl Buf,
        len: usize,
    ) -> Result<(), Error> {
        loop {
            self.check_open()?;
            let guard = self.wlock.lock().await;
            let pushed = {
                let mut t = lock(&self.desc_tail);
                let ring = self.mine.desc_ring();
                if ring.room(*t)? > 0 {
                    let d = Desc::Socket {
                        stream: self.stream_id(stream)?,
                        len: len as u32,
                    };
                    ring.push(&mut t, d.encode())?
                } else {
                    false
                }
            };
            if pushed {
                // The wake goes out after the frame (we hold the socket).
                self.notify_peer();
                let head = control::data_head(len as u32);
                let r = control::write_all(&*self.sock, &head, &mut msg).await;
                drop(guard);
                self.after_write();
                if let Err(e) = r {
                    self.finish(Ended::Failed(e.clone()));
                    return Err(e);
                }
                self.socket_sends
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(());
            }
            drop(guard);
            self.after_write();
            self.wait_for(None, Self::ring_room).await?;
        }
    }

    fn after_write(&self) {
        if self.wake_pending.load(std::sync::atomic::Ordering::SeqCst) {
            self.wake_peer();
        }
    }

    #[cfg(test)]
    pub(crate) fn raw_push(&self, words: [u64; 2]) {
        let mut t = lock(&self.desc_tail);
        assert!(self.mine.desc_ring().push(&mut t, words).unwrap());
        drop(t);
        self.notify_peer();
        self.wake_peer();
    }

    #[cfg(test)]
    pub(crate) fn raw_desc_tail(&self, tail: u32) {
        self.mine.desc_ring().raw_tail(tail);
        self.wake_peer();
    }

    #[cfg(test)]
    pub(crate) fn raw_peer_desc_head(&self, head: u32) {
        self.peer.desc_ring().raw_head(head);
    }

    #[cfg(test)]
    pub(crate) fn raw_release(&self, index: u64) {
        let mut t = lock(&self.peer_rel_tail);
        assert!(self.peer.release_ring().push(&mut t, [index]).unwrap());
        drop(t);
        self.wake_peer();
    }

    #[cfg(test)]
    pub(crate) async fn raw_frame(&self, bytes: &[u8]) {
        let _g = self.wlock.lock().await;
        control::write_all(&*self.sock, bytes, &mut bytes::Bytes::new())
            .await
            .unwrap();
    }

    /// A session core over a scripted socket and two regions in memory, with a small
    /// layout and no spin; the test plays the peer through `peer`'s rings.
    #[cfg(test)]
    pub(crate) fn scripted(script: &crate::sys::fake::Script, client: bool) -> Arc<Inner> {
        let config = Config::default()
            .region_size(16 << 10)
            .size_classes([(256, 1), (4096, 1)])
            .queue_capacity(16)
            .spin(std::time::Duration::ZERO);
        let layout = config.layout().expect("a good layout");
        let mine = Region::in_memory(layout.clone());
        let peer = Region::in_memory(layout);
        Inner::new(Box::new(script.clone()), config, client, mine, peer, false)
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;
    use crate::control::data_head;
    use crate::sys::fake::{Script, Step, block_on, poll_times};

    /// More than this side's region holds, so it goes over the socket.
    const BIG: usize = 20 << 10;

    fn big() -> bytes::Bytes {
        (0..BIG).map(|i| i as u8).collect()
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = data_head(payload.len() as u32).to_vec();
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_wake_goes_only_to_a_parked_peer_and_once() {
        let s = Script::default();
        let inner = Inner::scripted(&s, false);
        inner.notify_peer();
        assert!(s.written().is_empty(), "a busy peer is not woken");
        inner.peer.parked().store(1, Ordering::Relaxed);
        inner.notify_peer();
        inner.notify_peer();
        assert_eq!(s.written(), [FRAME_WAKE], "one wake per park");
        assert_eq!(inner.peer.parked().load(Ordering::Relaxed), 0);
        inner.peer.waiting().store(1, Ordering::Relaxed);
        inner.notify_peer_waiting();
        assert_eq!(s.written(), [FRAME_WAKE, FRAME_WAKE]);
    }

    /// A message goes into this side's slices (one of each class here) and is
    /// announced in its ring; the peer reads it in place and gives the slices back.
    #[test]
    fn a_message_is_lent_through_this_sides_slices() {
        let s = Script::default();
        let inner = Inner::scripted(&s, true);
        let (slot, _rx) = inner.open_local().unwrap();
        let msg: bytes::Bytes = (0..4096 + 10).map(|i| (i % 251) as u8).collect();
        block_on(inner.send_message(&slot, BufPayload(msg.clone()), msg.len())).unwrap();
        assert_eq!(inner.slices.lent(), 2);
        assert!(s.written().is_empty(), "the peer is not parked: no wake");

        // The peer's side: descriptors from our ring, bytes from our slices.
        let (mut head, mut got, mut descs) = (0, Vec::new(), Vec::new());
        while let Some(words) = inner.mine.desc_ring().pop(&mut head).unwrap() {
            let d = Desc::decode(words, inner.mine.layout(), u32::MAX).unwrap();
            let Desc::Data { slice, len, .. } = d else {
                panic!("{d:?}");
            };
            got.extend_from_slice(inner.mine.slice(slice, len as usize).unwrap());
            descs.push(d);
        }
        assert_eq!(got, msg);
        assert!(matches!(
            descs[..],
            [
                Desc::Data {
                    stream: 1,
                    more: true,
                    ..
                },
                Desc::Data {
                    stream: 1,
                    more: false,
                    ..
                },
            ]
        ));
        let mut tail = 0;
        for d in &descs {
            let Desc::Data { slice, .. } = *d else {
                unreachable!()
            };
            let released = inner
                .mine
                .release_ring()
                .push(&mut tail, [u64::from(slice)]);
            assert!(released.unwrap());
        }
        assert_eq!(inner.drain_releases(), Ok(2));
        assert_eq!(inner.slices.lent(), 0);
    }

    #[test]
    fn a_message_too_big_for_the_region_goes_whole_on_the_socket() {
        // The write loop's own hiccups are `control`'s tests; here, one short write.
        let s = Script::new([Step::Write(3), Step::Write(usize::MAX)]);
        let inner = Inner::scripted(&s, true);
        let (slot, _rx) = inner.open_local().unwrap();
        block_on(inner.send_message(&slot, BufPayload(big()), BIG)).unwrap();
        assert_eq!(s.written(), frame(&big()));
        assert_eq!(
            inner
                .socket_sends
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // Its place in the stream's order: a `Socket` descriptor in this side's ring.
        let words = inner.mine.desc_ring().pop(&mut 0).unwrap().unwrap();
        let d = Desc::decode(words, inner.mine.layout(), u32::MAX).unwrap();
        let want = Desc::Socket {
            stream: 1,
            len: BIG as u32,
        };
        assert_eq!(d, want);
        assert!(inner.check_open().is_ok());
    }

    #[test]
    fn a_wake_never_cuts_into_a_data_frame() {
        let s = Script::new([Step::Write(3), Step::NotReady, Step::Write(usize::MAX)]);
        let inner = Inner::scripted(&s, true);
        let (slot, _rx) = inner.open_local().unwrap();
        let mut send = std::pin::pin!(inner.send_message(&slot, BufPayload(big()), BIG));
        assert!(
            poll_times(send.as_mut(), 1).is_pending(),
            "stopped mid-frame"
        );
        assert_eq!(s.written(), frame(&big())[..3]);
        inner.peer.parked().store(1, Ordering::Relaxed);
        inner.notify_peer();
        assert_eq!(s.written().len(), 3, "the wake waits for the frame");
        assert!(matches!(poll_times(send, 10), Poll::Ready(Ok(()))));
        let mut want = frame(&big());
        want.push(FRAME_WAKE);
        assert_eq!(s.written(), want);
    }

    #[test]
    fn a_peer_gone_mid_frame_fails_the_session() {
        let s = Script::new([Step::Write(3), Step::Write(0)]);
        let inner = Inner::scripted(&s, true);
        let (slot, _rx) = inner.open_local().unwrap();
        let r = block_on(inner.send_message(&slot, BufPayload(big()), BIG));
        assert!(matches!(r, Err(Error::PeerClosed)), "{r:?}");
        assert!(matches!(
            inner.end.get(),
            Some(Ended::Failed(Error::PeerClosed))
        ));
        assert!(s.is_shut());
        assert_eq!(s.written().len(), 3, "no goodbye after a failure");
    }

    #[test]
    fn a_close_says_goodbye_unless_a_frame_is_half_written() {
        let s = Script::default();
        let inner = Inner::scripted(&s, false);
        inner.finish(Ended::Local);
        inner.finish(Ended::Local);
        assert_eq!(s.written(), [FRAME_GOODBYE], "once");
        assert!(s.is_shut());

        let s = Script::new([Step::Write(3), Step::NotReady, Step::Write(usize::MAX)]);
        let inner = Inner::scripted(&s, true);
        let (slot, _rx) = inner.open_local().unwrap();
        let mut send = std::pin::pin!(inner.send_message(&slot, BufPayload(big()), BIG));
        assert!(poll_times(send.as_mut(), 1).is_pending());
        inner.finish(Ended::Local);
        assert_eq!(
            s.written().len(),
            3,
            "a goodbye now would be read as frame bytes"
        );
        assert!(s.is_shut(), "the peer sees a hang-up instead");

        for why in [Ended::Peer, Ended::Failed(Error::PeerClosed)] {
            let s = Script::default();
            Inner::scripted(&s, false).finish(why);
            assert!(s.written().is_empty() && s.is_shut());
        }
    }
}
