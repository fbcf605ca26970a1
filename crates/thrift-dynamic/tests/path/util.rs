//! What the path tests share: the `Mixed` descriptor read from the repository's IDL, a
//! populated `Mixed` fixture, and encoding with thrift-wire.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bytes::Bytes;
use thrift_dynamic::path::{FieldPath, PathProtocol, ResolvedPath};
use thrift_dynamic::{Descriptor, StructId};
use thrift_wire::fixtures::echo::{Ids, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Codec, LinkBuffer, Message, Protocol, Utf8Bytes};

/// `idl/mixed.thrift` and the `idl/echo.thrift` it includes, read from memory.
pub(crate) fn descriptor() -> Descriptor {
    let mut files = thrift_codegen::IdlFiles::new();
    files.insert("mixed.thrift", include_str!("../../../../idl/mixed.thrift"));
    files.insert("echo.thrift", include_str!("../../../../idl/echo.thrift"));
    Descriptor::from_memory(&files, &["mixed.thrift"], &[] as &[&Path]).expect("the IDL loads")
}

/// The `Mixed` struct of the descriptor.
pub(crate) fn mixed_id(d: &Descriptor) -> StructId {
    d.struct_named("mixed.Mixed").expect("Mixed is defined")
}

/// `text` resolved from `Mixed`.
pub(crate) fn resolve(d: &Descriptor, text: &str) -> ResolvedPath {
    let path: FieldPath = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
    path.resolve(d, mixed_id(d))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn text(s: String) -> Utf8Bytes {
    Utf8Bytes::from(s)
}

/// A `Mixed` of about 20 KB like the benchmark's: 16 requests, 64 counters, 256 tags,
/// 64 labels, 128 ids of each kind and a 512-byte blob; `payload` as given.
pub(crate) fn mixed(payload: Option<Bytes>) -> Mixed {
    Mixed {
        id: -0x0123_4567_89ab,
        name: text("mixed-é".to_string()),
        flag: true,
        tiny: -7,
        small: -12_345,
        count: 1_234_567,
        ratio: 0.618_033,
        requests: (0..16)
            .map(|i| Request {
                action: text(format!("act-{i}")),
                msg: text(format!("message {i} ").repeat(40)),
            })
            .collect(),
        counters: (0..64i64)
            .map(|i| (text(format!("counter-{i:03}")), i * 7919 - 100_000))
            .collect::<BTreeMap<_, _>>(),
        tags: (0..256i32)
            .map(|i| i * i * 31 - 5000)
            .collect::<BTreeSet<_>>(),
        labels: (0..64).map(|i| text(format!("label-{i}"))).collect(),
        payload,
        ids: Ids {
            ids32: (0..128).map(|i| i * -77_777).collect(),
            ids64: (0..128i64).map(|i| (i << 40) ^ i).collect(),
            scores: (0..128).map(|i| f64::from(i) / 7.0).collect(),
            blob: Bytes::from((0..512u32).map(|i| (i * 13) as u8).collect::<Vec<_>>()),
        },
    }
}

/// `value` encoded in protocol `P`.
pub(crate) fn encode<P: PathProtocol, M: Message>(value: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(value, &mut buf).expect("fits");
    buf.next(n)
}

/// `bytes` decoded as `M` in protocol `P`.
pub(crate) fn decode<P: PathProtocol, M: Message>(bytes: &[u8]) -> M {
    Codec::<P>::new()
        .decode(Bytes::copy_from_slice(bytes))
        .unwrap_or_else(|e| panic!("decodes: {e}"))
}

/// Runs a generic test body in both protocols.
macro_rules! both_protocols {
    ($($name:ident => $body:ident;)*) => {
        $(
            mod $name {
                #[test]
                fn binary() {
                    super::$body::<thrift_wire::Binary>();
                }
                #[test]
                fn compact() {
                    super::$body::<thrift_wire::Compact>();
                }
            }
        )*
    };
}
pub(crate) use both_protocols;

/// What `write` writes with thrift-wire's encoder for protocol `P`.
pub(crate) fn written<P: PathProtocol>(
    write: impl FnOnce(&mut <P as Protocol>::Encoder<'_>),
) -> Vec<u8> {
    let mut buf = LinkBuffer::new();
    {
        let mut e = P::encoder(&mut buf, usize::MAX);
        write(&mut e);
    }
    let n = buf.len();
    buf.next(n).to_vec()
}

/// Whether `P` is the Binary protocol.
pub(crate) fn is_binary<P: PathProtocol>() -> bool {
    std::any::TypeId::of::<P>() == std::any::TypeId::of::<thrift_wire::Binary>()
}
