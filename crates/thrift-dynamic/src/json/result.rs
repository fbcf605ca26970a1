//! A method's result struct to and from the JSON of the one field it carries: what a
//! JSON generic call gives back (the return value, or the declared exception) and
//! what a JSON generic server answers with.

use bytes::Bytes;
use thrift_wire::{Binary, Compact, Decoder, Protocol, TType};

use super::error::{ErrorKind, TranscodeError};
use super::to_json::ToJson;
use super::to_thrift::ToThrift;
use super::{ThriftProtocol, decode_limits, from_json, wire};
use crate::{Descriptor, StructId};

/// Transcodes the result struct `result` in `thrift` (one whole struct in `protocol`)
/// into the JSON of the one field it carries, appended to `out`, and says which
/// field that was: `Some(0)` for a return value, a declared exception's id, or `None`
/// when no field is set (a `void` method's success; nothing is written).
///
/// Fields the descriptor does not know are skipped, as generated code skips them; two
/// known fields set are [`ErrorKind::Union`]. On error `out` is left as it was.
pub fn result_to_json(
    desc: &Descriptor,
    result: StructId,
    thrift: Bytes,
    protocol: ThriftProtocol,
    out: &mut Vec<u8>,
) -> Result<Option<i16>, TranscodeError> {
    let before = out.len();
    let limits = decode_limits();
    let read = match protocol {
        ThriftProtocol::Binary => carried(
            &mut ToJson {
                d: Binary::decoder(thrift, limits),
                desc,
                out: &mut *out,
            },
            result,
        ),
        ThriftProtocol::Compact => carried(
            &mut ToJson {
                d: Compact::decoder(thrift, limits),
                desc,
                out: &mut *out,
            },
            result,
        ),
    };
    if read.is_err() {
        out.truncate(before);
    }
    read
}

fn carried<D: Decoder>(
    t: &mut ToJson<'_, '_, D>,
    result: StructId,
) -> Result<Option<i16>, TranscodeError> {
    let s = t.desc.struct_desc(result);
    let saved = t.d.read_struct_begin()?;
    let mut found = None;
    let mut count = 0;
    loop {
        let h = t.d.read_field_begin()?;
        if h.ty == TType::Stop {
            break;
        }
        let Some(f) = s.field(h.id).filter(|f| f.ty.ttype() == h.ty) else {
            t.d.skip(h.ty)
                .map_err(|e| TranscodeError::from(e).in_id(h.id))?;
            continue;
        };
        count += 1;
        if count > 1 {
            return Err(TranscodeError::new(ErrorKind::Union { count }));
        }
        t.value(&f.ty).map_err(|e| e.in_field(&f.name))?;
        found = Some(f.id);
    }
    t.d.read_struct_end(saved);
    if t.d.remaining() != 0 {
        return Err(TranscodeError::new(ErrorKind::TrailingData));
    }
    Ok(found)
}

/// Writes the result struct `result` carrying `json` (a JSON value of the field's
/// type) as its field `id` (0 for the return value, or a declared exception's id), in
/// `protocol`, appended to `out`. A field id the struct does not have is
/// [`ErrorKind::NoSuchField`]. On error `out` is left as it was.
///
/// Any struct will do for `result`: an arguments struct of one argument, from that
/// argument's JSON alone, is Kitex's form of a JSON generic call.
pub fn json_to_result(
    desc: &Descriptor,
    result: StructId,
    id: i16,
    json: &[u8],
    protocol: ThriftProtocol,
    out: &mut Vec<u8>,
) -> Result<(), TranscodeError> {
    let Some(f) = desc.struct_desc(result).field(id) else {
        return Err(TranscodeError::new(ErrorKind::NoSuchField { id }));
    };
    let before = out.len();
    out.reserve(json.len() + 8);
    let written = match protocol {
        ThriftProtocol::Binary => {
            from_json(json, desc, wire::BinaryWire { out: &mut *out }).one_field(f)
        }
        ThriftProtocol::Compact => from_json(
            json,
            desc,
            wire::CompactWire {
                out: &mut *out,
                last_id: 0,
            },
        )
        .one_field(f),
    };
    if written.is_err() {
        out.truncate(before);
    }
    written
}

