//! The runtime descriptor: what an IDL says, by Thrift name and field id, for programs
//! that read IDL while they run.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thrift_codegen::model::{self, Item, Model, TypePath};
use thrift_wire::TType;

use crate::error::LoadError;

/// Everything one set of IDL files defines: services (their methods with the ones they
/// inherit), structs, unions and exceptions, enums, constants, and the argument and
/// result structs of every method, resolved across includes. Typedefs are resolved
/// into the types they name.
///
/// Cheap to clone (an `Arc`); a clone taken by a call stays whole while the
/// [`IdlProvider`](crate::IdlProvider) that handed it out moves on to a newer one.
///
/// Names are Thrift's, as written in the IDL. A type is found by its name
/// qualified with its file's stem (`echo.Request`), or by its bare name when only one
/// file defines it; services likewise (`echo.EchoService` or `EchoService`).
#[derive(Clone)]
pub struct Descriptor {
    inner: Arc<Inner>,
}

struct Inner {
    structs: Vec<StructDesc>,
    enums: Vec<EnumDesc>,
    services: Vec<ServiceDesc>,
    constants: Vec<ConstDesc>,
    /// Qualified and (when unique) bare names.
    struct_names: HashMap<String, StructId>,
    enum_names: HashMap<String, EnumId>,
    service_names: HashMap<String, usize>,
    const_names: HashMap<String, usize>,
    /// The files read, for a provider to watch (empty for IDL from memory).
    paths: Vec<PathBuf>,
}

/// A struct, union or exception of a [`Descriptor`], by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StructId(pub(crate) u32);

/// An enum of a [`Descriptor`], by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnumId(pub(crate) u32);

/// A type as the wire sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ty {
    /// `bool`.
    Bool,
    /// `byte` / `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `double`.
    Double,
    /// `string`: UTF-8 text.
    String,
    /// `binary`: bytes.
    Binary,
    /// `uuid`: 16 bytes.
    Uuid,
    /// `list<T>`.
    List(Box<Ty>),
    /// `set<T>`.
    Set(Box<Ty>),
    /// `map<K, V>`.
    Map(Box<Ty>, Box<Ty>),
    /// A struct, union or exception.
    Struct(StructId),
    /// An enum (an `i32` on the wire).
    Enum(EnumId),
}

impl Ty {
    /// The wire type id.
    pub fn ttype(&self) -> TType {
        match self {
            Ty::Bool => TType::Bool,
            Ty::I8 => TType::I8,
            Ty::I16 => TType::I16,
            Ty::I32 | Ty::Enum(_) => TType::I32,
            Ty::I64 => TType::I64,
            Ty::Double => TType::Double,
            Ty::String | Ty::Binary => TType::Binary,
            Ty::Uuid => TType::Uuid,
            Ty::List(_) => TType::List,
            Ty::Set(_) => TType::Set,
            Ty::Map(..) => TType::Map,
            Ty::Struct(_) => TType::Struct,
        }
    }
}

/// Which of the three struct-like kinds a [`StructDesc`] is.
pub use thrift_codegen::model::StructKind as Kind;

/// Requiredness, with the usual Thrift meaning.
pub use thrift_codegen::model::Requiredness;

/// A struct, union or exception.
#[derive(Debug, Clone)]
pub struct StructDesc {
    /// The Thrift name.
    pub name: String,
    /// The stem of the file that defines it (for a method's argument or result struct,
    /// its service's file).
    pub module: String,
    /// Which kind.
    pub kind: Kind,
    /// Fields in IDL order.
    pub fields: Vec<FieldDesc>,
    by_id: HashMap<i16, usize>,
    by_name: HashMap<String, usize>,
}

impl StructDesc {
    /// The field with id `id`.
    pub fn field(&self, id: i16) -> Option<&FieldDesc> {
        self.by_id.get(&id).map(|&i| &self.fields[i])
    }

    /// The field named `name` (its Thrift name).
    pub fn field_named(&self, name: &str) -> Option<&FieldDesc> {
        self.field_index(name).map(|i| &self.fields[i])
    }

