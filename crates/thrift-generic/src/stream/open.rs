//! Where streams are opened: the one place this crate touches volo-core's ways of
//! opening a stream, through a client's stack ([`Client::open_stream`]) or to one
//! address without one ([`StreamClient`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use volo_core::client::{
    Client, ClientConfig, ClientContext, Error, ErrorKind, OpenedStream, StreamClient,
    StreamRequest,
};
use volo_core::context::Address;
use volo_core::service::Service;
use volo_core::stream::{Metadata, Receiver, Sender, StreamError};

use crate::encoded::EncodedStruct;
use crate::error::GenericError;

/// A stream's two halves, its messages kept encoded.
type Halves = (Sender<EncodedStruct>, Receiver<EncodedStruct>);

/// An opening in progress.
type Opening<'a> = Pin<Box<dyn Future<Output = Result<Halves, StreamError>> + Send + 'a>>;

/// A client whose stack opens streams, its type erased.
pub(crate) trait OpenThrough: Send + Sync {
    fn open_halves(&self, req: StreamRequest) -> Opening<'_>;
}

impl<S> OpenThrough for Client<S>
where
    S: Service<ClientContext, StreamRequest, Response = OpenedStream, Error = Error>
        + Send
        + Sync
        + 'static,
{
    fn open_halves(&self, req: StreamRequest) -> Opening<'_> {
        Box::pin(async move {
            let mut cx = ClientContext::new();
            let s = self
                .open_stream::<EncodedStruct, EncodedStruct>(&mut cx, req)
                .await?;
            Ok(s.split())
        })
    }
}

/// Opens streams of one service, their messages kept encoded.
pub(crate) enum Opener {
    /// To one address, without a stack (boxed: the other is a pointer).
    Direct(Box<StreamClient>),
    /// Through a client's stack (discovery, balancing, breakers, retry, layers).
    Stack(Box<dyn OpenThrough>),
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opener::Direct(c) => f.debug_tuple("Direct").field(c).finish(),
            Opener::Stack(_) => f.write_str("Stack"),
        }
    }
}

impl Opener {
    /// Streams of `service` (its bare IDL name, sent as `isn`) at `addr` with
    /// `config`'s transport, TLS and connect timeout.
    pub(crate) fn connect(service: &str, addr: Address, config: &ClientConfig) -> io::Result<Self> {
        StreamClient::new(service, addr, config).map(|c| Opener::Direct(Box::new(c)))
    }

    /// Opens a stream of `method` with `header`, its deadline `timeout` from now
    /// (`None`: the client's own): its two halves.
    pub(crate) async fn open(
        &self,
        method: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<Halves, GenericError> {
        let opened = match self {
            Opener::Direct(c) => c
                .open_with_timeout(method, header, timeout.or(c.timeout()))
                .await
                .map(|s| s.split()),
            Opener::Stack(c) => {
                let mut req = StreamRequest::new(method.to_string(), header.clone());
                if let Some(t) = timeout {
                    req = req.with_timeout(t);
                }
                c.open_halves(req).await
            }
        };
        match opened {
            Ok(halves) => Ok(halves),
            // Nothing reached a server: the connection broke before the stream's
            // header went (a failed connect is `StreamError::Open`, by its kind).
            Err(StreamError::Connection { kind, message }) => Err(GenericError::Call(Error::new(
                ErrorKind::Connect,
                io::Error::new(kind, message),
            ))),
            Err(e) => Err(GenericError::from_stream(e)),
        }
    }
}
