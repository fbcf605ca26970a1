//! One server connection: framing detected from its first bytes, then one request after
//! another, each answered in the framing and protocol it came in.

use std::any::Any;
use std::future::{Future, poll_fn};
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use thrift_codec::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Decoder, Json,
    LinkBuffer, MessageHeader, MessageType, Utf8Bytes,
};
use tokio::sync::{OwnedSemaphorePermit, watch};

use super::multiplex::Services;
use super::{Dispatch, DispatchError, EncodeReply, ServerConfig, ServerRequest, ServiceInfo};
use crate::clock::{Clock, SystemClock};
use crate::codec::ttheader::{Header, int_key};
use crate::codec::{DETECT_LEN, FrameError, FrameSplitter, Framing, Protocol, detect, theader};
use crate::context::{Address, ServerContext};
use crate::transport::FrameIo;

/// What every connection of a server shares.
pub(crate) struct Shared<D> {
    pub(crate) dispatch: D,
    /// What the IDL says of the service, or of each service of a multiplexed server.
    pub(crate) services: Services,
    pub(crate) config: ServerConfig,
    /// Calls being handled, across connections, against `config.max_inflight`.
    pub(crate) inflight: tokio::sync::Semaphore,
    /// The bytes of frames being read or handled, across connections, in KiB, against
    /// `config.max_buffered_input`.
    pub(crate) input_budget: Arc<tokio::sync::Semaphore>,
    /// `config.limit`: refuses calls over the limits before they are decoded.
    pub(crate) limiter: super::limit::Limiter,
}

/// What the server knows of a service from the IDL ([`ServiceInfo`]), kept apart
/// from the dispatcher, which layers wrap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Described {
    /// The service's name (on a multiplexed server, the name it is registered under).
    pub(crate) name: &'static str,
    /// Whether a method is oneway.
    pub(crate) is_oneway: fn(&str) -> bool,
}

impl Described {
    /// What `S` says of itself.
    pub(crate) fn of<S: ServiceInfo>() -> Self {
        Described {
            name: S::NAME,
            is_oneway: S::is_oneway,
        }
    }
}

/// The input budget of `max_buffered_input` bytes, counted in KiB.
pub(crate) fn input_budget(max_buffered_input: usize) -> Arc<tokio::sync::Semaphore> {
    let units = max_buffered_input.div_ceil(1024);
    Arc::new(tokio::sync::Semaphore::new(
        units.min(tokio::sync::Semaphore::MAX_PERMITS),
    ))
}

