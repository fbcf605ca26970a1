//! Sessions: listening, connecting, and the handle users hold. The handshake is in
//! [`handshake`](crate::handshake); what a session shares with its streams and its
//! reader is in [`conn`](crate::conn).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::config::Config;
use crate::conn::{Ended, Inner};
use crate::error::Error;
use crate::handshake;
use crate::reader::Reader;
use crate::stream::Stream;
use crate::sys::Control;

/// Handshakes a listener runs at once, at most; connections beyond them are closed as
/// they come, so silent clients cannot pile up.
const MAX_PENDING_HANDSHAKES: usize = 128;

/// Listens on a Unix socket path for sessions.
///
/// Handshakes run concurrently (up to 128), each bounded by
/// [`Config::handshake_timeout`], so a client that connects and stays silent does not
/// hold up the clients behind it. The socket file is removed when the listener is
/// dropped; handshakes still in progress then are abandoned.
#[derive(Debug)]
pub struct Listener {
    sock: UnixListener,
    path: PathBuf,
    config: Config,
    /// Handshakes in progress; kept across `accept` calls (and across an `accept`
    /// future dropped half-way), so none is lost.
    pending: tokio::sync::Mutex<JoinSet<Result<Session, Error>>>,
}

impl Listener {
    /// Binds `path` (which must not exist). Must be called within a tokio runtime.
    /// Fails with `InvalidInput` if `config` describes an unusable region.
    pub fn bind(path: impl AsRef<Path>, config: Config) -> io::Result<Listener> {
        config.layout()?;
        let path = path.as_ref().to_path_buf();
        let sock = UnixListener::bind(&path)?;
        Ok(Listener {
            sock,
            path,
            config,
            pending: tokio::sync::Mutex::new(JoinSet::new()),
        })
    }

    /// The path this listener is bound to.
    pub fn local_path(&self) -> &Path {
        &self.path
    }

