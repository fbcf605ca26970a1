//! The key-value lists of a TTHeader ([`StrPairs`], [`IntPairs`]): strings read from a
//! frame stay where they are, as checked spans of one shared copy of the frame.
//!
//! A request's TTHeader carries ten or so strings (Kitex's client sends eight integer
//! keys and the service name). Decoding each into a `Utf8Bytes` of its own costs a
//! reference-count increment and, when the header is dropped or reused, a decrement:
//! twenty atomic operations per call for strings the server mostly never reads. A list
//! here holds the frame once and each decoded string as an offset and a length,
//! checked as UTF-8 when read; a `Utf8Bytes` is made only for a string that is kept
//! (a metainfo value, [`StrPair::value_shared`]). Strings pushed by the caller (a
//! request or reply being built) are `Utf8Bytes` as before.

use std::fmt;

use bytes::Bytes;
use thrift_wire::Utf8Bytes;

use super::header::{HeaderError, Reader};

/// A string of a list: a span of the list's frame, checked as UTF-8 when it was read,
/// or a string of its own.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Span { at: u32, len: u32 },
    Own(Utf8Bytes),
}

impl Text {
    /// The string, where `src` is the frame of the list holding it.
    fn as_str<'a>(&'a self, src: &'a Bytes) -> &'a str {
        match &self.0 {
            Repr::Own(s) => s.as_str(),
            Repr::Span { at, len } => {
                let (at, len) = (*at as usize, *len as usize);
                let bytes = &src[at..at + len];
                // SAFETY: a span is made only by `read_pair` (of either list) from
                // `Reader::utf8_span_u16`, which checked these bytes of this list's
                // `src` as UTF-8, and `src` is immutable (`Bytes`) and replaced only by `reset`,
                // which drops every span first. So the bytes are the checked ones.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
        }
    }

    /// The string as a `Utf8Bytes`: a slice of `src` (one reference count) or a clone.
    fn shared(&self, src: &Bytes) -> Utf8Bytes {
        match &self.0 {
            Repr::Own(s) => s.clone(),
            Repr::Span { at, len } => {
                let (at, len) = (*at as usize, *len as usize);
                let bytes = src.slice(at..at + len);
                // SAFETY: as in `as_str`: these bytes of `src` were checked as UTF-8
                // when the span was made, and `src` has not changed since.
                unsafe { Utf8Bytes::from_bytes_unchecked(bytes) }
            }
        }
    }
}

/// A list of pairs read from one frame (`src`) or pushed one by one.
#[derive(Clone, Default)]
pub struct Pairs<K> {
    src: Bytes,
    list: Vec<(K, Text)>,
}

/// String key-value pairs, in order.
pub type StrPairs = Pairs<Text>;

/// Integer-key pairs, in order.
pub type IntPairs = Pairs<u16>;

impl<K> Pairs<K> {
    /// An empty list.
    pub fn new() -> Self {
        Pairs {
            src: Bytes::new(),
            list: Vec::new(),
        }
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// No pairs.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Removes every pair, keeping the list's capacity, and lets go of the frame.
    pub fn clear(&mut self) {
        self.list.clear();
        self.src = Bytes::new();
    }

    /// Empties the list to read pairs of `src` (spans of the old frame go first).
    pub(crate) fn reset(&mut self, src: &Bytes) {
        self.list.clear();
        self.src = src.clone();
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.list.reserve(n);
    }
}

impl StrPairs {
    /// Appends a pair.
    pub fn push(&mut self, (key, value): (Utf8Bytes, Utf8Bytes)) {
        self.list
            .push((Text(Repr::Own(key)), Text(Repr::Own(value))));
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone + '_ {
        self.list
            .iter()
            .map(|(k, v)| (k.as_str(&self.src), v.as_str(&self.src)))
    }

    /// The pairs, each able to give its strings as `Utf8Bytes` (for the ones kept).
    pub fn pairs(&self) -> impl ExactSizeIterator<Item = StrPair<'_>> + Clone + '_ {
        self.list.iter().map(|(key, value)| StrPair {
            src: &self.src,
            key,
            value,
        })
    }

