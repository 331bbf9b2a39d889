//! Parameter expansions (`$x`, `${x:-word}`, `${x:=word}`, `${x@P}`, …)
//! and arithmetic, where bash runs code the line does not show as commands:
//! a prompt expansion (`${x@P}`, `PS4`) runs the substitutions in the
//! value, and arithmetic (`$((…))`, `((…))`, `let`, `[[ … -eq … ]]`, array
//! subscripts) evaluates a variable's value as an expression again, array
//! subscripts and their substitutions included (`x='a[$(id)]'; ((x))`).

use super::scope::{Scope, Val};
use super::words::{Text, is_name};
use super::{DYNAMIC, MAX_DEPTH, Walker};
use crate::safety::lexer;

/// `NAME-word`, `NAME:-word`, `NAME=word`, `NAME:=word`, `NAME+word`,
/// `NAME:+word` (the body of `${…}`): the name, the operator and the word.
fn operator_of(body: &str) -> Option<(&str, &str, &str)> {
    let end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, rest) = body.split_at(end);
    let op_len = if rest.starts_with(':') { 2 } else { 1 };
    let op = rest.get(..op_len)?;
    let word = &rest[op_len..];
    (is_name(name) && matches!(op.trim_start_matches(':'), "-" | "=" | "+" | "?")).then_some((name, op, word))
}

