//! `Wire`: how each Rust representation of a Thrift value is sized, written and read.
//!
//! Generated code calls these per field instead of spelling every container out, which
//! keeps it several times smaller (and so faster to generate and to compile) while
//! monomorphizing to the same machine code. Lists of `i32`, `i64` and `double` keep their
//! SIMD paths through the slice hooks, which those element types override.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::Hash;

use bytes::Bytes;

use crate::error::DecodeError;
use crate::protocol::{
    Decoder, Encoder, Sizer, read_f64_list, read_i32_list, read_i32_set, read_i64_list,
    read_i64_set, read_list, read_map, read_set,
};
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

/// A Rust type that stands for one Thrift type on the wire.
///
/// Implemented here for the base types, `Utf8Bytes`/`String` (string), `Bytes`/`Vec<u8>`
/// (binary), `[u8; 16]` (uuid), `Vec`/`BTreeSet`/`HashSet`/`BTreeMap`/`HashMap` of wire
/// types and `Box` of one; generated code implements it for its structs (through
/// [`impl_wire_for_message!`](crate::impl_wire_for_message)) and enums
/// ([`impl_wire_for_enum!`](crate::impl_wire_for_enum)).
pub trait Wire: Sized {
    /// The type id on the wire.
    const TTYPE: TType;

    /// Exact encoded size of the value.
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize;
    /// Writes the value.
    fn wire_write<E: Encoder>(&self, e: &mut E);
    /// Reads a value.
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError>;

    /// Size of a field holding the value: header and value (`bool` folds its value into
    /// the Compact header and overrides this).
    #[inline]
    fn field_size<S: Sizer>(&self, s: &mut S, id: i16) -> usize {
        s.field_begin_len(Self::TTYPE, id) + self.wire_size(s)
    }

    /// Writes a field holding the value: header and value.
    #[inline]
    fn field_write<E: Encoder>(&self, e: &mut E, id: i16) {
        e.write_field_begin(Self::TTYPE, id);
        self.wire_write(e);
    }

    /// Size of a list body of these values (overridden where a faster path exists).
    #[inline]
    fn slice_size<S: Sizer>(v: &[Self], s: &mut S) -> usize {
        match s.fixed_width(Self::TTYPE) {
            Some(width) => width * v.len(),
            None => v.iter().map(|x| x.wire_size(s)).sum(),
        }
    }

    /// Writes a list body of these values.
    #[inline]
    fn slice_write<E: Encoder>(v: &[Self], e: &mut E) {
        for x in v {
            x.wire_write(e);
        }
    }

    /// Reads a whole list of these values (header included).
    #[inline]
    fn vec_read<D: Decoder>(d: &mut D) -> Result<Vec<Self>, DecodeError> {
        read_list(d, Self::TTYPE, Self::wire_read)
    }

    /// Reads a whole set of these values (header included) into any collection.
    #[inline]
    fn set_read<D: Decoder, C: FromIterator<Self>>(d: &mut D) -> Result<C, DecodeError> {
        read_set(d, Self::TTYPE, Self::wire_read)
    }
}

/// Reads the value of field `field` of struct `ty`, adding the field to the error's path
/// if that fails: what generated `decode` calls for each field it knows.
#[inline]
pub fn read_field<T: Wire, D: Decoder>(
    d: &mut D,
    ty: &'static str,
    field: &'static str,
) -> Result<T, DecodeError> {
    T::wire_read(d).map_err(|e| e.push(ty, field))
}

/// The value of `required` field `field` of struct `ty` once the struct is read, or the
/// missing-field error.
#[inline]
pub fn required<T>(
    value: Option<T>,
    ty: &'static str,
    field: &'static str,
) -> Result<T, DecodeError> {
    value.ok_or_else(|| DecodeError::missing(ty, field))
}

macro_rules! scalar {
    ($t:ty, $tt:ident, $size:expr, $write:ident, $read:ident) => {
        impl Wire for $t {
            const TTYPE: TType = TType::$tt;
            #[inline]
            fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
                #[allow(clippy::redundant_closure_call)]
                ($size)(s, *self)
            }
            #[inline]
            fn wire_write<E: Encoder>(&self, e: &mut E) {
                e.$write(*self)
            }
            #[inline]
            fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
                d.$read()
            }
        }
    };
}

scalar!(i8, I8, |s: &mut S, v| s.i8_value_len(v), write_i8, read_i8);
scalar!(i16, I16, |s: &mut S, v| s.i16_len(v), write_i16, read_i16);

impl Wire for bool {
    const TTYPE: TType = TType::Bool;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.bool_len()
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_bool(*self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_bool()
    }
    #[inline]
    fn field_size<S: Sizer>(&self, s: &mut S, id: i16) -> usize {
        s.bool_field_len(id)
    }
    #[inline]
    fn field_write<E: Encoder>(&self, e: &mut E, id: i16) {
        e.write_bool_field(id, *self)
    }
}

