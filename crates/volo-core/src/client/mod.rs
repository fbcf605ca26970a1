//! The client: connections pooled per peer, one call at a time on each (ping-pong), or
//! multiplexed (many calls on each, replies matched by sequence id), with connect and
//! call timeouts, any framing and protocol.
//!
//! Generated `<Service>Client` types wrap a [`Client`] and turn each method into a
//! [`Client::call`] with the method's argument and result structs. Defaults, all in
//! [`ClientConfig`]:
//!
//! - framing TTHeader (it carries metainfo; use Framed or Buffered for Apache Thrift
//!   servers), protocol Binary;
//! - connect timeout 1 s, call timeout 10 s (per call: [`ClientContext::timeout`]);
//! - at most 64 connections per peer; a call that finds them all busy waits for one;
//! - with [`ClientConfig::multiplex`] (off by default, as in Kitex and Volo): a few
//!   connections per peer ([`ClientConfig::mux_connections`], default 2) each carrying
//!   any number of calls at once, their replies matched to the calls by the TTHeader
//!   sequence id, so multiplexing needs TTHeader framing (as Kitex's does) and a server
//!   that answers calls on one connection concurrently (ours, Kitex's and Volo's do);
//! - one instance, or those a [`Discover`] finds, picked per call by weighted random (or
//!   [`ConsistentHash`] on [`ClientContext::hash_key`]);
//! - a call whose connect failed is retried once on another instance, within a retry
//!   budget of one retry per ten calls; a call that failed after its request was sent
//!   is never retried (the server may have run it);
//! - frames up to 16,384,000 bytes.

mod balance;
mod breaker;
mod error;
mod mux;
mod pool;
mod request;
mod retry;

pub use balance::{
    ConsistentHash, Discover, Instance, LoadBalance, PowerOfTwoChoices, RoundRobin, StaticDiscover,
    WeightedRandom, WeightedRoundRobin,
};
pub use breaker::{
    BreakerConfig, BreakerState, CircuitOpen, InstanceBreakers, InstancePermit, ServiceBreaker,
    ServiceBreakerLayer, counts_as_failure,
};
pub use error::{BoxError, Error, ErrorKind};
pub use request::{ClientRequest, ClientResponse, EncodeArgs};
pub use retry::RetryBudget;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use thrift_codec::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Decoder, Message,
    MessageHeader, MessageType, Utf8Bytes,
};

use crate::codec::ttheader::{Header, HeaderLimits, int_key};
use crate::codec::{FrameSplitter, Framing, Limits, Protocol};
use crate::context::{Address, MetaInfo};
use crate::transport::FrameIo;
use mux::{MuxCall, MuxPool};
use pool::{Pool, Pooled};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The framing of requests. Default TTHeader.
    pub framing: Framing,
    /// With TTHeader: put a Framed length in front of the message inside the header
    /// too (Kitex's "TTHeaderFramed", what Volo's client sends by default). Default off.
    pub ttheader_framed: bool,
    /// The protocol of requests. Default Binary.
    pub protocol: Protocol,
    /// How long a connect may take. Default 1 s.
    pub connect_timeout: Duration,
    /// How long a call may take, from sending to the whole reply (unless the call's
    /// context says otherwise). Default 10 s.
    pub rpc_timeout: Option<Duration>,
    /// Open connections per peer at most (ping-pong). Default 64.
    pub max_connections: usize,
    /// Multiplex calls over a few connections per peer instead of one call at a time
    /// per connection. Needs TTHeader framing: replies are matched to calls by the
    /// sequence id in their header. Default off.
    pub multiplex: bool,
    /// Connections per peer when multiplexing; calls take them in turn. Default 2.
    pub mux_connections: usize,
    /// Retries of a call whose connect failed (the request never left, so another
    /// instance may take it safely). Calls that failed after sending are not retried:
    /// the server may have run them. Default 1.
    pub retries: u32,
    /// Retries allowed per call across the client (the retry budget: 0.1 lets one call
    /// in ten be retried, plus up to ten at once). Default 0.1.
    pub retry_ratio: f64,
    /// Frame size limit for replies. Default 16,384,000 bytes.
    pub limits: Limits,
    /// This client's service name, sent in TTHeader as the caller.
    pub caller: String,
    /// The sockets: netpoll-rs (default) or plain tokio (the measured baseline).
    pub transport: crate::transport::TransportKind,
    /// The reactor's settings.
    pub reactor: netpoll_rs::Config,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            framing: Framing::TTHeader,
            ttheader_framed: false,
            protocol: Protocol::Binary,
            connect_timeout: Duration::from_secs(1),
            rpc_timeout: Some(Duration::from_secs(10)),
            max_connections: 64,
            multiplex: false,
            mux_connections: 2,
            retries: 1,
            retry_ratio: 0.1,
            limits: Limits::default(),
            caller: String::new(),
            transport: crate::transport::TransportKind::Netpoll,
            reactor: netpoll_rs::Config::default(),
        }
    }
}

