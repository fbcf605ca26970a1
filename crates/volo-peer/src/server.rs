//! The server side: the IDL's semantics as a Volo `EchoService`, and a handle that stops it.

use std::{io, net::SocketAddr, time::Duration};

use pilota::FastStr;
use tokio::{sync::watch, task::JoinHandle};
use volo::net::{
    Address,
    conn::Conn,
    incoming::{DefaultIncoming, Incoming, MakeIncoming},
};
use volo_thrift::{MaybeException, ServerError};

use crate::echo::{
    EchoError, EchoService, EchoServiceEchoOrFailException, EchoServiceServer, Ids, MyTest,
    Request, Response,
};

/// The `code` of the `EchoError` that `echo_or_fail` answers when `req.action == "fail"`.
///
/// The IDL leaves the code to the implementation; every server in this repository uses 1.
pub const ECHO_ERROR_CODE: i32 = 1;

/// The IDL's semantics (see the comments in `idl/echo.thrift`) as a Volo `EchoService`.
///
/// - `echo` answers the request's `action` and `msg`;
/// - `echo_test` and `echo_ids` answer their argument;
/// - `echo_or_fail` fails with `EchoError { code: ECHO_ERROR_CODE, message: req.msg }` when
///   `req.action == "fail"` and otherwise behaves like `echo`;
/// - `notify` (oneway) does nothing.
///
/// Every answer moves the request's fields, so the handler itself copies nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoHandler;

impl EchoService for EchoHandler {
    async fn echo(&self, req: Request) -> Result<Response, ServerError> {
        Ok(Response {
            action: req.action,
            msg: req.msg,
        })
    }

    async fn echo_test(&self, t: MyTest) -> Result<MyTest, ServerError> {
        Ok(t)
    }

    async fn echo_ids(&self, ids: Ids) -> Result<Ids, ServerError> {
        Ok(ids)
    }

    async fn echo_or_fail(
        &self,
        req: Request,
    ) -> Result<MaybeException<Response, EchoServiceEchoOrFailException>, ServerError> {
        if req.action.as_str() == "fail" {
            return Ok(MaybeException::Exception(
                EchoServiceEchoOrFailException::Err(EchoError {
                    code: Some(ECHO_ERROR_CODE),
                    message: Some(req.msg),
                }),
            ));
        }
        Ok(MaybeException::Ok(Response {
            action: req.action,
            msg: req.msg,
        }))
    }

    async fn notify(&self, _event: FastStr) -> Result<(), ServerError> {
        Ok(())
    }
}

/// Starts a Volo `EchoService` server with [`EchoHandler`] on `addr`, on the current tokio
/// runtime, and returns once it listens.
///
/// The listener is the one Volo makes for an IP address (`SO_REUSEADDR`, `SO_REUSEPORT`, the
/// kernel's maximum backlog) and the server keeps all of Volo's defaults, including its codec,
/// which detects TTHeader, Framed or unframed framing and Binary or Compact protocol per
/// connection (see the crate docs). Pass port 0 to let the kernel pick one;
/// [`ServerHandle::local_addr`] tells which.
///
/// Like every Volo server, it registers SIGINT, SIGHUP and SIGTERM handlers and shuts down
/// gracefully when one arrives (see the crate docs).
///
/// # Errors
///
/// Binding or listening fails (the address is taken or not local, for example).
///
/// # Panics
///
/// Outside a tokio runtime with I/O, time and signals enabled.
pub async fn serve(addr: SocketAddr) -> io::Result<ServerHandle> {
    start(addr, false).await
}

/// [`serve`], as Volo's mux server (`Server::multiplex(true)`, volo-thrift's
/// `multiplex` feature): each request of a connection is handled as it arrives, in a
/// task of its own, and answered when done, matched by its TTHeader sequence id, so
/// many calls share one connection. Clients must frame with TTHeader.
///
/// # Errors
///
/// As [`serve`].
///
/// # Panics
///
/// As [`serve`].
pub async fn serve_mux(addr: SocketAddr) -> io::Result<ServerHandle> {
    start(addr, true).await
}

async fn start(addr: SocketAddr, mux: bool) -> io::Result<ServerHandle> {
    let incoming = Address::from(addr).make_incoming().await?;
    let local_addr = match &incoming {
        DefaultIncoming::Tcp(listener) => listener.as_ref().local_addr()?,
        #[allow(unreachable_patterns)] // Unix sockets only come from a Unix address.
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "volo made a non-TCP listener for an IP address",
            ));
        }
    };
    let (stop, stopped) = watch::channel(false);
    let incoming = StoppableIncoming {
        inner: incoming,
        stopped,
    };
    let server = EchoServiceServer::new(EchoHandler).multiplex(mux);
    let task = tokio::spawn(async move { server.run(incoming).await.map_err(io::Error::other) });
    Ok(ServerHandle {
        local_addr,
        stop,
        task: Some(task),
    })
}

/// A running server started by [`serve`].
///
/// Dropping the handle stops the server from accepting connections, without waiting;
/// [`stop`](Self::stop) does the same and waits until Volo's shutdown has finished.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl ServerHandle {
    /// The address the server listens on, with the port the kernel picked if 0 was asked for.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and waits for Volo's own graceful shutdown to end.
    ///
    /// Volo then closes idle connections and waits for busy ones; when any connection is
    /// still open it first sleeps 2 s (and waits at most 28 s more). Drop the clients before
    /// stopping to make this quick: the listener gives connections that peers have just closed
    /// 20 ms to wind down before Volo counts them.
    ///
    /// # Errors
    ///
    /// The server had failed (its accept loop returned an error) or its task panicked.
    pub async fn stop(mut self) -> io::Result<()> {
        // Fails only when the server already ended on its own (a signal or an accept error);
        // its task's result says which.
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// How long the listener waits, once told to stop, before it tells Volo there are no more
/// connections; see [`StoppableIncoming::accept`].
const CLOSE_GRACE: Duration = Duration::from_millis(20);

/// Volo's own listener, with an end that [`ServerHandle`] controls: `accept` answers `None`
/// (Volo's "no more connections") once the handle says stop or is gone.
#[derive(Debug)]
struct StoppableIncoming {
    inner: DefaultIncoming,
    stopped: watch::Receiver<bool>,
}

impl MakeIncoming for StoppableIncoming {
    type Incoming = Self;

    async fn make_incoming(self) -> io::Result<Self> {
        Ok(self)
    }
}

impl Incoming for StoppableIncoming {
    async fn accept(&mut self) -> io::Result<Option<Conn>> {
        let stop = async {
            // Err means the handle is gone: stop as well.
            let _ = self.stopped.wait_for(|stop| *stop).await;
        };
        tokio::select! {
            biased;
            () = stop => {}
            conn = self.inner.accept() => return conn,
        }
        // Volo looks at its connection count as soon as this answers `None`, and sleeps 2 s
        // if any is open. Connections whose peers have just closed them (clients dropped
        // right before `stop`) need a moment to notice; give it.
        tokio::time::sleep(CLOSE_GRACE).await;
        Ok(None)
    }
}
