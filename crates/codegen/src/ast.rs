//! The syntax tree of one Thrift IDL file, as written.
//!
//! [`parse`](crate::parse) produces a [`Document`]. The tree records what the file
//! says and where, nothing more: names are not resolved (a [`FieldTypeKind::Named`]
//! or a [`ConstValueKind::Ident`] may point into an included file, as in
//! `base.Timestamp`), implicit field ids and enum values are left as `None`, and struct
//! literals stay maps. Following includes, resolving names and checking the meaning of
//! the tree is the resolver's job.
//!
//! Every node carries the [`Span`] of its first token, so that later stages can report
//! errors at `file:line:col` too.

/// Identifies a source file; the caller of [`parse`](crate::parse) assigns it, e.g. as
/// an index into its own list of loaded files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileId(pub u32);

/// A position in a source file: the file and the 1-based line and column of a token's
/// first character. Columns count characters (a tab counts as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// The file.
    pub file: FileId,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub col: u32,
}

/// A name as written, with its position.
///
/// Names may be dotted when they refer into an included file (`base.Status`) or to an
/// enum value (`Status.ACTIVE`, `base.Status.ACTIVE`). Names that are Rust keywords
/// (`type`, `match`, ...) are kept as they are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The name, possibly dotted.
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// An annotation `key = "value"` (or a bare `key`) inside `( ... )` after a type,
/// field, enum value, function or definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Annotation {
    /// The key, possibly dotted (`cpp.template`, `rust.name`).
    pub key: String,
    /// The value with escapes decoded; empty when the annotation has no `= "value"`.
    pub value: String,
    /// Where the key is written.
    pub span: Span,
}

/// One parsed IDL file: its headers, then its definitions, in source order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    /// `include`, `cpp_include` and `namespace` lines.
    pub headers: Vec<Header>,
    /// Constants, typedefs, enums, structs, unions, exceptions and services.
    pub definitions: Vec<Definition>,
}

impl Document {
    /// The paths of the `include` headers, in order, as written (not yet resolved
    /// against include directories).
    pub fn includes(&self) -> impl Iterator<Item = &Include> {
        self.headers.iter().filter_map(|header| match header {
            Header::Include(include) => Some(include),
            _ => None,
        })
    }

    /// The namespace declared for `scope` (e.g. `"rs"`), or else the one declared for
    /// `*`, or `None`. When a scope is declared twice, the last declaration wins.
    pub fn namespace(&self, scope: &str) -> Option<&Namespace> {
        let mut exact = None;
        let mut wildcard = None;
        for header in &self.headers {
            if let Header::Namespace(ns) = header {
                if ns.scope == scope {
                    exact = Some(ns);
                } else if ns.scope == "*" {
                    wildcard = Some(ns);
                }
            }
        }
        exact.or(wildcard)
    }
}

/// A header line; headers precede all definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// `include "other.thrift"`.
    Include(Include),
    /// `cpp_include "<vector>"`; kept for completeness, meaningless to Rust.
    CppInclude(CppInclude),
    /// `namespace rs my.module`.
    Namespace(Namespace),
}

/// `include "path"`: makes the definitions of another file visible as `stem.Name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The path as written, escapes decoded.
    pub path: String,
    /// Where the `include` keyword is.
    pub span: Span,
}

/// `cpp_include "path"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CppInclude {
    /// The path as written, escapes decoded.
    pub path: String,
    /// Where the `cpp_include` keyword is.
    pub span: Span,
}

/// `namespace SCOPE NAME (annotations)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// The language the namespace applies to (`rs`, `py`, `py.twisted`, ...), or `*`
    /// for all languages.
    pub scope: String,
    /// The namespace, possibly dotted.
    pub name: Ident,
    /// Annotations after the name.
    pub ann: Vec<Annotation>,
    /// Where the `namespace` keyword is.
    pub span: Span,
}

/// A top-level definition.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// `const TYPE NAME = VALUE`.
    Const(Const),
    /// `typedef TYPE NAME`.
    Typedef(Typedef),
    /// `enum NAME { ... }`.
    Enum(Enum),
    /// `struct`, `union` or `exception` `NAME { ... }`.
    Struct(StructLike),
    /// `service NAME extends BASE { ... }`.
    Service(Service),
}

impl Definition {
    /// The name being defined.
    pub fn name(&self) -> &Ident {
        match self {
            Definition::Const(d) => &d.name,
            Definition::Typedef(d) => &d.name,
            Definition::Enum(d) => &d.name,
            Definition::Struct(d) => &d.name,
            Definition::Service(d) => &d.name,
        }
    }

