//! The resolved model the emitter works from.
//!
//! Everything here is already decided: includes are followed (one [`Module`] per IDL
//! file), typedefs are resolved to the types they name, field ids are assigned, constant
//! values are checked against their types, Rust names are chosen (keywords escaped,
//! naming conventions applied) and recursive fields are marked as boxed. The emitter only
//! turns this into Rust tokens, so it can be tested on models built by hand.

/// Every module of one compile, in output order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Model {
    /// One per IDL file.
    pub modules: Vec<Module>,
    /// What the IDL says that Apache Thrift accepts but that loses meaning, and how it
    /// was read: diagnostics of severity [`Warning`](crate::Severity::Warning) (the
    /// emitter ignores these).
    pub warnings: Vec<crate::Diagnostic>,
}

/// The name of the type a module defines, when it needs one, for the `double`s in its
/// set elements and map keys ([`Ty::OrderedDouble`]). The model owns the name: the
/// resolver refuses a module whose own items would take it, and the emitter writes the
/// type under it.
pub const ORDERED_F64: &str = "OrderedF64";

/// The items of one IDL file, emitted as `pub mod <name>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Module {
    /// The Rust module name (the file stem, made a legal identifier).
    pub name: String,
    /// Items in IDL order.
    pub items: Vec<Item>,
}

impl Module {
    /// Whether a type that one of the module's items spells holds a
    /// [`Ty::OrderedDouble`], so that the module defines [`ORDERED_F64`].
    pub fn uses_ordered_f64(&self) -> bool {
        let fields = |fields: &[FieldDef]| fields.iter().any(|f| f.ty.holds_ordered_double());
        self.items.iter().any(|item| match item {
            Item::Struct(s) => fields(&s.fields),
            Item::Const(c) => c.ty.holds_ordered_double(),
            Item::Typedef(t) => t.ty.holds_ordered_double(),
            Item::Service(s) => s.methods.iter().any(|m| {
                fields(&m.params) || m.returns.as_ref().is_some_and(Ty::holds_ordered_double)
            }),
            Item::Enum(_) => false,
        })
    }
}

/// A generated item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A struct, union or exception.
    Struct(StructDef),
    /// An enum.
    Enum(EnumDef),
    /// A typedef, emitted as a `pub type` alias for users (fields use the resolved type).
    Typedef(TypedefDef),
    /// A constant.
    Const(ConstDef),
    /// A service: its handler trait, the enums of its methods' exceptions, its reply
    /// enum and its dispatcher (its args and result structs are [`Item::Struct`]s).
    Service(ServiceDef),
}

/// Which of the three struct-like kinds a definition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructKind {
    /// `struct`: a Rust struct.
    Struct,
    /// `union`: a Rust enum with one variant per field; exactly one is set on the wire.
    Union,
    /// `exception`: a Rust struct that also implements `std::error::Error`.
    Exception,
}

/// A struct, union or exception.
#[derive(Debug, Clone, PartialEq)]
pub struct StructDef {
    /// The Thrift name (used in error paths).
    pub thrift_name: String,
    /// The Rust type name.
    pub name: String,
    /// Which kind.
    pub kind: StructKind,
    /// Fields in IDL order.
    pub fields: Vec<FieldDef>,
    /// The doc comment from the IDL, if any.
    pub doc: Option<String>,
    /// Whether every field type supports `Eq` and `Hash` (no `double` anywhere inside).
    pub hashable: bool,
    /// For a union, the variant its `Default` holds (with its type's default): the
    /// first whose value ends. `None` when no variant's does (each leads back to the
    /// union, so no value of it ends) or for a struct: no `Default` impl is emitted for
    /// such a union.
    pub union_default: Option<usize>,
}

/// Requiredness, with the usual Thrift meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requiredness {
    /// Must be present on the wire; always written.
    Required,
    /// An `Option`; written only when `Some`.
    Optional,
    /// Default requiredness: a plain value, always written, the default when absent.
    Default,
}

