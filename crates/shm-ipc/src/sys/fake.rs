//! A scripted [`Control`] socket for tests, and a way to run futures without a runtime.
//!
//! Each read or write takes the next [`Step`] of the script, in order: bytes to read,
//! how much a write may take, an error, end of stream, or a readiness that is not there
//! yet. So a test puts the handshake, the reader or a writer through short reads, short
//! writes, `WouldBlock`, `Interrupted`, end of stream and errors in the order it wants,
//! with no socket and no clock. A read that meets a write step (or the other way round)
//! panics: the code did not do what the script expected, in the order expected.
//!
//! Wake and goodbye bytes (`send_byte`) are not scripted: they always go, until
//! `shutdown`, and are logged with the written bytes.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{BufMut, BytesMut};

use super::Control;

/// One step of a script.
#[derive(Debug)]
pub(crate) enum Step {
    /// The next read gets these bytes, or as many as it has room for (the rest stays
    /// for the read after).
    Read(Vec<u8>),
    /// As `Read`, with these descriptors (they come with the first bytes).
    ReadFds(Vec<u8>, Vec<OwnedFd>),
    /// The next read gets end of stream.
    Eof,
    /// The next write takes at most this many bytes (0: the peer takes nothing).
    Write(usize),
    /// The next read or write fails with this error.
    Fail(io::ErrorKind),
    /// The next readiness poll returns `Pending` (and wakes the task at once).
    NotReady,
}

/// A scripted socket; clones share the script and the log.
#[derive(Debug, Clone, Default)]
pub(crate) struct Script(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    steps: VecDeque<Step>,
    /// Every byte written or sent, in order.
    written: Vec<u8>,
    /// Descriptors sent along.
    fds_sent: usize,
    shut: bool,
    /// The task that found the script used up, woken by `push`.
    waiting: Option<Waker>,
}

