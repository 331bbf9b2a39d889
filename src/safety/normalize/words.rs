//! Words after expansion: what a variable, a substitution or a brace list
//! becomes (as far as the filter can tell cheaply), and the small helpers the
//! normaliser uses to read words (assignments, option skipping, program names).

use std::collections::HashMap;
use std::rc::Rc;

use super::{DYNAMIC, MAX_DEPTH, MAX_OUTPUT, Walker};
use crate::safety::expand;
use crate::safety::lexer::{self, Part, Sep, Tok, Word};

/// What a variable holds, as far as the filter knows.
#[derive(Debug, Clone)]
pub(super) enum Val {
    Known(String),
    Unknown,
}

/// Most variables a scope tracks; past that every unknown name is undecided.
pub(super) const MAX_VARS: usize = 256;
/// Longest value a variable is known to hold; longer ones are undecided
/// (`a=$a$a` doubling would otherwise grow without bound).
pub(super) const MAX_VALUE: usize = 4096;

/// Variables assigned so far on this line (and `$0`, `$1`… inside `sh -c`).
/// Cloning is cheap (shared until written): every substitution and nested
/// line gets its own copy, and a deep copy per copy would make the walk
/// quadratic.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    vars: Rc<HashMap<String, Val>>,
    /// More than [`MAX_VARS`] names were assigned: unknown names are undecided.
    full: bool,
}

impl Scope {
    pub(super) fn new() -> Self {
        Scope::default()
    }

    pub(super) fn insert(&mut self, name: String, val: Val) {
        let val = match val {
            Val::Known(v) if v.len() > MAX_VALUE => Val::Unknown,
            v => v,
        };
        if self.vars.len() >= MAX_VARS && !self.vars.contains_key(&name) {
            self.full = true;
            return;
        }
        Rc::make_mut(&mut self.vars).insert(name, val);
    }

    pub(super) fn get(&self, name: &str) -> Option<&Val> {
        const UNKNOWN: &Val = &Val::Unknown;
        self.vars.get(name).or(self.full.then_some(UNKNOWN))
    }
}

/// A word after expansion.
#[derive(Debug, Clone, Default)]
pub(super) struct Text {
    pub(super) s: String,
    /// Holds something not evaluated (`$(…)` the filter could not run).
    pub(super) dynamic: bool,
    /// Has an unquoted glob character.
    pub(super) glob: bool,
    /// Came (partly) from a variable or substitution: subject to word splitting.
    pub(super) expanded: bool,
    /// Where the last undecided part ends in `s`: a `/` after it means the
    /// base name is still known (`$(pwd)/run.sh`).
    pub(super) dynamic_end: usize,
}

impl Text {
    pub(super) fn plain(s: &str) -> Self {
        Text {
            s: s.to_string(),
            ..Default::default()
        }
    }
    /// Append a part the filter could not evaluate, shown as `marker`.
    fn undecided(&mut self, marker: &str) {
        self.s.push_str(marker);
        self.dynamic = true;
        self.dynamic_end = self.s.len();
    }
    pub(super) fn value(&self) -> Val {
        if self.dynamic {
            Val::Unknown
        } else {
            Val::Known(self.s.clone())
        }
    }
}

/// The program name a word stands for: its lower-case base name, or
/// [`DYNAMIC`] when a glob or an undecided part makes that name unknown.
pub(super) fn program(t: &Text) -> String {
    // `(( … ))` is arithmetic, not a program (its substitutions were walked).
    if t.s.starts_with("((") {
        return "((".to_string();
    }
    // `{}` is a placeholder (xargs -I{}, find -exec, parallel): whatever fills it runs.
    if (t.glob && t.s != "[" && t.s != "[[") || t.s == "{}" {
        return DYNAMIC.to_string();
    }
    let slash = t.s.rfind('/').filter(|&i| i + 1 < t.s.len());
    // A computed directory with a literal name (`$(pwd)/run.sh`) still names the program.
    if t.dynamic && slash.is_none_or(|i| i < t.dynamic_end) {
        return DYNAMIC.to_string();
    }
    slash.map_or(&t.s[..], |i| &t.s[i + 1..]).to_lowercase()
}