/// One field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    /// The field id.
    pub id: i16,
    /// The Thrift name (used in error paths).
    pub thrift_name: String,
    /// The Rust field (or union variant) name.
    pub name: String,
    /// The resolved type.
    pub ty: Ty,
    /// Requiredness.
    pub req: Requiredness,
    /// The IDL default value, already checked against `ty`.
    pub default: Option<Value>,
    /// Whether the value is boxed (the field closes a cycle of struct types).
    pub boxed: bool,
}

/// A resolved type.
#[derive(Debug, Clone, PartialEq)]
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
    /// `double` inside a set element or map key type, where Rust needs a total order:
    /// the module's [`ORDERED_F64`] type, an `f64` ordered by `f64::total_cmp` (see the
    /// emitter).
    OrderedDouble,
    /// `string` (`Utf8Bytes`).
    String,
    /// `binary` (`Bytes`).
    Binary,
    /// `uuid` (`[u8; 16]`).
    Uuid,
    /// `list<T>` (`Vec<T>`).
    List(Box<Ty>),
    /// `set<T>` (`BTreeSet<T>`).
    Set(Box<Ty>),
    /// `map<K, V>` (`BTreeMap<K, V>`).
    Map(Box<Ty>, Box<Ty>),
    /// A struct, union or exception.
    Struct(TypePath),
    /// An enum.
    Enum(TypePath),
}

impl Ty {
    /// Whether this type is, or has inside it, a [`Ty::OrderedDouble`].
    pub fn holds_ordered_double(&self) -> bool {
        match self {
            Ty::OrderedDouble => true,
            Ty::List(t) | Ty::Set(t) => t.holds_ordered_double(),
            Ty::Map(k, v) => k.holds_ordered_double() || v.holds_ordered_double(),
            _ => false,
        }
    }
}

/// Where a named type lives: its module and Rust name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TypePath {
    /// The Rust module (file stem).
    pub module: String,
    /// The Rust type name.
    pub name: String,
}

/// An enum: a newtype over `i32` with associated constants, so unknown wire values are
/// kept rather than rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumDef {
    /// The Thrift name.
    pub thrift_name: String,
    /// The Rust type name.
    pub name: String,
    /// `(Rust constant name, value)` in IDL order.
    pub values: Vec<(String, i32)>,
    /// The values' Thrift names, in the same order (what a program that reads the IDL
    /// at run time shows).
    pub thrift_values: Vec<String>,
    /// The doc comment from the IDL, if any.
    pub doc: Option<String>,
}

/// A typedef.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedefDef {
    /// The Rust alias name.
    pub name: String,
    /// The type it names.
    pub ty: Ty,
}

/// A constant.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstDef {
    /// The Thrift name.
    pub thrift_name: String,
    /// The Rust name (upper snake case).
    pub name: String,
    /// The type.
    pub ty: Ty,
    /// The value, already checked against `ty` and with references resolved.
    pub value: Value,
    /// The doc comment before it in the IDL.
    pub doc: Option<String>,
}

/// A constant value, resolved and checked against its type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A `bool`.
    Bool(bool),
    /// Any integer type (the type says which).
    Int(i64),
    /// A `double`.
    Double(f64),
    /// A `string` or `binary`.
    Str(String),
    /// A `uuid` (written in the IDL as a string), in wire order.
    Uuid([u8; 16]),
    /// An enum value: the enum and the numeric value.
    Enum(TypePath, i32),
    /// A list or set, elements in order.
    List(Vec<Value>),
    /// A map, entries in order.
    Map(Vec<(Value, Value)>),
    /// A struct literal: every field, in declaration order (fields the literal leaves out
    /// hold their IDL default or [`Value::Default`]).
    Struct(TypePath, Vec<FieldValue>),
    /// The Rust `Default` of the type (a field a struct literal leaves out).
    Default,
}

