//! The mapping from Thrift names to Rust names.
//!
//! | Thrift                       | Rust                              | example                       |
//! |------------------------------|-----------------------------------|-------------------------------|
//! | file stem                    | module, `snake_case`              | `Common-Types.thrift` → `common_types` |
//! | struct, union, exception, enum, typedef, service | type, `UpperCamelCase` | `user_info` → `UserInfo` |
//! | field                        | field, `snake_case`               | `userId` → `user_id`          |
//! | union field                  | variant, `UpperCamelCase`         | `int_value` → `IntValue`      |
//! | enum value, const            | constant, `UPPER_SNAKE_CASE`      | `activeUser` → `ACTIVE_USER`  |
//!
//! Words are split at `_`, `-`, `.` and at case changes (`HTTPServer` is `HTTP`,
//! `Server`), so acronyms become ordinary words (`HttpServer`, `http_server`). A result
//! that is a Rust keyword is written as a raw identifier (`type` → `r#type`), or with a
//! trailing underscore where Rust allows no raw form (`self`, `Self`, `super`, `crate`).
//! Two Thrift names that map to the same Rust name in one scope are an error, reported
//! by the resolver.

/// Splits `name` into words at separators and case changes.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' || c == '.' || c == ' ' {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// `UpperCamelCase`, escaped if needed.
pub(crate) fn upper_camel(name: &str) -> String {
    let mut out = String::new();
    for w in words(name) {
        let mut cs = w.chars();
        if let Some(first) = cs.next() {
            out.extend(first.to_uppercase());
            out.extend(cs.flat_map(char::to_lowercase));
        }
    }
    finish(out)
}

/// `snake_case`, escaped if needed.
pub(crate) fn snake(name: &str) -> String {
    let joined = words(name)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    finish(joined)
}

/// `UPPER_SNAKE_CASE`, escaped if needed.
pub(crate) fn upper_snake(name: &str) -> String {
    let joined = words(name)
        .iter()
        .map(|w| w.to_uppercase())
        .collect::<Vec<_>>()
        .join("_");
    finish(joined)
}

/// Rust's strict and reserved keywords (2024 edition), which need escaping.
const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Keywords that have no raw form.
const NO_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

fn finish(name: String) -> String {
    let name = if name.is_empty() {
        "_".to_string()
    } else if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    };
    if NO_RAW.contains(&name.as_str()) {
        format!("{name}_")
    } else if KEYWORDS.contains(&name.as_str()) {
        format!("r#{name}")
    } else {
        name
    }
}

/// Whether `name` (after mapping) is a legal Rust identifier, raw or plain. Thrift
/// identifiers are ASCII letters, digits, `_` and `.`; anything else is refused by the
/// resolver before it reaches the emitter.
pub(crate) fn is_legal(name: &str) -> bool {
    let bare = name.strip_prefix("r#").unwrap_or(name);
    let mut chars = bare.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && bare != "_"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_conversions_follow_the_documented_table() {
        assert_eq!(upper_camel("user_info"), "UserInfo");
        assert_eq!(upper_camel("MyTest"), "MyTest");
        assert_eq!(upper_camel("HTTPServer"), "HttpServer");
        assert_eq!(upper_camel("EchoService"), "EchoService");
        assert_eq!(snake("userId"), "user_id");
        assert_eq!(snake("ids32"), "ids32");
        assert_eq!(snake("HTTPCode"), "http_code");
        assert_eq!(snake("Common-Types"), "common_types");
        assert_eq!(upper_snake("activeUser"), "ACTIVE_USER");
        assert_eq!(upper_snake("MAX_SIZE"), "MAX_SIZE");
    }

    #[test]
    fn keywords_are_escaped() {
        assert_eq!(snake("type"), "r#type");
        assert_eq!(snake("match"), "r#match");
        assert_eq!(snake("self"), "self_");
        assert_eq!(upper_camel("self"), "Self_");
        assert_eq!(snake("crate"), "crate_");
        assert_eq!(snake("2fa"), "_2fa");
        assert!(is_legal("r#type") && is_legal("self_") && is_legal("_2fa"));
        assert!(!is_legal("_") && !is_legal("a-b") && !is_legal("é"));
    }
}