pub(super) fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=value` at the start of a word, split into the name and the value's parts.
pub(super) fn assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Lit(first)) = w.0.first() else {
        return None;
    };
    let (name, rest) = first.split_once('=')?;
    let name = name.strip_suffix('+').unwrap_or(name);
    if !is_name(name) {
        return None;
    }
    let mut value = Word::default();
    if !rest.is_empty() {
        value.0.push(Part::Lit(rest.to_string()));
    }
    value.0.extend(w.0[1..].iter().cloned());
    Some((name.to_string(), value))
}

/// `NAME:-word`, `NAME-word`, `NAME:=word`, `NAME=word` (the body of `${…}`)
/// as the name and its default.
pub(super) fn default_of(body: &str) -> Option<(&str, &str)> {
    let end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, rest) = body.split_at(end);
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let default = rest.strip_prefix('-').or_else(|| rest.strip_prefix('='))?;
    is_name(name).then_some((name, default))
}

/// The literal text of a word, expansions shown as written.
pub(super) fn literal(w: &Word) -> String {
    w.0.iter()
        .map(|p| match p {
            Part::Lit(s) | Part::Quoted(s) => s.clone(),
            Part::Var(n) => format!("${n}"),
            _ => DYNAMIC.to_string(),
        })
        .collect()
}

/// Drop leading options (and the values of those in `with_value`).
pub(super) fn skip_options(w: &mut &[Text], with_value: &[&str]) {
    while let Some(a) = w.first().map(|t| t.s.as_str()) {
        if a == "--" {
            *w = &w[1..];
            break;
        }
        if !(a.starts_with('-') && a.len() > 1) {
            break;
        }
        let takes_value = with_value.contains(&a);
        *w = &w[1..];
        if takes_value && !w.is_empty() {
            *w = &w[1..];
        }
    }
}

impl Walker<'_> {
    /// A word, brace-expanded and word-split: possibly several words.
    pub(super) fn expand(&mut self, w: &Word, scope: &mut Scope, depth: usize) -> Vec<Text> {
        let mut variants = vec![w.clone()];
        if let Some(i) =
            w.0.iter()
                .position(|p| matches!(p, Part::Lit(s) if s.contains('{')))
        {
            let Part::Lit(s) = &w.0[i] else { unreachable!() };
            match expand::braces(s) {
                Some(alts) => {
                    variants = alts
                        .into_iter()
                        .map(|a| {
                            let mut v = w.clone();
                            v.0[i] = Part::Lit(a);
                            v
                        })
                        .collect()
                }
                None => return vec![self.dynamic()],
            }
        }
        if !self.tick() {
            return vec![self.dynamic()];
        }
        let mut out = Vec::new();
        for v in &variants {
            let t = self.join(v, scope, depth);
            if t.expanded && !t.dynamic && t.s.contains(char::is_whitespace) {
                out.extend(t.s.split_whitespace().map(|s| Text {
                    s: s.to_string(),
                    expanded: true,
                    glob: t.glob,
                    ..Default::default()
                }));
            } else {
                out.push(t);
            }
        }
        out
    }

    pub(super) fn dynamic(&self) -> Text {
        let mut t = Text::default();
        t.undecided(DYNAMIC);
        t
    }

    /// A word's parts resolved into one text (no splitting).
    pub(super) fn join(&mut self, w: &Word, scope: &Scope, depth: usize) -> Text {
        let mut t = Text::default();
        if depth > MAX_DEPTH {
            t.undecided(DYNAMIC);
            return t;
        }
        for p in &w.0 {
            if t.s.len() > MAX_OUTPUT || !self.tick() {
                self.incomplete = true;
                t.undecided(DYNAMIC);
                return t;
            }
            match p {
                Part::Lit(s) => {
                    t.glob |= s.contains(['*', '?', '[']);
                    t.s.push_str(s);
                }
                Part::Quoted(s) => t.s.push_str(s),
                Part::Var(name) => var(&mut t, scope, name, None),
                // `${NAME:-word}` and friends: the default when NAME is not
                // known here. Any other `${…}` or `$((…))` is not evaluated,
                // but the substitutions inside it run, so they are walked.
                Part::Complex(c) => match default_of(c) {
                    Some((name, default)) => {
                        let d = self.join(&lexer::lex_quoted(default), scope, depth + 1);
                        var(&mut t, scope, name, Some(&d));
                    }
                    None => {
                        self.join(&lexer::lex_quoted(c), scope, depth + 1);
                        t.undecided(DYNAMIC);
                    }
                },
                Part::Subst(inner) => {
                    if !self.scratch {
                        self.line(inner, &mut scope.clone(), depth + 1);
                    }
                    match self.eval(inner, scope, depth + 1) {
                        Some(v) => {
                            t.s.push_str(v.trim_end_matches('\n'));
                            t.expanded = true;
                        }
                        None => t.undecided(DYNAMIC),
                    }
                }
                Part::Proc(inner) => {
                    if !self.scratch {
                        self.line(inner, &mut scope.clone(), depth + 1);
                    }
                    t.undecided("<(?)");
                }
            }
        }
        t
    }

    /// What a command substitution prints, when that is cheap to know:
    /// `echo`/`printf` of known words, optionally through `base64 -d`/`rev`.
    pub(super) fn eval(&mut self, inner: &str, scope: &Scope, depth: usize) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut stages: Vec<Vec<Word>> = vec![Vec::new()];
        let toks = lexer::lex(inner);
        let last_word = toks.iter().rposition(|t| matches!(t, Tok::Word(_)))?;
        for (i, tok) in toks.into_iter().enumerate() {
            match tok {
                Tok::Word(w) => stages.last_mut()?.push(w),
                Tok::Sep(Sep::Pipe) => stages.push(Vec::new()),
                Tok::Sep(Sep::List) if i > last_word => {}
                _ => return None,
            }
        }
        // A scratch walker: the views of these words were already collected,
        // and it must not walk their substitutions again (each level would
        // double the work).
        let mut scratch = Walker::new(self.home, self.deadline);
        scratch.scratch = true;
        let mut out = String::new();
        for (n, stage) in stages.iter().enumerate() {
            let mut texts = Vec::new();
            for w in stage {
                texts.extend(scratch.expand(w, &mut scope.clone(), depth));
            }
            if scratch.incomplete {
                self.incomplete = true;
            }
            if texts.is_empty() || texts.iter().any(|t| t.dynamic) || out.len() > MAX_OUTPUT {
                return None;
            }
            let args: Vec<String> = texts[1..].iter().map(|t| t.s.clone()).collect();
            out = match (n, program(&texts[0]).as_str()) {
                (0, "echo") => expand::echo(&args),
                (0, "printf") => expand::printf(&args)?,
                // `$(which python3)`: some path ending in the name asked for.
                (0, "which") => args.iter().rfind(|a| !a.starts_with('-'))?.clone(),
                (0, "command") if args.first().is_some_and(|a| a == "-v") => args.last()?.clone(),
                (0, _) => return None,
                (_, p) => expand::filter(p, &args, &out)?,
            };
        }
        Some(out)
    }
}

/// `$name` (or `${name:-default}`) appended to `t`: its value when the line
/// assigned it, `~` for `$HOME`, a blank for `$IFS`; otherwise the default,
/// or the name marked undecided (a program name from the caller's
/// environment is one the filter cannot read).
fn var(t: &mut Text, scope: &Scope, name: &str, default: Option<&Text>) {
    match scope.get(name) {
        Some(Val::Known(v)) => {
            t.s.push_str(v);
            t.expanded = true;
        }
        Some(Val::Unknown) => t.undecided(DYNAMIC),
        None if name == "HOME" => t.s.push('~'),
        None if name == "IFS" => {
            t.s.push(' ');
            t.expanded = true;
        }
        None => match default {
            Some(d) if d.dynamic => t.undecided(DYNAMIC),
            Some(d) => {
                t.s.push_str(&d.s);
                t.expanded |= d.expanded;
            }
            None => {
                t.s.push('$');
                t.s.push_str(name);
                t.dynamic = true;
                t.dynamic_end = t.s.len();
            }
        },
    }
}
