//! Finding where a JSON message ends in a stream, without decoding it.

use crate::error::{DecodeError, DecodeErrorKind};
use crate::protocol::DecodeLimits;

/// The first byte of every JSON message (after any whitespace): the `[` of
/// `[1,"name",type,seq_id,{...}]`. No other protocol or framing Apache Thrift speaks
/// starts with it (as a frame length it would be over 1.5 GB).
pub const MESSAGE_START: u8 = b'[';

/// Finds where one JSON message ends in a stream of bytes, without decoding it: what a
/// transport needs to cut unframed ("buffered") JSON messages out of a connection.
///
/// It matches brackets outside strings (escape-aware), so it finds the end of any JSON
/// array; the decoder checks the rest. It keeps its place between calls, so a message
/// arriving in pieces is scanned once in all, not once per piece:
///
/// ```
/// use thrift_wire::protocol::json::MessageScanner;
/// use thrift_wire::DecodeLimits;
///
/// let stream = br#"[1,"ping",1,7,{"1":{"str":"a]}"}}][1,"#;
/// let mut scanner = MessageScanner::new(DecodeLimits::default(), 1 << 20);
/// assert_eq!(scanner.scan(&stream[..10])?, None); // more bytes needed
/// let end = scanner.scan(stream)?.expect("a whole message");
/// assert_eq!(&stream[..end], br#"[1,"ping",1,7,{"1":{"str":"a]}"}}]"#);
/// // The scanner starts over on what follows.
/// assert_eq!(scanner.scan(&stream[end..])?, None);
/// # Ok::<(), thrift_wire::DecodeError>(())
/// ```
///
/// Errors: input that does not start with `[` (after whitespace) or closes a bracket it
/// did not open ([`InvalidJson`](DecodeErrorKind::InvalidJson)), brackets nested deeper
/// than a message within the depth limit can be
/// ([`DepthLimitExceeded`](DecodeErrorKind::DepthLimitExceeded)), and a message not
/// ended within `max_len` bytes ([`SizeLimitExceeded`](DecodeErrorKind::SizeLimitExceeded)).
/// Its memory is one byte per open bracket, at most that nesting limit.
#[derive(Debug, Clone)]
pub struct MessageScanner {
    max_nesting: usize,
    max_len: usize,
    /// Bytes of the current message scanned so far.
    pos: usize,
    /// The closer each open bracket expects, innermost last.
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
}

impl MessageScanner {
    /// A scanner for messages of at most `max_len` bytes whose values nest no deeper
    /// than `limits.max_depth`. A struct takes two JSON brackets (its object and each
    /// field's), a map two, a list one, the message one: the scanner allows
    /// `2 * max_depth + 1` and leaves the exact count to the decoder.
    pub fn new(limits: DecodeLimits, max_len: usize) -> Self {
        MessageScanner {
            max_nesting: limits.max_depth.saturating_mul(2).saturating_add(1),
            max_len,
            pos: 0,
            open: Vec::new(),
            in_string: false,
            escaped: false,
        }
    }

