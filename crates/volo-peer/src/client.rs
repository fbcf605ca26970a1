//! The client side: Volo's generated `EchoServiceClient` for one address.

use std::{fmt, net::SocketAddr};

use pilota::FastStr;
use volo_thrift::{MaybeException, codec::default::DefaultMakeCodec};

use crate::{
    CallError,
    echo::{
        EchoServiceClient, EchoServiceClientBuilder, EchoServiceEchoOrFailException, Ids, MyTest,
        Request, Response,
    },
};

/// The callee service name the client puts in its TTHeader.
const SERVICE_NAME: &str = "echo";

/// The framing Volo's client writes; the server detects it and answers in kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Framing {
    /// `TTHeader<Framed<Binary>>`, Volo's default (`DefaultMakeCodec::default()`).
    #[default]
    TTHeaderFramed,
    /// `Framed<Binary>`: a 4-byte length, then the message (`DefaultMakeCodec::framed()`).
    Framed,
    /// Unframed `Binary` (`DefaultMakeCodec::buffered()`).
    Buffered,
}

/// Volo's client for `EchoService` at one address, with Volo's defaults: ping-pong
/// connections from a pool, one request in flight per connection (see the crate docs).
///
/// Cheap to clone; clones share the connection pool. Each method is one RPC.
#[derive(Clone)]
pub struct VoloClient {
    inner: EchoServiceClient,
}

impl fmt::Debug for VoloClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VoloClient").finish_non_exhaustive()
    }
}

impl VoloClient {
    /// A client for `addr` with Volo's default framing, `TTHeader<Framed<Binary>>`.
    ///
    /// No connection is made until the first call.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime: Volo's connection pool spawns its idle-connection sweeper here.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with_framing(addr, Framing::default())
    }

    /// A client for `addr` that writes `framing`; everything else as in [`new`](Self::new).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as [`new`](Self::new).
    pub fn with_framing(addr: SocketAddr, framing: Framing) -> Self {
        let builder = EchoServiceClientBuilder::new(SERVICE_NAME).address(addr);
        let inner = match framing {
            Framing::TTHeaderFramed => builder.build(),
            Framing::Framed => builder.make_codec(DefaultMakeCodec::framed()).build(),
            Framing::Buffered => builder.make_codec(DefaultMakeCodec::buffered()).build(),
        };
        Self { inner }
    }

    /// Volo's generated client, for what the methods here do not cover (call options).
    pub fn inner(&self) -> &EchoServiceClient {
        &self.inner
    }

    /// `echo(Request { action, msg })`: the server answers them back.
    ///
    /// Copies `action` and `msg` into the request (`FastStr::new`); a load generator that
    /// wants no per-call copy builds a [`Request`] once and calls
    /// [`echo_request`](Self::echo_request) with clones of it, which share the strings.
    ///
    /// # Errors
    ///
    /// [`CallError::Client`] when Volo's client fails.
    pub async fn echo(&self, action: &str, msg: &str) -> Result<Response, CallError> {
        self.echo_request(request(action, msg)).await
    }

    /// `echo(req)`, with a request the caller built.
    ///
    /// # Errors
    ///
    /// [`CallError::Client`] when Volo's client fails.
    pub async fn echo_request(&self, req: Request) -> Result<Response, CallError> {
        Ok(self.inner.echo(req).await?)
    }

    /// `echo_or_fail(Request { action, msg })`: fails with the IDL's `EchoError` when
    /// `action == "fail"`, else answers like [`echo`](Self::echo).
    ///
    /// # Errors
    ///
    /// [`CallError::Echo`] with the server's `EchoError`; [`CallError::Client`] when Volo's
    /// client fails.
    pub async fn echo_or_fail(&self, action: &str, msg: &str) -> Result<Response, CallError> {
        match self.inner.echo_or_fail(request(action, msg)).await? {
            MaybeException::Ok(resp) => Ok(resp),
            MaybeException::Exception(EchoServiceEchoOrFailException::Err(e)) => {
                Err(CallError::Echo(e))
            }
        }
    }

    /// `echo_test(t)`: the server answers `t` back (the 1 MiB zero-copy payload).
    ///
    /// # Errors
    ///
    /// [`CallError::Client`] when Volo's client fails.
    pub async fn echo_test(&self, t: MyTest) -> Result<MyTest, CallError> {
        Ok(self.inner.echo_test(t).await?)
    }

    /// `echo_ids(ids)`: the server answers `ids` back.
    ///
    /// # Errors
    ///
    /// [`CallError::Client`] when Volo's client fails.
    pub async fn echo_ids(&self, ids: Ids) -> Result<Ids, CallError> {
        Ok(self.inner.echo_ids(ids).await?)
    }

    /// `notify(event)`, oneway: returns once the request is written; no answer comes.
    ///
    /// # Errors
    ///
    /// [`CallError::Client`] when Volo's client fails to send it.
    pub async fn notify(&self, event: &str) -> Result<(), CallError> {
        Ok(self.inner.notify(FastStr::new(event)).await?)
    }
}

fn request(action: &str, msg: &str) -> Request {
    Request {
        action: FastStr::new(action),
        msg: FastStr::new(msg),
    }
}