    /// The value of the first pair with key `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Reads one pair at `h` (two u16-length strings).
    pub(crate) fn read_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        let key = span(h.utf8_span_u16("string key")?);
        let value = span(h.utf8_span_u16("string value")?);
        self.list.push((key, value));
        Ok(())
    }
}

impl IntPairs {
    /// Appends a pair.
    pub fn push(&mut self, (key, value): (u16, Utf8Bytes)) {
        self.list.push((key, Text(Repr::Own(value))));
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u16, &str)> + Clone + '_ {
        self.list.iter().map(|(k, v)| (*k, v.as_str(&self.src)))
    }

    /// The value of the first pair with key `key`.
    pub fn get(&self, key: u16) -> Option<&str> {
        self.value_of(key).map(|v| v.as_str(&self.src))
    }

    /// The value of the first pair with key `key`, as a `Utf8Bytes`.
    pub fn get_shared(&self, key: u16) -> Option<Utf8Bytes> {
        self.value_of(key).map(|v| v.shared(&self.src))
    }

    fn value_of(&self, key: u16) -> Option<&Text> {
        self.list.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Reads one pair at `h` (a u16 key, a u16-length string).
    pub(crate) fn read_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        let key = h.u16("integer key")?;
        let value = span(h.utf8_span_u16("integer-key value")?);
        self.list.push((key, value));
        Ok(())
    }
}

/// A span `(at, len)` of the frame being read (a TTHeader's header lies within its
/// first 14 + 4 × 65,535 bytes, so both fit in u32).
fn span((at, len): (usize, usize)) -> Text {
    Text(Repr::Span {
        at: at as u32,
        len: len as u32,
    })
}

/// One pair of a [`StrPairs`].
#[derive(Clone, Copy)]
pub struct StrPair<'a> {
    src: &'a Bytes,
    key: &'a Text,
    value: &'a Text,
}

impl fmt::Debug for StrPair<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StrPair")
            .field(&self.key())
            .field(&self.value())
            .finish()
    }
}

impl StrPair<'_> {
    /// The key.
    pub fn key(&self) -> &str {
        self.key.as_str(self.src)
    }

    /// The value.
    pub fn value(&self) -> &str {
        self.value.as_str(self.src)
    }

    /// The key as a `Utf8Bytes` sharing the frame (one reference count, no copy).
    pub fn key_shared(&self) -> Utf8Bytes {
        self.key.shared(self.src)
    }

    /// The value as a `Utf8Bytes` sharing the frame (one reference count, no copy).
    pub fn value_shared(&self) -> Utf8Bytes {
        self.value.shared(self.src)
    }
}

impl Extend<(Utf8Bytes, Utf8Bytes)> for StrPairs {
    fn extend<I: IntoIterator<Item = (Utf8Bytes, Utf8Bytes)>>(&mut self, iter: I) {
        for pair in iter {
            self.push(pair);
        }
    }
}

impl Extend<(u16, Utf8Bytes)> for IntPairs {
    fn extend<I: IntoIterator<Item = (u16, Utf8Bytes)>>(&mut self, iter: I) {
        for pair in iter {
            self.push(pair);
        }
    }
}

impl<K, T> FromIterator<T> for Pairs<K>
where
    Pairs<K>: Extend<T>,
{
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut pairs = Pairs::new();
        pairs.extend(iter);
        pairs
    }
}

impl<K, T> From<Vec<T>> for Pairs<K>
where
    Pairs<K>: Extend<T>,
{
    fn from(list: Vec<T>) -> Self {
        list.into_iter().collect()
    }
}

