//! One command line: its tokens grouped into simple commands and
//! pipelines, the control flow the filter needs to know which assignments
//! are straight-line (not in a loop, branch, subshell, pipeline, background
//! job or after `&&`/`||`), function definitions (for fork bombs, and so a
//! call to one counts as running unknown code), and each simple command's
//! assignments, redirections and here-documents.

use std::collections::HashSet;

use super::scope::Scope;
use super::words::{Assignment, Text, assignment, literal};
use super::{DYNAMIC, MAX_DEPTH, Walker};
use crate::safety::expand;
use crate::safety::lexer::{self, Part, Sep, Tok, Word, is_dup};

/// Where a simple command sits.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    /// Nesting (`sh -c`, `eval`, substitutions).
    pub(super) depth: usize,
    /// Runs exactly once, in order, in this shell: its assignments stick.
    pub(super) straight: bool,
    /// Its stdin is the job's own input (first command of a top-level pipeline).
    pub(super) reads_input: bool,
}

/// Words that open and close compound commands.
const OPENERS: &[&str] = &["if", "while", "until", "for", "select", "case", "{"];
const CLOSERS: &[&str] = &["fi", "done", "esac", "}"];
/// Keywords that neither open nor close.
const MIDDLES: &[&str] = &["then", "else", "elif", "do", "!", "time"];

/// One open compound command.
struct Frame {
    /// A `case` (whose patterns end in `)`).
    case: bool,
    /// Opened right after a `|`: its commands read that pipe.
    piped: bool,
}

/// The compound commands open at a point of a line.
#[derive(Default)]
struct Flow {
    open: Vec<Frame>,
    /// The next command runs or not depending on the last (`&&`, `||`).
    conditional: bool,
}

impl Flow {
    /// Keywords at the front of a command's tokens (`piped`: the command
    /// reads a pipe); returns how many words they are.
    fn keywords(&mut self, toks: &[Tok], piped: bool) -> usize {
        let mut n = 0;
        while let Some(Tok::Word(w)) = toks.get(n) {
            // A quoted or escaped word is never a keyword (`\do` runs `do`).
            if !w.0.iter().all(|p| matches!(p, Part::Lit(_))) {
                break;
            }
            let k = literal(w);
            if OPENERS.contains(&k.as_str()) {
                self.open.push(Frame {
                    case: k == "case",
                    piped,
                });
                // `for NAME in …`, `case WORD in`: the rest is not keywords.
                if !["{", "if", "while", "until"].contains(&k.as_str()) {
                    return n;
                }
            } else if k == "function" {
                // `function NAME [()] {`: the name is not a command.
                n += 2;
                continue;
            } else if k == "time" {
                // `time -p CMD`.
                n += 1;
                if matches!(toks.get(n), Some(Tok::Word(p)) if literal(p) == "-p") {
                    n += 1;
                }
                continue;
            } else if CLOSERS.contains(&k.as_str()) {
                self.open.pop();
            } else if !MIDDLES.contains(&k.as_str()) {
                break;
            }
            n += 1;
        }
        n.min(toks.len())
    }

    /// Some open compound reads a pipe.
    fn piped(&self) -> bool {
        self.open.iter().any(|f| f.piped)
    }
}

/// A compound command on the line has its stdin redirected (`{ sh; } < f`,
/// `( … ) <<EOF`, `done < f`): a shell inside may be reading that.
fn group_input(toks: &[Tok]) -> bool {
    toks.windows(2).any(|w| {
        let closes = match &w[0] {
            Tok::Sep(Sep::Close) => true,
            Tok::Word(x) => CLOSERS.contains(&literal(x).as_str()),
            _ => false,
        };
        closes && matches!(&w[1], Tok::Redir(op) if op.starts_with('<'))
    })
}

