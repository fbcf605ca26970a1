//! `EchoService` from idl/echo.thrift, with the semantics written in the IDL: the
//! handler every example server runs.

use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use thrift_wire::Utf8Bytes;
use volo_core::context::ServerContext;
use volo_core::server::ServerError;

use crate::echo::{
    EchoError, EchoService, EchoServiceEchoOrFailException, Ids, MyTest, Request, Response,
};
use volo_core::config::TransportConfig;

/// The TTHeader of an `echo` request as this framework's client fills it (the keys of
/// Kitex's client, v0.16): the callee's IDL name as `isn`, and the integer keys
/// transport type, caller service (`echo-client`) and method (empty), callee service
/// and method, message type, time left (1,000 ms) and connect timeout (50 ms). For
/// tests and benchmarks that send requests by hand; `framed` is TTHeader over Framed.
pub fn echo_request_ttheader(seq_id: i32, framed: bool) -> volo_core::codec::ttheader::Header {
    use volo_core::codec::ttheader::{Header, int_key};
    let mut h = Header::new(seq_id, volo_core::codec::Protocol::Binary);
    h.inner_framed = framed;
    let s = Utf8Bytes::from_static;
    h.str_kv.push((s("isn"), s("EchoService")));
    let transport = if framed { "framed" } else { "unframed" };
    for (k, v) in [
        (int_key::TRANSPORT_TYPE, transport),
        (int_key::FROM_SERVICE, "echo-client"),
        (int_key::FROM_METHOD, ""),
        (int_key::TO_SERVICE, "EchoService"),
        (int_key::TO_METHOD, "echo"),
        (int_key::MSG_TYPE, "1"),
        (int_key::RPC_TIMEOUT, "1000"),
        (int_key::CONNECT_TIMEOUT, "50"),
    ] {
        h.int_kv.push((k, s(v)));
    }
    h
}

/// The code of the `EchoError` that `echo_or_fail` raises (the IDL leaves it open; every
/// implementation in this repository, and the Python one in interop/rpc.py, uses 1).
pub const ECHO_ERROR_CODE: i32 = 1;

/// The service: answers every call with its argument; `echo_or_fail` fails when asked;
/// `notify` counts events. `echo` can be made slow ([`Echo::set_delay`]) for fault
/// tests, and every call can be shown with its metainfo ([`Echo::show_metainfo`]).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    notified: Arc<AtomicU64>,
    /// What `echo` waits before it answers, in microseconds (0: nothing).
    delay_us: Arc<AtomicU64>,
    /// With a program name: each call's line is printed, a backward value sent.
    show_metainfo: Option<&'static str>,
}

impl Echo {
    /// Events received by `notify` so far.
    pub fn notified(&self) -> u64 {
        self.notified.load(Ordering::Relaxed)
    }

    /// Makes `echo` wait `delay` before it answers (zero: not at all), from the next
    /// call on; clones share it.
    pub fn set_delay(&self, delay: std::time::Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.store(us, Ordering::Relaxed);
    }

