//! Values of any IDL type, held by field id, written and read against a
//! [`Descriptor`]: for code that builds calls while it runs (a test platform, a
//! replay tool) rather than from generated types.
//!
//! - [`encode_struct`] checks a [`StructValue`] against its struct's description
//!   (every field known and of its type, the required ones present, a union with one
//!   field) and encodes it in any protocol, fields in IDL order, as generated code
//!   writes them: the bytes equal those of the generated type holding the same values.
//! - [`decode_struct`] reads a struct's bytes into a [`StructValue`]: fields the
//!   description does not have, or whose wire type differs from it, are skipped (as
//!   generated code skips them); a required field that is missing is an error.
//!
//! Enums are their `i32`; strings are [`Utf8Bytes`] (checked UTF-8) and binaries
//! [`Bytes`], both slices of the input when decoded.

use bytes::Bytes;
use thrift_wire::{
    Codec, DecodeError, Decoder, Encoder, LinkBuffer, Protocol, Sizer, TType, Utf8Bytes,
};

use crate::descriptor::{Descriptor, Kind, Requiredness, StructDesc, StructId, Ty};

/// Deepest nesting of structs and containers a value may have, as thrift-wire's
/// decoder allows by default.
pub const MAX_DEPTH: usize = 64;

/// A value of some IDL type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `byte` / `i8`.
    I8(i8),
    /// `i16`.
    I16(i16),
    /// `i32`, and enums.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `double`.
    Double(f64),
    /// `string`.
    String(Utf8Bytes),
    /// `binary`.
    Binary(Bytes),
    /// `uuid`.
    Uuid([u8; 16]),
    /// `list<T>`.
    List(Vec<Value>),
    /// `set<T>`, elements in the order they are written or were read.
    Set(Vec<Value>),
    /// `map<K, V>`, entries in the order they are written or were read.
    Map(Vec<(Value, Value)>),
    /// A struct, union or exception.
    Struct(StructValue),
}

/// A struct's fields by id, in any order (written in IDL order).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StructValue {
    /// `(field id, value)`.
    pub fields: Vec<(i16, Value)>,
}

impl StructValue {
    /// No fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets field `id` (replacing it if set).
    pub fn set(&mut self, id: i16, value: Value) -> &mut Self {
        match self.fields.iter_mut().find(|(i, _)| *i == id) {
            Some((_, v)) => *v = value,
            None => self.fields.push((id, value)),
        }
        self
    }

    /// With field `id` set.
    pub fn with(mut self, id: i16, value: Value) -> Self {
        self.set(id, value);
        self
    }

    /// Field `id`, if set.
    pub fn get(&self, id: i16) -> Option<&Value> {
        self.fields.iter().find(|(i, _)| *i == id).map(|(_, v)| v)
    }
}

/// Why a value does not fit its type, or bytes do not read as one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// A field id its struct does not have.
    #[error("{path}: {ty} has no field {id}")]
    UnknownField {
        /// Where, as `Struct.field[3].other`.
        path: String,
        /// The struct.
        ty: String,
        /// The id.
        id: i16,
    },
    /// A value of another type than its place's.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        /// Where.
        path: String,
        /// The type the description gives.
        expected: String,
        /// What the value is.
        found: &'static str,
    },
    /// A required field left unset.
    #[error("{path}: the required field {field} is missing")]
    MissingRequired {
        /// The struct's place.
        path: String,
        /// The field's name.
        field: String,
    },
    /// A union with no field set, or more than one.
    #[error("{path}: a union has exactly one field set, this one {set}")]
    Union {
        /// Where.
        path: String,
        /// How many are.
        set: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("{path}: nested deeper than {MAX_DEPTH}")]
    TooDeep {
        /// Where.
        path: String,
    },
    /// The bytes do not decode.
    #[error("decoding: {0}")]
    Decode(#[from] DecodeError),
}

/// Checks `value` against the struct `ty` of `desc` and encodes it in protocol `P`.
pub fn encode_struct<P: Protocol>(
    desc: &Descriptor,
    ty: StructId,
    value: &StructValue,
) -> Result<Bytes, ValueError> {
    let root = desc.struct_desc(ty);
    check_struct(desc, root, value, &mut Path::new(&root.name), 0)?;
    let codec = Codec::<P>::new();
    let mut sizer = codec.sizer();
    let len = size_struct(&mut sizer, desc, root, value);
    let mut buf = LinkBuffer::new();
    buf.reserve(len - sizer.zero_copy_len());
    write_struct(&mut codec.encoder(&mut buf), desc, root, value);
    Ok(buf.next(len))
}

/// A struct value checked against its description, ready to be sized and written in
/// whichever protocol the moment needs (a client's stack picks it when it sends):
/// what a generic call carries as its arguments.
#[derive(Debug, Clone)]
pub struct Checked {
    desc: Descriptor,
    ty: StructId,
    value: StructValue,
}

