//! A TLS session over any connection: ciphertext moves between the inner connection's
//! buffers and rustls, plaintext lives in buffers of this connection.

use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Waker};

use bytes::{Buf, BufMut, Bytes};
use thrift_wire::LinkBuffer;

use crate::context::Address;
use crate::transport::{Conn, FrameIo, end_of_stream, lock, take_frame_from};

/// A connection whose bytes go through a TLS session.
///
/// Reading: a chunk of ciphertext is taken from the inner connection's input as it
/// lies in its buffer (no copy), handed to rustls, and the plaintext rustls gives back
/// is appended to this connection's input, where frames are cut as on a plain
/// connection. Writing: callers encode into this connection's output; a flush
/// encrypts it into the inner connection's output and flushes that.
///
/// The locks are never held across an await, and are always taken in the order
/// output, session, then the inner connection's, so the reader of a mux
/// connection and its writers never wait on each other for long.
#[derive(Debug)]
pub(crate) struct TlsConn {
    inner: Conn,
    session: Mutex<Session>,
    /// Plaintext written and not yet encrypted.
    output: Mutex<LinkBuffer>,
    /// One flush of the inner connection at a time: a reader that must answer the
    /// peer (an alert, a key update) flushes too.
    flushing: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Session {
    tls: rustls::Connection,
    /// Plaintext received and not yet taken as a frame.
    input: LinkBuffer,
    /// The peer ended the session (close_notify): nothing more will come.
    peer_closed: bool,
    /// The session failed (a TLS error, or the inner connection's).
    failed: bool,
}

/// A rustls error as an I/O error that keeps it as its cause.
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Takes the first chunk of whatever the inner connection has received, as it lies in
/// its buffer.
fn chunk_len(input: &mut LinkBuffer) -> io::Result<Option<usize>> {
    Ok((!input.is_empty()).then(|| input.chunk().len()))
}

fn not_a_socket() -> io::Error {
    io::Error::other("TLS runs over socket connections only")
}

/// The next chunk of ciphertext from a socket connection. (Matched here rather than
/// through `Conn`'s own `read_frame`, whose future would contain this one's.)
async fn read_chunk(inner: &Conn) -> io::Result<Option<Bytes>> {
    match inner {
        Conn::Netpoll(c) => c.read_frame(chunk_len).await,
        Conn::Tokio(c) => c.read_frame(chunk_len).await,
        Conn::Shm(_) | Conn::Tls(_) => Err(not_a_socket()),
    }
}

/// Flushes a socket connection's output.
async fn flush_inner(inner: &Conn) -> io::Result<()> {
    match inner {
        Conn::Netpoll(c) => c.flush().await,
        Conn::Tokio(c) => c.flush().await,
        Conn::Shm(_) | Conn::Tls(_) => Err(not_a_socket()),
    }
}

impl TlsConn {
    fn new(inner: Conn, tls: rustls::Connection) -> Self {
        TlsConn {
            inner,
            session: Mutex::new(Session {
                tls,
                input: LinkBuffer::new(),
                peer_closed: false,
                failed: false,
            }),
            output: Mutex::new(LinkBuffer::new()),
            flushing: tokio::sync::Mutex::new(()),
        }
    }

