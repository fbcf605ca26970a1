//! Reading JSON: [`JsonDecoder`].

use bytes::Bytes;

use super::frame::Frame;
use super::text::{self, IntError};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::message::MessageHeader;
use crate::protocol::input::Input;
use crate::protocol::{
    DecodeLimits, Decoder, FieldHeader, ListHeader, MapHeader, check_len, enter, initial_capacity,
    message_type,
};
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

/// A string token: where its content lies in the frame, and whether it has escapes.
#[derive(Debug, Clone, Copy)]
struct Token {
    start: usize,
    end: usize,
    escaped: bool,
}

/// Reads the JSON protocol from one `Bytes` frame.
///
/// Strings without escapes are slices of the frame; strings with escapes, and binaries
/// (base64), are decoded into buffers no larger than their text. Separators and closing
/// brackets are checked as the values around them are read: a container's closer with
/// its last element, a struct's with the field header that finds it, a message's `]`
/// with its body. See the [module docs](super) for what is accepted.
#[derive(Debug, Clone)]
pub struct JsonDecoder {
    input: Input,
    depth: usize,
    limits: DecodeLimits,
    /// The open containers, innermost last: never more than the depth limit plus one
    /// (a message), as each push follows a depth check.
    frames: Vec<Frame>,
}

impl JsonDecoder {
    /// A decoder over `input`.
    pub fn new(input: Bytes, limits: DecodeLimits) -> Self {
        JsonDecoder {
            input: Input::new(input),
            depth: 0,
            limits,
            frames: Vec::new(),
        }
    }

    // ------------------------------------------------------------------ tokens

    /// Skips JSON's insignificant whitespace.
    fn skip_ws(&mut self) {
        let n = self
            .input
            .rest()
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
        self.input.advance(n);
    }

    /// An error at the read position: the input ended, or is not what was expected.
    #[cold]
    fn unexpected(&self, expected: &'static str) -> DecodeError {
        if self.input.remaining() == 0 {
            self.input.eof(1)
        } else {
            self.invalid(expected, self.input.position())
        }
    }

    #[cold]
    fn invalid(&self, expected: &'static str, offset: usize) -> DecodeError {
        DecodeError::new(DecodeErrorKind::InvalidJson { expected, offset })
    }

    /// Consumes `byte` right here (inside a token: no whitespace first).
    fn expect_now(&mut self, byte: u8) -> Result<(), DecodeError> {
        if self.input.peek() == Some(byte) {
            self.input.advance(1);
            Ok(())
        } else {
            Err(self.unexpected(punctuation(byte)))
        }
    }

    /// Consumes `byte` after any whitespace.
    fn expect(&mut self, byte: u8) -> Result<(), DecodeError> {
        self.skip_ws();
        self.expect_now(byte)
    }