    /// Forgets the message in progress: the next [`scan`](Self::scan) starts afresh.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.open.clear();
        self.in_string = false;
        self.escaped = false;
    }

    /// Scans `buf`, the bytes buffered so far from the start of a message (leading
    /// whitespace allowed), from where the last call stopped: bytes already scanned must
    /// be unchanged. `Ok(Some(n))`: the message is `buf[..n]`, and the scanner has started
    /// over, for `buf[n..]`. `Ok(None)`: more bytes are needed.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        let start = self.pos;
        for (i, &b) in buf.iter().enumerate().skip(start) {
            if i >= self.max_len {
                return Err(DecodeError::new(DecodeErrorKind::SizeLimitExceeded {
                    size: i as u64 + 1,
                    limit: self.max_len as u64,
                }));
            }
            self.pos = i + 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' if !self.open.is_empty() => self.in_string = true,
                b'[' | b'{' if !self.open.is_empty() || b == MESSAGE_START => {
                    if self.open.len() >= self.max_nesting {
                        return Err(DecodeError::new(DecodeErrorKind::DepthLimitExceeded(
                            self.max_nesting,
                        )));
                    }
                    self.open.push(if b == b'[' { b']' } else { b'}' });
                }
                b']' | b'}' if !self.open.is_empty() => {
                    if self.open.pop() != Some(b) {
                        return Err(self.invalid("a matching bracket", i));
                    }
                    if self.open.is_empty() {
                        self.reset();
                        return Ok(Some(i + 1));
                    }
                }
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ if self.open.is_empty() => {
                    return Err(self.invalid("`[`, the start of a JSON message", i));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    #[cold]
    fn invalid(&self, expected: &'static str, offset: usize) -> DecodeError {
        DecodeError::new(DecodeErrorKind::InvalidJson { expected, offset })
    }
}

/// The length of the JSON message at the start of `buf` (see [`MessageScanner`], which
/// this runs once from the start): `Ok(None)` when `buf` holds only part of it.
pub fn message_len(
    buf: &[u8],
    limits: DecodeLimits,
    max_len: usize,
) -> Result<Option<usize>, DecodeError> {
    MessageScanner::new(limits, max_len).scan(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        message_len(buf, DecodeLimits::default(), 1 << 20)
    }

    fn kind(r: Result<Option<usize>, DecodeError>) -> DecodeErrorKind {
        r.unwrap_err().kind().clone()
    }

    #[test]
    fn brackets_inside_strings_and_escaped_quotes_do_not_count() {
        let msg = br#"[1,"a]\"[",1,0,{"1":{"str":"}\\"},"2":{"lst":["str",1,"]"]}}]"#;
        assert_eq!(len(msg).unwrap(), Some(msg.len()));
        let mut more = msg.to_vec();
        more.extend_from_slice(b"[1,");
        assert_eq!(len(&more).unwrap(), Some(msg.len()));
        for cut in 0..msg.len() {
            assert_eq!(len(&msg[..cut]).unwrap(), None, "prefix of {cut} bytes");
        }
    }

    #[test]
    fn leading_whitespace_belongs_to_the_message() {
        assert_eq!(len(b" \r\n\t[1]").unwrap(), Some(7));
        assert_eq!(len(b"  ").unwrap(), None);
    }

    #[test]
    fn a_scan_in_pieces_gives_the_same_end() {
        let msg = br#"[1,"x",1,0,{"1":{"rec":{"1":{"str":"\\\""}}}}]"#;
        let mut s = MessageScanner::new(DecodeLimits::default(), 1 << 20);
        for cut in 1..msg.len() {
            assert_eq!(s.scan(&msg[..cut]).unwrap(), None);
        }
        assert_eq!(s.scan(msg).unwrap(), Some(msg.len()));
    }

    #[test]
    fn malformed_input_and_limits_are_errors() {
        assert!(matches!(
            kind(len(b"{}")),
            DecodeErrorKind::InvalidJson { offset: 0, .. }
        ));
        assert!(matches!(
            kind(len(b" x")),
            DecodeErrorKind::InvalidJson { offset: 1, .. }
        ));
        assert!(matches!(
            kind(len(b"[1,{]")),
            DecodeErrorKind::InvalidJson { offset: 4, .. }
        ));
        let limits = DecodeLimits {
            max_depth: 2,
            ..DecodeLimits::default()
        };
        assert_eq!(message_len(b"[[[[[]]]]]", limits, 100).unwrap(), Some(10));
        assert_eq!(
            kind(message_len(b"[[[[[[", limits, 100)),
            DecodeErrorKind::DepthLimitExceeded(5)
        );
        assert_eq!(
            kind(message_len(b"[1,\"xxxxxxxx", DecodeLimits::default(), 8)),
            DecodeErrorKind::SizeLimitExceeded { size: 9, limit: 8 }
        );
        assert_eq!(
            message_len(b"[12345]", DecodeLimits::default(), 7).unwrap(),
            Some(7)
        );
    }
}
