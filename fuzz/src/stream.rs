//! The `stream_frame` target: any bytes read as a TTHeader stream frame (Kitex's
//! streaming), the way a connection's reader meets them: the length check on the
//! first four bytes, the detection on the first eight, the frame, and the exception
//! a trailer or rst may carry. Nothing may panic; no frame is cut beyond the limit;
//! whatever decodes writes back to bytes that decode to the same frame.
//!
//! The first byte of an input selects:
//!
//! | bit | meaning                                                                 |
//! |-----|-------------------------------------------------------------------------|
//! | 0   | set LENGTH (bytes 0-3) to what follows, so the header itself is reached |
//! | 1   | tight limits: a 256-byte frame, a 64-byte header                        |

use bytes::Bytes;
use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};
use volo_core::codec::ttheader::HeaderLimits;
use volo_core::stream::frame::{
    self, BizStatus, Frame, FrameKind, FrameLimits, exception_payload, read_exception,
};

/// The limits an input's selector byte picks.
fn limits(selector: u8) -> FrameLimits {
    if selector & 2 != 0 {
        FrameLimits {
            max_frame: 256,
            header: HeaderLimits { max_header: 64 },
        }
    } else {
        FrameLimits::default()
    }
}

/// The `stream_frame` target (see the module docs).
pub fn fuzz_stream_frame(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if selector & 1 != 0 && bytes.len() >= 4 {
        let n = (bytes.len() - 4) as u32;
        bytes[..4].copy_from_slice(&n.to_be_bytes());
    }
    let limits = limits(selector);
    let _ = frame::is_streaming(&bytes);
    if let Ok(Some(len)) = frame::frame_len(&bytes, &limits) {
        assert!(len <= limits.max_frame, "a frame is cut within the limit");
    }
    let Ok(decoded) = Frame::decode(&Bytes::from(bytes), &limits) else {
        return;
    };
    if matches!(decoded.kind, FrameKind::Trailer | FrameKind::Rst) {
        let _ = read_exception(decoded.payload.clone());
        let _ = BizStatus::of(&decoded);
    }
    let mut out = Vec::new();
    match decoded.encode(&mut out) {
        Ok(n) => assert_eq!(n, out.len(), "the length written is the length returned"),
        Err(e) => panic!("{decoded:?} decoded but does not encode: {e}"),
    }
    let again = Frame::decode(&Bytes::from(out), &FrameLimits::default())
        .unwrap_or_else(|e| panic!("{decoded:?} re-encoded does not decode: {e}"));
    assert_eq!(again, decoded, "the frame round-trips");
}

/// Seed inputs: each kind of frame a Kitex peer sends, under both limits (selector
/// bit 0 clear: the LENGTH fields are right already).
pub fn stream_seeds() -> Vec<Vec<u8>> {
    let data = Frame::new(FrameKind::Data, 1)
        .with_method("Echo")
        .with_payload(Bytes::from_static(b"\x0b\x00\x01\x00\x00\x00\x05hello\x00"));
    let mut header = Frame::new(FrameKind::Header, 2).with_method("EchoServer");
    for (k, v) in [
        ("isn", "TestService"),
        ("RPC_TRANSIT_tk", "tv"),
        ("RPC_PERSIST_pk", "pv"),
    ] {
        header
            .meta
            .push((Utf8Bytes::from_static(k), Utf8Bytes::from_static(v)));
    }
    let close_send = Frame::new(FrameKind::Trailer, 1).with_method("Echo");
    let mut biz = Frame::new(FrameKind::Trailer, 4).with_method("Echo");
    BizStatus {
        code: 1234,
        message: "biz msg".into(),
        extra: Some("{\"k\":\"v\"}".into()),
    }
    .put(&mut biz);
    let error = ApplicationException::new(ApplicationExceptionKind::InternalError, "failed");
    let failed = Frame::new(FrameKind::Trailer, 5)
        .with_method("Echo")
        .with_payload(exception_payload(&error, "Echo", 5).expect("small"));
    let cancel = ApplicationException::new(ApplicationExceptionKind::Other(12007), "cancel");
    let mut rst = Frame::new(FrameKind::Rst, 7)
        .with_method("Echo")
        .with_payload(exception_payload(&cancel, "Echo", 7).expect("small"));
    rst.meta.push((
        Utf8Bytes::from_static("ttscp"),
        Utf8Bytes::from_static("caller"),
    ));
    let meta = Frame::new(FrameKind::Meta, 0).with_payload(Bytes::from_static(b"opaque"));
    let mut out = Vec::new();
    for frame in [data, header, close_send, biz, failed, rst, meta] {
        let mut bytes = Vec::new();
        frame.encode(&mut bytes).expect("a valid frame");
        for selector in [0u8, 2] {
            let mut input = vec![selector];
            input.extend_from_slice(&bytes);
            out.push(input);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_and_pass_the_target() {
        for seed in stream_seeds() {
            Frame::decode(&Bytes::copy_from_slice(&seed[1..]), &FrameLimits::default())
                .expect("a seed decodes");
            fuzz_stream_frame(&seed);
        }
    }

    #[test]
    fn a_frame_beyond_the_tight_limit_is_refused() {
        let big = Frame::new(FrameKind::Data, 1).with_payload(Bytes::from(vec![0u8; 300]));
        let mut input = vec![2u8];
        big.encode(&mut input).expect("encodes");
        assert!(Frame::decode(&Bytes::copy_from_slice(&input[1..]), &limits(2)).is_err());
        fuzz_stream_frame(&input);
    }
}