    /// What `echo` waits now.
    pub fn delay(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// Every call, whatever the method, sends one backward value back,
    /// `srv_back=<method>`, and prints its [`call_line`] on stdout after `program: `:
    /// what a caller's metainfo looks like on arrival, and what comes back to it.
    pub fn show_metainfo(mut self, program: &'static str) -> Self {
        self.show_metainfo = Some(program);
        self
    }

    /// What [`show_metainfo`](Self::show_metainfo) asks for, on each call.
    fn seen(&self, cx: &mut ServerContext) {
        let Some(program) = self.show_metainfo else {
            return;
        };
        cx.metainfo.set_backward("srv_back", cx.rpc.method.clone());
        // Written whole, under the lock; a closed stdout is no reason to fail the call.
        let _ = writeln!(std::io::stdout().lock(), "{program}: {}", call_line(cx));
    }
}

/// `call method=<name> seq=<id> transport=<framing> protocol=<protocol>
/// forward=<k=v,...> persistent=<k=v,...> backward=<k=v,...>` (`-` for none; names as
/// on the command line): a call as its handler sees it. `forward` holds the transient
/// values the caller sent (one hop only), `persistent` those that go on hop after hop,
/// `backward` those the handler sends back with the reply.
pub fn call_line(cx: &ServerContext) -> String {
    use crate::options::{FramingArg, ProtocolArg, pairs_field};
    format!(
        "call method={} seq={} transport={} protocol={} forward={} persistent={} backward={}",
        cx.rpc.method.as_str(),
        cx.rpc.seq_id,
        FramingArg(cx.framing).name(),
        ProtocolArg(cx.protocol).name(),
        pairs_field(cx.metainfo.received_transient_values()),
        pairs_field(cx.metainfo.persistent_values()),
        pairs_field(cx.metainfo.backward_values()),
    )
}

impl EchoService for Echo {
    async fn echo(
        &self,
        cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<Infallible>> {
        self.seen(cx);
        let delay = self.delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(Response {
            action: req.action,
            msg: req.msg,
        })
    }

    async fn echo_test(
        &self,
        cx: &mut ServerContext,
        t: MyTest,
    ) -> Result<MyTest, ServerError<Infallible>> {
        self.seen(cx);
        Ok(t)
    }

    async fn echo_ids(
        &self,
        cx: &mut ServerContext,
        ids: Ids,
    ) -> Result<Ids, ServerError<Infallible>> {
        self.seen(cx);
        Ok(ids)
    }

    async fn echo_or_fail(
        &self,
        cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<EchoServiceEchoOrFailException>> {
        self.seen(cx);
        if req.action.as_str() == "fail" {
            return Err(ServerError::User(EchoServiceEchoOrFailException::Err(
                EchoError {
                    code: ECHO_ERROR_CODE,
                    message: req.msg,
                },
            )));
        }
        Ok(Response {
            action: req.action,
            msg: req.msg,
        })
    }

    async fn notify(
        &self,
        cx: &mut ServerContext,
        _event: Utf8Bytes,
    ) -> Result<(), ServerError<Infallible>> {
        self.seen(cx);
        self.notified.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A client stack that load generators call through from many tasks: a client service
/// that [`EchoCall`] can call, shared by clones.
pub trait EchoStack:
    volo_core::service::Service<
        volo_core::client::ClientContext,
        volo_core::client::ClientRequest,
        Response = volo_core::client::ClientResponse,
        Error = volo_core::client::Error,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> EchoStack for T where
    T: volo_core::service::Service<
            volo_core::client::ClientContext,
            volo_core::client::ClientRequest,
            Response = volo_core::client::ClientResponse,
            Error = volo_core::client::Error,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The method an [`EchoCall`] calls, and what counts as its success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EchoMethod {
    /// `echo`: the reply must carry the message sent.
    #[default]
    Echo,
    /// `echo_or_fail`, asking in turn for an answer (action `echo`: the reply must
    /// carry the message) and for a failure (action `fail`: the call must end in the
    /// declared `EchoError` carrying the message; its code is not checked, since the
    /// IDL leaves it to the server). Both paths of a declared exception, every run.
    #[value(name = "echo_or_fail")]
    EchoOrFail,
    /// `notify`, oneway: nothing comes back, so a call succeeds once it is written.
    Notify,
}

impl EchoMethod {
    /// The method's name in the IDL.
    pub fn name(self) -> &'static str {
        match self {
            EchoMethod::Echo => "echo",
            EchoMethod::EchoOrFail => "echo_or_fail",
            EchoMethod::Notify => "notify",
        }
    }
}

/// One closed-loop caller's call: `echo` with a fixed message, the answer checked (or
/// another method, [`with_method`](Self::with_method)). Clones share the client, the
/// call count and the key sequence.
#[derive(Debug, Clone)]
pub struct EchoCall<T = volo_core::client::DefaultStack> {
    client: crate::echo::EchoServiceClient<T>,
    msg: Utf8Bytes,
    method: EchoMethod,
    /// Calls started so far (the hash key and `echo_or_fail`'s turn come from it).
    started: Arc<AtomicU64>,
    /// With hash keys: how many.
    keys: Option<u64>,
}

impl<T> EchoCall<T> {
    /// Calls through `client` with a message of `size` bytes.
    pub fn new(client: crate::echo::EchoServiceClient<T>, size: usize) -> Self {
        EchoCall {
            client,
            msg: Utf8Bytes::from("x".repeat(size)),
            method: EchoMethod::Echo,
            started: Arc::new(AtomicU64::new(0)),
            keys: None,
        }
    }

    /// Gives the calls hash keys `0..keys` in turn ([`ClientContext::hash_key`], which
    /// a consistent-hash balancer routes by), as that many users would; 0 keys: none.
    ///
    /// [`ClientContext::hash_key`]: volo_core::client::ClientContext::hash_key
    pub fn with_hash_keys(mut self, keys: u64) -> Self {
        self.keys = (keys > 0).then_some(keys);
        self
    }

    /// Calls `method` instead of `echo`.
    pub fn with_method(mut self, method: EchoMethod) -> Self {
        self.method = method;
        self
    }
}

impl<T> EchoCall<T>
where
    T: volo_core::service::Service<
            volo_core::client::ClientContext,
            volo_core::client::ClientRequest,
            Response = volo_core::client::ClientResponse,
            Error = volo_core::client::Error,
        >,
{
    /// One call; whether it ended as the method promises (see [`EchoMethod`]).
    pub async fn call(&self) -> bool {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let mut cx = volo_core::client::ClientContext::new();
        if let Some(keys) = self.keys {
            cx.hash_key = Some(n % keys);
        }
        let request = |action: &'static str| Request {
            action: Utf8Bytes::from(action),
            msg: self.msg.clone(),
        };
        match self.method {
            EchoMethod::Echo => matches!(
                self.client.echo_with(&mut cx, request("echo")).await,
                Ok(r) if r.msg == self.msg
            ),
            EchoMethod::EchoOrFail if n.is_multiple_of(2) => matches!(
                self.client.echo_or_fail_with(&mut cx, request("echo")).await,
                Ok(r) if r.msg == self.msg
            ),
            EchoMethod::EchoOrFail => matches!(
                self.client.echo_or_fail_with(&mut cx, request("fail")).await,
                Err(volo_core::client::ClientError::User(
                    EchoServiceEchoOrFailException::Err(e)
                )) if e.message == self.msg
            ),
            EchoMethod::Notify => self
                .client
                .notify_with(&mut cx, self.msg.clone())
                .await
                .is_ok(),
        }
    }
}

/// An `EchoService` server running on a runtime of its own choosing, until stopped.
#[derive(Debug)]
pub struct RunningEcho {
    /// Where it listens (for TCP, with the port picked).
    pub addr: volo_core::context::Address,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningEcho {
    /// Binds `addr` with transport `io` and serves [`Echo`] on `runtime`, with the
    /// server's defaults otherwise.
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        io: volo_core::transport::TransportKind,
        addr: &volo_core::context::Address,
    ) -> std::io::Result<RunningEcho> {
        let config = volo_core::server::ServerConfig {
            transport: TransportConfig {
                kind: io,
                ..Default::default()
            },
            ..volo_core::server::ServerConfig::default()
        };
        Self::start_with(runtime, config, addr)
    }

    /// Binds `addr` and serves [`Echo`] on `runtime` with `config`.
    pub fn start_with(
        runtime: &tokio::runtime::Runtime,
        config: volo_core::server::ServerConfig,
        addr: &volo_core::context::Address,
    ) -> std::io::Result<RunningEcho> {
        use volo_core::server::Server;
        let bound = runtime.block_on(
            Server::new(crate::echo::EchoServiceServer::new(Echo::default()))
                .config(config)
                .bind(addr),
        )?;
        let addr = bound.local_addr().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = runtime.spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        Ok(RunningEcho {
            addr,
            stop,
            serving,
        })
    }

    /// Shuts it down gracefully and waits until it has.
    pub fn stop(self, runtime: &tokio::runtime::Runtime) -> std::io::Result<()> {
        let _ = self.stop.send(());
        runtime
            .block_on(self.serving)
            .map_err(|e| std::io::Error::other(format!("the server task: {e}")))?
    }
}

/// The client stack of [`bare_client`]: the transport, with only the balancer that
/// names the instance above it.
pub type BareStack = volo_core::client::Balance<volo_core::client::Transport>;

/// An `EchoServiceClient` of `addr` on the bare transport (see [`BareStack`]): no
/// timeout, breaker, retry or backup layer, so a load generator spends least per call.
pub fn bare_client(
    addr: volo_core::context::Address,
    config: volo_core::client::ClientConfig,
) -> std::io::Result<crate::echo::EchoServiceClient<BareStack>> {
    use volo_core::client::{BalanceLayer, Client, Instance, StaticDiscover, WeightedRandom};
    use volo_core::service::Layer;
    let transport = volo_core::client::Transport::new(config)?;
    let stack = BalanceLayer::new(
        StaticDiscover::new([Instance::new(addr)]),
        WeightedRandom::default(),
    )
    .layer(transport);
    Ok(crate::echo::EchoServiceClient::new(Client::new(
        "EchoService",
        stack,
    )))
}

/// An `EchoServiceClient` of `addr` with the stack `EchoServiceClient::builder()`
/// builds (timeout, service breaker, retry, backup, balancer with instance breakers).
pub fn default_client(
    addr: volo_core::context::Address,
    config: volo_core::client::ClientConfig,
) -> std::io::Result<crate::echo::EchoServiceClient> {
    crate::echo::EchoServiceClient::builder()
        .address(addr)
        .config(config)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every call, never raising: `echo` with another message, `echo_or_fail`
    /// with the message whatever the action.
    #[derive(Clone)]
    struct NeverFails;

    impl EchoService for NeverFails {
        async fn echo(
            &self,
            _cx: &mut ServerContext,
            req: Request,
        ) -> Result<Response, ServerError<Infallible>> {
            Ok(Response {
                action: req.action,
                msg: Utf8Bytes::from("not what was sent"),
            })
        }

        async fn echo_test(
            &self,
            _cx: &mut ServerContext,
            t: MyTest,
        ) -> Result<MyTest, ServerError<Infallible>> {
            Ok(t)
        }

        async fn echo_ids(
            &self,
            _cx: &mut ServerContext,
            ids: Ids,
        ) -> Result<Ids, ServerError<Infallible>> {
            Ok(ids)
        }

        async fn echo_or_fail(
            &self,
            _cx: &mut ServerContext,
            req: Request,
        ) -> Result<Response, ServerError<EchoServiceEchoOrFailException>> {
            Ok(Response {
                action: req.action,
                msg: req.msg,
            })
        }

        async fn notify(
            &self,
            _cx: &mut ServerContext,
            _event: Utf8Bytes,
        ) -> Result<(), ServerError<Infallible>> {
            Ok(())
        }
    }

    /// What four calls of `method` to `service` came to.
    async fn four_calls<S>(service: S, method: EchoMethod) -> Vec<bool>
    where
        S: EchoService + Clone + Send + Sync + 'static,
    {
        use volo_core::server::Server;
        let addr: volo_core::context::Address = "127.0.0.1:0".parse().unwrap();
        let bound = Server::new(crate::echo::EchoServiceServer::new(service))
            .bind(&addr)
            .await
            .unwrap();
        let addr = bound.local_addr().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        let client = default_client(addr, volo_core::client::ClientConfig::default()).unwrap();
        let call = EchoCall::new(client, 16).with_method(method);
        let mut results = Vec::new();
        for _ in 0..4 {
            results.push(call.call().await);
        }
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        results
    }

    #[tokio::test]
    async fn each_method_succeeds_against_the_echo_service() {
        for method in [EchoMethod::Echo, EchoMethod::EchoOrFail, EchoMethod::Notify] {
            assert_eq!(
                four_calls(Echo::default(), method).await,
                [true; 4],
                "{method:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_reply_other_than_the_promised_one_is_a_failure() {
        assert_eq!(
            four_calls(NeverFails, EchoMethod::Echo).await,
            [false; 4],
            "echo with another message"
        );
        // The turns asking for an answer get it; those asking for the exception do
        // not, and fail.
        assert_eq!(
            four_calls(NeverFails, EchoMethod::EchoOrFail).await,
            [true, false, true, false]
        );
    }
}
