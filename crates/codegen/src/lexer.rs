//! Splits Thrift IDL source into tokens, each with its position.
//!
//! The lexer works on demand: the parser asks for one token at a time, so the first
//! error reported is always the first one in the file, whether it is a lexical error
//! (an unterminated string) or a syntax error.
//!
//! Tokens:
//! - identifiers `[A-Za-z_][A-Za-z0-9_]*`, with `.` allowed between parts
//!   (`base.Status.ACTIVE`); a fixed set of words are Thrift keywords ([`Keyword`]);
//! - integers: decimal or `0x` hex, optionally signed with `+`/`-`;
//! - doubles: optionally signed, with a fraction and/or an exponent (`1.5`, `.5`,
//!   `-2e10`, `1.0E-3`);
//! - string literals in `"` or `'`, on one line, with the escapes `\\ \" \' \n \t \r`
//!   and `\uXXXX` (a UTF-16 surrogate pair written as two `\u` escapes makes one
//!   character);
//! - the punctuation `{ } ( ) [ ] < > , ; : = * &`.
//!
//! Comments are `// ...`, `# ...` and `/* ... */`. Doc comments are `/** ... */` and
//! runs of `/// ...` lines; the lexer attaches the text of the last doc comment before a
//! token to that token ([`Token::doc`]) and the parser keeps it where a definition,
//! field, enum value or function starts.
//!
//! A number immediately followed by a letter, digit, `_` or `.` is an error (`0x`,
//! `1.`, `12abc`) rather than two tokens, which keeps messages about typos precise.

use crate::ast::{FileId, Span};
use crate::error::{ParseError, ParseErrorKind, truncate};

/// Thrift's reserved words. Only the parser's field names may be some of them, as in
/// Apache Thrift (`1: i8 i8`); the deprecated words are names everywhere (Apache
/// Thrift 0.25 no longer reserves them) and keywords only for the error messages
/// where they start a definition or a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    Include,
    CppInclude,
    Namespace,
    Const,
    Typedef,
    Enum,
    Struct,
    Union,
    Exception,
    Service,
    Extends,
    Oneway,
    /// The deprecated spelling of `oneway`.
    Async,
    Void,
    Throws,
    Required,
    Optional,
    Bool,
    Byte,
    I8,
    I16,
    I32,
    I64,
    Double,
    String,
    Binary,
    Uuid,
    List,
    Set,
    Map,
    True,
    False,
    CppType,
    /// `xsd_all`, `xsd_optional`, `xsd_nillable`, `xsd_attrs`: XSD-generator options,
    /// accepted and ignored.
    XsdAll,
    XsdOptional,
    XsdNillable,
    XsdAttrs,
    Senum,
    Slist,
    PhpNamespace,
    XsdNamespace,
}

/// Every keyword with its spelling.
const KEYWORDS: &[(&str, Keyword)] = &[
    ("include", Keyword::Include),
    ("cpp_include", Keyword::CppInclude),
    ("namespace", Keyword::Namespace),
    ("const", Keyword::Const),
    ("typedef", Keyword::Typedef),
    ("enum", Keyword::Enum),
    ("struct", Keyword::Struct),
    ("union", Keyword::Union),
    ("exception", Keyword::Exception),
    ("service", Keyword::Service),
    ("extends", Keyword::Extends),
    ("oneway", Keyword::Oneway),
    ("async", Keyword::Async),
    ("void", Keyword::Void),
    ("throws", Keyword::Throws),
    ("required", Keyword::Required),
    ("optional", Keyword::Optional),
    ("bool", Keyword::Bool),
    ("byte", Keyword::Byte),
    ("i8", Keyword::I8),
    ("i16", Keyword::I16),
    ("i32", Keyword::I32),
    ("i64", Keyword::I64),
    ("double", Keyword::Double),
    ("string", Keyword::String),
    ("binary", Keyword::Binary),
    ("uuid", Keyword::Uuid),
    ("list", Keyword::List),
    ("set", Keyword::Set),
    ("map", Keyword::Map),
    ("true", Keyword::True),
    ("false", Keyword::False),
    ("cpp_type", Keyword::CppType),
    ("xsd_all", Keyword::XsdAll),
    ("xsd_optional", Keyword::XsdOptional),
    ("xsd_nillable", Keyword::XsdNillable),
    ("xsd_attrs", Keyword::XsdAttrs),
    ("senum", Keyword::Senum),
    ("slist", Keyword::Slist),
    ("php_namespace", Keyword::PhpNamespace),
    ("xsd_namespace", Keyword::XsdNamespace),
];

