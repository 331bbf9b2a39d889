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
//! (`$(echo su)do`). A command name that cannot be decided this cheaply (a
//! variable not assigned on the line, a `{}`/`$1`/`"$@"` placeholder, a
//! script file the line itself wrote, `/dev/stdin`, `env -S`) is rendered as
//! [`DYNAMIC`], which the default rules block: the filter refuses what it
//! cannot read rather than guessing. Here-document bodies are data, except
//! for the substitutions of an unquoted one and the script of a shell.
//!
//! # Cost
//! Every step is linear in the input: each token is visited a bounded number
//! of times (nesting is capped at [`MAX_DEPTH`], wrappers at [`MAX_WRAPPERS`],
//! variables at `words::MAX_VARS`), views are de-duplicated through a hash
//! set, and the total output is capped at [`MAX_OUTPUT`] bytes. Past the
//! depth, wrapper, variable and brace caps what is left is undecided
//! ([`DYNAMIC`]); a walk that reaches the output cap or its deadline stops
//! and reports itself [`incomplete`](Analysis::incomplete), and the filter
//! then refuses the command.

mod commands;
mod payloads;
mod words;
mod wrappers;

use super::deadline::Deadline;
use std::collections::HashSet;

use super::expand;
use super::lexer::{self, Sep, Tok};
use words::{Scope, Text, Val, assignment, literal};

/// How an undecidable command name (or anything nested too deeply) appears in a view.
pub const DYNAMIC: &str = "$(?)";
/// How many levels of `sh -c`, `eval` and substitution are followed.
pub const MAX_DEPTH: usize = 8;
/// How many wrappers (`nohup nice timeout 5 …`) are peeled off one command.
pub const MAX_WRAPPERS: usize = 16;
/// Most bytes of views (and of one expanded word) a walk may produce.
pub const MAX_OUTPUT: usize = 1 << 20;

/// What the normaliser saw.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Analysis {
    /// Lower-case views, in order, without duplicates.
    pub views: Vec<String>,
    /// A top-level shell reads its commands from the job's stdin (`input`).
    pub stdin_is_script: bool,
    /// The walk stopped early (deadline or output cap): the views are partial.
    pub incomplete: bool,
}

/// Views of a shell command line (a spec's `shell`).
pub fn line(text: &str, home: Option<&str>) -> Analysis {
    line_with(text, home, &[], None)
}

/// Views of a shell command line whose environment holds `env` (known
/// values for `$NAME`), stopping at `deadline`.
pub fn line_with(
    text: &str,
    home: Option<&str>,
    env: &[(String, String)],
    deadline: Option<Deadline>,
) -> Analysis {
    let mut w = Walker::new(home, deadline);
    let mut scope = Scope::new();
    for (k, v) in env {
        scope.insert(k.clone(), Val::Known(v.clone()));
    }
    w.line(text, &mut scope, 0);
    w.done()
}

/// Views of an argv run directly (no shell expands it).
pub fn argv(argv: &[String], home: Option<&str>) -> Analysis {
    let mut w = Walker::new(home, None);
    let words: Vec<Text> = argv.iter().map(|a| Text::plain(a)).collect();
    w.simple(&words, &[], &[], &mut Scope::new(), 0, true);
    w.done()
}

/// Walks one command line (and what it runs), collecting views.
struct Walker<'a> {
    out: Vec<String>,
    seen: HashSet<String>,
    home: Option<&'a str>,
    stdin_is_script: bool,
    /// Files the line writes (redirection targets, `tee`, `cp` …): running
    /// one of them runs code the filter never saw.
    written: HashSet<String>,
    /// Bytes of views so far.
    bytes: usize,
    steps: usize,
    deadline: Option<Deadline>,
    incomplete: bool,
    /// A scratch walker (evaluating a substitution) does not walk nested lines again.
    scratch: bool,
}

impl<'a> Walker<'a> {
    fn new(home: Option<&'a str>, deadline: Option<Deadline>) -> Self {
        Walker {
            out: Vec::new(),
            seen: HashSet::new(),
            home,
            stdin_is_script: false,
            written: HashSet::new(),
            bytes: 0,
            steps: 0,
            deadline,
            incomplete: false,
            scratch: false,
        }
    }

    fn done(self) -> Analysis {
        Analysis {
            views: self.out,
            stdin_is_script: self.stdin_is_script,
            incomplete: self.incomplete,
        }
    }

    /// One unit of work; false (and the walk marked incomplete) once the
    /// deadline has passed. The clock is read every 256 steps.
    fn tick(&mut self) -> bool {
        self.steps += 1;
        if self.steps.is_multiple_of(256)
            && let Some(d) = self.deadline
            && d.passed()
        {
            self.incomplete = true;
        }
        !self.incomplete
    }

