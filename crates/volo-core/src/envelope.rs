//! What a call's frames say, read and written in one place for both sides: the
//! mapping between a call's description (its [`RpcInfo`] and [`MetaInfo`]) and the
//! frames that carry it, in all four framings, and the matching of a reply to its call.
//!
//! - **Opening.** A connection's [`FrameSplitter`] cuts its input into whole frames;
//!   each is opened by [`open`], on the server (requests) and the client (replies)
//!   alike: a [`FrameHeader`] (the framing, with its TTHeader or THeader) and the
//!   message inside. Framed and Buffered frames carry no header: their calls travel
//!   with the message header only (method, type, sequence id).
//! - **Writing.** Each side says what goes around a message as a [`FrameOut`] (the
//!   client from its configured framing and the headers below, the server from the
//!   request's [`FrameHeader`]), and [`codec::write_framed`] writes it.
//! - **Sequence ids.** A client matches a reply to its call by [`match_reply`] (the
//!   method, the sequence id, a reply or an exception); a mux client routes a
//!   reply frame to its waiting call by [`ttheader_seq_id`], and reads a control
//!   frame (sequence id 0) by [`control_says_closing`]. Which ids are used is the
//!   connection's to choose (`client::pool`, `client::mux`).
//!
//! What the headers carry:
//!
//! | frame | client writes ([`request_ttheader`], [`request_theader`]) | server reads ([`read_request_ttheader`], [`read_request_theader`]) |
//! |---|---|---|
//! | TTHeader request | metainfo (persistent, transient), Kitex's int keys: transport type, caller service and method, callee service and method, message type, time left, connect timeout; the callee's IDL service name (`isn`) | metainfo, the deadline (now plus the time left), the caller's service |
//! | THeader request | metainfo as info pairs | metainfo |
//!
//! | frame | server writes ([`reply_ttheader`], [`reply_theader`]) | client reads ([`read_reply`]) |
//! |---|---|---|
//! | TTHeader reply | the request's header turned into the reply's: message type, backward metainfo, `crrst` while closing, the refusal ([`refusal::HEADER_KEY`]) | backward metainfo, the refusal, `crrst` |
//! | THeader reply | the request's flags, transforms and framing echoed; backward metainfo and headers; the refusal | backward metainfo and headers, the refusal |
//!
//! The keys are Kitex's (v0.16) where Kitex has one, so that a Kitex peer reads what
//! this crate writes and the other way round.
//!
//! [`FrameSplitter`]: crate::codec::FrameSplitter
//! [`FrameOut`]: crate::codec::FrameOut
//! [`codec::write_framed`]: crate::codec::write_framed

use std::time::Instant;

use bytes::Bytes;
use thrift_wire::{MessageHeader, MessageType, Utf8Bytes};

use crate::codec::ttheader::{Header, HeaderLimits, int_key, str_key};
use crate::codec::{FrameError, Framing, Protocol, theader};
use crate::context::{MetaInfo, RpcInfo, ServerContext};
use crate::refusal::{self, Refusal};

/// What a client's TTHeader requests carry besides the call: the same for each of its
/// calls, so made once.
#[derive(Debug, Clone)]
pub(crate) struct ClientHeaders {
    /// The protocol of the message inside.
    pub(crate) protocol: Protocol,
    /// Whether the message inside is Framed too.
    pub(crate) ttheader_framed: bool,
    /// The caller's service name (Kitex's `FROM_SERVICE`).
    pub(crate) caller: Utf8Bytes,
    /// The connect timeout in decimal milliseconds.
    pub(crate) connect_timeout: Utf8Bytes,
}

