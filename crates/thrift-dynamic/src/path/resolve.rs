//! Checking a path against a descriptor, once, into field ids and expected types.

use thrift_wire::TType;

use super::{FieldPath, Step};
use crate::{Descriptor, Kind, StructId, Ty};

/// A [`FieldPath`] checked against a [`Descriptor`]: every step as the wire sees it
/// (field ids, indexes, keys) with the type the IDL expects there. Reading and
/// replacing with it look up no names.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPath {
    path: FieldPath,
    root: StructId,
    steps: Vec<ResolvedStep>,
}

/// One step of a [`ResolvedPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedStep {
    /// Where it goes.
    pub kind: StepKind,
    /// The type of the value it reaches.
    pub ty: Ty,
    /// For a field step, whether the struct that holds the field is a union.
    pub in_union: bool,
}

/// Where one step of a [`ResolvedPath`] goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// The field with this id of the current struct.
    Field(i16),
    /// The element at this position of the current list or set.
    Index(usize),
    /// The value of the current map's entry with this key.
    Key(MapKey),
}

/// A map key, as the wire compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapKey {
    /// An integer key of wire type `ty` (`I8`, `I16`, `I32` or `I64`; enums are `I32`).
    Int {
        /// The key.
        value: i64,
        /// Its wire type.
        ty: TType,
    },
    /// A string or binary key: its bytes.
    Bytes(Vec<u8>),
}

/// Why a path does not fit a descriptor: the failing prefix of the path and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path `{prefix}`: {kind}")]
pub struct ResolveError {
    /// The path up to and including the step that does not fit.
    pub prefix: String,
    /// Why it does not.
    pub kind: ResolveErrorKind,
}

/// Why one step of a path does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveErrorKind {
    /// The struct has no field of that name or id.
    #[error("struct {strukt} has no field {field}")]
    NoSuchField {
        /// The struct's Thrift name.
        strukt: String,
        /// The name or `#id` asked for.
        field: String,
    },
    /// A field step applied to something that is not a struct.
    #[error("a field of {ty}, which is not a struct")]
    NotAStruct {
        /// The type there.
        ty: String,
    },
    /// A subscript applied to something that is not a list, set or map.
    #[error("a subscript on {ty}, which is not a list, set or map")]
    NotIndexable {
        /// The type there.
        ty: String,
    },
    /// A negative index, or a string, on a list or set.
    #[error("a list or set takes an index from 0, not {subscript}")]
    BadIndex {
        /// The subscript as written.
        subscript: String,
    },
    /// A map key of a kind or range that the map's key type cannot hold.
    #[error("key {subscript} does not fit the map's key type {key}")]
    BadKey {
        /// The subscript as written.
        subscript: String,
        /// The map's key type.
        key: String,
    },
}

impl ResolvedPath {
    /// The path it was resolved from.
    pub fn path(&self) -> &FieldPath {
        &self.path
    }

    /// The struct it starts at.
    pub fn root(&self) -> StructId {
        self.root
    }

    /// The steps.
    pub fn steps(&self) -> &[ResolvedStep] {
        &self.steps
    }

    /// The type of the value the whole path reaches.
    pub fn ty(&self) -> &Ty {
        // A path has at least one step.
        &self.steps[self.steps.len() - 1].ty
    }
}

