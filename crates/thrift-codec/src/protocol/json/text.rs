//! The pieces of text the JSON protocol is made of: type names, numbers, string escapes,
//! base64 and UUIDs. Pure functions, shared by the writer and the reader.

use crate::ttype::TType;

// ---------------------------------------------------------------------------------------
// Type names

/// The name of `ty` in field, list and map headers.
pub(super) fn type_name(ty: TType) -> &'static [u8] {
    match ty {
        TType::Bool => b"tf",
        TType::I8 => b"i8",
        TType::I16 => b"i16",
        TType::I32 => b"i32",
        TType::I64 => b"i64",
        TType::Double => b"dbl",
        TType::Binary => b"str",
        TType::Struct => b"rec",
        TType::Map => b"map",
        TType::Set => b"set",
        TType::List => b"lst",
        TType::Uuid => b"uid",
        // No value has these types; a writer asked for them writes a name no reader
        // accepts rather than fail (encoding cannot fail).
        TType::Stop => b"stop",
        TType::Void => b"void",
    }
}

/// The type a header names; `None` for anything but the twelve names.
pub(super) fn type_of_name(name: &[u8]) -> Option<TType> {
    Some(match name {
        b"tf" => TType::Bool,
        b"i8" => TType::I8,
        b"i16" => TType::I16,
        b"i32" => TType::I32,
        b"i64" => TType::I64,
        b"dbl" => TType::Double,
        b"str" => TType::Binary,
        b"rec" => TType::Struct,
        b"map" => TType::Map,
        b"set" => TType::Set,
        b"lst" => TType::List,
        b"uid" => TType::Uuid,
        _ => return None,
    })
}

/// The fewest bytes a value of `ty` takes: `0` for a number, `""` for a string, `{}` for
/// a struct, `["tf",0]` for a list, `["tf","tf",0,{}]` for a map, 38 for a UUID. Used to
/// check a container's count against the input before anything is allocated for it.
pub(super) fn min_width(ty: TType) -> u64 {
    match ty {
        TType::Bool | TType::I8 | TType::I16 | TType::I32 | TType::I64 | TType::Double => 1,
        TType::Binary | TType::Struct => 2,
        TType::List | TType::Set => 8,
        TType::Map => 16,
        TType::Uuid => 38,
        // Never the type of a value; a width of 1 keeps the arithmetic safe anyway.
        TType::Stop | TType::Void => 1,
    }
}

// ---------------------------------------------------------------------------------------
// Numbers

/// `v` in decimal: at most 20 bytes (`-9223372036854775808`).
pub(super) fn format_int(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        at -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// A finite `v` as C's `printf("%.17g")` writes it, which is what Apache Thrift's C++
/// and Python JSON protocols write: 17 significant digits (enough to read back the same
/// double), trailing zeros dropped, an exponent (`e+300`, `e-05`) below 1e-4 or from
/// 1e17. At most 24 bytes.
pub(super) fn format_double(v: f64, out: &mut [u8; 32]) -> &[u8] {
    use std::io::Write as _;
    // Rust's exact formatting rounds correctly (ties to even), as C's does.
    let mut sci = [0u8; 32];
    let sci_len = {
        let mut w = &mut sci[..];
        // 24 bytes at most ("-1.7976931348623157e308"): it fits.
        let _ = write!(w, "{v:.16e}");
        32 - w.len()
    };
    let sci = &sci[..sci_len];
    let (negative, sci) = match sci.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, sci),
    };
    let e = sci.iter().position(|&b| b == b'e').unwrap_or(sci.len());
    // "d.dddddddddddddddd": 17 significant digits.
    let mut digits = [b'0'; 17];
    for (slot, &d) in digits
        .iter_mut()
        .zip(sci[..e].iter().filter(|b| b.is_ascii_digit()))
    {
        *slot = d;
    }
    let exp = std::str::from_utf8(sci.get(e + 1..).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse::<i32>().ok())
        .unwrap_or(0);

    let mut w = Text { buf: out, len: 0 };
    if negative {
        w.push(b'-');
    }
    if (-4..17).contains(&exp) {
        // Fixed notation: exp + 1 integer digits (or "0." and -exp - 1 zeros).
        let frac_from = if exp >= 0 {
            let int_len = exp as usize + 1;
            w.extend(&digits[..int_len]);
            int_len
        } else {
            w.push(b'0');
            0
        };
        let frac = trim_zeros(&digits[frac_from..]);
        if !frac.is_empty() {
            w.push(b'.');
            for _ in 0..(-exp - 1).max(0) {
                w.push(b'0');
            }
            w.extend(frac);
        }
    } else {
        w.push(digits[0]);
        let frac = trim_zeros(&digits[1..]);
        if !frac.is_empty() {
            w.push(b'.');
            w.extend(frac);
        }
        w.push(b'e');
        w.push(if exp < 0 { b'-' } else { b'+' });
        let mut exp_buf = [0u8; 20];
        let exp_digits = format_int(i64::from(exp.unsigned_abs()), &mut exp_buf);
        if exp_digits.len() < 2 {
            w.push(b'0');
        }
        w.extend(exp_digits);
    }
    let len = w.len;
    &out[..len]
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let end = digits.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
    &digits[..end]
}

