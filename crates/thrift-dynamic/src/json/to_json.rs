//! Thrift bytes to JSON text, in one pass driven by the descriptor, reading through
//! thrift-wire's hardened decoders.

use thrift_wire::{Decoder, TType};

use super::error::{ErrorKind, TranscodeError};
use super::to_thrift::is_key_type;
use super::{Seen, ty_name};
use crate::StructId;
use crate::descriptor::{Descriptor, Kind, Requiredness, Ty};
use thrift_wire::encoding::{UUID_TEXT_LEN, base64_encode, format_uuid, write_escaped};

type Result<T> = std::result::Result<T, TranscodeError>;

/// The transcoder's state for one call.
pub(crate) struct ToJson<'d, 'o, D> {
    pub(crate) d: D,
    pub(crate) desc: &'d Descriptor,
    pub(crate) out: &'o mut Vec<u8>,
}

impl<D: Decoder> ToJson<'_, '_, D> {
    /// The whole input: one struct, then nothing.
    pub(crate) fn run(&mut self, ty: StructId) -> Result<()> {
        self.structure(ty)?;
        if self.d.remaining() != 0 {
            return Err(TranscodeError::new(ErrorKind::TrailingData));
        }
        Ok(())
    }

    fn structure(&mut self, id: StructId) -> Result<()> {
        let saved = self.d.read_struct_begin()?;
        let desc = self.desc;
        let s = desc.struct_desc(id);
        self.out.push(b'{');
        let mut seen = Seen::new(s.fields.len());
        loop {
            let h = self.d.read_field_begin()?;
            if h.ty == TType::Stop {
                break;
            }
            let known = s
                .fields
                .iter()
                .position(|f| f.id == h.id && f.ty.ttype() == h.ty);
            let Some(i) = known else {
                // Unknown ids, and known ids of another wire type (as generated code
                // does), are skipped.
                self.d
                    .skip(h.ty)
                    .map_err(|e| TranscodeError::from(e).in_id(h.id))?;
                continue;
            };
            let f = &s.fields[i];
            if !seen.insert(i) {
                return Err(TranscodeError::new(ErrorKind::DuplicateField {
                    field: f.name.clone(),
                }));
            }
            if seen.count() > 1 {
                self.out.push(b',');
            }
            write_str(self.out, f.name.as_bytes());
            self.out.push(b':');
            self.value(&f.ty).map_err(|e| e.in_field(&f.name))?;
        }
        if s.kind == Kind::Union {
            if seen.count() != 1 {
                return Err(TranscodeError::new(ErrorKind::Union {
                    count: seen.count(),
                }));
            }
        } else if let Some(f) = s
            .fields
            .iter()
            .enumerate()
            .find(|(i, f)| f.req == Requiredness::Required && !seen.contains(*i))
            .map(|(_, f)| f)
        {
            return Err(TranscodeError::new(ErrorKind::MissingRequired {
                field: f.name.clone(),
            }));
        }
        self.d.read_struct_end(saved);
        self.out.push(b'}');
        Ok(())
    }

