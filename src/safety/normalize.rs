//! The normaliser: turns a command line (or an argv) into *views*, the
//! lower-case, quote-free strings the filter's patterns are matched against.
//!
//! Each simple command becomes one view: `program args… redirections`, with
//! the program reduced to its base name (`/usr/bin/sudo` → `sudo`) after
//! peeling off wrappers (`env`, `nohup`, `timeout 5`, `xargs`, `exec`, …) and
//! keywords (`if`, `!`, `{`). Each pipeline of two or more commands also
//! becomes a view (`curl … | sh`), as does each assignment (`DOCKER_HOST=…`)
//! and each function definition (for fork bombs). Payloads of `sh -c`,
//! `eval`, `find -exec`, here-strings to a shell and command substitutions are
//! followed recursively. Variables assigned earlier on the same line are
//! substituted (`a=su; b=do; $a$b`), and simple substitutions are evaluated
//! (`$(echo su)do`). A command name that cannot be decided this cheaply is
//! rendered as [`DYNAMIC`], which the default rules block: the filter refuses
//! what it cannot read rather than guessing.

mod commands;
mod words;

use super::expand;
use super::lexer::{self, Sep, Tok};
use words::{Scope, Text, assignment, literal};

/// How an undecidable command name (or anything nested too deeply) appears in a view.
pub const DYNAMIC: &str = "$(?)";
/// How many levels of `sh -c`, `eval` and substitution are followed.
pub const MAX_DEPTH: usize = 8;

/// What the normaliser saw.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Analysis {
    /// Lower-case views, in order, without duplicates.
    pub views: Vec<String>,
    /// A top-level shell reads its commands from the job's stdin (`input`).
    pub stdin_is_script: bool,
}

/// Views of a shell command line (a spec's `shell`).
pub fn line(text: &str, home: Option<&str>) -> Analysis {
    let mut w = Walker::new(home);
    w.line(text, &mut Scope::new(), 0);
    w.done()
}

/// Views of an argv run directly (no shell expands it).
pub fn argv(argv: &[String], home: Option<&str>) -> Analysis {
    let mut w = Walker::new(home);
    let words = argv.iter().map(|a| Text::plain(a)).collect();
    w.simple(words, &[], &[], &mut Scope::new(), 0, true);
    w.done()
}

/// Walks one command line (and what it runs), collecting views.
struct Walker<'a> {
    out: Vec<String>,
    home: Option<&'a str>,
    stdin_is_script: bool,
}

impl<'a> Walker<'a> {
    fn new(home: Option<&'a str>) -> Self {
        Walker {
            out: Vec::new(),
            home,
            stdin_is_script: false,
        }
    }

    fn done(self) -> Analysis {
        Analysis {
            views: self.out,
            stdin_is_script: self.stdin_is_script,
        }
    }

    fn push(&mut self, view: String) {
        let view = view.trim().to_lowercase();
        if !view.is_empty() && !self.out.contains(&view) {
            self.out.push(view);
        }
    }

    /// A simple command's view. A `|` inside an argument (`git commit -m "a | sh"`)
    /// is shown as `¦`, so that only real pipes look like pipes to the rules.
    fn render(&self, name: &str, args: &[Text], redirs: &[String]) -> String {
        let mut v = name.to_string();
        for a in args {
            v.push(' ');
            v.push_str(&expand::clean_path(&a.s, self.home).replace('|', "¦"));
        }
        for r in redirs {
            v.push(' ');
            v.push_str(r);
        }
        v
    }

