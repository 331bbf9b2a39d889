//! Words after expansion: what a brace list, a variable or a substitution
//! becomes (as far as the filter can tell cheaply), and the small helpers the
//! normaliser uses to read words (assignments, option skipping, program names).
//!
//! Brace expansion works on the whole word (quoted parts and expansions are
//! fixed pieces, see `expand/braces.rs`), and each part of a word is
//! resolved once however many words the braces make of it: a substitution
//! inside `{a..p}$(…)` is walked once, not sixteen times per level.

use super::scope::{Scope, Val};
use super::{DYNAMIC, MAX_DEPTH, MAX_OUTPUT, Walker};
use crate::safety::expand::{self, braces::Piece};
use crate::safety::lexer::{self, Part, Sep, Tok, Word};

/// A word after expansion.
#[derive(Debug, Clone, Default)]
pub(super) struct Text {
    pub(super) s: String,
    /// Holds something not evaluated (`$(…)` the filter could not run), or
    /// something whose value depends on more than literal assignments.
    pub(super) dynamic: bool,
    /// Has an unquoted glob character.
    pub(super) glob: bool,
    /// Came (partly) from a variable or substitution: subject to word splitting.
    pub(super) expanded: bool,
    /// Where the last undecided part ends in `s`: a `/` after it means the
    /// base name is still known (`$(pwd)/run.sh`).
    pub(super) dynamic_end: usize,
    /// Has a part that is not plain unquoted text (quotes, an escape, an
    /// expansion): never a reserved word (`\do`, `'if'`, `$(echo do)` run
    /// programs of those names).
    pub(super) quoted: bool,
    /// The whole word is a `for` loop's variable over these literal words.
    pub(super) loop_words: Option<std::rc::Rc<Vec<String>>>,
}