/// The fixed-width numbers with SIMD list paths: their list bodies are sized, written
/// and read by the protocols' slice methods and the `read_*_list` helpers.
macro_rules! simd_scalar {
    ($t:ty, $tt:ident, $size:expr, $write:ident, $read:ident, $slice_len:ident, $write_slice:ident, $read_list:ident, $read_set:expr) => {
        impl Wire for $t {
            const TTYPE: TType = TType::$tt;
            #[inline]
            fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
                #[allow(clippy::redundant_closure_call)]
                ($size)(s, *self)
            }
            #[inline]
            fn wire_write<E: Encoder>(&self, e: &mut E) {
                e.$write(*self)
            }
            #[inline]
            fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
                d.$read()
            }
            #[inline]
            fn slice_size<S: Sizer>(v: &[Self], s: &mut S) -> usize {
                s.$slice_len(v)
            }
            #[inline]
            fn slice_write<E: Encoder>(v: &[Self], e: &mut E) {
                e.$write_slice(v)
            }
            #[inline]
            fn vec_read<D: Decoder>(d: &mut D) -> Result<Vec<Self>, DecodeError> {
                $read_list(d)
            }
            #[inline]
            fn set_read<D: Decoder, C: FromIterator<Self>>(d: &mut D) -> Result<C, DecodeError> {
                $read_set(d)
            }
        }
    };
}

simd_scalar!(
    i32,
    I32,
    |s: &mut S, v| s.i32_len(v),
    write_i32,
    read_i32,
    i32_slice_len,
    write_i32_slice,
    read_i32_list,
    read_i32_set
);
simd_scalar!(
    i64,
    I64,
    |s: &mut S, v| s.i64_len(v),
    write_i64,
    read_i64,
    i64_slice_len,
    write_i64_slice,
    read_i64_list,
    read_i64_set
);
simd_scalar!(
    f64,
    Double,
    |s: &mut S, v| s.double_value_len(v),
    write_double,
    read_double,
    f64_slice_len,
    write_f64_slice,
    read_f64_list,
    |d: &mut D| read_set(d, TType::Double, D::read_double)
);

impl Wire for [u8; 16] {
    const TTYPE: TType = TType::Uuid;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.uuid_len()
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_uuid(self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_uuid()
    }
}

impl Wire for Utf8Bytes {
    const TTYPE: TType = TType::Binary;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.string_value_len(self)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_string(self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_string()
    }
}

impl Wire for String {
    const TTYPE: TType = TType::Binary;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.str_value_len(self)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_str(self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_string().map(|s| String::from(s.as_str()))
    }
}

impl Wire for Bytes {
    const TTYPE: TType = TType::Binary;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.bytes_value_len(self)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_bytes(self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_bytes()
    }
}

/// `binary` as an owned vector (a list of bytes would be `Vec<i8>`).
impl Wire for Vec<u8> {
    const TTYPE: TType = TType::Binary;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.binary_value_len(self)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_binary(self)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_bytes().map(|b| b.to_vec())
    }
}

/// `list<T>`.
pub trait ListElement: Wire {}

impl<T: Wire + ListElement> Wire for Vec<T> {
    const TTYPE: TType = TType::List;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        s.list_begin_len(T::TTYPE, self.len()) + T::slice_size(self, s)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        e.write_list_begin(T::TTYPE, self.len());
        T::slice_write(self, e);
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        T::vec_read(d)
    }
}

impl<T: Wire> Wire for Box<T> {
    const TTYPE: TType = T::TTYPE;
    #[inline]
    fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
        (**self).wire_size(s)
    }
    #[inline]
    fn wire_write<E: Encoder>(&self, e: &mut E) {
        (**self).wire_write(e)
    }
    #[inline]
    fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        T::wire_read(d).map(Box::new)
    }
    #[inline]
    fn field_size<S: Sizer>(&self, s: &mut S, id: i16) -> usize {
        (**self).field_size(s, id)
    }
    #[inline]
    fn field_write<E: Encoder>(&self, e: &mut E, id: i16) {
        (**self).field_write(e, id)
    }
}

fn set_size<'a, S: Sizer, T: Wire + 'a>(
    s: &mut S,
    len: usize,
    items: impl Iterator<Item = &'a T>,
) -> usize {
    s.list_begin_len(T::TTYPE, len)
        + match s.fixed_width(T::TTYPE) {
            Some(width) => width * len,
            None => items.map(|x| x.wire_size(s)).sum(),
        }
}

