//! The shapes of definitions: field types, typedef chains, field lists and enums.
//!
//! Follows typedefs to the types they name, assigns field ids (implicit ones counting
//! down from -1), picks Rust field and variant names (numbering the ones Rust would
//! spell alike), checks defaults against their fields' types and numbers enum values.

use std::collections::{HashMap, HashSet};

use crate::ast::{self, BaseType, FieldTypeKind};
use crate::model::{EnumDef, FieldDef, Requiredness, Ty};
use crate::names;

use super::ordering::ordered;
use super::{DefRef, MAX_REFERENCE_DEPTH, ResolveError, Resolver};

impl<'a> Resolver<'a> {
    /// The resolved type of `t`, typedefs followed to what they name (`depth` counts the
    /// steps taken, so that a typedef cycle ends in an error).
    pub(super) fn ty(
        &self,
        file: usize,
        t: &'a ast::FieldType,
        depth: usize,
    ) -> Result<Ty, ResolveError> {
        if depth > MAX_REFERENCE_DEPTH {
            return Err(self.err(
                file,
                t.span,
                "types nest deeper than 64 levels, or typedefs refer to each other in a cycle"
                    .into(),
            ));
        }
        Ok(match &t.kind {
            FieldTypeKind::Base(b) => match b {
                BaseType::Bool => Ty::Bool,
                BaseType::Byte | BaseType::I8 => Ty::I8,
                BaseType::I16 => Ty::I16,
                BaseType::I32 => Ty::I32,
                BaseType::I64 => Ty::I64,
                BaseType::Double => Ty::Double,
                BaseType::String => Ty::String,
                BaseType::Binary => Ty::Binary,
                BaseType::Uuid => Ty::Uuid,
            },
            FieldTypeKind::List(e) => Ty::List(Box::new(self.ty(file, e, depth + 1)?)),
            FieldTypeKind::Set(e) => Ty::Set(Box::new(ordered(self.ty(file, e, depth + 1)?))),
            FieldTypeKind::Map(k, v) => Ty::Map(
                Box::new(ordered(self.ty(file, k, depth + 1)?)),
                Box::new(self.ty(file, v, depth + 1)?),
            ),
            FieldTypeKind::Named(name) => match self.lookup(file, &name.name) {
                Some((f, DefRef::Typedef(td), None)) => self.ty(f, &td.ty, depth + 1)?,
                Some((f, DefRef::Enum(e), None)) => Ty::Enum(self.path(f, &e.name.name)),
                Some((f, DefRef::Struct(s), None)) => Ty::Struct(self.path(f, &s.name.name)),
                Some((_, DefRef::Const(_) | DefRef::Service(_), None)) => {
                    return Err(self.err(
                        file,
                        name.span,
                        format!("`{}` is not a type", name.name),
                    ));
                }
                _ => {
                    return Err(self.err(file, name.span, format!("unknown type `{}`", name.name)));
                }
            },
        })
    }

    /// The fields of a struct-like definition, ids assigned and defaults checked (not yet
    /// boxed: that needs every struct).
    pub(super) fn fields(
        &self,
        file: usize,
        s: &'a ast::StructLike,
    ) -> Result<Vec<FieldDef>, ResolveError> {
        self.field_list(file, &s.fields, s.kind == ast::StructKind::Union)
    }