/// A call's context on the client: what the layers of the stack read and write as the
/// call goes down (the method, the callee, the deadline, metainfo...) and what comes
/// back up (backward metainfo, the instance that answered).
#[derive(Debug, Clone, Default)]
pub struct ClientContext {
    /// The call: caller and callee (the service from the IDL; the instance's address
    /// once the balancer picked one), the method, the deadline.
    pub rpc: crate::context::RpcInfo,
    /// Metainfo to send; after the call, backward values received.
    pub metainfo: MetaInfo,
    /// This call's timeout, instead of the client's.
    pub timeout: Option<Duration>,
    /// The key a consistent-hash balancer routes by (calls with the same key go to the
    /// same instance).
    pub hash_key: Option<u64>,
    /// Which attempt of the call this is: 0 for the first, 1 and on for retries and
    /// backup requests.
    pub attempt: u32,
    /// Instances this call tried already: the balancer picks another when it can.
    pub(crate) avoid: Vec<Address>,
    /// Where the balancer also reports its picks, when a layer above must know them
    /// while the attempt is still running (a backup request goes elsewhere).
    pub(crate) picks: Option<Arc<Mutex<Vec<Address>>>>,
}

impl ClientContext {
    /// A context with no metainfo and the client's timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context whose metainfo goes on from a server's call (persistent values, and
    /// so the mark of a retried request, which stops retries further down the chain).
    pub fn forward_from(server: &crate::context::ServerContext) -> Self {
        ClientContext {
            metainfo: server.metainfo.forward(),
            ..ClientContext::default()
        }
    }

    /// Instances this call tried already.
    pub fn tried(&self) -> &[Address] {
        &self.avoid
    }

    /// Records that `addr` was tried (the balancer avoids it for the next attempt).
    pub fn mark_tried(&mut self, addr: Address) {
        if !self.avoid.contains(&addr) {
            self.avoid.push(addr);
        }
    }
}

/// Why a call failed below the service: the connection, the bytes, or the clock.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Connecting failed or timed out.
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The peer.
        addr: Address,
        /// What happened.
        source: io::Error,
    },
    /// Reading or writing failed (the connection is dropped).
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    /// Discovery found no instance that can take the call.
    #[error("no instance of the service to call")]
    NoInstance,
    /// The call did not finish in time.
    #[error("the call timed out after {0:?}")]
    Timeout(Duration),
    /// The reply was not a valid reply.
    #[error("bad reply: {0}")]
    Protocol(String),
    /// The request could not be encoded (too large...).
    #[error("encoding the request: {0}")]
    Encode(String),
}

/// Why a generated client method failed.
#[derive(Debug)]
pub enum ClientError<E> {
    /// An exception the IDL declares for the method.
    User(E),
    /// The server answered with a `TApplicationException`.
    Application(ApplicationException),
    /// The call did not get an answer.
    Transport(TransportError),
}

impl<E: fmt::Display> fmt::Display for ClientError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::User(e) => write!(f, "{e}"),
            ClientError::Application(e) => write!(
                f,
                "application exception {:?}: {}",
                e.kind,
                e.message.as_str()
            ),
            ClientError::Transport(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for ClientError<E> {}

impl<E> From<CallError> for ClientError<E> {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Application(a) => ClientError::Application(a),
            CallError::Transport(t) => ClientError::Transport(t),
        }
    }
}