impl Keyword {
    /// The keyword spelled `word`, if it is one.
    fn from_word(word: &str) -> Option<Keyword> {
        KEYWORDS
            .iter()
            .find(|(spelling, _)| *spelling == word)
            .map(|&(_, keyword)| keyword)
    }

    /// Whether Apache Thrift also takes the keyword as a field name (its grammar's
    /// `FieldName`): every keyword but `true`/`false` (integers there), `cpp_type` and
    /// the `xsd_*` options that may follow a field name.
    pub(crate) fn is_field_name(self) -> bool {
        !matches!(
            self,
            Keyword::True
                | Keyword::False
                | Keyword::CppType
                | Keyword::XsdAll
                | Keyword::XsdOptional
                | Keyword::XsdNillable
                | Keyword::XsdAttrs
        )
    }

    /// Why a deprecated keyword is refused, for error messages.
    pub(crate) fn unsupported_note(self) -> Option<&'static str> {
        match self {
            Keyword::Senum => Some("'senum' is deprecated and not supported"),
            Keyword::Slist => Some("'slist' is deprecated and not supported; use 'string'"),
            Keyword::PhpNamespace => {
                Some("'php_namespace' is not supported; use 'namespace php NAME'")
            }
            Keyword::XsdNamespace => {
                Some("'xsd_namespace' is not supported; use 'namespace xsd NAME'")
            }
            _ => None,
        }
    }
}

/// Single-character punctuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Punct {
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Lt,
    Gt,
    Comma,
    Semi,
    Colon,
    Eq,
    Star,
    /// `&`: Apache Thrift's reference marker on a field (`1: Node & next`).
    Amp,
}

impl Punct {
    fn from_char(c: char) -> Option<Punct> {
        Some(match c {
            '{' => Punct::LBrace,
            '}' => Punct::RBrace,
            '(' => Punct::LParen,
            ')' => Punct::RParen,
            '[' => Punct::LBracket,
            ']' => Punct::RBracket,
            '<' => Punct::Lt,
            '>' => Punct::Gt,
            ',' => Punct::Comma,
            ';' => Punct::Semi,
            ':' => Punct::Colon,
            '=' => Punct::Eq,
            '*' => Punct::Star,
            '&' => Punct::Amp,
            _ => return None,
        })
    }

    /// The punctuation quoted for error messages, e.g. `'}'`.
    pub(crate) fn quoted(self) -> &'static str {
        match self {
            Punct::LBrace => "'{'",
            Punct::RBrace => "'}'",
            Punct::LParen => "'('",
            Punct::RParen => "')'",
            Punct::LBracket => "'['",
            Punct::RBracket => "']'",
            Punct::Lt => "'<'",
            Punct::Gt => "'>'",
            Punct::Comma => "','",
            Punct::Semi => "';'",
            Punct::Colon => "':'",
            Punct::Eq => "'='",
            Punct::Star => "'*'",
            Punct::Amp => "'&'",
        }
    }
}

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// A name that is not a keyword; the name is the token's text.
    Ident,
    Keyword(Keyword),
    Int(i64),
    Double(f64),
    /// A string literal, escapes decoded.
    Str(String),
    Punct(Punct),
    Eof,
}