    /// The position in [`fields`](StructDesc::fields) of the field named `name`.
    pub(crate) fn field_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The position of the field named `name` (as bytes), trying position `guess`
    /// first: JSON objects usually list fields in IDL order, and one comparison of
    /// a few bytes is cheaper than hashing the key. The guess is taken only when no
    /// two fields share the name, so the answer is always
    /// [`field_index`](StructDesc::field_index)'s.
    #[inline]
    pub(crate) fn field_index_from(&self, name: &[u8], guess: usize) -> Option<usize> {
        if let Some(f) = self.fields.get(guess)
            && f.name.as_bytes() == name
            && self.by_name.len() == self.fields.len()
        {
            return Some(guess);
        }
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| self.field_index(n))
    }
}

/// One field.
#[derive(Debug, Clone)]
pub struct FieldDesc {
    /// The field id.
    pub id: i16,
    /// The Thrift name.
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// Requiredness.
    pub req: Requiredness,
    /// The IDL default, if it has one.
    pub default: Option<Literal>,
}

/// An enum: its values by Thrift name.
#[derive(Debug, Clone)]
pub struct EnumDesc {
    /// The Thrift name.
    pub name: String,
    /// The stem of the file that defines it.
    pub module: String,
    /// `(Thrift name, value)` in IDL order.
    pub values: Vec<(String, i32)>,
}

impl EnumDesc {
    /// The name of `value`, if the IDL gives it one (the first, when several share it).
    pub fn name_of(&self, value: i32) -> Option<&str> {
        self.values
            .iter()
            .find(|(_, v)| *v == value)
            .map(|(n, _)| n.as_str())
    }

    /// The value named `name`.
    pub fn value_of(&self, name: &str) -> Option<i32> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// A constant.
#[derive(Debug, Clone)]
pub struct ConstDesc {
    /// The Thrift name.
    pub name: String,
    /// The stem of the file that defines it.
    pub module: String,
    /// Its type.
    pub ty: Ty,
    /// Its value.
    pub value: Literal,
}

/// A constant or default value, checked against its type by the resolver.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A `bool`.
    Bool(bool),
    /// Any integer type, enums included (the type says which).
    Int(i64),
    /// A `double`.
    Double(f64),
    /// A `string` or `binary`.
    Str(String),
    /// A `uuid`, in wire order.
    Uuid([u8; 16]),
    /// A list or set, elements in order.
    List(Vec<Literal>),
    /// A map, entries in order.
    Map(Vec<(Literal, Literal)>),
    /// A struct literal: the fields it gives (or whose IDL default it takes), by id.
    Struct(StructId, Vec<(i16, Literal)>),
}

/// A service, with the methods it inherits.
#[derive(Debug, Clone)]
pub struct ServiceDesc {
    /// The Thrift name.
    pub name: String,
    /// The stem of the file that defines it.
    pub module: String,
    /// The service it extends (qualified: `module.Name`), if any.
    pub extends: Option<String>,
    /// Its own methods in IDL order, then the inherited ones (nearest base first):
    /// the ping-pong and oneway ones, called with an arguments struct.
    pub methods: Vec<MethodDesc>,
    /// Its own streaming methods (Kitex's `streaming.mode` annotation), in IDL order:
    /// not among `methods`, since they are called over streams. As in codegen, a
    /// service does not inherit its base's.
    pub streams: Vec<StreamDesc>,
}

impl ServiceDesc {
    /// The method named `name` (its own or an inherited one).
    pub fn method(&self, name: &str) -> Option<&MethodDesc> {
        self.methods.iter().find(|m| m.name == name)
    }

    /// The streaming method named `name`.
    pub fn stream(&self, name: &str) -> Option<&StreamDesc> {
        self.streams.iter().find(|m| m.name == name)
    }
}

/// One streaming method of a service, as codegen reads it: one argument, a struct,
/// whose type is each request's; a struct return type, each response's; no
/// `throws` (an error ends a stream in its trailer), not oneway. Each message is that
/// struct alone on the wire (no arguments or result struct around it), as Kitex's
/// StreamX sends it.
#[derive(Debug, Clone)]
pub struct StreamDesc {
    /// The name on the wire.
    pub name: String,
    /// Which way its messages go.
    pub mode: StreamingMode,
    /// The struct of each request.
    pub request: StructId,
    /// The struct of each response.
    pub response: StructId,
}