    /// The next session whose handshake finished. A client that fails its handshake
    /// (or does not finish it within [`Config::handshake_timeout`]) yields an error for
    /// that connection only; call `accept` again for the next one. Cancel-safe.
    pub async fn accept(&self) -> io::Result<Session> {
        let mut pending = self.pending.lock().await;
        loop {
            tokio::select! {
                Some(done) = pending.join_next(), if !pending.is_empty() => {
                    return match done {
                        Ok(r) => r.map_err(io::Error::from),
                        Err(e) => Err(io::Error::other(format!("a handshake task failed: {e}"))),
                    };
                }
                accepted = self.sock.accept() => {
                    let (sock, _) = accepted?;
                    if pending.len() >= MAX_PENDING_HANDSHAKES {
                        // Closed at once: the client sees the hang-up.
                        continue;
                    }
                    let config = self.config.clone();
                    pending.spawn(async move {
                        let timeout = config.handshake_timeout;
                        tokio::time::timeout(timeout, Session::start(Box::new(sock), config, false))
                            .await
                            .unwrap_or(Err(Error::Timeout))
                    });
                }
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Best effort: the file may already be gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection between two processes: a Unix socket and two shared regions, one per
/// direction. Many streams share it, told apart by their ids.
///
/// Dropping the session closes it (every stream of it ends); buffers received from it
/// stay valid until dropped.
#[derive(Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

/// Statistics of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Slices of this side's region currently lent to the peer.
    pub lent: usize,
    /// Slices of the peer's region this side holds (in undropped messages).
    pub held: usize,
    /// Messages sent through shared memory so far.
    pub shm_sends: u64,
    /// Messages sent over the socket because shared memory was full.
    pub socket_sends: u64,
    /// Wake-ups this side sent the peer: sends that found the peer's reader parked.
    pub wakes: u64,
    /// Of those, the ones sent as a byte on the socket (the peer's reader parks on the
    /// socket, not on a futex: see [`Config::futex_wake`]).
    pub wake_bytes: u64,
}

/// A reply the session's user waits for, counted while the guard lives (see
/// [`Session::reply_due`]).
#[derive(Debug)]
#[must_use = "the reply is due only while the guard lives"]
pub struct ReplyDue<'a> {
    inner: &'a Inner,
}

impl Drop for ReplyDue<'_> {
    fn drop(&mut self) {
        self.inner
            .replies_due
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Session {
    /// Connects to a [`Listener`] at `path` and runs the handshake, all within
    /// [`Config::handshake_timeout`].
    pub async fn connect(path: impl AsRef<Path>, config: Config) -> io::Result<Session> {
        config.layout()?;
        let timeout = config.handshake_timeout;
        let path = path.as_ref().to_path_buf();
        let run = async move {
            let sock = UnixStream::connect(&path).await?;
            Session::start(Box::new(sock), config, true).await
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(r) => r.map_err(io::Error::from),
            Err(_) => Err(Error::Timeout.into()),
        }
    }

    async fn start(sock: Box<dyn Control>, config: Config, client: bool) -> Result<Session, Error> {
        // Where io_uring is refused, the reader parks on the socket (the hello says so).
        let waiter = config
            .futex_wake
            .then(crate::futex::Waiter::new)
            .and_then(Result::ok);
        let (mine, peer, peer_futex) =
            handshake::run(&*sock, config.layout()?, client, waiter.is_some()).await?;
        let inner = Inner::new(sock, config, client, mine, peer, peer_futex);
        inner.set_reader(tokio::spawn(Reader::new(inner.clone(), waiter).run()));
        Ok(Session { inner })
    }

    /// Opens a stream (ids: odd from the connecting side, even from the accepting one).
    /// Fails if the session is closed or [`Config::max_streams`] of this side's streams
    /// are open.
    pub fn open_stream(&self) -> io::Result<Stream> {
        Stream::open(&self.inner).map_err(io::Error::from)
    }

    /// The next stream the peer opened; `Ok(None)` once the session closed cleanly
    /// (either side closed it), an error if it failed.
    pub async fn accept_stream(&self) -> io::Result<Option<Stream>> {
        let mut rx = self.inner.accept_rx.lock().await;
        match rx.recv().await {
            Some(s) => Ok(Some(Stream::accepted(&self.inner, s))),
            None => match self.inner.end.get() {
                Some(Ended::Failed(e)) => Err(e.into()),
                _ => Ok(None),
            },
        }
    }

    /// Closes the session: the peer is told (its receivers end cleanly), every stream
    /// of it ends, pending calls return. Idempotent.
    pub fn close(&self) {
        self.inner.finish(Ended::Local);
    }

    /// Whether the session is still open.
    pub fn is_open(&self) -> bool {
        self.inner.end.get().is_none()
    }

    /// Why the session ended, if it did and not by a clean close.
    pub fn error(&self) -> Option<Error> {
        match self.inner.end.get() {
            Some(Ended::Failed(e)) => Some(e),
            _ => None,
        }
    }

    /// Counts a reply as due while the guard lives: a request was sent and its answer
    /// is awaited. While one is, the reader polls shared memory for the whole
    /// [`Config::spin`] before it parks, since the answer comes soon and a wake-up
    /// costs both sides more than the wait (a reader parked when the first reply
    /// becomes due gets up); while none is, it polls only if the peer's messages have
    /// not lately been sparse (see [`Config::spin`]). A client that sends requests and
    /// awaits their answers should hold one from each send to its answer: at low rates
    /// its reader then polls for the answers and for nothing else.
    pub fn reply_due(&self) -> ReplyDue<'_> {
        let before = self
            .inner
            .replies_due
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A reader parked with nothing due gets up to poll for this one. One that is
        // not parked needs no word: it reads the count before it parks (and one that
        // parks in between is woken by the reply, later, but nothing is lost).
        if before == 0
            && self
                .inner
                .mine
                .parked()
                .load(std::sync::atomic::Ordering::Relaxed)
                != 0
        {
            self.inner.due.notify_one();
        }
        ReplyDue { inner: &self.inner }
    }

    /// Slice accounting, see [`Stats`].
    pub fn stats(&self) -> Stats {
        Stats {
            lent: self.inner.slices.lent(),
            held: self
                .inner
                .held
                .iter()
                .filter(|h| h.load(std::sync::atomic::Ordering::Relaxed))
                .count(),
            shm_sends: self
                .inner
                .shm_sends
                .load(std::sync::atomic::Ordering::Relaxed),
            socket_sends: self
                .inner
                .socket_sends
                .load(std::sync::atomic::Ordering::Relaxed),
            wakes: self.inner.wakes.load(std::sync::atomic::Ordering::Relaxed),
            wake_bytes: self
                .inner
                .wake_bytes
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.inner.finish(Ended::Local);
    }
}