/// A token, its source text and position, and the doc comment before it.
#[derive(Debug, Clone)]
pub(crate) struct Token<'a> {
    pub(crate) kind: TokenKind,
    /// The token exactly as written (quotes included for strings; empty at the end).
    pub(crate) text: &'a str,
    pub(crate) span: Span,
    /// The last doc comment between the previous token and this one.
    pub(crate) doc: Option<String>,
}

impl Token<'_> {
    /// The token as error messages show it: `'}'`, `'struct'`, `string literal "x"`,
    /// `end of file`.
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            TokenKind::Eof => "end of file".to_owned(),
            TokenKind::Str(_) => format!("string literal {}", truncate(self.text)),
            _ => format!("'{}'", truncate(self.text)),
        }
    }
}

/// How the doc comment being collected was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DocStyle {
    /// `/** ... */`: a new one replaces what was collected.
    Block,
    /// `/// ...`: consecutive lines join.
    Line,
}

/// The on-demand tokenizer over one source file.
#[derive(Debug)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the next character; always on a character boundary.
    pos: usize,
    line: u32,
    col: u32,
    file: FileId,
    file_name: &'a str,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str, file: FileId, file_name: &'a str) -> Self {
        // A UTF-8 byte order mark is not part of the text.
        let pos = if src.starts_with('\u{feff}') {
            '\u{feff}'.len_utf8()
        } else {
            0
        };
        Self {
            src,
            pos,
            line: 1,
            col: 1,
            file,
            file_name,
        }
    }

    pub(crate) fn file_name(&self) -> &'a str {
        self.file_name
    }

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_nth(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn span(&self) -> Span {
        Span {
            file: self.file,
            line: self.line,
            col: self.col,
        }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    fn text_from(&self, start: usize) -> &'a str {
        self.src.get(start..self.pos).unwrap_or("")
    }

    fn error(&self, span: Span, kind: ParseErrorKind) -> ParseError {
        ParseError::new(self.file_name, span.line, span.col, kind)
    }

    /// The next token; [`TokenKind::Eof`] forever once the input is used up.
    pub(crate) fn next_token(&mut self) -> Result<Token<'a>, ParseError> {
        let doc = self.skip_trivia()?;
        let start = self.pos;
        let span = self.span();
        let Some(c) = self.peek() else {
            return Ok(Token {
                kind: TokenKind::Eof,
                text: "",
                span,
                doc,
            });
        };
        let kind = if is_ident_start(c) {
            self.ident()
        } else if c.is_ascii_digit() || self.at_signed_or_dot_number() {
            self.number(start, span)?
        } else if c == '"' || c == '\'' {
            TokenKind::Str(self.string(span)?)
        } else if let Some(punct) = Punct::from_char(c) {
            self.bump();
            TokenKind::Punct(punct)
        } else {
            return Err(self.error(span, ParseErrorKind::UnexpectedChar(c)));
        };
        Ok(Token {
            kind,
            text: self.text_from(start),
            span,
            doc,
        })
    }

    /// Skips whitespace and comments, returning the last doc comment met.
    fn skip_trivia(&mut self) -> Result<Option<String>, ParseError> {
        let mut doc: Option<(String, DocStyle)> = None;
        loop {
            match (self.peek(), self.peek_nth(1)) {
                (Some(' ' | '\t' | '\r' | '\n' | '\u{c}'), _) => {
                    self.bump();
                }
                (Some('#'), _) => {
                    self.line_comment();
                }
                (Some('/'), Some('/')) => {
                    let text = self.line_comment();
                    if let Some(line) = text.strip_prefix("///")
                        && !line.starts_with('/')
                    {
                        let line = line.strip_prefix(' ').unwrap_or(line).trim_end();
                        match &mut doc {
                            Some((collected, DocStyle::Line)) => {
                                collected.push('\n');
                                collected.push_str(line);
                            }
                            _ => doc = Some((line.to_owned(), DocStyle::Line)),
                        }
                    }
                }
                (Some('/'), Some('*')) => {
                    if let Some(text) = self.block_comment()? {
                        doc = Some((text, DocStyle::Block));
                    }
                }
                _ => break,
            }
        }
        Ok(doc
            .map(|(text, _)| text.trim_matches('\n').to_owned())
            .filter(|text| !text.is_empty()))
    }

    /// Skips a `//` or `#` comment up to (not including) the end of the line and
    /// returns its text.
    fn line_comment(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(|c| c != '\n') {
            self.bump();
        }
        self.text_from(start)
    }

    /// Skips a `/* ... */` comment; returns the cleaned-up text of a `/** ... */` doc
    /// comment.
    fn block_comment(&mut self) -> Result<Option<String>, ParseError> {
        let span = self.span();
        let start = self.pos;
        // `/**/` is an empty plain comment, `/** ...` a doc comment.
        let is_doc = self.rest().starts_with("/**") && !self.rest().starts_with("/**/");
        self.bump();
        self.bump();
        loop {
            if self.rest().starts_with("*/") {
                break;
            }
            if self.bump().is_none() {
                return Err(self.error(span, ParseErrorKind::UnterminatedComment));
            }
        }
        let body_end = self.pos;
        self.bump();
        self.bump();
        if !is_doc {
            return Ok(None);
        }
        let body = self.src.get(start + 3..body_end).unwrap_or("");
        let lines: Vec<&str> = body
            .lines()
            .map(|line| {
                let line = line.trim_start();
                let line = match line.strip_prefix('*') {
                    Some(rest) => rest.strip_prefix(' ').unwrap_or(rest),
                    None => line,
                };
                line.trim_end()
            })
            .collect();
        Ok(Some(lines.join("\n")))
    }

    fn ident(&mut self) -> TokenKind {
        let start = self.pos;
        self.bump();
        loop {
            match (self.peek(), self.peek_nth(1)) {
                (Some(c), _) if is_ident_continue(c) => {
                    self.bump();
                }
                (Some('.'), Some(c)) if is_ident_continue(c) => {
                    self.bump();
                }
                _ => break,
            }
        }
        match Keyword::from_word(self.text_from(start)) {
            Some(keyword) => TokenKind::Keyword(keyword),
            None => TokenKind::Ident,
        }
    }

    /// Whether the input starts with `+digit`, `-digit`, `+.digit`, `-.digit` or
    /// `.digit`.
    fn at_signed_or_dot_number(&self) -> bool {
        let mut chars = self.rest().chars();
        let mut c = chars.next();
        if matches!(c, Some('+' | '-')) {
            c = chars.next();
        }
        match c {
            Some(d) if d.is_ascii_digit() => true,
            Some('.') => chars.next().is_some_and(|d| d.is_ascii_digit()),
            _ => false,
        }
    }

    fn eat_digits(&mut self, radix: u32) {
        while self.peek().is_some_and(|c| c.is_digit(radix)) {
            self.bump();
        }
    }

    fn number(&mut self, start: usize, span: Span) -> Result<TokenKind, ParseError> {
        let negative = self.peek() == Some('-');
        if matches!(self.peek(), Some('+' | '-')) {
            self.bump();
        }
        if self.peek() == Some('0') && matches!(self.peek_nth(1), Some('x' | 'X')) {
            self.bump();
            self.bump();
            let digits_start = self.pos;
            self.eat_digits(16);
            let digits = self.text_from(digits_start);
            self.reject_number_suffix(start, span)?;
            if digits.is_empty() {
                let text = self.text_from(start).to_owned();
                return Err(self.error(span, ParseErrorKind::InvalidNumber(text)));
            }
            return self.int(start, span, u64::from_str_radix(digits, 16).ok(), negative);
        }
        let digits_start = self.pos;
        self.eat_digits(10);
        let digits = self.text_from(digits_start);
        let mut is_double = false;
        if self.peek() == Some('.') && self.peek_nth(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            self.eat_digits(10);
            is_double = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let exponent_follows = match self.peek_nth(1) {
                Some('+' | '-') => self.peek_nth(2).is_some_and(|c| c.is_ascii_digit()),
                Some(c) => c.is_ascii_digit(),
                None => false,
            };
            if exponent_follows {
                self.bump();
                if matches!(self.peek(), Some('+' | '-')) {
                    self.bump();
                }
                self.eat_digits(10);
                is_double = true;
            }
        }
        self.reject_number_suffix(start, span)?;
        if is_double {
            let text = self.text_from(start);
            return match text.parse::<f64>() {
                Ok(value) if value.is_finite() => Ok(TokenKind::Double(value)),
                _ => Err(self.error(span, ParseErrorKind::NumberOutOfRange(text.to_owned()))),
            };
        }
        self.int(start, span, digits.parse::<u64>().ok(), negative)
    }

    /// A number must not run into a name or another dot: `12abc`, `1.`, `0x1g` are
    /// one bad literal, not two tokens.
    fn reject_number_suffix(&mut self, start: usize, span: Span) -> Result<(), ParseError> {
        if !self
            .peek()
            .is_some_and(|c| is_ident_continue(c) || c == '.')
        {
            return Ok(());
        }
        while self
            .peek()
            .is_some_and(|c| is_ident_continue(c) || c == '.')
        {
            self.bump();
        }
        let text = truncate(self.text_from(start));
        Err(self.error(span, ParseErrorKind::InvalidNumber(text)))
    }

    /// Applies the sign to a magnitude (`None` if it did not even fit in `u64`).
    fn int(
        &self,
        start: usize,
        span: Span,
        magnitude: Option<u64>,
        negative: bool,
    ) -> Result<TokenKind, ParseError> {
        let value = magnitude.and_then(|m| {
            let m = i128::from(m);
            i64::try_from(if negative { -m } else { m }).ok()
        });
        match value {
            Some(value) => Ok(TokenKind::Int(value)),
            None => {
                let text = truncate(self.text_from(start));
                Err(self.error(span, ParseErrorKind::NumberOutOfRange(text)))
            }
        }
    }

    /// Reads a string literal (the opening quote is next) and decodes its escapes.
    fn string(&mut self, span: Span) -> Result<String, ParseError> {
        let quote = self.bump();
        let mut value = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.error(span, ParseErrorKind::UnterminatedString));
                }
                Some('\\') => {
                    let escape_span = self.span();
                    // The column of the backslash itself.
                    let escape_span = Span {
                        col: escape_span.col.saturating_sub(1),
                        ..escape_span
                    };
                    value.push(self.escape(span, escape_span)?);
                }
                Some(c) if Some(c) == quote => return Ok(value),
                Some(c) => value.push(c),
            }
        }
    }

    /// Decodes one escape; the backslash has been read.
    fn escape(&mut self, string_span: Span, escape_span: Span) -> Result<char, ParseError> {
        let start = self.pos.saturating_sub(1);
        let c = match self.bump() {
            None | Some('\n') => {
                return Err(self.error(string_span, ParseErrorKind::UnterminatedString));
            }
            Some(c) => c,
        };
        let simple = match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            '\\' => Some('\\'),
            '"' => Some('"'),
            '\'' => Some('\''),
            _ => None,
        };
        if let Some(simple) = simple {
            return Ok(simple);
        }
        if c != 'u' {
            let text = self.text_from(start).to_owned();
            return Err(self.error(escape_span, ParseErrorKind::InvalidEscape(text)));
        }
        let high = self.hex4(start, string_span, escape_span)?;
        let code = if (0xD800..0xDC00).contains(&high) {
            // A high surrogate must be followed by `\u` and a low surrogate.
            if !self.rest().starts_with("\\u") {
                let text = self.text_from(start).to_owned();
                return Err(self.error(escape_span, ParseErrorKind::InvalidEscape(text)));
            }
            self.bump();
            self.bump();
            let low = self.hex4(start, string_span, escape_span)?;
            if !(0xDC00..0xE000).contains(&low) {
                let text = self.text_from(start).to_owned();
                return Err(self.error(escape_span, ParseErrorKind::InvalidEscape(text)));
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        char::from_u32(code).ok_or_else(|| {
            let text = self.text_from(start).to_owned();
            self.error(escape_span, ParseErrorKind::InvalidEscape(text))
        })
    }

    /// Reads the four hex digits of a `\u` escape.
    fn hex4(
        &mut self,
        start: usize,
        string_span: Span,
        escape_span: Span,
    ) -> Result<u32, ParseError> {
        let mut code = 0u32;
        for _ in 0..4 {
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.error(string_span, ParseErrorKind::UnterminatedString));
                }
                Some(c) => match c.to_digit(16) {
                    Some(digit) => code = code * 16 + digit,
                    None => {
                        let text = self.text_from(start).to_owned();
                        return Err(self.error(escape_span, ParseErrorKind::InvalidEscape(text)));
                    }
                },
            }
        }
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(src: &str) -> Result<Vec<TokenKind>, ParseError> {
        let mut lexer = Lexer::new(src, FileId(0), "t.thrift");
        let mut out = Vec::new();
        loop {
            let token = lexer.next_token()?;
            if token.kind == TokenKind::Eof {
                return Ok(out);
            }
            out.push(token.kind);
        }
    }

    fn error(src: &str) -> String {
        match tokens(src) {
            Ok(tokens) => panic!("expected an error for {src:?}, got {tokens:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(
            tokens("0 -1 +7 0x1F -0x10 0X7fffffffffffffff -9223372036854775808").unwrap(),
            vec![
                TokenKind::Int(0),
                TokenKind::Int(-1),
                TokenKind::Int(7),
                TokenKind::Int(31),
                TokenKind::Int(-16),
                TokenKind::Int(i64::MAX),
                TokenKind::Int(i64::MIN),
            ]
        );
        assert_eq!(
            tokens("1.5 -2e10 1.0E-3 .5 -.25 +3e+2 7E0").unwrap(),
            vec![
                TokenKind::Double(1.5),
                TokenKind::Double(-2e10),
                TokenKind::Double(1.0e-3),
                TokenKind::Double(0.5),
                TokenKind::Double(-0.25),
                TokenKind::Double(300.0),
                TokenKind::Double(7.0),
            ]
        );
        assert_eq!(
            error("9223372036854775808"),
            "t.thrift:1:1: number literal '9223372036854775808' is out of range"
        );
        assert_eq!(
            error("x = 0x10000000000000000"),
            "t.thrift:1:5: number literal '0x10000000000000000' is out of range"
        );
        assert_eq!(
            error("1e999"),
            "t.thrift:1:1: number literal '1e999' is out of range"
        );
        assert_eq!(error("0x"), "t.thrift:1:1: invalid number literal '0x'");
        assert_eq!(error(" 1."), "t.thrift:1:2: invalid number literal '1.'");
        assert_eq!(error("1e"), "t.thrift:1:1: invalid number literal '1e'");
        assert_eq!(
            error("12abc"),
            "t.thrift:1:1: invalid number literal '12abc'"
        );
        assert_eq!(error("0x1g"), "t.thrift:1:1: invalid number literal '0x1g'");
        assert_eq!(
            error("1.2.3"),
            "t.thrift:1:1: invalid number literal '1.2.3'"
        );
        assert_eq!(error("-"), "t.thrift:1:1: unexpected character '-'");
        assert_eq!(error("- 1"), "t.thrift:1:1: unexpected character '-'");
        assert_eq!(error("."), "t.thrift:1:1: unexpected character '.'");
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            tokens(r#""a\tb\n\r\\\"\'" 'x"y\'' "\u00e9\uD83D\uDE00" ''"#).unwrap(),
            vec![
                TokenKind::Str("a\tb\n\r\\\"'".to_owned()),
                TokenKind::Str("x\"y'".to_owned()),
                TokenKind::Str("é😀".to_owned()),
                TokenKind::Str(String::new()),
            ]
        );
        assert_eq!(
            error("  \"abc"),
            "t.thrift:1:3: unterminated string literal"
        );
        assert_eq!(
            error("'abc\n'"),
            "t.thrift:1:1: unterminated string literal"
        );
        assert_eq!(
            error(r#""ab\q""#),
            r"t.thrift:1:4: invalid escape sequence '\q' in string literal"
        );
        assert_eq!(
            error(r#""\u12G4""#),
            r"t.thrift:1:2: invalid escape sequence '\u12G' in string literal"
        );
        assert_eq!(
            error(r#""\uD800x""#),
            r"t.thrift:1:2: invalid escape sequence '\uD800' in string literal"
        );
        assert_eq!(
            error(r#""\uDC00""#),
            r"t.thrift:1:2: invalid escape sequence '\uDC00' in string literal"
        );
        assert_eq!(error("\"\\"), "t.thrift:1:1: unterminated string literal");
        assert_eq!(
            error("\"\\u12"),
            "t.thrift:1:1: unterminated string literal"
        );
    }

    #[test]
    fn identifiers_keywords_punctuation() {
        assert_eq!(
            tokens("a.b_c struct _x1 {}()[]<>,;:=* type").unwrap(),
            vec![
                TokenKind::Ident,
                TokenKind::Keyword(Keyword::Struct),
                TokenKind::Ident,
                TokenKind::Punct(Punct::LBrace),
                TokenKind::Punct(Punct::RBrace),
                TokenKind::Punct(Punct::LParen),
                TokenKind::Punct(Punct::RParen),
                TokenKind::Punct(Punct::LBracket),
                TokenKind::Punct(Punct::RBracket),
                TokenKind::Punct(Punct::Lt),
                TokenKind::Punct(Punct::Gt),
                TokenKind::Punct(Punct::Comma),
                TokenKind::Punct(Punct::Semi),
                TokenKind::Punct(Punct::Colon),
                TokenKind::Punct(Punct::Eq),
                TokenKind::Punct(Punct::Star),
                TokenKind::Ident,
            ]
        );
        assert_eq!(error("a @"), "t.thrift:1:3: unexpected character '@'");
        assert_eq!(error("\n  é"), "t.thrift:2:3: unexpected character 'é'");
        assert_eq!(error("\u{0}"), "t.thrift:1:1: unexpected character '\\0'");
    }

    #[test]
    fn comments_and_docs() {
        let src = "# hash\n// line\n/* block\n */ a /** doc\n * two\n */ b\n/// one\n///  two\nc /**/ d /** first */ /** second */ e //// not doc\n f /***/ g";
        let mut lexer = Lexer::new(src, FileId(3), "t.thrift");
        let mut seen = Vec::new();
        loop {
            let token = lexer.next_token().unwrap();
            if token.kind == TokenKind::Eof {
                break;
            }
            seen.push((token.text, token.doc, token.span.line, token.span.col));
        }
        assert_eq!(
            seen,
            vec![
                ("a", None, 4, 5),
                ("b", Some("doc\ntwo".to_owned()), 6, 5),
                ("c", Some("one\n two".to_owned()), 9, 1),
                ("d", None, 9, 8),
                ("e", Some("second".to_owned()), 9, 37),
                ("f", None, 10, 2),
                ("g", None, 10, 10),
            ]
        );
        assert_eq!(error("a /* b"), "t.thrift:1:3: unterminated block comment");
        assert_eq!(error("/*/"), "t.thrift:1:1: unterminated block comment");
    }

    #[test]
    fn byte_order_mark_and_crlf() {
        let src = "\u{feff}a\r\n\tb";
        let mut lexer = Lexer::new(src, FileId(0), "t.thrift");
        let a = lexer.next_token().unwrap();
        let b = lexer.next_token().unwrap();
        assert_eq!((a.text, a.span.line, a.span.col), ("a", 1, 1));
        assert_eq!((b.text, b.span.line, b.span.col), ("b", 2, 2));
    }
}
