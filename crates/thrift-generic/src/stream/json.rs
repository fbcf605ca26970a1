//! A stream's JSON halves: each request transcoded from JSON into its struct before
//! it is sent, each response from its struct into JSON as it is taken.

use std::sync::Arc;

use bytes::Bytes;
use thrift_dynamic::{Descriptor, StreamDesc, StreamingMode, StructId, ThriftProtocol};
use volo_core::stream::{Metadata, Receiver, Sender};

use super::open::Opener;
use crate::encoded::EncodedStruct;
use crate::error::GenericError;

/// What both halves of a stream know of it: its method, in the IDL it was opened
/// with (a reload meanwhile does not change a stream under way), and the client that
/// opened it.
#[derive(Debug)]
pub(crate) struct Shape {
    /// Kept while a half lives: the transport a stream's connection runs on is the
    /// client's, and closes with it (volo-core's `StreamClient`).
    _client: Arc<Opener>,
    desc: Descriptor,
    method: String,
    mode: StreamingMode,
    request: StructId,
    response: StructId,
}

impl Shape {
    pub(crate) fn new(client: Arc<Opener>, desc: Descriptor, m: &StreamDesc) -> Arc<Self> {
        Arc::new(Shape {
            _client: client,
            desc,
            method: m.name.clone(),
            mode: m.mode,
            request: m.request,
            response: m.response,
        })
    }

    pub(crate) fn method(&self) -> &str {
        &self.method
    }

    pub(crate) fn mode(&self) -> StreamingMode {
        self.mode
    }

    /// `json`, a request as a JSON object, as the request struct in Binary (the
    /// protocol of streams).
    pub(crate) fn request(&self, json: &[u8]) -> Result<EncodedStruct, GenericError> {
        let mut out = Vec::new();
        thrift_dynamic::json_to_thrift(
            &self.desc,
            self.request,
            json,
            ThriftProtocol::Binary,
            &mut out,
        )
        .map_err(|source| {
            tracing::debug!(method = %self.method, error = %source, "a JSON stream request does not fit; not sent");
            GenericError::JsonMessage {
                method: self.method.clone(),
                source,
            }
        })?;
        Ok(EncodedStruct(out.into()))
    }

    /// A response struct as JSON text.
    fn response(&self, message: EncodedStruct) -> Result<Bytes, GenericError> {
        let mut json = Vec::new();
        thrift_dynamic::thrift_to_json(
            &self.desc,
            self.response,
            message.0,
            ThriftProtocol::Binary,
            &mut json,
        )
        .map_err(|source| {
            tracing::warn!(method = %self.method, error = %source, "a stream response does not fit the IDL");
            GenericError::JsonReply {
                method: self.method.clone(),
                source,
            }
        })?;
        Ok(Bytes::from(json))
    }
}

/// A stream of one streaming method, one JSON object per message each way: opened
/// by [`GenericStreamClient::open_json`](crate::GenericStreamClient::open_json).
/// [`split`](Self::split) gives its halves, to send and receive from different
/// tasks (a bidirectional stream's usual shape). The stream is reset (cancelled) if
/// both halves go before it ended.
#[derive(Debug)]
pub struct JsonStream {
    sender: JsonSender,
    receiver: JsonReceiver,
}

impl JsonStream {
    pub(crate) fn new(
        shape: Arc<Shape>,
        tx: Sender<EncodedStruct>,
        rx: Receiver<EncodedStruct>,
    ) -> Self {
        JsonStream {
            sender: JsonSender {
                shape: Arc::clone(&shape),
                tx,
                sent: 0,
            },
            receiver: JsonReceiver { shape, rx },
        }
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.sender.shape.method
    }

    /// Which way its messages go.
    pub fn mode(&self) -> StreamingMode {
        self.sender.shape.mode
    }

    /// Sends a request given as a JSON object: see [`JsonSender::send`].
    pub async fn send(&mut self, json: &[u8]) -> Result<(), GenericError> {
        self.sender.send(json).await
    }

    /// Ends the requests: see [`JsonSender::close_send`].
    pub async fn close_send(&mut self) -> Result<(), GenericError> {
        self.sender.close_send().await
    }

    /// The next response as JSON text: see [`JsonReceiver::recv`].
    pub async fn recv(&mut self) -> Result<Option<Bytes>, GenericError> {
        self.receiver.recv().await
    }

    /// The server's header: see [`JsonReceiver::header`].
    pub async fn header(&self) -> Result<Metadata, GenericError> {
        self.receiver.header().await
    }

    /// The server's trailer, once it ended the stream cleanly.
    pub fn trailer(&self) -> Option<Metadata> {
        self.receiver.trailer()
    }

    /// The two halves.
    pub fn split(self) -> (JsonSender, JsonReceiver) {
        (self.sender, self.receiver)
    }
}

/// The sending half of a [`JsonStream`].
#[derive(Debug)]
pub struct JsonSender {
    shape: Arc<Shape>,
    tx: Sender<EncodedStruct>,
    /// Requests sent so far.
    sent: u64,
}

impl JsonSender {
    /// Sends `json`, one request as a JSON object keyed by field name (the request
    /// struct itself, not an arguments struct around it; the conventions of
    /// [`thrift_dynamic::json`]), transcoded into the request struct first: JSON that
    /// does not fit is [`GenericError::JsonMessage`], naming the field path, and
    /// nothing is sent. A server stream takes one request: a second is
    /// [`GenericError::SecondRequest`]. Waits while the server's window is spent.
    pub async fn send(&mut self, json: &[u8]) -> Result<(), GenericError> {
        if self.shape.mode == StreamingMode::Server && self.sent > 0 {
            return Err(GenericError::SecondRequest {
                method: self.shape.method.clone(),
            });
        }
        let message = self.shape.request(json)?;
        self.send_encoded(&message).await
    }

    /// Sends a request already transcoded.
    pub(crate) async fn send_encoded(
        &mut self,
        message: &EncodedStruct,
    ) -> Result<(), GenericError> {
        self.tx
            .send(message)
            .await
            .map_err(GenericError::from_stream)?;
        self.sent += 1;
        Ok(())
    }

    /// Ends the requests (an empty trailer): the server sees the end of its input.
    /// Sending afterwards fails.
    pub async fn close_send(&mut self) -> Result<(), GenericError> {
        self.tx
            .close_send()
            .await
            .map_err(GenericError::from_stream)
    }
}

/// The receiving half of a [`JsonStream`].
#[derive(Debug)]
pub struct JsonReceiver {
    shape: Arc<Shape>,
    rx: Receiver<EncodedStruct>,
}

impl JsonReceiver {
    /// The method.
    pub fn method(&self) -> &str {
        &self.shape.method
    }

    /// The next response as JSON text (compact, fields in IDL order: the conventions
    /// of [`thrift_dynamic::json`]); `Ok(None)` once the server ended the stream
    /// cleanly. The stream's end with an error (the trailer's exception, a business
    /// status, a deadline, a reset) is the error, mapped as
    /// [`GenericError::from_stream`] says. A response that does not fit the IDL is
    /// [`GenericError::JsonReply`]; the stream goes on.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, GenericError> {
        match self.rx.recv().await {
            Ok(Some(message)) => self.shape.response(message).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(GenericError::from_stream(e)),
        }
    }

    /// The server's header (it comes with its first response or its trailer).
    pub async fn header(&self) -> Result<Metadata, GenericError> {
        self.rx.header().await.map_err(GenericError::from_stream)
    }

    /// The server's trailer, once it ended the stream cleanly.
    pub fn trailer(&self) -> Option<Metadata> {
        self.rx.trailer()
    }
}