/// A bounded writer into a fixed buffer (what does not fit is dropped; callers size the
/// buffer for the longest text they write).
struct Text<'a> {
    buf: &'a mut [u8; 32],
    len: usize,
}

impl Text<'_> {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

/// The length of the number token at the start of `text`: the run of the characters
/// Apache Thrift's readers take as part of a number (`+-.0-9eE`). The token is then
/// checked against JSON's grammar, so that `1.5.3` is an error rather than `1.5`.
pub(super) fn number_token_len(text: &[u8]) -> usize {
    text.iter()
        .take_while(|b| matches!(b, b'+' | b'-' | b'.' | b'0'..=b'9' | b'e' | b'E'))
        .count()
}

/// Why a number token is not an integer of the range asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntError {
    /// Not an integer: not `-?[0-9]+`.
    Syntax,
    /// An integer, but not an `i64`.
    Range,
}

/// An integer token: an optional `-`, no `+`, decimal digits.
///
/// Leading zeros are taken, though JSON's grammar has none: Apache's Node.js library
/// writes negative `i64`s it decoded zero-padded (`-000000000005` for -5), and every
/// other Apache reader (C++, Java, Python, Go) reads them as the number. They cost
/// nothing but their bytes, and count for no digits of the range check.
pub(super) fn parse_int(token: &[u8]) -> Result<i64, IntError> {
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(IntError::Syntax);
    }
    let zeros = digits.iter().take_while(|&&d| d == b'0').count();
    let digits = &digits[zeros.min(digits.len() - 1)..];
    // 20 digits or more exceed any i64, and would overflow the sum below.
    if digits.len() > 19 {
        return Err(IntError::Range);
    }
    let magnitude = digits
        .iter()
        .fold(0i128, |n, &d| n * 10 + i128::from(d - b'0'));
    i64::try_from(if negative { -magnitude } else { magnitude }).map_err(|_| IntError::Range)
}

