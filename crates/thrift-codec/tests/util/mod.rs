//! Helpers shared by the integration tests: fixture values and encode/decode shorthands.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use thrift_wire::fixtures::echo::{Ano, Ids, MyTest, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Codec, LinkBuffer, Message, Protocol, Utf8Bytes};

/// Encodes `msg` into one contiguous `Bytes`, checking that `size` was exact.
pub fn encode<P: Protocol, M: Message>(msg: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(msg, &mut buf).expect("encodes");
    assert_eq!(n, buf.len(), "size() must equal the bytes written");
    assert_eq!(n, codec.size(msg));
    buf.next(n)
}

/// Decodes a whole buffer.
pub fn decode<P: Protocol, M: Message>(bytes: Bytes) -> Result<M, thrift_wire::DecodeError> {
    Codec::<P>::new().decode(bytes)
}

/// Lower-case hex, no separators.
pub fn hex(bytes: &[u8]) -> String {
    // Digit by digit rather than a `format!` a byte: the golden tests also run under
    // Miri, where formatting is most of their time.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Parses hex, ignoring whitespace (so expected bytes can be laid out by field).
pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let nibble = |d: u8| {
        char::from(d)
            .to_digit(16)
            .unwrap_or_else(|| panic!("{:?} is not a hex digit", char::from(d))) as u8
    };
    assert!(
        digits.len().is_multiple_of(2),
        "an odd number of hex digits"
    );
    digits
        .chunks(2)
        .map(|pair| nibble(pair[0]) << 4 | nibble(pair[1]))
        .collect()
}

pub fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

/// A `Request` like the benchmark's: a 1 KiB message.
pub fn request_1k() -> Request {
    Request {
        action: text("echo"),
        msg: text(&"abcdefghijklmnop".repeat(64)),
    }
}

/// A small `MyTest` (the benchmark's has 131,072 numbers).
pub fn my_test(n: usize) -> MyTest {
    MyTest {
        num: -42,
        ano: Ano { num: i64::MIN },
        nums: (0..n as i64).map(|i| i * 7919 - 5000).collect(),
    }
}

pub fn ids(n: usize, blob: usize) -> Ids {
    Ids {
        ids32: (0..n as i32).map(|i| i.wrapping_mul(-7_654_321)).collect(),
        ids64: (0..n as i64)
            .map(|i| i.wrapping_mul(0x0123_4567_89ab))
            .collect(),
        scores: (0..n).map(|i| i as f64 / 3.0 - 1.5).collect(),
        blob: Bytes::from((0..blob).map(|i| (i * 13) as u8).collect::<Vec<u8>>()),
    }
}

/// A `Mixed` with every field set, `scale` controls the sizes (1 is small).
pub fn mixed(scale: usize) -> Mixed {
    Mixed {
        id: 1 << 40,
        name: text("mixed-value-é"),
        flag: true,
        tiny: -3,
        small: 30_000,
        count: -70_000,
        ratio: 0.125,
        requests: (0..2 * scale)
            .map(|i| Request {
                action: text(&format!("action-{i}")),
                msg: text(&"m".repeat(32 * scale)),
            })
            .collect(),
        counters: (0..4 * scale as i64)
            .map(|i| (text(&format!("counter-{i:03}")), i * 1000 - 1))
            .collect::<BTreeMap<_, _>>(),
        tags: (0..8 * scale as i32)
            .map(|i| i * 3 - 7)
            .collect::<BTreeSet<_>>(),
        labels: (0..4 * scale)
            .map(|i| text(&format!("label-{i}")))
            .collect(),
        payload: Some(Bytes::from(vec![0xab; 20 * scale])),
        ids: ids(4 * scale, 8 * scale),
    }
}