    /// Runs the handshake of `tls` over `inner` to its end. The caller bounds it in
    /// time. On failure, the alert rustls prepared is sent before the error returns,
    /// so the peer learns why.
    pub(crate) async fn handshake(inner: Conn, tls: rustls::Connection) -> io::Result<TlsConn> {
        let conn = TlsConn::new(inner, tls);
        loop {
            let (handshaking, wants_write) = {
                let s = lock(&conn.session);
                (s.tls.is_handshaking(), s.tls.wants_write())
            };
            if wants_write {
                conn.send_pending().await?;
            }
            if !handshaking {
                return Ok(conn);
            }
            match read_chunk(&conn.inner).await {
                Ok(Some(ciphertext)) => conn.receive(&ciphertext).await?,
                Ok(None) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Hands `ciphertext` to rustls and moves the plaintext it yields into the input;
    /// sends what rustls has to say back (an alert on failure, a key update...).
    async fn receive(&self, ciphertext: &[u8]) -> io::Result<()> {
        let fed = self.feed(ciphertext);
        let wants_write = lock(&self.session).tls.wants_write();
        if wants_write {
            let sent = self.send_pending().await;
            fed?;
            return sent;
        }
        fed
    }

    fn feed(&self, mut ciphertext: &[u8]) -> io::Result<()> {
        let mut s = lock(&self.session);
        let Session {
            tls,
            input,
            peer_closed,
            failed,
        } = &mut *s;
        while !ciphertext.is_empty() {
            // rustls takes what fits in its buffer; the loop hands over the rest after
            // processing that.
            let taken = tls.read_tls(&mut ciphertext)?;
            if taken == 0 {
                *failed = true;
                return Err(io::Error::other("the TLS session took no more input"));
            }
            let state = tls.process_new_packets().map_err(|e| {
                *failed = true;
                tls_error(e)
            })?;
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                tls.reader().read_exact(input.malloc(n))?;
            }
            if state.peer_has_closed() {
                *peer_closed = true;
            }
        }
        Ok(())
    }

    /// Moves the ciphertext rustls has ready into the inner connection's output.
    fn drain_session(session: &mut Session, inner: &Conn) -> io::Result<()> {
        while session.tls.wants_write() {
            inner.write_with(|out| session.tls.write_tls(&mut out.writer()))?;
        }
        Ok(())
    }

    /// Sends what rustls has ready.
    async fn send_pending(&self) -> io::Result<()> {
        let _turn = self.flushing.lock().await;
        Self::drain_session(&mut lock(&self.session), &self.inner)?;
        flush_inner(&self.inner).await.inspect_err(|_| self.fail())
    }

    /// Encrypts the plaintext output into the inner connection's output, in pieces as
    /// large as rustls' buffer takes.
    fn encrypt(&self) -> io::Result<()> {
        let mut output = lock(&self.output);
        let mut s = lock(&self.session);
        loop {
            Self::drain_session(&mut s, &self.inner)?;
            if output.is_empty() {
                return Ok(());
            }
            let taken = s.tls.writer().write(output.chunk())?;
            if taken == 0 && !s.tls.wants_write() {
                s.failed = true;
                return Err(io::Error::other("the TLS session took no more output"));
            }
            output.advance(taken);
        }
    }

    fn fail(&self) {
        lock(&self.session).failed = true;
    }

    /// Ends the session as TLS asks (RFC 8446 section 6.1: each side sends a
    /// close_notify alert before it closes its side): queues the alert and hands it
    /// to the socket without waiting. A peer that gets none sees the connection cut,
    /// which OpenSSL logs as an error ("unexpected eof while reading"). Nothing is
    /// sent on a session that failed or never finished its handshake; after this, the
    /// session sends nothing more.
    fn say_goodbye(&self) {
        {
            let mut s = lock(&self.session);
            let unusable = s.failed || s.tls.is_handshaking();
            s.failed = true;
            if unusable {
                return;
            }
            s.tls.send_close_notify();
            if Self::drain_session(&mut s, &self.inner).is_err() {
                return;
            }
        }
        // One attempt: both socket transports write on the caller's thread when the
        // socket takes the bytes, which an idle socket does for an alert of a few
        // dozen bytes. If it does not, the alert is dropped with the socket.
        let flush = pin!(flush_inner(&self.inner));
        let _ = flush.poll(&mut Context::from_waker(Waker::noop()));
    }

    /// Sends close_notify (see [`say_goodbye`](Self::say_goodbye)) and closes the
    /// socket.
    pub(crate) fn close(&self) {
        self.say_goodbye();
        self.inner.close();
    }
}

impl Drop for TlsConn {
    /// A connection let go (by a pool, a client, a server that is done with it) ends
    /// its session with close_notify, as [`close`](Self::close) does.
    fn drop(&mut self) {
        self.say_goodbye();
    }
}

impl FrameIo for TlsConn {
    async fn read_frame<F>(&self, mut frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>> + Send,
    {
        loop {
            {
                let mut s = lock(&self.session);
                match take_frame_from(&mut s.input, &mut frame_len) {
                    Ok(Some(frame)) => return Ok(Some(frame)),
                    Ok(None) => {}
                    Err(e) => {
                        s.failed = true;
                        return Err(e);
                    }
                }
                if s.peer_closed {
                    return end_of_stream(s.input.len());
                }
            }
            match read_chunk(&self.inner).await {
                Ok(Some(ciphertext)) => {
                    self.receive(&ciphertext)
                        .await
                        .inspect_err(|_| self.fail())?;
                }
                // The socket ended without close_notify: an end like any other
                // between frames (a frame cut short is still an error).
                Ok(None) => {
                    let mut s = lock(&self.session);
                    s.peer_closed = true;
                    return end_of_stream(s.input.len());
                }
                Err(e) => {
                    self.fail();
                    return Err(e);
                }
            }
        }
    }

    fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        f(&mut lock(&self.output))
    }

    async fn flush(&self) -> io::Result<()> {
        let _turn = self.flushing.lock().await;
        self.encrypt().inspect_err(|_| self.fail())?;
        flush_inner(&self.inner).await.inspect_err(|_| self.fail())
    }

    fn input_len(&self) -> usize {
        lock(&self.session).input.len()
    }

    fn is_open(&self) -> bool {
        let usable = {
            let s = lock(&self.session);
            !s.failed && !s.peer_closed
        };
        usable && self.inner.is_open()
    }

    fn peer(&self) -> Option<Address> {
        self.inner.peer()
    }
}