/// A request's TTHeader, as Kitex's client fills it (its TTHeader handler, v0.16):
/// metainfo; the int keys transport type, caller service and method (empty when
/// unknown, as Kitex sends them), callee service and method, message type, the time
/// left and the connect timeout in milliseconds; and the callee's IDL service name as
/// the string key `isn`, by which a server of several services (Kitex's, Volo's, ours)
/// routes the call. `method` is the bare method name, whatever name the message goes
/// out under; `caller_method` the method of the server call this call is made for.
pub(crate) fn request_ttheader(
    fixed: &ClientHeaders,
    rpc: &RpcInfo,
    metainfo: &MetaInfo,
    caller_method: Option<&Utf8Bytes>,
    header: &MessageHeader,
    method: Utf8Bytes,
) -> Header {
    let mut h = Header::new(header.seq_id, fixed.protocol);
    h.inner_framed = fixed.ttheader_framed;
    h.str_kv.extend(
        metainfo
            .request_pairs()
            .map(|(k, v)| (Utf8Bytes::from(k), v.clone())),
    );
    let framed = if fixed.ttheader_framed {
        "framed"
    } else {
        "unframed"
    };
    h.int_kv
        .push((int_key::TRANSPORT_TYPE, Utf8Bytes::from_static(framed)));
    h.int_kv.push((int_key::FROM_SERVICE, fixed.caller.clone()));
    h.int_kv.push((
        int_key::FROM_METHOD,
        caller_method.cloned().unwrap_or_default(),
    ));
    if !rpc.callee.service.is_empty() {
        // Shared, not copied: a static name or a reference count.
        let service = rpc.callee.service.clone();
        let isn = Utf8Bytes::from_static(str_key::IDL_SERVICE_NAME);
        h.str_kv.push((isn, service.clone()));
        h.int_kv.push((int_key::TO_SERVICE, service));
    }
    h.int_kv.push((int_key::TO_METHOD, method));
    let ty = if header.ty == MessageType::Oneway {
        "4"
    } else {
        "1"
    };
    h.int_kv
        .push((int_key::MSG_TYPE, Utf8Bytes::from_static(ty)));
    if let Some(deadline) = rpc.deadline {
        // Whole milliseconds left, at least 1: a call sent is worth a try.
        let left = crate::clock::time_left(deadline);
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        h.int_kv.push((int_key::RPC_TIMEOUT, timeout_value(ms)));
    }
    h.int_kv
        .push((int_key::CONNECT_TIMEOUT, fixed.connect_timeout.clone()));
    h
}

/// A request's THeader: its sequence id and protocol, the client's THeader options,
/// and the metainfo as info pairs.
pub(crate) fn request_theader(
    seq_id: i32,
    protocol: Protocol,
    options: &theader::Options,
    metainfo: &MetaInfo,
) -> theader::Header {
    let mut h = theader::Header::new(seq_id, protocol);
    h.framed = options.framed;
    if options.zlib {
        h.transforms.push(theader::transform::ZLIB);
    }
    h.info.extend(
        metainfo
            .request_pairs()
            .map(|(k, v)| (Utf8Bytes::from(k), v.clone())),
    );
    h.info.extend(metainfo.header_pairs().cloned());
    h
}

/// Reads a TTHeader request into `cx`: its protocol, metainfo, the caller's service,
/// and its deadline, counted from `now`, when the frame was taken (the time the frame
/// spent on the way and in the input is the caller's to count).
pub(crate) fn read_request_ttheader(header: &Header, cx: &mut ServerContext, now: Instant) {
    cx.protocol = header.protocol;
    cx.metainfo.read_request(header.str_kv.pairs());
    if let Some(ms) = header
        .int_value(int_key::RPC_TIMEOUT)
        .and_then(|v| v.parse::<u64>().ok())
    {
        cx.rpc.deadline = Some(now + std::time::Duration::from_millis(ms));
    }
    if let Some(from) = header.int_kv.get_shared(int_key::FROM_SERVICE) {
        // A slice of the frame: no allocation per call.
        cx.rpc.caller.service = from;
    }
}