fn map_size<'a, S: Sizer, K: Wire + 'a, V: Wire + 'a>(
    s: &mut S,
    len: usize,
    entries: impl Iterator<Item = (&'a K, &'a V)>,
) -> usize {
    s.map_begin_len(K::TTYPE, V::TTYPE, len)
        + match (s.fixed_width(K::TTYPE), s.fixed_width(V::TTYPE)) {
            (Some(k), Some(v)) => (k + v) * len,
            _ => entries.map(|(k, v)| k.wire_size(s) + v.wire_size(s)).sum(),
        }
}

macro_rules! set_impl {
    ($set:ident, $($bound:path),+) => {
        impl<T: Wire $(+ $bound)+> Wire for $set<T> {
            const TTYPE: TType = TType::Set;
            #[inline]
            fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
                set_size(s, self.len(), self.iter())
            }
            #[inline]
            fn wire_write<E: Encoder>(&self, e: &mut E) {
                e.write_list_begin(T::TTYPE, self.len());
                for x in self {
                    x.wire_write(e);
                }
            }
            #[inline]
            fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
                T::set_read(d)
            }
        }
    };
}

set_impl!(BTreeSet, Ord);
set_impl!(HashSet, Hash, Eq);

macro_rules! map_impl {
    ($map:ident, $($bound:path),+) => {
        impl<K: Wire $(+ $bound)+, V: Wire> Wire for $map<K, V> {
            const TTYPE: TType = TType::Map;
            #[inline]
            fn wire_size<S: Sizer>(&self, s: &mut S) -> usize {
                map_size(s, self.len(), self.iter())
            }
            #[inline]
            fn wire_write<E: Encoder>(&self, e: &mut E) {
                e.write_map_begin(K::TTYPE, V::TTYPE, self.len());
                for (k, v) in self {
                    k.wire_write(e);
                    v.wire_write(e);
                }
            }
            #[inline]
            fn wire_read<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
                read_map(d, K::TTYPE, V::TTYPE, K::wire_read, V::wire_read)
            }
        }
    };
}

map_impl!(BTreeMap, Ord);
map_impl!(HashMap, Hash, Eq);

// Every wire type but `u8` (which only exists inside `Vec<u8>`, binary) can be a list
// element.
macro_rules! list_elements {
    ($($t:ty),*) => { $(impl ListElement for $t {})* };
}
list_elements!(
    bool, i8, i16, i32, i64, f64, [u8; 16], Utf8Bytes, String, Bytes
);
impl<T: Wire + ListElement> ListElement for Vec<T> {}
impl ListElement for Vec<u8> {}
impl<T: Wire> ListElement for Box<T> {}
impl<T: Wire + Ord> ListElement for BTreeSet<T> {}
impl<T: Wire + Hash + Eq> ListElement for HashSet<T> {}
impl<K: Wire + Ord, V: Wire> ListElement for BTreeMap<K, V> {}
impl<K: Wire + Hash + Eq, V: Wire> ListElement for HashMap<K, V> {}

/// Implements [`Wire`] (and [`ListElement`]) for a [`Message`](crate::Message) type: a struct, union or
/// exception on the wire. Generated code invokes it once per struct type.
#[macro_export]
macro_rules! impl_wire_for_message {
    ($t:ty) => {
        impl $crate::wire::Wire for $t {
            const TTYPE: $crate::TType = $crate::TType::Struct;
            #[inline]
            fn wire_size<S: $crate::Sizer>(&self, s: &mut S) -> usize {
                $crate::Message::size(self, s)
            }
            #[inline]
            fn wire_write<E: $crate::Encoder>(&self, e: &mut E) {
                $crate::Message::encode(self, e)
            }
            #[inline]
            fn wire_read<D: $crate::Decoder>(
                d: &mut D,
            ) -> ::std::result::Result<Self, $crate::DecodeError> {
                <$t as $crate::Message>::decode(d)
            }
        }
        impl $crate::wire::ListElement for $t {}
    };
}

/// Implements [`Wire`] (and [`ListElement`]) for an enum: an `i32` newtype
/// (`struct E(pub i32)`) on the wire.
#[macro_export]
macro_rules! impl_wire_for_enum {
    ($t:ident) => {
        impl $crate::wire::Wire for $t {
            const TTYPE: $crate::TType = $crate::TType::I32;
            #[inline]
            fn wire_size<S: $crate::Sizer>(&self, s: &mut S) -> usize {
                s.i32_len(self.0)
            }
            #[inline]
            fn wire_write<E: $crate::Encoder>(&self, e: &mut E) {
                e.write_i32(self.0)
            }
            #[inline]
            fn wire_read<D: $crate::Decoder>(
                d: &mut D,
            ) -> ::std::result::Result<Self, $crate::DecodeError> {
                d.read_i32().map($t)
            }
        }
        impl $crate::wire::ListElement for $t {}
    };
}
