//! Constants, and the Rust expressions that build IDL values.
//!
//! Simple constants are `pub const`s; strings, binaries and containers that need the
//! heap at run time are `LazyLock` statics. The same expressions give struct fields
//! their IDL defaults.

use crate::model::{ConstDef, ORDERED_F64, Ty, Value};

use super::{BinaryRepr, DEFAULT, Emitter, SOME, StringRepr, str_lit, type_path};

impl Emitter<'_> {
    /// A `pub const`, or a `LazyLock` static where the value needs the heap.
    pub(super) fn constant(&mut self, c: &ConstDef) {
        let ty = self.rust_type(&c.ty);
        let value = self.value_expr(&c.ty, &c.value);
        let simple = match c.ty {
            Ty::Bool
            | Ty::I8
            | Ty::I16
            | Ty::I32
            | Ty::I64
            | Ty::Double
            | Ty::Uuid
            | Ty::Enum(_) => true,
            Ty::String => self.opts.string == StringRepr::Utf8Bytes,
            Ty::Binary => self.opts.binary == BinaryRepr::Bytes,
            _ => false,
        };
        self.out.doc(c.doc.as_deref());
        if simple {
            line!(self.out, "pub const {}: {ty} = {value};", c.name);
        } else {
            line!(
                self.out,
                "pub static {}: ::std::sync::LazyLock<{ty}> = ::std::sync::LazyLock::new(|| {value});",
                c.name
            );
        }
    }

    /// A Rust expression building `value` of type `ty`.
    pub(super) fn value_expr(&self, ty: &Ty, value: &Value) -> String {
        match (ty, value) {
            (Ty::Bool, Value::Bool(b)) => b.to_string(),
            // The resolver has checked that integers fit their types.
            (Ty::I8, Value::Int(i)) => format!("{}i8", *i as i8),
            (Ty::I16, Value::Int(i)) => format!("{}i16", *i as i16),
            (Ty::I32, Value::Int(i)) => format!("{}i32", *i as i32),
            (Ty::I64, Value::Int(i)) => format!("{i}i64"),
            (Ty::Double, Value::Double(f)) => float(*f),
            (Ty::Double, Value::Int(i)) => float(*i as f64),
            (Ty::OrderedDouble, Value::Double(f)) => {
                format!("super::{}::{ORDERED_F64}({})", self.module, float(*f))
            }
            (Ty::OrderedDouble, Value::Int(i)) => {
                format!(
                    "super::{}::{ORDERED_F64}({})",
                    self.module,
                    float(*i as f64)
                )
            }
            (Ty::String, Value::Str(s)) => match self.opts.string {
                StringRepr::Utf8Bytes => format!("__tc::Utf8Bytes::from_static({})", str_lit(s)),
                StringRepr::String => format!("::std::string::String::from({})", str_lit(s)),
            },
            (Ty::Binary, Value::Str(s)) => match self.opts.binary {
                BinaryRepr::Bytes => {
                    format!("__tc::bytes::Bytes::from_static({})", byte_str_lit(s))
                }
                BinaryRepr::Vec => format!("{}.to_vec()", byte_str_lit(s)),
            },
            (Ty::Uuid, Value::Uuid(bytes)) => {
                let bytes: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
                format!("[{}]", bytes.join(", "))
            }
            (Ty::Enum(_), Value::Enum(path, n)) => format!("{}({n})", type_path(path)),
            (Ty::Enum(path), Value::Int(n)) => format!("{}({})", type_path(path), *n as i32),
            (Ty::List(t), Value::List(items)) => {
                format!("::std::vec![{}]", self.values(t, items))
            }
            (Ty::Set(t), Value::List(items)) => {
                format!("{}::from([{}])", self.set_type(), self.values(t, items))
            }
            (Ty::Map(k, v), Value::Map(entries)) => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(kv, vv)| {
                        format!("({}, {})", self.value_expr(k, kv), self.value_expr(v, vv))
                    })
                    .collect();
                format!("{}::from([{}])", self.map_type(), entries.join(", "))
            }
            (Ty::Struct(_), Value::Struct(path, fields)) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        let mut v = self.value_expr(&f.ty, &f.value);
                        if f.boxed {
                            v = format!("::std::boxed::Box::new({v})");
                        }
                        if f.optional {
                            v = format!("{SOME}({v})");
                        }
                        format!("{}: {v}", f.name)
                    })
                    .collect();
                if fields.is_empty() {
                    format!("{} {{}}", type_path(path))
                } else {
                    format!("{} {{ {} }}", type_path(path), fields.join(", "))
                }
            }
            // `Value::Default`; the resolver hands over no other mismatch of value and type,
            // and the type's default is the one answer that always compiles.
            _ => DEFAULT.into(),
        }
    }

    /// `a, b, c` for the elements of a list or set literal.
    fn values(&self, ty: &Ty, items: &[Value]) -> String {
        let items: Vec<String> = items.iter().map(|v| self.value_expr(ty, v)).collect();
        items.join(", ")
    }
}

/// A Rust `f64` expression; `{:?}` prints the shortest digits that read back exactly.
fn float(f: f64) -> String {
    if f.is_nan() {
        "f64::NAN".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "f64::INFINITY"
        } else {
            "f64::NEG_INFINITY"
        }
        .into()
    } else {
        format!("{f:?}f64")
    }
}

/// A Rust byte-string literal holding the bytes of `s`.
fn byte_str_lit(s: &str) -> String {
    format!("b\"{}\"", s.as_bytes().escape_ascii())
}