/// One field of a struct literal, with what the emitter needs to build it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldValue {
    /// The Rust field name.
    pub name: String,
    /// The field's type.
    pub ty: Ty,
    /// Whether the field is an `Option`.
    pub optional: bool,
    /// Whether the field is boxed.
    pub boxed: bool,
    /// The value.
    pub value: Value,
}

/// A service, as the server side sees it: the trait users implement and the dispatcher
/// that decodes calls for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceDef {
    /// The Thrift name.
    pub thrift_name: String,
    /// The Rust trait name.
    pub name: String,
    /// The reply enum's name (`<name>Reply`).
    pub reply: String,
    /// The dispatcher's name (`<name>Server`).
    pub server: String,
    /// The typed client's name (`<name>Client`).
    pub client: String,
    /// The marker type its builder makes it with (`<name>ClientMaker`).
    pub maker: String,
    /// The doc comment from the IDL, if any.
    pub doc: Option<String>,
    /// The service it extends (its trait), if any.
    pub extends: Option<TypePath>,
    /// The methods it declares, in IDL order.
    pub methods: Vec<MethodDef>,
    /// The methods it inherits through its `extends` chain: the nearest base's first,
    /// each base's in IDL order.
    pub inherited: Vec<MethodDef>,
    /// Its streaming methods (Kitex's `streaming.mode` annotation), in IDL order: not
    /// among `methods`, since they are served and called over streams.
    pub streams: Vec<StreamMethodDef>,
    /// The names of its streaming trait, dispatcher and client, when it has streaming
    /// methods.
    pub stream_names: Option<StreamNames>,
}

/// The generated names of a service's streaming side.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamNames {
    /// The trait a handler implements (`<name>Stream`).
    pub handler: String,
    /// The stream dispatcher (`<name>StreamServer`).
    pub server: String,
    /// The typed stream client (`<name>StreamClient`).
    pub client: String,
}

/// Which way a streaming method's messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingMode {
    /// One request, then any number of responses.
    Server,
    /// Any number of requests, then one response.
    Client,
    /// Any number either way.
    Bidirectional,
}

/// One streaming method of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamMethodDef {
    /// The Thrift name: the method name on the wire.
    pub thrift_name: String,
    /// The Rust method name (snake case).
    pub name: String,
    /// The doc comment from the IDL, if any.
    pub doc: Option<String>,
    /// Which way the messages go.
    pub mode: StreamingMode,
    /// The struct of each request (the method's one argument's type).
    pub request: TypePath,
    /// The struct of each response (its return type).
    pub response: TypePath,
}

/// One method of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodDef {
    /// The Thrift name: the method name on the wire.
    pub thrift_name: String,
    /// The Rust method name (snake case).
    pub name: String,
    /// Its variant in the reply enum (upper camel case).
    pub variant: String,
    /// The doc comment from the IDL, if any.
    pub doc: Option<String>,
    /// The service that declares it (its trait).
    pub owner: TypePath,
    /// The `<Owner><Method>Args` struct.
    pub args: TypePath,
    /// The fields of the args struct: the method's parameters, named and typed alike.
    pub params: Vec<FieldDef>,
    /// The `<Owner><Method>Result` struct; `None` for a oneway method, which has none.
    pub result: Option<TypePath>,
    /// The return type; `None` for `void` (and for every oneway method).
    pub returns: Option<Ty>,
    /// Whether the method is `oneway`.
    pub oneway: bool,
    /// The `<Owner><Method>Exception` enum of the declared exceptions; `None` without
    /// any (the handler's error type is then `Infallible`).
    pub exception: Option<TypePath>,
    /// The declared exceptions, in IDL order.
    pub throws: Vec<ThrowDef>,
}

/// One declared exception of a method.
#[derive(Debug, Clone, PartialEq)]
pub struct ThrowDef {
    /// Its variant in the method's exception enum (the field name in upper camel case).
    pub variant: String,
    /// The field of the result struct that carries it (never boxed).
    pub field: String,
    /// The exception type.
    pub ty: TypePath,
}
