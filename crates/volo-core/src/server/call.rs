//! One call of a server connection, without I/O: the message header read from a frame
//! (after its TTHeader or THeader), the call routed, limited and wrapped up as a future
//! that owns what it needs ([`start_call`]), and its reply written in the framing and
//! protocol of the request ([`answer`]).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Codec, Decoder, LinkBuffer, MessageHeader,
    MessageType, Utf8Bytes,
};

use super::multiplex::Services;
use super::state::ServerState;
use super::trace::{self, Logged};
use super::{Body, Dispatch, DispatchError, ServerRequest};
use crate::codec::ttheader::{Header, str_key};
use crate::codec::with_protocol;
use crate::codec::{FrameOut, Framing, Protocol};
use crate::context::{Address, ServerContext};
use crate::envelope::{self, FrameHeader, Unopened};
use crate::refusal::Refusal;
use crate::service::Service;

/// A frame handed to [`start_call`]: its bytes, when it was taken, whether the
/// server is closing, and what the call keeps until it is done.
pub(crate) struct Arrival<H> {
    pub(crate) frame: Bytes,
    pub(crate) now: Instant,
    pub(crate) closing: bool,
    pub(crate) held: H,
}

/// What [`start_call`] gives: called once, it makes the call's future (see there why
/// the future is not given itself).
pub(crate) trait MakeCall<R>: FnOnce() -> Self::Call + Send + 'static {
    /// The call's future.
    type Call: Future<Output = Done<R>> + Send + 'static;
}

impl<R, M, F> MakeCall<R> for M
where
    M: FnOnce() -> F + Send + 'static,
    F: Future<Output = Done<R>> + Send + 'static,
{
    type Call = F;
}

/// A handled call, with what its reply needs.
pub(crate) struct Done<R> {
    cx: ServerContext,
    /// The protocol of the request, which the reply takes whatever a layer did to
    /// the context's.
    protocol: Protocol,
    /// The request's framing and header, which the reply's is made from.
    frame: FrameHeader,
    name: Utf8Bytes,
    seq_id: i32,
    /// Nothing is sent back.
    oneway: bool,
    outcome: Result<R, DispatchError>,
    /// What the access log needs, when it shows this call.
    logged: Option<Logged>,
}