/// Reads a THeader request's protocol and metainfo into `cx`.
pub(crate) fn read_request_theader(header: &theader::Header, cx: &mut ServerContext) {
    cx.protocol = header.protocol;
    cx.metainfo.read_request(&header.info);
    cx.metainfo.read_headers(&header.info);
}

/// Turns a request's TTHeader into its reply's, in place: the reply's sequence id and
/// protocol, its message type (`ty`: a reply or an exception), the backward metainfo
/// of `cx`, Kitex's `crrst` while the server is `closing`, and the `refusal` an
/// exception is, if any.
pub(crate) fn reply_ttheader(
    h: &mut Header,
    cx: &ServerContext,
    header: &MessageHeader,
    closing: bool,
    refusal: Option<Refusal>,
) {
    h.seq_id = header.seq_id;
    h.protocol = cx.protocol;
    h.acl_token = None;
    let ty = if header.ty == MessageType::Reply {
        "2"
    } else {
        "3"
    };
    h.int_kv.clear();
    h.int_kv
        .push((int_key::MSG_TYPE, Utf8Bytes::from_static(ty)));
    h.str_kv.clear();
    h.str_kv.extend(cx.metainfo.ttheader_reply_pairs());
    h.str_kv.extend(refusal.map(refusal_pair));
    if closing {
        h.str_kv.push((
            Utf8Bytes::from_static(str_key::CONNECTION_RESET),
            Utf8Bytes::from_static("1"),
        ));
    }
}

/// A reply's THeader: the request's (`req`) flags, sequence id, transforms and outer
/// framing echoed, the protocol of `cx`, its backward metainfo and headers, and the
/// `refusal` an exception is, if any.
pub(crate) fn reply_theader(
    req: &theader::Header,
    cx: &ServerContext,
    refusal: Option<Refusal>,
) -> theader::Header {
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
    h.info.extend(refusal.map(refusal_pair));
    h
}

/// What is around a message in the frame that came in: the framing, with its header
/// when it has one. A server answers a request in the same framing, the reply's
/// header made from the request's ([`reply_ttheader`], [`reply_theader`]); a client
/// reads a reply's metainfo and signals from it ([`read_reply`]).
#[derive(Debug)]
pub(crate) enum FrameHeader {
    TTHeader(Header),
    THeader(theader::Header),
    Framed,
    Buffered,
}

impl FrameHeader {
    /// The frame's TTHeader, if it has one.
    pub(crate) fn ttheader(&self) -> Option<&Header> {
        match self {
            FrameHeader::TTHeader(h) => Some(h),
            _ => None,
        }
    }

    /// Whether the frame says that the server is closing its connection (Kitex's
    /// `crrst`): no call is sent on that connection after it.
    pub(crate) fn says_closing(&self) -> bool {
        match self {
            FrameHeader::TTHeader(h) => h.says_closing(),
            _ => false,
        }
    }

    /// The value of the frame's [`refusal::HEADER_KEY`], if it has one.
    pub(crate) fn refusal_said(&self) -> Option<&str> {
        match self {
            FrameHeader::TTHeader(h) => h.str_value(refusal::HEADER_KEY),
            FrameHeader::THeader(h) => h.info_value(refusal::HEADER_KEY),
            FrameHeader::Framed | FrameHeader::Buffered => None,
        }
    }
}

/// Why a frame could not be opened.
#[derive(Debug)]
pub(crate) enum Unopened {
    /// Its header is malformed, over the header limits, or its message could not be
    /// inflated within the frame limit: the connection cannot go on.
    Malformed(FrameError),
    /// A THeader frame whose transform `id` this crate cannot undo. Its header was
    /// read, so a server can answer it (`INVALID_TRANSFORM`) and go on.
    UnknownTransform { header: theader::Header, id: u32 },
}

impl From<Unopened> for FrameError {
    fn from(e: Unopened) -> Self {
        match e {
            Unopened::Malformed(e) => e,
            Unopened::UnknownTransform { id, .. } => {
                FrameError::THeader(theader::HeaderError::UnsupportedTransform(id))
            }
        }
    }
}

