//! The `path` target: thrift-dynamic's field paths on any text and any bytes, against
//! the `Mixed` descriptor (`idl/mixed.thrift` and the `idl/echo.thrift` it includes).
//!
//! An input is a selector byte, then (when its bit 1 is set) a length byte and that
//! many bytes of path text, then the bytes of a struct:
//!
//! | bits  | meaning                                                             |
//! |-------|---------------------------------------------------------------------|
//! | 0     | protocol: 0 Binary, 1 Compact                                       |
//! | 1     | the path is the text that follows, not one of [`PATHS`]             |
//! | 2..=7 | otherwise, an index into [`PATHS`] (modulo its length)              |
//!
//! Checked on every input: a path that parses prints back to text that parses to the
//! same path; a path that resolves reads without panicking, and a value it finds lies
//! inside the input; where thrift-wire decodes the bytes as a `Mixed`, the walk finds
//! them well-formed too; replacing a found value with its own bytes gives the input
//! back unchanged; and where the input is a well-formed struct and a replacement with a
//! new value succeeds, reading the path in its output gives that value.

use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;
use thrift_dynamic::path::{FieldPath, NewValue, PathProtocol, ReadErrorKind, ResolvedPath};
use thrift_dynamic::{Descriptor, StructId};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, Compact, Decoder, TType};

/// The paths an input's selector byte picks from: every field of `Mixed`, and into
/// each kind of container.
pub const PATHS: [&str; 24] = [
    "id",
    "name",
    "flag",
    "tiny",
    "small",
    "count",
    "ratio",
    "requests",
    "requests[0]",
    "requests[1].action",
    "requests[1].msg",
    "counters",
    "counters[\"a\"]",
    "counters[\"bb\"]",
    "tags[0]",
    "tags[2]",
    "labels[1]",
    "payload",
    "ids",
    "ids.ids32[4]",
    "ids.ids64[16]",
    "ids.scores[3]",
    "ids.blob",
    "#13.#4",
];

/// The `Mixed` descriptor, read once.
fn mixed() -> &'static (Descriptor, StructId) {
    static MIXED: OnceLock<(Descriptor, StructId)> = OnceLock::new();
    MIXED.get_or_init(|| {
        let mut files = thrift_codegen::IdlFiles::new();
        files.insert("mixed.thrift", include_str!("../../idl/mixed.thrift"));
        files.insert("echo.thrift", include_str!("../../idl/echo.thrift"));
        let d = Descriptor::from_memory(&files, &["mixed.thrift"], &[] as &[&Path])
            .expect("the repository's IDL loads");
        let root = d.struct_named("mixed.Mixed").expect("Mixed is defined");
        (d, root)
    })
}

/// The `path` target.
pub fn fuzz_path(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (text, input) = if selector & 2 != 0 {
        let Some((&len, rest)) = rest.split_first() else {
            return;
        };
        let len = usize::from(len).min(rest.len());
        let (text, input) = rest.split_at(len);
        (String::from_utf8_lossy(text).into_owned(), input)
    } else {
        let index = usize::from(selector >> 2) % PATHS.len();
        (PATHS[index].to_string(), rest)
    };
    let Ok(path) = FieldPath::parse(&text) else {
        return;
    };
    let shown = path.to_string();
    assert_eq!(
        FieldPath::parse(&shown).as_ref(),
        Ok(&path),
        "{text:?} prints as {shown:?}"
    );
    let (d, root) = mixed();
    let Ok(resolved) = path.resolve(d, *root) else {
        return;
    };
    if selector & 1 != 0 {
        walk::<Compact>(&resolved, input);
    } else {
        walk::<Binary>(&resolved, input);
    }
}

