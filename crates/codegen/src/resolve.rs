//! The resolver: parsed documents to the [`Model`] the emitter works from.
//!
//! Decisions, where the Thrift specification leaves room:
//!
//! - One module per IDL file, named after its stem; of two files with the same module
//!   name (in different directories), the included one is numbered (`name_2`), with a
//!   warning. Names from an included file are written `stem.Name`, where the stem may
//!   hold dots itself (`include "a.b.thrift"`, then `a.b.Name`).
//! - Fields without an id get negative ids counting down from -1, as Apache Thrift's
//!   compiler assigns them, and so do fields whose written id is 0 or negative, as that
//!   compiler does without its `--allow-neg-keys` (with a warning). An id beyond `i16`
//!   keeps its low 16 bits (with a warning). Enum values without one follow the
//!   previous value (from 0).
//!
//! Where Apache Thrift's compiler accepts what loses meaning, codegen reads it as Apache
//! does and records a [`Warning`]: an integer constant too wide for its type keeps its
//! low bits, an integer other than 0 or 1 for a `bool` is `true` when above 0, a
//! non-empty map literal for a list or set (or list literal for a map) is an empty one,
//! a oneway method's return type is dropped, and the cases below that say so.
//! - Fields of a union are never `required`: a union holds exactly one of them.
//! - Constants may refer to other constants and to enum values (`Status.ACTIVE`,
//!   `base.Status.ACTIVE`); integers are accepted for `double` and `0`/`1` for `bool`;
//!   struct literals are maps whose keys are field names; `{}` is also an empty set or
//!   list, as Apache Thrift reads it.
//! - An `optional` field's IDL default is checked, and a constant struct literal that
//!   leaves the field out holds it, but a generated struct starts with the field unset
//!   (`None`), as Apache's C++ and Rust generators do: an optional field is written only
//!   when the program sets it.
//! - Set elements and map keys must be orderable (they are `BTreeSet`/`BTreeMap`). A
//!   `double` there (`set<double>`, `map<double, V>`, `set<list<double>>`) is the
//!   module's `OrderedF64` ([`Ty::OrderedDouble`]): an `f64` ordered by
//!   `f64::total_cmp`, equal and hashed by bit pattern, a `double` on the wire. So is
//!   every `double` field of a struct or union that is a set element or map key, or is
//!   held by one, so that it can derive `Ord` and `Hash`.
//! - A field whose struct type leads back to the struct that holds it (directly, or
//!   through other structs' plain or optional fields) is boxed; containers already
//!   break the cycle.
//! - Every service method gets `<Service><Method>Args` and, unless `oneway`,
//!   `<Service><Method>Result` (field 0 `success` unless `void`, then one optional
//!   field per declared exception), emitted in the service's module; a method with a
//!   `throws` clause also gets `<Service><Method>Exception`, and the service its trait,
//!   `<Service>Reply`, `<Service>Server` and `<Service>Client`.
//! - A service shares one namespace with its whole `extends` chain (the dispatcher
//!   serves every method of it by name): a method name that is already a base's is an
//!   error, as are services that extend each other in a cycle.
//! - Names Apache Thrift tells apart but Rust would spell alike are numbered, with a
//!   warning: fields (`tricky`, `Tricky` are `tricky`, `tricky_2`), methods of a chain
//!   (`getItem`, `get_item`: the later one's Rust names come from `get_item_2`; its
//!   wire name is unchanged), methods named like the generated client's own `new`,
//!   `client` and `builder` (`client_2`), exceptions of a method (`X1`, `X12`), and the
//!   types generated for a service when the IDL defines a type of that name
//!   (`StoreReply2`).
//! - An `include` that is not found is a warning, as in Apache Thrift: the compile goes
//!   on, and a name from that file is then unknown.
//! - Structs holding structs [`DEEP_NESTING`] levels deep or more are a warning that
//!   names the `#![recursion_limit]` the including crate needs: rustc's default of 128
//!   is too low to prove such types `Send` and `Sync` (a chain of 64 fails), and code
//!   included inside a module cannot raise it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::ast::{
    self, BaseType, ConstValue, ConstValueKind, Definition, FieldTypeKind, FileId, Span,
};
use crate::model::{
    ConstDef, EnumDef, FieldDef, FieldValue, Item, MethodDef, Model, Module, ORDERED_F64,
    Requiredness, ServiceDef, StructDef, StructKind, ThrowDef, Ty, TypePath, TypedefDef, Value,
};
use crate::names;

/// A meaning error in the IDL: an unknown type, a duplicate id, a constant of the wrong
/// type... with the position it was found at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveError {
    /// The file, as displayed.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ResolveError {}

/// Something the IDL says that Apache Thrift's compiler accepts but that loses meaning
/// (or that Apache Thrift itself warns about), and what codegen made of it. The compile
/// goes on; [`Builder`](crate::Builder) prints each as a `cargo:warning=` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file, as displayed.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What was accepted, and how it is read.
    pub message: String,
}

