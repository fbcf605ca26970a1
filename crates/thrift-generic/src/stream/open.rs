//! Where streams are opened: the one place this crate touches volo-core's
//! [`StreamClient`], so that opening them through the ordinary client stack
//! (discovery, balancing, breakers) later changes this module alone.

use std::io;
use std::time::Duration;

use volo_core::client::{ClientConfig, Error, ErrorKind, StreamClient};
use volo_core::context::Address;
use volo_core::stream::{Metadata, Receiver, Sender, StreamError};

use crate::encoded::EncodedStruct;
use crate::error::GenericError;

/// Opens streams of one service at one address, their messages kept encoded.
#[derive(Debug)]
pub(crate) struct Opener {
    client: StreamClient,
}

impl Opener {
    pub(crate) fn new(client: StreamClient) -> Self {
        Opener { client }
    }

    /// Streams of `service` (its bare IDL name, sent as `isn`) at `addr` with
    /// `config`'s transport, TLS and connect timeout.
    pub(crate) fn connect(service: &str, addr: Address, config: &ClientConfig) -> io::Result<Self> {
        StreamClient::new(service, addr, config).map(Opener::new)
    }

    /// Opens a stream of `method` with `header`, its deadline `timeout` from now
    /// (`None`: the client's own): its two halves.
    pub(crate) async fn open(
        &self,
        method: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<(Sender<EncodedStruct>, Receiver<EncodedStruct>), GenericError> {
        let opened = match timeout {
            Some(t) => self.client.open_with_timeout(method, header, Some(t)).await,
            None => self.client.open(method, header).await,
        };
        match opened {
            Ok(stream) => Ok(stream.split()),
            // Nothing reached a server: the connection was not made, or broke before
            // the stream's header went.
            Err(StreamError::Connection { kind, message }) => Err(GenericError::Call(Error::new(
                ErrorKind::Connect,
                io::Error::new(kind, message),
            ))),
            Err(e) => Err(GenericError::from_stream(e)),
        }
    }
}