fn walk<P: PathProtocol>(path: &ResolvedPath, input: &[u8]) {
    let read = path.read::<P>(input);
    if Codec::<P>::new()
        .decode::<Mixed>(Bytes::copy_from_slice(input))
        .is_ok()
        && let Err(e) = &read
    {
        assert!(
            !matches!(e.kind, ReadErrorKind::Wire(_)),
            "thrift-wire decodes what the walk calls malformed: {e}"
        );
    }
    let mut out = Vec::new();
    if let Ok(Some(v)) = &read {
        let range = v.range();
        assert!(range.start <= range.end && range.end <= input.len());
        // Every accessor answers without panicking, whatever the type.
        let _ = (
            v.bool(),
            v.i8(),
            v.i16(),
            v.i32(),
            v.i64(),
            v.double(),
            v.uuid(),
        );
        let _ = (v.binary(), v.str(), v.bytes(), v.string(), v.struct_bytes());
        // The value's own bytes put back give the input back (a Compact bool field's
        // value lives in its header, so Compact bools are left out).
        let compact = std::any::TypeId::of::<P>() == std::any::TypeId::of::<Compact>();
        if !(compact && v.ttype() == TType::Bool) {
            let n = path
                .replace::<P>(input, v.raw(), &mut out)
                .unwrap_or_else(|e| panic!("its own value does not fit back: {e}"));
            assert_eq!(n, input.len());
            assert_eq!(
                out, input,
                "replacing a value by itself changed the message"
            );
        }
    }
    // A new value of the path's type, where it has a scalar or string one.
    let value = match path.ty().ttype() {
        TType::Bool => NewValue::Bool(true),
        TType::I8 => NewValue::I8(-2),
        TType::I16 => NewValue::I16(300),
        TType::I32 => NewValue::I32(-70_000),
        TType::I64 => NewValue::I64(1 << 40),
        TType::Double => NewValue::Double(0.5),
        TType::Binary => NewValue::Str("new"),
        _ => return,
    };
    // Read back only from a well-formed input: where bytes past the path are broken, a
    // shorter value can leave a container's count larger than the bytes after it.
    let mut whole = Codec::<P>::new()
        .decoder(Bytes::copy_from_slice(input))
        .expect("within the size limit");
    if whole.skip(TType::Struct).is_err() {
        return;
    }
    out.clear();
    if path.replace_with::<P>(input, value, &mut out).is_ok() {
        let back = path
            .read::<P>(&out)
            .unwrap_or_else(|e| panic!("the replaced message does not read: {e}"))
            .expect("the replaced value is there");
        match value {
            NewValue::Bool(b) => assert_eq!(back.bool().ok(), Some(b)),
            NewValue::I8(x) => assert_eq!(back.i8().ok(), Some(x)),
            NewValue::I16(x) => assert_eq!(back.i16().ok(), Some(x)),
            NewValue::I32(x) => assert_eq!(back.i32().ok(), Some(x)),
            NewValue::I64(x) => assert_eq!(back.i64().ok(), Some(x)),
            NewValue::Double(x) => assert_eq!(back.double().ok(), Some(x)),
            NewValue::Str(s) => assert_eq!(back.str().ok(), Some(s)),
            _ => {}
        }
    }
}

/// The seed inputs of the `path` target: the sample `Mixed` in both protocols with
/// every path of [`PATHS`], and a few paths as text.
pub fn path_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (compact, bytes) in [
        (0u8, crate::encode(Codec::<Binary>::new(), &crate::mixed())),
        (1u8, crate::encode(Codec::<Compact>::new(), &crate::mixed())),
    ] {
        for i in 0..PATHS.len() as u8 {
            let mut seed = vec![compact | (i << 2)];
            seed.extend_from_slice(&bytes);
            out.push(seed);
        }
        for text in ["requests[0].action", "#8[0].#1", "counters[\"\\u0061\"]"] {
            let mut seed = vec![compact | 2, text.len() as u8];
            seed.extend_from_slice(text.as_bytes());
            seed.extend_from_slice(&bytes);
            out.push(seed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_resolves() {
        let (d, root) = mixed();
        for p in PATHS {
            FieldPath::parse(p).unwrap().resolve(d, *root).unwrap();
        }
    }

    #[test]
    fn seeds_pass_and_find_their_values() {
        let (d, root) = mixed();
        for seed in path_seeds() {
            fuzz_path(&seed);
            if seed[0] & 2 == 0 {
                let path = FieldPath::parse(PATHS[usize::from(seed[0] >> 2)])
                    .unwrap()
                    .resolve(d, *root)
                    .unwrap();
                let found = if seed[0] & 1 == 0 {
                    path.read::<Binary>(&seed[1..]).unwrap().is_some()
                } else {
                    path.read::<Compact>(&seed[1..]).unwrap().is_some()
                };
                assert!(found, "{}", path.path());
            }
        }
    }
}
