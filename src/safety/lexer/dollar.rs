//! The lexer's `$` forms and arithmetic: `$name`, `${…}`, `$(…)`,
//! `$((…))`, `$[…]`, `$'…'`, `$"…"`, and the `((…))` command. Arithmetic
//! is told apart from a subshell as bash does: `((…))` and `$((…))` are
//! arithmetic only when the parenthesis closing the inner one is followed at
//! once by the outer one; `((sudo id) )` is a subshell in a subshell and
//! `$((sudo id) )` a command substitution of a subshell.

use super::{Lexer, Part, Sep, Tok};
use crate::safety::expand::decode_escapes;

impl Lexer {
    /// `$…` at `self.i`.
    pub(super) fn dollar(&mut self, dq: bool) {
        match self.peek(1) {
            Some('\'') if !dq => {
                self.i += 2;
                let raw = self.take_until_unescaped('\'');
                self.part(Part::Quoted(decode_escapes(&raw, true)));
            }
            // `$"…"`: a string translated by the locale, i.e. a double-quoted string.
            Some('"') if !dq => {
                self.i += 1;
                self.word_char(false);
            }
            Some('(') if self.peek(2) == Some('(') => {
                let open = self.i;
                self.i += 3;
                let inner = self.until_close();
                if self.peek(0) == Some(')') {
                    self.i += 1;
                    self.part(Part::Complex(format!("(({inner}))")));
                } else {
                    // Not `))`: a command substitution whose line starts with `(`.
                    self.i = open + 2;
                    let inner = self.until_close();
                    self.part(Part::Subst(inner));
                }
            }
            Some('(') => {
                self.i += 2;
                let inner = self.until_close();
                self.part(Part::Subst(inner));
            }
            // `$[…]`: the old spelling of `$((…))`.
            Some('[') => {
                self.i += 2;
                let inner = self.until_bracket();
                self.part(Part::Complex(format!("(({inner}))")));
            }
            Some('{') => {
                self.i += 2;
                let inner = self.until_brace();
                let plain = !inner.is_empty()
                    && (inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        || (inner.len() == 1 && "@*#?$!-".contains(&inner)));
                self.part(if plain {
                    Part::Var(inner)
                } else {
                    Part::Complex(inner)
                });
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.i += 1;
                let mut name = String::new();
                while let Some(c) = self.peek(0).filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
                    name.push(c);
                    self.i += 1;
                }
                self.part(Part::Var(name));
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.i += 2;
                self.part(Part::Var(c.to_string()));
            }
            _ => {
                self.lit.push('$');
                self.started = true;
                self.i += 1;
            }
        }
    }

    /// `((` at the start of a command (`self.i`): an arithmetic command when
    /// its inner parenthesis closes right before the outer one, else a
    /// subshell (`(` is emitted and the rest lexed as usual). False when the
    /// lexer gives up: too many such looks ran to the end in vain.
    pub(super) fn arithmetic_command(&mut self) -> bool {
        let open = self.i;
        self.i += 2;
        let inner = self.until_close();
        if self.peek(0) == Some(')') {
            self.i += 1;
            self.lit.push_str("((");
            self.started = true;
            self.flush_lit();
            self.word.0.extend(super::lex_quoted(&inner).0);
            self.lit.push_str("))");
            self.end_word();
            return true;
        }
        let scanned = self.i - open;
        self.i = open;
        if scanned > self.retry_budget {
            self.end_word();
            self.toks.push(Tok::Unreadable);
            self.i = self.s.len();
            return false;
        }
        self.retry_budget -= scanned;
        self.sep(Sep::Open, 1);
        true
    }

    /// The body of `$[…]` up to its matching `]`.
    fn until_bracket(&mut self) -> String {
        let mut depth = 1;
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }
}