/// Resolves `path` from struct `root`.
pub(super) fn resolve(
    path: &FieldPath,
    d: &Descriptor,
    root: StructId,
) -> Result<ResolvedPath, ResolveError> {
    let mut steps = Vec::with_capacity(path.steps.len());
    let mut current = Ty::Struct(root);
    for (i, step) in path.steps.iter().enumerate() {
        let fail = |kind| ResolveError {
            prefix: path.prefix(i + 1),
            kind,
        };
        let resolved = match (step, &current) {
            (Step::Name(_) | Step::Id(_), Ty::Struct(id)) => {
                let s = d.struct_desc(*id);
                let field = match step {
                    Step::Name(name) => s.field_named(name),
                    Step::Id(id) => s.field(*id),
                    _ => None,
                };
                let field = field.ok_or_else(|| {
                    fail(ResolveErrorKind::NoSuchField {
                        strukt: s.name.clone(),
                        field: match step {
                            Step::Id(id) => format!("#{id}"),
                            Step::Name(name) => name.clone(),
                            _ => String::new(),
                        },
                    })
                })?;
                ResolvedStep {
                    kind: StepKind::Field(field.id),
                    ty: field.ty.clone(),
                    in_union: s.kind == Kind::Union,
                }
            }
            (Step::Name(_) | Step::Id(_), other) => {
                return Err(fail(ResolveErrorKind::NotAStruct {
                    ty: type_name(d, other),
                }));
            }
            (Step::Int(n), Ty::List(elem) | Ty::Set(elem)) => {
                let index = usize::try_from(*n).map_err(|_| {
                    fail(ResolveErrorKind::BadIndex {
                        subscript: n.to_string(),
                    })
                })?;
                ResolvedStep {
                    kind: StepKind::Index(index),
                    ty: (**elem).clone(),
                    in_union: false,
                }
            }
            (Step::Str(s), Ty::List(_) | Ty::Set(_)) => {
                return Err(fail(ResolveErrorKind::BadIndex {
                    subscript: format!("{s:?}"),
                }));
            }
            (Step::Int(_) | Step::Str(_), Ty::Map(key, value)) => {
                let bad = || {
                    fail(ResolveErrorKind::BadKey {
                        subscript: match step {
                            Step::Str(s) => format!("{s:?}"),
                            Step::Int(n) => n.to_string(),
                            _ => String::new(),
                        },
                        key: type_name(d, key),
                    })
                };
                let key = match (step, &**key) {
                    (Step::Str(s), Ty::String | Ty::Binary) => MapKey::Bytes(s.as_bytes().to_vec()),
                    (Step::Int(n), Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 | Ty::Enum(_)) => {
                        let ty = key.ttype();
                        let fits = match ty {
                            TType::I8 => i8::try_from(*n).is_ok(),
                            TType::I16 => i16::try_from(*n).is_ok(),
                            TType::I32 => i32::try_from(*n).is_ok(),
                            _ => true,
                        };
                        if !fits {
                            return Err(bad());
                        }
                        MapKey::Int { value: *n, ty }
                    }
                    _ => return Err(bad()),
                };
                ResolvedStep {
                    kind: StepKind::Key(key),
                    ty: (**value).clone(),
                    in_union: false,
                }
            }
            (Step::Int(_) | Step::Str(_), other) => {
                return Err(fail(ResolveErrorKind::NotIndexable {
                    ty: type_name(d, other),
                }));
            }
        };
        current = resolved.ty.clone();
        steps.push(resolved);
    }
    Ok(ResolvedPath {
        path: path.clone(),
        root,
        steps,
    })
}

/// A type as the IDL writes it, for error messages.
pub(super) fn type_name(d: &Descriptor, ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::I8 => "byte".into(),
        Ty::I16 => "i16".into(),
        Ty::I32 => "i32".into(),
        Ty::I64 => "i64".into(),
        Ty::Double => "double".into(),
        Ty::String => "string".into(),
        Ty::Binary => "binary".into(),
        Ty::Uuid => "uuid".into(),
        Ty::List(t) => format!("list<{}>", type_name(d, t)),
        Ty::Set(t) => format!("set<{}>", type_name(d, t)),
        Ty::Map(k, v) => format!("map<{}, {}>", type_name(d, k), type_name(d, v)),
        Ty::Struct(id) => {
            let s = d.struct_desc(*id);
            format!("{}.{}", s.module, s.name)
        }
        Ty::Enum(id) => {
            let e = d.enum_desc(*id);
            format!("{}.{}", e.module, e.name)
        }
    }
}
