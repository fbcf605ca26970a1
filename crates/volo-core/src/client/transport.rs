//! The bottom of every client stack: a [`Service`] that sends one attempt of a call to
//! the instance in `cx.rpc.callee.address` and reads its reply.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use thrift_wire::{LinkBuffer, MessageHeader, MessageType, Utf8Bytes};

use futures_util::StreamExt;

use super::balance::Changes;
use super::mux::{MuxCall, MuxPool};
use super::pool::{Dialer, Pool, Pooled, reactor_for};
use super::stream::{BreakHook, OpenedStream, StreamPool, StreamRequest};
use super::{
    ClientCall, ClientConfig, ClientContext, ClientRequest, ClientResponse, Error, FrameSizes,
};
use crate::codec::ttheader::Header;
use crate::codec::{FrameError, FrameOut, FrameSplitter, Framing, Protocol, theader};
use crate::context::Address;
use crate::envelope::{self, ClientHeaders, FrameHeader};
use crate::service::Service;
use crate::stream::Metadata;
use crate::stream::session::Timer;
use crate::transport::{FrameIo, lock};

/// Sends calls to instances: a pool of connections per instance address (ping-pong,
/// or mux with [`ConnectionPool::mux`](super::ConnectionPool::mux)), opened on first use. Cheap to
/// clone; clones share the pools.
///
/// It sends to the address the balancer put in `cx.rpc.callee.address` (a call without
/// one fails with [`ErrorKind::NoInstance`](super::ErrorKind::NoInstance)), sends the
/// call's remaining time (`cx.rpc.deadline`) in TTHeader so the server can give up
/// when the caller has, and reads the backward metainfo of the reply into the context.
/// It does not time calls out itself: the timeout layer above it drops a late call,
/// and a dropped call's pooled connection is closed.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    /// What every TTHeader request carries besides the call, made once.
    headers: ClientHeaders,
    reactor: Option<netpoll_rs::Reactor>,
    /// One pool per instance address, made on first use.
    pools: Mutex<HashMap<Address, Peer>>,
    /// `config.observability.metrics`' byte counters, when on.
    bytes: Option<crate::metrics::ByteCounters>,
    /// The streaming connections of each instance address, made on first use; `None`
    /// once they were closed ([`Transport::close_streams`]).
    streams: Mutex<Option<HashMap<Address, Arc<StreamPool>>>>,
    /// The clock of the streams' deadlines and flow control waits.
    stream_timer: Mutex<Timer>,
    /// `config.observability.metrics`' stream counters, when on.
    stream_metrics: Option<crate::metrics::StreamCounters>,
    /// Told when a streaming connection breaks under open streams.
    on_break: OnceLock<BreakHook>,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
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

