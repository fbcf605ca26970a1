//! A recursive-descent parser for the whole Thrift IDL grammar.
//!
//! [`parse`] turns the text of one `.thrift` file into a [`Document`]. It does not open
//! files or follow includes, and it checks syntax only: whether `Foo` names a type,
//! whether a field id is in range or a default value fits its type is decided later.
//!
//! # Grammar
//!
//! ```text
//! Document    ::= Header* Definition*
//! Header      ::= 'include' Literal | 'cpp_include' Literal
//!               | 'namespace' (Identifier | '*') Identifier Annotations?
//! Definition  ::= Const | Typedef | Enum | Struct | Union | Exception | Service
//! Const       ::= 'const' FieldType Identifier '=' ConstValue Annotations? Sep?
//! Typedef     ::= 'typedef' FieldType Identifier Annotations? Sep?
//! Enum        ::= 'enum' Identifier '{' (Identifier ('=' IntConstant)? Annotations? Sep?)* '}'
//!                 Annotations?
//! Struct      ::= ('struct' | 'union' | 'exception') Identifier 'xsd_all'? '{' Field* '}'
//!                 Annotations?
//! Service     ::= 'service' Identifier ('extends' Identifier)? '{' Function* '}' Annotations?
//! Field       ::= (IntConstant ':')? ('required' | 'optional')? FieldType '&'? FieldName
//!                 ('=' ConstValue)? 'xsd_optional'? 'xsd_nillable'?
//!                 ('xsd_attrs' '{' Field* '}')? Annotations? Sep?
//! FieldName   ::= Identifier | a keyword other than 'true', 'false', 'cpp_type', 'xsd_*'
//! Function    ::= ('oneway' | 'async')? ('void' | FieldType) Identifier '(' Field* ')'
//!                 ('throws' '(' Field* ')')? Annotations? Sep?
//! FieldType   ::= Identifier | (BaseType | ContainerType) Annotations?
//! BaseType    ::= 'bool' | 'byte' | 'i8' | 'i16' | 'i32' | 'i64' | 'double' | 'string'
//!               | 'binary' | 'uuid'
//! ContainerType ::= 'map' CppType? '<' FieldType ',' FieldType '>'
//!               | 'set' CppType? '<' FieldType '>' | 'list' CppType? '<' FieldType '>' CppType?
//! CppType     ::= 'cpp_type' Literal
//! ConstValue  ::= IntConstant | DoubleConstant | 'true' | 'false' | Literal | Identifier
//!               | '[' (ConstValue Sep?)* ']' | '{' (ConstValue ':' ConstValue Sep?)* '}'
//! Annotations ::= '(' (Identifier ('=' Literal)? Sep?)* ')'
//! Sep         ::= ',' | ';'
//! ```
//!
//! # Decisions where Thrift implementations differ
//!
//! - **Reserved words.** The words of the grammar (`struct`, `required`, `i32`, `list`,
//!   `true`, `cpp_type`, ...) cannot be used as names of definitions, enum values or
//!   functions, but, as in Apache Thrift, all of them but `true`, `false`, `cpp_type`
//!   and the `xsd_*` options can be field names (`1: i8 i8`, `2: string required`).
//!   Other languages' keywords can be any name: `type`, `match` or `self` are fine
//!   (the resolver escapes them). A dotted name is one token, so `com.service` is a
//!   valid namespace.
//! - **Deprecated forms.** `async` is read as `oneway`. `senum`, `slist` and the
//!   legacy `php_namespace "..."` / `xsd_namespace "..."` headers are refused with an
//!   error that says so where they start a definition or a type; elsewhere they are
//!   names, as in Apache Thrift 0.25, which no longer reserves them.
//! - **Ignored forms.** The XSD generator's options (`xsd_all`, `xsd_optional`,
//!   `xsd_nillable`, `xsd_attrs { ... }`) are parsed and dropped, and the C++ reference
//!   marker `&` is kept in [`Field::reference`](crate::ast::Field::reference) but
//!   changes nothing: fields that close a cycle are boxed either way.
//! - **`cpp_type "T"`** is accepted where Thrift allows it (after `map`, `set` and
//!   `list`, and after `list<T>`) and kept as an annotation `cpp_type = "T"` on the type.
//! - **Annotations** are accepted after base and container types (not after a named
//!   type, as in Apache Thrift, which keeps `oneway Foo()` unambiguous), fields, enum
//!   values, functions, namespaces and definitions, including `const` (an extension).
//!   Keys may be dotted and may be keywords (`(final)`); values must be string literals;
//!   a key without a value gets the empty string. `()` is allowed.
//! - **Separators** `,` or `;` are optional after fields, functions, enum values,
//!   list and map elements and annotations, and also after headers and definitions
//!   (one separator each). The `,` between the key and value types of `map<K, V>` is
//!   required.
//! - **Headers come first**: an `include`, `cpp_include` or `namespace` after a
//!   definition is an error, as in Apache Thrift.
//! - **Field ids** may be negative or absent; they are kept as written
//!   ([`Field::id`](crate::ast::Field::id) is `None` when absent). Enum values are any
//!   `i64`. Range checks are the resolver's.
//! - **`true` and `false`** are [`ConstValueKind::Bool`] in constant values (the
//!   resolver takes them as 1 and 0 where an integer is expected); as field ids and
//!   enum values they are 1 and 0, as Apache Thrift reads them.
//! - **Doc comments**: the last `/** ... */` comment, or run of `///` lines, before a
//!   definition, field, enum value or function becomes its `doc`. Plain comments
//!   between the doc comment and the item do not detach it.
//! - **Nesting** of container types and of list/map literals is limited to
//!   [`MAX_NESTING`] levels. The parser itself does not recurse (it keeps an explicit
//!   stack, so its stack use is constant); the limit bounds the depth of the tree for
//!   the code that walks it recursively (drop, `Debug`, the resolver, the emitter).

