//! A streaming JSON tokenizer over one input slice: no tree, no allocation except for
//! strings that need unescaping (into a reused scratch buffer).

use super::error::{ErrorKind, TranscodeError};
use thrift_wire::encoding::{EscapeError, decode_escape, find_escape};

/// A string as read: straight from the input when it has no escapes, else unescaped
/// into the scratch buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Str<'a> {
    /// The input's own bytes (validated UTF-8).
    Raw(&'a [u8]),
    /// Unescaped into the scratch buffer (its whole content).
    Scratch,
}

/// The kind of the next value, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    Object,
    Array,
    String,
    Number,
    True,
    False,
    Null,
}

impl Next {
    /// How an error names what it found.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Next::Object => "an object",
            Next::Array => "an array",
            Next::String => "a string",
            Next::Number => "a number",
            Next::True | Next::False => "a boolean",
            Next::Null => "null",
        }
    }
}

/// The tokenizer: a position in the input.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The whole input.
    pub(crate) fn input(&self) -> &'a [u8] {
        self.buf
    }

    /// Moves to `pos`.
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.buf.len());
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// An error at the current position.
    pub(crate) fn err(&self, kind: ErrorKind) -> TranscodeError {
        TranscodeError::at(kind, self.pos)
    }

    /// A syntax error, or an early end when the input is used up.
    pub(crate) fn syntax(&self, expected: &'static str) -> TranscodeError {
        if self.pos >= self.buf.len() {
            self.err(ErrorKind::Eof { expected })
        } else {
            self.err(ErrorKind::Syntax { expected })
        }
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&b) = self.buf.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// The next non-space byte, not consumed.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.buf.get(self.pos).copied()
    }

    /// The kind of the next value (not consumed).
    pub(crate) fn next_kind(&mut self) -> Result<Next, TranscodeError> {
        Ok(match self.peek() {
            Some(b'{') => Next::Object,
            Some(b'[') => Next::Array,
            Some(b'"') => Next::String,
            Some(b'-' | b'0'..=b'9') => Next::Number,
            Some(b't') => Next::True,
            Some(b'f') => Next::False,
            Some(b'n') => Next::Null,
            _ => return Err(self.syntax("a value")),
        })
    }

    /// Consumes `b` (after spaces), or fails expecting `what`.
    #[inline]
    pub(crate) fn expect(&mut self, b: u8, what: &'static str) -> Result<(), TranscodeError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(what))
        }
    }

    /// After an element of an object or array: `true` when another follows (a comma
    /// consumed), `false` when `close` ended it (consumed).
    #[inline]
    pub(crate) fn more(&mut self, close: u8, what: &'static str) -> Result<bool, TranscodeError> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.syntax(what)),
        }
    }

    /// Consumes `close` if it comes next (an empty object or array).
    #[inline]
    pub(crate) fn empty(&mut self, close: u8) -> bool {
        if self.peek() == Some(close) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Fails unless only spaces remain.
    pub(crate) fn finish(&mut self) -> Result<(), TranscodeError> {
        if self.peek().is_some() {
            return Err(self.err(ErrorKind::TrailingData));
        }
        Ok(())
    }

    /// Reads `true`, `false` or `null` (whichever `word` is).
    pub(crate) fn literal(&mut self, word: &'static [u8]) -> Result<(), TranscodeError> {
        self.skip_ws();
        let end = self.pos + word.len();
        match self.buf.get(self.pos..end) {
            Some(w) if w == word => {
                self.pos = end;
                Ok(())
            }
            // The input ends partway through a word.
            None if word.starts_with(&self.buf[self.pos..]) => {
                self.pos = self.buf.len();
                Err(self.err(ErrorKind::Eof {
                    expected: "the rest of true, false or null",
                }))
            }
            _ => Err(self.err(ErrorKind::Syntax {
                expected: "true, false or null",
            })),
        }
    }

    /// Reads a boolean.
    pub(crate) fn boolean(&mut self) -> Result<bool, TranscodeError> {
        match self.next_kind()? {
            Next::True => self.literal(b"true").map(|()| true),
            Next::False => self.literal(b"false").map(|()| false),
            other => Err(self.err(ErrorKind::WrongType {
                expected: "a boolean",
                found: other.name(),
            })),
        }
    }

    /// Reads an integer of at most 19 digits, without fraction or exponent, that fits
    /// `i64`: the common case of [`number`](Reader::number) then a decimal parse, done
    /// in one pass. `None`, with nothing consumed but spaces, for any other text (the
    /// caller then reads it the general way, which also reports its errors).
    #[inline]
    pub(crate) fn small_int(&mut self) -> Option<i64> {
        self.skip_ws();
        let b = self.buf;
        let neg = b.get(self.pos) == Some(&b'-');
        let start = self.pos + usize::from(neg);
        let mut i = start;
        let mut v: u64 = 0;
        // Eight digits a step while they are there (two steps at most: 16 digits).
        while i - start <= 19 - 8
            && let Some(n) = b.get(i..i + 8).and_then(eight_digits)
        {
            v = v * 100_000_000 + u64::from(n);
            i += 8;
        }
        while let Some(&c) = b.get(i) {
            let d = c.wrapping_sub(b'0');
            if d >= 10 {
                break;
            }
            // 19 digits fit in a `u64` (below 10^19 < 2^64); a 20th goes the long way.
            if i - start == 19 {
                return None;
            }
            v = v * 10 + u64::from(d);
            i += 1;
        }
        let digits = i - start;
        // No digit, a leading zero, or a fraction or exponent to come: the long way.
        if digits == 0
            || (digits > 1 && b[start] == b'0')
            || matches!(b.get(i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let v = if neg {
            // Down to -2^63, which is `i64::MIN` (its negation wraps onto itself).
            if v > 1 << 63 {
                return None;
            }
            (v as i64).wrapping_neg()
        } else {
            i64::try_from(v).ok()?
        };
        self.pos = i;
        Some(v)
    }

    /// Reads a number's text, checked against JSON's grammar:
    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    pub(crate) fn number(&mut self) -> Result<&'a [u8], TranscodeError> {
        self.skip_ws();
        let start = self.pos;
        let b = self.buf;
        let mut i = self.pos;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => {
                self.pos = i;
                return Err(self.syntax("a digit"));
            }
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.syntax("a digit after the decimal point"));
            }
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.syntax("a digit in the exponent"));
            }
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        self.pos = i;
        Ok(&b[start..i])
    }

    /// Reads a string. Without escapes it is handed out as a slice of the input
    /// (validated UTF-8); with them it is unescaped into `scratch` (cleared first).
    pub(crate) fn string(&mut self, scratch: &mut Vec<u8>) -> Result<Str<'a>, TranscodeError> {
        self.expect(b'"', "a string")?;
        let start = self.pos;
        let end = self.scan(start);
        match self.buf.get(end) {
            Some(b'"') => {
                let raw = &self.buf[start..end];
                self.pos = end;
                check_utf8(raw).map_err(|kind| self.err(kind))?;
                self.pos = end + 1;
                Ok(Str::Raw(raw))
            }
            Some(b'\\') => {
                scratch.clear();
                scratch.extend_from_slice(&self.buf[start..end]);
                self.pos = end;
                self.unescape_rest(scratch)?;
                check_utf8(scratch).map_err(|_| {
                    TranscodeError::at(
                        ErrorKind::InvalidString {
                            reason: "invalid UTF-8",
                        },
                        start,
                    )
                })?;
                Ok(Str::Scratch)
            }
            Some(_) => {
                self.pos = end;
                Err(self.err(ErrorKind::InvalidString {
                    reason: "a raw control character",
                }))
            }
            None => {
                self.pos = end;
                Err(self.err(ErrorKind::Eof {
                    expected: "the end of a string",
                }))
            }
        }
    }

    #[inline]
    fn scan(&self, i: usize) -> usize {
        find_escape(self.buf, i)
    }

    /// Unescapes from the current position (at a backslash or later) to the closing
    /// quote, appending to `out`; leaves the position after the quote.
    fn unescape_rest(&mut self, out: &mut Vec<u8>) -> Result<(), TranscodeError> {
        loop {
            let end = self.scan(self.pos);
            out.extend_from_slice(&self.buf[self.pos..end]);
            self.pos = end;
            match self.buf.get(end) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(out)?;
                }
                Some(_) => {
                    return Err(self.err(ErrorKind::InvalidString {
                        reason: "a raw control character",
                    }));
                }
                None => {
                    return Err(self.err(ErrorKind::Eof {
                        expected: "the end of a string",
                    }));
                }
            }
        }
    }

    /// One escape, after its backslash.
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), TranscodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match decode_escape(rest) {
            Ok((ch, len)) => {
                self.pos += len;
                out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                Ok(())
            }
            Err(EscapeError::Truncated(expected)) => {
                self.pos = self.buf.len();
                Err(self.err(ErrorKind::Eof { expected }))
            }
            Err(e) => {
                self.pos += e.offset().unwrap_or(0);
                Err(self.err(ErrorKind::InvalidString { reason: e.reason() }))
            }
        }
    }

    /// Skips one value of any kind (an unknown key's), checking its syntax; nesting
    /// counts against `depth` up to `max`.
    pub(crate) fn skip_value(
        &mut self,
        scratch: &mut Vec<u8>,
        depth: usize,
        max: usize,
    ) -> Result<(), TranscodeError> {
        match self.next_kind()? {
            Next::Object | Next::Array if depth >= max => Err(self.err(ErrorKind::DepthLimit(max))),
            Next::Object => {
                self.pos += 1;
                if self.empty(b'}') {
                    return Ok(());
                }
                loop {
                    self.string(scratch)?;
                    self.expect(b':', "`:`")?;
                    self.skip_value(scratch, depth + 1, max)?;
                    if !self.more(b'}', "`,` or `}`")? {
                        return Ok(());
                    }
                }
            }
            Next::Array => {
                self.pos += 1;
                if self.empty(b']') {
                    return Ok(());
                }
                loop {
                    self.skip_value(scratch, depth + 1, max)?;
                    if !self.more(b']', "`,` or `]`")? {
                        return Ok(());
                    }
                }
            }
            Next::String => self.string(scratch).map(drop),
            Next::Number => self.number().map(drop),
            Next::True => self.literal(b"true"),
            Next::False => self.literal(b"false"),
            Next::Null => self.literal(b"null"),
        }
    }
}