impl Transport {
    /// A transport with `config`'s framing, protocol, sockets and pools. Must be
    /// created inside a tokio runtime (the reactor's pollers are tasks of it). Fails
    /// when mux connections are asked for without TTHeader framing, and for JSON in
    /// TTHeader (which has no protocol id for it).
    pub fn new(config: ClientConfig) -> io::Result<Transport> {
        if config.pool.mux && config.format.framing != Framing::TTHeader {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mux connections need TTHeader framing: replies are matched to calls by the \
                 sequence id in their header",
            ));
        }
        if config.format.framing == Framing::TTHeader && config.format.protocol == Protocol::Json {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                crate::codec::ttheader::HeaderError::NoProtocolId(Protocol::Json),
            ));
        }
        let reactor = reactor_for(&config)?;
        Ok(Transport {
            inner: Arc::new(Inner {
                headers: ClientHeaders {
                    protocol: config.format.protocol,
                    ttheader_framed: config.format.ttheader_framed,
                    caller: Utf8Bytes::from(config.caller.clone()),
                    connect_timeout: Utf8Bytes::from(
                        config.timeouts.connect.as_millis().to_string(),
                    ),
                },
                bytes: config
                    .observability
                    .metrics
                    .as_ref()
                    .map(|m| m.client_bytes().clone()),
                stream_metrics: config
                    .observability
                    .metrics
                    .as_ref()
                    .map(|m| m.streams(false).clone()),
                config,
                reactor,
                pools: Mutex::new(HashMap::new()),
                streams: Mutex::new(Some(HashMap::new())),
                stream_timer: Mutex::new(Timer::default()),
                on_break: OnceLock::new(),
            }),
        })
    }

    /// Sets the clock of its streams' deadlines and of their flow control's waits
    /// (default the real one; tests give a [`ManualClock`](crate::clock::ManualClock)).
    /// Applies to the instances first streamed to afterwards.
    pub fn with_stream_clock(self, clock: impl crate::clock::Clock) -> Self {
        *lock(&self.inner.stream_timer) = Timer::new(clock);
        self
    }

    /// Has `f` told the address of an instance whose streaming connection breaks
    /// under open streams (the builder counts it against the instance's breaker).
    /// Set once; later calls change nothing.
    pub(crate) fn on_stream_break(&self, f: BreakHook) {
        let _ = self.inner.on_break.set(f);
    }

    /// The streaming connections of `addr`, made on first use. After
    /// [`close_streams`](Self::close_streams), a pool that takes no stream.
    fn stream_pool(&self, addr: &Address) -> Arc<StreamPool> {
        let mut streams = lock(&self.inner.streams);
        if let Some(pool) = streams.as_ref().and_then(|pools| pools.get(addr)) {
            return Arc::clone(pool);
        }
        let inner = &*self.inner;
        let pool = Arc::new(StreamPool::new(
            Dialer::new(inner.reactor.clone(), addr.clone(), &inner.config),
            &inner.config.streams,
            lock(&inner.stream_timer).clone(),
            inner.stream_metrics.clone(),
            inner.on_break.get().cloned(),
        ));
        match streams.as_mut() {
            Some(pools) => {
                pools.insert(addr.clone(), Arc::clone(&pool));
            }
            None => pool.shut(),
        }
        pool
    }

    /// Closes the streaming connections: no new streams (an opening fails with
    /// [`StreamError::Open`](crate::stream::StreamError::Open)); once the streams open
    /// on a connection have ended, what was written on it (a dropped stream's rst, a
    /// deadline's) is sent and the connection closed. Returns when every one is
    /// closed. Calls are not affected. Clones share it; a later call returns at once.
    /// The connections of an instance that discovery had already dropped close in
    /// the background, as before, and are not waited for.
    pub async fn close_streams(&self) {
        let pools: Vec<Arc<StreamPool>> = lock(&self.inner.streams)
            .take()
            .map(|pools| pools.into_values().collect())
            .unwrap_or_default();
        futures_util::future::join_all(pools.iter().map(|pool| pool.close())).await;
    }

    /// The settings it was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Drops the pools of the instances `changes` reports removed, as it reports
    /// them, so that a client that follows a registry through churn keeps pools (and
    /// idle connections) only for instances that are listed. Calls in progress on a
    /// removed instance finish on their connections, which close after them. An
    /// instance listed again gets a new pool on its next call. Streaming connections
    /// to a removed instance take no new streams (but for openings that had found
    /// them before the change), and close once their last stream ends. The task ends
    /// with the
    /// stream, or at the first change after the transport is gone.
    pub(crate) fn follow(&self, mut changes: Changes) {
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            while let Some(change) = changes.next().await {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                let retired: Vec<Arc<StreamPool>> = {
                    let mut pools = lock(&inner.pools);
                    let mut streams = lock(&inner.streams);
                    change
                        .removed
                        .iter()
                        .filter_map(|gone| {
                            pools.remove(&gone.address);
                            streams.as_mut()?.remove(&gone.address)
                        })
                        .collect()
                };
                for pool in retired {
                    pool.retire();
                }
            }
        });
    }

    /// The addresses it has pools for.
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> Vec<Address> {
        let pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        pools.keys().cloned().collect()
    }

    /// The pool of `addr`, made on first use.
    fn peer(&self, addr: &Address) -> Peer {
        let mut pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(peer) = pools.get(addr) {
            return peer.clone();
        }
        let config = &self.inner.config;
        let reactor = self.inner.reactor.clone();
        let peer = if config.pool.mux {
            Peer::Mux(Arc::new(MuxPool::new(reactor, addr.clone(), config)))
        } else {
            Peer::Pooled(Arc::new(Pool::new(reactor, addr.clone(), config)))
        };
        pools.insert(addr.clone(), peer.clone());
        peer
    }

    /// A connection to `addr` for this call.
    /// `connect_timeout`: the call's, when a governance rule set one.
    async fn lease(
        &self,
        addr: &Address,
        oneway: bool,
        connect_timeout: Option<std::time::Duration>,
    ) -> Result<Lease, Error> {
        match self.peer(addr) {
            Peer::Pooled(pool) => pool.get(connect_timeout).await.map(Lease::Pooled),
            Peer::Mux(pool) => {
                let mux = pool.get(connect_timeout).await?;
                let call = mux.register(!oneway).map_err(|e| {
                    // The connection broke before this call was written: nothing left.
                    Error::io(e).with_sent(false)
                })?;
                Ok(Lease::Mux(call))
            }
        }
    }

    /// Sends one request and (unless oneway) waits for its reply frame: the reply's
    /// header, if any, its message bytes, and the call's sequence id.
    async fn exchange(
        &self,
        cx: &mut ClientContext,
        addr: &Address,
        req: &ClientRequest,
    ) -> Result<Option<(FrameHeader, Bytes, i32)>, Error> {
        // This attempt's sizes only, whatever an earlier one left.
        cx.frame_sizes = FrameSizes::default();
        let config = &self.inner.config;
        let oneway = req.is_oneway();
        let header = |seq_id| MessageHeader {
            name: match req.multiplexed_name() {
                Some(name) => name.clone(),
                None => req.method_name().to_utf8(),
            },
            ty: if oneway {
                MessageType::Oneway
            } else {
                MessageType::Call
            },
            seq_id,
        };
        match self.lease(addr, oneway, cx.connect_timeout).await? {
            Lease::Pooled(mut conn) => {
                let header = header(conn.next_seq());
                cx.frame_sizes.sent = self.write_request(conn.conn(), cx, &header, req)?;
                conn.conn().flush().await?;
                if oneway {
                    conn.release();
                    return Ok(None);
                }
                let mut splitter = FrameSplitter::new(
                    config.format.framing,
                    config.format.protocol,
                    config.wire.frame,
                );
                let frame = conn
                    .conn()
                    .read_reply(|input| Ok(splitter.frame_len(input)?))
                    .await?
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection before replying",
                        )
                    })?;
                cx.frame_sizes.received = self.received(&frame);
                let (tt, payload) = self.unframe(frame)?;
                // Whole reply read: the connection is clean for the next call, unless
                // the server said it is closing it (then it is dropped, so closed).
                if !tt.says_closing() {
                    conn.release();
                }
                Ok(Some((tt, payload, header.seq_id)))
            }
            Lease::Mux(mut call) => {
                let header = header(call.seq_id());
                cx.frame_sizes.sent = self.write_request(call.mux().conn(), cx, &header, req)?;
                if oneway {
                    call.mux().flush().await?;
                    return Ok(None);
                }
                call.sent().await?;
                let frame = call.reply().await?;
                cx.frame_sizes.received = self.received(&frame);
                let (tt, payload) = self.unframe(frame)?;
                if tt.says_closing() {
                    call.mux().retire();
                }
                Ok(Some((tt, payload, header.seq_id)))
            }
        }
    }

    /// Counts a reply frame read: its size.
    fn received(&self, frame: &Bytes) -> usize {
        if let Some(b) = &self.inner.bytes {
            b.received.inc_by(frame.len() as u64);
        }
        frame.len()
    }

    /// Counts what a request added to a connection's output: the bytes added.
    fn sent(&self, out: &LinkBuffer, before: usize) -> usize {
        let n = out.len().saturating_sub(before);
        if let Some(b) = &self.inner.bytes {
            b.sent.inc_by(n as u64);
        }
        n
    }

    /// A reply frame's header, if the client's framing has one, and its message (a
    /// THeader's transforms undone, within the frame limit).
    fn unframe(&self, frame: Bytes) -> Result<(FrameHeader, Bytes), Error> {
        let config = &self.inner.config;
        envelope::open(
            config.format.framing,
            frame,
            &config.wire.header,
            config.wire.frame.max_frame,
            None,
        )
        .map_err(|e| Error::protocol(FrameError::from(e)))
    }

    /// Encodes the request into the connection's output, inside the client's framing
    /// (a THeader's message compressed first when asked).
    fn write_request(
        &self,
        conn: &crate::transport::Conn,
        cx: &ClientContext,
        header: &MessageHeader,
        req: &ClientRequest,
    ) -> Result<usize, Error> {
        let config = &self.inner.config;
        let max = config.wire.frame.max_frame;
        let (tt, th): (Header, theader::Header);
        let frame = match config.format.framing {
            Framing::TTHeader => {
                tt = self.ttheader(cx, header, req);
                FrameOut::TTHeader(&tt)
            }
            Framing::THeader => {
                th = envelope::request_theader(
                    header.seq_id,
                    config.format.protocol,
                    &config.format.theader,
                    &cx.metainfo,
                );
                FrameOut::THeader(&th)
            }
            Framing::Framed => FrameOut::Framed,
            Framing::Buffered => FrameOut::Buffered,
        };
        let written = conn.write_with(|out| {
            let before = out.len();
            let written = req
                .args()
                .write(out, config.format.protocol, &frame, header, max);
            (written, self.sent(out, before))
        });
        match written {
            (Ok(Ok(())), n) => Ok(n),
            (Ok(Err(len)), _) => Err(Error::encode(TooLarge { len, max })),
            (Err(e), _) => Err(Error::encode(e)),
        }
    }

    /// The request's TTHeader (see [`envelope::request_ttheader`]): the message goes
    /// out under the `Service:method` name of a multiplexed service, but the header
    /// names the bare method.
    fn ttheader(&self, cx: &ClientContext, header: &MessageHeader, req: &ClientRequest) -> Header {
        let method = match req.multiplexed_name() {
            Some(_) => req.method_name().to_utf8(),
            None => header.name.clone(),
        };
        envelope::request_ttheader(
            &self.inner.headers,
            &cx.rpc,
            &cx.metainfo,
            cx.caller_method.as_ref(),
            header,
            method,
        )
    }
}