    /// Where the definition's keyword is.
    pub fn span(&self) -> Span {
        match self {
            Definition::Const(d) => d.span,
            Definition::Typedef(d) => d.span,
            Definition::Enum(d) => d.span,
            Definition::Struct(d) => d.span,
            Definition::Service(d) => d.span,
        }
    }

    /// The doc comment written directly before the definition, if any.
    pub fn doc(&self) -> Option<&str> {
        match self {
            Definition::Const(d) => d.doc.as_deref(),
            Definition::Typedef(d) => d.doc.as_deref(),
            Definition::Enum(d) => d.doc.as_deref(),
            Definition::Struct(d) => d.doc.as_deref(),
            Definition::Service(d) => d.doc.as_deref(),
        }
    }

    /// The annotations of the definition itself (not those of its members).
    pub fn annotations(&self) -> &[Annotation] {
        match self {
            Definition::Const(d) => &d.ann,
            Definition::Typedef(d) => &d.ann,
            Definition::Enum(d) => &d.ann,
            Definition::Struct(d) => &d.ann,
            Definition::Service(d) => &d.ann,
        }
    }
}

/// `const TYPE NAME = VALUE (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    /// The constant's name.
    pub name: Ident,
    /// Its declared type.
    pub ty: FieldType,
    /// Its value, unchecked against the type.
    pub value: ConstValue,
    /// Annotations after the value (an extension: Apache Thrift allows none here).
    pub ann: Vec<Annotation>,
    /// The doc comment before the definition.
    pub doc: Option<String>,
    /// Where the `const` keyword is.
    pub span: Span,
}

/// `typedef TYPE NAME (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Typedef {
    /// The new name.
    pub name: Ident,
    /// The type it stands for.
    pub ty: FieldType,
    /// Annotations after the name.
    pub ann: Vec<Annotation>,
    /// The doc comment before the definition.
    pub doc: Option<String>,
    /// Where the `typedef` keyword is.
    pub span: Span,
}

/// `enum NAME { VALUE = 1, ... } (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Enum {
    /// The enum's name.
    pub name: Ident,
    /// Its values in source order.
    pub values: Vec<EnumValue>,
    /// Annotations after the closing brace.
    pub ann: Vec<Annotation>,
    /// The doc comment before the definition.
    pub doc: Option<String>,
    /// Where the `enum` keyword is.
    pub span: Span,
}

/// One value of an enum: `NAME`, or `NAME = INT`, then annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumValue {
    /// The value's name.
    pub name: Ident,
    /// The explicit value, or `None` for an implicit one (the resolver numbers it).
    pub value: Option<i64>,
    /// Annotations after the value.
    pub ann: Vec<Annotation>,
    /// The doc comment before the value.
    pub doc: Option<String>,
    /// Where the value's name is.
    pub span: Span,
}

/// Which of the three struct-like definitions a [`StructLike`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StructKind {
    /// `struct`.
    Struct,
    /// `union`: at most one field set.
    Union,
    /// `exception`: a struct that services may throw.
    Exception,
}

impl StructKind {
    /// The keyword: `"struct"`, `"union"` or `"exception"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StructKind::Struct => "struct",
            StructKind::Union => "union",
            StructKind::Exception => "exception",
        }
    }
}

/// `struct`, `union` or `exception` `NAME { FIELDS } (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct StructLike {
    /// Which keyword introduced it.
    pub kind: StructKind,
    /// The type's name.
    pub name: Ident,
    /// The fields in source order.
    pub fields: Vec<Field>,
    /// Annotations after the closing brace.
    pub ann: Vec<Annotation>,
    /// The doc comment before the definition.
    pub doc: Option<String>,
    /// Where the keyword is.
    pub span: Span,
}

/// `service NAME extends BASE { FUNCTIONS } (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    /// The service's name.
    pub name: Ident,
    /// The service it extends, possibly dotted (`base.Service`).
    pub extends: Option<Ident>,
    /// The functions in source order (inherited ones are not repeated).
    pub functions: Vec<Function>,
    /// Annotations after the closing brace.
    pub ann: Vec<Annotation>,
    /// The doc comment before the definition.
    pub doc: Option<String>,
    /// Where the `service` keyword is.
    pub span: Span,
}