impl Script {
    pub(crate) fn new(steps: impl IntoIterator<Item = Step>) -> Script {
        let s = Script::default();
        s.state().steps.extend(steps);
        s
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a step at the end.
    pub(crate) fn push(&self, step: Step) {
        let mut st = self.state();
        st.steps.push_back(step);
        if let Some(w) = st.waiting.take() {
            w.wake();
        }
    }

    /// Steps not taken yet.
    pub(crate) fn left(&self) -> usize {
        self.state().steps.len()
    }

    /// Every byte written or sent so far.
    pub(crate) fn written(&self) -> Vec<u8> {
        self.state().written.clone()
    }

    /// How many descriptors went with what was sent.
    pub(crate) fn fds_sent(&self) -> usize {
        self.state().fds_sent
    }

    /// Whether `shutdown` was called.
    pub(crate) fn is_shut(&self) -> bool {
        self.state().shut
    }

    /// Ready while steps are left; a `NotReady` step is taken and is `Pending` once.
    /// With no step left it is `Pending` until one is pushed.
    fn ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.state();
        match st.steps.front() {
            Some(Step::NotReady) => {
                st.steps.pop_front();
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(_) => Poll::Ready(Ok(())),
            None => {
                st.waiting = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Takes the next read step: up to `room` bytes (`Ok` with no bytes is end of
    /// stream) and the descriptors that came with them.
    fn read(&self, room: usize) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
        let mut st = self.state();
        let (mut bytes, fds) = match st.steps.pop_front() {
            Some(Step::Read(bytes)) => (bytes, Vec::new()),
            Some(Step::ReadFds(bytes, fds)) => (bytes, fds),
            Some(Step::Eof) => return Ok((Vec::new(), Vec::new())),
            Some(Step::Fail(kind)) => return Err(kind.into()),
            Some(step @ (Step::NotReady | Step::Write(_))) => {
                let write = matches!(step, Step::Write(_));
                st.steps.push_front(step);
                assert!(!write, "the script expects a write here; the code read");
                return Err(io::ErrorKind::WouldBlock.into());
            }
            None => return Err(io::ErrorKind::WouldBlock.into()),
        };
        assert!(!bytes.is_empty(), "a Read step of no bytes; use Eof");
        if bytes.len() > room {
            st.steps.push_front(Step::Read(bytes.split_off(room)));
        }
        Ok((bytes, fds))
    }

    /// Takes the next write step: how many of `len` bytes go.
    fn write(&self, len: usize) -> io::Result<usize> {
        let mut st = self.state();
        match st.steps.pop_front() {
            Some(Step::Write(max)) => Ok(max.min(len)),
            Some(Step::Fail(kind)) => Err(kind.into()),
            Some(step) => {
                let read = !matches!(step, Step::NotReady);
                st.steps.push_front(step);
                assert!(!read, "the script expects a read here; the code wrote");
                Err(io::ErrorKind::WouldBlock.into())
            }
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Control for Script {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.ready(cx)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.ready(cx)
    }

    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let (bytes, fds) = self.read(buf.chunk_mut().len())?;
        assert!(fds.is_empty(), "descriptors where the code reads none");
        buf.extend_from_slice(&bytes);
        Ok(bytes.len())
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let total = bufs.iter().map(|b| b.len()).sum();
        let n = self.write(total)?;
        let mut st = self.state();
        let mut left = n;
        for b in bufs {
            let take = left.min(b.len());
            st.written.extend_from_slice(&b[..take]);
            left -= take;
        }
        Ok(n)
    }

    fn try_send_with_fd(&self, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
        let n = self.write(bytes.len())?;
        let mut st = self.state();
        st.written.extend_from_slice(&bytes[..n]);
        if n > 0 && fd.is_some() {
            st.fds_sent += 1;
        }
        Ok(n)
    }

    fn try_recv_with_fds(&self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
        let (bytes, fds) = self.read(buf.len())?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        Ok((bytes.len(), fds))
    }

    fn send_byte(&self, byte: u8) -> bool {
        let mut st = self.state();
        if st.shut {
            return false;
        }
        st.written.push(byte);
        true
    }

    fn shutdown(&self) {
        self.state().shut = true;
    }
}

/// Polls `fut` with a waker that does nothing, at most `polls` times; what the last
/// poll returned. A future that waits for a script that is used up stays `Pending`.
pub(crate) fn poll_times<F: Future + ?Sized>(
    mut fut: Pin<&mut F>,
    polls: usize,
) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..polls {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Poll::Ready(v);
        }
    }
    Poll::Pending
}

/// Runs `fut` to its end without a runtime; panics if it is still pending after 1000
/// polls (it waits for more than the script holds).
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    match poll_times(pin!(fut), 1000) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("still pending after 1000 polls: the script ran out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_go_in_order_and_reads_keep_what_did_not_fit() {
        let s = Script::new([
            Step::NotReady,
            Step::Read(b"abcdef".to_vec()),
            Step::Write(2),
            Step::Fail(io::ErrorKind::Interrupted),
            Step::Eof,
        ]);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(s.poll_read_ready(&mut cx).is_pending(), "NotReady");
        assert!(s.poll_read_ready(&mut cx).is_ready());
        let mut buf = [0u8; 4];
        assert_eq!(s.try_recv_with_fds(&mut buf).unwrap().0, 4);
        assert_eq!(&buf, b"abcd");
        let mut rest = BytesMut::with_capacity(16);
        assert_eq!(s.try_read(&mut rest).unwrap(), 2);
        assert_eq!(&rest[..], b"ef");
        let bufs = [IoSlice::new(b"x"), IoSlice::new(b"yz")];
        assert_eq!(s.try_write(&bufs).unwrap(), 2);
        assert_eq!(s.written(), b"xy");
        let e = s.try_write(&bufs).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert_eq!(s.try_read(&mut rest).unwrap(), 0, "end of stream");
        assert_eq!(s.left(), 0);
        assert!(s.poll_write_ready(&mut cx).is_pending(), "used up");
        let e = s.try_read(&mut rest).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(s.send_byte(1));
        s.shutdown();
        assert!(!s.send_byte(2), "shut");
        assert_eq!(s.written(), [b'x', b'y', 1]);
    }

    #[test]
    #[should_panic(expected = "expects a read here; the code wrote")]
    fn a_write_where_a_read_is_scripted_panics() {
        let s = Script::new([Step::Read(vec![1])]);
        let _ = s.try_write(&[IoSlice::new(b"x")]);
    }
}