/// Opens a whole frame of `framing` (as the connection's [`FrameSplitter`] cut it):
/// its header, read within `limits`, and its message (after the 4-byte length of a
/// Framed one; a THeader's transforms undone within `max_frame`). Both sides open
/// every frame here, the server its requests and the client its replies.
///
/// A TTHeader is decoded into `spare` when there is one (its lists have room
/// already: a server keeps one per connection), else into a new header.
///
/// [`FrameSplitter`]: crate::codec::FrameSplitter
pub(crate) fn open(
    framing: Framing,
    frame: Bytes,
    limits: &HeaderLimits,
    max_frame: usize,
    spare: Option<Header>,
) -> Result<(FrameHeader, Bytes), Unopened> {
    let malformed = |e| Unopened::Malformed(FrameError::THeader(e));
    Ok(match framing {
        Framing::TTHeader => {
            let mut header = spare.unwrap_or_else(|| Header::new(0, Protocol::Binary));
            let payload = header
                .decode_into(&frame, limits)
                .map_err(|e| Unopened::Malformed(e.into()))?;
            (FrameHeader::TTHeader(header), payload)
        }
        Framing::THeader => {
            let (header, raw) = theader::Header::decode(&frame, limits).map_err(malformed)?;
            if let Some(id) = header.unsupported_transform() {
                return Err(Unopened::UnknownTransform { header, id });
            }
            let payload = header.untransform(raw, max_frame).map_err(malformed)?;
            (FrameHeader::THeader(header), payload)
        }
        Framing::Framed => (FrameHeader::Framed, frame.slice(4..)),
        Framing::Buffered => (FrameHeader::Buffered, frame),
    })
}

/// Reads what a request's frame header says into `cx` (see the table above): nothing
/// for Framed and Buffered, whose calls carry only their message header. `now` is
/// when the frame was taken.
pub(crate) fn read_request(header: &FrameHeader, cx: &mut ServerContext, now: Instant) {
    match header {
        FrameHeader::TTHeader(h) => read_request_ttheader(h, cx, now),
        FrameHeader::THeader(h) => read_request_theader(h, cx),
        FrameHeader::Framed | FrameHeader::Buffered => {}
    }
}

/// The sequence id of a TTHeader frame, from its fixed part (LENGTH, magic, flags,
/// SEQID), without decoding the rest: what a mux client routes a reply by.
/// `None` for a frame too short to have one.
pub(crate) fn ttheader_seq_id(frame: &[u8]) -> Option<i32> {
    let b = frame.get(8..12)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether a TTHeader control frame (sequence id 0) says that the connection is
/// closing (`crrst`), its header read within `limits` (one over them says nothing).
pub(crate) fn control_says_closing(frame: &Bytes, limits: &HeaderLimits) -> bool {
    Header::decode(frame, limits).is_ok_and(|(h, _)| h.says_closing())
}

/// The names a reply may carry: the method's, or the one the call went out under
/// (`Service:method` for Apache's multiplexed protocol).
#[derive(Clone, Copy)]
pub(crate) struct ReplyNames<'a> {
    pub(crate) method: &'a str,
    pub(crate) multiplexed: Option<&'a str>,
}

impl ReplyNames<'_> {
    fn accept(&self, got: &str) -> bool {
        got == self.method || self.multiplexed == Some(got)
    }

    /// The name the call was sent under.
    fn sent(&self) -> &str {
        self.multiplexed.unwrap_or(self.method)
    }
}

/// A reply's message header that is not the answer to the call sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Mismatch {
    #[error("the reply is for {got}, the call was {sent}")]
    WrongMethod { sent: String, got: String },
    #[error("sent sequence id {sent}, the reply has {got}")]
    BadSequence { sent: i32, got: i32 },
    #[error("a {0:?} message in reply to a call")]
    NotAReply(MessageType),
}