/// Takes one frame: unwraps its framing and reads the message header. Returns what
/// makes the call to run (the call owns what it needs, so it can move to a task of its
/// own);
/// `Ok(None)` when the frame was answered already with an exception (written into
/// `out`, not flushed); `Err` when the connection must close (an unreadable header:
/// answered with a `PROTOCOL_ERROR` first where a message was readable).
///
/// The connection core ([`ConnCore::start`](super::conn_core::ConnCore::start)) starts every
/// call here and nowhere else, so what must happen to each frame before its call runs
/// (limiters, before anything is decoded) has one place. `now` is when the frame was
/// taken: a caller's timeout counts from it. With `closing` (the server is shutting
/// down), a call that expects a reply is answered at once, unrun, with the closing
/// refusal, and a oneway call still runs (its caller could not be told). `held` is
/// kept until the call is done (the frame's share of the connection's input budget).
///
/// The call comes as a closure that makes it, not as the future itself: a call's
/// future holds the whole service stack's state (a few KiB), while what it starts
/// from is about a quarter of that. Each move of a future copies all of it, so the
/// future is made where it stays (in its box, by [`ConnCore::start`]'s drivers), and
/// only the closure travels there: every call copies the smaller value instead of
/// the larger one.
///
/// [`ConnCore::start`]: super::conn_core::ConnCore::start
pub(crate) fn start_call<D: Dispatch, H: Send + 'static>(
    out: &mut LinkBuffer,
    shared: &Arc<ServerState<D>>,
    peer: Option<Address>,
    (framing, protocol): (Framing, Protocol),
    Arrival {
        frame,
        now,
        closing,
        held,
    }: Arrival<H>,
    spare: &mut Option<Header>,
) -> io::Result<Option<impl MakeCall<D::Reply> + use<D, H>>> {
    let mut cx = ServerContext::new(framing, protocol);
    cx.rpc.caller.address = peer;
    cx.arrived = Some(now);
    let max_frame = shared.config.wire.frame.max_frame;
    let request_bytes = frame.len();
    // Into the connection's spare TTHeader, whose lists have room already.
    let opened = envelope::open(
        framing,
        frame,
        &shared.config.wire.header,
        max_frame,
        spare.take(),
    );
    let (mut frame, payload) = match opened {
        Ok(opened) => opened,
        Err(Unopened::UnknownTransform { mut header, id }) => {
            // Answered with INVALID_TRANSFORM, as THeader requires, in the request's
            // protocol, its info not echoed; the connection goes on.
            tracing::debug!(
                transform = id,
                "answering a THeader call whose transform is unknown"
            );
            cx.protocol = header.protocol;
            header.transforms.clear();
            let seq = header.seq_id;
            let mut frame = FrameHeader::THeader(header);
            // THeader has no closing mark.
            let ex = ApplicationException::new(
                ApplicationExceptionKind::InvalidTransform,
                format!("THeader transform {id} is not supported"),
            );
            Reply::new(max_frame, &mut frame, false).exception(
                out,
                &cx,
                Utf8Bytes::new(),
                seq,
                &ex,
                None,
            )?;
            return Ok(None);
        }
        Err(Unopened::Malformed(e)) => return Err(e.into()),
    };
    envelope::read_request(&frame, &mut cx, now);
    // An exception written below turns the request's TTHeader into its reply's: the
    // request is not read again after that.
    let begun = {
        let mut reply = Reply::new(max_frame, &mut frame, closing);
        with_protocol!(cx.protocol, P => message_begin::<P>(out, &mut reply, &cx, &payload)?)
    };
    let Some((mut header, args_at)) = begun else {
        return Ok(None);
    };
    let service = match &shared.services {
        Services::One(service) => service,
        // Routed by the name's prefix, TTHeader's `isn` or to the default; the call
        // goes on under its bare name, and is answered under it.
        Services::Many(table) => match table.route(&header.name, frame.ttheader()) {
            Ok((service, method)) => {
                header.name = method;
                service
            }
            Err(unrouted) => {
                if let Some(c) = &shared.counters {
                    c.unrouted.inc();
                }
                tracing::debug!(
                    peer = ?cx.rpc.caller.address,
                    error = unrouted.exception.message.as_str(),
                    "a call to no service of this server"
                );
                if header.ty != MessageType::Oneway {
                    let ex = &unrouted.exception;
                    Reply::new(max_frame, &mut frame, closing).exception(
                        out,
                        &cx,
                        unrouted.method,
                        header.seq_id,
                        ex,
                        None,
                    )?;
                }
                return Ok(None);
            }
        },
    };
    cx.rpc.callee.service = service.name().into();
    cx.rpc.method = header.name.clone();
    cx.rpc.seq_id = header.seq_id;
    // Answered only when sent as a CALL of a method the IDL does not make oneway (in
    // the service the call was routed to).
    let oneway = header.ty == MessageType::Oneway || service.is_oneway(header.name.as_str());
    if closing && !oneway {
        tracing::debug!(
            peer = ?cx.rpc.caller.address,
            method = header.name.as_str(),
            "a call refused unrun: the server is shutting down"
        );
        Reply::new(max_frame, &mut frame, true).error(
            out,
            &cx,
            header.name,
            header.seq_id,
            DispatchError::Closing,
        )?;
        return Ok(None);
    }
    let request = ServerRequest::new(payload.slice(args_at..));
    let protocol = cx.protocol;
    let shared = Arc::clone(shared);
    let logged = shared
        .access
        .pick(shared.config.observability.access_log.as_ref());
    let run = move || async move {
        // `held` is kept until the call is done (or dropped).
        let _held = held;
        let outcome = shared.stack.call(&mut cx, request).await;
        let logged = logged.then(|| Logged {
            started: now,
            request_bytes,
            status: trace::failure(&outcome),
        });
        Done {
            cx,
            protocol,
            frame,
            name: header.name,
            seq_id: header.seq_id,
            oneway,
            outcome,
            logged,
        }
    };
    Ok(Some(run))
}