impl<E> ClientError<E> {
    /// The `MISSING_RESULT` error: a reply with neither a result nor an exception.
    pub fn missing_result(method: &str) -> Self {
        ClientError::Application(ApplicationException::new(
            ApplicationExceptionKind::MissingResult,
            format!("{method}: the reply has no result"),
        ))
    }
}

/// Why [`Client::call`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server answered with a `TApplicationException`.
    #[error("application exception {:?}: {}", .0.kind, .0.message.as_str())]
    Application(ApplicationException),
    /// No answer.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// A client of one service (cheap to clone): at one address, or at the instances a
/// [`Discover`] finds, one picked per call by a [`LoadBalance`].
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    service: String,
    config: ClientConfig,
    reactor: Option<netpoll_rs::Reactor>,
    discover: Box<dyn Discover>,
    balance: Box<dyn LoadBalance>,
    budget: RetryBudget,
    /// One pool per instance address, made on first use.
    pools: Mutex<HashMap<Address, Peer>>,
}

/// The connections to one instance.
#[derive(Debug, Clone)]
enum Peer {
    Pooled(Arc<Pool>),
    Mux(Arc<MuxPool>),
}

/// The connection a call goes out on.
#[derive(Debug)]
enum Lease {
    /// Lent to this call alone.
    Pooled(Pooled),
    /// Shared with other calls; this call's place on it.
    Mux(MuxCall),
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("service", &self.service)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `service` (its name, sent as the callee in TTHeader) at `addr`. Must
    /// be created inside a tokio runtime (its reactor's pollers are tasks of it).
    pub fn new(service: &str, addr: Address, config: ClientConfig) -> io::Result<Client> {
        Self::with_discover(
            service,
            StaticDiscover(vec![Instance::new(addr)]),
            WeightedRandom::default(),
            config,
        )
    }