/// Whether `token` is a number in JSON's grammar:
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
pub(super) fn is_json_number(token: &[u8]) -> bool {
    fn digits(s: &[u8]) -> usize {
        s.iter().take_while(|b| b.is_ascii_digit()).count()
    }
    let mut s = token.strip_prefix(b"-").unwrap_or(token);
    match digits(s) {
        0 => return false,
        n if n > 1 && s[0] == b'0' => return false,
        n => s = &s[n..],
    }
    if let Some(rest) = s.strip_prefix(b".") {
        match digits(rest) {
            0 => return false,
            n => s = &rest[n..],
        }
    }
    if let Some((b'e' | b'E', rest)) = s.split_first() {
        let rest = rest
            .strip_prefix(b"+")
            .or_else(|| rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        match digits(rest) {
            0 => return false,
            n => s = &rest[n..],
        }
    }
    s.is_empty()
}

/// A double token in JSON's grammar, as the nearest double (`None` when it is not in
/// that grammar). A literal too large for a double comes back infinite.
pub(super) fn parse_double(token: &[u8]) -> Option<f64> {
    if !is_json_number(token) {
        return None;
    }
    // The grammar is a subset of what `f64::from_str` accepts, and ASCII.
    std::str::from_utf8(token).ok()?.parse().ok()
}

// ---------------------------------------------------------------------------------------
// Strings, base64 and UUIDs: the crate's one definition of each.

pub(super) use crate::encoding::{
    base64_decode, base64_len, escape_len, format_uuid, needs_escape, parse_uuid, unescape,
    write_escaped,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn double(v: f64) -> String {
        let mut buf = [0u8; 32];
        String::from_utf8(format_double(v, &mut buf).to_vec()).unwrap()
    }

    #[test]
    // Literals written the way the values they test are known (Apache's TestClient.py
    // sends the last one), not rounded to 17 digits.
    #[allow(clippy::excessive_precision)]
    fn doubles_are_written_as_printf_percent_17g() {
        // Expected strings from C's printf("%.17g"), which Python's format() mirrors.
        for (v, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (3.0, "3"),
            (0.5, "0.5"),
            (-1.25, "-1.25"),
            (0.1, "0.10000000000000001"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (1e300, "1.0000000000000001e+300"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (-f64::MAX, "-1.7976931348623157e+308"),
            (std::f64::consts::PI, "3.1415926535897931"),
            (1.0 / 3.0, "0.33333333333333331"),
            (123.456, "123.456"),
            // A tie at the 17th digit rounds to even, as printf does.
            (1125899906842624.25, "1125899906842624.2"),
            (1125899906842624.75, "1125899906842624.8"),
            (-0.000341012439638598279, "-0.00034101243963859828"),
        ] {
            assert_eq!(double(v), s, "{v:e}");
            assert_eq!(
                parse_double(s.as_bytes()).map(f64::to_bits),
                Some(v.to_bits())
            );
        }
    }

    #[test]
    fn integers_are_written_in_decimal_and_read_with_leading_zeros_too() {
        let mut buf = [0u8; 20];
        for v in [0, 1, -1, 9, 10, i64::MAX, i64::MIN, -1234567890] {
            let text = format_int(v, &mut buf).to_vec();
            assert_eq!(text, v.to_string().into_bytes());
            assert_eq!(parse_int(&text), Ok(v));
        }
        for bad in ["", "-", "+1", "1.0", "1e3", "0x1", " 1", "--1", "0-1", "1-"] {
            assert_eq!(parse_int(bad.as_bytes()), Err(IntError::Syntax), "{bad:?}");
        }
        // Leading zeros, as Apache's Node.js library writes negative i64s: they do
        // not count towards the range.
        for (padded, v) in [
            ("01", 1),
            ("-01", -1),
            ("00", 0),
            ("-000000000005", -5),
            ("-034359738368", -34_359_738_368),
            ("0000000000009223372036854775807", i64::MAX),
            ("-0000000000009223372036854775808", i64::MIN),
        ] {
            assert_eq!(parse_int(padded.as_bytes()), Ok(v), "{padded}");
        }
        assert_eq!(parse_int(b"00009223372036854775808"), Err(IntError::Range));
        for big in [
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_int(big.as_bytes()), Err(IntError::Range), "{big}");
        }
        assert_eq!(parse_int(b"-0"), Ok(0));
    }

    #[test]
    fn json_number_grammar() {
        for good in ["0", "-0", "1.5", "1e5", "1E+5", "-1.0e-300", "10", "0.000"] {
            assert!(is_json_number(good.as_bytes()), "{good}");
        }
        for bad in [
            "", "+1", "01", "1.", ".5", "1e", "1e+", "-", "1.5.3", "inf", "NaN", "1-",
        ] {
            assert!(!is_json_number(bad.as_bytes()), "{bad}");
        }
        assert_eq!(parse_double(b"1e999"), Some(f64::INFINITY));
    }
}