/// What a reply's message is, once matched to its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The method's result struct follows.
    Reply,
    /// A `TApplicationException` follows.
    Exception,
}

/// Whether a reply's message header answers the call sent as `names` with `seq_id`:
/// the same method (under either name), the same sequence id, and a reply or an
/// exception (which one is given).
pub(crate) fn match_reply(
    got: &MessageHeader,
    names: ReplyNames<'_>,
    seq_id: i32,
) -> Result<Answer, Mismatch> {
    if !names.accept(got.name.as_str()) {
        return Err(Mismatch::WrongMethod {
            sent: names.sent().to_string(),
            got: got.name.as_str().to_string(),
        });
    }
    if got.seq_id != seq_id {
        return Err(Mismatch::BadSequence {
            sent: seq_id,
            got: got.seq_id,
        });
    }
    match got.ty {
        MessageType::Reply => Ok(Answer::Reply),
        MessageType::Exception => Ok(Answer::Exception),
        other => Err(Mismatch::NotAReply(other)),
    }
}

/// Reads a reply's header into the caller's `metainfo` (its backward values).
pub(crate) fn read_reply(reply: &FrameHeader, metainfo: &mut MetaInfo) {
    match reply {
        FrameHeader::TTHeader(header) => metainfo.read_ttheader_reply(header.str_kv.pairs()),
        FrameHeader::THeader(header) => {
            metainfo.read_reply(&header.info);
            metainfo.read_headers(&header.info);
        }
        FrameHeader::Framed | FrameHeader::Buffered => {}
    }
}

fn refusal_pair(refusal: Refusal) -> (Utf8Bytes, Utf8Bytes) {
    (
        Utf8Bytes::from_static(refusal::HEADER_KEY),
        Utf8Bytes::from_static(refusal.as_str()),
    )
}