impl Checked {
    /// Checks `value` against the struct `ty` of `desc`.
    pub fn new(desc: &Descriptor, ty: StructId, value: StructValue) -> Result<Self, ValueError> {
        let root = desc.struct_desc(ty);
        check_struct(desc, root, &value, &mut Path::new(&root.name), 0)?;
        Ok(Checked {
            desc: desc.clone(),
            ty,
            value,
        })
    }

    /// Its encoded size, counted by `s` (the protocol's sizer).
    pub fn size<S: Sizer>(&self, s: &mut S) -> usize {
        size_struct(s, &self.desc, self.desc.struct_desc(self.ty), &self.value)
    }

    /// Writes it with `e` (the protocol's encoder, after a reservation of
    /// [`size`](Self::size)).
    pub fn encode<E: Encoder>(&self, e: &mut E) {
        write_struct(e, &self.desc, self.desc.struct_desc(self.ty), &self.value)
    }
}

/// Reads the bytes of one struct `ty` of `desc`, in protocol `P`, into a value.
/// Bytes after the struct are left alone.
pub fn decode_struct<P: Protocol>(
    desc: &Descriptor,
    ty: StructId,
    bytes: Bytes,
) -> Result<StructValue, ValueError> {
    let mut d = Codec::<P>::new().decoder(bytes)?;
    let root = desc.struct_desc(ty);
    read_struct(&mut d, desc, root, &mut Path::new(&root.name))
}

/// A place in a value, for errors: built as the walk goes, only read when one fails.
struct Path {
    parts: Vec<String>,
}

impl Path {
    fn new(root: &str) -> Self {
        Path {
            parts: vec![root.to_string()],
        }
    }

    fn text(&self) -> String {
        self.parts.concat()
    }

    fn within<T>(&mut self, part: String, f: impl FnOnce(&mut Self) -> T) -> T {
        self.parts.push(part);
        let out = f(self);
        self.parts.pop();
        out
    }
}

fn type_name(desc: &Descriptor, ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::I8 => "i8".into(),
        Ty::I16 => "i16".into(),
        Ty::I32 => "i32".into(),
        Ty::I64 => "i64".into(),
        Ty::Double => "double".into(),
        Ty::String => "string".into(),
        Ty::Binary => "binary".into(),
        Ty::Uuid => "uuid".into(),
        Ty::List(t) => format!("list<{}>", type_name(desc, t)),
        Ty::Set(t) => format!("set<{}>", type_name(desc, t)),
        Ty::Map(k, v) => format!("map<{}, {}>", type_name(desc, k), type_name(desc, v)),
        Ty::Struct(id) => desc.struct_desc(*id).name.clone(),
        Ty::Enum(id) => desc.enum_desc(*id).name.clone(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "a bool",
        Value::I8(_) => "an i8",
        Value::I16(_) => "an i16",
        Value::I32(_) => "an i32",
        Value::I64(_) => "an i64",
        Value::Double(_) => "a double",
        Value::String(_) => "a string",
        Value::Binary(_) => "a binary",
        Value::Uuid(_) => "a uuid",
        Value::List(_) => "a list",
        Value::Set(_) => "a set",
        Value::Map(_) => "a map",
        Value::Struct(_) => "a struct",
    }
}

fn check_struct(
    desc: &Descriptor,
    s: &StructDesc,
    v: &StructValue,
    path: &mut Path,
    depth: usize,
) -> Result<(), ValueError> {
    if depth >= MAX_DEPTH {
        return Err(ValueError::TooDeep { path: path.text() });
    }
    for (id, value) in &v.fields {
        let Some(f) = s.field(*id) else {
            return Err(ValueError::UnknownField {
                path: path.text(),
                ty: s.name.clone(),
                id: *id,
            });
        };
        path.within(format!(".{}", f.name), |path| {
            check_value(desc, &f.ty, value, path, depth + 1)
        })?;
    }
    if s.kind == Kind::Union && v.fields.len() != 1 {
        return Err(ValueError::Union {
            path: path.text(),
            set: v.fields.len(),
        });
    }
    for f in &s.fields {
        if f.req == Requiredness::Required && v.get(f.id).is_none() {
            return Err(ValueError::MissingRequired {
                path: path.text(),
                field: f.name.clone(),
            });
        }
    }
    Ok(())
}