    /// Reads a string token (after any whitespace), checking its escapes' syntax.
    fn string_token(&mut self) -> Result<Token, DecodeError> {
        self.expect(b'"')?;
        let start = self.input.position();
        let rest = self.input.rest();
        let mut escaped = false;
        let mut i = 0;
        while let Some(&b) = rest.get(i) {
            match b {
                b'"' => {
                    self.input.advance(i + 1);
                    return Ok(Token {
                        start,
                        end: start + i,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    let tail = rest.get(i + 1..).unwrap_or_default();
                    // An escape that the end of the input cuts short (`\`, `\u12`).
                    let cut = matches!(tail, [] | [b'u', ..] if tail.len() < 5);
                    match text::escape_len(tail) {
                        Some(n) => i += 1 + n,
                        None if cut => return Err(self.input.eof(rest.len() + 1)),
                        None => return Err(self.invalid("a valid escape sequence", start + i)),
                    }
                }
                // Raw control bytes are accepted, as Apache Thrift's readers accept them
                // (and its Python writer writes them).
                _ => i += 1,
            }
        }
        Err(self.input.eof(rest.len() + 1))
    }

    /// The content of a string token, its escapes decoded: a slice of the frame when it
    /// has none, else a buffer no longer than the token.
    fn token_bytes(&self, t: Token) -> Result<Bytes, DecodeError> {
        let raw = self.input.slice_of(t.start, t.end);
        if !t.escaped {
            return Ok(raw);
        }
        let mut out = Vec::new();
        text::unescape(&raw, &mut out)
            .map_err(|(at, why)| self.invalid(why.reason(), t.start + at))?;
        Ok(Bytes::from(out))
    }

    /// A string (after any whitespace), validated as UTF-8.
    fn string_value(&mut self) -> Result<Utf8Bytes, DecodeError> {
        let t = self.string_token()?;
        Utf8Bytes::try_from_bytes(self.token_bytes(t)?)
            .map_err(|_| DecodeError::new(DecodeErrorKind::InvalidUtf8))
    }

    /// A type name in a header: one of the twelve, written without escapes.
    fn type_name(&mut self) -> Result<TType, DecodeError> {
        let t = self.string_token()?;
        let name = self.input.slice_of(t.start, t.end);
        match text::type_of_name(&name) {
            Some(ty) if !t.escaped => Ok(ty),
            _ => Err(self.invalid(
                "a type name (tf, i8, i16, i32, i64, dbl, str, rec, map, lst, set, uid)",
                t.start,
            )),
        }
    }

    /// The number token at the read position (Apache's number characters, which the
    /// caller then checks against JSON's grammar) and its offset.
    fn number_token(&mut self) -> (usize, Bytes) {
        let at = self.input.position();
        let len = text::number_token_len(self.input.rest());
        self.input.advance(len);
        (at, self.input.slice_of(at, at + len))
    }

    /// An integer of type `ty` in `min..=max`, in quotes when `quoted` (a map key or a
    /// field id).
    fn integer(&mut self, quoted: bool, ty: TType, min: i64, max: i64) -> Result<i64, DecodeError> {
        self.skip_ws();
        if quoted {
            self.expect_now(b'"')?;
        }
        let (at, token) = self.number_token();
        if token.is_empty() {
            return Err(self.unexpected(if quoted {
                "a quoted integer"
            } else {
                "an integer"
            }));
        }
        let v = match text::parse_int(&token) {
            Ok(v) if (min..=max).contains(&v) => v,
            Ok(_) | Err(IntError::Range) => {
                return Err(DecodeError::new(DecodeErrorKind::NumberOutOfRange {
                    ty,
                    offset: at,
                }));
            }
            // A token the end of the input cut (`-`) may be a prefix of a number.
            Err(IntError::Syntax) if self.input.remaining() == 0 => {
                return Err(self.input.eof(1));
            }
            Err(IntError::Syntax) => return Err(self.invalid("an integer", at)),
        };
        if quoted {
            self.expect_now(b'"')?;
        }
        Ok(v)
    }

    // ------------------------------------------------------------------ context

    /// Reads what precedes a value where it stands; returns whether it is a map key.
    fn begin_value(&mut self) -> Result<bool, DecodeError> {
        let Some(slot) = self.frames.last_mut().map(Frame::next_value) else {
            return Ok(false);
        };
        if let Some(separator) = slot.separator {
            self.expect(separator)?;
        }
        Ok(slot.key)
    }

    /// After a value: reads the closers of every container it completed. Once the
    /// outermost value is complete, whitespace after it is consumed too.
    fn end_value(&mut self) -> Result<(), DecodeError> {
        while let Some(closer) = self.frames.last().and_then(Frame::closer) {
            for &b in closer {
                self.expect(b)?;
            }
            self.frames.pop();
        }
        if self.frames.is_empty() {
            self.skip_ws();
        }
        Ok(())
    }

    /// Opens a container after its header: checks the depth, then reads its closer
    /// right away if it is empty.
    fn open(&mut self, frame: Frame) -> Result<(), DecodeError> {
        enter(&mut self.depth, self.limits.max_depth)?;
        self.frames.push(frame);
        self.end_value()
    }

    /// One integer value of type `ty` in `min..=max`.
    fn int_value(&mut self, ty: TType, min: i64, max: i64) -> Result<i64, DecodeError> {
        let key = self.begin_value()?;
        let v = self.integer(key, ty, min, max)?;
        self.end_value()?;
        Ok(v)
    }

    /// Reads `len` elements with `read` into `out`: the slice readers of JSON, which has
    /// no bulk form. `len` was checked at two bytes an element, so at most 64 KiB is
    /// reserved up front and the rest grows as elements really decode.
    fn read_each<T>(
        &mut self,
        len: usize,
        out: &mut Vec<T>,
        read: fn(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<(), DecodeError> {
        out.reserve(initial_capacity::<T>(len));
        for _ in 0..len {
            out.push(read(self)?);
        }
        Ok(())
    }
}

/// How a punctuation byte is named in errors.
fn punctuation(byte: u8) -> &'static str {
    match byte {
        b',' => "`,`",
        b':' => "`:`",
        b'"' => "`\"`",
        b'[' => "`[`",
        b']' => "`]`",
        b'{' => "`{`",
        b'}' => "`}`",
        _ => "punctuation",
    }
}

impl Decoder for JsonDecoder {
    fn read_message_begin(&mut self) -> Result<MessageHeader, DecodeError> {
        // A message starts a document of its own.
        self.frames.clear();
        self.expect(b'[')?;
        let version = self.integer(false, TType::I32, i64::MIN, i64::MAX)?;
        if version != 1 {
            return Err(DecodeError::new(DecodeErrorKind::BadVersion(
                u32::try_from(version).unwrap_or(u32::MAX),
            )));
        }
        self.expect(b',')?;
        let name = self.string_value()?;
        self.expect(b',')?;
        let ty = self.integer(false, TType::I8, 0, 255)?;
        let ty = message_type(ty as u8)?;
        self.expect(b',')?;
        let seq_id = self.integer(false, TType::I32, i32::MIN.into(), i32::MAX.into())? as i32;
        // The body's `,` is read here, so that what remains starts with the body itself
        // (a server may hand the rest of the frame to a decoder of its own).
        self.expect(b',')?;
        self.skip_ws();
        self.frames.push(Frame::Message { body_begun: false });
        Ok(MessageHeader { name, ty, seq_id })
    }

    fn read_struct_begin(&mut self) -> Result<i16, DecodeError> {
        enter(&mut self.depth, self.limits.max_depth)?;
        self.begin_value()?;
        self.expect(b'{')?;
        self.frames.push(Frame::Struct { field_open: false });
        Ok(0)
    }

    fn read_struct_end(&mut self, _saved: i16) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn read_field_begin(&mut self) -> Result<FieldHeader, DecodeError> {
        let Some(&Frame::Struct { field_open }) = self.frames.last() else {
            return Err(self.unexpected("a field, inside a struct"));
        };
        self.skip_ws();
        let more = if field_open {
            // The previous field's `{"type":value` closes first; then `,` or the end.
            self.expect_now(b'}')?;
            self.skip_ws();
            match self.input.peek() {
                Some(b',') => {
                    self.input.advance(1);
                    true
                }
                Some(b'}') => false,
                _ => return Err(self.unexpected("`,` or `}`")),
            }
        } else {
            self.input.peek() != Some(b'}')
        };
        if !more {
            self.expect(b'}')?;
            self.frames.pop();
            self.end_value()?;
            return Ok(FieldHeader {
                ty: TType::Stop,
                id: 0,
            });
        }
        if let Some(Frame::Struct { field_open }) = self.frames.last_mut() {
            *field_open = true;
        }
        let id = self.integer(true, TType::I16, i16::MIN.into(), i16::MAX.into())? as i16;
        self.expect(b':')?;
        self.expect(b'{')?;
        let ty = self.type_name()?;
        self.expect(b':')?;
        Ok(FieldHeader { ty, id })
    }

    fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.int_value(TType::Bool, 0, 1)? == 1)
    }
    fn read_i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.int_value(TType::I8, i8::MIN.into(), i8::MAX.into())? as i8)
    }
    fn read_i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.int_value(TType::I16, i16::MIN.into(), i16::MAX.into())? as i16)
    }
    fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.int_value(TType::I32, i32::MIN.into(), i32::MAX.into())? as i32)
    }
    fn read_i64(&mut self) -> Result<i64, DecodeError> {
        self.int_value(TType::I64, i64::MIN, i64::MAX)
    }

    fn read_double(&mut self) -> Result<f64, DecodeError> {
        let key = self.begin_value()?;
        self.skip_ws();
        let at = self.input.position();
        let v = if self.input.peek() == Some(b'"') {
            let t = self.string_token()?;
            let raw = self.input.slice_of(t.start, t.end);
            match &raw[..] {
                _ if t.escaped => return Err(self.invalid("a number without escapes", at)),
                b"NaN" => f64::NAN,
                b"Infinity" => f64::INFINITY,
                b"-Infinity" => f64::NEG_INFINITY,
                // Numbers are quoted only as map keys.
                number if key => self.finite(text::parse_double(number), at + 1)?,
                _ => {
                    return Err(self.invalid(
                        "an unquoted number, or \"NaN\", \"Infinity\" or \"-Infinity\"",
                        at,
                    ));
                }
            }
        } else if key {
            return Err(self.unexpected("`\"` (map keys are quoted)"));
        } else {
            let (_, token) = self.number_token();
            let parsed = text::parse_double(&token);
            if parsed.is_none() && self.input.remaining() == 0 {
                // Cut by the end of the input (`1.`, `1e-`): may be a prefix of a number.
                return Err(self.input.eof(1));
            }
            if token.is_empty() {
                return Err(self.unexpected("a number"));
            }
            self.finite(parsed, at)?
        };
        self.end_value()?;
        Ok(v)
    }

    fn read_uuid(&mut self) -> Result<[u8; 16], DecodeError> {
        self.begin_value()?;
        let t = self.string_token()?;
        let v = text::parse_uuid(&self.token_bytes(t)?)
            .ok_or_else(|| self.invalid("a UUID (8-4-4-4-12 hex digits)", t.start))?;
        self.end_value()?;
        Ok(v)
    }

    fn read_bytes(&mut self) -> Result<Bytes, DecodeError> {
        self.begin_value()?;
        let t = self.string_token()?;
        let encoded = self.token_bytes(t)?;
        let mut out = Vec::new();
        text::base64_decode(&encoded, &mut out).map_err(|at| {
            // Offsets into unescaped text are approximate; the token's start is exact.
            let offset = if t.escaped { t.start } else { t.start + at };
            self.invalid("base64", offset)
        })?;
        self.end_value()?;
        Ok(Bytes::from(out))
    }

    fn read_string(&mut self) -> Result<Utf8Bytes, DecodeError> {
        self.begin_value()?;
        let v = self.string_value()?;
        self.end_value()?;
        Ok(v)
    }

    fn read_list_begin(&mut self) -> Result<ListHeader, DecodeError> {
        self.begin_value()?;
        self.expect(b'[')?;
        let elem = self.type_name()?;
        self.expect(b',')?;
        let len = self.count(1 + text::min_width(elem))?;
        self.open(Frame::list(len))?;
        Ok(ListHeader { elem, len })
    }

    fn read_map_begin(&mut self) -> Result<MapHeader, DecodeError> {
        self.begin_value()?;
        self.expect(b'[')?;
        let key = self.type_name()?;
        self.expect(b',')?;
        let value = self.type_name()?;
        self.expect(b',')?;
        let count = self.integer(false, TType::I64, i64::MIN, i64::MAX)?;
        self.expect(b',')?;
        self.expect(b'{')?;
        // Each entry is at least its key, `:` and its value.
        let len = self.checked_count(count, text::min_width(key) + text::min_width(value) + 1)?;
        self.open(Frame::map(len))?;
        Ok(MapHeader { key, value, len })
    }

    fn read_container_end(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn read_i32_slice(&mut self, len: usize, out: &mut Vec<i32>) -> Result<(), DecodeError> {
        self.read_each(len, out, Self::read_i32)
    }

    fn read_i64_slice(&mut self, len: usize, out: &mut Vec<i64>) -> Result<(), DecodeError> {
        self.read_each(len, out, Self::read_i64)
    }

    fn read_f64_slice(&mut self, len: usize, out: &mut Vec<f64>) -> Result<(), DecodeError> {
        self.read_each(len, out, Self::read_double)
    }

    fn skip_bytes(&mut self, len: usize) -> Result<(), DecodeError> {
        // `skip_value` calls this only for types with a fixed width, which JSON has none
        // of; as raw bytes it is at least bounded by the input.
        self.input.take(len).map(drop)
    }

    fn fixed_width(&self, _ty: TType) -> Option<usize> {
        None
    }

    fn skip_binary(&mut self) -> Result<(), DecodeError> {
        // A string (text) or a binary (base64): stepped over as a string token, escapes
        // checked, neither decoded.
        self.begin_value()?;
        self.string_token()?;
        self.end_value()
    }

    fn read_encoded(&mut self, ty: TType) -> Result<Bytes, DecodeError> {
        // The separator before the value is read in its place; the value is then
        // skipped as a document of its own, so that its bytes are the value alone
        // (whitespace after it trimmed); the closers it completes are read after.
        if self.begin_value()? {
            return Err(self.invalid("a value that is not a map key", self.input.position()));
        }
        self.skip_ws();
        let start = self.input.position();
        let frames = std::mem::take(&mut self.frames);
        let skipped = self.skip(ty);
        self.frames = frames;
        skipped?;
        let raw = self.input.slice_of(start, self.input.position());
        let blank = raw
            .iter()
            .rev()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
        self.end_value()?;
        Ok(raw.slice(..raw.len() - blank))
    }

    fn remaining(&self) -> usize {
        self.input.remaining()
    }
}

impl JsonDecoder {
    /// A parsed number as a finite double: `None` was not a number, and a literal too
    /// large to be finite is out of range.
    fn finite(&self, parsed: Option<f64>, at: usize) -> Result<f64, DecodeError> {
        match parsed {
            Some(v) if v.is_finite() => Ok(v),
            Some(_) => Err(DecodeError::new(DecodeErrorKind::NumberOutOfRange {
                ty: TType::Double,
                offset: at,
            })),
            None => Err(self.invalid("a number", at)),
        }
    }

    /// A list's element count, checked against the input at `min_width` bytes an element.
    fn count(&mut self, min_width: u64) -> Result<usize, DecodeError> {
        let count = self.integer(false, TType::I64, i64::MIN, i64::MAX)?;
        self.checked_count(count, min_width)
    }

    fn checked_count(&self, count: i64, min_width: u64) -> Result<usize, DecodeError> {
        if count < 0 {
            return Err(DecodeError::new(DecodeErrorKind::NegativeLength(count)));
        }
        check_len(count as u64, min_width, self.input.remaining())
    }
}
