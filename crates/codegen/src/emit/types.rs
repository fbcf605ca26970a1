//! Structs, unions, exceptions and typedefs, and the Rust types of Thrift types.
//!
//! Each struct-like type gets its definition, its `Default` when it needs one written
//! out, and an `impl Message` (`size`, `encode`, `decode`) that puts fields on the wire
//! as Apache Thrift does; a module with `double`s in set elements or map keys also
//! gets its `OrderedF64`.

use crate::model::{FieldDef, ORDERED_F64, Requiredness, StructDef, StructKind, Ty, TypedefDef};

use super::{
    BinaryRepr, CollectionRepr, DEFAULT, Emitter, NONE, SOME, StringRepr, bare, str_lit, type_path,
};

impl Emitter<'_> {
    /// The Rust type of a Thrift type.
    pub(super) fn rust_type(&self, ty: &Ty) -> String {
        match ty {
            Ty::Bool => "bool".into(),
            Ty::I8 => "i8".into(),
            Ty::I16 => "i16".into(),
            Ty::I32 => "i32".into(),
            Ty::I64 => "i64".into(),
            Ty::Double => "f64".into(),
            Ty::OrderedDouble => format!("super::{}::{ORDERED_F64}", self.module),
            Ty::String => match self.opts.string {
                StringRepr::Utf8Bytes => "__tc::Utf8Bytes".into(),
                StringRepr::String => "::std::string::String".into(),
            },
            Ty::Binary => match self.opts.binary {
                BinaryRepr::Bytes => "__tc::bytes::Bytes".into(),
                BinaryRepr::Vec => "::std::vec::Vec<u8>".into(),
            },
            Ty::Uuid => "[u8; 16]".into(),
            Ty::List(t) => format!("::std::vec::Vec<{}>", self.rust_type(t)),
            Ty::Set(t) => format!("{}<{}>", self.set_type(), self.rust_type(t)),
            Ty::Map(k, v) => format!(
                "{}<{}, {}>",
                self.map_type(),
                self.rust_type(k),
                self.rust_type(v)
            ),
            Ty::Struct(p) | Ty::Enum(p) => type_path(p),
        }
    }

    /// The Rust type of a field as stored (boxed, optional).
    pub(super) fn field_type(&self, f: &FieldDef) -> String {
        let mut t = self.rust_type(&f.ty);
        if f.boxed {
            t = format!("::std::boxed::Box<{t}>");
        }
        if f.req == Requiredness::Optional {
            t = format!("::std::option::Option<{t}>");
        }
        t
    }

    /// The derives of a struct-like type, then any attributes the options add.
    /// Types without a `double` inside also get `Eq`, and with ordered collections
    /// `Hash` and `Ord` too, so they can be set elements and map keys.
    fn derives(&mut self, s: &StructDef, default: bool) {
        let extra = match (s.hashable, self.opts.collections) {
            (false, _) => "",
            (true, CollectionRepr::BTree) => ", Eq, Hash, PartialOrd, Ord",
            (true, CollectionRepr::Hash) => ", Eq",
        };
        let default = if default { ", Default" } else { "" };
        line!(
            self.out,
            "#[derive(Debug, Clone, PartialEq{extra}{default})]"
        );
        self.type_attrs(&s.thrift_name);
    }

    /// A struct or exception: the type, its `Default` if defaults need writing out, an
    /// exception's `Display` and `Error`, and `impl Message`.
    pub(super) fn plain_struct(&mut self, s: &StructDef) {
        let name = &s.name;
        let has_defaults = s
            .fields
            .iter()
            .any(|f| f.default.is_some() && f.req != Requiredness::Optional);

        self.out.doc(s.doc.as_deref());
        self.derives(s, !has_defaults);
        if s.fields.is_empty() {
            line!(self.out, "pub struct {name} {{}}");
        } else {
            open!(self.out, "pub struct {name}");
            for f in &s.fields {
                let req = match f.req {
                    Requiredness::Required => ", required",
                    Requiredness::Optional => ", optional",
                    Requiredness::Default => "",
                };
                line!(self.out, "/// Field {}{req}.", f.id);
                self.field_attrs(&s.thrift_name, &f.thrift_name);
                line!(self.out, "pub {}: {},", f.name, self.field_type(f));
            }
            self.out.close("");
        }

        if has_defaults {
            self.out.blank();
            open!(self.out, "impl ::std::default::Default for {name}");
            open!(self.out, "fn default() -> Self");
            open!(self.out, "Self");
            for f in &s.fields {
                let value = match (&f.default, f.req) {
                    (Some(v), Requiredness::Required | Requiredness::Default) => {
                        self.boxed(f, self.value_expr(&f.ty, v))
                    }
                    _ => DEFAULT.into(),
                };
                line!(self.out, "{}: {value},", f.name);
            }
            self.out.close("");
            self.out.close("");
            self.out.close("");
        }

        if s.kind == StructKind::Exception {
            self.out.blank();
            open!(self.out, "impl ::std::fmt::Display for {name}");
            open!(
                self.out,
                "fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result"
            );
            line!(self.out, "::std::fmt::Debug::fmt(self, f)");
            self.out.close("");
            self.out.close("");
            self.out.blank();
            line!(self.out, "impl ::std::error::Error for {name} {{}}");
        }

        self.out.blank();
        line!(self.out, "__tc::impl_wire_for_message!({name});");
        self.out.blank();
        open!(self.out, "impl __tc::Message for {name}");

        // Fields go on the wire in ascending id order, as Apache Thrift writes them (it
        // matters where ids are not declared in order, such as implicit negative ids).
        let mut by_id: Vec<&FieldDef> = s.fields.iter().collect();
        by_id.sort_by_key(|f| f.id);

        self.size_begin();
        if by_id.is_empty() {
            line!(self.out, "let n = 0usize;");
        } else {
            line!(self.out, "let mut n = 0usize;");
        }
        for f in &by_id {
            self.optional_field(f, |value| {
                format!("n += __tc::wire::Wire::field_size({value}, s, {});", f.id)
            });
        }
        line!(self.out, "n + s.struct_end_len(saved)");
        self.out.close("");

        self.encode_begin();
        for f in &by_id {
            self.optional_field(f, |value| {
                format!("__tc::wire::Wire::field_write({value}, e, {});", f.id)
            });
        }
        line!(self.out, "e.write_struct_end(saved);");
        self.out.close("");

        self.decode_begin(s);
        // Locals take their types from the struct literal they end up in, which keeps
        // the generated code short (and so quick to generate and to compile).
        for f in &s.fields {
            let init = match (f.req, &f.default) {
                (Requiredness::Default, Some(v)) => self.boxed(f, self.value_expr(&f.ty, v)),
                (Requiredness::Default, None) => DEFAULT.into(),
                _ => NONE.into(),
            };
            line!(self.out, "let mut f_{} = {init};", bare(&f.name));
        }
        self.decode_loop(s, |f, read| match f.req {
            Requiredness::Default => format!("f_{} = {read},", bare(&f.name)),
            _ => format!("f_{} = {SOME}({read}),", bare(&f.name)),
        });
        if s.fields.is_empty() {
            line!(self.out, "::std::result::Result::Ok(Self {{}})");
        } else {
            open!(self.out, "::std::result::Result::Ok(Self");
            for f in &s.fields {
                let local = format!("f_{}", bare(&f.name));
                match f.req {
                    Requiredness::Required => line!(
                        self.out,
                        "{}: __tc::wire::required({local}, NAME, {})?,",
                        f.name,
                        str_lit(&f.thrift_name)
                    ),
                    _ => line!(self.out, "{}: {local},", f.name),
                }
            }
            self.out.close(")");
        }
        self.out.close("");
        self.out.close("");
    }

    /// A union as a Rust enum, its `Default` when a variant's value ends, and
    /// `impl Message` (decoding fails unless exactly one field is set).
    pub(super) fn union(&mut self, s: &StructDef) {
        let name = &s.name;
        self.out.doc(s.doc.as_deref());
        self.derives(s, false);
        if s.fields.is_empty() {
            line!(self.out, "pub enum {name} {{}}");
        } else {
            open!(self.out, "pub enum {name}");
            for f in &s.fields {
                let mut ty = self.rust_type(&f.ty);
                if f.boxed {
                    ty = format!("::std::boxed::Box<{ty}>");
                }
                line!(self.out, "/// Field {}.", f.id);
                line!(self.out, "{}({ty}),", f.name);
            }
            self.out.close("");
        }
        if let Some(first) = s.union_default.and_then(|i| s.fields.get(i)) {
            self.out.blank();
            if s.union_default == Some(0) {
                line!(
                    self.out,
                    "/// The first variant, holding its type's default (Thrift unions have no"
                );
            } else {
                line!(
                    self.out,
                    "/// The first variant whose value ends (the ones before lead back to this"
                );
                line!(
                    self.out,
                    "/// union), holding its type's default (Thrift unions have no"
                );
            }
            line!(
                self.out,
                "/// empty state; this is what a defaulted field of this type starts as)."
            );
            open!(self.out, "impl ::std::default::Default for {name}");
            open!(self.out, "fn default() -> Self");
            line!(self.out, "Self::{}({DEFAULT})", first.name);
            self.out.close("");
            self.out.close("");
        }

        self.out.blank();
        line!(self.out, "__tc::impl_wire_for_message!({name});");
        self.out.blank();
        open!(self.out, "impl __tc::Message for {name}");

        self.size_begin();
        if s.fields.is_empty() {
            line!(self.out, "let n = 0usize;");
        } else {
            self.variant_arms(s, "let n = match self", "field_size(v, s", ";");
        }
        line!(self.out, "n + s.struct_end_len(saved)");
        self.out.close("");

        self.encode_begin();
        if !s.fields.is_empty() {
            self.variant_arms(s, "match self", "field_write(v, e", "");
        }
        line!(self.out, "e.write_struct_end(saved);");
        self.out.close("");

        self.decode_begin(s);
        // A union without fields (Apache accepts `union return {}`) never sets them.
        let mutable = if s.fields.is_empty() { "" } else { "mut " };
        line!(
            self.out,
            "let {mutable}value: ::std::option::Option<Self> = {NONE};"
        );
        line!(self.out, "let {mutable}set = 0usize;");
        self.decode_loop(s, |f, read| {
            format!("{{ value = {SOME}(Self::{}({read})); set += 1; }}", f.name)
        });
        open!(self.out, "match value");
        line!(
            self.out,
            "{SOME}(v) if set == 1 => ::std::result::Result::Ok(v),"
        );
        line!(
            self.out,
            "_ => ::std::result::Result::Err(__tc::DecodeError::new(__tc::DecodeErrorKind::InvalidUnion(set))),"
        );
        self.out.close("");
        self.out.close("");
        self.out.close("");
    }

    /// `head {` with one arm per union variant, `Self::V(v) => __tc::wire::Wire::<call>, id),`,
    /// then `}` and `tail`.
    fn variant_arms(&mut self, s: &StructDef, head: &str, call: &str, tail: &str) {
        open!(self.out, "{head}");
        for f in &s.fields {
            line!(
                self.out,
                "Self::{}(v) => __tc::wire::Wire::{call}, {}),",
                f.name,
                f.id
            );
        }
        self.out.close(tail);
    }

    /// The `decode` head shared by structs and unions: signature, the struct's name for
    /// error paths, and the struct header.
    fn decode_begin(&mut self, s: &StructDef) {
        open!(
            self.out,
            "fn decode<D: __tc::Decoder>(d: &mut D) -> ::std::result::Result<Self, __tc::DecodeError>"
        );
        // The name is only used in the error paths of fields; a struct without fields
        // has none.
        if !s.fields.is_empty() {
            line!(self.out, "const NAME: &str = {};", str_lit(&s.thrift_name));
        }
        line!(self.out, "let saved = d.read_struct_begin()?;");
    }

    /// The field loop of `decode`: one arm per field, `arm` writing what a read field
    /// does; unknown fields and known ids with another wire type are skipped.
    fn decode_loop(&mut self, s: &StructDef, arm: impl Fn(&FieldDef, &str) -> String) {
        open!(self.out, "loop");
        line!(self.out, "let field = d.read_field_begin()?;");
        open!(self.out, "match (field.id, field.ty)");
        line!(self.out, "(_, __tc::TType::Stop) => break,");
        for f in &s.fields {
            let read = format!(
                "__tc::wire::read_field(d, NAME, {})?",
                str_lit(&f.thrift_name)
            );
            line!(
                self.out,
                "({}, {}) => {}",
                f.id,
                ttype(&f.ty),
                arm(f, &read)
            );
        }
        line!(self.out, "(_, ty) => d.skip(ty)?,");
        self.out.close("");
        self.out.close("");
        line!(self.out, "d.read_struct_end(saved);");
    }

    /// `impl Message`'s `size` and `encode` heads (each followed by its body).
    fn size_begin(&mut self) {
        open!(
            self.out,
            "fn size<S: __tc::Sizer>(&self, s: &mut S) -> usize"
        );
        line!(self.out, "let saved = s.struct_begin();");
    }

    fn encode_begin(&mut self) {
        open!(self.out, "fn encode<E: __tc::Encoder>(&self, e: &mut E)");
        line!(self.out, "let saved = e.write_struct_begin();");
    }

    /// `expr` wrapped in `Box::new` when the field is boxed.
    fn boxed(&self, f: &FieldDef, expr: String) -> String {
        if f.boxed {
            format!("::std::boxed::Box::new({expr})")
        } else {
            expr
        }
    }

    /// The statement `stmt` makes for a `&T` of the field's stored type, under an
    /// `if let Some` when the field is optional.
    fn optional_field(&mut self, f: &FieldDef, stmt: impl Fn(&str) -> String) {
        if f.req == Requiredness::Optional {
            open!(self.out, "if let {SOME}(v) = &self.{}", f.name);
            line!(self.out, "{}", stmt("v"));
            self.out.close("");
        } else {
            line!(self.out, "{}", stmt(&format!("&self.{}", f.name)));
        }
    }

    /// A `pub type` alias (fields spell the resolved type, not the alias).
    pub(super) fn typedef(&mut self, t: &TypedefDef) {
        line!(self.out, "pub type {} = {};", t.name, self.rust_type(&t.ty));
    }

    /// The module's `OrderedF64`: what a `double` is in a set element or map key.
    pub(super) fn ordered_f64(&mut self) {
        let name = ORDERED_F64;
        for l in [
            "/// A Thrift `double` where Rust needs a total order: in a set element or map key.",
            "/// Ordered by `f64::total_cmp`, and equal and hashed by bit pattern, which agree:",
            "/// a NaN is a key like any other, and `-0.0` and `0.0` are two keys. On the wire",
            "/// it is a `double`.",
            "#[derive(Debug, Clone, Copy, Default)]",
        ] {
            line!(self.out, "{l}");
        }
        line!(self.out, "pub struct {name}(pub f64);");
        self.out.blank();
        open!(self.out, "impl ::std::cmp::PartialEq for {name}");
        open!(self.out, "fn eq(&self, other: &Self) -> bool");
        line!(self.out, "self.0.to_bits() == other.0.to_bits()");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        line!(self.out, "impl ::std::cmp::Eq for {name} {{}}");
        self.out.blank();
        open!(self.out, "impl ::std::cmp::PartialOrd for {name}");
        open!(
            self.out,
            "fn partial_cmp(&self, other: &Self) -> ::std::option::Option<::std::cmp::Ordering>"
        );
        line!(self.out, "{SOME}(::std::cmp::Ord::cmp(self, other))");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl ::std::cmp::Ord for {name}");
        open!(
            self.out,
            "fn cmp(&self, other: &Self) -> ::std::cmp::Ordering"
        );
        line!(self.out, "self.0.total_cmp(&other.0)");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl ::std::hash::Hash for {name}");
        open!(
            self.out,
            "fn hash<H: ::std::hash::Hasher>(&self, state: &mut H)"
        );
        line!(
            self.out,
            "::std::hash::Hash::hash(&self.0.to_bits(), state);"
        );
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl ::std::convert::From<f64> for {name}");
        open!(self.out, "fn from(v: f64) -> Self");
        line!(self.out, "Self(v)");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl ::std::convert::From<{name}> for f64");
        open!(self.out, "fn from(v: {name}) -> f64");
        line!(self.out, "v.0");
        self.out.close("");
        self.out.close("");
        self.out.blank();
        open!(self.out, "impl __tc::wire::Wire for {name}");
        line!(self.out, "const TTYPE: __tc::TType = __tc::TType::Double;");
        open!(
            self.out,
            "fn wire_size<S: __tc::Sizer>(&self, s: &mut S) -> usize"
        );
        line!(self.out, "__tc::wire::Wire::wire_size(&self.0, s)");
        self.out.close("");
        open!(
            self.out,
            "fn wire_write<E: __tc::Encoder>(&self, e: &mut E)"
        );
        line!(self.out, "__tc::wire::Wire::wire_write(&self.0, e);");
        self.out.close("");
        open!(
            self.out,
            "fn wire_read<D: __tc::Decoder>(d: &mut D) -> ::std::result::Result<Self, __tc::DecodeError>"
        );
        line!(
            self.out,
            "<f64 as __tc::wire::Wire>::wire_read(d).map(Self)"
        );
        self.out.close("");
        self.out.close("");
    }
}

/// The wire type id of a Thrift type.
fn ttype(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "__tc::TType::Bool",
        Ty::I8 => "__tc::TType::I8",
        Ty::I16 => "__tc::TType::I16",
        Ty::I32 | Ty::Enum(_) => "__tc::TType::I32",
        Ty::I64 => "__tc::TType::I64",
        Ty::Double | Ty::OrderedDouble => "__tc::TType::Double",
        Ty::String | Ty::Binary => "__tc::TType::Binary",
        Ty::Uuid => "__tc::TType::Uuid",
        Ty::List(_) => "__tc::TType::List",
        Ty::Set(_) => "__tc::TType::Set",
        Ty::Map(..) => "__tc::TType::Map",
        Ty::Struct(_) => "__tc::TType::Struct",
    }
}
