//! Field paths over encoded messages: read or replace one value of a large message
//! without decoding the rest.
//!
//! A router that picks a backend by `req.user.region`, or a proxy that redacts
//! `req.card.number`, touches one field of a message that may be tens of kilobytes.
//! Decoding it whole allocates and validates everything only to look at one value. Here
//! a path is parsed once ([`FieldPath`]), checked against a [`Descriptor`] once
//! ([`ResolvedPath`]: field ids and expected types, so that no name is looked up
//! per message), and then walks the encoded bytes of each message, stepping over every
//! field and element it does not need.
//!
//! ```
//! use thrift_wire::Binary;
//! use thrift_dynamic::Descriptor;
//! use thrift_dynamic::path::FieldPath;
//!
//! let d = Descriptor::from_text("shop.thrift", r#"
//!     struct Item { 1: string name, 2: i64 price }
//!     struct Order { 1: i64 id, 2: list<Item> items, 3: map<string, i32> stock }
//! "#)?;
//! let path: FieldPath = "items[1].name".parse()?;
//! let resolved = path.resolve(&d, d.struct_named("Order").unwrap())?;
//!
//! // Order { id: 7, items: [Item { "pen", 2 }, Item { "ink", 9 }] }, Binary protocol.
//! let mut order = vec![10, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 15, 0, 2, 12, 0, 0, 0, 2];
//! order.extend([11, 0, 1, 0, 0, 0, 3, b'p', b'e', b'n', 10, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
//! order.extend([11, 0, 1, 0, 0, 0, 3, b'i', b'n', b'k', 10, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0]);
//! order.push(0);
//!
//! let name = resolved.read::<Binary>(&order)?.expect("items[1] is there");
//! assert_eq!(name.str()?, "ink");
//!
//! // The same message with a new name, the rest copied as it was.
//! let mut out = Vec::new();
//! resolved.replace_str::<Binary>(&order, "quill", &mut out)?;
//! let back = resolved.read::<Binary>(&out)?.unwrap();
//! assert_eq!(back.str()?, "quill");
//! assert_eq!(out.len(), order.len() + 2);
//!
//! // A field the message does not carry is `None`, not an error.
//! let stock = FieldPath::parse("stock[\"pen\"]")?.resolve(&d, d.struct_named("Order").unwrap())?;
//! assert!(stock.read::<Binary>(&order)?.is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The path grammar
//!
//! ```text
//! path      = field ( "." field | "[" subscript "]" )*
//! field     = name | "#" integer             a struct field, by Thrift name or by id
//! name      = [A-Za-z_] [A-Za-z0-9_]*
//! subscript = integer | string               a list/set index, or a map key
//! integer   = "-"? [0-9]+                    decimal, within i64 (i16 for a field id)
//! string    = '"' ( char | escape )* '"'     JSON's escapes: \" \\ \/ \b \f \n \r \t \uXXXX
//! ```
//!
//! The first step is a field of the struct the path is resolved against. `[n]` on a
//! list or set is the element at position `n` (from 0, in wire order); on a map it is
//! the entry whose integer key is `n` (`i8`, `i16`, `i32`, `i64` or enum keys), and
//! `["k"]` the entry whose `string` or `binary` key is `k` (its UTF-8 bytes). No
//! whitespace is allowed anywhere. A text is at most [`MAX_PATH_LEN`] bytes and
//! [`MAX_STEPS`] steps. [`FieldPath`]'s `Display` writes the text back in this grammar
//! (the text [`parse`](FieldPath::parse) reads to an equal path), and errors name the
//! failing prefix in it.
//!
//! # What is read, and what is stepped over
//!
//! Reading walks from the start of the struct: for each field header before the wanted
//! one it steps over the value without decoding it; for a list index it steps over the
//! elements before it; for a map key it compares each key's bytes (strings are compared,
//! never UTF-8-checked) and steps over the values of the others. Nothing is allocated
//! and nothing is copied. Stepping over is [`thrift_wire::encoding::skip_value`]'s algorithm on a
//! borrowed slice: containers of fixed-width elements (`bool`, `byte`, `double`, `uuid`,
//! and in Binary also `i16`, `i32`, `i64`) and maps of fixed-width keys and values are
//! crossed by arithmetic in one step (one bounds check), strings and binaries by their
//! length prefix; a list of Compact integers is crossed eight bytes at a time (the
//! varints ending in each word counted with a mask and a multiply, without decoding
//! them); structs and other containers are entered and walked the same way, with the
//! nesting depth counted. A container's element (and key) type is looked at once, so
//! the loop over its elements runs without dispatching on the type or calling a
//! function per scalar or string. The value found is then stepped over once more to
//! find its end (and so check it is whole), and handed back as a [`Value`]: its byte
//! range, its wire type, and accessors that decode only it (UTF-8 is checked only when
//! it is read as a string).
//!
//! # Cost model
//!
//! A read costs one pass over the bytes *before* the value in its enclosing structs and
//! containers, at the price of headers, not contents: per field or element stepped
//! over, one header (and for strings one length); per fixed-width list, O(1); per
//! list of Compact integers, one step per eight bytes of varints. Fields after the
//! value are never looked at, except that a map is read to its end (a repeated key
//! takes its last value, as thrift-wire's decoder does) and an absent field costs a
//! walk to its struct's stop.
//! Resolution ([`FieldPath::resolve`]) does every name lookup once; reading does none.
//! A replacement costs the same walk plus one copy of the message, in three ranges
//! (before, new value, after).
//!
//! # Decisions
//!
//! - The input is one struct from its first field header, as
//!   [`Codec::decode`](thrift_wire::Codec::decode) takes it (no message header). Bytes
//!   after its stop are not read; a replacement copies them through unchanged.
//! - Absent values are `Ok(None)`: a field the struct does not carry, an index past a
//!   list's end, a key the map does not hold. A field whose *wire* type differs from
//!   the descriptor's is an error (thrift-wire's decoder would skip it as unknown; a
//!   path that asks for it wants that field, and a silent `None` would hide the
//!   mismatch), as is a non-empty container whose element types differ.
//! - Nesting is bounded at [`DEFAULT_MAX_DEPTH`](thrift_wire::DEFAULT_MAX_DEPTH) levels,
//!   counted as thrift-wire counts them (each struct and container entered, on the
//!   path and inside values stepped over).
//! - Replacement writes the new value's encoded bytes in place of the old ones; it
//!   checks them first (one whole value of the expected type, in the same protocol,
//!   nothing after it). It can replace a field, a list or set element and a map value,
//!   and add an absent field of the *last* step's struct before that struct's stop
//!   (with Compact's id delta computed from the field before it; the stop that follows
//!   needs none). It does not add map entries or list elements, nor create absent
//!   intermediate structs: those are [`ReplaceError::Missing`]. Adding a field to a
//!   union that already carries one is refused ([`ReplaceError::UnionOccupied`]).
//! - In Compact a `bool` field's value lives in its header's type nibble: a read gives
//!   the header byte's range, and a replacement rewrites that nibble. A `bool` element
//!   reads as true only when its byte is 1, as thrift-wire reads it.
//! - Thrift names may contain `.`, which the grammar cannot say: such fields are
//!   reached by id (`#3`).