    fn line(&mut self, text: &str, scope: &mut Scope, depth: usize) {
        if depth > MAX_DEPTH {
            self.push(format!("{DYNAMIC} nested more than {MAX_DEPTH} levels deep"));
            return;
        }
        let toks = lexer::lex(text);
        self.functions(&toks);
        let mut pipeline: Vec<String> = Vec::new();
        let mut cmd: Vec<Tok> = Vec::new();
        let mut first = true;
        for tok in toks.into_iter().chain([Tok::Sep(Sep::List)]) {
            let Tok::Sep(sep) = tok else {
                cmd.push(tok);
                continue;
            };
            let reads_input = first && depth == 0;
            pipeline.extend(self.command(std::mem::take(&mut cmd), scope, depth, reads_input));
            if sep == Sep::Pipe {
                first = false;
                continue;
            }
            if pipeline.len() > 1 {
                self.push(pipeline.join(" | "));
            }
            pipeline.clear();
            first = true;
        }
    }

    /// Function definitions, rendered as `function() BODY` with the
    /// function's own name as `@self@` (the regex engine has no back-references).
    fn functions(&mut self, toks: &[Tok]) {
        for i in 0..toks.len() {
            let open_close = |j: usize| {
                matches!(
                    (toks.get(j), toks.get(j + 1)),
                    (Some(Tok::Sep(Sep::Open)), Some(Tok::Sep(Sep::Close)))
                )
            };
            let (name, start) = match (&toks[i], toks.get(i + 1)) {
                (Tok::Word(w), _) if open_close(i + 1) => (literal(w), i + 3),
                (Tok::Word(f), Some(Tok::Word(n))) if literal(f) == "function" => {
                    (literal(n), if open_close(i + 2) { i + 4 } else { i + 2 })
                }
                _ => continue,
            };
            let mut body = Vec::new();
            for t in &toks[start..] {
                match t {
                    Tok::Word(w) => {
                        let s = literal(w);
                        let core = s.trim_matches(['{', '}']);
                        body.push(if core == name {
                            "@self@".to_string()
                        } else {
                            s.clone()
                        });
                        if s.ends_with('}') {
                            break;
                        }
                    }
                    Tok::Sep(Sep::Pipe) => body.push("|".into()),
                    Tok::Sep(Sep::Amp) => body.push("&".into()),
                    Tok::Sep(Sep::List) => body.push(";".into()),
                    Tok::Sep(Sep::Open) => body.push("(".into()),
                    Tok::Sep(Sep::Close) => body.push(")".into()),
                    Tok::Redir(op) => body.push(op.clone()),
                }
            }
            self.push(format!("function() {}", body.join(" ")));
        }
    }

    /// One simple command's tokens: assignments, words, redirections.
    fn command(
        &mut self,
        toks: Vec<Tok>,
        scope: &mut Scope,
        depth: usize,
        reads_input: bool,
    ) -> Option<String> {
        let mut words = Vec::new();
        let mut redirs = Vec::new();
        let mut it = toks.into_iter().peekable();
        while let Some(t) = it.next() {
            match t {
                Tok::Word(w) => words.push(w),
                Tok::Redir(op) => {
                    let target = match it.next_if(|t| matches!(t, Tok::Word(_))) {
                        Some(Tok::Word(w)) => Some(w),
                        _ => None,
                    };
                    redirs.push((op, target));
                }
                Tok::Sep(_) => {}
            }
        }
        let mut start = 0;
        while let Some((name, value)) = words.get(start).and_then(assignment) {
            let v = self.join(&value, scope, depth);
            self.push(format!("{name}={}", v.s));
            scope.insert(name, v.value());
            start += 1;
        }
        let mut texts = Vec::new();
        for w in &words[start..] {
            texts.extend(self.expand(w, scope, depth));
        }
        let mut rendered = Vec::new();
        let mut here = Vec::new();
        for (op, target) in &redirs {
            let t = target
                .as_ref()
                .map(|w| self.join(w, scope, depth))
                .unwrap_or_default();
            rendered.push(format!("{op} {}", expand::clean_path(&t.s, self.home)));
            if op == "<<<" {
                here.push(t.s);
            }
        }
        self.simple(texts, &rendered, &here, scope, depth, reads_input)
    }
}