impl PartialEq for StrPairs {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for StrPairs {}

impl PartialEq for IntPairs {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for IntPairs {}

impl fmt::Debug for StrPairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl fmt::Debug for IntPairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Own(s) => fmt::Debug::fmt(s.as_str(), f),
            Repr::Span { at, len } => write!(f, "span({at}, {len})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Protocol;
    use crate::codec::header::HeaderLimits;
    use crate::codec::ttheader::{Header, int_key};

    fn s(v: &'static str) -> Utf8Bytes {
        Utf8Bytes::from_static(v)
    }

    /// A request header as Kitex's client fills one, encoded with a 3-byte payload.
    fn frame() -> (Header, Bytes) {
        let mut h = Header::new(7, Protocol::Binary);
        h.str_kv.push((s("RPC_PERSIST_logid"), s("L-\u{e9}42")));
        h.str_kv.push((s("isn"), s("EchoService")));
        h.int_kv.push((int_key::TO_METHOD, s("echo")));
        h.int_kv.push((int_key::RPC_TIMEOUT, s("500")));
        h.acl_token = Some(s("tok"));
        let mut out = Vec::new();
        h.write(3, &mut out).expect("writes");
        out.extend_from_slice(b"abc");
        (h, Bytes::from(out))
    }

    #[test]
    fn decoded_strings_read_back_as_spans_of_the_frame() {
        let (sent, frame) = frame();
        let mut got = Header::new(0, Protocol::Compact);
        let payload = got
            .decode_into(&frame, &HeaderLimits::default())
            .expect("decodes");
        assert_eq!(got, sent);
        assert_eq!(&payload[..], b"abc");
        assert_eq!(
            got.str_kv.iter().collect::<Vec<_>>(),
            [("RPC_PERSIST_logid", "L-\u{e9}42"), ("isn", "EchoService")]
        );
        assert_eq!(got.int_value(int_key::RPC_TIMEOUT), Some("500"));
        assert_eq!(got.str_value("isn"), Some("EchoService"));
        assert_eq!(got.int_kv.get(int_key::FROM_SERVICE), None);
        // A string taken out shares the frame's memory: no copy.
        let range = frame.as_ptr_range();
        let timeout = got
            .int_kv
            .get_shared(int_key::RPC_TIMEOUT)
            .expect("present");
        assert_eq!(timeout, "500");
        assert!(range.contains(&timeout.as_bytes().as_ptr()));
        let logid = got.str_kv.pairs().next().expect("one pair");
        assert_eq!(logid.key(), "RPC_PERSIST_logid");
        assert_eq!(logid.value_shared(), "L-\u{e9}42");
        assert!(range.contains(&logid.key_shared().as_bytes().as_ptr()));
        assert!(range.contains(&logid.value_shared().as_bytes().as_ptr()));
    }

    #[test]
    fn the_lists_hold_the_frame_once_and_let_it_go_when_cleared() {
        let (_, frame) = frame();
        let mut got = Header::new(0, Protocol::Binary);
        let payload = got
            .decode_into(&frame, &HeaderLimits::default())
            .expect("decodes");
        drop(payload);
        let token = got.acl_token.take();
        drop(token);
        // Four strings and two keys decoded; each list holds one reference.
        got.str_kv.clear();
        assert!(!frame.is_unique(), "the integer pairs still hold it");
        got.int_kv.clear();
        assert!(frame.is_unique(), "nothing else holds the frame");
        assert!(got.str_kv.is_empty() && got.int_kv.is_empty());
    }

    #[test]
    fn decoding_again_replaces_spans_and_pushed_strings_mix_with_them() {
        let (sent, frame) = frame();
        let mut h = Header::new(0, Protocol::Binary);
        h.decode_into(&frame, &HeaderLimits::default())
            .expect("decodes");
        h.int_kv.push((int_key::MSG_TYPE, s("1")));
        assert_eq!(
            h.int_kv.iter().collect::<Vec<_>>(),
            [
                (int_key::TO_METHOD, "echo"),
                (int_key::RPC_TIMEOUT, "500"),
                (int_key::MSG_TYPE, "1")
            ]
        );
        // Written back: the spans and the pushed string, byte for byte as if pushed.
        let mut again = sent.clone();
        again.int_kv.push((int_key::MSG_TYPE, s("1")));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        h.write(0, &mut a).expect("writes");
        again.write(0, &mut b).expect("writes");
        assert_eq!(a, b);

        // A second frame, shorter: nothing of the first stays.
        let mut small = Header::new(9, Protocol::Binary);
        small.int_kv.push((int_key::TO_METHOD, s("x")));
        let mut out = Vec::new();
        small.write(0, &mut out).expect("writes");
        h.decode_into(&Bytes::from(out), &HeaderLimits::default())
            .expect("decodes");
        assert_eq!(h, small);
    }

    #[test]
    fn a_string_that_is_not_utf8_is_refused_where_it_lies() {
        let (_, frame) = frame();
        let mut bytes = frame.to_vec();
        let at = bytes
            .windows(3)
            .position(|w| w == b"500")
            .expect("the timeout value");
        bytes[at] = 0xff;
        let err =
            Header::decode(&Bytes::from(bytes), &HeaderLimits::default()).expect_err("refused");
        assert_eq!(err, HeaderError::InvalidUtf8("integer-key value"));
    }
}
