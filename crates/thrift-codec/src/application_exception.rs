//! `TApplicationException`: the error a server sends when no IDL exception applies.

use std::fmt;

use crate::error::DecodeError;
use crate::message::Message;
use crate::protocol::{Decoder, Encoder, Sizer};
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

/// The kind of an [`ApplicationException`]: the ids Apache Thrift defines (0 to 10).
/// Other values read from the wire are kept in `Other`, not rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApplicationExceptionKind {
    /// 0: unknown.
    Unknown,
    /// 1: the server has no such method.
    UnknownMethod,
    /// 2: the message type made no sense.
    InvalidMessageType,
    /// 3: the reply named another method.
    WrongMethodName,
    /// 4: the reply's sequence id matched no call.
    BadSequenceId,
    /// 5: the result struct held neither success nor a declared exception.
    MissingResult,
    /// 6: the handler failed (or panicked).
    InternalError,
    /// 7: the request could not be decoded.
    ProtocolError,
    /// 8: a transform (e.g. compression) is not supported.
    InvalidTransform,
    /// 9: the protocol is not supported.
    InvalidProtocol,
    /// 10: the client type is not supported.
    UnsupportedClientType,
    /// Any other id.
    Other(i32),
}

impl ApplicationExceptionKind {
    /// The wire id.
    pub fn id(self) -> i32 {
        match self {
            Self::Unknown => 0,
            Self::UnknownMethod => 1,
            Self::InvalidMessageType => 2,
            Self::WrongMethodName => 3,
            Self::BadSequenceId => 4,
            Self::MissingResult => 5,
            Self::InternalError => 6,
            Self::ProtocolError => 7,
            Self::InvalidTransform => 8,
            Self::InvalidProtocol => 9,
            Self::UnsupportedClientType => 10,
            Self::Other(id) => id,
        }
    }

    /// The variant's name (`UnknownMethod`, `InternalError`...), for logs and span
    /// fields; `Other` for any id beyond the defined ones.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::UnknownMethod => "UnknownMethod",
            Self::InvalidMessageType => "InvalidMessageType",
            Self::WrongMethodName => "WrongMethodName",
            Self::BadSequenceId => "BadSequenceId",
            Self::MissingResult => "MissingResult",
            Self::InternalError => "InternalError",
            Self::ProtocolError => "ProtocolError",
            Self::InvalidTransform => "InvalidTransform",
            Self::InvalidProtocol => "InvalidProtocol",
            Self::UnsupportedClientType => "UnsupportedClientType",
            Self::Other(_) => "Other",
        }
    }

    /// The kind for a wire id.
    pub fn from_id(id: i32) -> Self {
        match id {
            0 => Self::Unknown,
            1 => Self::UnknownMethod,
            2 => Self::InvalidMessageType,
            3 => Self::WrongMethodName,
            4 => Self::BadSequenceId,
            5 => Self::MissingResult,
            6 => Self::InternalError,
            7 => Self::ProtocolError,
            8 => Self::InvalidTransform,
            9 => Self::InvalidProtocol,
            10 => Self::UnsupportedClientType,
            other => Self::Other(other),
        }
    }
}

/// `TApplicationException { 1: string message, 2: i32 type }`, sent in a message of type
/// [`Exception`](crate::MessageType::Exception).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplicationException {
    /// What happened, for people.
    pub message: Utf8Bytes,
    /// What happened, for programs.
    pub kind: ApplicationExceptionKind,
}

impl ApplicationException {
    /// An exception of `kind` with `message`.
    pub fn new(kind: ApplicationExceptionKind, message: impl Into<Utf8Bytes>) -> Self {
        ApplicationException {
            message: message.into(),
            kind,
        }
    }
}

impl Default for ApplicationException {
    fn default() -> Self {
        ApplicationException::new(ApplicationExceptionKind::Unknown, Utf8Bytes::new())
    }
}

impl fmt::Display for ApplicationException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application exception {:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ApplicationException {}

const NAME: &str = "TApplicationException";

impl Message for ApplicationException {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        s.field_begin_len(TType::Binary, 1)
            + s.string_value_len(&self.message)
            + s.field_begin_len(TType::I32, 2)
            + s.i32_len(self.kind.id())
            + s.struct_end_len(saved)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        e.write_field_begin(TType::Binary, 1);
        e.write_string(&self.message);
        e.write_field_begin(TType::I32, 2);
        e.write_i32(self.kind.id());
        e.write_struct_end(saved);
    }

    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut out = ApplicationException::default();
        loop {
            let field = d.read_field_begin()?;
            match (field.id, field.ty) {
                (_, TType::Stop) => break,
                (1, TType::Binary) => {
                    out.message = d.read_string().map_err(|e| e.push(NAME, "message"))?
                }
                (2, TType::I32) => {
                    out.kind = ApplicationExceptionKind::from_id(
                        d.read_i32().map_err(|e| e.push(NAME, "type"))?,
                    )
                }
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_defined_kind_is_named_after_its_variant() {
        for id in 0..=10 {
            let kind = ApplicationExceptionKind::from_id(id);
            assert_eq!(kind.name(), format!("{kind:?}"), "id {id}");
        }
        assert_eq!(ApplicationExceptionKind::from_id(42).name(), "Other");
        assert_eq!(ApplicationExceptionKind::from_id(-1).name(), "Other");
    }
}
