//! Where a JSON value stands: the context state machine that the writer, the sizer (a
//! writer into a counter) and the reader share, so that all three put and expect the
//! same separators and closing brackets.

/// One open JSON container, innermost last on a stack.
///
/// Closers are inferred, never asked for: a container closes once its declared count of
/// values is complete, a message once its body is, and a field when the next field
/// header or its struct's end comes. So the [`Encoder`](crate::Encoder) and
/// [`Decoder`](crate::Decoder) traits need no end-of-value hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// A struct's object of fields; `field_open` once a field's `{"type":` is written
    /// and its closing `}` still due.
    Struct { field_open: bool },
    /// A list or set after its header: `left` elements to come, each after a `,`.
    List { left: usize },
    /// A map's object of entries: `left` entries whose value is still to come; the next
    /// value is a key unless `value_next`; `first` until the first key.
    Map {
        left: usize,
        value_next: bool,
        first: bool,
    },
    /// A message after its header (and the `,` that ends it): its body to come, then `]`.
    Message { body_begun: bool },
}

/// What comes before a value: a separator, and whether the value is a map key (whose
/// numbers are quoted, JSON keys being strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) separator: Option<u8>,
    pub(super) key: bool,
}

impl Frame {
    /// The frame a list or set header opens.
    pub(super) fn list(len: usize) -> Frame {
        Frame::List { left: len }
    }

    /// The frame a map header opens.
    pub(super) fn map(len: usize) -> Frame {
        Frame::Map {
            left: len,
            value_next: false,
            first: true,
        }
    }

    /// Moves on to the next value inside this frame and says what precedes it.
    pub(super) fn next_value(&mut self) -> Slot {
        let (separator, key) = match self {
            // A field's value follows its `{"type":` directly; so does a message body its
            // header's `,`.
            Frame::Struct { .. } => (None, false),
            Frame::Message { body_begun } => {
                *body_begun = true;
                (None, false)
            }
            // Every element follows the header's count or another element.
            Frame::List { left } => {
                *left = left.saturating_sub(1);
                (Some(b','), false)
            }
            Frame::Map {
                left,
                value_next,
                first,
            } => {
                if *value_next {
                    *value_next = false;
                    *left = left.saturating_sub(1);
                    (Some(b':'), false)
                } else {
                    *value_next = true;
                    let separator = (!*first).then_some(b',');
                    *first = false;
                    (separator, true)
                }
            }
        };
        Slot { separator, key }
    }

    /// The bytes that close this frame, once every value it holds is complete (checked
    /// after each value).
    pub(super) fn closer(&self) -> Option<&'static [u8]> {
        match *self {
            Frame::List { left: 0 } => Some(b"]"),
            Frame::Map {
                left: 0,
                value_next: false,
                ..
            } => Some(b"}]"),
            Frame::Message { body_begun: true } => Some(b"]"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_put_a_comma_before_each_element_and_close_after_the_last() {
        let mut f = Frame::list(2);
        assert_eq!(f.closer(), None);
        assert_eq!(f.next_value().separator, Some(b','));
        assert_eq!(f.closer(), None);
        assert_eq!(f.next_value().separator, Some(b','));
        assert_eq!(f.closer(), Some(&b"]"[..]));
        assert_eq!(Frame::list(0).closer(), Some(&b"]"[..]));
    }

    #[test]
    fn maps_alternate_keys_and_values() {
        let mut f = Frame::map(2);
        let slots: Vec<Slot> = (0..4).map(|_| f.next_value()).collect();
        let key = |separator| Slot {
            separator,
            key: true,
        };
        let value = Slot {
            separator: Some(b':'),
            key: false,
        };
        assert_eq!(slots, [key(None), value, key(Some(b',')), value]);
        assert_eq!(f.closer(), Some(&b"}]"[..]));
        assert_eq!(Frame::map(0).closer(), Some(&b"}]"[..]));
    }

    #[test]
    fn a_message_closes_after_its_body() {
        let mut f = Frame::Message { body_begun: false };
        assert_eq!(f.closer(), None);
        f.next_value();
        assert_eq!(f.closer(), Some(&b"]"[..]));
    }
}
