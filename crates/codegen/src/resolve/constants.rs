//! Constant values: literals checked against their types, references followed.
//!
//! A value may name another constant or an enum value; integers stand for `double`s,
//! `0`/`1` for `bool`s, and maps with quoted field names for structs. Where Apache
//! Thrift accepts a value that loses meaning (an integer too wide, a map literal for a
//! list), it is read as Apache reads it and a warning says so.

use std::collections::HashMap;

use crate::ast::{self, ConstValue, ConstValueKind};
use crate::model::{FieldValue, Requiredness, Ty, TypePath, Value};

use super::{DefRef, MAX_REFERENCE_DEPTH, ResolveError, Resolver, describe};

impl<'a> Resolver<'a> {
    /// Checks `v` against `ty` and resolves references in it.
    pub(super) fn value(
        &self,
        file: usize,
        v: &'a ConstValue,
        ty: &Ty,
        depth: usize,
    ) -> Result<Value, ResolveError> {
        if depth > MAX_REFERENCE_DEPTH {
            return Err(self.err(
                file,
                v.span,
                "values nest deeper than 64 levels, or constants refer to each other in a cycle"
                    .into(),
            ));
        }
        let mismatch = |what: &str| {
            self.err(
                file,
                v.span,
                format!("a {what} value cannot be a {}", describe(ty)),
            )
        };
        // A reference to another constant stands for its value, checked against `ty`.
        if let ConstValueKind::Ident(name) = &v.kind {
            let found = self.lookup(file, &name.name);
            if let Some((f, DefRef::Const(c), None)) = found {
                let cty = self.ty(f, &c.ty, 0)?;
                if !same_shape(&cty, ty) {
                    return Err(self.err(
                        file,
                        name.span,
                        format!(
                            "constant `{}` is a {}, not a {}",
                            name.name,
                            describe(&cty),
                            describe(ty)
                        ),
                    ));
                }
                return self.value(f, &c.value, ty, depth + 1);
            }
            // Where an enum is expected, Apache Thrift looks the last part of the name up
            // in that enum, whatever comes before it: `MyEnum1.ME2_2` and plain `ME2_2`
            // both mean `MyEnum2.ME2_2` for a `MyEnum2`.
            if let Ty::Enum(p) = ty {
                let member = name.name.rsplit('.').next().unwrap_or(&name.name);
                let named = match found {
                    Some((f, DefRef::Enum(e), Some(_))) => Some(self.path(f, &e.name.name)),
                    _ => None,
                };
                if named.as_ref() != Some(p)
                    && let Some(n) = self.find_enum(p).and_then(|e| enum_value(e, member))
                {
                    {
                        if let Some(other) = named {
                            self.warn(
                                file,
                                name.span,
                                format!(
                                    "`{}` names a value of enum `{}` where a `{}` is expected; \
                                     taken as `{}.{member}` ({n}), as Apache Thrift does",
                                    name.name, other.name, p.name, p.name
                                ),
                            );
                        }
                        return Ok(Value::Enum(p.clone(), n));
                    }
                }
            }
            match found {
                Some((f, DefRef::Enum(e), Some(member))) => {
                    let Some(n) = enum_value(e, member) else {
                        return Err(self.err(
                            file,
                            name.span,
                            format!("enum `{}` has no value `{member}`", e.name.name),
                        ));
                    };
                    return match ty {
                        Ty::Enum(p) if *p == self.path(f, &e.name.name) => {
                            Ok(Value::Enum(p.clone(), n))
                        }
                        Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 => Ok(Value::Int(n.into())),
                        _ => Err(mismatch("enum")),
                    };
                }
                _ => {
                    return Err(self.err(
                        file,
                        name.span,
                        format!("unknown constant `{}`", name.name),
                    ));
                }
            }
        }
        Ok(match (ty, &v.kind) {
            (Ty::Bool, ConstValueKind::Bool(b)) => Value::Bool(*b),
            (Ty::Bool, ConstValueKind::Int(i @ (0 | 1))) => Value::Bool(*i == 1),
            (Ty::Bool, ConstValueKind::Int(i)) => {
                self.warn(
                    file,
                    v.span,
                    format!(
                        "{i} is not a bool; taken as {}, as Apache Thrift's generators read it \
                         (true when above 0)",
                        *i > 0
                    ),
                );
                Value::Bool(*i > 0)
            }
            // `true` and `false` are 1 and 0 to Apache Thrift.
            (Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64, ConstValueKind::Bool(b)) => {
                Value::Int(i64::from(*b))
            }
            (Ty::Double | Ty::OrderedDouble, ConstValueKind::Bool(b)) => {
                Value::Double(f64::from(u8::from(*b)))
            }
            // Apache Thrift checks no range; its C++ and Java output keeps the low bits.
            (Ty::I8, ConstValueKind::Int(i)) => self.int_in(file, v, *i, i64::from(*i as i8)),
            (Ty::I16, ConstValueKind::Int(i)) => self.int_in(file, v, *i, i64::from(*i as i16)),
            (Ty::I32, ConstValueKind::Int(i)) => self.int_in(file, v, *i, i64::from(*i as i32)),
            (Ty::I64, ConstValueKind::Int(i)) => Value::Int(*i),
            (Ty::Double | Ty::OrderedDouble, ConstValueKind::Int(i)) => Value::Double(*i as f64),
            (Ty::Double | Ty::OrderedDouble, ConstValueKind::Double(d)) => Value::Double(*d),
            (Ty::String | Ty::Binary, ConstValueKind::Str(s)) => Value::Str(s.clone()),
            (Ty::Uuid, ConstValueKind::Str(s)) => match parse_uuid(s) {
                Some(bytes) => Value::Uuid(bytes),
                None => {
                    return Err(self.err(
                        file,
                        v.span,
                        format!(
                            "{s:?} is not a uuid: write 36 characters, \
                             xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in hex, optionally in {{}}"
                        ),
                    ));
                }
            },
            (Ty::Enum(p), ConstValueKind::Int(i)) => match i32::try_from(*i) {
                Ok(n) => Value::Enum(p.clone(), n),
                Err(_) => {
                    return Err(self.err(file, v.span, format!("{i} does not fit an enum (i32)")));
                }
            },
            (Ty::List(e) | Ty::Set(e), ConstValueKind::List(items)) => Value::List(
                items
                    .iter()
                    .map(|i| self.value(file, i, e, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            // Apache Thrift reads `{}` as an empty set or list too (ThriftTest.thrift's
            // `optional set<binary> bin_set = {}`), and `[]` as an empty map.
            (Ty::List(_) | Ty::Set(_), ConstValueKind::Map(entries)) => {
                self.empty_instead(file, v, ty, "map", entries.is_empty());
                Value::List(Vec::new())
            }
            (Ty::Map(..), ConstValueKind::List(items)) => {
                self.empty_instead(file, v, ty, "list", items.is_empty());
                Value::Map(Vec::new())
            }
            (Ty::Map(k, val), ConstValueKind::Map(entries)) => Value::Map(
                entries
                    .iter()
                    .map(|(ek, ev)| {
                        Ok((
                            self.value(file, ek, k, depth + 1)?,
                            self.value(file, ev, val, depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, ResolveError>>()?,
            ),
            (Ty::Struct(p), ConstValueKind::Map(entries)) => {
                self.struct_value(file, v, p, entries, depth)?
            }
            (_, ConstValueKind::Bool(_)) => return Err(mismatch("bool")),
            (_, ConstValueKind::Int(_)) => return Err(mismatch("integer")),
            (_, ConstValueKind::Double(_)) => return Err(mismatch("double")),
            (_, ConstValueKind::Str(_)) => return Err(mismatch("string")),
            (_, ConstValueKind::List(_)) => return Err(mismatch("list")),
            (_, ConstValueKind::Map(_)) => return Err(mismatch("map")),
            (_, ConstValueKind::Ident(_)) => unreachable!("references are resolved above"),
        })
    }

    /// A struct literal (a map of quoted field names) for struct `p`: the fields it
    /// gives, checked, and the others at their IDL defaults.
    fn struct_value(
        &self,
        file: usize,
        v: &'a ConstValue,
        p: &TypePath,
        entries: &'a [(ConstValue, ConstValue)],
        depth: usize,
    ) -> Result<Value, ResolveError> {
        let Some((sf, s)) = self.find_struct(p) else {
            return Err(self.err(file, v.span, format!("unknown struct `{}`", p.name)));
        };
        let fields = self.fields(sf, s)?;
        let mut given: HashMap<&str, &ConstValue> = HashMap::new();
        for (k, val) in entries {
            let ConstValueKind::Str(key) = &k.kind else {
                return Err(self.err(
                    file,
                    k.span,
                    "struct literal keys are field names in quotes".into(),
                ));
            };
            if !s.fields.iter().any(|f| f.name.name == *key) {
                return Err(self.err(
                    file,
                    k.span,
                    format!("struct `{}` has no field `{key}`", s.name.name),
                ));
            }
            given.insert(key.as_str(), val);
        }
        let mut out = Vec::new();
        for (f, model) in s.fields.iter().zip(&fields) {
            let value = match given.get(f.name.name.as_str()) {
                Some(val) => self.value(file, val, &model.ty, depth + 1)?,
                None => model.default.clone().unwrap_or(Value::Default),
            };
            let optional = model.req == Requiredness::Optional;
            if optional && value == Value::Default {
                out.push(FieldValue {
                    name: model.name.clone(),
                    ty: model.ty.clone(),
                    optional: false,
                    boxed: false,
                    value,
                });
                continue;
            }
            out.push(FieldValue {
                name: model.name.clone(),
                ty: model.ty.clone(),
                optional,
                // Decided once every struct is known (`StructGraph::mark_boxed`).
                boxed: false,
                value,
            });
        }
        Ok(Value::Struct(p.clone(), out))
    }

    /// Warns, unless the literal is empty anyway, that a `what` literal standing for a
    /// `ty` is taken as an empty one.
    fn empty_instead(&self, file: usize, v: &ConstValue, ty: &Ty, what: &str, empty: bool) {
        if !empty {
            self.warn(
                file,
                v.span,
                format!(
                    "a {what} literal is not a {}; taken as an empty one, as Apache Thrift \
                     reads it",
                    describe(ty)
                ),
            );
        }
    }

    /// `i`, written for a narrower integer type that keeps `kept` of it: the same, or
    /// with a warning when the value does not fit.
    fn int_in(&self, file: usize, v: &ConstValue, i: i64, kept: i64) -> Value {
        if kept != i {
            self.warn(
                file,
                v.span,
                format!(
                    "{i} does not fit the type; taken as {kept} (its low bits), as Apache \
                     Thrift's C++ and Java output reads it"
                ),
            );
        }
        Value::Int(kept)
    }
}

/// The 16 bytes of a uuid written as Apache Thrift accepts it: the canonical
/// `01234567-89ab-cdef-0123-456789abcdef` form (hex digits in either case), optionally
/// in braces as Windows writes GUIDs.
fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let text = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(text);
    let b = text.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex: Vec<u8> = b.iter().copied().filter(|&c| c != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (byte, pair) in out.iter_mut().zip(hex.chunks(2)) {
        let digits = std::str::from_utf8(pair).ok()?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(out)
}

/// The value of the member of `e` named `member`.
fn enum_value(e: &ast::Enum, member: &str) -> Option<i32> {
    enum_values(e)
        .into_iter()
        .find(|(n, _)| n == member)
        .map(|(_, n)| n)
}

/// Enum values with implicit ones filled in: `(Thrift name, value)`.
fn enum_values(e: &ast::Enum) -> Vec<(String, i32)> {
    let mut next = 0i64;
    e.values
        .iter()
        .map(|v| {
            let n = v.value.unwrap_or(next);
            next = n + 1;
            (v.name.name.clone(), n as i32)
        })
        .collect()
}

/// Whether a constant of type `a` may stand where `b` is expected.
fn same_shape(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        (
            Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64,
            Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 | Ty::Double | Ty::OrderedDouble,
        ) => true,
        (Ty::Double | Ty::OrderedDouble, Ty::Double | Ty::OrderedDouble) => true,
        (Ty::String | Ty::Binary, Ty::String | Ty::Binary) => true,
        (Ty::List(x), Ty::List(y)) | (Ty::Set(x), Ty::Set(y)) => same_shape(x, y),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => same_shape(k1, k2) && same_shape(v1, v2),
        _ => a == b,
    }
}
