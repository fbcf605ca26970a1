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
use thrift_codec::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Decoder, LinkBuffer,
    MessageHeader, MessageType, Utf8Bytes,
};
use tokio::sync::watch;

use super::{Dispatch, EncodeReply, ServerConfig};
use crate::codec::ttheader::{Header, int_key};
use crate::codec::{FrameError, FrameSplitter, Framing, Protocol, detect};
use crate::context::ServerContext;
use crate::transport::FrameIo;

/// What every connection of a server shares.
pub(crate) struct Shared<D> {
    pub(crate) dispatch: D,
    pub(crate) config: ServerConfig,
    /// Calls being handled, across connections, against `config.max_inflight`.
    pub(crate) inflight: tokio::sync::Semaphore,
}

/// Why a connection ends early.
fn framing_error(e: FrameError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Serves `conn` until the peer closes, a frame cannot be read, a read times out, or
/// the server shuts down (then after the request in hand is answered).
pub(crate) async fn serve<D: Dispatch, C: FrameIo>(
    conn: C,
    shared: Arc<Shared<D>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut splitter: Option<FrameSplitter> = None;
    let limits = shared.config.limits;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let read = read_with_timeouts(&conn, &shared.config, |input| {
            let s = match &mut splitter {
                Some(s) => s,
                None => {
                    let n = input.len().min(16);
                    let Some(head) = input.peek(n) else {
                        return Ok(None);
                    };
                    match detect(head).map_err(framing_error)? {
                        Some((framing, protocol)) => {
                            splitter.insert(FrameSplitter::new(framing, protocol, limits))
                        }
                        None => return Ok(None),
                    }
                }
            };
            s.frame_len(input).map_err(framing_error)
        });
        let frame = tokio::select! {
            biased;
            frame = read => frame,
            _ = shutdown.changed(), if conn.input_len() == 0 => return,
        };
        let Ok(Some(frame)) = frame else {
            return;
        };
        let Some((framing, protocol)) = splitter.as_ref().map(FrameSplitter::kind) else {
            return;
        };
        if handle(&conn, &shared, framing, protocol, frame)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Reads a frame; gives up when a started frame takes longer than `read_timeout`, or
/// (with `idle_timeout`) when nothing arrives for that long.
async fn read_with_timeouts<C: FrameIo, F>(
    conn: &C,
    config: &ServerConfig,
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
                if config
                    .idle_timeout
                    .is_some_and(|idle| started.elapsed() >= idle)
                {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
    }
}

/// Handles one frame: unwraps its framing, then the message in its protocol.
async fn handle<D: Dispatch, C: FrameIo>(
    conn: &C,
    shared: &Shared<D>,
    framing: Framing,
    protocol: Protocol,
    frame: Bytes,
) -> io::Result<()> {
    let mut cx = ServerContext::new(framing, protocol);
    cx.rpc.caller.address = conn.peer();
    let (payload, ttheader) = match framing {
        Framing::TTHeader => {
            let (header, payload) = Header::decode(&frame, &shared.config.header_limits)
                .map_err(|e| framing_error(e.into()))?;
            cx.protocol = header.protocol;
            cx.metainfo.read_request(&header.str_kv);
            if let Some(ms) = header
                .int_value(int_key::RPC_TIMEOUT)
                .and_then(|v| v.parse::<u64>().ok())
            {
                cx.rpc.deadline = Some(Instant::now() + Duration::from_millis(ms));
            }
            if let Some(from) = header.int_value(int_key::FROM_SERVICE) {
                cx.rpc.caller.service = from.to_string().into();
            }
            (payload, Some(header))
        }
        Framing::Framed => (frame.slice(4..), None),
        Framing::Buffered => (frame, None),
    };
    let reply = Reply {
        conn,
        max_frame: shared.config.limits.max_frame,
        ttheader: ttheader.as_ref(),
    };
    match cx.protocol {
        Protocol::Binary => handle_message::<Binary, D, C>(shared, cx, payload, reply).await,
        Protocol::Compact => handle_message::<Compact, D, C>(shared, cx, payload, reply).await,
    }
}

/// Decodes the message header, dispatches the call, and answers it (unless oneway).
async fn handle_message<P: thrift_codec::Protocol, D: Dispatch, C: FrameIo>(
    shared: &Shared<D>,
    mut cx: ServerContext,
    payload: Bytes,
    reply: Reply<'_, C>,
) -> io::Result<()>
where
    P::Decoder: Send,
{
    let codec = Codec::<P>::new().max_size(shared.config.limits.max_frame);
    let mut d = codec
        .decoder(payload)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let header = match d.read_message_begin() {
        Ok(h) => h,
        Err(e) => {
            // No method or sequence id to answer to: say why, then close.
            let ex = ApplicationException::new(
                ApplicationExceptionKind::ProtocolError,
                format!("unreadable message header: {e}"),
            );
            reply
                .exception::<P>(&cx, Utf8Bytes::default(), 0, &ex)
                .await?;
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    };
    cx.rpc.method = header.name.clone();
    cx.rpc.seq_id = header.seq_id;
    if !matches!(header.ty, MessageType::Call | MessageType::Oneway) {
        let ex = ApplicationException::new(
            ApplicationExceptionKind::InvalidMessageType,
            format!("a server takes calls, not {:?} messages", header.ty),
        );
        return reply
            .exception::<P>(&cx, header.name, header.seq_id, &ex)
            .await;
    }
    let outcome = {
        let _permit = shared.inflight.acquire().await;
        caught(
            shared
                .dispatch
                .dispatch(&mut cx, header.name.as_str(), &mut d),
        )
        .await
    };
    if header.ty == MessageType::Oneway {
        return Ok(());
    }
    let name = header.name;
    let seq = header.seq_id;
    match outcome {
        Ok(Ok(body)) => reply.send::<P, _>(&cx, name, seq, &body).await,
        Ok(Err(e)) => {
            let ex = e.into_exception(name.as_str());
            reply.exception::<P>(&cx, name, seq, &ex).await
        }
        Err(panic) => {
            let ex = ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                format!("the handler panicked: {}", panic_message(&*panic)),
            );
            reply.exception::<P>(&cx, name, seq, &ex).await
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

/// Where a reply goes, framed like its request.
struct Reply<'a, C> {
    conn: &'a C,
    max_frame: usize,
    /// The request's TTHeader, when it had one.
    ttheader: Option<&'a Header>,
}

impl<C: FrameIo> Reply<'_, C> {
    async fn exception<P: thrift_codec::Protocol>(
        &self,
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
        self.write::<P, _>(cx, &header, ex)?.map_err(|size| {
            io::Error::other(format!(
                "an exception reply of {size} bytes, above the frame limit"
            ))
        })?;
        self.conn.flush().await
    }

    /// Sends a reply; one larger than the frame limit becomes an `INTERNAL_ERROR`.
    async fn send<P: thrift_codec::Protocol, M: EncodeReply>(
        &self,
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
        if let Err(size) = self.write::<P, _>(cx, &header, body)? {
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
            self.write::<P, _>(cx, &header, &ex)?
                .map_err(|_| io::Error::other("an exception reply above the frame limit"))?;
        }
        self.conn.flush().await
    }

    /// Writes the message (sized first, one reservation) behind its framing into the
    /// output. `Ok(Err(size))` when it would exceed the frame limit (nothing written).
    fn write<P: thrift_codec::Protocol, M: EncodeReply>(
        &self,
        cx: &ServerContext,
        header: &MessageHeader,
        body: &M,
    ) -> io::Result<Result<(), usize>> {
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
        self.conn
            .write_with(|out| {
                crate::codec::write_message::<P, M>(
                    out,
                    cx.framing,
                    tt.as_ref(),
                    header,
                    body,
                    self.max_frame,
                )
            })
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}
