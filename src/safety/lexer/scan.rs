//! The lexer's scanners for text it takes whole: here-document bodies, the
//! insides of `${…}` and `$(…)`, quoted strings. Each moves forward only, so
//! lexing stays linear in the input however the brackets nest.

use super::{Lexer, Tok, is_soft_blank};

/// Whether `line` ends a here-document whose delimiter this lexer read as
/// `delimiter` (see `heredoc_bodies`).
fn ends_heredoc(line: &[char], delimiter: &str) -> bool {
    let d: Vec<char> = delimiter.chars().collect();
    line.starts_with(&d) && line.get(d.len()).is_none_or(|c| is_soft_blank(*c))
}

impl Lexer {
    /// After a newline: the bodies of the here-documents opened on that line,
    /// each up to a line that is exactly its delimiter (after leading tabs for
    /// `<<-`), as the shell reads them; an unterminated one runs to the end.
    /// A delimiter this lexer cut at a blank the shell keeps in the word
    /// (`EOF⟨U+00A0⟩X`) also ends at a line that starts with it and such a
    /// blank: the body then never runs past the shell's.
    pub(super) fn heredoc_bodies(&mut self) {
        for h in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            while self.i < self.s.len() {
                let end = self.s[self.i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.s.len(), |k| self.i + k);
                let mut line = &self.s[self.i..end];
                self.i = (end + 1).min(self.s.len());
                if h.strip_tabs {
                    while let ['\t', rest @ ..] = line {
                        line = rest;
                    }
                }
                if ends_heredoc(line, &h.delimiter) {
                    break;
                }
                body.extend(line);
                body.push('\n');
            }
            self.toks[h.tok] = Tok::Heredoc {
                body,
                expand: h.expand,
            };
        }
    }

    /// The body of `${…}` up to its matching `}`: nested `${…}`, `$(…)`,
    /// quotes and escapes are skipped over as the shell does.
    pub(super) fn until_brace(&mut self) -> String {
        let mut depth = 1;
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '$' if self.peek(0) == Some('(') => {
                    self.i += 1;
                    let inner = self.until_close();
                    out.push_str("$(");
                    out.push_str(&inner);
                    out.push(')');
                    continue;
                }
                '{' if out.ends_with('$') => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                '\'' | '"' | '\\' => {
                    self.copy_quoted(c, &mut out);
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }

    pub(super) fn take_until(&mut self, end: char) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            if c == end {
                break;
            }
            out.push(c);
        }
        out
    }

    pub(super) fn take_until_unescaped(&mut self, end: char) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            if c == end {
                break;
            }
            out.push(c);
            if c == '\\'
                && let Some(n) = self.peek(0)
            {
                out.push(n);
                self.i += 1;
            }
        }
        out
    }

    /// Copy a quoted string (`c` is its opening quote, already consumed) or an
    /// escaped character (`c` is the backslash) into `out` verbatim, so
    /// brackets inside are not counted.
    fn copy_quoted(&mut self, c: char, out: &mut String) {
        out.push(c);
        if c == '\\' {
            if self.peek(0).is_some() {
                out.push(self.s[self.i]);
                self.i += 1;
            }
            return;
        }
        while let Some(q) = self.peek(0) {
            self.i += 1;
            out.push(q);
            if q == c {
                break;
            }
            if q == '\\' && c == '"' && self.peek(0).is_some() {
                out.push(self.s[self.i]);
                self.i += 1;
            }
        }
    }

    /// The text up to the `)` matching an already consumed `(`, skipping quotes.
    pub(super) fn until_close(&mut self) -> String {
        let mut depth = 1;
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                '\'' | '"' | '\\' => {
                    self.copy_quoted(c, &mut out);
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }
}

/// A here-document delimiter as the shell compares it: its source text
/// with quotes and backslashes removed, expansions left as written.
pub(super) fn unquoted_source(src: &[char]) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut chars = src.iter().copied().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\\') | (Some('"'), '\\') => {
                let next = chars.peek().copied();
                match next {
                    Some(n) if quote.is_none() || "$`\"\\".contains(n) => {
                        out.push(n);
                        chars.next();
                    }
                    _ => out.push(c),
                }
            }
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => out.push(c),
        }
    }
    out
}
