//! The shared-memory transport: `shm:/path` addresses, over shm-ipc sessions.
//!
//! A session (a Unix socket for control and wake-ups, a memfd region per side for the
//! data) is costly to set up and holds a shared region, so a client opens one session
//! per peer and each of its connections is a stream of that session; the server
//! accepts sessions and takes every stream a session opens as one connection. A frame
//! goes as one shm-ipc message: the sender copies it into shared memory once, and the
//! receiver copies it once into its own memory and gives the slices back at once.
//! Framing on a stream is the same as on a socket, so detection, limits and every
//! framing and protocol work unchanged.
//!
//! Why the receiver copies, though shm-ipc could hand out the frame in place: the peer
//! can still write the slices it lent us. Decoding checks strings as UTF-8 once and then
//! hands them out as `&str` (zero-copy slices of the frame); a peer that rewrote those
//! bytes afterwards would break that guarantee, and decoded values that point into the
//! frame would keep the sender's slices lent for as long as the handler holds them,
//! filling its region. One copy into private memory closes both; it is still one copy
//! and no system call against the two copies and the system calls of a socket.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use shm_ipc::{Listener, Session, Stream};
use thrift_wire::LinkBuffer;
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
                    // Copied out of shared memory (see the module docs); the slices go
                    // back to the peer when `message` is dropped, right here.
                    let mut input = lock(&self.input);
                    input.reserve(message.len());
                    for chunk in message.into_chunks() {
                        input.write(&chunk);
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

    /// Counts a reply as due on the session while the guard lives.
    pub(crate) fn reply_due(&self) -> shm_ipc::ReplyDue<'_> {
        self.session.reply_due()
    }

    pub(crate) fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Acquire) && self.session.is_open()
    }

    pub(crate) fn peer(&self) -> Address {
        Address::Shm(std::sync::Arc::from(self.peer.as_path()))
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
                // The handshake timeout bounds the connect and the handshake together.
                let config = shm_ipc::Config::default().handshake_timeout(timeout);
                let s = Arc::new(Session::connect(path, config).await?);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame read from a stream is a copy: while the reader still holds it, none of
    /// the peer's shared slices are held (they went back as soon as it was read).
    #[test]
    fn frames_are_copied_out_of_shared_memory() {
        let rt = crate::test_support::runtime();
        rt.block_on(async {
            let dir = std::env::temp_dir().join(format!("volo-shm-copy-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("s.sock");
            let listener = Listener::bind(&path, shm_ipc::Config::default()).unwrap();
            let (server, client) = tokio::join!(
                listener.accept(),
                Session::connect(&path, shm_ipc::Config::default())
            );
            let (server, client) = (Arc::new(server.unwrap()), client.unwrap());
            let sender = client.open_stream().unwrap();
            let payload = vec![7u8; 300 << 10];
            let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&payload);
            sender.send(&frame[..]).await.unwrap();
            let stream = server.accept_stream().await.unwrap().unwrap();
            let conn = ShmConn::new(stream, Arc::clone(&server), path.clone());
            let got = conn
                .read_frame(|input| {
                    let Some(h) = input.peek(4) else {
                        return Ok(None);
                    };
                    Ok(Some(
                        4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize,
                    ))
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&got[..], &frame[..]);
            assert_eq!(server.stats().held, 0, "a shared slice is still held");
            drop(got);
            let _ = std::fs::remove_dir_all(&dir);
        });
    }

    /// The replies of the calls whose frames came in one message go back in one
    /// message when the calls finish at once; a call that waits (`wait`, until the
    /// test opens its gate) is answered after them, in a message of its own.
    #[test]
    fn replies_of_frames_that_came_together_go_back_together() {
        use crate::codec::Protocol;
        use crate::codec::ttheader::{Header, HeaderLimits};
        use crate::test_support::{message, run_bounded, start_on};
        use bytes::{Buf, BufMut, BytesMut};
        use thrift_wire::{Binary, MessageType};

        // The sequence ids of the TTHeader replies one message holds, in order.
        fn seq_ids(mut msg: shm_ipc::Message) -> Vec<i32> {
            let mut bytes = msg.copy_to_bytes(msg.len());
            let mut ids = Vec::new();
            while bytes.len() >= 4 {
                let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
                let frame = bytes.split_to(4 + len);
                let (head, _) = Header::decode(&frame, &HeaderLimits::default()).unwrap();
                ids.push(head.seq_id);
            }
            ids
        }
        let dir = std::env::temp_dir().join(format!("volo-shm-batch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let at = Address::Shm(path.as_path().into());
        run_bounded(Duration::from_secs(30), async {
            let running = start_on(crate::server::ServerConfig::default(), &at).await;
            let session = Session::connect(&path, shm_ipc::Config::default())
                .await
                .unwrap();
            let stream = session.open_stream().unwrap();
            let mut calls = BytesMut::new();
            for (seq, method) in [(1, "wait"), (2, "echo"), (3, "echo")] {
                let msg = message::<Binary>(MessageType::Call, method, seq, 1, "x");
                Header::new(seq, Protocol::Binary)
                    .write(msg.len(), &mut calls)
                    .unwrap();
                calls.put_slice(&msg);
            }
            stream.send(calls.freeze()).await.unwrap();
            let first = stream.recv().await.unwrap().expect("the echoes' replies");
            assert_eq!(seq_ids(first), [2, 3], "the echoes, in one message");
            running.gate.add_permits(1);
            let second = stream.recv().await.unwrap().expect("the wait's reply");
            assert_eq!(seq_ids(second), [1]);
            session.close();
            running.stop().await;
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