/// Which way a streaming method's messages go: the value of its `streaming.mode`
/// annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamingMode {
    /// `"server"`: one request, then any number of responses.
    Server,
    /// `"client"`: any number of requests, then one response.
    Client,
    /// `"bidirectional"`: any number either way.
    Bidirectional,
}

impl StreamingMode {
    /// The annotation's value: `server`, `client` or `bidirectional`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamingMode::Server => "server",
            StreamingMode::Client => "client",
            StreamingMode::Bidirectional => "bidirectional",
        }
    }
}

impl fmt::Display for StreamingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One method of a service.
#[derive(Debug, Clone)]
pub struct MethodDesc {
    /// The name on the wire.
    pub name: String,
    /// The service that declares it (qualified: `module.Name`).
    pub owner: String,
    /// Whether it is `oneway`: no reply, and no result struct.
    pub oneway: bool,
    /// Its arguments struct.
    pub args: StructId,
    /// Its result struct (field 0 the return value, unless `void`; then one field per
    /// declared exception); `None` for a oneway method.
    pub result: Option<StructId>,
    /// The return type; `None` for `void` and oneway.
    pub returns: Option<Ty>,
    /// The declared exceptions: the result struct's field id and name, and the type.
    pub throws: Vec<ThrowDesc>,
}

/// One declared exception of a method.
#[derive(Debug, Clone)]
pub struct ThrowDesc {
    /// The id of the result struct's field that carries it.
    pub id: i16,
    /// That field's name.
    pub name: String,
    /// The exception type.
    pub ty: StructId,
}

