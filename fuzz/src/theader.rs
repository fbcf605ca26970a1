//! The `theader` target: any bytes read as an Apache THeader frame, the way a server
//! meets them: framing detection on the first bytes, frame cutting, the header, and
//! the zlib transform bounded by a limit. Nothing may panic; a payload never inflates
//! beyond the limit; whatever decodes and inflates writes back to a frame that decodes
//! to the same header and payload.
//!
//! The first byte of an input selects:
//!
//! | bit | meaning                                                                 |
//! |-----|-------------------------------------------------------------------------|
//! | 0   | set LENGTH (bytes 0-3) to what follows, so the header itself is reached |
//! | 1   | with bit 0: a framed frame, the inner LENGTH (bytes 4-7) set too        |
//! | 2   | tight limits: a 64-byte header, a 4 KiB payload (else 64 KiB, 1 MiB)    |

use bytes::Bytes;
use thrift_wire::{LinkBuffer, MessageHeader, MessageType, Utf8Bytes};
use volo_core::codec::theader::{Header, HeaderLimits, transform};
use volo_core::codec::{DETECT_LEN, FrameSplitter, Framing, Limits, Protocol, detect};

/// The limits an input's selector byte picks: header, payload.
fn limits(selector: u8) -> (HeaderLimits, usize) {
    if selector & 4 != 0 {
        (HeaderLimits { max_header: 64 }, 4096)
    } else {
        (HeaderLimits::default(), 1 << 20)
    }
}

/// The `theader` target (see the module docs).
pub fn fuzz_theader(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut frame = rest.to_vec();
    if selector & 1 != 0 && frame.len() >= 4 {
        let n = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&n.to_be_bytes());
        if selector & 2 != 0 && frame.len() >= 8 {
            let n = (frame.len() - 8) as u32;
            frame[4..8].copy_from_slice(&n.to_be_bytes());
        }
    }
    let (header_limits, max_payload) = limits(selector);

    // What a server does first: tell the framing, then cut the frame.
    let _ = detect(&frame[..frame.len().min(DETECT_LEN)]);
    let mut input = LinkBuffer::new();
    input.write(&frame);
    let limits = Limits {
        max_frame: max_payload,
    };
    let mut splitter = FrameSplitter::new(Framing::THeader, Protocol::Binary, limits);
    if let Ok(Some(len)) = splitter.frame_len(&mut input) {
        assert!(len <= max_payload + 4, "a frame is cut within the limit");
    }

    let Ok((header, raw)) = Header::decode(&Bytes::from(frame), &header_limits) else {
        return;
    };
    let Ok(payload) = header.untransform(raw, max_payload) else {
        return;
    };
    assert!(payload.len() <= max_payload, "inflated within the limit");

    // Round trip: the same header around the same payload.
    let mut message = LinkBuffer::new();
    message.write(&payload);
    let mut out = LinkBuffer::new();
    match header.write_frame(message, &mut out, usize::MAX) {
        Ok(Ok(())) => {}
        other => panic!("{header:?} decoded but does not encode: {other:?}"),
    }
    let n = out.len();
    let again = out.next(n);
    let (h2, raw2) = match Header::decode(&again, &HeaderLimits::default()) {
        Ok(v) => v,
        Err(e) => panic!("{header:?} re-encoded does not decode: {e}\n{again:02x?}"),
    };
    assert_eq!(h2, header, "the header round-trips");
    let p2 = h2
        .untransform(raw2, max_payload)
        .expect("a re-encoded payload inflates as it did");
    assert_eq!(p2, payload, "the payload round-trips");
}

/// A Binary call of `ping` with sequence id 7 and an empty argument struct.
fn ping() -> Vec<u8> {
    let header = MessageHeader {
        name: Utf8Bytes::from_static("ping"),
        ty: MessageType::Call,
        seq_id: 7,
    };
    let mut buf = LinkBuffer::new();
    let codec = thrift_wire::Codec::<thrift_wire::Binary>::new();
    let n = codec
        .encode_message(
            &header,
            &thrift_wire::fixtures::echo::Request::default(),
            &mut buf,
        )
        .expect("small");
    buf.next(n).to_vec()
}

/// Seed inputs: frames bare and framed, with and without info and zlib, under both
/// limits (selector bit 0 is left clear: the LENGTH fields are right already).
pub fn theader_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, protocol) in [Protocol::Binary, Protocol::Compact]
        .into_iter()
        .enumerate()
    {
        for zlib in [false, true] {
            for framed in [false, true] {
                let mut h = Header::new(7 + i as i32, protocol);
                h.framed = framed;
                h.flags = 1;
                if zlib {
                    h.transforms.push(transform::ZLIB);
                }
                h.info
                    .push((Utf8Bytes::from_static("k"), Utf8Bytes::from_static("v")));
                h.info.push((
                    Utf8Bytes::from_static("RPC_PERSIST_logid"),
                    Utf8Bytes::from_static("42"),
                ));
                let mut message = LinkBuffer::new();
                message.write(&ping());
                let mut frame = LinkBuffer::new();
                h.write_frame(message, &mut frame, usize::MAX)
                    .expect("a valid header")
                    .expect("no limit");
                let n = frame.len();
                let bytes = frame.next(n);
                for selector in [0u8, 4] {
                    let mut input = vec![selector];
                    input.extend_from_slice(&bytes);
                    out.push(input);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_and_pass_the_target() {
        for seed in theader_seeds() {
            let frame = Bytes::copy_from_slice(&seed[1..]);
            let (h, raw) = Header::decode(&frame, &HeaderLimits::default()).unwrap();
            assert_eq!(h.untransform(raw, 4096).unwrap(), ping());
            fuzz_theader(&seed);
        }
    }

    #[test]
    fn a_bomb_is_stopped_at_the_limit() {
        // A zlib payload of 8 MiB of zeros: refused under both limits, never inflated.
        let mut h = Header::new(1, Protocol::Binary);
        h.transforms.push(transform::ZLIB);
        let mut message = LinkBuffer::new();
        message.write(&vec![0u8; 8 << 20]);
        let mut frame = LinkBuffer::new();
        h.write_frame(message, &mut frame, usize::MAX)
            .unwrap()
            .unwrap();
        let n = frame.len();
        let bytes = frame.next(n);
        let (h, raw) = Header::decode(&bytes, &HeaderLimits::default()).unwrap();
        assert!(h.untransform(raw, 1 << 20).is_err());
        let mut input = vec![0u8];
        input.extend_from_slice(&bytes);
        fuzz_theader(&input);
    }
}