fn check_value(
    desc: &Descriptor,
    ty: &Ty,
    v: &Value,
    path: &mut Path,
    depth: usize,
) -> Result<(), ValueError> {
    let fits = match (ty, v) {
        (Ty::Bool, Value::Bool(_))
        | (Ty::I8, Value::I8(_))
        | (Ty::I16, Value::I16(_))
        | (Ty::I32 | Ty::Enum(_), Value::I32(_))
        | (Ty::I64, Value::I64(_))
        | (Ty::Double, Value::Double(_))
        | (Ty::String, Value::String(_))
        | (Ty::Binary, Value::Binary(_))
        | (Ty::Uuid, Value::Uuid(_)) => true,
        (Ty::List(t), Value::List(items)) | (Ty::Set(t), Value::Set(items)) => {
            if depth >= MAX_DEPTH {
                return Err(ValueError::TooDeep { path: path.text() });
            }
            for (i, item) in items.iter().enumerate() {
                path.within(format!("[{i}]"), |path| {
                    check_value(desc, t, item, path, depth + 1)
                })?;
            }
            true
        }
        (Ty::Map(kt, vt), Value::Map(entries)) => {
            if depth >= MAX_DEPTH {
                return Err(ValueError::TooDeep { path: path.text() });
            }
            for (i, (k, item)) in entries.iter().enumerate() {
                path.within(format!("{{key {i}}}"), |path| {
                    check_value(desc, kt, k, path, depth + 1)
                })?;
                path.within(format!("{{value {i}}}"), |path| {
                    check_value(desc, vt, item, path, depth + 1)
                })?;
            }
            true
        }
        (Ty::Struct(id), Value::Struct(s)) => {
            check_struct(desc, desc.struct_desc(*id), s, path, depth)?;
            true
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(ValueError::WrongType {
            path: path.text(),
            expected: type_name(desc, ty),
            found: kind_of(v),
        })
    }
}

/// The fields of `v` that `s` has, in IDL order (checked values have no others).
fn in_order<'v>(
    s: &'v StructDesc,
    v: &'v StructValue,
) -> impl Iterator<Item = (&'v Ty, i16, &'v Value)> {
    s.fields
        .iter()
        .filter_map(move |f| v.get(f.id).map(|value| (&f.ty, f.id, value)))
}

fn size_struct<S: Sizer>(s: &mut S, desc: &Descriptor, sd: &StructDesc, v: &StructValue) -> usize {
    let saved = s.struct_begin();
    let mut len = 0;
    for (ty, id, value) in in_order(sd, v) {
        len += match value {
            Value::Bool(_) => s.bool_field_len(id),
            _ => s.field_begin_len(ty.ttype(), id) + size_value(s, desc, ty, value),
        };
    }
    len + s.struct_end_len(saved)
}

fn size_value<S: Sizer>(s: &mut S, desc: &Descriptor, ty: &Ty, v: &Value) -> usize {
    match (ty, v) {
        (_, Value::Bool(_)) => s.bool_len(),
        (_, Value::I8(n)) => s.i8_value_len(*n),
        (_, Value::I16(n)) => s.i16_len(*n),
        (_, Value::I32(n)) => s.i32_len(*n),
        (_, Value::I64(n)) => s.i64_len(*n),
        (_, Value::Double(d)) => s.double_value_len(*d),
        (_, Value::String(t)) => s.string_value_len(t),
        (_, Value::Binary(b)) => s.bytes_value_len(b),
        (_, Value::Uuid(_)) => s.uuid_len(),
        (Ty::List(t) | Ty::Set(t), Value::List(items) | Value::Set(items)) => {
            s.list_begin_len(t.ttype(), items.len())
                + items
                    .iter()
                    .map(|item| size_value(s, desc, t, item))
                    .sum::<usize>()
        }
        (Ty::Map(kt, vt), Value::Map(entries)) => {
            s.map_begin_len(kt.ttype(), vt.ttype(), entries.len())
                + entries
                    .iter()
                    .map(|(k, item)| size_value(s, desc, kt, k) + size_value(s, desc, vt, item))
                    .sum::<usize>()
        }
        (Ty::Struct(id), Value::Struct(sv)) => size_struct(s, desc, desc.struct_desc(*id), sv),
        // Checked before sizing: no other pair reaches here.
        _ => 0,
    }
}

fn write_struct<E: Encoder>(e: &mut E, desc: &Descriptor, sd: &StructDesc, v: &StructValue) {
    let saved = e.write_struct_begin();
    for (ty, id, value) in in_order(sd, v) {
        match value {
            Value::Bool(b) => e.write_bool_field(id, *b),
            _ => {
                e.write_field_begin(ty.ttype(), id);
                write_value(e, desc, ty, value);
            }
        }
    }
    e.write_struct_end(saved);
}

