//! The Compact protocol's type ids and field headers.
//!
//! A field header is one byte when the field id follows the last one written in the
//! same struct by 1 to 15 (the delta in the high nibble, the type id in the low);
//! otherwise it is the type id byte and then the id, zigzag and varint. A `bool`
//! field's value is folded into its type id ([`CT_TRUE`], [`CT_FALSE`]).

use super::varint::{MAX_VARINT32_LEN, encode_varint, zigzag32};
use crate::ttype::TType;

/// The type id that ends a struct's fields.
pub const CT_STOP: u8 = 0;
/// The type id of a `bool` field holding `true`, and of `bool` elements.
pub const CT_TRUE: u8 = 1;
/// The type id of a `bool` field holding `false`.
pub const CT_FALSE: u8 = 2;

/// The Compact type id of `ty` (bool as [`CT_TRUE`], as in containers): what a field or
/// container header carries.
#[inline]
pub fn compact_type(ty: TType) -> u8 {
    match ty {
        TType::Stop => CT_STOP,
        // `Void` never reaches the wire; encode it as stop so the reader rejects it.
        TType::Void => CT_STOP,
        TType::Bool => CT_TRUE,
        TType::I8 => 3,
        TType::I16 => 4,
        TType::I32 => 5,
        TType::I64 => 6,
        TType::Double => 7,
        TType::Binary => 8,
        TType::List => 9,
        TType::Set => 10,
        TType::Map => 11,
        TType::Struct => 12,
        TType::Uuid => 13,
    }
}

/// The type a Compact type id stands for (either bool id is `Bool`), `None` for an id
/// that is no type: the inverse of [`compact_type`].
#[inline]
pub fn ttype_of_compact(nibble: u8) -> Option<TType> {
    Some(match nibble {
        CT_STOP => TType::Stop,
        CT_TRUE | CT_FALSE => TType::Bool,
        3 => TType::I8,
        4 => TType::I16,
        5 => TType::I32,
        6 => TType::I64,
        7 => TType::Double,
        8 => TType::Binary,
        9 => TType::List,
        10 => TType::Set,
        11 => TType::Map,
        12 => TType::Struct,
        13 => TType::Uuid,
        _ => return None,
    })
}

/// The type id of a `bool` field holding `v`.
#[inline]
pub fn bool_type(v: bool) -> u8 {
    if v { CT_TRUE } else { CT_FALSE }
}

/// The id delta that fits a field header's high nibble, if `id` follows `last` by 1..=15.
#[inline]
pub fn field_delta(last: i16, id: i16) -> Option<u8> {
    let delta = i32::from(id) - i32::from(last);
    (1..=15).contains(&delta).then_some(delta as u8)
}

/// The most bytes a field header takes: the type byte and an `i16` id's varint.
pub const MAX_FIELD_HEADER_LEN: usize = 1 + MAX_VARINT32_LEN;

/// The header of a field of type id `ctype` and id `id`, after the field `last` of the
/// same struct (0 for the first): its bytes at the start of `buf`, and how many.
#[inline]
pub fn encode_field_header(
    ctype: u8,
    last: i16,
    id: i16,
    buf: &mut [u8; MAX_FIELD_HEADER_LEN],
) -> usize {
    if let Some(delta) = field_delta(last, id) {
        buf[0] = (delta << 4) | ctype;
        return 1;
    }
    buf[0] = ctype;
    let mut varint = [0u8; super::MAX_VARINT_LEN];
    // An `i16` zigzags into 16 bits: three varint bytes at most.
    let n = encode_varint(u64::from(zigzag32(i32::from(id))), &mut varint).min(MAX_VARINT32_LEN);
    buf[1..1 + n].copy_from_slice(&varint[..n]);
    1 + n
}

/// Appends the header of a field (see [`encode_field_header`]) to `out`.
#[inline]
pub fn put_field_header(out: &mut Vec<u8>, ctype: u8, last: i16, id: i16) {
    let mut buf = [0u8; MAX_FIELD_HEADER_LEN];
    let n = encode_field_header(ctype, last, id, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

/// Bytes of the header of a field whose id follows `last`.
#[inline]
pub fn field_header_len(last: i16, id: i16) -> usize {
    if field_delta(last, id).is_some() {
        1
    } else {
        1 + super::varint_len(u64::from(zigzag32(i32::from(id))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(miri))]
    use crate::encoding::{MAX_VARINT_LEN, decode_varint, unzigzag32};
    #[cfg(not(miri))]
    use proptest::prelude::*;

    #[test]
    fn every_type_id_maps_back_to_its_type() {
        for id in 0..=255u8 {
            if let Some(ty) = ttype_of_compact(id) {
                let back = compact_type(ty);
                assert!(back == id || (id == CT_FALSE && back == CT_TRUE), "{id}");
            }
        }
        assert_eq!(ttype_of_compact(14), None);
        assert_eq!(bool_type(false), CT_FALSE);
    }

    // Not under Miri, where the plain tests run: proptest needs the file system (its
    // failure records) and hundreds of cases, and this code has no unsafe.
    #[cfg(not(miri))]
    proptest! {
        #[test]
        fn a_field_header_reads_back_as_its_type_and_id(last in any::<i16>(), id in any::<i16>(), ctype in 1u8..=13) {
            let mut out = Vec::new();
            put_field_header(&mut out, ctype, last, id);
            prop_assert_eq!(out.len(), field_header_len(last, id));
            prop_assert_eq!(out[0] & 0x0f, ctype);
            let delta = out[0] >> 4;
            let read = if delta == 0 {
                let (v, n) = decode_varint(&out[1..], MAX_VARINT_LEN).unwrap();
                prop_assert_eq!(1 + n, out.len());
                unzigzag32(v as u32) as i16
            } else {
                prop_assert_eq!(out.len(), 1);
                (i32::from(last) + i32::from(delta)) as i16
            };
            prop_assert_eq!(read, id);
        }
    }
}
