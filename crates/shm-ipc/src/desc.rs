//! Message descriptors: what travels through the descriptor ring, 16 bytes each.
//!
//! ```text
//! word 0: kind u8 | flags u8 | reserved u16 (zero) | stream id u32
//! word 1: slice index u32 | length u32
//! ```
//!
//! A message is one or more `Data` descriptors on the same stream, all but the last
//! flagged `MORE`, each naming one slice of the sender's region. `Empty` is a message of
//! no bytes (no slice), `Socket` says that the message's bytes follow on the socket (the
//! exhaustion fallback), `Close` ends the sender's half of a stream.
//!
//! [`Desc::decode`] is the only way from ring words to a descriptor and checks every
//! field against the sender's layout, so what comes out needs no further bounds check.

use crate::error::Violation;
use crate::layout::Layout;

const KIND_DATA: u8 = 1;
const KIND_EMPTY: u8 = 2;
const KIND_SOCKET: u8 = 3;
const KIND_CLOSE: u8 = 4;
const FLAG_MORE: u8 = 1;

/// A checked descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Desc {
    /// `len` bytes (1..=slice size) at the start of slice `slice`; `more`: the message goes on.
    Data {
        stream: u32,
        slice: u32,
        len: u32,
        more: bool,
    },
    /// The end of a message with no bytes in this descriptor.
    Empty { stream: u32 },
    /// A whole message of `len` bytes, sent on the socket in a data frame.
    Socket { stream: u32, len: u32 },
    /// The sender will send nothing more on this stream.
    Close { stream: u32 },
}

impl Desc {
    #[cfg(test)]
    pub(crate) fn stream(&self) -> u32 {
        match *self {
            Desc::Data { stream, .. }
            | Desc::Empty { stream }
            | Desc::Socket { stream, .. }
            | Desc::Close { stream } => stream,
        }
    }

    /// The same descriptor for stream `id`.
    pub(crate) fn with_stream(mut self, id: u32) -> Desc {
        match &mut self {
            Desc::Data { stream, .. }
            | Desc::Empty { stream }
            | Desc::Socket { stream, .. }
            | Desc::Close { stream } => *stream = id,
        }
        self
    }

    pub(crate) fn encode(&self) -> [u64; 2] {
        let w0 = |kind: u8, flags: u8, stream: u32| {
            u64::from(kind) | (u64::from(flags) << 8) | (u64::from(stream) << 32)
        };
        let w1 = |slice: u32, len: u32| u64::from(slice) | (u64::from(len) << 32);
        match *self {
            Desc::Data {
                stream,
                slice,
                len,
                more,
            } => [
                w0(KIND_DATA, if more { FLAG_MORE } else { 0 }, stream),
                w1(slice, len),
            ],
            Desc::Empty { stream } => [w0(KIND_EMPTY, 0, stream), 0],
            Desc::Socket { stream, len } => [w0(KIND_SOCKET, 0, stream), w1(0, len)],
            Desc::Close { stream } => [w0(KIND_CLOSE, 0, stream), 0],
        }
    }