fn write_value<E: Encoder>(e: &mut E, desc: &Descriptor, ty: &Ty, v: &Value) {
    match (ty, v) {
        (_, Value::Bool(b)) => e.write_bool(*b),
        (_, Value::I8(n)) => e.write_i8(*n),
        (_, Value::I16(n)) => e.write_i16(*n),
        (_, Value::I32(n)) => e.write_i32(*n),
        (_, Value::I64(n)) => e.write_i64(*n),
        (_, Value::Double(d)) => e.write_double(*d),
        (_, Value::String(t)) => e.write_string(t),
        (_, Value::Binary(b)) => e.write_bytes(b),
        (_, Value::Uuid(u)) => e.write_uuid(u),
        (Ty::List(t) | Ty::Set(t), Value::List(items) | Value::Set(items)) => {
            e.write_list_begin(t.ttype(), items.len());
            for item in items {
                write_value(e, desc, t, item);
            }
        }
        (Ty::Map(kt, vt), Value::Map(entries)) => {
            e.write_map_begin(kt.ttype(), vt.ttype(), entries.len());
            for (k, item) in entries {
                write_value(e, desc, kt, k);
                write_value(e, desc, vt, item);
            }
        }
        (Ty::Struct(id), Value::Struct(sv)) => write_struct(e, desc, desc.struct_desc(*id), sv),
        // Checked before writing: no other pair reaches here.
        _ => {}
    }
}

fn read_struct<D: Decoder>(
    d: &mut D,
    desc: &Descriptor,
    sd: &StructDesc,
    path: &mut Path,
) -> Result<StructValue, ValueError> {
    let saved = d.read_struct_begin()?;
    let mut out = StructValue::new();
    loop {
        let h = d.read_field_begin()?;
        if h.ty == TType::Stop {
            break;
        }
        match sd.field(h.id) {
            Some(f) if f.ty.ttype() == h.ty => {
                let value = path.within(format!(".{}", f.name), |path| {
                    read_value(d, desc, &f.ty, path)
                })?;
                out.set(h.id, value);
            }
            // Unknown, or not of the described type: skipped, as generated code does.
            _ => d.skip(h.ty)?,
        }
    }
    d.read_struct_end(saved);
    for f in &sd.fields {
        if f.req == Requiredness::Required && out.get(f.id).is_none() {
            return Err(ValueError::MissingRequired {
                path: path.text(),
                field: f.name.clone(),
            });
        }
    }
    Ok(out)
}

fn read_value<D: Decoder>(
    d: &mut D,
    desc: &Descriptor,
    ty: &Ty,
    path: &mut Path,
) -> Result<Value, ValueError> {
    Ok(match ty {
        Ty::Bool => Value::Bool(d.read_bool()?),
        Ty::I8 => Value::I8(d.read_i8()?),
        Ty::I16 => Value::I16(d.read_i16()?),
        Ty::I32 | Ty::Enum(_) => Value::I32(d.read_i32()?),
        Ty::I64 => Value::I64(d.read_i64()?),
        Ty::Double => Value::Double(d.read_double()?),
        Ty::String => Value::String(d.read_string()?),
        Ty::Binary => Value::Binary(d.read_bytes()?),
        Ty::Uuid => Value::Uuid(d.read_uuid()?),
        Ty::List(t) | Ty::Set(t) => {
            let h = match ty {
                Ty::Set(_) => d.read_set_begin()?,
                _ => d.read_list_begin()?,
            };
            if h.len > 0 && h.elem != t.ttype() {
                return Err(wrong_wire(desc, ty, path));
            }
            // The count was checked against the bytes left: growth is bounded by them.
            let mut items = Vec::with_capacity(h.len.min(1024));
            for i in 0..h.len {
                items.push(path.within(format!("[{i}]"), |path| read_value(d, desc, t, path))?);
            }
            d.read_container_end();
            match ty {
                Ty::Set(_) => Value::Set(items),
                _ => Value::List(items),
            }
        }
        Ty::Map(kt, vt) => {
            let h = d.read_map_begin()?;
            if h.len > 0 && (h.key != kt.ttype() || h.value != vt.ttype()) {
                return Err(wrong_wire(desc, ty, path));
            }
            let mut entries = Vec::with_capacity(h.len.min(1024));
            for i in 0..h.len {
                let k =
                    path.within(format!("{{key {i}}}"), |path| read_value(d, desc, kt, path))?;
                let v = path.within(format!("{{value {i}}}"), |path| {
                    read_value(d, desc, vt, path)
                })?;
                entries.push((k, v));
            }
            d.read_container_end();
            Value::Map(entries)
        }
        Ty::Struct(id) => Value::Struct(read_struct(d, desc, desc.struct_desc(*id), path)?),
    })
}

fn wrong_wire(desc: &Descriptor, ty: &Ty, path: &Path) -> ValueError {
    ValueError::WrongType {
        path: path.text(),
        expected: type_name(desc, ty),
        found: "elements of another wire type",
    }
}