use crate::ast::{
    Annotation, BaseType, Const, ConstValue, ConstValueKind, CppInclude, Definition, Document,
    Enum, EnumValue, Field, FieldType, FieldTypeKind, FileId, Function, Header, Ident, Include,
    Namespace, Requiredness, Service, Span, StructKind, StructLike, Typedef,
};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Lexer, Punct, Token, TokenKind};

/// How deeply container types (`list<list<...>>`) and constant literals (`[[...]]`)
/// may nest.
pub const MAX_NESTING: usize = 256;

/// Parses the source text of one Thrift IDL file.
///
/// `file` goes into every [`Span`] of the result; `file_name` is only used in error
/// messages (`file_name:line:col: ...`), so pass what the user should see, e.g. the
/// path as given on the command line.
///
/// Never panics, whatever the input.
///
/// # Errors
///
/// The first lexical or syntax error in the file, with its position.
///
/// # Example
///
/// ```
/// use thrift_codegen::ast::{Definition, FileId};
///
/// let doc = thrift_codegen::parse("struct Point { 1: i32 x, 2: i32 y }", FileId(0), "point.thrift")?;
/// let Definition::Struct(point) = &doc.definitions[0] else { unreachable!() };
/// assert_eq!(point.name.name, "Point");
/// assert_eq!(point.fields.len(), 2);
///
/// let err = thrift_codegen::parse("struct Point { 1: }", FileId(0), "point.thrift").unwrap_err();
/// assert_eq!(err.to_string(), "point.thrift:1:19: found '}', expected a field type");
/// # Ok::<(), thrift_codegen::ParseError>(())
/// ```
pub fn parse(source: &str, file: FileId, file_name: &str) -> Result<Document, ParseError> {
    Parser::new(source, file, file_name)?.document()
}

/// The parser state: the lexer and the current (not yet consumed) token.
struct Parser<'a> {
    lexer: Lexer<'a>,
    tok: Token<'a>,
}

fn base_type(keyword: Keyword) -> Option<BaseType> {
    Some(match keyword {
        Keyword::Bool => BaseType::Bool,
        Keyword::Byte => BaseType::Byte,
        Keyword::I8 => BaseType::I8,
        Keyword::I16 => BaseType::I16,
        Keyword::I32 => BaseType::I32,
        Keyword::I64 => BaseType::I64,
        Keyword::Double => BaseType::Double,
        Keyword::String => BaseType::String,
        Keyword::Binary => BaseType::Binary,
        Keyword::Uuid => BaseType::Uuid,
        _ => return None,
    })
}