impl Walker<'_> {
    /// Walk a command line. `straight`: the line itself runs straight
    /// through (a script, `eval` in straight-line code), rather than later
    /// or conditionally (`trap`, an alias).
    pub(super) fn line(&mut self, text: &str, scope: &mut Scope, depth: usize, straight: bool) {
        if depth > MAX_DEPTH {
            self.push(format!("{DYNAMIC} nested more than {MAX_DEPTH} levels deep"));
            return;
        }
        // Lexing is linear in the text; it is paid for up front.
        if !self.tick() || !self.budget.charge(text.len() as u64 / 16) {
            self.incomplete = true;
            return;
        }
        let mut toks = lexer::lex(text);
        let definitions = self.functions(&toks);
        let group_input = group_input(&toks);
        toks.push(Tok::Sep(Sep::List));
        let mut flow = Flow::default();
        let mut pipeline: Vec<String> = Vec::new();
        let mut cmd: Vec<Tok> = Vec::new();
        let mut first = true;
        for (i, tok) in toks.into_iter().enumerate() {
            if !self.tick() {
                return;
            }
            let Tok::Sep(sep) = tok else {
                cmd.push(tok);
                continue;
            };
            let skip = flow.keywords(&cmd, !first);
            let in_pipe = !first || sep == Sep::Pipe;
            let at = At {
                depth,
                straight: straight
                    && flow.open.is_empty()
                    && !flow.conditional
                    && !in_pipe
                    && sep != Sep::Amp,
                reads_input: first && depth == 0 && !self.stdin_moved && !flow.piped() && !group_input,
            };
            let words = std::mem::take(&mut cmd);
            // `f` of `f() {…}` is a definition, not a call.
            if !definitions.contains(&i) {
                pipeline.extend(self.command(words, skip, scope, at));
            }
            match sep {
                Sep::Open => flow.open.push(Frame {
                    case: false,
                    piped: !first,
                }),
                // A `case` pattern's `)` closes nothing.
                Sep::Close if !flow.open.last().is_some_and(|f| f.case) => {
                    flow.open.pop();
                }
                _ => {}
            }
            if sep == Sep::Pipe {
                first = false;
                continue;
            }
            flow.conditional = sep == Sep::AndOr;
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
    /// body only, so nested or unclosed definitions cost no more than the
    /// line. Returns the indices of the separators right after a defined
    /// name (`f` `(`), so the walk does not take the name for a call.
    fn functions(&mut self, toks: &[Tok]) -> HashSet<usize> {
        let open_close = |j: usize| {
            matches!(
                (toks.get(j), toks.get(j + 1)),
                (Some(Tok::Sep(Sep::Open)), Some(Tok::Sep(Sep::Close)))
            )
        };
        let mut names_at = HashSet::new();
        // (name, body so far)
        let mut open: Vec<(String, Vec<String>)> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            if !self.tick() {
                return names_at;
            }
            let def = match (&toks[i], toks.get(i + 1)) {
                (Tok::Word(w), _) if open_close(i + 1) => {
                    names_at.insert(i + 1);
                    // The `)` right after: its command is empty anyway.
                    Some((literal(w), i + 3))
                }
                (Tok::Word(f), Some(Tok::Word(n))) if literal(f) == "function" => {
                    Some((literal(n), if open_close(i + 2) { i + 4 } else { i + 2 }))
                }
                _ => None,
            };
            if let Some((name, start)) = def {
                if self.functions.len() < 1024 {
                    self.functions.insert(name.to_lowercase());
                }
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
                Tok::Sep(Sep::AndOr) => "&&".into(),
                Tok::Sep(Sep::Open) => "(".into(),
                Tok::Sep(Sep::Close) => ")".into(),
                Tok::Redir(op) => op.clone(),
                Tok::Heredoc { .. } => "<<(here-document)".into(),
                Tok::Unreadable => DYNAMIC.into(),
            });
            if closes && let Some((_, body)) = open.pop() {
                self.push(format!("function() {}", body.join(" ")));
            }
        }
        for (_, body) in open {
            self.push(format!("function() {}", body.join(" ")));
        }
        names_at
    }

    /// One simple command's tokens (after `skip` keyword words):
    /// assignments, words, redirections.
    fn command(&mut self, toks: Vec<Tok>, skip: usize, scope: &mut Scope, at: At) -> Option<String> {
        let mut words = Vec::new();
        let mut redirs = Vec::new();
        let mut heredocs = Vec::new();
        let mut it = toks.into_iter().peekable();
        while let Some(t) = it.next() {
            match t {
                Tok::Word(w) => words.push(w),
                Tok::Redir(op) if is_dup(&op) => redirs.push((op, None)),
                Tok::Redir(op) => match it.next_if(|t| matches!(t, Tok::Word(_) | Tok::Heredoc { .. })) {
                    Some(Tok::Word(w)) => redirs.push((op, Some(w))),
                    Some(Tok::Heredoc { body, expand }) => heredocs.push((body, expand)),
                    _ => redirs.push((op, None)),
                },
                Tok::Unreadable => self.push(format!("{DYNAMIC} the rest of the line is not read")),
                Tok::Sep(_) | Tok::Heredoc { .. } => {}
            }
        }
        let words = &words[skip.min(words.len())..];
        let mut start = 0;
        let mut prefix: Vec<(Assignment, Text)> = Vec::new();
        while let Some(a) = words.get(start).and_then(assignment) {
            let v = self.join(&a.value, scope, at.depth);
            prefix.push((a, v));
            start += 1;
        }
        let mut texts = Vec::new();
        for w in &words[start..] {
            texts.extend(self.expand(w, scope, at.depth));
        }
        // After an assignment no word is a keyword (`x=1 do` runs `do`).
        if let Some(first) = texts.first_mut().filter(|_| start > 0) {
            first.quoted = true;
        }
        let rendered = self.redirections(&redirs, scope, at.depth);
        let mut here = Vec::new();
        for (op, target) in &redirs {
            if op == "<<<"
                && let Some(w) = target
            {
                here.push(self.join(w, scope, at.depth).s);
            }
        }
        // A here-document is data; an unquoted one's substitutions still run.
        for (body, expand) in heredocs {
            here.push(if expand {
                self.join(&lexer::lex_quoted(&body), scope, at.depth + 1).s
            } else {
                body
            });
        }
        if texts.is_empty() {
            // Assignments alone: they stay in this shell.
            for (a, v) in &prefix {
                self.assign(&a.name, v, a.append, at.straight, scope, at.depth);
            }
            return self.simple(&[], &rendered, &here, scope, at);
        }
        // Assignments before a command are its environment: the words were
        // expanded without them, what the command runs sees them, and after
        // it the shell may or may not keep them.
        let mut child = scope.clone();
        for (a, v) in &prefix {
            self.assign(&a.name, v, a.append, true, &mut child, at.depth);
        }
        let view = self.simple(&texts, &rendered, &here, &mut child, at);
        *scope = child;
        for (a, _) in &prefix {
            scope.unknown(&a.name);
        }
        view
    }

    /// Redirections rendered as `OP PATH` (paths resolved); output targets
    /// are files this line writes.
    fn redirections(
        &mut self,
        redirs: &[(String, Option<Word>)],
        scope: &mut Scope,
        depth: usize,
    ) -> Vec<String> {
        let mut rendered = Vec::new();
        for (op, target) in redirs {
            let Some(w) = target else {
                // Only an input duplication (`<&3`) matters to what runs.
                if op.starts_with('<') {
                    rendered.push(op.clone());
                }
                continue;
            };
            let t = self.join(w, scope, depth);
            if op == "<<<" {
                rendered.push(format!("{op} {}", t.s));
                continue;
            }
            let clean = expand::clean_path(&t.s, self.home);
            for path in self.resolve(&clean, scope, false) {
                // A link made on the line: the write goes where it points.
                let path = self
                    .links
                    .get(path.strip_prefix("./").unwrap_or(&path))
                    .cloned()
                    .unwrap_or(path);
                if op.contains('>') {
                    self.files.wrote(&path);
                }
                rendered.push(format!("{op} {path}"));
            }
        }
        rendered
    }
}