    pub(crate) fn value(&mut self, ty: &Ty) -> Result<()> {
        match ty {
            Ty::Bool => {
                let v = self.d.read_bool()?;
                self.out
                    .extend_from_slice(if v { b"true" } else { b"false" });
            }
            Ty::I8 => {
                let v = self.d.read_i8()?;
                write_int(self.out, i64::from(v));
            }
            Ty::I16 => {
                let v = self.d.read_i16()?;
                write_int(self.out, i64::from(v));
            }
            Ty::I32 | Ty::Enum(_) => {
                let v = self.d.read_i32()?;
                write_int(self.out, i64::from(v));
            }
            Ty::I64 => {
                let v = self.d.read_i64()?;
                write_int(self.out, v);
            }
            Ty::Double => {
                let v = self.d.read_double()?;
                write_double(self.out, v)?;
            }
            Ty::String => {
                let v = self.d.read_string()?;
                write_str(self.out, v.as_bytes());
            }
            Ty::Binary => {
                let v = self.d.read_bytes()?;
                write_base64(self.out, &v);
            }
            Ty::Uuid => {
                let v = self.d.read_uuid()?;
                write_uuid(self.out, &v);
            }
            Ty::Struct(id) => self.structure(*id)?,
            Ty::List(elem) | Ty::Set(elem) => {
                let h = if matches!(ty, Ty::List(_)) {
                    self.d.read_list_begin()?
                } else {
                    self.d.read_set_begin()?
                };
                expect_elem(elem, h.elem, h.len)?;
                self.out.push(b'[');
                for i in 0..h.len {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.value(elem).map_err(|e| e.in_index(i))?;
                }
                self.out.push(b']');
                self.d.read_container_end();
            }
            Ty::Map(k, v) => {
                if !is_key_type(k) {
                    return Err(TranscodeError::new(ErrorKind::UnsupportedMapKey {
                        ty: ty_name(k),
                    }));
                }
                let h = self.d.read_map_begin()?;
                expect_elem(k, h.key, h.len)?;
                expect_elem(v, h.value, h.len)?;
                self.out.push(b'{');
                for i in 0..h.len {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    let key_start = self.out.len();
                    self.key(k).map_err(|e| e.in_index(i))?;
                    let key_end = self.out.len();
                    self.out.push(b':');
                    if let Err(e) = self.value(v) {
                        let key = self.out[key_start + 1..key_end - 1].to_vec();
                        return Err(e.in_key(String::from_utf8_lossy(&key).into_owned()));
                    }
                }
                self.out.push(b'}');
                self.d.read_container_end();
            }
        }
        Ok(())
    }

    /// A map key as a JSON string: strings as they are, binaries in base64, uuids in
    /// their text form, everything else in quotes around its JSON value.
    fn key(&mut self, ty: &Ty) -> Result<()> {
        match ty {
            Ty::String | Ty::Binary | Ty::Uuid => self.value(ty),
            _ => {
                self.out.push(b'"');
                self.value(ty)?;
                self.out.push(b'"');
                Ok(())
            }
        }
    }
}

/// Fails when a non-empty container's element type on the wire is not the declared one.
fn expect_elem(declared: &Ty, found: TType, len: usize) -> Result<()> {
    let expected = declared.ttype();
    if len == 0 || found == expected {
        Ok(())
    } else {
        Err(TranscodeError::new(ErrorKind::ElementType {
            expected,
            found,
        }))
    }
}

/// Writes `v` as a JSON string: the runs that need no escape copied as they are,
/// `"` and `\` escaped with a backslash, control characters as `\n`-style or `\u00XX`.
pub(crate) fn write_str(out: &mut Vec<u8>, v: &[u8]) {
    out.reserve(v.len() + 2);
    out.push(b'"');
    write_escaped(v, |run| out.extend_from_slice(run));
    out.push(b'"');
}

/// Writes an integer in decimal.
pub(crate) fn write_int(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes a finite double in the shortest form that reads back to the same value
/// (Rust's `Debug` form: `1.0`, `0.1`, `1e300`, all JSON numbers); NaN and the
/// infinities have none.
pub(crate) fn write_double(out: &mut Vec<u8>, v: f64) -> Result<()> {
    if !v.is_finite() {
        return Err(TranscodeError::new(ErrorKind::NonFinite));
    }
    use std::io::Write as _;
    // Writing into a `Vec` cannot fail.
    let _ = write!(out, "{v:?}");
    Ok(())
}

/// Writes bytes as a base64 JSON string (standard alphabet, padded).
pub(crate) fn write_base64(out: &mut Vec<u8>, v: &[u8]) {
    out.push(b'"');
    base64_encode(v, true, out);
    out.push(b'"');
}

/// Writes a uuid as a JSON string in the 8-4-4-4-12 form, lower case.
pub(crate) fn write_uuid(out: &mut Vec<u8>, v: &[u8; 16]) {
    let mut text = [0u8; UUID_TEXT_LEN];
    format_uuid(v, &mut text);
    out.push(b'"');
    out.extend_from_slice(&text);
    out.push(b'"');
}