impl From<ResolveError> for Warning {
    /// The same place and words, as a warning.
    fn from(e: ResolveError) -> Self {
        Warning {
            file: e.file,
            line: e.line,
            col: e.col,
            message: e.message,
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// One parsed file, ready to resolve.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The id its spans carry.
    pub id: FileId,
    /// The name errors show (the path as given).
    pub display: String,
    /// The file stem: the module name, and the prefix other files use for its names.
    pub stem: String,
    /// The parsed document.
    pub doc: ast::Document,
    /// The files its `include`s name, as indices into the same list, in order.
    pub includes: Vec<usize>,
}

/// How deep typedef chains and constant references may go before they count as a cycle.
const MAX_REFERENCE_DEPTH: usize = 64;

/// How many levels of structs inside structs make codegen warn that the including crate
/// needs a higher `recursion_limit` (see `Resolver::warn_deep_nesting`).
pub const DEEP_NESTING: usize = 48;

/// Resolves `files` (all of one compile, includes among them) into a model with one
/// module per file, in the order given.
pub fn resolve(files: &[SourceFile]) -> Result<Model, ResolveError> {
    Resolver::new(files)?.run()
}

#[derive(Debug, Clone, Copy)]
enum DefRef<'a> {
    Typedef(&'a ast::Typedef),
    Enum(&'a ast::Enum),
    Struct(&'a ast::StructLike),
    Const(&'a ast::Const),
    Service(&'a ast::Service),
}

struct Resolver<'a> {
    files: &'a [SourceFile],
    modules: Vec<String>,
    /// Per file: Thrift name to definition.
    defs: Vec<HashMap<&'a str, DefRef<'a>>>,
    /// Per file: include stem to file index.
    include_names: Vec<HashMap<&'a str, usize>>,
    /// Per file: Rust struct name to definition.
    structs: Vec<HashMap<String, &'a ast::StructLike>>,
    /// Per file: Rust enum name to definition.
    enums: Vec<HashMap<String, &'a ast::Enum>>,
    /// What was accepted with a warning, in the order found (each once).
    warnings: RefCell<Vec<Warning>>,
}

impl<'a> Resolver<'a> {
    fn new(files: &'a [SourceFile]) -> Result<Self, ResolveError> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut defs = Vec::new();
        let mut include_names = Vec::new();
        let mut structs = Vec::new();
        let mut enums = Vec::new();
        let mut early_warnings = Vec::new();
        // Module names, given from the last file to the first: a file comes after the
        // files it includes, so when two files of one name in different directories
        // meet (Apache's PHP tests include `../../../../test/ThriftTest.thrift` from a
        // `ThriftTest.thrift`), the including one keeps the name and the included one
        // takes the first free number, with a warning. Apache keeps them apart by
        // their namespaces.
        let mut modules = vec![String::new(); files.len()];
        for (i, file) in files.iter().enumerate().rev() {
            let module = names::snake(&file.stem);
            if !names::is_legal(&module) {
                return Err(at(
                    file,
                    Span::default(),
                    format!("file name `{}` does not make a Rust module name", file.stem),
                ));
            }
            let module = match seen.get(&module) {
                None => module,
                Some(&other) => {
                    let numbered = (2..)
                        .map(|n| format!("{module}_{n}"))
                        .find(|m| !seen.contains_key(m))
                        .unwrap_or_default();
                    early_warnings.push(Warning::from(at(
                        file,
                        Span::default(),
                        format!(
                            "module `{module}` would come from both {} and this file; this \
                             file's is `{numbered}`",
                            files[other].display
                        ),
                    )));
                    numbered
                }
            };
            seen.insert(module.clone(), i);
            modules[i] = module;
        }
        for file in files {
            let mut table = HashMap::new();
            let mut struct_table = HashMap::new();
            let mut enum_table = HashMap::new();
            for def in &file.doc.definitions {
                match def {
                    Definition::Struct(s) => {
                        struct_table
                            .entry(names::upper_camel(&s.name.name))
                            .or_insert(s);
                    }
                    Definition::Enum(e) => {
                        enum_table
                            .entry(names::upper_camel(&e.name.name))
                            .or_insert(e);
                    }
                    _ => {}
                }
                let (name, r) = match def {
                    Definition::Typedef(t) => (&t.name, DefRef::Typedef(t)),
                    Definition::Enum(e) => (&e.name, DefRef::Enum(e)),
                    Definition::Struct(s) => (&s.name, DefRef::Struct(s)),
                    Definition::Const(c) => (&c.name, DefRef::Const(c)),
                    Definition::Service(s) => (&s.name, DefRef::Service(s)),
                };
                if table.insert(name.name.as_str(), r).is_some() {
                    return Err(at(
                        file,
                        name.span,
                        format!("`{}` is defined twice", name.name),
                    ));
                }
            }
            defs.push(table);
            structs.push(struct_table);
            enums.push(enum_table);
            let mut incs = HashMap::new();
            for &inc in &file.includes {
                incs.insert(files[inc].stem.as_str(), inc);
            }
            include_names.push(incs);
        }
        Ok(Resolver {
            files,
            modules,
            defs,
            include_names,
            structs,
            enums,
            warnings: RefCell::new(early_warnings),
        })
    }

    /// Records a warning (once: definitions are resolved more than once, e.g. a struct
    /// for itself and for each constant literal of it).
    fn warn(&self, file: usize, span: Span, message: String) {
        let w = Warning::from(at(&self.files[file], span, message));
        let mut warnings = self.warnings.borrow_mut();
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }

    fn err(&self, file: usize, span: Span, message: String) -> ResolveError {
        at(&self.files[file], span, message)
    }

    /// Finds the definition `name` means in `file`: `Name`, or `stem.Name` of an include.
    /// Returns the file it lives in, its definition, and any unused trailing part
    /// (`Status.ACTIVE` looks up `Status` and leaves `ACTIVE`).
    ///
    /// An include's stem may hold dots itself (`include "Thrift5320.enum.thrift"` is
    /// named `Thrift5320.enum`, as in Apache's own tests): every dot of `name` is tried
    /// as the end of the stem, the last first, so the longest stem wins.
    fn lookup(&self, file: usize, name: &'a str) -> Option<(usize, DefRef<'a>, Option<&'a str>)> {
        if let Some(d) = self.defs[file].get(name) {
            return Some((file, *d, None));
        }
        let (head, rest) = name.split_once('.')?;
        if let Some(d) = self.defs[file].get(head) {
            return Some((file, *d, Some(rest)));
        }
        name.rmatch_indices('.').find_map(|(dot, _)| {
            let &inc = self.include_names[file].get(&name[..dot])?;
            let rest = &name[dot + 1..];
            if let Some(d) = self.defs[inc].get(rest) {
                return Some((inc, *d, None));
            }
            let (head, tail) = rest.split_once('.')?;
            self.defs[inc].get(head).map(|d| (inc, *d, Some(tail)))
        })
    }

    fn path(&self, file: usize, thrift_name: &str) -> TypePath {
        TypePath {
            module: self.modules[file].clone(),
            name: names::upper_camel(thrift_name),
        }
    }

    fn ty(&self, file: usize, t: &'a ast::FieldType, depth: usize) -> Result<Ty, ResolveError> {
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

    /// Checks `v` against `ty` and resolves references in it.
    fn value(
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

    fn find_enum(&self, p: &TypePath) -> Option<&'a ast::Enum> {
        let file = self.modules.iter().position(|m| *m == p.module)?;
        self.enums[file].get(&p.name).copied()
    }

    fn find_struct(&self, p: &TypePath) -> Option<(usize, &'a ast::StructLike)> {
        let file = self.modules.iter().position(|m| *m == p.module)?;
        Some((file, *self.structs[file].get(&p.name)?))
    }

    /// The fields of a struct-like definition, ids assigned and defaults checked (not yet
    /// boxed: that needs every struct).
    fn fields(&self, file: usize, s: &'a ast::StructLike) -> Result<Vec<FieldDef>, ResolveError> {
        self.field_list(file, &s.fields, s.kind == ast::StructKind::Union)
    }

    fn field_list(
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

    fn run(self) -> Result<Model, ResolveError> {
        // Pass 1: every struct-like, including service args/results, unboxed.
        let mut per_file: Vec<Vec<Item>> = vec![Vec::new(); self.files.len()];
        for (fi, file) in self.files.iter().enumerate() {
            let mut taken: HashMap<String, Span> = HashMap::new();
            let mut claim = |name: &str, span: Span, this: &Self| -> Result<(), ResolveError> {
                if let Some(prev) = taken.insert(name.to_string(), span) {
                    return Err(this.err(
                        fi,
                        span,
                        format!(
                            "`{name}` is generated twice in module `{}` (first at line {})",
                            this.modules[fi], prev.line
                        ),
                    ));
                }
                Ok(())
            };
            for def in &file.doc.definitions {
                match def {
                    Definition::Struct(s) => {
                        let name = names::upper_camel(&s.name.name);
                        claim(&name, s.name.span, &self)?;
                        let kind = match s.kind {
                            ast::StructKind::Struct => StructKind::Struct,
                            ast::StructKind::Union => StructKind::Union,
                            ast::StructKind::Exception => StructKind::Exception,
                        };
                        let fields = self.fields(fi, s)?;
                        per_file[fi].push(Item::Struct(StructDef {
                            thrift_name: s.name.name.clone(),
                            name,
                            kind,
                            fields,
                            doc: s.doc.clone(),
                            hashable: false,
                            // Decided once every struct is known (`end_every_value`).
                            union_default: None,
                        }));
                    }
                    Definition::Enum(e) => {
                        let name = names::upper_camel(&e.name.name);
                        claim(&name, e.name.span, &self)?;
                        per_file[fi].push(Item::Enum(self.enum_def(fi, e)?));
                    }
                    Definition::Typedef(t) => {
                        let name = names::upper_camel(&t.name.name);
                        claim(&name, t.name.span, &self)?;
                        let ty = self.ty(fi, &t.ty, 0)?;
                        per_file[fi].push(Item::Typedef(TypedefDef { name, ty }));
                    }
                    Definition::Const(c) => {
                        let name = names::upper_snake(&c.name.name);
                        claim(&name, c.name.span, &self)?;
                        let ty = self.ty(fi, &c.ty, 0)?;
                        let value = self.value(fi, &c.value, &ty, 0)?;
                        per_file[fi].push(Item::Const(ConstDef {
                            name,
                            ty,
                            value,
                            doc: c.doc.clone(),
                        }));
                    }
                    Definition::Service(svc) => {
                        for item in self.service_items(fi, svc)? {
                            let span = svc.name.span;
                            match &item {
                                Item::Struct(s) => claim(&s.name, span, &self)?,
                                Item::Service(s) => {
                                    claim(&s.name, span, &self)?;
                                    claim(&s.reply, span, &self)?;
                                    claim(&s.server, span, &self)?;
                                    claim(&s.client, span, &self)?;
                                    claim(&s.maker, span, &self)?;
                                    for e in s.methods.iter().filter_map(|m| m.exception.as_ref()) {
                                        claim(&e.name, span, &self)?;
                                    }
                                }
                                Item::Enum(_) | Item::Typedef(_) | Item::Const(_) => {}
                            }
                            per_file[fi].push(item);
                        }
                    }
                }
            }
        }
        // Pass 2: boxing, ordering, and the checks that need every struct.
        let keys = order_key_structs(&self.modules, &mut per_file);
        let graph = StructGraph::new(&self.modules, &per_file);
        self.warn_deep_nesting(&graph);
        for (fi, items) in per_file.iter_mut().enumerate() {
            for item in items {
                if let Item::Struct(s) = item {
                    let owner = TypePath {
                        module: self.modules[fi].clone(),
                        name: s.name.clone(),
                    };
                    for f in &mut s.fields {
                        f.boxed = matches!(&f.ty, Ty::Struct(t) if graph.same_cycle(&owner, t));
                    }
                }
            }
        }
        let made_optional = self.end_every_value(&mut per_file);
        let mut modules = Vec::new();
        for (fi, items) in per_file.into_iter().enumerate() {
            let mut out = Vec::new();
            for mut item in items {
                match &mut item {
                    Item::Struct(s) => {
                        for f in &mut s.fields {
                            self.check_orderable(&graph, fi, &s.thrift_name, &f.ty)?;
                            if let Some(v) = &mut f.default {
                                order_key_literals(v, &keys);
                                graph.mark_boxed(v, &made_optional);
                            }
                        }
                        s.hashable = s.fields.iter().all(|f| graph.orderable(&f.ty));
                    }
                    Item::Const(c) => {
                        order_key_literals(&mut c.value, &keys);
                        graph.mark_boxed(&mut c.value, &made_optional)
                    }
                    Item::Enum(_) | Item::Typedef(_) | Item::Service(_) => {}
                }
                out.push(item);
            }
            let module = Module {
                name: self.modules[fi].clone(),
                items: out,
            };
            if module.uses_ordered_f64() {
                self.check_ordered_f64_free(fi, &module)?;
            }
            modules.push(module);
        }
        Ok(Model {
            modules,
            warnings: self.warnings.into_inner(),
        })
    }

    fn enum_def(&self, file: usize, e: &'a ast::Enum) -> Result<EnumDef, ResolveError> {
        let mut values = Vec::new();
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
        }
        Ok(EnumDef {
            thrift_name: e.name.name.clone(),
            name: names::upper_camel(&e.name.name),
            values,
            doc: e.doc.clone(),
        })
    }

    /// A service's args and result structs, then the service itself.
    fn service_items(&self, file: usize, svc: &'a ast::Service) -> Result<Vec<Item>, ResolveError> {
        let mut items = Vec::new();
        let mut methods = Vec::new();
        let mut seen = HashSet::new();
        for func in &svc.functions {
            if !seen.insert(func.name.name.as_str()) {
                return Err(self.err(
                    file,
                    func.name.span,
                    format!("method `{}` is defined twice", func.name.name),
                ));
            }
        }
        for (func, alias) in svc.functions.iter().zip(self.aliases(file, svc)?) {
            let (method, args, result) = self.method(file, svc, func, &alias)?;
            items.push(Item::Struct(args));
            items.extend(result.map(Item::Struct));
            methods.push(method);
        }
        let (extends, inherited) = self.inherited(file, svc)?;

        // One trait method and one reply variant per method of the whole chain. A clash
        // is reported at the later of the service's own methods involved, if any.
        let all: Vec<&MethodDef> = methods.iter().chain(&inherited).collect();
        let any_oneway = all.iter().any(|m| m.oneway);
        let span_of = |i: usize| svc.functions.get(i).map_or(svc.name.span, |f| f.name.span);
        let clash = |first: usize, later: usize, rust: &str| {
            // `first` comes earlier in the chain: its owner is or extends `later`'s.
            let (a, b) = (all[first], all[later]);
            let message = if a.owner == b.owner {
                format!(
                    "methods `{}` and `{}` of `{}` are both `{rust}` in Rust",
                    a.thrift_name, b.thrift_name, a.owner.name
                )
            } else if a.thrift_name == b.thrift_name {
                format!(
                    "method `{}` of `{}` is already a method of `{}`, which it extends",
                    a.thrift_name, a.owner.name, b.owner.name
                )
            } else {
                format!(
                    "method `{}` of `{}` and method `{}` of `{}`, which it extends, are both \
                     `{rust}` in Rust",
                    a.thrift_name, a.owner.name, b.thrift_name, b.owner.name
                )
            };
            let at = if later < svc.functions.len() {
                later
            } else {
                first
            };
            self.err(file, span_of(at), message)
        };
        let mut rust_names: HashMap<&str, usize> = HashMap::new();
        let mut variants: HashMap<&str, usize> = HashMap::new();
        for (i, m) in all.iter().enumerate() {
            if let Some(&first) = rust_names.get(m.name.as_str()) {
                return Err(clash(first, i, &m.name));
            }
            rust_names.insert(&m.name, i);
            if m.oneway {
                continue;
            }
            if let Some(&first) = variants.get(m.variant.as_str()) {
                return Err(clash(first, i, &m.variant));
            }
            variants.insert(&m.variant, i);
            if any_oneway && m.variant == "Oneway" {
                return Err(self.err(
                    file,
                    span_of(i),
                    format!(
                        "method `{}` clashes with the `Oneway` variant of `{}`'s reply enum",
                        m.thrift_name, svc.name.name
                    ),
                ));
            }
        }

        let name = names::upper_camel(&svc.name.name);
        let generated = |suffix: &str| self.fresh_type(file, format!("{name}{suffix}"), svc);
        items.push(Item::Service(ServiceDef {
            thrift_name: svc.name.name.clone(),
            reply: generated("Reply"),
            server: generated("Server"),
            client: generated("Client"),
            maker: generated("ClientMaker"),
            name,
            doc: svc.doc.clone(),
            extends,
            methods,
            inherited,
        }));
        Ok(items)
    }

    /// The service `svc` extends, and every method it inherits through its `extends`
    /// chain, the nearest base's first.
    fn inherited(
        &self,
        file: usize,
        svc: &'a ast::Service,
    ) -> Result<(Option<TypePath>, Vec<MethodDef>), ResolveError> {
        let mut extends = None;
        let mut methods = Vec::new();
        let mut chain = vec![(file, svc.name.name.as_str())];
        let mut bases = Vec::new();
        let (mut f, mut s) = (file, svc);
        while let Some(base) = &s.extends {
            let Some((bf, DefRef::Service(bs), None)) = self.lookup(f, &base.name) else {
                return Err(self.err(f, base.span, format!("unknown service `{}`", base.name)));
            };
            let looped = chain.contains(&(bf, bs.name.name.as_str()));
            chain.push((bf, bs.name.name.as_str()));
            if looped {
                let names: Vec<&str> = chain.iter().map(|(_, n)| *n).collect();
                return Err(self.err(
                    f,
                    base.span,
                    format!(
                        "services extend each other in a cycle: {}",
                        names.join(" extends ")
                    ),
                ));
            }
            extends.get_or_insert_with(|| self.path(bf, &bs.name.name));
            bases.push((bf, bs));
            (f, s) = (bf, bs);
        }
        // Only once the chain is known to end: each base's names depend on its own chain.
        for (bf, bs) in bases {
            for (func, alias) in bs.functions.iter().zip(self.aliases(bf, bs)?) {
                methods.push(self.method(bf, bs, func, &alias)?.0);
            }
        }
        Ok((extends, methods))
    }

    /// The names the Rust side of each of `svc`'s own methods is made from: the IDL
    /// name, or, when Rust would spell it like a method of the chain before it (in the
    /// trait, or as a reply variant, `Oneway` included when a method of the chain is
    /// oneway), the IDL name numbered (`get_item_2`), with a warning. Apache Thrift
    /// accepts `getItem` and `get_item` side by side. The same IDL name as a base's
    /// method is left alone: that is an error (the dispatcher routes by it).
    fn aliases(&self, file: usize, svc: &'a ast::Service) -> Result<Vec<String>, ResolveError> {
        let (_, inherited) = self.inherited(file, svc)?;
        let any_oneway =
            inherited.iter().any(|m| m.oneway) || svc.functions.iter().any(|f| f.oneway);
        let mut methods: HashMap<String, String> = inherited
            .iter()
            .map(|m| (m.name.clone(), format!("`{}`", m.thrift_name)))
            .collect();
        // The generated client's own functions (Apache's netstd tests have a method
        // named `client`).
        for own in ["new", "client", "builder"] {
            methods.insert(own.into(), format!("the generated client's own `{own}`"));
        }
        let mut variants: HashMap<String, String> = inherited
            .iter()
            .filter(|m| !m.oneway)
            .map(|m| (m.variant.clone(), format!("`{}`", m.thrift_name)))
            .collect();
        if any_oneway {
            variants.insert(
                "Oneway".into(),
                "the reply enum's `Oneway` variant (for oneway calls)".into(),
            );
        }
        let mut out = Vec::new();
        for func in &svc.functions {
            let name = &func.name.name;
            let inherited_same = inherited.iter().any(|m| m.thrift_name == *name);
            let taken = |alias: &str| {
                methods
                    .get(&names::snake(alias))
                    .or_else(|| {
                        (!func.oneway)
                            .then(|| variants.get(&names::upper_camel(alias)))
                            .flatten()
                    })
                    .cloned()
            };
            let mut alias = name.clone();
            if let (Some(other), false) = (taken(name), inherited_same) {
                alias = (2..)
                    .map(|n| format!("{name}_{n}"))
                    .find(|a| taken(a).is_none())
                    .unwrap_or_default();
                self.warn(
                    file,
                    func.name.span,
                    format!(
                        "method `{name}` of `{}` would be spelled in Rust like {other}; its \
                         Rust names are made from `{alias}`",
                        svc.name.name
                    ),
                );
            }
            methods.insert(names::snake(&alias), format!("`{name}`"));
            if !func.oneway {
                variants.insert(names::upper_camel(&alias), format!("`{name}`"));
            }
            out.push(alias);
        }
        Ok(out)
    }

    /// Warns when structs hold structs [`DEEP_NESTING`] levels deep or more (Apache's
    /// Smalltalk tests hold a chain of 65): rustc proves such types `Send` and `Sync`
    /// (the server needs both) one level at a time, two steps a level with the
    /// `Option` of an optional field, and its default limit of 128 steps ends the
    /// build. The including crate must raise it; generated code cannot, being
    /// included inside a module.
    fn warn_deep_nesting(&self, graph: &StructGraph) {
        // The IDL's own structs (a method's arguments add one level to its types',
        // and have no place in the IDL to point at), the deepest, the first of equals.
        let deepest = graph
            .depths()
            .filter_map(|(fi, name, depth)| Some((depth, fi, self.structs[fi].get(name)?)))
            .max_by_key(|&(depth, fi, s)| (depth, std::cmp::Reverse((fi, s.name.span.line))));
        let Some((depth, fi, s)) = deepest else {
            return;
        };
        if depth < DEEP_NESTING {
            return;
        }
        self.warn(
            fi,
            s.name.span,
            format!(
                "`{}` holds structs {depth} levels deep: the crate that includes this code \
                 needs `#![recursion_limit = \"{}\"]` (Rust's default, 128, is too low \
                 to check such types for `Send` and `Sync`)",
                s.name.name,
                (depth * 4).next_power_of_two().max(256)
            ),
        );
    }

    /// `wanted`, a type name generated for `svc`, or, if the IDL defines a type of that
    /// name in the same file, the first numbered name it does not (with a warning).
    fn fresh_type(&self, file: usize, wanted: String, svc: &ast::Service) -> String {
        let declared: HashSet<String> = self.defs[file]
            .keys()
            .map(|n| names::upper_camel(n))
            .collect();
        if !declared.contains(&wanted) {
            return wanted;
        }
        let fresh = (2..)
            .map(|n| format!("{wanted}{n}"))
            .find(|n| !declared.contains(n))
            .unwrap_or_default();
        self.warn(
            file,
            svc.name.span,
            format!(
                "`{wanted}`, which codegen makes for service `{}`, is a type the IDL defines; \
                 the generated one is `{fresh}`",
                svc.name.name
            ),
        );
        fresh
    }

    /// One method of `svc`: what its trait and dispatcher need, its args struct and,
    /// unless it is oneway, its result struct. Its Rust names are made from `alias`
    /// (see [`Resolver::aliases`]); on the wire it is its IDL name.
    fn method(
        &self,
        file: usize,
        svc: &'a ast::Service,
        func: &'a ast::Function,
        alias: &str,
    ) -> Result<(MethodDef, StructDef, Option<StructDef>), ResolveError> {
        let local = |name: String| TypePath {
            module: self.modules[file].clone(),
            name,
        };
        let base = format!("{}_{alias}", svc.name.name);
        let generated = |suffix: &str| {
            self.fresh_type(file, names::upper_camel(&format!("{base}_{suffix}")), svc)
        };
        let rust_name = names::snake(alias);
        let variant = names::upper_camel(alias);
        if !names::is_legal(&rust_name) || !names::is_legal(&variant) {
            return Err(self.err(
                file,
                func.name.span,
                format!("`{}` does not make a Rust name", func.name.name),
            ));
        }
        let params = self.field_list(file, &func.args, false)?;
        let args = StructDef {
            thrift_name: format!("{}_args", func.name.name),
            name: generated("args"),
            kind: StructKind::Struct,
            fields: params.clone(),
            doc: None,
            hashable: false,
            union_default: None,
        };
        let mut method = MethodDef {
            thrift_name: func.name.name.clone(),
            name: rust_name,
            variant,
            doc: func.doc.clone(),
            owner: self.path(file, &svc.name.name),
            args: local(args.name.clone()),
            params,
            result: None,
            returns: None,
            oneway: func.oneway,
            exception: None,
            throws: Vec::new(),
        };
        if func.oneway {
            if !func.throws.is_empty() {
                return Err(self.err(
                    file,
                    func.span,
                    format!("oneway method `{}` cannot throw exceptions", func.name.name),
                ));
            }
            if func.returns.is_some() {
                // Apache Thrift warns and drops it: no reply ever carries it.
                self.warn(
                    file,
                    func.span,
                    format!(
                        "oneway method `{}` returns nothing: its return type is dropped, as \
                         Apache Thrift does",
                        func.name.name
                    ),
                );
            }
            return Ok((method, args, None));
        }
        let mut fields = Vec::new();
        if let Some(ret) = &func.returns {
            let ty = self.ty(file, ret, 0)?;
            method.returns = Some(ty.clone());
            fields.push(FieldDef {
                id: 0,
                thrift_name: "success".into(),
                name: "success".into(),
                ty,
                req: Requiredness::Optional,
                default: None,
                boxed: false,
            });
        }
        let mut variants: HashMap<String, String> = HashMap::new();
        for mut f in self.field_list(file, &func.throws, false)? {
            let exception = match &f.ty {
                Ty::Struct(p)
                    if self
                        .find_struct(p)
                        .is_some_and(|(_, s)| s.kind == ast::StructKind::Exception) =>
                {
                    p.clone()
                }
                _ => {
                    return Err(self.err(
                        file,
                        func.span,
                        format!(
                            "`{}` in the throws of `{}` is not an exception",
                            f.thrift_name, func.name.name
                        ),
                    ));
                }
            };
            if f.id == 0 || f.name == "success" {
                return Err(self.err(
                    file,
                    func.span,
                    format!(
                        "exception `{}` of `{}` clashes with the result's `success` field",
                        f.thrift_name, func.name.name
                    ),
                ));
            }
            let mut variant = names::upper_camel(&f.thrift_name);
            if let Some(first) = variants.get(&variant) {
                let fresh = (2..)
                    .map(|n| format!("{variant}{n}"))
                    .find(|v| !variants.contains_key(v))
                    .unwrap_or_default();
                self.warn(
                    file,
                    func.span,
                    format!(
                        "exceptions `{first}` and `{}` of `{}` are both `{variant}` in Rust; \
                         `{}` is `{fresh}`",
                        f.thrift_name, func.name.name, f.thrift_name
                    ),
                );
                variant = fresh;
            }
            variants.insert(variant.clone(), f.thrift_name.clone());
            method.throws.push(ThrowDef {
                variant,
                field: f.name.clone(),
                ty: exception,
            });
            f.req = Requiredness::Optional;
            fields.push(f);
        }
        if !method.throws.is_empty() {
            method.exception = Some(local(generated("exception")));
        }
        let result = StructDef {
            thrift_name: format!("{}_result", func.name.name),
            name: generated("result"),
            kind: StructKind::Struct,
            fields,
            doc: None,
            hashable: false,
            union_default: None,
        };
        method.result = Some(local(result.name.clone()));
        Ok((method, args, Some(result)))
    }

    /// Makes sure every struct and union has a value that ends, which Rust needs to
    /// build one (a default, a decoded value). A field that is always present and leads
    /// back to its own struct through fields that are always present (Apache's
    /// `1: RecList & nextitem`) would make every value endless: such fields become
    /// optional (`Option<Box<_>>`, written only when set, as Apache's C++ makes them
    /// pointers), with a warning; then so does any field always present whose type is
    /// a union all of whose variants lead back to it. Unions get the first variant
    /// whose value ends as their default, and none when there is none. Returns the
    /// fields made optional.
    fn end_every_value(&self, per_file: &mut [Vec<Item>]) -> HashSet<(TypePath, String)> {
        let mut made = HashSet::new();
        // Closing fields first, one at a time (each may end the others' values): that is
        // what Apache's `&` asks for.
        for boxed_only in [true, false] {
            while let Some((fi, index, field)) = self.endless_field(per_file, boxed_only) {
                let Item::Struct(s) = &mut per_file[fi][index] else {
                    break;
                };
                let f = &mut s.fields[field];
                let why = match (&f.ty, boxed_only) {
                    (_, true) => format!(
                        "leads back to `{}` through fields that are always present",
                        s.thrift_name
                    ),
                    (Ty::Struct(target), false) => format!(
                        "is a `{}`, a union whose every variant leads back to it",
                        target.name
                    ),
                    _ => break,
                };
                let span = self.field_span(fi, &s.thrift_name, &f.thrift_name);
                self.warn(
                    fi,
                    span,
                    format!(
                        "field `{}` of `{}` {why}, so no value of it would end: it is an \
                         `Option` here, written only when set",
                        f.thrift_name, s.thrift_name
                    ),
                );
                f.req = Requiredness::Optional;
                let owner = TypePath {
                    module: self.modules[fi].clone(),
                    name: s.name.clone(),
                };
                made.insert((owner, f.name.clone()));
            }
        }
        let ends = value_ends(&self.modules, per_file);
        for (fi, items) in per_file.iter_mut().enumerate() {
            for item in items.iter_mut() {
                match item {
                    Item::Struct(s) if s.kind == StructKind::Union => {
                        s.union_default = s.fields.iter().position(|f| match &f.ty {
                            Ty::Struct(t) => ends.get(t).copied().unwrap_or(true),
                            _ => true,
                        });
                    }
                    // The handler's parameters are the args struct's fields.
                    Item::Service(svc) => {
                        for m in &mut svc.methods {
                            for p in &mut m.params {
                                let key = (
                                    TypePath {
                                        module: self.modules[fi].clone(),
                                        name: m.args.name.clone(),
                                    },
                                    p.name.clone(),
                                );
                                if made.contains(&key) {
                                    p.req = Requiredness::Optional;
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        for items in per_file.iter_mut() {
            for item in items.iter_mut() {
                if let Item::Service(svc) = item {
                    for m in &mut svc.inherited {
                        let Some(owner) = self.modules.iter().position(|x| *x == m.owner.module)
                        else {
                            continue;
                        };
                        for p in &mut m.params {
                            if made.contains(&(
                                TypePath {
                                    module: self.modules[owner].clone(),
                                    name: m.args.name.clone(),
                                },
                                p.name.clone(),
                            )) {
                                p.req = Requiredness::Optional;
                            }
                        }
                    }
                }
            }
        }
        made
    }

    /// The first field (file, item and field index) that is always present and whose
    /// struct type has no value that ends, among the fields that close a cycle if
    /// `boxed_only`.
    fn endless_field(
        &self,
        per_file: &[Vec<Item>],
        boxed_only: bool,
    ) -> Option<(usize, usize, usize)> {
        let ends = value_ends(&self.modules, per_file);
        for (fi, items) in per_file.iter().enumerate() {
            for (index, item) in items.iter().enumerate() {
                let Item::Struct(s) = item else { continue };
                if s.kind == StructKind::Union {
                    continue;
                }
                let found = s.fields.iter().position(|f| {
                    f.req != Requiredness::Optional
                        && (f.boxed || !boxed_only)
                        && matches!(&f.ty, Ty::Struct(t) if !ends.get(t).copied().unwrap_or(true))
                });
                if let Some(field) = found {
                    return Some((fi, index, field));
                }
            }
        }
        None
    }

    /// Where field `field` of struct (or args struct) `owner` is written, or where the
    /// file starts if it cannot be found.
    fn field_span(&self, file: usize, owner: &str, field: &str) -> Span {
        let in_fields = |fields: &[ast::Field]| {
            fields
                .iter()
                .find(|f| f.name.name == field)
                .map(|f| f.name.span)
        };
        self.files[file]
            .doc
            .definitions
            .iter()
            .find_map(|d| match d {
                Definition::Struct(s) if s.name.name == owner => in_fields(&s.fields),
                Definition::Service(svc) => svc.functions.iter().find_map(|func| {
                    if format!("{}_args", func.name.name) == owner {
                        in_fields(&func.args)
                    } else {
                        None
                    }
                }),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Fails if the module, which needs its `OrderedF64`, defines that name itself.
    fn check_ordered_f64_free(&self, file: usize, module: &Module) -> Result<(), ResolveError> {
        let name = ORDERED_F64;
        let taken = module.items.iter().any(|item| match item {
            Item::Struct(s) => s.name == name,
            Item::Enum(e) => e.name == name,
            Item::Typedef(t) => t.name == name,
            Item::Service(s) => [&s.name, &s.reply, &s.server, &s.client, &s.maker]
                .iter()
                .any(|n| *n == name),
            Item::Const(_) => false,
        });
        if !taken {
            return Ok(());
        }
        let span = self.files[file]
            .doc
            .definitions
            .iter()
            .find(|d| names::upper_camel(&d.name().name) == name)
            .map_or_else(Span::default, |d| d.name().span);
        Err(self.err(
            file,
            span,
            format!(
                "`{name}` is generated twice in module `{}`: the module has doubles in set \
                 elements or map keys, which are its `{name}`",
                module.name
            ),
        ))
    }

    fn check_orderable(
        &self,
        graph: &StructGraph,
        file: usize,
        owner: &str,
        ty: &Ty,
    ) -> Result<(), ResolveError> {
        match ty {
            Ty::Set(e) | Ty::Map(e, _) if !graph.orderable(e) => Err(self.err(
                file,
                Span::default(),
                format!(
                    "in `{owner}`: set elements and map keys must be orderable, and {} is not \
                     (it is or holds a struct that holds a double)",
                    describe(e)
                ),
            )),
            Ty::List(t) | Ty::Set(t) => self.check_orderable(graph, file, owner, t),
            Ty::Map(k, v) => {
                self.check_orderable(graph, file, owner, k)?;
                self.check_orderable(graph, file, owner, v)
            }
            _ => Ok(()),
        }
    }
}

fn at(file: &SourceFile, span: Span, message: String) -> ResolveError {
    ResolveError {
        file: file.display.clone(),
        line: span.line.max(1),
        col: span.col.max(1),
        message,
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

/// Finds the structs and unions that are set elements or map keys, or are held by one
/// (however deep), and makes every `double` in their fields an
/// [`Ty::OrderedDouble`], so that they can derive `Ord` and `Hash` (Apache Thrift
/// accepts `set<S>` whatever `S` holds). Returns them.
fn order_key_structs(modules: &[String], per_file: &mut [Vec<Item>]) -> HashSet<TypePath> {
    fn structs_in(ty: &Ty, in_key: bool, out: &mut Vec<(TypePath, bool)>) {
        match ty {
            Ty::Struct(p) => out.push((p.clone(), in_key)),
            Ty::List(t) => structs_in(t, in_key, out),
            Ty::Set(t) => structs_in(t, true, out),
            Ty::Map(k, v) => {
                structs_in(k, true, out);
                structs_in(v, in_key, out);
            }
            _ => {}
        }
    }
    // Every struct's field types, and the key positions of every type spelled anywhere.
    let mut fields_of: HashMap<TypePath, Vec<TypePath>> = HashMap::new();
    let mut keys: Vec<TypePath> = Vec::new();
    for (fi, items) in per_file.iter().enumerate() {
        for item in items {
            let mut found = Vec::new();
            match item {
                Item::Struct(s) => s
                    .fields
                    .iter()
                    .for_each(|f| structs_in(&f.ty, false, &mut found)),
                Item::Const(c) => structs_in(&c.ty, false, &mut found),
                Item::Typedef(t) => structs_in(&t.ty, false, &mut found),
                Item::Enum(_) | Item::Service(_) => {}
            }
            keys.extend(found.iter().filter(|(_, k)| *k).map(|(p, _)| p.clone()));
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                fields_of.insert(path, found.into_iter().map(|(p, _)| p).collect());
            }
        }
    }
    let mut closed: HashSet<TypePath> = HashSet::new();
    while let Some(p) = keys.pop() {
        if closed.insert(p.clone()) {
            keys.extend(fields_of.get(&p).into_iter().flatten().cloned());
        }
    }
    for (fi, items) in per_file.iter_mut().enumerate() {
        for item in items.iter_mut() {
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                if closed.contains(&path) {
                    for f in &mut s.fields {
                        f.ty = ordered(f.ty.clone());
                    }
                }
            }
        }
    }
    closed
}

/// Makes the field types of the struct literals inside `v` whose structs
/// [`order_key_structs`] changed match them.
fn order_key_literals(v: &mut Value, keys: &HashSet<TypePath>) {
    match v {
        Value::List(items) => items.iter_mut().for_each(|v| order_key_literals(v, keys)),
        Value::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
            order_key_literals(k, keys);
            order_key_literals(v, keys);
        }),
        Value::Struct(owner, fields) => {
            let key = keys.contains(owner);
            for f in fields {
                if key {
                    f.ty = ordered(f.ty.clone());
                }
                order_key_literals(&mut f.value, keys);
            }
        }
        _ => {}
    }
}

/// Which structs and unions have a value that ends (least fixed point): a struct whose
/// fields always present all have one, a union with a variant that has one. Base
/// types, enums and containers (which may be empty) always have one. Linear in the
/// fields: a worklist over the reverse edges.
fn value_ends(modules: &[String], per_file: &[Vec<Item>]) -> HashMap<TypePath, bool> {
    let mut defs: Vec<(TypePath, &StructDef)> = Vec::new();
    for (fi, items) in per_file.iter().enumerate() {
        for item in items {
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                defs.push((path, s));
            }
        }
    }
    let index: HashMap<&TypePath, usize> =
        defs.iter().enumerate().map(|(i, (p, _))| (p, i)).collect();
    // Per def: the defs that wait on it, and how many struct fields it waits on.
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
    let mut pending = vec![0usize; defs.len()];
    let mut ends = vec![false; defs.len()];
    let mut queue = Vec::new();
    for (i, (_, s)) in defs.iter().enumerate() {
        let union = s.kind == StructKind::Union;
        let mut free = false;
        for f in &s.fields {
            if !union && f.req == Requiredness::Optional {
                continue;
            }
            match &f.ty {
                Ty::Struct(t) if index.contains_key(t) => {
                    waiting[index[t]].push(i);
                    pending[i] += 1;
                }
                _ => free = true,
            }
        }
        if (union && free) || (!union && pending[i] == 0) {
            ends[i] = true;
            queue.push(i);
        }
    }
    while let Some(t) = queue.pop() {
        for &d in &waiting[t] {
            if ends[d] {
                continue;
            }
            pending[d] -= 1;
            if defs[d].1.kind == StructKind::Union || pending[d] == 0 {
                ends[d] = true;
                queue.push(d);
            }
        }
    }
    defs.into_iter()
        .zip(ends)
        .map(|((p, _), e)| (p, e))
        .collect()
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

/// `ty` with every `double` inside it made [`Ty::OrderedDouble`]: what a set element or
/// map key type holds.
fn ordered(ty: Ty) -> Ty {
    match ty {
        Ty::Double => Ty::OrderedDouble,
        Ty::List(t) => Ty::List(Box::new(ordered(*t))),
        Ty::Set(t) => Ty::Set(Box::new(ordered(*t))),
        Ty::Map(k, v) => Ty::Map(Box::new(ordered(*k)), Box::new(ordered(*v))),
        other => other,
    }
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

fn describe(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::I8 => "i8".into(),
        Ty::I16 => "i16".into(),
        Ty::I32 => "i32".into(),
        Ty::I64 => "i64".into(),
        Ty::Double | Ty::OrderedDouble => "double".into(),
        Ty::String => "string".into(),
        Ty::Binary => "binary".into(),
        Ty::Uuid => "uuid".into(),
        Ty::List(t) => format!("list<{}>", describe(t)),
        Ty::Set(t) => format!("set<{}>", describe(t)),
        Ty::Map(k, v) => format!("map<{}, {}>", describe(k), describe(v)),
        Ty::Struct(p) | Ty::Enum(p) => format!("{}.{}", p.module, p.name),
    }
}

/// Every struct of a compile as a graph node, for the decisions that need all of them:
/// which fields close a cycle (boxed) and which structs hold a `double` somewhere
/// (not orderable).
struct StructGraph {
    /// Per module (in `modules` order): Rust struct name to node.
    nodes: Vec<HashMap<String, usize>>,
    modules: Vec<String>,
    /// Each node's strongly connected component over plain and optional struct fields.
    component: Vec<usize>,
    /// Whether each node reaches a `double` (through any field, containers included).
    unorderable: Vec<bool>,
    /// How many structs the longest chain of structs inside structs from each node
    /// passes through (containers included; a cycle counts once).
    depth: Vec<usize>,
}

impl StructGraph {
    fn new(modules: &[String], per_file: &[Vec<Item>]) -> Self {
        let mut nodes: Vec<HashMap<String, usize>> = vec![HashMap::new(); modules.len()];
        let mut defs: Vec<&StructDef> = Vec::new();
        for (fi, items) in per_file.iter().enumerate() {
            for item in items {
                if let Item::Struct(s) = item {
                    nodes[fi].insert(s.name.clone(), defs.len());
                    defs.push(s);
                }
            }
        }
        let mut graph = StructGraph {
            nodes,
            modules: modules.to_vec(),
            component: Vec::new(),
            unorderable: Vec::new(),
            depth: Vec::new(),
        };
        // Direct struct fields make the cycles that need a box; containers already hold
        // their elements on the heap.
        let direct: Vec<Vec<usize>> = defs
            .iter()
            .map(|s| {
                s.fields
                    .iter()
                    .filter_map(|f| match &f.ty {
                        Ty::Struct(p) => graph.node(p),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        // Any struct inside a field's type matters for ordering.
        let mut nested: Vec<Vec<usize>> = Vec::with_capacity(defs.len());
        let mut doubles = Vec::with_capacity(defs.len());
        for s in &defs {
            let mut targets = Vec::new();
            let mut double = false;
            for f in &s.fields {
                graph.walk(&f.ty, &mut targets, &mut double);
            }
            nested.push(targets);
            doubles.push(double);
        }
        graph.component = crate::graph::components(&direct);
        graph.unorderable = crate::graph::reaching(&nested, &doubles);
        graph.depth = crate::graph::chain_lengths(&nested);
        graph
    }

    /// Every struct: its module's index, its Rust name, and the length of the longest
    /// chain of structs inside it.
    fn depths(&self) -> impl Iterator<Item = (usize, &str, usize)> {
        self.nodes.iter().enumerate().flat_map(move |(fi, names)| {
            names
                .iter()
                .map(move |(name, &n)| (fi, name.as_str(), self.depth[n]))
        })
    }

    fn node(&self, p: &TypePath) -> Option<usize> {
        let module = self.modules.iter().position(|m| *m == p.module)?;
        self.nodes[module].get(&p.name).copied()
    }

    /// Collects the structs inside `ty` and whether a `double` is there outside them.
    fn walk(&self, ty: &Ty, structs: &mut Vec<usize>, double: &mut bool) {
        match ty {
            Ty::Double => *double = true,
            Ty::List(t) | Ty::Set(t) => self.walk(t, structs, double),
            Ty::Map(k, v) => {
                self.walk(k, structs, double);
                self.walk(v, structs, double);
            }
            Ty::Struct(p) => structs.extend(self.node(p)),
            _ => {}
        }
    }

    /// Whether a field of struct `owner` with struct type `target` closes a cycle, that is
    /// whether `target` leads back to `owner`.
    fn same_cycle(&self, owner: &TypePath, target: &TypePath) -> bool {
        match (self.node(owner), self.node(target)) {
            (Some(a), Some(b)) => self.component[a] == self.component[b],
            _ => false,
        }
    }

    /// Whether values of `ty` can be ordered (no `double` anywhere inside).
    fn orderable(&self, ty: &Ty) -> bool {
        match ty {
            Ty::Double => false,
            Ty::List(t) | Ty::Set(t) => self.orderable(t),
            Ty::Map(k, v) => self.orderable(k) && self.orderable(v),
            Ty::Struct(p) => self.node(p).is_some_and(|n| !self.unorderable[n]),
            _ => true,
        }
    }

    /// Boxes the fields of the struct literals inside `v` that close a cycle, as the
    /// fields themselves are, and makes optional those that
    /// [`Resolver::end_every_value`] made optional.
    fn mark_boxed(&self, v: &mut Value, made_optional: &HashSet<(TypePath, String)>) {
        match v {
            Value::List(items) => items
                .iter_mut()
                .for_each(|v| self.mark_boxed(v, made_optional)),
            Value::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
                self.mark_boxed(k, made_optional);
                self.mark_boxed(v, made_optional);
            }),
            Value::Struct(owner, fields) => {
                for f in fields {
                    self.mark_boxed(&mut f.value, made_optional);
                    if f.value != Value::Default
                        && made_optional.contains(&(owner.clone(), f.name.clone()))
                    {
                        f.optional = true;
                    }
                    // A field left to its default builds `Default::default()` whatever
                    // its type, boxed or not.
                    f.boxed = f.value != Value::Default
                        && matches!(&f.ty, Ty::Struct(t) if self.same_cycle(owner, t));
                }
            }
            _ => {}
        }
    }
}