    fn push(&mut self, view: String) {
        let view = view.trim().to_lowercase();
        if view.is_empty() || self.seen.contains(&view) {
            return;
        }
        self.bytes += view.len();
        if self.bytes > MAX_OUTPUT {
            self.incomplete = true;
            return;
        }
        self.seen.insert(view.clone());
        self.out.push(view);
    }

    /// A simple command's view. A `|` inside an argument (`git commit -m "a | sh"`)
    /// is shown as `¦`, so that only real pipes look like pipes to the rules.
    fn render(&self, name: &str, args: &[Text], redirs: &[String]) -> String {
        let mut v = name.to_string();
        for a in args {
            v.push(' ');
            v.push_str(&expand::clean_path(&a.s, self.home).replace('|', "¦"));
            // A glob that would match the engine's socket names it.
            if a.glob
                && let Some(sock) = expand::engine_socket_glob(&a.s)
            {
                v.push(' ');
                v.push_str(sock);
            }
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
        if !self.tick() {
            return;
        }
        let toks = lexer::lex(text);
        self.functions(&toks);
        let mut pipeline: Vec<String> = Vec::new();
        let mut cmd: Vec<Tok> = Vec::new();
        let mut first = true;
        for tok in toks.into_iter().chain([Tok::Sep(Sep::List)]) {
            if !self.tick() {
                return;
            }
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
    /// function's own name as `@self@` (the regex engine has no
    /// back-references). One pass: each token goes to the innermost open
    /// body only, so nested or unclosed definitions cost no more than the line.
    fn functions(&mut self, toks: &[Tok]) {
        let open_close = |j: usize| {
            matches!(
                (toks.get(j), toks.get(j + 1)),
                (Some(Tok::Sep(Sep::Open)), Some(Tok::Sep(Sep::Close)))
            )
        };
        // (name, body so far)
        let mut open: Vec<(String, Vec<String>)> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let def = match (&toks[i], toks.get(i + 1)) {
                (Tok::Word(w), _) if open_close(i + 1) => Some((literal(w), i + 3)),
                (Tok::Word(f), Some(Tok::Word(n))) if literal(f) == "function" => {
                    Some((literal(n), if open_close(i + 2) { i + 4 } else { i + 2 }))
                }
                _ => None,
            };
            if let Some((name, start)) = def {
                open.push((name, Vec::new()));
                i = start;
                continue;
            }
            i += 1;
            let Some((name, body)) = open.last_mut() else {
                continue;
            };
            let mut closes = false;
            body.push(match &toks[i - 1] {
                Tok::Word(w) => {
                    let s = literal(w);
                    closes = s.ends_with('}');
                    if s.trim_matches(['{', '}']) == name {
                        "@self@".to_string()
                    } else {
                        s
                    }
                }
                Tok::Sep(Sep::Pipe) => "|".into(),
                Tok::Sep(Sep::Amp) => "&".into(),
                Tok::Sep(Sep::List) => ";".into(),
                Tok::Sep(Sep::Open) => "(".into(),
                Tok::Sep(Sep::Close) => ")".into(),
                Tok::Redir(op) => op.clone(),
                Tok::Heredoc { .. } => "<<(here-document)".into(),
            });
            if closes && let Some((_, body)) = open.pop() {
                self.push(format!("function() {}", body.join(" ")));
            }
        }
        for (_, body) in open {
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
        let mut heredocs = Vec::new();
        let mut it = toks.into_iter().peekable();
        while let Some(t) = it.next() {
            match t {
                Tok::Word(w) => words.push(w),
                Tok::Redir(op) => match it.next_if(|t| matches!(t, Tok::Word(_) | Tok::Heredoc { .. })) {
                    Some(Tok::Word(w)) => redirs.push((op, Some(w))),
                    Some(Tok::Heredoc { body, expand }) => heredocs.push((body, expand)),
                    _ => redirs.push((op, None)),
                },
                Tok::Sep(_) | Tok::Heredoc { .. } => {}
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
            let path = expand::clean_path(&t.s, self.home);
            if op.contains('>') {
                self.wrote(&path);
            }
            rendered.push(format!("{op} {path}"));
            if op == "<<<" {
                here.push(t.s);
            }
        }
        // A here-document is data; an unquoted one's substitutions still run.
        for (body, expand) in heredocs {
            here.push(if expand {
                self.join(&lexer::lex_quoted(&body), scope, depth + 1).s
            } else {
                body
            });
        }
        self.simple(&texts, &rendered, &here, scope, depth, reads_input)
    }

    /// Remember a file this line writes.
    fn wrote(&mut self, path: &str) {
        let p = path.strip_prefix("./").unwrap_or(path);
        if !p.is_empty() && self.written.len() < 1024 {
            self.written.insert(p.to_string());
        }
    }

    /// Whether `path` is a file this line wrote (so its content is unknown).
    fn was_written(&self, path: &str) -> bool {
        let p = path.strip_prefix("./").unwrap_or(path);
        self.written.contains(p)
    }
}