mod parse;
mod read;
mod replace;
mod resolve;
mod varints;
mod wire;

use std::fmt;
use std::str::FromStr;

use crate::Descriptor;
use crate::StructId;

pub use parse::{Found, ParseError, ParseErrorKind};
pub use read::{ReadError, ReadErrorKind, Value};
pub use replace::{NewValue, ReplaceError};
pub use resolve::{MapKey, ResolveError, ResolveErrorKind, ResolvedPath, ResolvedStep, StepKind};
pub use wire::PathProtocol;

/// The longest path text [`FieldPath::parse`] accepts, in bytes.
pub const MAX_PATH_LEN: usize = 4096;

/// The most steps a path may have.
pub const MAX_STEPS: usize = 64;

/// A parsed path: what the text says, not yet checked against any IDL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    steps: Vec<Step>,
}

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// `.name`: a struct field by its Thrift name.
    Name(String),
    /// `.#id`: a struct field by its id.
    Id(i16),
    /// `[n]`: a list or set index, or an integer map key.
    Int(i64),
    /// `["key"]`: a string or binary map key.
    Str(String),
}

impl FieldPath {
    /// Parses `text` (grammar in the [module docs](self)).
    pub fn parse(text: &str) -> Result<FieldPath, ParseError> {
        parse::parse(text)
    }

    /// The steps, from the root struct's field outwards.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Checks every step against `descriptor`, starting at struct `root`: each field
    /// exists, each subscript is applied to a list, set or map whose key type fits it.
    pub fn resolve(
        &self,
        descriptor: &Descriptor,
        root: StructId,
    ) -> Result<ResolvedPath, ResolveError> {
        resolve::resolve(self, descriptor, root)
    }

    /// The text of the first `n` steps (the whole path if `n` is larger).
    pub fn prefix(&self, n: usize) -> String {
        Prefix(&self.steps[..n.min(self.steps.len())]).to_string()
    }
}

impl FromStr for FieldPath {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldPath::parse(s)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Prefix(&self.steps).fmt(f)
    }
}

/// Steps written in the path grammar.
struct Prefix<'a>(&'a [Step]);

impl fmt::Display for Prefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Name(name) if i == 0 => f.write_str(name)?,
                Step::Name(name) => write!(f, ".{name}")?,
                Step::Id(id) if i == 0 => write!(f, "#{id}")?,
                Step::Id(id) => write!(f, ".#{id}")?,
                Step::Int(n) => write!(f, "[{n}]")?,
                Step::Str(s) => {
                    f.write_str("[")?;
                    parse::write_string(f, s)?;
                    f.write_str("]")?;
                }
            }
        }
        Ok(())
    }
}