impl Text {
    pub(super) fn plain(s: &str) -> Self {
        Text {
            s: s.to_string(),
            ..Default::default()
        }
    }
    /// Append a part the filter could not evaluate, shown as `marker`.
    pub(super) fn undecided(&mut self, marker: &str) {
        self.s.push_str(marker);
        self.mark_dynamic();
    }
    /// What is in `s` so far depends on something the filter cannot vouch for.
    pub(super) fn mark_dynamic(&mut self) {
        self.dynamic = true;
        self.dynamic_end = self.s.len();
    }
    /// Append another resolved piece of the same word.
    fn append(&mut self, other: &Text) {
        let at = self.s.len();
        self.s.push_str(&other.s);
        if other.dynamic {
            self.dynamic = true;
            self.dynamic_end = at + other.dynamic_end;
        }
        self.glob |= other.glob;
        self.expanded |= other.expanded;
    }
    fn lit(&mut self, s: &str) {
        self.glob |= s.contains(['*', '?', '[']);
        self.s.push_str(s);
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

/// An assignment word: the name, the value's parts, and whether it was `+=`.
pub(super) struct Assignment {
    pub(super) name: String,
    pub(super) value: Word,
    pub(super) append: bool,
}

/// `NAME=value`, `NAME+=value` or `NAME[sub]=value` at the start of a word.
pub(super) fn assignment(w: &Word) -> Option<Assignment> {
    let Some(Part::Lit(first)) = w.0.first() else {
        return None;
    };
    let (name, rest) = first.split_once('=')?;
    let (name, append) = match name.strip_suffix('+') {
        Some(n) => (n, true),
        None => (name, false),
    };
    // `a[$(…)]=x`: the subscript is arithmetic, the name is `a`, its value unknown.
    let (name, subscript) = match name.split_once('[') {
        Some((n, _)) if name.ends_with(']') => (n, true),
        _ => (name, false),
    };
    if !is_name(name) {
        return None;
    }
    let mut value = Word::default();
    if !rest.is_empty() {
        value.0.push(Part::Lit(rest.to_string()));
    }
    value.0.extend(w.0[1..].iter().cloned());
    Some(Assignment {
        name: name.to_string(),
        value,
        append: append || subscript,
    })
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
        if !self.tick() {
            return vec![self.dynamic()];
        }
        let braced = w.0.iter().any(|p| matches!(p, Part::Lit(s) if s.contains('{')));
        let texts = if braced {
            match self.brace_words(w, scope, depth) {
                Some(t) => t,
                None => return vec![self.dynamic()],
            }
        } else {
            vec![self.join(w, scope, depth)]
        };
        let mut out = Vec::new();
        // A word brace expansion made is never a reserved word (a lone `{`
        // expands to nothing else and stays one).
        let made = texts.len() > 1;
        for mut t in texts {
            t.quoted |= made;
            // With IFS changed, how an expansion splits is unknown.
            if scope.ifs && t.expanded {
                t.mark_dynamic();
            }
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

    /// The words brace expansion makes of `w`, each part resolved once.
    fn brace_words(&mut self, w: &Word, scope: &mut Scope, depth: usize) -> Option<Vec<Text>> {
        let mut pieces = Vec::new();
        for (i, p) in w.0.iter().enumerate() {
            match p {
                Part::Lit(s) => pieces.extend(s.chars().map(Piece::Live)),
                _ => pieces.push(Piece::Fixed(i)),
            }
        }
        let words = expand::braces::expand(&pieces)?;
        let cost = (words.len() * pieces.len()) as u64;
        if !self.budget.charge(cost / 64 + 1) {
            self.incomplete = true;
            return None;
        }
        let mut parts: Vec<Option<Text>> = vec![None; w.0.len()];
        let mut out = Vec::new();
        for word in words {
            let mut t = Text::default();
            let mut run = String::new();
            for p in word {
                match p {
                    Piece::Live(c) => run.push(c),
                    Piece::Fixed(i) => {
                        t.lit(&std::mem::take(&mut run));
                        if parts[i].is_none() {
                            let mut part = Text::default();
                            self.join_part(&mut part, &w.0[i], scope, depth);
                            parts[i] = Some(part);
                        }
                        if let Some(part) = &parts[i] {
                            t.append(part);
                        }
                    }
                }
            }
            t.lit(&run);
            out.push(t);
        }
        Some(out)
    }

    pub(super) fn dynamic(&self) -> Text {
        let mut t = Text::default();
        t.undecided(DYNAMIC);
        t
    }

    /// A word's parts resolved into one text (no splitting).
    pub(super) fn join(&mut self, w: &Word, scope: &mut Scope, depth: usize) -> Text {
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
            self.join_part(&mut t, p, scope, depth);
        }
        t
    }

    /// One part of a word, resolved onto the end of `t`.
    fn join_part(&mut self, t: &mut Text, p: &Part, scope: &mut Scope, depth: usize) {
        t.quoted |= !matches!(p, Part::Lit(_));
        match p {
            Part::Lit(s) => t.lit(s),
            Part::Quoted(s) => t.s.push_str(s),
            Part::Var(name) => self.var(t, scope, name, None),
            Part::Complex(c) => self.complex(t, c, scope, depth),
            Part::Subst(inner) => {
                if !self.scratch {
                    let captured = std::mem::replace(&mut self.captured, true);
                    self.line(inner, &mut scope.clone(), depth + 1, true);
                    self.captured = captured;
                }
                match self.output_of(inner, scope, depth + 1) {
                    Some(v) => {
                        t.s.push_str(v.trim_end_matches('\n'));
                        t.expanded = true;
                    }
                    None => t.undecided(DYNAMIC),
                }
            }
            Part::Proc(inner) => {
                if !self.scratch {
                    self.line(inner, &mut scope.clone(), depth + 1, true);
                }
                t.undecided("<(?)");
            }
        }
    }

    /// What a command substitution prints, when that is cheap to know:
    /// `echo`/`printf` of known words, optionally through `base64 -d`/`rev`.
    pub(super) fn output_of(&mut self, inner: &str, scope: &Scope, depth: usize) -> Option<String> {
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
        // double the work). It shares this check's budget.
        let mut scratch = self.scratch_walker();
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
            // A glob is expanded before the program sees it: only one that
            // matches the engine's socket is known to print that path.
            let mut args = Vec::new();
            for t in &texts[1..] {
                if t.glob {
                    args.push(expand::engine_socket_glob(&t.s)?.to_string());
                } else {
                    args.push(t.s.clone());
                }
            }
            out = match (n, program(&texts[0]).as_str()) {
                (0, "echo") => expand::echo(&args),
                (0, "printf") => expand::printf(&args)?,
                // `$(which python3)`: some path ending in the name asked
                // for, one line per name (`$(which sudo ls)` is two words).
                (0, "which") => which(&args)?,
                (0, "pwd") => self.cwd_of(scope)?,
                (0, "command") if args.first().is_some_and(|a| a == "-v") => which(&args)?,
                (0, _) => return None,
                (_, p) => expand::filter(p, &args, &out)?,
            };
        }
        Some(out)
    }
}

/// What `which`/`command -v` with `args` may print: each name asked for,
/// one a line (a name it does not find prints nothing; seeing it anyway
/// only makes the filter stricter).
fn which(args: &[String]) -> Option<String> {
    let names: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    (!names.is_empty()).then(|| names.join("\n"))
}
