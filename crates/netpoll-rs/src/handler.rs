//! Handlers that run on the poller itself, in the manner of Netpoll's `OnRequest`.
//!
//! The async face ([`Connection::read_frame`](crate::Connection::read_frame) and
//! [`flush`](crate::Connection::flush)) hands every frame from the poller to a tokio task
//! through a waker. For work that is short and never waits (an echo, a proxy that
//! forwards frames, a client's closed loop), that hand-over is most of the cost. A
//! [`Handler`] skips it: the poller calls it right after it read new input, with the
//! connection's input and output buffers, and sends what it wrote with an inline
//! vectored send (`sendmsg`) as soon as it returns. No task, no waker, no thread
//! switch.
//!
//! The price is the poller's time: while a handler runs, no other connection of that
//! poller is served, so a handler must not block or compute for long (hand such work to
//! a runtime instead, as the async face does).

use std::io;

use thrift_codec::LinkBuffer;

/// Serves a connection from the poller (see [`Connection::serve_inline`]).
///
/// [`Connection::serve_inline`]: crate::Connection::serve_inline
pub trait Handler: Send + 'static {
    /// New input is in `io.input()`, or the peer closed its side
    /// ([`Io::peer_closed`]). Take whole frames from the input (what is left stays for
    /// the next call) and write answers into `io.output()`: they are sent when this
    /// returns. Called again only when more input arrives.
    fn on_input(&mut self, io: &mut Io<'_>);

    /// The connection closed: after [`Io::close`] or the peer's close (once the output
    /// was sent), on a socket error (`Some`), or when the reactor shut down. Called once;
    /// the handler is dropped after it.
    fn on_close(&mut self, error: Option<io::Error>) {
        let _ = error;
    }
}

/// A handler's view of its connection during [`Handler::on_input`].
#[derive(Debug)]
pub struct Io<'a> {
    pub(crate) input: &'a mut LinkBuffer,
    pub(crate) output: &'a mut LinkBuffer,
    pub(crate) peer_closed: bool,
    pub(crate) close: bool,
    pub(crate) need: usize,
}

impl Io<'_> {
    /// The bytes received and not yet taken (`peek`, `next`, `skip`...).
    pub fn input(&mut self) -> &mut LinkBuffer {
        self.input
    }

    /// The output buffer (`insert` for zero-copy `Bytes`, `write`, `malloc`...); it is
    /// flushed when the handler returns.
    pub fn output(&mut self) -> &mut LinkBuffer {
        self.output
    }

    /// The peer closed its side: no more input comes. The connection closes once the
    /// output is sent.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Closes the connection once the output written so far is sent; the handler is not
    /// called again.
    pub fn close(&mut self) {
        self.close = true;
    }

    /// The frame at the front of the input is `total` bytes long: keep reading until it
    /// is all there even past [`Config::input_high_water`](crate::Config). Holds until
    /// the next call.
    pub fn need(&mut self, total: usize) {
        self.need = total;
    }
}