impl Descriptor {
    /// Reads `idls` and what they include (looked for next to the including file, then
    /// in `includes`) with codegen's parser and resolver: the same IDL is accepted
    /// and read the same way as by a `build.rs`.
    pub fn from_files(
        idls: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Self, LoadError> {
        let builder = builder(includes);
        let (model, paths) = builder.model_with_paths(idls)?;
        Self::from_model(&model, paths)
    }

    /// Reads IDL held in memory: `idls` are paths among `files`, includes are looked
    /// up among them too (next to the including file, then in `includes`).
    pub fn from_memory(
        files: &thrift_codegen::IdlFiles,
        idls: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Self, LoadError> {
        let model = builder(includes).model_in(files, idls)?;
        Self::from_model(&model, Vec::new())
    }

    /// One IDL file's text, named `name` (its stem names its types, as a file's would),
    /// including nothing.
    pub fn from_text(name: &str, text: &str) -> Result<Self, LoadError> {
        let mut files = thrift_codegen::IdlFiles::new();
        files.insert(name, text);
        Self::from_memory(&files, &[name], &[] as &[&Path])
    }

    /// The descriptor of a resolved model; `paths` are the files it was read from.
    pub fn from_model(model: &Model, paths: Vec<PathBuf>) -> Result<Self, LoadError> {
        build(model, paths)
    }

    /// The files it was read from (roots and includes), for a watcher; empty when it
    /// came from memory.
    pub fn paths(&self) -> &[PathBuf] {
        &self.inner.paths
    }

    /// Every service, in IDL order (includes first).
    pub fn services(&self) -> &[ServiceDesc] {
        &self.inner.services
    }

    /// The service named `name` (`module.Name`, or `Name` when only one file defines
    /// a service of that name).
    pub fn service(&self, name: &str) -> Option<&ServiceDesc> {
        self.inner
            .service_names
            .get(name)
            .map(|&i| &self.inner.services[i])
    }

    /// The struct, union or exception `id`.
    pub fn struct_desc(&self, id: StructId) -> &StructDesc {
        &self.inner.structs[id.0 as usize]
    }

    /// The struct, union or exception named `name` (qualified or, when unique, bare).
    pub fn struct_named(&self, name: &str) -> Option<StructId> {
        self.inner.struct_names.get(name).copied()
    }

    /// The enum `id`.
    pub fn enum_desc(&self, id: EnumId) -> &EnumDesc {
        &self.inner.enums[id.0 as usize]
    }

    /// The enum named `name` (qualified or, when unique, bare).
    pub fn enum_named(&self, name: &str) -> Option<EnumId> {
        self.inner.enum_names.get(name).copied()
    }

    /// Every constant, in IDL order.
    pub fn constants(&self) -> &[ConstDesc] {
        &self.inner.constants
    }

    /// The constant named `name` (qualified or, when unique, bare).
    pub fn constant(&self, name: &str) -> Option<&ConstDesc> {
        self.inner
            .const_names
            .get(name)
            .map(|&i| &self.inner.constants[i])
    }

    /// Whether `other` is the very same descriptor (a clone of it), not one read again.
    pub fn same(&self, other: &Descriptor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Descriptor")
            .field("services", &self.inner.services.len())
            .field("structs", &self.inner.structs.len())
            .field("enums", &self.inner.enums.len())
            .field("paths", &self.inner.paths)
            .finish()
    }
}

/// A builder that reads IDL as codegen does, printing nothing for cargo.
fn builder(includes: &[impl AsRef<Path>]) -> thrift_codegen::Builder {
    let mut b = thrift_codegen::Builder::new();
    b.rerun_if_changed(false).cargo_warnings(false);
    for dir in includes {
        b.include(dir.as_ref());
    }
    b
}

/// Turns a model into a descriptor: numbers the types first (fields may name types
/// defined after them), then fills them in.
fn build(model: &Model, paths: Vec<PathBuf>) -> Result<Descriptor, LoadError> {
    let mut structs = HashMap::new();
    let mut enums = HashMap::new();
    let mut rust_fields = HashMap::new();
    for m in &model.modules {
        for item in &m.items {
            match item {
                Item::Struct(s) => {
                    let id = StructId(structs.len() as u32);
                    structs.insert(path(&m.name, &s.name), id);
                    let names = s.fields.iter().map(|f| (f.name.clone(), f.id)).collect();
                    rust_fields.insert(path(&m.name, &s.name), names);
                }
                Item::Enum(e) => {
                    let id = EnumId(enums.len() as u32);
                    enums.insert(path(&m.name, &e.name), id);
                }
                _ => {}
            }
        }
    }
    let types = Types {
        model,
        structs: &structs,
        enums: &enums,
        rust_fields: &rust_fields,
    };

    let mut out = Inner {
        structs: Vec::new(),
        enums: Vec::new(),
        services: Vec::new(),
        constants: Vec::new(),
        struct_names: HashMap::new(),
        enum_names: HashMap::new(),
        service_names: HashMap::new(),
        const_names: HashMap::new(),
        paths,
    };
    let mut struct_names = Names::default();
    let mut enum_names = Names::default();
    let mut service_names = Names::default();
    let mut const_names = Names::default();
    for m in &model.modules {
        for item in &m.items {
            match item {
                Item::Struct(s) => {
                    let id = StructId(out.structs.len() as u32);
                    struct_names.add(&m.name, &s.thrift_name, id);
                    out.structs.push(types.struct_desc(&m.name, s)?);
                }
                Item::Enum(e) => {
                    let id = EnumId(out.enums.len() as u32);
                    enum_names.add(&m.name, &e.thrift_name, id);
                    out.enums.push(EnumDesc {
                        name: e.thrift_name.clone(),
                        module: m.name.clone(),
                        values: e
                            .thrift_values
                            .iter()
                            .cloned()
                            .zip(e.values.iter().map(|(_, v)| *v))
                            .collect(),
                    });
                }
                Item::Const(c) => {
                    let i = out.constants.len();
                    const_names.add(&m.name, &c.thrift_name, i);
                    out.constants.push(ConstDesc {
                        name: c.thrift_name.clone(),
                        module: m.name.clone(),
                        ty: types.ty(&c.ty)?,
                        value: types.literal(&c.value)?,
                    });
                }
                Item::Service(svc) => {
                    let i = out.services.len();
                    service_names.add(&m.name, &svc.thrift_name, i);
                    let methods = svc
                        .methods
                        .iter()
                        .chain(&svc.inherited)
                        .map(|md| types.method(md))
                        .collect::<Result<Vec<_>, LoadError>>()?;
                    out.services.push(ServiceDesc {
                        name: svc.thrift_name.clone(),
                        module: m.name.clone(),
                        extends: svc
                            .extends
                            .as_ref()
                            .map(|p| service_name(model, p))
                            .transpose()?,
                        methods,
                        streams: svc
                            .streams
                            .iter()
                            .map(|sm| types.stream(sm))
                            .collect::<Result<Vec<_>, LoadError>>()?,
                    });
                }
                Item::Typedef(_) => {}
            }
        }
    }
    out.struct_names = struct_names.finish();
    out.enum_names = enum_names.finish();
    out.service_names = service_names.finish();
    out.const_names = const_names.finish();
    Ok(Descriptor {
        inner: Arc::new(out),
    })
}

/// Names and what they name: every qualified name (`module.Name`), and each bare
/// name that only one module defines.
struct Names<T> {
    qualified: HashMap<String, T>,
    /// `None` once a second module defines the name.
    bare: HashMap<String, Option<T>>,
}

impl<T> Default for Names<T> {
    fn default() -> Self {
        Names {
            qualified: HashMap::new(),
            bare: HashMap::new(),
        }
    }
}

impl<T: Copy> Names<T> {
    fn add(&mut self, module: &str, name: &str, id: T) {
        // Two services of one file with a method of one name give two `m_args`
        // structs of one name: the first keeps it (each method knows its own by id).
        self.qualified
            .entry(format!("{module}.{name}"))
            .or_insert(id);
        self.bare
            .entry(name.to_string())
            .and_modify(|v| *v = None)
            .or_insert(Some(id));
    }

    /// One map of both; a bare name never hides a qualified one.
    fn finish(self) -> HashMap<String, T> {
        let mut map = self.qualified;
        for (name, id) in self.bare {
            if let Some(id) = id {
                map.entry(name).or_insert(id);
            }
        }
        map
    }
}

fn path(module: &str, name: &str) -> TypePath {
    TypePath {
        module: module.to_string(),
        name: name.to_string(),
    }
}

/// The qualified Thrift name of the service whose trait the model names `p`.
fn service_name(model: &Model, p: &TypePath) -> Result<String, LoadError> {
    model
        .modules
        .iter()
        .filter(|m| m.name == p.module)
        .flat_map(|m| &m.items)
        .find_map(|item| match item {
            Item::Service(s) if s.name == p.name => Some(format!("{}.{}", p.module, s.thrift_name)),
            _ => None,
        })
        .ok_or_else(|| LoadError::unknown(p))
}

/// The type numbering, for turning the model's types into descriptor types.
struct Types<'a> {
    model: &'a Model,
    structs: &'a HashMap<TypePath, StructId>,
    enums: &'a HashMap<TypePath, EnumId>,
    /// The Rust field names of each struct and their ids: struct literals and a
    /// method's exceptions name fields so.
    rust_fields: &'a HashMap<TypePath, Vec<(String, i16)>>,
}

impl Types<'_> {
    fn struct_desc(&self, module: &str, s: &model::StructDef) -> Result<StructDesc, LoadError> {
        let fields = s
            .fields
            .iter()
            .map(|f| {
                Ok(FieldDesc {
                    id: f.id,
                    name: f.thrift_name.clone(),
                    ty: self.ty(&f.ty)?,
                    req: f.req,
                    default: f.default.as_ref().map(|v| self.literal(v)).transpose()?,
                })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(StructDesc {
            name: s.thrift_name.clone(),
            module: module.to_string(),
            kind: s.kind,
            by_id: fields.iter().enumerate().map(|(i, f)| (f.id, i)).collect(),
            by_name: fields
                .iter()
                .enumerate()
                .map(|(i, f)| (f.name.clone(), i))
                .collect(),
            fields,
        })
    }

    /// The id of the field a struct's Rust code names `rust_name`.
    fn field_id(&self, p: &TypePath, rust_name: &str) -> Result<i16, LoadError> {
        self.rust_fields
            .get(p)
            .and_then(|fields| fields.iter().find(|(n, _)| n == rust_name))
            .map(|(_, id)| *id)
            .ok_or_else(|| LoadError::unknown(p))
    }

    fn struct_id(&self, p: &TypePath) -> Result<StructId, LoadError> {
        self.structs
            .get(p)
            .copied()
            .ok_or_else(|| LoadError::unknown(p))
    }

    fn ty(&self, ty: &model::Ty) -> Result<Ty, LoadError> {
        Ok(match ty {
            model::Ty::Bool => Ty::Bool,
            model::Ty::I8 => Ty::I8,
            model::Ty::I16 => Ty::I16,
            model::Ty::I32 => Ty::I32,
            model::Ty::I64 => Ty::I64,
            model::Ty::Double | model::Ty::OrderedDouble => Ty::Double,
            model::Ty::String => Ty::String,
            model::Ty::Binary => Ty::Binary,
            model::Ty::Uuid => Ty::Uuid,
            model::Ty::List(t) => Ty::List(Box::new(self.ty(t)?)),
            model::Ty::Set(t) => Ty::Set(Box::new(self.ty(t)?)),
            model::Ty::Map(k, v) => Ty::Map(Box::new(self.ty(k)?), Box::new(self.ty(v)?)),
            model::Ty::Struct(p) => Ty::Struct(self.struct_id(p)?),
            model::Ty::Enum(p) => Ty::Enum(
                self.enums
                    .get(p)
                    .copied()
                    .ok_or_else(|| LoadError::unknown(p))?,
            ),
        })
    }

    fn literal(&self, v: &model::Value) -> Result<Literal, LoadError> {
        Ok(match v {
            model::Value::Bool(b) => Literal::Bool(*b),
            model::Value::Int(n) => Literal::Int(*n),
            model::Value::Double(d) => Literal::Double(*d),
            model::Value::Str(s) => Literal::Str(s.clone()),
            model::Value::Uuid(u) => Literal::Uuid(*u),
            model::Value::Enum(_, n) => Literal::Int(i64::from(*n)),
            model::Value::List(items) => Literal::List(
                items
                    .iter()
                    .map(|v| self.literal(v))
                    .collect::<Result<_, _>>()?,
            ),
            model::Value::Map(entries) => Literal::Map(
                entries
                    .iter()
                    .map(|(k, v)| Ok((self.literal(k)?, self.literal(v)?)))
                    .collect::<Result<_, LoadError>>()?,
            ),
            model::Value::Struct(p, fields) => {
                let mut given = Vec::new();
                for f in fields {
                    // A field the literal leaves out, with no IDL default: not given.
                    if matches!(f.value, model::Value::Default) {
                        continue;
                    }
                    given.push((self.field_id(p, &f.name)?, self.literal(&f.value)?));
                }
                Literal::Struct(self.struct_id(p)?, given)
            }
            model::Value::Default => return Err(LoadError::NoValue),
        })
    }

    fn method(&self, m: &model::MethodDef) -> Result<MethodDesc, LoadError> {
        let throws = match &m.result {
            Some(result) => {
                let s =
                    find_struct(self.model, result).ok_or_else(|| LoadError::unknown(result))?;
                m.throws
                    .iter()
                    .map(|t| {
                        let id = self.field_id(result, &t.field)?;
                        let name = s
                            .fields
                            .iter()
                            .find(|f| f.id == id)
                            .map(|f| f.thrift_name.clone())
                            .unwrap_or_default();
                        Ok(ThrowDesc {
                            id,
                            name,
                            ty: self.struct_id(&t.ty)?,
                        })
                    })
                    .collect::<Result<Vec<_>, LoadError>>()?
            }
            None => Vec::new(),
        };
        Ok(MethodDesc {
            name: m.thrift_name.clone(),
            owner: service_name(self.model, &m.owner)?,
            oneway: m.oneway,
            args: self.struct_id(&m.args)?,
            result: m.result.as_ref().map(|p| self.struct_id(p)).transpose()?,
            returns: m.returns.as_ref().map(|t| self.ty(t)).transpose()?,
            throws,
        })
    }
}

impl Types<'_> {
    fn stream(&self, m: &model::StreamMethodDef) -> Result<StreamDesc, LoadError> {
        Ok(StreamDesc {
            name: m.thrift_name.clone(),
            mode: match m.mode {
                model::StreamingMode::Server => StreamingMode::Server,
                model::StreamingMode::Client => StreamingMode::Client,
                model::StreamingMode::Bidirectional => StreamingMode::Bidirectional,
            },
            request: self.struct_id(&m.request)?,
            response: self.struct_id(&m.response)?,
        })
    }
}

fn find_struct<'m>(model: &'m Model, p: &TypePath) -> Option<&'m model::StructDef> {
    model
        .modules
        .iter()
        .filter(|m| m.name == p.module)
        .flat_map(|m| &m.items)
        .find_map(|item| match item {
            Item::Struct(s) if s.name == p.name => Some(s),
            _ => None,
        })
}