    /// `fields` resolved: ids assigned (implicit and non-positive ones counting down
    /// from -1), Rust names made distinct, types resolved and defaults checked; a
    /// union's are all optional.
    pub(super) fn field_list(
        &self,
        file: usize,
        fields: &'a [ast::Field],
        union: bool,
    ) -> Result<Vec<FieldDef>, ResolveError> {
        let mut out: Vec<FieldDef> = Vec::new();
        let mut next_implicit = -1i16;
        let mut ids = HashSet::new();
        // Rust name to the Thrift name that has it.
        let mut rust_names: HashMap<String, &str> = HashMap::new();
        for f in fields {
            let id = match f.id {
                Some(id) if id > 0 => {
                    let kept = id as i16;
                    if i64::from(kept) != id {
                        self.warn(
                            file,
                            f.span,
                            format!(
                                "field id {id} does not fit an i16; it is {kept} (its low bits) \
                                 on the wire, as in Apache Thrift's C++ and Java output"
                            ),
                        );
                    }
                    kept
                }
                // Apache Thrift's compiler (without --allow-neg-keys) numbers a field whose
                // id is not positive as if it had none.
                Some(id) => {
                    let auto = next_implicit;
                    next_implicit = next_implicit.saturating_sub(1);
                    self.warn(
                        file,
                        f.span,
                        format!(
                            "field id {id} is not positive; the field gets {auto}, as Apache \
                             Thrift numbers a field without an id"
                        ),
                    );
                    auto
                }
                None => {
                    let id = next_implicit;
                    next_implicit = next_implicit.saturating_sub(1);
                    id
                }
            };
            if !ids.insert(id) {
                return Err(self.err(file, f.span, format!("field id {id} is used twice")));
            }
            let name = if union {
                names::upper_camel(&f.name.name)
            } else {
                names::snake(&f.name.name)
            };
            if !names::is_legal(&name) {
                return Err(self.err(
                    file,
                    f.name.span,
                    format!("`{}` does not make a Rust name", f.name.name),
                ));
            }
            let name = if let Some(earlier) = rust_names.get(&name) {
                // Apache Thrift takes names that differ only in case or underscores
                // (`tricky` and `Tricky`); Rust spells them alike, so the later one gets
                // the first free numbered name.
                let unique = (2..)
                    .map(|n| numbered(&name, n, union))
                    .find(|n| !rust_names.contains_key(n))
                    .unwrap_or_default();
                self.warn(
                    file,
                    f.name.span,
                    format!(
                        "fields `{earlier}` and `{}` are both `{name}` in Rust; `{}` is named \
                         `{unique}`",
                        f.name.name, f.name.name
                    ),
                );
                unique
            } else {
                name
            };
            rust_names.insert(name.clone(), &f.name.name);
            let ty = self.ty(file, &f.ty, 0)?;
            let default = match &f.default {
                Some(v) => Some(self.value(file, v, &ty, 0)?),
                None => None,
            };
            let req = match (union, f.req) {
                (true, _) => Requiredness::Optional,
                (false, ast::Requiredness::Required) => Requiredness::Required,
                (false, ast::Requiredness::Optional) => Requiredness::Optional,
                (false, ast::Requiredness::Default) => Requiredness::Default,
            };
            out.push(FieldDef {
                id,
                thrift_name: f.name.name.clone(),
                name,
                ty,
                req,
                default,
                boxed: false,
            });
        }
        Ok(out)
    }

    /// An enum with its values numbered (one without a value follows the previous one).
    pub(super) fn enum_def(&self, file: usize, e: &'a ast::Enum) -> Result<EnumDef, ResolveError> {
        let mut values = Vec::new();
        let mut thrift_values = Vec::new();
        let mut names_seen = HashSet::new();
        let mut next: i64 = 0;
        for v in &e.values {
            let n = v.value.unwrap_or(next);
            let Ok(n32) = i32::try_from(n) else {
                return Err(self.err(file, v.span, format!("enum value {n} does not fit an i32")));
            };
            next = n + 1;
            let name = names::upper_snake(&v.name.name);
            if !names_seen.insert(name.clone()) {
                return Err(self.err(
                    file,
                    v.name.span,
                    format!("enum value `{}` is defined twice", v.name.name),
                ));
            }
            values.push((name, n32));
            thrift_values.push(v.name.name.clone());
        }
        Ok(EnumDef {
            thrift_name: e.name.name.clone(),
            name: names::upper_camel(&e.name.name),
            values,
            thrift_values,
            doc: e.doc.clone(),
        })
    }
}

/// `name` (a Rust field or variant name) made distinct with the number `n`:
/// `tricky_2` for a field, `Tricky2` for a variant.
fn numbered(name: &str, n: u32, variant: bool) -> String {
    let bare = name.strip_prefix("r#").unwrap_or(name);
    if variant {
        format!("{bare}{n}")
    } else {
        format!("{}_{n}", bare.trim_end_matches('_'))
    }
}