/// The value of eight ASCII digits, if `chunk` is eight ASCII digits: a few word
/// operations instead of eight steps of a loop (the SWAR method of simdjson and
/// fast_float).
#[inline]
fn eight_digits(chunk: &[u8]) -> Option<u32> {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let w = u64::from_le_bytes(chunk.try_into().ok()?);
    // A byte is a digit when it is at least b'0' (no borrow out of the subtraction)
    // and at most b'9' (adding 0x46 does not reach 0x80).
    if (w.wrapping_add(0x4646_4646_4646_4646) | w.wrapping_sub(ZEROS)) & 0x8080_8080_8080_8080 != 0
    {
        return None;
    }
    // Pairs of digits, then pairs of pairs, then the two halves (the first digit in
    // the lowest byte, being the most significant).
    let d = w - ZEROS;
    let d = d * 10 + (d >> 8);
    let lo = (d & 0x0000_00ff_0000_00ff).wrapping_mul(100 + (1_000_000 << 32));
    let hi = ((d >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32));
    Some((lo.wrapping_add(hi) >> 32) as u32)
}

/// Checks UTF-8: a short ASCII string (keys, names, numbers in strings) needs only a
/// check a word at a time, cheaper than the call into the SIMD validator; longer
/// strings go to the SIMD validator, faster per byte (and ASCII-fast itself).
#[inline]
fn check_utf8(b: &[u8]) -> Result<(), ErrorKind> {
    if b.len() <= 64 && b.is_ascii() {
        return Ok(());
    }
    if simdutf8::basic::from_utf8(b).is_err() {
        return Err(ErrorKind::InvalidString {
            reason: "invalid UTF-8",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain reading of eight digits.
    fn digits_one_by_one(chunk: &[u8]) -> Option<u32> {
        chunk.iter().try_fold(0u32, |v, &c| {
            c.is_ascii_digit().then(|| v * 10 + u32::from(c - b'0'))
        })
    }

    #[test]
    fn eight_digits_at_once_read_as_one_by_one_whatever_byte_is_anywhere() {
        for base in [*b"12345678", *b"00000000", *b"99999999", *b"90817263"] {
            assert_eq!(eight_digits(&base), digits_one_by_one(&base));
            for at in 0..8 {
                for byte in 0..=255u8 {
                    let mut chunk = base;
                    chunk[at] = byte;
                    assert_eq!(eight_digits(&chunk), digits_one_by_one(&chunk), "{chunk:?}");
                }
            }
        }
    }
}