/// KiB of the input budget that a frame of `len` bytes takes.
fn budget_units(len: usize) -> u32 {
    u32::try_from(len.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// The framing of a connection, detected from its first bytes, and the input budget
/// taken by the frame being read: all of it once its length is known, and before that
/// what has arrived of it.
#[derive(Default)]
pub(crate) struct FrameReader {
    splitter: Option<FrameSplitter>,
    reserved: Option<OwnedSemaphorePermit>,
}

impl FrameReader {
    /// The length of the frame at the front of `input` once it can tell (detecting the
    /// framing first); takes the frame's share of the input budget as soon as the
    /// length is known (and, while it is not, as much as has arrived), and fails with
    /// [`FrameError::OverBudget`] when it is not there. First bytes that match no
    /// protocol, and frames that cannot be cut (a length or a Buffered message over
    /// the limit, a malformed Buffered message), are logged with `peer` before the
    /// error closes the connection.
    pub(crate) fn frame_len<D>(
        &mut self,
        input: &mut LinkBuffer,
        shared: &Shared<D>,
        peer: Option<&Address>,
    ) -> io::Result<Option<usize>> {
        let s = match &mut self.splitter {
            Some(s) => s,
            None => {
                let n = input.len().min(DETECT_LEN);
                let Some(head) = input.peek(n) else {
                    return Ok(None);
                };
                match detect(head) {
                    Ok(Some((framing, protocol))) => self.splitter.insert(FrameSplitter::new(
                        framing,
                        protocol,
                        shared.config.limits,
                    )),
                    Ok(None) => return Ok(None),
                    Err(e) => {
                        unrecognised(peer, head, &e);
                        return Err(e.into());
                    }
                }
            }
        };
        let len = s.frame_len(input).inspect_err(|e| {
            let peer = peer_name(peer);
            let (framing, protocol) = s.kind();
            tracing::warn!(%peer, ?framing, ?protocol, error = %e, "closing a connection: a frame cannot be read");
        })?;
        // The whole frame once its length is known; before that (a Buffered message is
        // measured by parsing all of it) what has arrived of it, as it grows.
        self.reserve(len.unwrap_or(input.len()), shared)?;
        Ok(len)
    }

    /// Makes the budget held for the frame being read cover `bytes`.
    fn reserve<D>(&mut self, bytes: usize, shared: &Shared<D>) -> Result<(), FrameError> {
        let units = budget_units(bytes);
        let held = self
            .reserved
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits);
        let more = units.saturating_sub(u32::try_from(held).unwrap_or(u32::MAX));
        if more == 0 {
            return Ok(());
        }
        match Arc::clone(&shared.input_budget).try_acquire_many_owned(more) {
            Ok(permit) => match &mut self.reserved {
                Some(held) => held.merge(permit),
                None => self.reserved = Some(permit),
            },
            Err(_) => return Err(FrameError::OverBudget(bytes)),
        }
        Ok(())
    }

    /// The framing and protocol, once detected.
    pub(crate) fn kind(&self) -> Option<(Framing, Protocol)> {
        self.splitter.as_ref().map(FrameSplitter::kind)
    }

    /// Calls one connection may have in progress: many on TTHeader (matched by
    /// sequence id), one on the others (answered in order).
    pub(crate) fn call_cap(&self, config: &ServerConfig) -> usize {
        match self.kind() {
            Some((Framing::TTHeader, _)) => config.max_inflight_per_connection.max(1),
            _ => 1,
        }
    }

    /// The budget of the frame just taken, to hold until its call is done.
    pub(crate) fn take_budget(&mut self) -> Option<OwnedSemaphorePermit> {
        self.reserved.take()
    }
}

/// The log line of a connection closed because [`start_call`] could not start the call
/// of a frame (a malformed header, an unreadable message).
#[cold]
pub(crate) fn bad_frame(
    peer: Option<&Address>,
    framing: Framing,
    protocol: Protocol,
    error: &io::Error,
) {
    let peer = peer_name(peer);
    tracing::warn!(%peer, ?framing, ?protocol, %error, "closing a connection: bad {framing:?} frame");
}

/// How log lines name the peer of a connection.
pub(crate) fn peer_name(peer: Option<&Address>) -> String {
    peer.map_or_else(|| "an unknown peer".to_string(), Address::to_string)
}

/// The log line of a connection closed because its first bytes match no protocol
/// (Binary, Compact, JSON, Framed, TTHeader, THeader): what was seen, as hex, and from
/// where.
#[cold]
fn unrecognised(peer: Option<&Address>, head: &[u8], error: &FrameError) {
    let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
    let peer = peer_name(peer);
    tracing::warn!(
        %peer,
        first_bytes = %hex,
        %error,
        "closing a connection whose first bytes match no protocol"
    );
}

/// Serves `conn` until the peer closes, a frame cannot be read, a read times out, or
/// the server shuts down (then after the calls in hand are answered).
///
/// Calls on one connection run concurrently inside this task (no task per call): up to
/// [`ServerConfig::max_inflight_per_connection`] on a TTHeader connection, whose
/// replies carry the sequence id a multiplexing client (Kitex, Volo, ours) matches
/// them by, and one at a time on THeader, Framed and Buffered connections, whose Apache
/// Thrift clients expect replies in request order (an Apache THeader client does not
/// match replies by the header's sequence id either). Replies that are ready together go out
/// in one flush.
pub(crate) async fn serve<D: Dispatch, C: FrameIo>(
    conn: C,
    shared: Arc<Shared<D>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut reader = FrameReader::default();
    let peer = conn.peer();
    let mut calls = FuturesUnordered::new();
    let mut stopping = false;
    loop {
        stopping |= *shutdown.borrow();
        let cap = reader.call_cap(&shared.config);
        // After a shutdown starts, a frame that has begun is still read and answered.
        let reading = calls.len() < cap && (!stopping || conn.input_len() > 0);
        if !reading && calls.is_empty() {
            return;
        }
        let read = read_with_timeouts(&conn, &shared.config, calls.is_empty(), |input| {
            reader.frame_len(input, &shared, peer.as_ref())
        });
        tokio::select! {
            biased;
            Some(done) = calls.next(), if !calls.is_empty() => {
                let mut written = conn.write_with(|out| answer(out, &shared, done));
                while written.is_ok() {
                    match calls.next().now_or_never() {
                        Some(Some(done)) => written = conn.write_with(|out| answer(out, &shared, done)),
                        _ => break,
                    }
                }
                if written.is_err() || conn.flush().await.is_err() {
                    return;
                }
            }
            frame = read, if reading => {
                let Ok(Some(frame)) = frame else {
                    return;
                };
                let Some((framing, protocol)) = reader.kind() else {
                    return;
                };
                let budget = reader.take_budget();
                let started = conn.write_with(|out| {
                    start_call(out, &shared, peer.clone(), framing, protocol, frame)
                });
                match started {
                    // The frame's budget is given back when its call is done.
                    Ok(Some(call)) => calls.push(call.map(move |done| {
                        drop(budget);
                        done
                    })),
                    // Answered already (an exception): send it.
                    Ok(None) => {
                        if conn.flush().await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        bad_frame(peer.as_ref(), framing, protocol, &e);
                        let _ = conn.flush().await;
                        return;
                    }
                }
            }
            _ = shutdown.changed(), if !stopping => stopping = true,
        }
    }
}

/// Reads a frame; gives up when a started frame takes longer than `read_timeout`, or
/// (with `idle_timeout`, and only while `idle`: no call of the connection is in
/// progress) when nothing arrives for that long.
async fn read_with_timeouts<C: FrameIo, F>(
    conn: &C,
    config: &ServerConfig,
    idle: bool,
    mut frame_len: F,
) -> io::Result<Option<Bytes>>
where
    F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>> + Send,
{
    let started = Instant::now();
    loop {
        match tokio::time::timeout(config.read_timeout, conn.read_frame(&mut frame_len)).await {
            Ok(r) => return r,
            // Nothing of a frame yet: an idle connection, allowed up to its own limit.
            Err(_) if conn.input_len() == 0 => {
                if idle
                    && config
                        .idle_timeout
                        .is_some_and(|limit| started.elapsed() >= limit)
                {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
    }
}

/// A handled call, with what its reply needs.
pub(crate) struct Done<R> {
    cx: ServerContext,
    /// The framing and protocol of the request, which the reply takes whatever a
    /// layer did to the context's.
    framing: Framing,
    protocol: Protocol,
    ttheader: Option<Header>,
    theader: Option<theader::Header>,
    name: Utf8Bytes,
    seq_id: i32,
    /// Nothing is sent back.
    oneway: bool,
    outcome: Result<Result<R, DispatchError>, Box<dyn Any + Send>>,
}

/// Takes one frame: unwraps its framing and reads the message header. Returns the
/// call to run (it owns what it needs, so it can move to a task of its own);
/// `Ok(None)` when the frame was answered already with an exception (written into
/// `out`, not flushed); `Err` when the connection must close (an unreadable header:
/// answered with a `PROTOCOL_ERROR` first where a message was readable).
///
/// Both drivers (a task per connection, and the poller with `inline_dispatch`) start
/// every call here and nowhere else, so what must happen to each frame before its
/// call runs (limiters, before anything is decoded) has one place.
///
/// A frame that ends its connection here is logged by the driver, with
/// [`bad_frame`], once, whatever its framing.
pub(crate) fn start_call<D: Dispatch>(
    out: &mut LinkBuffer,
    shared: &Arc<Shared<D>>,
    peer: Option<Address>,
    framing: Framing,
    protocol: Protocol,
    frame: Bytes,
) -> io::Result<Option<impl Future<Output = Done<D::Reply>> + Send + 'static + use<D>>> {
    let mut cx = ServerContext::new(framing, protocol);
    cx.rpc.caller.address = peer;
    let max_frame = shared.config.limits.max_frame;
    let (payload, ttheader, theader) = match framing {
        Framing::TTHeader => {
            let (header, payload) =
                Header::decode(&frame, &shared.config.header_limits).map_err(FrameError::from)?;
            cx.protocol = header.protocol;
            cx.metainfo.read_request(&header.str_kv);
            if let Some(ms) = header
                .int_value(int_key::RPC_TIMEOUT)
                .and_then(|v| v.parse::<u64>().ok())
            {
                // To within 1% of the time left, as the caller reads it.
                let left = Duration::from_millis(ms);
                cx.rpc.deadline = Some(SystemClock.now_within(left / 100) + left);
            }
            if let Some(from) = header.int_value(int_key::FROM_SERVICE) {
                cx.rpc.caller.service = from.to_string().into();
            }
            (payload, Some(header), None)
        }
        Framing::THeader => {
            let (header, payload) = theader_request(out, &mut cx, &frame, shared)?;
            let Some(payload) = payload else {
                return Ok(None);
            };
            (payload, None, Some(header))
        }
        Framing::Framed => (frame.slice(4..), None, None),
        Framing::Buffered => (frame, None, None),
    };
    let reply = Reply {
        max_frame,
        ttheader: ttheader.as_ref(),
        theader: theader.as_ref(),
    };
    let begun = match cx.protocol {
        Protocol::Binary => message_begin::<Binary>(out, &reply, &cx, &payload)?,
        Protocol::Compact => message_begin::<Compact>(out, &reply, &cx, &payload)?,
        Protocol::Json => message_begin::<Json>(out, &reply, &cx, &payload)?,
    };
    let Some((mut header, args_at)) = begun else {
        return Ok(None);
    };
    let service = match &shared.services {
        Services::One(service) => *service,
        // Routed by the name's prefix, TTHeader's `isn` or to the default; the call
        // goes on under its bare name, and is answered under it.
        Services::Many(table) => match table.route(&header.name, ttheader.as_ref()) {
            Ok((service, method)) => {
                header.name = method;
                service
            }
            Err(unrouted) => {
                tracing::debug!(
                    peer = ?cx.rpc.caller.address,
                    error = unrouted.exception.message.as_str(),
                    "a call to no service of this server"
                );
                if header.ty != MessageType::Oneway {
                    let ex = &unrouted.exception;
                    reply.exception(out, &cx, unrouted.method, header.seq_id, ex)?;
                }
                return Ok(None);
            }
        },
    };
    cx.rpc.callee.service = service.name.into();
    cx.rpc.method = header.name.clone();
    cx.rpc.seq_id = header.seq_id;
    // Answered only when sent as a CALL of a method the IDL does not make oneway (in
    // the service the call was routed to).
    let oneway = header.ty == MessageType::Oneway || (service.is_oneway)(header.name.as_str());
    // The limits, before the arguments are decoded (Kitex limits in OnRead): over
    // them a call is refused at once, not queued.
    let admitted = match shared.limiter.try_acquire() {
        Ok(permit) => permit,
        Err(over) => {
            if !oneway {
                let ex = super::limit::refusal(&over);
                reply.exception(out, &cx, header.name, header.seq_id, &ex)?;
            }
            return Ok(None);
        }
    };
    let request = ServerRequest::new(payload.slice(args_at..));
    let (framing, protocol) = (cx.framing, cx.protocol);
    let shared = Arc::clone(shared);
    let run = async move {
        // The limiter's slot is held until the call is done (or dropped).
        let _admitted = admitted;
        let outcome = {
            let _permit = shared.inflight.acquire().await;
            caught(shared.dispatch.call(&mut cx, request)).await
        };
        Done {
            cx,
            framing,
            protocol,
            ttheader,
            theader,
            name: header.name,
            seq_id: header.seq_id,
            oneway,
            outcome,
        }
    };
    Ok(Some(run))
}

/// Takes a THeader frame apart: its header (its protocol and info go into `cx`) and its
/// payload, the transforms undone. A payload of `None`: the frame declared a transform
/// this server cannot undo, and was answered with an `INVALID_TRANSFORM` exception (in
/// `out`, not flushed), as the format requires; `Err` when the frame is malformed (the
/// connection closes, with the driver's [`bad_frame`] line).
fn theader_request<D>(
    out: &mut LinkBuffer,
    cx: &mut ServerContext,
    frame: &Bytes,
    shared: &Shared<D>,
) -> io::Result<(theader::Header, Option<Bytes>)> {
    let max_frame = shared.config.limits.max_frame;
    let malformed = |e| io::Error::from(FrameError::THeader(e));
    let (mut header, raw) =
        theader::Header::decode(frame, &shared.config.header_limits).map_err(malformed)?;
    cx.protocol = header.protocol;
    if let Some(id) = header.unsupported_transform() {
        tracing::debug!(
            transform = id,
            "answering a THeader call whose transform is unknown"
        );
        header.transforms.clear();
        let reply = Reply {
            max_frame,
            ttheader: None,
            theader: Some(&header),
        };
        let ex = ApplicationException::new(
            ApplicationExceptionKind::InvalidTransform,
            format!("THeader transform {id} is not supported"),
        );
        let seq = header.seq_id;
        reply.exception(out, cx, Utf8Bytes::new(), seq, &ex)?;
        return Ok((header, None));
    }
    let payload = header.untransform(raw, max_frame).map_err(malformed)?;
    cx.metainfo.read_request(&header.info);
    cx.metainfo.read_headers(&header.info);
    Ok((header, Some(payload)))
}

/// Reads the message header at the front of `payload`: the header and where the
/// arguments begin. `Ok(None)` when the message is no call (answered already with an
/// exception); `Err` when the header is unreadable (answered with a `PROTOCOL_ERROR`,
/// and the connection must close).
fn message_begin<P: thrift_codec::Protocol>(
    out: &mut LinkBuffer,
    reply: &Reply<'_>,
    cx: &ServerContext,
    payload: &Bytes,
) -> io::Result<Option<(MessageHeader, usize)>> {
    let codec = Codec::<P>::new().max_size(reply.max_frame);
    let mut d = codec
        .decoder(payload.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let header = match d.read_message_begin() {
        Ok(h) => h,
        Err(e) => {
            // No method or sequence id to answer to: say why, then close.
            let ex = ApplicationException::new(
                ApplicationExceptionKind::ProtocolError,
                format!("unreadable message header: {e}"),
            );
            reply.exception(out, cx, Utf8Bytes::default(), 0, &ex)?;
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    };
    if !matches!(header.ty, MessageType::Call | MessageType::Oneway) {
        let ex = ApplicationException::new(
            ApplicationExceptionKind::InvalidMessageType,
            format!("a server takes calls, not {:?} messages", header.ty),
        );
        reply.exception(out, cx, header.name, header.seq_id, &ex)?;
        return Ok(None);
    }
    let args_at = payload.len() - d.remaining();
    Ok(Some((header, args_at)))
}

/// Writes the reply of a handled call (nothing for a oneway call) into `out`.
pub(crate) fn answer<D: Dispatch>(
    out: &mut LinkBuffer,
    shared: &Shared<D>,
    done: Done<D::Reply>,
) -> io::Result<()> {
    if done.oneway {
        return Ok(());
    }
    match done.protocol {
        Protocol::Binary => answer_in::<Binary, D>(out, shared, done),
        Protocol::Compact => answer_in::<Compact, D>(out, shared, done),
        Protocol::Json => answer_in::<Json, D>(out, shared, done),
    }
}

fn answer_in<P: thrift_codec::Protocol, D: Dispatch>(
    out: &mut LinkBuffer,
    shared: &Shared<D>,
    done: Done<D::Reply>,
) -> io::Result<()> {
    let reply = Reply {
        max_frame: shared.config.limits.max_frame,
        ttheader: done.ttheader.as_ref(),
        theader: done.theader.as_ref(),
    };
    // The reply goes out as the request came in, with the backward metainfo the
    // layers and the handler left in the context.
    let mut cx = done.cx;
    (cx.framing, cx.protocol) = (done.framing, done.protocol);
    let (cx, name, seq) = (&cx, done.name, done.seq_id);
    match done.outcome {
        Ok(Ok(body)) => reply.send::<P, _>(out, cx, name, seq, &body),
        Ok(Err(e)) => {
            let ex = e.into_exception(name.as_str());
            reply.exception(out, cx, name, seq, &ex)
        }
        Err(panic) => {
            let ex = ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                format!("the handler panicked: {}", panic_message(&*panic)),
            );
            reply.exception(out, cx, name, seq, &ex)
        }
    }
}

/// Runs `fut`, turning a panic inside it into an `Err` with the panic's payload.
async fn caught<F: Future>(fut: F) -> Result<F::Output, Box<dyn Any + Send>> {
    let mut fut = std::pin::pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        },
    )
    .await
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// How a reply is framed: like its request.
struct Reply<'a> {
    max_frame: usize,
    /// The request's TTHeader, when it had one.
    ttheader: Option<&'a Header>,
    /// The request's THeader, when it had one.
    theader: Option<&'a theader::Header>,
}

impl Reply<'_> {
    /// An exception, in the call's protocol (`cx.protocol`).
    fn exception(
        &self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        name: Utf8Bytes,
        seq_id: i32,
        ex: &ApplicationException,
    ) -> io::Result<()> {
        let header = MessageHeader {
            name,
            ty: MessageType::Exception,
            seq_id,
        };
        let written = match cx.protocol {
            Protocol::Binary => self.write::<Binary, _>(out, cx, &header, ex)?,
            Protocol::Compact => self.write::<Compact, _>(out, cx, &header, ex)?,
            Protocol::Json => self.write::<Json, _>(out, cx, &header, ex)?,
        };
        written.map_err(|size| {
            io::Error::other(format!(
                "an exception reply of {size} bytes, above the frame limit"
            ))
        })
    }

    /// Writes a reply (the caller flushes); one larger than the frame limit becomes an `INTERNAL_ERROR`.
    fn send<P: thrift_codec::Protocol, M: EncodeReply>(
        &self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        name: Utf8Bytes,
        seq_id: i32,
        body: &M,
    ) -> io::Result<()> {
        let header = MessageHeader {
            name,
            ty: MessageType::Reply,
            seq_id,
        };
        if let Err(size) = self.write::<P, _>(out, cx, &header, body)? {
            let ex = ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                format!(
                    "the reply is {size} bytes, above the frame limit of {}",
                    self.max_frame
                ),
            );
            let header = MessageHeader {
                ty: MessageType::Exception,
                ..header
            };
            self.write::<P, _>(out, cx, &header, &ex)?
                .map_err(|_| io::Error::other("an exception reply above the frame limit"))?;
        }
        Ok(())
    }

    /// Writes the message (sized first, one reservation) behind its framing into the
    /// output. `Ok(Err(size))` when it would exceed the frame limit (nothing written).
    fn write<P: thrift_codec::Protocol, M: EncodeReply>(
        &self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        header: &MessageHeader,
        body: &M,
    ) -> io::Result<Result<(), usize>> {
        if let Some(req) = self.theader {
            // Echoed: flags, sequence id, transforms, outer framing; the protocol is
            // the request's too (`cx.protocol`).
            let mut h = theader::Header::new(req.seq_id, cx.protocol);
            h.flags = req.flags;
            h.framed = req.framed;
            h.transforms.clone_from(&req.transforms);
            h.info.extend(
                cx.metainfo
                    .reply_pairs()
                    .map(|(k, v)| (Utf8Bytes::from(k), v.clone())),
            );
            h.info.extend(cx.metainfo.header_pairs().cloned());
            return crate::codec::write_theader_message::<P, M>(
                out,
                &h,
                header,
                body,
                self.max_frame,
            )
            .map_err(io::Error::from);
        }
        let tt = self.ttheader.map(|req| {
            let mut h = Header::new(header.seq_id, cx.protocol);
            h.flags = req.flags;
            h.inner_framed = req.inner_framed;
            let ty = if header.ty == MessageType::Reply {
                "2"
            } else {
                "3"
            };
            h.int_kv.push((int_key::MSG_TYPE, Utf8Bytes::from(ty)));
            h.str_kv.extend(
                cx.metainfo
                    .reply_pairs()
                    .map(|(k, v)| (Utf8Bytes::from(k), v.clone())),
            );
            h
        });
        crate::codec::write_message::<P, M>(
            out,
            cx.framing,
            tt.as_ref(),
            header,
            body,
            self.max_frame,
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}