/// `oneway RETURNS NAME(ARGS) throws (EXCEPTIONS) (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Whether the function was declared `oneway`.
    pub oneway: bool,
    /// The return type; `None` for `void`.
    pub returns: Option<FieldType>,
    /// The function's name.
    pub name: Ident,
    /// The arguments, written like struct fields.
    pub args: Vec<Field>,
    /// The declared exceptions, written like struct fields (empty without `throws`).
    pub throws: Vec<Field>,
    /// Annotations after the argument list or `throws` clause.
    pub ann: Vec<Annotation>,
    /// The doc comment before the function.
    pub doc: Option<String>,
    /// Where the function starts (`oneway`, `void` or the return type).
    pub span: Span,
}

/// Whether a field must, may or by default is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Requiredness {
    /// `required`.
    Required,
    /// `optional`.
    Optional,
    /// Neither keyword written ("default requiredness").
    #[default]
    Default,
}

/// A field of a struct, union or exception, an argument of a function, or an
/// exception in a `throws` clause:
/// `ID: REQUIREDNESS TYPE NAME = DEFAULT (annotations)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The explicit field id, or `None` when the field has none (the resolver assigns
    /// implicit ids). Not range-checked here.
    pub id: Option<i64>,
    /// `required`, `optional` or neither.
    pub req: Requiredness,
    /// The field's type.
    pub ty: FieldType,
    /// Whether the type is followed by Apache Thrift's reference marker `&`
    /// (`1: Node & next`), which asks C++ for a pointer. Rust boxes exactly the fields
    /// that close a cycle of struct types, with or without it.
    pub reference: bool,
    /// The field's name.
    pub name: Ident,
    /// The default value, unchecked against the type.
    pub default: Option<ConstValue>,
    /// Annotations after the name or default value.
    pub ann: Vec<Annotation>,
    /// The doc comment before the field.
    pub doc: Option<String>,
    /// Where the field starts (its id, requiredness or type).
    pub span: Span,
}

/// A type as written, with any annotations that follow it
/// (`list<i32> (cpp.template = "std::list")`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldType {
    /// The type itself.
    pub kind: FieldTypeKind,
    /// Annotations written right after the type. A legacy `cpp_type "T"` on a
    /// container is kept here as an annotation with key `cpp_type` and value `T`.
    pub ann: Vec<Annotation>,
    /// Where the type starts.
    pub span: Span,
}

/// The shape of a [`FieldType`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldTypeKind {
    /// A built-in scalar type.
    Base(BaseType),
    /// A reference to a typedef, enum, struct, union or exception, possibly in an
    /// included file (`base.Timestamp`).
    Named(Ident),
    /// `list<T>`.
    List(Box<FieldType>),
    /// `set<T>`.
    Set(Box<FieldType>),
    /// `map<K, V>`.
    Map(Box<FieldType>, Box<FieldType>),
}

/// The built-in scalar types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// `bool`.
    Bool,
    /// `byte`: a signed 8-bit integer, the old name of `i8`.
    Byte,
    /// `i8`.
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
}

impl BaseType {
    /// The keyword: `"bool"`, `"i32"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            BaseType::Bool => "bool",
            BaseType::Byte => "byte",
            BaseType::I8 => "i8",
            BaseType::I16 => "i16",
            BaseType::I32 => "i32",
            BaseType::I64 => "i64",
            BaseType::Double => "double",
            BaseType::String => "string",
            BaseType::Binary => "binary",
            BaseType::Uuid => "uuid",
        }
    }
}

/// A constant value as written (in a `const` definition or a field default).
#[derive(Debug, Clone, PartialEq)]
pub struct ConstValue {
    /// The value itself.
    pub kind: ConstValueKind,
    /// Where the value starts.
    pub span: Span,
}

/// The shape of a [`ConstValue`].
#[derive(Debug, Clone, PartialEq)]
pub enum ConstValueKind {
    /// An integer literal: decimal or `0x` hex, optionally signed.
    Int(i64),
    /// A floating-point literal (has a fraction or an exponent).
    Double(f64),
    /// `true` or `false`. (Thrift also accepts integers for booleans; the resolver
    /// decides.)
    Bool(bool),
    /// A string literal, escapes decoded.
    Str(String),
    /// A reference to another constant or to an enum value (`MAX`, `Status.ACTIVE`,
    /// `base.Status.ACTIVE`).
    Ident(Ident),
    /// `[a, b, c]`: the value of a list or a set.
    List(Vec<ConstValue>),
    /// `{k: v, ...}`: the value of a map, or of a struct (keys are then field names
    /// as string literals).
    Map(Vec<(ConstValue, ConstValue)>),
}