/// A container type whose element types are still being parsed.
enum OpenType {
    List {
        span: Span,
        ann: Vec<Annotation>,
    },
    Set {
        span: Span,
        ann: Vec<Annotation>,
    },
    /// A `map<` whose key type comes next.
    MapKey {
        span: Span,
        ann: Vec<Annotation>,
    },
    /// A `map<K,` whose value type comes next.
    MapValue {
        span: Span,
        ann: Vec<Annotation>,
        key: FieldType,
    },
}

/// A list or map literal whose elements are still being parsed.
enum OpenValue {
    List {
        span: Span,
        items: Vec<ConstValue>,
    },
    /// `key` holds a parsed key whose value comes next.
    Map {
        span: Span,
        entries: Vec<(ConstValue, ConstValue)>,
        key: Option<ConstValue>,
    },
}

impl<'a> Parser<'a> {
    fn new(source: &'a str, file: FileId, file_name: &'a str) -> Result<Self, ParseError> {
        let mut lexer = Lexer::new(source, file, file_name);
        let tok = lexer.next_token()?;
        Ok(Self { lexer, tok })
    }

    // ---- token helpers -------------------------------------------------------------

    /// Consumes the current token and returns it.
    fn bump(&mut self) -> Result<Token<'a>, ParseError> {
        let next = self.lexer.next_token()?;
        Ok(std::mem::replace(&mut self.tok, next))
    }

    fn at(&self, punct: Punct) -> bool {
        self.tok.kind == TokenKind::Punct(punct)
    }

    fn at_keyword(&self, keyword: Keyword) -> bool {
        self.tok.kind == TokenKind::Keyword(keyword)
    }

    /// Consumes the current token if it is `punct`.
    fn eat(&mut self, punct: Punct) -> Result<bool, ParseError> {
        if self.at(punct) {
            self.bump()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes the current token if it is `keyword`.
    fn eat_keyword(&mut self, keyword: Keyword) -> Result<bool, ParseError> {
        if self.at_keyword(keyword) {
            self.bump()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes `punct` or fails with "expected 'punct'".
    fn expect(&mut self, punct: Punct) -> Result<(), ParseError> {
        if self.eat(punct)? {
            Ok(())
        } else {
            Err(self.unexpected(punct.quoted()))
        }
    }

    /// Consumes one optional `,` or `;`.
    fn eat_separator(&mut self) -> Result<(), ParseError> {
        if self.at(Punct::Comma) || self.at(Punct::Semi) {
            self.bump()?;
        }
        Ok(())
    }

    /// The error "found <current token>, expected <expected>", with a note when the
    /// token is a deprecated keyword.
    fn unexpected(&self, expected: &str) -> ParseError {
        let note = match self.tok.kind {
            TokenKind::Keyword(keyword) => keyword.unsupported_note(),
            _ => None,
        };
        self.unexpected_with_note(expected, note)
    }

    fn unexpected_with_note(&self, expected: &str, note: Option<&str>) -> ParseError {
        let expected = match note {
            Some(note) => format!("{expected} ({note})"),
            None => expected.to_owned(),
        };
        self.error_here(ParseErrorKind::Unexpected {
            found: self.tok.describe(),
            expected,
        })
    }

    fn error_here(&self, kind: ParseErrorKind) -> ParseError {
        let span = self.tok.span;
        ParseError::new(self.lexer.file_name(), span.line, span.col, kind)
    }

    /// Consumes a name; `what` describes it for the error message ("a field name").
    fn ident(&mut self, what: &str) -> Result<Ident, ParseError> {
        match self.tok.kind {
            TokenKind::Ident => {
                let token = self.bump()?;
                Ok(Ident {
                    name: token.text.to_owned(),
                    span: token.span,
                })
            }
            // Apache Thrift 0.25 no longer reserves the deprecated words.
            TokenKind::Keyword(
                Keyword::Senum | Keyword::Slist | Keyword::PhpNamespace | Keyword::XsdNamespace,
            ) => {
                let token = self.bump()?;
                Ok(Ident {
                    name: token.text.to_owned(),
                    span: token.span,
                })
            }
            TokenKind::Keyword(keyword) => {
                let reserved = format!("'{}' is a reserved Thrift keyword", self.tok.text);
                let note = keyword.unsupported_note().unwrap_or(&reserved);
                Err(self.unexpected_with_note(what, Some(note)))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Consumes a string literal and returns its decoded value.
    fn string(&mut self, what: &str) -> Result<String, ParseError> {
        if let TokenKind::Str(value) = &mut self.tok.kind {
            let value = std::mem::take(value);
            self.bump()?;
            Ok(value)
        } else {
            Err(self.unexpected(what))
        }
    }

    /// Consumes an integer literal; `true` and `false` are 1 and 0, as Apache Thrift
    /// reads them.
    fn int(&mut self, what: &str) -> Result<i64, ParseError> {
        let value = match self.tok.kind {
            TokenKind::Int(value) => value,
            TokenKind::Keyword(Keyword::True) => 1,
            TokenKind::Keyword(Keyword::False) => 0,
            _ => return Err(self.unexpected(what)),
        };
        self.bump()?;
        Ok(value)
    }

    /// Whether the current token is an integer literal (or `true`/`false`).
    fn at_int(&self) -> bool {
        matches!(
            self.tok.kind,
            TokenKind::Int(_) | TokenKind::Keyword(Keyword::True | Keyword::False)
        )
    }

    /// Consumes a field name: a name, or one of the keywords Apache Thrift also takes
    /// as a field name (`1: i8 i8`, `2: string required`).
    fn field_name(&mut self) -> Result<Ident, ParseError> {
        if let TokenKind::Keyword(keyword) = self.tok.kind
            && keyword.is_field_name()
        {
            let token = self.bump()?;
            return Ok(Ident {
                name: token.text.to_owned(),
                span: token.span,
            });
        }
        self.ident("a field name")
    }

    /// Takes the doc comment attached to the current token.
    fn take_doc(&mut self) -> Option<String> {
        self.tok.doc.take()
    }

    /// Whether the current token can start a field type.
    fn at_type_start(&self) -> bool {
        match self.tok.kind {
            TokenKind::Ident => true,
            TokenKind::Keyword(keyword) => {
                base_type(keyword).is_some()
                    || matches!(keyword, Keyword::List | Keyword::Set | Keyword::Map)
            }
            _ => false,
        }
    }

    /// Whether the current token can start a field.
    fn at_field_start(&self) -> bool {
        self.at_int()
            || matches!(
                self.tok.kind,
                TokenKind::Keyword(Keyword::Required) | TokenKind::Keyword(Keyword::Optional)
            )
            || self.at_type_start()
    }

    // ---- document and headers ------------------------------------------------------

    fn document(mut self) -> Result<Document, ParseError> {
        let mut document = Document::default();
        loop {
            match self.tok.kind {
                TokenKind::Eof => break,
                TokenKind::Keyword(Keyword::Include | Keyword::CppInclude | Keyword::Namespace) => {
                    if !document.definitions.is_empty() {
                        return Err(self.unexpected(
                            "a definition (includes and namespaces must come before all definitions)",
                        ));
                    }
                    let header = self.header()?;
                    document.headers.push(header);
                }
                _ => {
                    let first = document.definitions.is_empty();
                    let definition = self.definition(first)?;
                    document.definitions.push(definition);
                }
            }
            self.eat_separator()?;
        }
        Ok(document)
    }

    fn header(&mut self) -> Result<Header, ParseError> {
        let keyword = self.bump()?;
        let span = keyword.span;
        match keyword.kind {
            TokenKind::Keyword(Keyword::Include) => {
                let path = self.string("a quoted file path")?;
                Ok(Header::Include(Include { path, span }))
            }
            TokenKind::Keyword(Keyword::CppInclude) => {
                let path = self.string("a quoted file path")?;
                Ok(Header::CppInclude(CppInclude { path, span }))
            }
            _ => {
                let scope = if self.eat(Punct::Star)? {
                    "*".to_owned()
                } else {
                    self.ident("a namespace scope (a language name or '*')")?
                        .name
                };
                let name = self.ident("a namespace name")?;
                let ann = self.annotations()?;
                Ok(Header::Namespace(Namespace {
                    scope,
                    name,
                    ann,
                    span,
                }))
            }
        }
    }

    // ---- definitions ---------------------------------------------------------------

    fn definition(&mut self, first: bool) -> Result<Definition, ParseError> {
        let TokenKind::Keyword(keyword) = self.tok.kind else {
            return Err(self.unexpected(if first {
                "a header or definition"
            } else {
                "a definition"
            }));
        };
        match keyword {
            Keyword::Const => self.const_definition().map(Definition::Const),
            Keyword::Typedef => self.typedef().map(Definition::Typedef),
            Keyword::Enum => self.enum_definition().map(Definition::Enum),
            Keyword::Struct => self.struct_like(StructKind::Struct).map(Definition::Struct),
            Keyword::Union => self.struct_like(StructKind::Union).map(Definition::Struct),
            Keyword::Exception => self
                .struct_like(StructKind::Exception)
                .map(Definition::Struct),
            Keyword::Service => self.service().map(Definition::Service),
            _ => Err(self.unexpected(if first {
                "a header or definition"
            } else {
                "a definition"
            })),
        }
    }

    fn const_definition(&mut self) -> Result<Const, ParseError> {
        let doc = self.take_doc();
        let span = self.bump()?.span;
        let ty = self.field_type("a constant type")?;
        let name = self.ident("a constant name")?;
        self.expect(Punct::Eq)?;
        let value = self.const_value("a constant value")?;
        let ann = self.annotations()?;
        Ok(Const {
            name,
            ty,
            value,
            ann,
            doc,
            span,
        })
    }

    fn typedef(&mut self) -> Result<Typedef, ParseError> {
        let doc = self.take_doc();
        let span = self.bump()?.span;
        let ty = self.field_type("a type")?;
        let name = self.ident("a typedef name")?;
        let ann = self.annotations()?;
        Ok(Typedef {
            name,
            ty,
            ann,
            doc,
            span,
        })
    }

    fn enum_definition(&mut self) -> Result<Enum, ParseError> {
        let doc = self.take_doc();
        let span = self.bump()?.span;
        let name = self.ident("an enum name")?;
        self.expect(Punct::LBrace)?;
        let mut values = Vec::new();
        while !self.eat(Punct::RBrace)? {
            let value_doc = self.take_doc();
            let value_name = self.ident("an enum value name or '}'")?;
            let value = if self.eat(Punct::Eq)? {
                Some(self.int("an integer")?)
            } else {
                None
            };
            let ann = self.annotations()?;
            self.eat_separator()?;
            values.push(EnumValue {
                span: value_name.span,
                name: value_name,
                value,
                ann,
                doc: value_doc,
            });
        }
        let ann = self.annotations()?;
        Ok(Enum {
            name,
            values,
            ann,
            doc,
            span,
        })
    }

    fn struct_like(&mut self, kind: StructKind) -> Result<StructLike, ParseError> {
        let doc = self.take_doc();
        let span = self.bump()?.span;
        let name = self.ident(match kind {
            StructKind::Struct => "a struct name",
            StructKind::Union => "a union name",
            StructKind::Exception => "an exception name",
        })?;
        if kind == StructKind::Struct {
            // An XSD-generator option, meaningless here.
            self.eat_keyword(Keyword::XsdAll)?;
        }
        self.expect(Punct::LBrace)?;
        let fields = self.fields(Punct::RBrace)?;
        let ann = self.annotations()?;
        Ok(StructLike {
            kind,
            name,
            fields,
            ann,
            doc,
            span,
        })
    }

    fn service(&mut self) -> Result<Service, ParseError> {
        let doc = self.take_doc();
        let span = self.bump()?.span;
        let name = self.ident("a service name")?;
        let extends = if self.eat_keyword(Keyword::Extends)? {
            Some(self.ident("the name of the service to extend")?)
        } else {
            None
        };
        if !self.eat(Punct::LBrace)? {
            return Err(self.unexpected(if extends.is_some() {
                "'{'"
            } else {
                "'extends' or '{'"
            }));
        }
        let mut functions = Vec::new();
        while !self.eat(Punct::RBrace)? {
            functions.push(self.function()?);
        }
        let ann = self.annotations()?;
        Ok(Service {
            name,
            extends,
            functions,
            ann,
            doc,
            span,
        })
    }

    fn function(&mut self) -> Result<Function, ParseError> {
        let doc = self.take_doc();
        let span = self.tok.span;
        // `async` is the deprecated spelling of `oneway`.
        let oneway = self.eat_keyword(Keyword::Oneway)? || self.eat_keyword(Keyword::Async)?;
        let returns = if self.eat_keyword(Keyword::Void)? {
            None
        } else if oneway {
            Some(self.field_type("'void' or a return type")?)
        } else {
            Some(self.field_type("a function or '}'")?)
        };
        // `async` is a keyword only where a function starts; codegen's own test IDLs
        // name a function `async`, as other languages' keywords may be.
        let name = if self.at_keyword(Keyword::Async) {
            let token = self.bump()?;
            Ident {
                name: token.text.to_owned(),
                span: token.span,
            }
        } else {
            self.ident("a function name")?
        };
        self.expect(Punct::LParen)?;
        let args = self.fields(Punct::RParen)?;
        let throws = if self.eat_keyword(Keyword::Throws)? {
            self.expect(Punct::LParen)?;
            self.fields(Punct::RParen)?
        } else {
            Vec::new()
        };
        let ann = self.annotations()?;
        self.eat_separator()?;
        Ok(Function {
            oneway,
            returns,
            name,
            args,
            throws,
            ann,
            doc,
            span,
        })
    }

    /// Fields up to and including `close` (`}` of a struct, `)` of an argument list).
    fn fields(&mut self, close: Punct) -> Result<Vec<Field>, ParseError> {
        let mut fields = Vec::new();
        while !self.eat(close)? {
            if !self.at_field_start() {
                let expected = match close {
                    Punct::RParen => "a field or ')'",
                    _ => "a field or '}'",
                };
                return Err(self.unexpected(expected));
            }
            fields.push(self.field()?);
        }
        Ok(fields)
    }

    fn field(&mut self) -> Result<Field, ParseError> {
        let doc = self.take_doc();
        let span = self.tok.span;
        let id = if self.at_int() {
            let id = self.int("a field id")?;
            self.expect(Punct::Colon)?;
            Some(id)
        } else {
            None
        };
        let req = if self.eat_keyword(Keyword::Required)? {
            Requiredness::Required
        } else if self.eat_keyword(Keyword::Optional)? {
            Requiredness::Optional
        } else {
            Requiredness::Default
        };
        let ty = self.field_type("a field type")?;
        let reference = self.eat(Punct::Amp)?;
        let name = self.field_name()?;
        let default = if self.eat(Punct::Eq)? {
            Some(self.const_value("a constant value")?)
        } else {
            None
        };
        // XSD-generator options, meaningless here: `xsd_optional`, `xsd_nillable` and
        // `xsd_attrs { FIELDS }`.
        self.eat_keyword(Keyword::XsdOptional)?;
        self.eat_keyword(Keyword::XsdNillable)?;
        if self.eat_keyword(Keyword::XsdAttrs)? {
            self.expect(Punct::LBrace)?;
            self.fields(Punct::RBrace)?;
        }
        let ann = self.annotations()?;
        self.eat_separator()?;
        Ok(Field {
            id,
            req,
            ty,
            reference,
            name,
            default,
            ann,
            doc,
            span,
        })
    }

    // ---- types, values, annotations ------------------------------------------------

    /// A field type; `what` describes it for the error message if there is none.
    ///
    /// Container types are parsed with an explicit stack instead of recursion, so
    /// the parser's stack use does not grow with the nesting.
    fn field_type(&mut self, what: &str) -> Result<FieldType, ParseError> {
        let mut open: Vec<OpenType> = Vec::new();
        let mut what = what;
        loop {
            let span = self.tok.span;
            let kind = match self.tok.kind {
                TokenKind::Ident => FieldTypeKind::Named(self.ident(what)?),
                TokenKind::Keyword(Keyword::List) => {
                    self.enter(open.len())?;
                    self.bump()?;
                    let ann = self.cpp_type()?.into_iter().collect();
                    self.expect(Punct::Lt)?;
                    open.push(OpenType::List { span, ann });
                    what = "a list element type";
                    continue;
                }
                TokenKind::Keyword(Keyword::Set) => {
                    self.enter(open.len())?;
                    self.bump()?;
                    let ann = self.cpp_type()?.into_iter().collect();
                    self.expect(Punct::Lt)?;
                    open.push(OpenType::Set { span, ann });
                    what = "a set element type";
                    continue;
                }
                TokenKind::Keyword(Keyword::Map) => {
                    self.enter(open.len())?;
                    self.bump()?;
                    let ann = self.cpp_type()?.into_iter().collect();
                    self.expect(Punct::Lt)?;
                    open.push(OpenType::MapKey { span, ann });
                    what = "a map key type";
                    continue;
                }
                TokenKind::Keyword(keyword) => match base_type(keyword) {
                    Some(base) => {
                        self.bump()?;
                        FieldTypeKind::Base(base)
                    }
                    None => return Err(self.unexpected(what)),
                },
                _ => return Err(self.unexpected(what)),
            };
            // As in Apache Thrift, a named type takes no annotations: in
            // `oneway Foo()` the `(` must not be read as annotations of `Foo`.
            let ann = match kind {
                FieldTypeKind::Named(_) => Vec::new(),
                _ => self.annotations()?,
            };
            let mut done = FieldType { kind, ann, span };
            // Close every container that `done` completes.
            loop {
                let Some(container) = open.pop() else {
                    return Ok(done);
                };
                done = match container {
                    OpenType::List { span, mut ann } => {
                        self.expect(Punct::Gt)?;
                        ann.extend(self.cpp_type()?);
                        ann.extend(self.annotations()?);
                        FieldType {
                            kind: FieldTypeKind::List(Box::new(done)),
                            ann,
                            span,
                        }
                    }
                    OpenType::Set { span, mut ann } => {
                        self.expect(Punct::Gt)?;
                        ann.extend(self.annotations()?);
                        FieldType {
                            kind: FieldTypeKind::Set(Box::new(done)),
                            ann,
                            span,
                        }
                    }
                    OpenType::MapKey { span, ann } => {
                        self.expect(Punct::Comma)?;
                        open.push(OpenType::MapValue {
                            span,
                            ann,
                            key: done,
                        });
                        what = "a map value type";
                        break;
                    }
                    OpenType::MapValue { span, mut ann, key } => {
                        self.expect(Punct::Gt)?;
                        ann.extend(self.annotations()?);
                        FieldType {
                            kind: FieldTypeKind::Map(Box::new(key), Box::new(done)),
                            ann,
                            span,
                        }
                    }
                };
            }
        }
    }

    /// Fails if a container or literal opened inside `depth` others would exceed
    /// [`MAX_NESTING`].
    fn enter(&self, depth: usize) -> Result<(), ParseError> {
        if depth >= MAX_NESTING {
            Err(self.error_here(ParseErrorKind::TooDeep(MAX_NESTING)))
        } else {
            Ok(())
        }
    }

    /// An optional legacy `cpp_type "T"`, kept as the annotation `cpp_type = "T"`.
    fn cpp_type(&mut self) -> Result<Option<Annotation>, ParseError> {
        if !self.at_keyword(Keyword::CppType) {
            return Ok(None);
        }
        let span = self.bump()?.span;
        let value = self.string("a quoted C++ type")?;
        Ok(Some(Annotation {
            key: "cpp_type".to_owned(),
            value,
            span,
        }))
    }

    /// A constant value; `what` describes it for the error message if there is none.
    ///
    /// List and map literals are parsed with an explicit stack instead of recursion,
    /// so the parser's stack use does not grow with the nesting.
    fn const_value(&mut self, what: &str) -> Result<ConstValue, ParseError> {
        let mut open: Vec<OpenValue> = Vec::new();
        let mut what = what;
        loop {
            let span = self.tok.span;
            let kind = match &mut self.tok.kind {
                TokenKind::Int(value) => {
                    let value = *value;
                    self.bump()?;
                    ConstValueKind::Int(value)
                }
                TokenKind::Double(value) => {
                    let value = *value;
                    self.bump()?;
                    ConstValueKind::Double(value)
                }
                TokenKind::Str(value) => {
                    let value = std::mem::take(value);
                    self.bump()?;
                    ConstValueKind::Str(value)
                }
                TokenKind::Keyword(Keyword::True) => {
                    self.bump()?;
                    ConstValueKind::Bool(true)
                }
                TokenKind::Keyword(Keyword::False) => {
                    self.bump()?;
                    ConstValueKind::Bool(false)
                }
                TokenKind::Ident => ConstValueKind::Ident(self.ident(what)?),
                TokenKind::Punct(Punct::LBracket) => {
                    self.enter(open.len())?;
                    self.bump()?;
                    if self.eat(Punct::RBracket)? {
                        ConstValueKind::List(Vec::new())
                    } else {
                        open.push(OpenValue::List {
                            span,
                            items: Vec::new(),
                        });
                        what = "a constant value or ']'";
                        continue;
                    }
                }
                TokenKind::Punct(Punct::LBrace) => {
                    self.enter(open.len())?;
                    self.bump()?;
                    if self.eat(Punct::RBrace)? {
                        ConstValueKind::Map(Vec::new())
                    } else {
                        open.push(OpenValue::Map {
                            span,
                            entries: Vec::new(),
                            key: None,
                        });
                        what = "a map key or '}'";
                        continue;
                    }
                }
                _ => return Err(self.unexpected(what)),
            };
            let mut done = ConstValue { kind, span };
            // Hand `done` to the innermost open literal, closing every literal it
            // completes.
            loop {
                let Some(literal) = open.pop() else {
                    return Ok(done);
                };
                match literal {
                    OpenValue::List { span, mut items } => {
                        items.push(done);
                        self.eat_separator()?;
                        if !self.eat(Punct::RBracket)? {
                            open.push(OpenValue::List { span, items });
                            what = "a constant value or ']'";
                            break;
                        }
                        done = ConstValue {
                            kind: ConstValueKind::List(items),
                            span,
                        };
                    }
                    OpenValue::Map {
                        span,
                        entries,
                        key: None,
                    } => {
                        self.expect(Punct::Colon)?;
                        open.push(OpenValue::Map {
                            span,
                            entries,
                            key: Some(done),
                        });
                        what = "a constant value";
                        break;
                    }
                    OpenValue::Map {
                        span,
                        mut entries,
                        key: Some(key),
                    } => {
                        entries.push((key, done));
                        self.eat_separator()?;
                        if !self.eat(Punct::RBrace)? {
                            open.push(OpenValue::Map {
                                span,
                                entries,
                                key: None,
                            });
                            what = "a map key or '}'";
                            break;
                        }
                        done = ConstValue {
                            kind: ConstValueKind::Map(entries),
                            span,
                        };
                    }
                }
            }
        }
    }

    /// Optional annotations `( key = "value", key2 )`.
    fn annotations(&mut self) -> Result<Vec<Annotation>, ParseError> {
        let mut annotations = Vec::new();
        if !self.eat(Punct::LParen)? {
            return Ok(annotations);
        }
        while !self.eat(Punct::RParen)? {
            if !matches!(self.tok.kind, TokenKind::Ident | TokenKind::Keyword(_)) {
                return Err(self.unexpected("an annotation name or ')'"));
            }
            let key_token = self.bump()?;
            let value = if self.eat(Punct::Eq)? {
                self.string("a quoted annotation value")?
            } else {
                String::new()
            };
            self.eat_separator()?;
            annotations.push(Annotation {
                key: key_token.text.to_owned(),
                value,
                span: key_token.span,
            });
        }
        Ok(annotations)
    }
}
