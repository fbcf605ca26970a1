//! `Utf8Bytes`: a string that shares the frame it was decoded from.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

/// An immutable UTF-8 string backed by [`Bytes`].
///
/// Decoding a Thrift `string` yields a slice of the input frame: no copy, one reference
/// count. The bytes are validated once, when the value is made, so `Deref<Target = str>`
/// is free afterwards. Cloning is a reference-count increment.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// An empty string.
    pub const fn new() -> Self {
        Utf8Bytes(Bytes::new())
    }

    /// A string over static text, without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Utf8Bytes(Bytes::from_static(s.as_bytes()))
    }

    /// Validates `bytes` as UTF-8 (with SIMD where the CPU has it) and wraps them.
    #[inline]
    pub fn try_from_bytes(bytes: Bytes) -> Result<Self, Bytes> {
        if simdutf8::basic::from_utf8(&bytes).is_ok() {
            Ok(Utf8Bytes(bytes))
        } else {
            Err(bytes)
        }
    }

    /// Wraps `bytes` without checking them: for bytes checked as UTF-8 before, such as
    /// a span of a frame validated when it was read.
    ///
    /// # Safety
    ///
    /// `bytes` must be valid UTF-8.
    #[inline]
    pub unsafe fn from_bytes_unchecked(bytes: Bytes) -> Self {
        Utf8Bytes(bytes)
    }

    /// The string.
    #[inline]
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor either validates the bytes as UTF-8
        // (`try_from_bytes`), takes them from a `str`/`String`, or is
        // `from_bytes_unchecked`, whose caller promises UTF-8, and the bytes are
        // immutable afterwards, so they are UTF-8 for the life of the value.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The underlying bytes (a reference-count increment, no copy).
    #[inline]
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Gives back the underlying bytes.
    #[inline]
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// The text after its first `at` bytes, sharing the same memory (no copy); `None`
    /// when `at` is past the end or inside a character.
    pub fn slice_from(&self, at: usize) -> Option<Utf8Bytes> {
        // A slice of UTF-8 text that starts on a character boundary is UTF-8 text.
        self.as_str()
            .is_char_boundary(at)
            .then(|| Utf8Bytes(self.0.slice(at..)))
    }
}

impl Deref for Utf8Bytes {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Utf8Bytes {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Utf8Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<str> for Utf8Bytes {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// `Hash` must agree with `Borrow<str>`: hash as the `str` does.
impl Hash for Utf8Bytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Utf8Bytes(Bytes::from(s))
    }
}

impl From<&'static str> for Utf8Bytes {
    fn from(s: &'static str) -> Self {
        Utf8Bytes::from_static(s)
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(s: Utf8Bytes) -> Bytes {
        s.0
    }
}

impl TryFrom<Bytes> for Utf8Bytes {
    type Error = Bytes;
    fn try_from(b: Bytes) -> Result<Self, Bytes> {
        Utf8Bytes::try_from_bytes(b)
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_from_keeps_whole_characters_and_shares_memory() {
        let s = Utf8Bytes::from("RPC_héllo");
        let tail = s.slice_from(4).unwrap();
        assert_eq!(tail, "héllo");
        assert_eq!(tail.as_bytes().as_ptr(), s.as_bytes()[4..].as_ptr());
        assert_eq!(s.slice_from(s.len()).unwrap(), "");
        assert_eq!(s.slice_from(6), None, "inside the two bytes of 'é'");
        assert_eq!(s.slice_from(s.len() + 1), None);
    }

    #[test]
    fn validates_on_construction_and_derefs_after() {
        let ok = Utf8Bytes::try_from_bytes(Bytes::from_static("héllo".as_bytes())).unwrap();
        assert_eq!(&*ok, "héllo");
        assert_eq!(ok.len(), 6);
        let bad = Bytes::from_static(&[0x68, 0xff, 0x6c]);
        assert_eq!(Utf8Bytes::try_from_bytes(bad.clone()), Err(bad));
    }

    #[test]
    fn unchecked_wraps_checked_bytes_without_copying() {
        let frame = Bytes::from(b"xx\xc3\xa9t\xffyy".to_vec());
        let checked = frame.slice(2..5);
        assert!(std::str::from_utf8(&checked).is_ok());
        // SAFETY: `checked` was just checked as UTF-8.
        let s = unsafe { Utf8Bytes::from_bytes_unchecked(checked) };
        assert_eq!(s.as_str(), "\u{e9}t");
        assert_eq!(s.as_bytes().as_ptr(), frame[2..].as_ptr());
    }

    #[test]
    fn hash_matches_str_for_map_lookups() {
        let mut m = std::collections::HashMap::new();
        m.insert(Utf8Bytes::from(String::from("key")), 1);
        assert_eq!(m.get("key"), Some(&1));
    }
}