/// Reads the message header at the front of `payload`: the header and where the
/// arguments begin. `Ok(None)` when the message is no call (answered already with an
/// exception); `Err` when the header is unreadable (answered with a `PROTOCOL_ERROR`,
/// and the connection must close).
fn message_begin<P: thrift_wire::Protocol>(
    out: &mut LinkBuffer,
    reply: &mut Reply<'_>,
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
            reply.exception(out, cx, Utf8Bytes::default(), 0, &ex, None)?;
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    };
    if !matches!(header.ty, MessageType::Call | MessageType::Oneway) {
        let ex = ApplicationException::new(
            ApplicationExceptionKind::InvalidMessageType,
            format!("a server takes calls, not {:?} messages", header.ty),
        );
        reply.exception(out, cx, header.name, header.seq_id, &ex, None)?;
        return Ok(None);
    }
    let args_at = payload.len() - d.remaining();
    Ok(Some((header, args_at)))
}

/// Writes the reply of a handled call (nothing for a oneway call) into `out`, counts
/// its bytes (metrics on) and logs the call (when the access log shows it). Gives
/// back the request's TTHeader (which became the reply's), for the next request to be
/// decoded into.
pub(crate) fn answer<D: Dispatch>(
    out: &mut LinkBuffer,
    shared: &ServerState<D>,
    mut done: Done<D::Reply>,
    closing: bool,
) -> io::Result<Option<Header>> {
    let mut frame = std::mem::replace(&mut done.frame, FrameHeader::Buffered);
    let before = out.len();
    let logged = done.logged.take().map(|l| (l, done.cx.rpc.clone()));
    if !done.oneway {
        with_protocol!(done.protocol, P => {
            answer_in::<P, D>(out, shared, done, &mut frame, closing)?
        })
    }
    let written = out.len().saturating_sub(before);
    if let Some(c) = &shared.counters {
        c.bytes.sent.inc_by(written as u64);
    }
    if let Some((logged, rpc)) = logged {
        trace::log_access(&rpc, &logged, written);
    }
    Ok(match frame {
        FrameHeader::TTHeader(h) => Some(h),
        _ => None,
    })
}

fn answer_in<P: thrift_wire::Protocol, D: Dispatch>(
    out: &mut LinkBuffer,
    shared: &ServerState<D>,
    done: Done<D::Reply>,
    frame: &mut FrameHeader,
    closing: bool,
) -> io::Result<()> {
    let mut reply = Reply::new(shared.config.wire.frame.max_frame, frame, closing);
    // The reply goes out as the request came in, with the backward metainfo the
    // layers and the handler left in the context.
    let mut cx = done.cx;
    cx.protocol = done.protocol;
    let (cx, name, seq) = (&cx, done.name, done.seq_id);
    match done.outcome {
        Ok(body) => reply.send::<P, _>(out, cx, name, seq, &body),
        Err(e) => reply.error(out, cx, name, seq, e),
    }
}

/// How a reply is framed: like its request.
struct Reply<'a> {
    max_frame: usize,
    /// The request's framing and header. A TTHeader reply is written with the
    /// request's header made into the reply's in place (the request's is gone after);
    /// a THeader reply's header is made from the request's.
    frame: &'a mut FrameHeader,
    /// The server is shutting down: a TTHeader reply says the connection is closing.
    closing: bool,
}

impl<'a> Reply<'a> {
    fn new(max_frame: usize, frame: &'a mut FrameHeader, closing: bool) -> Self {
        Reply {
            max_frame,
            frame,
            closing,
        }
    }

    /// The answer to a call that failed with `e`: its exception, and the refusal it
    /// is, if one, named in the reply's header too, which is what this crate's
    /// clients go by (see `crate::refusal`).
    fn error(
        &mut self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        name: Utf8Bytes,
        seq_id: i32,
        e: DispatchError,
    ) -> io::Result<()> {
        let refusal = e.refusal();
        let ex = e.into_exception(name.as_str());
        self.exception(out, cx, name, seq_id, &ex, refusal)
    }

