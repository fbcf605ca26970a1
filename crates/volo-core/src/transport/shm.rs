//! The shared-memory transport: `shm:/path` addresses, over shm-ipc sessions.
//!
//! A session (a Unix socket for control and wake-ups, a memfd region per side for the
//! data) is costly to set up and holds a shared region, so a client opens one session
//! per peer and each of its connections is a stream of that session; the server
//! accepts sessions and takes every stream a session opens as one connection. A frame
//! goes as one shm-ipc message: the sender copies it into shared memory once, and the
//! receiver takes it as `Bytes` over the shared slices (no copy; the slices go back to
//! the sender's region when the frame is dropped). Framing on a stream is the same as on
//! a socket, so detection, limits and every framing and protocol work unchanged.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use shm_ipc::{Listener, Session, Stream};
use thrift_codec::LinkBuffer;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{Conn, end_of_stream, lock, take_frame};
use crate::context::Address;

/// Streams accepted and not yet taken by the server, at most.
const BACKLOG: usize = 128;

/// One stream of a session, used as a connection.
#[derive(Debug)]
pub(crate) struct ShmConn {
    stream: Stream,
    /// Keeps the session open while its streams are in use.
    session: Arc<Session>,
    input: Mutex<LinkBuffer>,
    output: Mutex<LinkBuffer>,
    closed: AtomicBool,
    peer: PathBuf,
}

impl ShmConn {
    fn new(stream: Stream, session: Arc<Session>, peer: PathBuf) -> Self {
        ShmConn {
            stream,
            session,
            input: Mutex::new(LinkBuffer::new()),
            output: Mutex::new(LinkBuffer::new()),
            closed: AtomicBool::new(false),
            peer,
        }
    }

    fn fail<T>(&self, e: io::Error) -> io::Result<T> {
        self.closed.store(true, Ordering::Release);
        Err(e)
    }

    pub(crate) async fn read_frame<F>(&self, mut frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        loop {
            match take_frame(&self.input, &mut frame_len) {
                Ok(Some(frame)) => return Ok(Some(frame)),
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
            match self.stream.recv().await {
                Ok(Some(message)) => {
                    let mut input = lock(&self.input);
                    for chunk in message.into_chunks() {
                        input.insert(chunk);
                    }
                }
                Ok(None) => {
                    self.closed.store(true, Ordering::Release);
                    return end_of_stream(lock(&self.input).len());
                }
                Err(e) => return self.fail(e.into()),
            }
        }
    }

    pub(crate) fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        f(&mut lock(&self.output))
    }

    /// Sends what was written since the last flush as one message.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        let out = std::mem::take(&mut *lock(&self.output));
        if out.is_empty() {
            return Ok(());
        }
        match self.stream.send(out).await {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e.into()),
        }
    }

    pub(crate) fn input_len(&self) -> usize {
        lock(&self.input).len()
    }

    pub(crate) fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Acquire) && self.session.is_open()
    }

    pub(crate) fn peer(&self) -> Address {
        Address::Shm(self.peer.clone())
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stream.close();
    }
}

/// The client side: one session per peer, opened on first use and again after it
/// ends; each connection is a new stream on it.
#[derive(Debug, Default)]
pub(crate) struct ShmDialer {
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
}

impl ShmDialer {
    /// A new stream to `path`, on the session to it (opened within `timeout` if there
    /// is none).
    pub(crate) async fn connect(&self, path: &Path, timeout: Duration) -> io::Result<Conn> {
        let mut session = self.session.lock().await;
        let open = match session.as_ref().filter(|s| s.is_open()) {
            Some(s) => Arc::clone(s),
            None => {
                let config = shm_ipc::Config::default().handshake_timeout(timeout);
                let s = tokio::time::timeout(timeout, Session::connect(path, config))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
                let s = Arc::new(s);
                *session = Some(Arc::clone(&s));
                s
            }
        };
        let stream = open.open_stream()?;
        Ok(Conn::Shm(Box::new(ShmConn::new(
            stream,
            open,
            path.to_path_buf(),
        ))))
    }
}

/// The server side: a task accepts sessions, a task per session accepts its streams,
/// and the streams wait in a bounded queue for the server's accept loop.
#[derive(Debug)]
pub(crate) struct ShmAcceptor {
    incoming: tokio::sync::Mutex<mpsc::Receiver<Conn>>,
    /// Accepts sessions; aborting it drops the listener (its socket file goes) and the
    /// per-session tasks.
    task: tokio::task::JoinHandle<()>,
}

impl ShmAcceptor {
    pub(crate) fn bind(path: &Path) -> io::Result<Self> {
        let listener = Listener::bind(path, shm_ipc::Config::default())?;
        let (tx, rx) = mpsc::channel(BACKLOG);
        let task = tokio::spawn(accept_sessions(listener, tx));
        Ok(ShmAcceptor {
            incoming: tokio::sync::Mutex::new(rx),
            task,
        })
    }

    pub(crate) async fn accept(&self) -> io::Result<Conn> {
        self.incoming
            .lock()
            .await
            .recv()
            .await
            .ok_or_else(|| io::Error::other("the shm listener stopped"))
    }

    pub(crate) fn close(&self) {
        self.task.abort();
    }
}

impl Drop for ShmAcceptor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_sessions(listener: Listener, tx: mpsc::Sender<Conn>) {
    let mut sessions = JoinSet::new();
    let path = listener.local_path().to_path_buf();
    loop {
        while sessions.try_join_next().is_some() {}
        let session = match listener.accept().await {
            Ok(s) => Arc::new(s),
            Err(_) if tx.is_closed() => return,
            // A failed handshake concerns that peer only; a shortage (of fds...) passes:
            // wait a little rather than spin on it.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let tx = tx.clone();
        let path = path.clone();
        sessions.spawn(async move {
            while let Ok(Some(stream)) = session.accept_stream().await {
                let conn = ShmConn::new(stream, Arc::clone(&session), path.clone());
                if tx.send(Conn::Shm(Box::new(conn))).await.is_err() {
                    return;
                }
            }
        });
    }
}
