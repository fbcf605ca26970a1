//! Streams without generated code: [`GenericStreamClient`] opens streams of a
//! service's streaming methods as its IDL, read at run time, describes them, one JSON
//! object per message each way ([`JsonStream`]). The [crate docs](crate#streams) say
//! what a message is and how a stream's failures come out.

mod json;
mod open;

use std::sync::Arc;
use std::time::Duration;

use thrift_dynamic::{Descriptor, StreamDesc, StreamingMode};
use volo_core::client::{
    Client, ClientConfig, ClientContext, Error, OpenedStream, StreamClient, StreamRequest,
};
use volo_core::context::Address;
use volo_core::service::Service;
use volo_core::stream::Metadata;

pub use json::{JsonReceiver, JsonSender, JsonStream};

use self::json::Shape;
use self::open::Opener;
use crate::client::Idl;
use crate::error::GenericError;

/// Opens streams of the streaming methods of one IDL service, their messages as JSON:
/// see the [crate docs](crate#streams). Cheap to clone (the connections are shared);
/// the connections stay while a clone or a stream it opened lives.
#[derive(Debug, Clone)]
pub struct GenericStreamClient {
    opener: Arc<Opener>,
    idl: Idl,
    service: String,
    timeout: Option<Duration>,
}

impl GenericStreamClient {
    /// Streams of `service` (its IDL name, `module.Name` or the bare name when only
    /// one file defines it) at `addr`, with `config`'s transport, TLS and connect
    /// timeout (streams are TTHeader and Binary whatever its format says). The service
    /// is named to the server by its bare name, as generated clients name it. Must run
    /// inside a tokio runtime. Fails when the IDL has no such service, or when the
    /// transport cannot be made ([`GenericError::Setup`]).
    pub fn connect(
        addr: Address,
        config: &ClientConfig,
        idl: impl Into<Idl>,
        service: &str,
    ) -> Result<Self, GenericError> {
        let idl = idl.into();
        let bare = idl.service_name(service)?;
        let opener = Opener::connect(&bare, addr, config).map_err(GenericError::Setup)?;
        Ok(Self::with_opener(opener, idl, service))
    }

    /// Streams of `service` through `client`, which should name the service by its
    /// bare IDL name. Fails when the IDL has no such service.
    pub fn new(
        client: StreamClient,
        idl: impl Into<Idl>,
        service: &str,
    ) -> Result<Self, GenericError> {
        Self::checked(Opener::Direct(Box::new(client)), idl.into(), service)
    }

    /// Streams of `service` opened through `client`'s stack, as the generated client's
    /// are: discovery and the balancer pick each stream's instance, the breakers,
    /// retry and timeout govern its opening, its layers see it (see
    /// [`volo_core::client::stream`]). `client` should name the service by its bare
    /// IDL name (`Client::builder("StreamService")`). Fails when the IDL has no such
    /// service.
    pub fn from_client<S>(
        client: Client<S>,
        idl: impl Into<Idl>,
        service: &str,
    ) -> Result<Self, GenericError>
    where
        S: Service<ClientContext, StreamRequest, Response = OpenedStream, Error = Error>
            + Send
            + Sync
            + 'static,
    {
        Self::checked(Opener::Stack(Box::new(client)), idl.into(), service)
    }

    /// [`with_opener`](Self::with_opener), once the IDL is found to have `service`.
    fn checked(opener: Opener, idl: Idl, service: &str) -> Result<Self, GenericError> {
        idl.service_name(service)?;
        Ok(Self::with_opener(opener, idl, service))
    }

    fn with_opener(opener: Opener, idl: Idl, service: &str) -> Self {
        GenericStreamClient {
            opener: Arc::new(opener),
            idl,
            service: service.to_string(),
            timeout: None,
        }
    }

    /// Sets a deadline for each stream, from its opening: when it passes, the stream
    /// is reset and fails as a call that timed out. Default: the client's own (none
    /// for [`connect`](Self::connect)).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The descriptor a stream opened now goes by.
    pub fn descriptor(&self) -> Descriptor {
        self.idl.current()
    }

    /// Opens a stream of `method`, a streaming method of the service in the IDL, with
    /// `header` as its header's metadata (Kitex's metainfo travels there as
    /// `RPC_TRANSIT_<key>` and `RPC_PERSIST_<key>` pairs). A method the service has
    /// as a ping-pong one is [`GenericError::NotStreaming`], one it does not have
    /// [`GenericError::UnknownMethod`]; nothing is sent for either.
    pub async fn open_json(
        &self,
        method: &str,
        header: &Metadata,
    ) -> Result<JsonStream, GenericError> {
        let shape = self.shape(method)?;
        let (tx, rx) = self
            .opener
            .open(shape.method(), header, self.timeout)
            .await?;
        Ok(JsonStream::new(shape, tx, rx))
    }

    /// Opens a server stream of `method` with its one request, `request` as a JSON
    /// object (transcoded before the stream is opened: JSON that does not fit opens
    /// nothing), closes the sending side, and gives the receiving half: what the
    /// generated client's server-stream method does. A method of another mode is
    /// [`GenericError::Streaming`].
    pub async fn server_stream_json(
        &self,
        method: &str,
        header: &Metadata,
        request: &[u8],
    ) -> Result<JsonReceiver, GenericError> {
        let shape = self.shape(method)?;
        if shape.mode() != StreamingMode::Server {
            return Err(GenericError::Streaming {
                method: method.to_string(),
                mode: shape.mode(),
            });
        }
        let message = shape.request(request)?;
        let (tx, rx) = self
            .opener
            .open(shape.method(), header, self.timeout)
            .await?;
        let (mut tx, rx) = JsonStream::new(shape, tx, rx).split();
        tx.send_encoded(&message).await?;
        tx.close_send().await?;
        Ok(rx)
    }

    /// The streaming method `method` of the current IDL, for one stream.
    fn shape(&self, method: &str) -> Result<Arc<Shape>, GenericError> {
        let desc = self.idl.current();
        let m: &StreamDesc = stream_method(&desc, &self.service, method)?;
        Ok(Shape::new(Arc::clone(&self.opener), desc.clone(), m))
    }
}

/// The streaming method `method` of `service` in `desc`.
fn stream_method<'d>(
    desc: &'d Descriptor,
    service: &str,
    method: &str,
) -> Result<&'d StreamDesc, GenericError> {
    let s = desc
        .service(service)
        .ok_or_else(|| GenericError::UnknownService(service.to_string()))?;
    if let Some(m) = s.stream(method) {
        return Ok(m);
    }
    Err(match s.method(method) {
        Some(_) => GenericError::NotStreaming {
            method: method.to_string(),
        },
        None => GenericError::UnknownMethod {
            service: service.to_string(),
            method: method.to_string(),
        },
    })
}
