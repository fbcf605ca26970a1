//! The text being written: whole lines, indented by block, and IDL doc comments.
//!
//! [`Out`] is the buffer every part of the emitter writes to; the doc-comment helpers
//! make plain-text IDL docs safe for rustdoc, which reads them as Markdown.

use std::fmt::{self, Write as _};

/// Rust source being written: whole lines, indented four spaces per open block.
pub(super) struct Out {
    pub(super) text: String,
    pub(super) depth: usize,
}

impl Out {
    /// One line at the current indentation.
    pub(super) fn line(&mut self, args: fmt::Arguments<'_>) {
        for _ in 0..self.depth {
            self.text.push_str("    ");
        }
        // Writing to a `String` cannot fail.
        let _ = self.text.write_fmt(args);
        self.text.push('\n');
    }

    /// A line ending in `{`; what follows is indented one more level.
    pub(super) fn open(&mut self, args: fmt::Arguments<'_>) {
        for _ in 0..self.depth {
            self.text.push_str("    ");
        }
        let _ = self.text.write_fmt(args);
        self.text.push_str(" {\n");
        self.depth += 1;
    }

    /// Ends the innermost block with `}` followed by `tail` (`""`, `","`, `");"`...).
    pub(super) fn close(&mut self, tail: &str) {
        self.depth = self.depth.saturating_sub(1);
        self.line(format_args!("}}{tail}"));
    }

    /// An empty line (between items).
    pub(super) fn blank(&mut self) {
        self.text.push('\n');
    }

    /// `///` lines for an IDL doc comment, each line trimmed. Control characters (a bare
    /// CR is an error in a doc comment) and the bidirectional-text controls (which rustc
    /// refuses in comments by default) become spaces. IDL docs are plain text, not
    /// Markdown: see [`doc_line`].
    pub(super) fn doc(&mut self, doc: Option<&str>) {
        let Some(doc) = doc else { return };
        for l in doc.lines() {
            let l: String = l
                .trim()
                .chars()
                .map(|c| {
                    let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
                    if c.is_control() || bidi { ' ' } else { c }
                })
                .collect();
            let l = doc_line(&l);
            if l.is_empty() {
                self.line(format_args!("///"));
            } else {
                self.line(format_args!("/// {l}"));
            }
        }
    }
}

/// One line of an IDL doc comment made safe for rustdoc, which reads doc comments as
/// Markdown: IDL docs are plain text that often says `set<i32>` or `[1, 2]`, which
/// rustdoc would take for an HTML tag or a link (and warn, failing `-D warnings`
/// builds), and a fence of backticks or tildes would make a doctest of what follows.
/// So `\\`, `<`, `>`, `[` and `]` are escaped with a backslash, as are a fence at the
/// start of the line and backticks that open no code span on the line (code spans,
/// `` `like this` ``, are kept: inside them nothing needs escaping), and
/// `http://`/`https://` URLs become `<...>` autolinks (rustdoc warns about bare ones).
fn doc_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    if rest.starts_with("```") || rest.starts_with("~~~") {
        out.push('\\');
        out.push_str(&rest[..1]);
        rest = &rest[1..];
    }
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            let run = rest.len() - rest.trim_start_matches('`').len();
            let after = &rest[run..];
            match closing_backticks(after, run) {
                Some(end) => {
                    out.push_str(&rest[..run + end + run]);
                    rest = &after[end + run..];
                }
                None => {
                    out.push_str(&"\\`".repeat(run));
                    rest = after;
                }
            }
            continue;
        }
        let at_word_start = !out.ends_with(|c: char| c.is_alphanumeric());
        if at_word_start && (rest.starts_with("http://") || rest.starts_with("https://")) {
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '`' | '"'))
                .unwrap_or(rest.len());
            // Sentence punctuation after a URL is not part of it.
            let url = rest[..end].trim_end_matches(['.', ',', ';', ':', ')', '!', '?', '\'']);
            out.push('<');
            out.push_str(url);
            out.push('>');
            rest = &rest[url.len()..];
            continue;
        }
        if matches!(c, '\\' | '<' | '>' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Where in `text` a run of exactly `run` backticks starts (closing a code span opened
/// by such a run), if anywhere.
fn closing_backticks(text: &str, run: usize) -> Option<usize> {
    let mut at = 0;
    while let Some(i) = text[at..].find('`') {
        let start = at + i;
        let len = text[start..].len() - text[start..].trim_start_matches('`').len();
        if len == run {
            return Some(start);
        }
        at = start + len;
    }
    None
}