    /// A client of `service` at the instances `discover` finds, each call going to the
    /// one `balance` picks (with [`ClientContext::hash_key`] for key-based balancers).
    pub fn with_discover(
        service: &str,
        discover: impl Discover,
        balance: impl LoadBalance,
        config: ClientConfig,
    ) -> io::Result<Client> {
        if config.multiplex && config.framing != Framing::TTHeader {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "multiplexing needs TTHeader framing: replies are matched to calls by the \
                 sequence id in their header",
            ));
        }
        let reactor = match config.transport {
            crate::transport::TransportKind::Netpoll => Some(netpoll_rs::Reactor::on_runtime(
                &tokio::runtime::Handle::current(),
                config.reactor.clone(),
            )?),
            crate::transport::TransportKind::Tokio => None,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                service: service.to_string(),
                budget: RetryBudget::new(config.retry_ratio, 10),
                config,
                reactor,
                discover: Box::new(discover),
                balance: Box::new(balance),
                pools: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The pool of the instance picked for this call (not one in `avoid`, unless it is
    /// the only choice).
    fn pick(&self, cx: &ClientContext, avoid: &[Address]) -> Result<Peer, TransportError> {
        let all = self.inner.discover.instances();
        let fresh: Vec<Instance> = all
            .iter()
            .filter(|i| !avoid.contains(&i.address))
            .cloned()
            .collect();
        let list = if fresh.is_empty() { all } else { fresh };
        let i = self
            .inner
            .balance
            .pick(&list, cx.hash_key)
            .ok_or(TransportError::NoInstance)?;
        let addr = list[i].address.clone();
        let mut pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let config = &self.inner.config;
        let reactor = &self.inner.reactor;
        let peer = pools.entry(addr.clone()).or_insert_with(|| {
            if config.multiplex {
                Peer::Mux(Arc::new(MuxPool::new(reactor.clone(), addr, config)))
            } else {
                Peer::Pooled(Arc::new(Pool::new(reactor.clone(), addr, config)))
            }
        });
        Ok(peer.clone())
    }

    /// A connection for this call: a picked instance's, and when connecting fails (the
    /// request has not left, so trying elsewhere is safe) another's, as long as
    /// `config.retries` and the retry budget allow.
    async fn connection(&self, cx: &ClientContext, oneway: bool) -> Result<Lease, TransportError> {
        self.inner.budget.deposit();
        let mut failed = Vec::new();
        loop {
            let got = match self.pick(cx, &failed)? {
                Peer::Pooled(pool) => pool.get().await.map(Lease::Pooled),
                Peer::Mux(pool) => pool
                    .get()
                    .await
                    .and_then(|mux| Ok(Lease::Mux(mux.register(!oneway)?))),
            };
            match got {
                Ok(lease) => return Ok(lease),
                Err(e @ TransportError::Connect { .. })
                    if failed.len() < self.inner.config.retries as usize
                        && self.inner.budget.withdraw() =>
                {
                    if let TransportError::Connect { addr, .. } = e {
                        failed.push(addr);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Calls `method` with `args` and decodes the reply's result struct `R`.
    pub async fn call<A: Message + Send + Sync, R: Message>(
        &self,
        cx: &mut ClientContext,
        method: &'static str,
        args: &A,
    ) -> Result<R, CallError> {
        let timeout = cx.timeout.or(self.inner.config.rpc_timeout);
        let work = self.exchange(cx, method, args, false);
        let reply = match timeout {
            Some(t) => tokio::time::timeout(t, work)
                .await
                .map_err(|_| TransportError::Timeout(t))??,
            None => work.await?,
        };
        let Some((framing_meta, payload, seq_id)) = reply else {
            return Err(TransportError::Protocol("no reply".into()).into());
        };
        if let Some(header) = framing_meta {
            cx.metainfo.read_reply(&header.str_kv);
        }
        match self.inner.config.protocol {
            Protocol::Binary => {
                decode_reply::<Binary, R>(&self.inner.config, method, seq_id, payload)
            }
            Protocol::Compact => {
                decode_reply::<Compact, R>(&self.inner.config, method, seq_id, payload)
            }
        }
    }

    /// Sends a oneway call: no reply is read; done once the request is in the kernel.
    pub async fn oneway<A: Message + Send + Sync>(
        &self,
        cx: &mut ClientContext,
        method: &'static str,
        args: &A,
    ) -> Result<(), CallError> {
        let timeout = cx.timeout.or(self.inner.config.rpc_timeout);
        let work = self.exchange(cx, method, args, true);
        match timeout {
            Some(t) => tokio::time::timeout(t, work)
                .await
                .map_err(|_| TransportError::Timeout(t))??,
            None => work.await?,
        };
        Ok(())
    }

    /// Sends one request and (unless `oneway`) waits for its reply frame: the reply's
    /// TTHeader, if any, its message bytes, and the call's sequence id.
    async fn exchange<A: Message + Send + Sync>(
        &self,
        cx: &ClientContext,
        method: &'static str,
        args: &A,
        oneway: bool,
    ) -> Result<Option<(Option<Header>, Bytes, i32)>, TransportError> {
        let config = &self.inner.config;
        let header = |seq_id| MessageHeader {
            name: Utf8Bytes::from(method),
            ty: if oneway {
                MessageType::Oneway
            } else {
                MessageType::Call
            },
            seq_id,
        };
        match self.connection(cx, oneway).await? {
            Lease::Pooled(mut conn) => {
                let header = header(conn.next_seq());
                self.write_request(conn.conn(), cx, &header, args)?;
                conn.conn().flush().await?;
                if oneway {
                    conn.release();
                    return Ok(None);
                }
                let mut splitter =
                    FrameSplitter::new(config.framing, config.protocol, config.limits);
                let frame = conn
                    .conn()
                    .read_frame(|input| Ok(splitter.frame_len(input)?))
                    .await?
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection before replying",
                        )
                    })?;
                let (tt, payload) = self.unframe(frame)?;
                // Whole reply read: the connection is clean for the next call.
                conn.release();
                Ok(Some((tt, payload, header.seq_id)))
            }
            Lease::Mux(mut call) => {
                let header = header(call.seq_id());
                self.write_request(call.mux().conn(), cx, &header, args)?;
                call.mux().flush().await?;
                if oneway {
                    return Ok(None);
                }
                let (tt, payload) = self.unframe(call.reply().await?)?;
                Ok(Some((tt, payload, header.seq_id)))
            }
        }
    }

    /// A reply frame's TTHeader, if the client's framing has one, and its message.
    fn unframe(&self, frame: Bytes) -> Result<(Option<Header>, Bytes), TransportError> {
        Ok(match self.inner.config.framing {
            Framing::TTHeader => {
                let (h, payload) = Header::decode(&frame, &HeaderLimits::default())
                    .map_err(|e| TransportError::Protocol(format!("reply header: {e}")))?;
                (Some(h), payload)
            }
            Framing::Framed => (None, frame.slice(4..)),
            Framing::Buffered => (None, frame),
        })
    }

    /// Encodes the request (in the client's protocol) into the connection's output.
    fn write_request<A: Message + Send + Sync>(
        &self,
        conn: &crate::transport::Conn,
        cx: &ClientContext,
        header: &MessageHeader,
        args: &A,
    ) -> Result<(), TransportError> {
        match self.inner.config.protocol {
            Protocol::Binary => self.write_request_in::<Binary, A>(conn, cx, header, args),
            Protocol::Compact => self.write_request_in::<Compact, A>(conn, cx, header, args),
        }
    }

    fn write_request_in<P: thrift_codec::Protocol, A: Message + Send + Sync>(
        &self,
        conn: &crate::transport::Conn,
        cx: &ClientContext,
        header: &MessageHeader,
        args: &A,
    ) -> Result<(), TransportError> {
        let config = &self.inner.config;
        let tt = (config.framing == Framing::TTHeader).then(|| {
            let mut h = Header::new(header.seq_id, config.protocol);
            h.inner_framed = config.ttheader_framed;
            h.str_kv.extend(
                cx.metainfo
                    .request_pairs()
                    .map(|(k, v)| (Utf8Bytes::from(k), v.clone())),
            );
            h.int_kv.push((int_key::TO_METHOD, header.name.clone()));
            if !self.inner.service.is_empty() {
                h.int_kv.push((
                    int_key::TO_SERVICE,
                    Utf8Bytes::from(self.inner.service.clone()),
                ));
            }
            if !config.caller.is_empty() {
                h.int_kv.push((
                    int_key::FROM_SERVICE,
                    Utf8Bytes::from(config.caller.clone()),
                ));
            }
            if let Some(t) = cx.timeout.or(config.rpc_timeout) {
                h.int_kv.push((
                    int_key::RPC_TIMEOUT,
                    Utf8Bytes::from(t.as_millis().to_string()),
                ));
            }
            h
        });
        let written = conn.write_with(|out| {
            crate::codec::write_message::<P, A>(
                out,
                config.framing,
                tt.as_ref(),
                header,
                args,
                config.limits.max_frame,
            )
        });
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(len)) => Err(TransportError::Encode(format!(
                "a request of {len} bytes exceeds the frame limit of {}",
                config.limits.max_frame
            ))),
            Err(e) => Err(TransportError::Encode(e.to_string())),
        }
    }
}

/// Decodes a reply message: the result struct, or the exception the server sent.
fn decode_reply<P: thrift_codec::Protocol, R: Message>(
    config: &ClientConfig,
    method: &str,
    seq_id: i32,
    payload: Bytes,
) -> Result<R, CallError> {
    let codec = Codec::<P>::new().max_size(config.limits.max_frame);
    let bad = |what: String| CallError::Transport(TransportError::Protocol(what));
    let mut d = codec
        .decoder(payload)
        .map_err(|e| bad(format!("reply: {e}")))?;
    let header = d
        .read_message_begin()
        .map_err(|e| bad(format!("reply header: {e}")))?;
    if header.name.as_str() != method {
        return Err(CallError::Application(ApplicationException::new(
            ApplicationExceptionKind::WrongMethodName,
            format!("called {method}, the reply is for {}", header.name.as_str()),
        )));
    }
    if header.seq_id != seq_id {
        return Err(CallError::Application(ApplicationException::new(
            ApplicationExceptionKind::BadSequenceId,
            format!(
                "{method}: sent sequence id {seq_id}, the reply has {}",
                header.seq_id
            ),
        )));
    }
    match header.ty {
        MessageType::Reply => {
            R::decode(&mut d).map_err(|e| bad(format!("result of {method}: {e}")))
        }
        MessageType::Exception => Err(CallError::Application(
            ApplicationException::decode(&mut d)
                .map_err(|e| bad(format!("exception from {method}: {e}")))?,
        )),
        other => Err(bad(format!("a {other:?} message in reply to {method}"))),
    }
}

#[cfg(test)]
mod tests;
