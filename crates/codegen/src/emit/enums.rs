//! Enums: `i32` newtypes with one associated constant per IDL value.
//!
//! Values the IDL does not name are kept, not refused, so an enum decodes whatever a
//! newer peer sends; `name()` and `Debug` show the IDL name when there is one.

use crate::model::EnumDef;

use super::{Emitter, NONE, SOME, bare, str_lit};

impl Emitter<'_> {
    /// The newtype, its constants and `name()`, `Debug`, the wire impl and the
    /// conversions to and from `i32`.
    pub(super) fn enumeration(&mut self, e: &EnumDef) {
        let name = &e.name;
        self.out.doc(e.doc.as_deref());
        line!(
            self.out,
            "/// An `i32` on the wire; values the IDL does not name are kept as they are."
        );
        line!(
            self.out,
            "#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]"
        );
        self.type_attrs(&e.thrift_name);
        line!(self.out, "pub struct {name}(pub i32);");
        self.out.blank();

        open!(self.out, "impl {name}");
        for (n, v) in &e.values {
            line!(self.out, "/// `{n} = {v}`.");
            line!(self.out, "pub const {n}: Self = Self({v});");
        }
        if !e.values.is_empty() {
            self.out.blank();
        }
        // A value with several names (Apache Thrift allows it) answers its first.
        line!(self.out, "/// The IDL name of this value, if it has one.");
        open!(
            self.out,
            "pub fn name(self) -> ::std::option::Option<&'static str>"
        );
        open!(self.out, "match self.0");
        let mut seen = std::collections::HashSet::new();
        for (n, v) in e.values.iter().filter(|(_, v)| seen.insert(*v)) {
            line!(self.out, "{v} => {SOME}({}),", str_lit(n));
        }
        line!(self.out, "_ => {NONE},");
        self.out.close("");
        self.out.close("");
        self.out.close("");
        self.out.blank();

        open!(self.out, "impl ::std::fmt::Debug for {name}");
        open!(
            self.out,
            "fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result"
        );
        open!(self.out, "match self.name()");
        line!(self.out, "{SOME}(n) => f.write_str(n),");
        line!(
            self.out,
            "{NONE} => ::std::write!(f, \"{}({{}})\", self.0),",
            bare(name)
        );
        self.out.close("");
        self.out.close("");
        self.out.close("");
        self.out.blank();

        line!(self.out, "__tc::impl_wire_for_enum!({name});");
        self.out.blank();
        open!(self.out, "impl ::std::convert::From<i32> for {name}");
        open!(self.out, "fn from(v: i32) -> Self");
        line!(self.out, "Self(v)");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl ::std::convert::From<{name}> for i32");
        open!(self.out, "fn from(v: {name}) -> i32");
        line!(self.out, "v.0");
        self.out.close("");
        self.out.close("");
    }
}
