//! JSON text to Thrift bytes, in one pass driven by the descriptor.

use super::error::{ErrorKind, TranscodeError};
use super::reader::{Next, Reader, Str};
use super::wire::Wire;
use super::{Seen, ty_name};
use crate::descriptor::{Descriptor, FieldDesc, Kind, Literal, Requiredness, StructDesc, Ty};
use crate::{EnumId, StructId};
use thrift_wire::encoding::{base64_decode, base64_decoded_len, parse_uuid};

/// The transcoder's state for one call.
pub(crate) struct ToThrift<'a, 'd, W> {
    pub(crate) r: Reader<'a>,
    pub(crate) desc: &'d Descriptor,
    pub(crate) w: W,
    /// Unescaped strings (reused).
    pub(crate) scratch: Vec<u8>,
    pub(crate) depth: usize,
    pub(crate) max_depth: usize,
}

type Result<T> = std::result::Result<T, TranscodeError>;

impl<'a, W: Wire> ToThrift<'a, '_, W> {
    /// The whole input: one struct, then nothing but spaces.
    pub(crate) fn run(&mut self, ty: StructId) -> Result<()> {
        self.structure(ty)?;
        self.r.finish()
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= self.max_depth {
            return Err(self.r.err(ErrorKind::DepthLimit(self.max_depth)));
        }
        self.depth += 1;
        Ok(())
    }

    fn wrong(&mut self, expected: &'static str) -> TranscodeError {
        match self.r.next_kind() {
            Ok(found) => self.r.err(ErrorKind::WrongType {
                expected,
                found: found.name(),
            }),
            Err(e) => e,
        }
    }

    /// The bytes of the string just read.
    fn bytes<'s>(&'s self, s: Str<'a>) -> &'s [u8] {
        text(s, &self.scratch)
    }

    fn structure(&mut self, id: StructId) -> Result<()> {
        if self.r.next_kind()? != Next::Object {
            return Err(self.wrong("an object"));
        }
        self.enter()?;
        self.r.expect(b'{', "`{`")?;
        let desc = self.desc;
        let s = desc.struct_desc(id);
        let saved = self.w.struct_begin();
        let mut seen = Seen::new(s.fields.len());
        // Where the next key is looked for first: after the field of the last one.
        let mut next = 0;
        if !self.r.empty(b'}') {
            loop {
                let key = self.r.string(&mut self.scratch)?;
                let field = s.field_index_from(self.bytes(key), next);
                self.r.expect(b':', "`:`")?;
                match field {
                    // Unknown keys are skipped (their syntax checked).
                    None => self
                        .r
                        .skip_value(&mut self.scratch, self.depth, self.max_depth)?,
                    Some(i) => {
                        next = i + 1;
                        let f = &s.fields[i];
                        if self.r.peek() == Some(b'n') {
                            // `null` is an absent field.
                            self.r.literal(b"null").map_err(|e| e.in_field(&f.name))?;
                        } else {
                            let offset = self.r.pos();
                            if !seen.insert(i) {
                                return Err(TranscodeError::at(
                                    ErrorKind::DuplicateField {
                                        field: f.name.clone(),
                                    },
                                    offset,
                                ));
                            }
                            self.field(f).map_err(|e| e.in_field(&f.name))?;
                        }
                    }
                }
                if !self.r.more(b'}', "`,` or `}`")? {
                    break;
                }
            }
        }
        self.absent(s, &seen)?;
        self.w.struct_end(saved);
        self.depth -= 1;
        Ok(())
    }

    /// After an object: fails on a missing required field or a union without exactly
    /// one field; writes the IDL default of each absent default-requiredness field.
    fn absent(&mut self, s: &StructDesc, seen: &Seen) -> Result<()> {
        if s.kind == Kind::Union {
            let count = seen.count();
            if count != 1 {
                return Err(self.r.err(ErrorKind::Union { count }));
            }
            return Ok(());
        }
        for (i, f) in s.fields.iter().enumerate() {
            if seen.contains(i) {
                continue;
            }
            match (f.req, &f.default) {
                (Requiredness::Required, _) => {
                    return Err(TranscodeError::new(ErrorKind::MissingRequired {
                        field: f.name.clone(),
                    }));
                }
                (Requiredness::Default, Some(lit)) => {
                    write_field_literal(&mut self.w, self.desc, f.id, &f.ty, lit);
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(crate) fn field(&mut self, f: &FieldDesc) -> Result<()> {
        if f.ty == Ty::Bool {
            let v = self.r.boolean()?;
            self.w.bool_field(f.id, v);
            return Ok(());
        }
        self.w.field_begin(f.ty.ttype(), f.id);
        self.value(&f.ty)
    }

    fn value(&mut self, ty: &Ty) -> Result<()> {
        match ty {
            Ty::Bool => {
                let v = self.r.boolean()?;
                self.w.bool(v);
            }
            Ty::I8 => {
                let v = self.int(ty)?;
                self.w.i8(v as i8);
            }
            Ty::I16 => {
                let v = self.int(ty)?;
                self.w.i16(v as i16);
            }
            Ty::I32 => {
                let v = self.int(ty)?;
                self.w.i32(v as i32);
            }
            Ty::I64 => {
                let v = self.int(ty)?;
                self.w.i64(v);
            }
            Ty::Enum(e) => {
                let v = self.enumeration(*e)?;
                self.w.i32(v);
            }
            Ty::Double => {
                let v = self.double()?;
                self.w.double(v);
            }
            Ty::String => {
                if self.r.next_kind()? != Next::String {
                    return Err(self.wrong("a string"));
                }
                let start = self.r.pos();
                let s = self.r.string(&mut self.scratch)?;
                let bytes = text(s, &self.scratch);
                if bytes.len() > i32::MAX as usize {
                    return Err(TranscodeError::at(
                        ErrorKind::TooLarge { what: "a string" },
                        start,
                    ));
                }
                self.w.binary(bytes);
            }
            Ty::Binary => self.binary()?,
            Ty::Uuid => {
                let v = self.uuid()?;
                self.w.uuid(&v);
            }
            Ty::Struct(id) => self.structure(*id)?,
            Ty::List(elem) | Ty::Set(elem) => self.list(elem)?,
            Ty::Map(k, v) => self.map(k, v)?,
        }
        Ok(())
    }

    /// An integer of type `ty` (range-checked): a JSON number without fraction or
    /// exponent, or a string holding one.
    fn int(&mut self, ty: &Ty) -> Result<i64> {
        let start = self.r.pos();
        let text = match self.r.next_kind()? {
            Next::Number => match self.r.small_int() {
                Some(v) => return in_range(v, ty, start),
                None => self.r.number()?,
            },
            Next::String => {
                let s = self.r.string(&mut self.scratch)?;
                self.bytes(s)
            }
            _ => return Err(self.wrong("an integer")),
        };
        let v = parse_int(text).map_err(|kind| TranscodeError::at(kind, start))?;
        in_range(v, ty, start)
    }

    /// An enum: its number, or one of its names as a string.
    fn enumeration(&mut self, e: EnumId) -> Result<i32> {
        if self.r.next_kind()? != Next::String {
            return self.int(&Ty::Enum(e)).map(|v| v as i32);
        }
        let start = self.r.pos();
        let s = self.r.string(&mut self.scratch)?;
        let text = self.bytes(s);
        let ed = self.desc.enum_desc(e);
        if let Some(v) = std::str::from_utf8(text).ok().and_then(|n| ed.value_of(n)) {
            return Ok(v);
        }
        match parse_int(text) {
            Ok(v) => i32::try_from(v).map_err(|_| {
                TranscodeError::at(
                    ErrorKind::OutOfRange {
                        ty: "an enum (i32)",
                    },
                    start,
                )
            }),
            Err(_) => Err(TranscodeError::at(
                ErrorKind::UnknownEnumName {
                    name: String::from_utf8_lossy(text).into_owned(),
                    enum_name: ed.name.clone(),
                },
                start,
            )),
        }
    }

    /// A double: a JSON number, or a string holding one (JSON's grammar either way, so
    /// `"NaN"` and `"inf"` are refused); a number past `f64`'s range is an error.
    fn double(&mut self) -> Result<f64> {
        let start = self.r.pos();
        let text = match self.r.next_kind()? {
            Next::Number => self.r.number()?,
            Next::String => {
                let s = self.r.string(&mut self.scratch)?;
                let text = self.bytes(s);
                if !is_json_number(text) {
                    return Err(TranscodeError::at(
                        ErrorKind::WrongType {
                            expected: "a number",
                            found: "a string that is not a number",
                        },
                        start,
                    ));
                }
                text
            }
            _ => return Err(self.wrong("a number")),
        };
        parse_double(text).map_err(|kind| TranscodeError::at(kind, start))
    }

    /// A binary: base64 (standard alphabet, padded or not), decoded straight into the
    /// output behind its exact length.
    fn binary(&mut self) -> Result<()> {
        if self.r.next_kind()? != Next::String {
            return Err(self.wrong("a base64 string"));
        }
        let start = self.r.pos();
        let s = self.r.string(&mut self.scratch)?;
        let text = text(s, &self.scratch);
        let bad = || TranscodeError::at(ErrorKind::InvalidBase64, start);
        let len = base64_decoded_len(text).ok_or_else(bad)?;
        if len > i32::MAX as usize {
            return Err(TranscodeError::at(
                ErrorKind::TooLarge { what: "a binary" },
                start,
            ));
        }
        self.w.binary_len(len as u32);
        let out = self.w.out();
        let before = out.len();
        base64_decode(text, out).map_err(|_| bad())?;
        if out.len() - before != len {
            return Err(bad());
        }
        Ok(())
    }

    fn uuid(&mut self) -> Result<[u8; 16]> {
        if self.r.next_kind()? != Next::String {
            return Err(self.wrong("a uuid string"));
        }
        let start = self.r.pos();
        let s = self.r.string(&mut self.scratch)?;
        parse_uuid(self.bytes(s)).ok_or_else(|| TranscodeError::at(ErrorKind::InvalidUuid, start))
    }

    fn list(&mut self, elem: &Ty) -> Result<()> {
        if self.r.next_kind()? != Next::Array {
            return Err(self.wrong("an array"));
        }
        self.enter()?;
        self.r.expect(b'[', "`[`")?;
        let et = elem.ttype();
        let start = self.w.list_begin(et);
        let mut count: u32 = 0;
        if !self.r.empty(b']') {
            loop {
                if count == i32::MAX as u32 {
                    return Err(self.r.err(ErrorKind::TooLarge { what: "an array" }));
                }
                self.value(elem).map_err(|e| e.in_index(count as usize))?;
                count += 1;
                if !self.r.more(b']', "`,` or `]`")? {
                    break;
                }
            }
        }
        self.w.list_end(start, et, count);
        self.depth -= 1;
        Ok(())
    }

    fn map(&mut self, key: &Ty, value: &Ty) -> Result<()> {
        if self.r.next_kind()? != Next::Object {
            return Err(self.wrong("an object"));
        }
        if !is_key_type(key) {
            return Err(self
                .r
                .err(ErrorKind::UnsupportedMapKey { ty: ty_name(key) }));
        }
        self.enter()?;
        self.r.expect(b'{', "`{`")?;
        let (kt, vt) = (key.ttype(), value.ttype());
        let start = self.w.map_begin(kt, vt);
        let mut count: u32 = 0;
        if !self.r.empty(b'}') {
            loop {
                if count == i32::MAX as u32 {
                    return Err(self.r.err(ErrorKind::TooLarge { what: "an object" }));
                }
                let key_start = self.r.pos();
                self.key(key)?;
                self.r.expect(b':', "`:`")?;
                if let Err(e) = self.value(value) {
                    return Err(e.in_key(self.key_text(key_start)));
                }
                count += 1;
                if !self.r.more(b'}', "`,` or `}`")? {
                    break;
                }
            }
        }
        self.w.map_end(start, kt, vt, count);
        self.depth -= 1;
        Ok(())
    }

    /// The text of the key that starts at `at`, for an error's path.
    fn key_text(&self, at: usize) -> String {
        let mut r = Reader::new(self.r.input());
        r.seek(at);
        let mut scratch = Vec::new();
        match r.string(&mut scratch) {
            Ok(Str::Raw(b)) => String::from_utf8_lossy(b).into_owned(),
            Ok(Str::Scratch) => String::from_utf8_lossy(&scratch).into_owned(),
            Err(_) => String::new(),
        }
    }

    /// A map key: an object key read as the key type (integers and doubles in decimal,
    /// bools as `true`/`false`, enums by number or name, binaries in base64).
    fn key(&mut self, ty: &Ty) -> Result<()> {
        if self.r.peek() != Some(b'"') {
            return Err(self.r.syntax("a string key"));
        }
        let start = self.r.pos();
        match ty {
            Ty::String => {
                let s = self.r.string(&mut self.scratch)?;
                let bytes = text(s, &self.scratch);
                self.w.binary(bytes);
            }
            Ty::Bool => {
                let s = self.r.string(&mut self.scratch)?;
                let v = match self.bytes(s) {
                    b"true" => true,
                    b"false" => false,
                    _ => {
                        return Err(TranscodeError::at(
                            ErrorKind::WrongType {
                                expected: "a key `true` or `false`",
                                found: "another string",
                            },
                            start,
                        ));
                    }
                };
                self.w.bool(v);
            }
            // Strings holding numbers, enum names, base64 and uuids: the value readers
            // take strings already.
            _ => self.value(ty)?,
        }
        Ok(())
    }
}

/// The bytes of a string read with `scratch` as its scratch buffer.
fn text<'s>(s: Str<'s>, scratch: &'s [u8]) -> &'s [u8] {
    match s {
        Str::Raw(b) => b,
        Str::Scratch => scratch,
    }
}

/// Whether a map key of this type has a JSON object-key form.
pub(crate) fn is_key_type(ty: &Ty) -> bool {
    !matches!(ty, Ty::Struct(_) | Ty::List(_) | Ty::Set(_) | Ty::Map(..))
}

/// `v` if it is within type `ty`, else an error at `start`.
#[inline]
fn in_range(v: i64, ty: &Ty, start: usize) -> Result<i64> {
    let (lo, hi) = match ty {
        Ty::I8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
        Ty::I16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
        Ty::I32 | Ty::Enum(_) => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    if v < lo || v > hi {
        return Err(TranscodeError::at(
            ErrorKind::OutOfRange { ty: ty_name(ty) },
            start,
        ));
    }
    Ok(v)
}

/// A decimal integer (optional `-`, digits, nothing else), within `i64`.
pub(crate) fn parse_int(text: &[u8]) -> std::result::Result<i64, ErrorKind> {
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ErrorKind::WrongType {
            expected: "an integer",
            found: if is_json_number(text) {
                "a number with a fraction or exponent"
            } else {
                "a string that is not an integer"
            },
        });
    }
    // One `Option` to the end: the error is built once, not made and dropped per digit.
    digits
        .iter()
        .try_fold(0i64, |v, &d| {
            let d = i64::from(d - b'0');
            v.checked_mul(10).and_then(|v| {
                if neg {
                    v.checked_sub(d)
                } else {
                    v.checked_add(d)
                }
            })
        })
        .ok_or(ErrorKind::OutOfRange { ty: "i64" })
}

/// Whether `text` is a number by JSON's grammar.
fn is_json_number(text: &[u8]) -> bool {
    let mut r = Reader::new(text);
    r.number().is_ok_and(|n| n.len() == text.len())
}

/// A double from text already checked against JSON's grammar.
fn parse_double(text: &[u8]) -> std::result::Result<f64, ErrorKind> {
    let v: f64 = std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ErrorKind::WrongType {
            expected: "a number",
            found: "something else",
        })?;
    if !v.is_finite() {
        return Err(ErrorKind::OutOfRange { ty: "double" });
    }
    Ok(v)
}

/// Writes a field whose value is an IDL literal (an absent field's default).
fn write_field_literal<W: Wire>(w: &mut W, desc: &Descriptor, id: i16, ty: &Ty, lit: &Literal) {
    if let (Ty::Bool, Literal::Bool(b)) = (ty, lit) {
        w.bool_field(id, *b);
        return;
    }
    w.field_begin(ty.ttype(), id);
    write_literal(w, desc, ty, lit);
}

/// Writes an IDL literal as a value of `ty` (the resolver checked it against the
/// type; a mismatch writes the type's zero value).
fn write_literal<W: Wire>(w: &mut W, desc: &Descriptor, ty: &Ty, lit: &Literal) {
    match (ty, lit) {
        (Ty::Bool, Literal::Bool(b)) => w.bool(*b),
        (Ty::I8, Literal::Int(n)) => w.i8(*n as i8),
        (Ty::I16, Literal::Int(n)) => w.i16(*n as i16),
        (Ty::I32 | Ty::Enum(_), Literal::Int(n)) => w.i32(*n as i32),
        (Ty::I64, Literal::Int(n)) => w.i64(*n),
        (Ty::Double, Literal::Double(d)) => w.double(*d),
        (Ty::Double, Literal::Int(n)) => w.double(*n as f64),
        (Ty::String | Ty::Binary, Literal::Str(s)) => w.binary(s.as_bytes()),
        (Ty::Uuid, Literal::Uuid(u)) => w.uuid(u),
        (Ty::List(elem) | Ty::Set(elem), Literal::List(items)) => {
            let et = elem.ttype();
            let start = w.list_begin(et);
            for item in items {
                write_literal(w, desc, elem, item);
            }
            w.list_end(start, et, items.len() as u32);
        }
        (Ty::Map(k, v), Literal::Map(entries)) => {
            let (kt, vt) = (k.ttype(), v.ttype());
            let start = w.map_begin(kt, vt);
            for (key, value) in entries {
                write_literal(w, desc, k, key);
                write_literal(w, desc, v, value);
            }
            w.map_end(start, kt, vt, entries.len() as u32);
        }
        (Ty::Struct(sid), Literal::Struct(_, fields)) => {
            let s = desc.struct_desc(*sid);
            let saved = w.struct_begin();
            for (id, value) in fields {
                if let Some(f) = s.field(*id) {
                    write_field_literal(w, desc, f.id, &f.ty, value);
                }
            }
            w.struct_end(saved);
        }
        (ty, _) => write_zero(w, ty),
    }
}

/// The zero value of `ty` (empty containers, an empty struct).
fn write_zero<W: Wire>(w: &mut W, ty: &Ty) {
    match ty {
        Ty::Bool => w.bool(false),
        Ty::I8 => w.i8(0),
        Ty::I16 => w.i16(0),
        Ty::I32 | Ty::Enum(_) => w.i32(0),
        Ty::I64 => w.i64(0),
        Ty::Double => w.double(0.0),
        Ty::String | Ty::Binary => w.binary(&[]),
        Ty::Uuid => w.uuid(&[0; 16]),
        Ty::List(elem) | Ty::Set(elem) => {
            let start = w.list_begin(elem.ttype());
            w.list_end(start, elem.ttype(), 0);
        }
        Ty::Map(k, v) => {
            let start = w.map_begin(k.ttype(), v.ttype());
            w.map_end(start, k.ttype(), v.ttype(), 0);
        }
        Ty::Struct(_) => {
            let saved = w.struct_begin();
            w.struct_end(saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_within_i64_and_refuse_fractions() {
        assert_eq!(parse_int(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775807"), Ok(i64::MAX));
        assert!(matches!(
            parse_int(b"9223372036854775808"),
            Err(ErrorKind::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_int(b"1.0"),
            Err(ErrorKind::WrongType { .. })
        ));
        assert!(matches!(parse_int(b"-"), Err(ErrorKind::WrongType { .. })));
        assert!(matches!(parse_int(b"+1"), Err(ErrorKind::WrongType { .. })));
    }

    proptest::proptest! {
        #[test]
        fn the_one_pass_integer_reads_as_the_grammar_then_the_parse(
            text in " ?-?[0-9]{0,21}([.eE][0-9]?)?[ ,]?",
        ) {
            let mut fast = Reader::new(text.as_bytes());
            let mut slow = Reader::new(text.as_bytes());
            let general = slow.number().map_err(drop).and_then(|n| parse_int(n).map_err(drop));
            match fast.small_int() {
                Some(v) => {
                    proptest::prop_assert_eq!(general, Ok(v));
                    proptest::prop_assert_eq!(fast.pos(), slow.pos());
                }
                // Left for the general reader: only leading spaces consumed.
                None => {
                    let mut spaces = Reader::new(text.as_bytes());
                    spaces.peek();
                    proptest::prop_assert_eq!(fast.pos(), spaces.pos());
                }
            }
        }
    }

    #[test]
    fn the_one_pass_integer_takes_the_i64_extremes_and_leaves_the_rest() {
        for (text, v) in [
            ("0", Some(0)),
            ("-0", Some(0)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("99999999999999999999", None),
            ("01", None),
            ("1.5", None),
            ("1e3", None),
            ("-", None),
        ] {
            assert_eq!(Reader::new(text.as_bytes()).small_int(), v, "{text}");
        }
    }
}