/// `ms` in decimal, as TTHeader carries `RPC_TIMEOUT`. Calls of one client mostly send
/// the same value (their timeout less the microseconds spent above the transport), so
/// each thread keeps the last one made and hands out clones of it (a reference count)
/// instead of formatting and allocating a string per call.
pub(crate) fn timeout_value(ms: u64) -> Utf8Bytes {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(u64, Utf8Bytes)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((n, v)) if *n == ms => v.clone(),
            _ => {
                let v = Utf8Bytes::from(ms.to_string());
                *last = Some((ms, v.clone()));
                v
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::codec::Framing;

    #[test]
    fn the_rpc_timeout_value_is_the_decimal_milliseconds_whatever_came_before() {
        assert_eq!(&*timeout_value(999), "999");
        assert_eq!(&*timeout_value(999), "999", "the kept value");
        assert_eq!(&*timeout_value(1), "1", "a new value replaces it");
        assert_eq!(&*timeout_value(u64::MAX), u64::MAX.to_string());
        assert_eq!(&*timeout_value(999), "999");
    }

    /// What a client writes in a TTHeader request, the server reads back: metainfo, the
    /// caller's service, and a deadline about as far from the frame's arrival as it was
    /// from the sending; what the server writes in its reply (backward metainfo, a
    /// refusal, `crrst`), the client reads back.
    #[test]
    fn ttheader_request_and_reply_read_back_what_was_written() {
        let fixed = ClientHeaders {
            protocol: Protocol::Compact,
            ttheader_framed: false,
            caller: "caller-svc".into(),
            connect_timeout: "50".into(),
        };
        let mut rpc = RpcInfo::default();
        rpc.callee.service = "EchoService".into();
        rpc.deadline = Some(Instant::now() + Duration::from_secs(10));
        let mut sent = MetaInfo::default();
        sent.set_persistent("tenant", "t1");
        let msg = MessageHeader {
            name: "echo".into(),
            ty: MessageType::Call,
            seq_id: 7,
        };
        let mut h = request_ttheader(&fixed, &rpc, &sent, None, &msg, "echo".into());
        assert_eq!(h.str_value(str_key::IDL_SERVICE_NAME), Some("EchoService"));

        let now = Instant::now();
        let mut cx = ServerContext::new(Framing::TTHeader, Protocol::Binary);
        read_request_ttheader(&h, &mut cx, now);
        assert_eq!(cx.protocol, Protocol::Compact);
        assert_eq!(cx.metainfo.persistent("tenant"), Some("t1"));
        assert_eq!(cx.rpc.caller.service, "caller-svc");
        // The client reads the time left on the coarse clock, which may lag the precise
        // one by a tick: `clock::time_left` promises 1%, so the bound is 10 s and 1%.
        let left = cx.rpc.deadline.unwrap() - now;
        assert!(
            left > Duration::from_secs(9) && left <= Duration::from_millis(10_100),
            "{left:?}"
        );

        cx.metainfo.set_backward("seen", "yes");
        let reply = MessageHeader {
            ty: MessageType::Exception,
            ..msg
        };
        reply_ttheader(&mut h, &cx, &reply, true, Some(Refusal::Overloaded));
        let reply = FrameHeader::TTHeader(h);
        assert!(reply.says_closing());
        let mut got = MetaInfo::default();
        read_reply(&reply, &mut got);
        assert_eq!(reply.refusal_said(), Some("overloaded"));
        assert_eq!(got.backward("seen"), Some("yes"));
    }

    /// A THeader request's metainfo reaches the server; the reply echoes the request's
    /// sequence id and transforms and carries the refusal and the backward metainfo.
    #[test]
    fn theader_request_and_reply_read_back_what_was_written() {
        let options = theader::Options {
            zlib: true,
            framed: false,
        };
        let mut sent = MetaInfo::default();
        sent.set_persistent("tenant", "t2");
        let req = request_theader(3, Protocol::Binary, &options, &sent);
        let mut cx = ServerContext::new(Framing::THeader, Protocol::Compact);
        read_request_theader(&req, &mut cx);
        assert_eq!(cx.protocol, Protocol::Binary);
        assert_eq!(cx.metainfo.persistent("tenant"), Some("t2"));

        cx.metainfo.set_backward("seen", "yes");
        let h = reply_theader(&req, &cx, Some(Refusal::Closing));
        assert_eq!((h.seq_id, &h.transforms), (3, &req.transforms));
        let mut got = MetaInfo::default();
        let reply = FrameHeader::THeader(h);
        read_reply(&reply, &mut got);
        assert_eq!(reply.refusal_said(), Some("closing"));
        assert_eq!(got.backward("seen"), Some("yes"));
        assert_eq!(FrameHeader::Framed.refusal_said(), None);
    }

    #[test]
    fn the_sequence_id_is_read_from_the_fixed_header() {
        let frame = [0, 0, 0, 20, 0x10, 0x00, 0, 0, 0xff, 0xff, 0xff, 0xfe, 0, 1];
        assert_eq!(ttheader_seq_id(&frame), Some(-2));
        assert_eq!(ttheader_seq_id(&frame[..11]), None);
    }

    /// A control frame marked `crrst` retires the connection when its header fits
    /// the client's header limits (`ClientConfig::wire.header`), and says nothing when
    /// it does not.
    #[test]
    fn a_control_frame_is_read_within_the_clients_header_limits() {
        let mut h = Header::new(0, Protocol::Binary);
        h.str_kv.push(("crrst".into(), "1".into()));
        h.str_kv.push(("padding".into(), "p".repeat(2048).into()));
        let mut frame = bytes::BytesMut::new();
        h.write(0, &mut frame).unwrap();
        let frame = frame.freeze();
        assert!(control_says_closing(&frame, &HeaderLimits::default()));
        let tight = HeaderLimits { max_header: 1024 };
        assert!(
            !control_says_closing(&frame, &tight),
            "a header over the limit says nothing"
        );
    }
}