    /// Decodes words read from the ring (already copied into locals) and checks them
    /// against the sender's `layout` and our `max_len`.
    pub(crate) fn decode(
        words: [u64; 2],
        layout: &Layout,
        max_len: u32,
    ) -> Result<Desc, Violation> {
        let kind = words[0] as u8;
        let flags = (words[0] >> 8) as u8;
        let reserved = (words[0] >> 16) as u16;
        let stream = (words[0] >> 32) as u32;
        let slice = words[1] as u32;
        let len = (words[1] >> 32) as u32;
        if reserved != 0 || flags & !FLAG_MORE != 0 {
            return Err(Violation::Descriptor("unknown flags"));
        }
        if stream == 0 {
            return Err(Violation::Descriptor("stream id 0"));
        }
        let more = flags & FLAG_MORE != 0;
        let no_extra = |d: Desc| {
            if more {
                Err(Violation::Descriptor(
                    "MORE on a descriptor that ends a message",
                ))
            } else {
                Ok(d)
            }
        };
        match kind {
            KIND_DATA => {
                let (_, cap) = layout
                    .slice(slice)
                    .ok_or(Violation::Descriptor("slice index out of range"))?;
                if len == 0 || len > cap {
                    return Err(Violation::Descriptor("length does not fit the slice"));
                }
                Ok(Desc::Data {
                    stream,
                    slice,
                    len,
                    more,
                })
            }
            KIND_EMPTY | KIND_CLOSE if words[1] != 0 => Err(Violation::Descriptor(
                "slice or length on a control descriptor",
            )),
            KIND_EMPTY => no_extra(Desc::Empty { stream }),
            KIND_CLOSE => no_extra(Desc::Close { stream }),
            KIND_SOCKET => {
                if slice != 0 {
                    return Err(Violation::Descriptor("slice on a socket descriptor"));
                }
                if len > max_len {
                    return Err(Violation::Descriptor("message over the length limit"));
                }
                no_extra(Desc::Socket { stream, len })
            }
            _ => Err(Violation::Descriptor("unknown kind")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::ClassSpec;
    use proptest::prelude::*;

    fn layout() -> Layout {
        Layout::new(
            4,
            &[
                ClassSpec { size: 64, count: 2 },
                ClassSpec {
                    size: 128,
                    count: 1,
                },
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trip() {
        let l = layout();
        for d in [
            Desc::Data {
                stream: 7,
                slice: 2,
                len: 128,
                more: true,
            },
            Desc::Data {
                stream: u32::MAX,
                slice: 0,
                len: 1,
                more: false,
            },
            Desc::Empty { stream: 2 },
            Desc::Socket {
                stream: 3,
                len: 1000,
            },
            Desc::Close { stream: 4 },
        ] {
            assert_eq!(Desc::decode(d.encode(), &l, 1 << 20), Ok(d));
        }
    }

    #[test]
    fn rejects_lies() {
        let l = layout();
        let bad = |d: Desc| Desc::decode(d.encode(), &l, 1000).is_err();
        let data = |stream, slice, len| Desc::Data {
            stream,
            slice,
            len,
            more: false,
        };
        assert!(bad(data(1, 3, 1)), "slice past the last");
        assert!(bad(data(1, u32::MAX, 1)));
        assert!(bad(data(1, 0, 65)), "longer than its slice");
        assert!(bad(data(1, 0, 0)), "empty data");
        assert!(bad(data(0, 0, 1)), "stream 0");
        assert!(bad(Desc::Socket {
            stream: 1,
            len: 1001
        }));
        let mut w = Desc::Close { stream: 1 }.encode();
        w[1] = 5;
        assert!(Desc::decode(w, &l, 1000).is_err());
        let mut w = Desc::Close { stream: 1 }.encode();
        w[0] |= 1 << 8;
        assert!(Desc::decode(w, &l, 1000).is_err(), "MORE on close");
        let mut w = Desc::Empty { stream: 1 }.encode();
        w[0] |= 1 << 20;
        assert!(Desc::decode(w, &l, 1000).is_err(), "reserved bits");
        assert!(Desc::decode([9 | (1 << 32), 0], &l, 1000).is_err(), "kind");
    }

    proptest! {
        #[test]
        fn any_words_decode_to_something_in_bounds(w0: u64, w1: u64) {
            let l = layout();
            if let Ok(d) = Desc::decode([w0, w1], &l, 4096) {
                prop_assert!(d.stream() != 0);
                match d {
                    Desc::Data { slice, len, .. } => {
                        let (off, cap) = l.slice(slice).unwrap();
                        prop_assert!(len >= 1 && len <= cap);
                        prop_assert!(off + len as usize <= l.total);
                    }
                    Desc::Socket { len, .. } => prop_assert!(len <= 4096),
                    _ => {}
                }
                prop_assert_eq!(Desc::decode(d.encode(), &l, 4096), Ok(d));
            }
        }
    }
}
