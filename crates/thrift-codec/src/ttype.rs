//! Thrift type identifiers.

use crate::error::{DecodeError, DecodeErrorKind};

/// The type of a Thrift value, as it appears in field and container headers.
///
/// The discriminants are the Binary protocol's type ids; the Compact protocol maps
/// them to its own nibbles internally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TType {
    /// The end of a struct's fields. Never a value type.
    Stop = 0,
    /// No value. Only valid as the return type of a function, never on the wire as a
    /// value; a container of `Void` is rejected on decode.
    Void = 1,
    /// `bool`.
    Bool = 2,
    /// `byte` / `i8`.
    I8 = 3,
    /// `double`.
    Double = 4,
    /// `i16`.
    I16 = 6,
    /// `i32` (also enums).
    I32 = 8,
    /// `i64`.
    I64 = 10,
    /// `string` and `binary`.
    Binary = 11,
    /// `struct`, `union`, `exception`.
    Struct = 12,
    /// `map`.
    Map = 13,
    /// `set`.
    Set = 14,
    /// `list`.
    List = 15,
    /// `uuid` (16 bytes).
    Uuid = 16,
}

impl TType {
    /// Maps a Binary protocol type id to a type; unknown ids are an error.
    #[inline]
    pub fn from_binary_id(id: u8) -> Result<TType, DecodeError> {
        Ok(match id {
            0 => TType::Stop,
            1 => TType::Void,
            2 => TType::Bool,
            3 => TType::I8,
            4 => TType::Double,
            6 => TType::I16,
            8 => TType::I32,
            10 => TType::I64,
            11 => TType::Binary,
            12 => TType::Struct,
            13 => TType::Map,
            14 => TType::Set,
            15 => TType::List,
            16 => TType::Uuid,
            other => return Err(DecodeError::new(DecodeErrorKind::InvalidType(other))),
        })
    }

    /// Whether values of this type can be stored in a container or a field. `Stop` and
    /// `Void` occupy no bytes on the wire, so a container "holding" them would let a
    /// tiny input claim billions of elements; they are rejected.
    #[inline]
    pub fn is_value(self) -> bool {
        !matches!(self, TType::Stop | TType::Void)
    }
}
