//! A stream's typed halves: a [`Sender`] that encodes each message straight into the
//! connection's output, and a [`Receiver`] that decodes each one as it is taken, by
//! `recv().await` or as a [`futures_util::Stream`].

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use thrift_wire::{Binary, Codec, Message};

use super::error::{Metadata, StreamError};
use super::shared::StreamShared;

/// Resets the stream when the last half of a client's stream goes before the
/// stream ended (Kitex's cancel), and takes it out of its connection's table.
#[derive(Debug)]
pub(crate) struct CancelOnDrop {
    pub(crate) stream: Arc<StreamShared>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.stream.is_over() {
            self.stream.forget();
        } else {
            self.stream.reset(StreamError::Cancelled(
                "the caller dropped the stream".into(),
            ));
        }
    }
}

/// The sending half of a stream: messages of type `T`, each a data frame.
pub struct Sender<T> {
    stream: Arc<StreamShared>,
    _guard: Option<Arc<CancelOnDrop>>,
    codec: Codec<Binary>,
    _message: PhantomData<fn(T)>,
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("stream", &self.stream.id)
            .field("method", &self.stream.method)
            .finish_non_exhaustive()
    }
}

impl<T: Message> Sender<T> {
    pub(crate) fn new(stream: Arc<StreamShared>, guard: Option<Arc<CancelOnDrop>>) -> Self {
        let max = stream.session.max_message();
        Sender {
            stream,
            _guard: guard,
            codec: Codec::new().max_size(max),
            _message: PhantomData,
        }
    }

    /// Sends `message`, waiting while the peer's window is spent. Fails once the
    /// stream is over or this direction was closed.
    pub async fn send(&mut self, message: &T) -> Result<(), StreamError> {
        let size = self.codec.size(message);
        if size > self.stream.session.max_message() {
            return Err(StreamError::Encode(format!(
                "a message of {size} bytes is beyond the frame limit"
            )));
        }
        let codec = &self.codec;
        self.stream
            .send_with(size, |out| {
                // Within the codec's limit: checked above.
                let written = codec.encode(message, out);
                debug_assert!(written.is_ok());
            })
            .await
    }

    /// Ends this direction (an empty trailer): the peer's receiver sees the end of
    /// its messages. Sending afterwards fails with [`StreamError::SendClosed`].
    pub async fn close_send(&mut self) -> Result<(), StreamError> {
        self.stream.close_send(None).await
    }

    /// Sets the metadata of this side's header; it goes with the first message or the
    /// trailer, whichever is first (a server's; a client's header went at open).
    pub fn set_header(&self, header: Metadata) {
        self.stream.set_header(header);
    }

    /// Sets the metadata of this side's trailer.
    pub fn set_trailer(&self, trailer: Metadata) {
        self.stream.set_trailer(trailer);
    }

    /// Waits until the stream is reset (the peer cancelled it, its deadline passed,
    /// the connection failed) and says why: for a handler that has other work to
    /// stop.
    pub async fn cancelled(&self) -> StreamError {
        self.stream.reset_reason().await
    }
}

/// A message being waited for, undecoded.
type NextMessage = Pin<Box<dyn Future<Output = Result<Option<Bytes>, StreamError>> + Send>>;

/// The receiving half of a stream: messages of type `T`.
pub struct Receiver<T> {
    stream: Arc<StreamShared>,
    _guard: Option<Arc<CancelOnDrop>>,
    codec: Codec<Binary>,
    /// The message being waited for, when polled as a `Stream`.
    next: Option<NextMessage>,
    /// The stream ended (or failed) for this half: polling yields nothing more.
    done: bool,
    _message: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("stream", &self.stream.id)
            .field("method", &self.stream.method)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<T: Message> Receiver<T> {
    pub(crate) fn new(stream: Arc<StreamShared>, guard: Option<Arc<CancelOnDrop>>) -> Self {
        let max = stream.session.max_message();
        Receiver {
            stream,
            _guard: guard,
            codec: Codec::new().max_size(max),
            next: None,
            done: false,
            _message: PhantomData,
        }
    }

    /// The next message; `Ok(None)` once the peer ended its direction cleanly.
    pub async fn recv(&mut self) -> Result<Option<T>, StreamError> {
        if self.done {
            return Ok(None);
        }
        let got = self.stream.recv().await;
        self.decode(got)
    }

    fn decode(
        &mut self,
        got: Result<Option<Bytes>, StreamError>,
    ) -> Result<Option<T>, StreamError> {
        match got {
            Ok(Some(bytes)) => match self.codec.decode::<T>(bytes) {
                Ok(message) => Ok(Some(message)),
                Err(e) => {
                    let error = StreamError::Decode(e.to_string());
                    tracing::warn!(stream = self.stream.id, method = %self.stream.method, error = %e, "a stream message did not decode; resetting the stream");
                    self.stream.reset(StreamError::Protocol(error.to_string()));
                    self.done = true;
                    Err(error)
                }
            },
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// The peer's header (a server's comes with its first message or its trailer).
    pub async fn header(&self) -> Result<Metadata, StreamError> {
        self.stream.header().await
    }

    /// The peer's trailer, once its direction ended cleanly.
    pub fn trailer(&self) -> Option<Metadata> {
        self.stream.trailer()
    }

    /// The cost of the messages queued for this half ([`flow::cost`](super::flow::cost)).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> u64 {
        self.stream.queued()
    }
}

impl<T: Message> futures_util::Stream for Receiver<T> {
    type Item = Result<T, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let next = this.next.get_or_insert_with(|| {
            let stream = Arc::clone(&this.stream);
            Box::pin(async move { stream.recv().await })
        });
        let got = match next.as_mut().poll(cx) {
            Poll::Ready(got) => got,
            Poll::Pending => return Poll::Pending,
        };
        this.next = None;
        Poll::Ready(this.decode(got).transpose())
    }
}