impl<W: wire::Wire> ToThrift<'_, '_, W> {
    /// A struct of the one field `f`, its value the whole input.
    fn one_field(&mut self, f: &crate::FieldDesc) -> Result<(), TranscodeError> {
        let saved = self.w.struct_begin();
        self.field(f).map_err(|e| e.in_field(&f.name))?;
        self.w.struct_end(saved);
        self.r.finish()
    }
}

#[cfg(test)]
mod tests {
    use thrift_wire::{Binary, Compact, Utf8Bytes};

    use super::*;
    use crate::value::{self, StructValue, Value};
    use crate::{Descriptor, MethodDesc};

    const BOTH: [ThriftProtocol; 2] = [ThriftProtocol::Binary, ThriftProtocol::Compact];

    const IDL: &str = r#"
        exception Oops { 1: string why, 2: i32 code }
        struct Point { 1: i32 x, 2: i32 y, 3: optional string label }
        service Shapes {
            Point get(1: i32 id) throws (1: Oops oops)
            void clear() throws (1: Oops oops)
            bool flag()
        }
    "#;

    fn idl() -> Descriptor {
        Descriptor::from_text("shapes.thrift", IDL).unwrap()
    }

    fn method<'d>(d: &'d Descriptor, name: &str) -> &'d MethodDesc {
        d.service("Shapes").unwrap().method(name).unwrap()
    }

    /// `v` encoded by the value module, an encoder apart from the transcoder's.
    fn encoded(d: &Descriptor, ty: StructId, v: &StructValue, p: ThriftProtocol) -> Bytes {
        match p {
            ThriftProtocol::Binary => value::encode_struct::<Binary>(d, ty, v).unwrap(),
            ThriftProtocol::Compact => value::encode_struct::<Compact>(d, ty, v).unwrap(),
        }
    }

    fn point(x: i32, y: i32) -> Value {
        Value::Struct(
            StructValue::new()
                .with(1, Value::I32(x))
                .with(2, Value::I32(y)),
        )
    }

    #[test]
    fn a_return_value_is_written_as_field_zero_and_read_back_alone() {
        let d = idl();
        let r = method(&d, "get").result.unwrap();
        for p in BOTH {
            let mut out = Vec::new();
            json_to_result(&d, r, 0, br#"{"x":3,"y":-4}"#, p, &mut out).unwrap();
            let expected = encoded(&d, r, &StructValue::new().with(0, point(3, -4)), p);
            assert_eq!(out, expected, "{p:?}");

            let mut json = b"prefix:".to_vec();
            let id = result_to_json(&d, r, expected, p, &mut json).unwrap();
            assert_eq!(id, Some(0));
            assert_eq!(json, br#"prefix:{"x":3,"y":-4}"#);
        }
    }

    #[test]
    fn a_declared_exception_travels_under_its_own_field_id() {
        let d = idl();
        let r = method(&d, "get").result.unwrap();
        for p in BOTH {
            let mut out = Vec::new();
            json_to_result(&d, r, 1, br#"{"why":"gone","code":7}"#, p, &mut out).unwrap();
            let oops = StructValue::new()
                .with(1, Value::String(Utf8Bytes::from_static("gone")))
                .with(2, Value::I32(7));
            let expected = encoded(&d, r, &StructValue::new().with(1, Value::Struct(oops)), p);
            assert_eq!(out, expected, "{p:?}");
            let mut json = Vec::new();
            assert_eq!(
                result_to_json(&d, r, expected, p, &mut json).unwrap(),
                Some(1)
            );
            assert_eq!(json, br#"{"why":"gone","code":7}"#);
        }
    }

    #[test]
    fn a_void_success_is_an_empty_struct_and_no_json() {
        let d = idl();
        let r = method(&d, "clear").result.unwrap();
        for p in BOTH {
            let empty = encoded(&d, r, &StructValue::new(), p);
            let mut json = Vec::new();
            assert_eq!(result_to_json(&d, r, empty, p, &mut json).unwrap(), None);
            assert!(json.is_empty());
        }
    }

    #[test]
    fn a_bool_return_survives_compacts_folded_field_header() {
        let d = idl();
        let r = method(&d, "flag").result.unwrap();
        for p in BOTH {
            for (text, v) in [(&b"true"[..], true), (b"false", false)] {
                let mut out = Vec::new();
                json_to_result(&d, r, 0, text, p, &mut out).unwrap();
                let expected = encoded(&d, r, &StructValue::new().with(0, Value::Bool(v)), p);
                assert_eq!(out, expected, "{p:?} {v}");
                let mut json = Vec::new();
                result_to_json(&d, r, expected, p, &mut json).unwrap();
                assert_eq!(json, text);
            }
        }
    }

    #[test]
    fn two_fields_set_in_a_result_are_refused() {
        let d = idl();
        let r = method(&d, "get").result.unwrap();
        let oops = StructValue::new().with(2, Value::I32(1));
        let both = StructValue::new()
            .with(0, point(1, 2))
            .with(1, Value::Struct(oops));
        for p in BOTH {
            let mut json = b"kept".to_vec();
            let err = result_to_json(&d, r, encoded(&d, r, &both, p), p, &mut json).unwrap_err();
            assert_eq!(err.kind(), &ErrorKind::Union { count: 2 });
            assert_eq!(json, b"kept", "the output is left as it was");
        }
    }

    #[test]
    fn unknown_result_fields_are_skipped() {
        let d = idl();
        let r = method(&d, "flag").result.unwrap();
        // A newer server's exception (id 9) the descriptor does not know, then the value.
        let newer = Descriptor::from_text(
            "shapes.thrift",
            "exception Later { 1: i64 at }
             service Shapes { bool flag() throws (9: Later later) }",
        )
        .unwrap();
        let nr = method(&newer, "flag").result.unwrap();
        let later = StructValue::new().with(1, Value::I64(5));
        let v = StructValue::new().with(9, Value::Struct(later));
        for p in BOTH {
            let mut json = Vec::new();
            let id = result_to_json(&d, r, encoded(&newer, nr, &v, p), p, &mut json).unwrap();
            assert_eq!(id, None);
            assert!(json.is_empty());
        }
    }

    #[test]
    fn bad_json_names_the_result_field_and_leaves_the_output_alone() {
        let d = idl();
        let r = method(&d, "get").result.unwrap();
        for p in BOTH {
            let mut out = b"kept".to_vec();
            let err = json_to_result(&d, r, 0, br#"{"x":"three"}"#, p, &mut out).unwrap_err();
            let field0 = &d.struct_desc(r).field(0).unwrap().name;
            assert_eq!(err.path(), format!("{field0}.x"));
            assert_eq!(out, b"kept");

            let err = json_to_result(&d, r, 7, b"{}", p, &mut out).unwrap_err();
            assert_eq!(err.kind(), &ErrorKind::NoSuchField { id: 7 });
            let err = json_to_result(&d, r, 0, br#"{"x":1} 2"#, p, &mut out).unwrap_err();
            assert_eq!(err.kind(), &ErrorKind::TrailingData);
            assert_eq!(out, b"kept");
        }
    }

    #[test]
    fn bytes_after_the_result_struct_are_refused() {
        let d = idl();
        let r = method(&d, "clear").result.unwrap();
        for p in BOTH {
            let mut b = encoded(&d, r, &StructValue::new(), p).to_vec();
            b.push(0);
            let mut json = Vec::new();
            let err = result_to_json(&d, r, b.into(), p, &mut json).unwrap_err();
            assert_eq!(err.kind(), &ErrorKind::TrailingData);
        }
    }
}