    /// An exception, in the call's protocol (`cx.protocol`), its header naming
    /// `refusal` (the server's own exceptions that are no refusal name none).
    fn exception(
        &mut self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        name: Utf8Bytes,
        seq_id: i32,
        ex: &ApplicationException,
        refusal: Option<Refusal>,
    ) -> io::Result<()> {
        let header = MessageHeader {
            name,
            ty: MessageType::Exception,
            seq_id,
        };
        let written =
            with_protocol!(cx.protocol, P => self.write::<P, _>(out, cx, &header, ex, refusal)?);
        written.map_err(|size| {
            io::Error::other(format!(
                "an exception reply of {size} bytes, above the frame limit"
            ))
        })
    }

    /// Writes a reply (the caller flushes); one larger than the frame limit becomes an `INTERNAL_ERROR`.
    fn send<P: thrift_wire::Protocol, M: Body>(
        &mut self,
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
        if let Err(size) = self.write::<P, _>(out, cx, &header, body, None)? {
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
            self.write::<P, _>(out, cx, &header, &ex, None)?
                .map_err(|_| io::Error::other("an exception reply above the frame limit"))?;
        }
        Ok(())
    }

    /// Writes the message (sized first, one reservation) behind its framing into the
    /// output, a header (if the framing has one) naming `refusal` if there is one.
    /// `Ok(Err(size))` when it would exceed the frame limit (nothing written).
    fn write<P: thrift_wire::Protocol, M: Body>(
        &mut self,
        out: &mut LinkBuffer,
        cx: &ServerContext,
        header: &MessageHeader,
        body: &M,
        refusal: Option<Refusal>,
    ) -> io::Result<Result<(), usize>> {
        let th;
        let frame = match &mut *self.frame {
            FrameHeader::THeader(req) => {
                th = envelope::reply_theader(req, cx, refusal);
                FrameOut::THeader(&th)
            }
            FrameHeader::TTHeader(h) => {
                // The request's flags and inner framing are echoed; the rest is the
                // reply's.
                envelope::reply_ttheader(h, cx, header, self.closing, refusal);
                FrameOut::TTHeader(h)
            }
            FrameHeader::Framed => FrameOut::Framed,
            FrameHeader::Buffered => FrameOut::Buffered,
        };
        crate::codec::write_framed::<P, M>(out, &frame, header, body, self.max_frame)
            .map_err(io::Error::from)
    }
}

/// Writes Kitex's control frame that tells a mux client the connection is
/// closing: a TTHeader frame of sequence id 0 whose string key `crrst` is `1`, around
/// a reply message named `none` (sequence id 0) whose body is an empty struct. A
/// Kitex client stops making calls on the connection; this crate's does too.
pub(crate) fn closing_frame(out: &mut LinkBuffer, protocol: Protocol) {
    let header = MessageHeader {
        name: Utf8Bytes::from_static("none"),
        ty: MessageType::Reply,
        seq_id: 0,
    };
    let mut h = Header::new(0, protocol);
    h.str_kv.push((
        Utf8Bytes::from_static(str_key::CONNECTION_RESET),
        Utf8Bytes::from_static("1"),
    ));
    if protocol == Protocol::Json {
        return; // TTHeader carries no JSON.
    }
    let frame = FrameOut::TTHeader(&h);
    let written = with_protocol!(protocol, P => crate::codec::write_framed::<P, _>(
        out,
        &frame,
        &header,
        &EmptyStruct,
        usize::MAX,
    ));
    if let Err(e) = written {
        tracing::debug!(error = %e, "the closing frame could not be written");
    }
}

/// A struct with no fields, the body of the closing frame.
struct EmptyStruct;

impl super::Body for EmptyStruct {
    fn size<S: thrift_wire::Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        s.struct_end_len(saved)
    }

    fn encode<E: thrift_wire::Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        e.write_struct_end(saved);
    }
}