/// A request larger than the frame limit.
#[derive(Debug, thiserror::Error)]
#[error("a request of {len} bytes exceeds the frame limit of {max}")]
struct TooLarge {
    len: usize,
    max: usize,
}

impl Service<ClientContext, ClientRequest> for Transport {
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let Some(addr) = cx.rpc.callee.address.clone() else {
            return Err(Error::no_instance());
        };
        let reply = self
            .exchange(cx, &addr, &req)
            .await
            .map_err(|e| e.with_instance(addr.clone()))?;
        let Some((framing_meta, payload, seq_id)) = reply else {
            return Ok(ClientResponse::none());
        };
        envelope::read_reply(&framing_meta, &mut cx.metainfo);
        cx.rpc.seq_id = seq_id;
        ClientResponse::from_reply_to(
            payload,
            self.inner.config.format.protocol,
            &req,
            seq_id,
            self.inner.config.wire.frame.max_frame,
        )
        .map_err(|e| {
            // An exception reply whose header names its refusal is told by that.
            let e = match framing_meta.refusal_said() {
                Some(said) => e.with_refusal_said(said),
                None => e,
            };
            e.with_instance(addr)
        })
    }
}

/// Opens a stream on the instance in `cx.rpc.callee.address`, over one of its
/// streaming connections; the header carries the request's metadata after the
/// context's metainfo (persistent and transient values, prefixed, as a call's
/// TTHeader carries them), and names the callee's service (`isn`).
impl Service<ClientContext, StreamRequest> for Transport {
    type Response = OpenedStream;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: StreamRequest,
    ) -> Result<OpenedStream, Error> {
        let Some(addr) = cx.rpc.callee.address.clone() else {
            return Err(Error::no_instance());
        };
        let pool = self.stream_pool(&addr);
        let mut pairs = cx.metainfo.request_pairs().peekable();
        let with_meta;
        let header = if pairs.peek().is_none() {
            req.header()
        } else {
            let mut all = Metadata::new();
            for (k, v) in pairs {
                all.push(Utf8Bytes::from(k), v.clone());
            }
            for (k, v) in req.header().pairs() {
                all.push(k.clone(), v.clone());
            }
            with_meta = all;
            &with_meta
        };
        let timeout = req.timeout().or(self.inner.config.streams.timeout);
        let method = req.method_name().to_utf8();
        let stream = pool
            .open(method, &cx.rpc.callee.service, header, timeout)
            .await
            .map_err(|e| e.with_instance(addr))?;
        Ok(OpenedStream::new(stream))
    }
}