impl Walker<'_> {
    /// `$name` (or `${name:-default}`, `default` with whether a colon asks
    /// for it when the value is empty too) appended to `t`: its value when
    /// the line assigned it literally, `~` for `$HOME`, a blank for `$IFS`;
    /// otherwise marked undecided, showing the default if any (so an
    /// argument like `${DIR:-/}` still looks like `/` to the rules, while a
    /// program name computed that way is a `dynamic command`).
    pub(super) fn var(&mut self, t: &mut Text, scope: &Scope, name: &str, default: Option<(&Text, bool)>) {
        if name == "HOME" && !scope.assigned(name) {
            t.s.push('~');
            return;
        }
        // `$PWD` is where the line is, when the filter knows it.
        if name == "PWD"
            && !scope.assigned(name)
            && let Some(dir) = self.cwd_of(scope)
        {
            t.s.push_str(&dir);
            t.expanded = true;
            return;
        }
        if name == "IFS" && !scope.assigned(name) {
            t.s.push(' ');
            t.expanded = true;
            return;
        }
        match (scope.get(name), default) {
            (Some(Val::Known(v)), Some((d, true))) if v.is_empty() => push_text(t, d),
            (Some(Val::Known(v)), _) => {
                t.s.push_str(v);
                t.expanded = true;
            }
            (_, Some((d, _))) => {
                push_text(t, d);
                t.mark_dynamic();
            }
            (Some(Val::Unknown), None) => {
                t.loop_words = t.s.is_empty().then(|| scope.loop_words(name)).flatten();
                t.undecided(DYNAMIC);
            }
            (None, None) => {
                t.s.push('$');
                t.s.push_str(name);
                t.mark_dynamic();
            }
        }
    }

    /// `${…}` other than a plain name, or `((…))` from `$((…))`/`$[…]`.
    pub(super) fn complex(&mut self, t: &mut Text, body: &str, scope: &mut Scope, depth: usize) {
        if let Some(inner) = body.strip_prefix("((").and_then(|b| b.strip_suffix("))")) {
            self.join(&lexer::lex_quoted(inner), scope, depth + 1);
            self.arith(inner, scope, depth);
            t.undecided(DYNAMIC);
            return;
        }
        if let Some(name) = body.strip_suffix("@P").filter(|n| is_name(n)) {
            self.prompt(name, scope, depth);
            t.undecided(DYNAMIC);
            return;
        }
        if let Some((name, op, word)) = operator_of(body) {
            let d = self.join(&lexer::lex_quoted(word), scope, depth + 1);
            match op.trim_start_matches(':') {
                "-" | "=" => self.var(t, scope, name, Some((&d, op.starts_with(':')))),
                _ => t.undecided(DYNAMIC),
            }
            // `${x:=word}` assigns: x is no longer a literal.
            if op.ends_with('=') {
                scope.unknown(name);
            }
            return;
        }
        // `${!x}`: x's value names the parameter, and a subscript in it is
        // arithmetic (`x='a[$(id)]'; echo ${!x}` runs `id`).
        if let Some(Val::Known(v)) = body
            .strip_prefix('!')
            .filter(|n| is_name(n))
            .and_then(|n| scope.get(n))
        {
            let v = v.clone();
            if v.contains('[') {
                self.prompt_text(&v, scope, depth);
                self.arith(&v, scope, depth);
            }
        }
        // Any other `${…}` is not evaluated, but the substitutions inside it
        // run and its subscripts and offsets are arithmetic.
        self.join(&lexer::lex_quoted(body), scope, depth + 1);
        if body.contains(['[', ':']) {
            self.arith(body, scope, depth);
        }
        t.undecided(DYNAMIC);
    }

    /// A prompt expansion of `name`'s value (`${x@P}`, `PS4` under `set -x`):
    /// its substitutions run.
    pub(super) fn prompt(&mut self, name: &str, scope: &mut Scope, depth: usize) {
        match scope.get(name) {
            Some(Val::Known(v)) => {
                let v = v.clone();
                self.prompt_text(&v, scope, depth);
            }
            Some(Val::Unknown) => self.push(format!(
                "{DYNAMIC} ${{{name}@p}} expands a prompt the filter cannot read"
            )),
            None => {}
        }
    }

    /// Walk a prompt string (or any text expanded again later): its
    /// substitutions are commands. (What the filter could not resolve in it
    /// is already marked; the marker is not read as a substitution.)
    pub(super) fn prompt_text(&mut self, text: &str, scope: &mut Scope, depth: usize) {
        let text = text.replace(DYNAMIC, "_");
        self.join(&lexer::lex_quoted(&text), &mut scope.clone(), depth + 1);
    }

    /// An arithmetic expression: every variable named in it is evaluated
    /// as an expression in turn, so a value holding a substitution or a
    /// subscript is walked (`x='a[$(id)]'; ((x))`). Names in it may be
    /// assigned (`i++`, `x=3`): they are no longer literals. A value read at
    /// run time is not known, so it is not followed (see SECURITY.md).
    pub(super) fn arith(&mut self, text: &str, scope: &mut Scope, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if !self.tick() {
                return;
            }
            let c = b[i];
            let starts = (c.is_ascii_alphabetic() || c == b'_')
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'#'));
            if !starts {
                i += 1;
                continue;
            }
            let end = (i..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_'))
                .unwrap_or(b.len());
            let name = &text[i..end];
            if let Some(Val::Known(v)) = scope.get(name) {
                let v = v.clone();
                if v.contains(['$', '`', '[']) {
                    self.prompt_text(&v, scope, depth);
                }
                if v.contains(|c: char| c.is_ascii_alphabetic()) {
                    self.arith(&v, scope, depth + 1);
                }
            }
            scope.unknown(name);
            i = end;
        }
    }
}

fn push_text(t: &mut Text, d: &Text) {
    let at = t.s.len();
    t.s.push_str(&d.s);
    t.expanded |= d.expanded;
    if d.dynamic {
        t.dynamic = true;
        t.dynamic_end = at + d.dynamic_end;
    }
}

#[cfg(test)]
mod tests {
    use super::operator_of;

    #[test]
    fn operators_of_parameter_expansions() {
        assert_eq!(operator_of("x:-sudo"), Some(("x", ":-", "sudo")));
        assert_eq!(operator_of("x-"), Some(("x", "-", "")));
        assert_eq!(operator_of("x:=a b"), Some(("x", ":=", "a b")));
        assert_eq!(operator_of("x:+y"), Some(("x", ":+", "y")));
        assert_eq!(operator_of("x[1]"), None);
        assert_eq!(operator_of("#x"), None);
    }
}
