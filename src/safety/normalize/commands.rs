//! Simple commands: peeling wrappers (`env`, `timeout 5`, `xargs`,
//! `setarch`, `start-stop-daemon`, …) and keywords off the front, then
//! handing the command to what knows it: shells (`sh -c`, and where a
//! shell reads its script from), builtins (`builtins.rs`), programs that run
//! commands from their arguments (`payloads.rs`) and interpreters
//! (`code.rs`). Every simple command ends as one view.

use std::ops::ControlFlow;

use super::line::At;
use super::scope::{Scope, Val};
use super::words::{Text, is_name, program, skip_options};
use super::wrappers::{Wrapper, unreadable_script, wrapper_named};
use super::{DYNAMIC, MAX_WRAPPERS, Walker};

pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "rbash", "yash", "posh", "csh", "tcsh",
];
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc",
];

/// How a command came to be run, as far as its stdin and arguments go.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Via {
    /// `xargs`/`parallel` append arguments read from stdin.
    pub(super) stdin_args: bool,
    /// `coproc`: its stdin is a pipe from this shell.
    pub(super) coproc: bool,
}

/// What peeling the wrappers off a command gathered.
#[derive(Default)]
struct Peeled {
    /// The wrappers' own views: the files the command touches settle with them.
    own: Vec<String>,
    via: Via,
    /// After `env` (a program, not a builtin) nothing touches this shell.
    local: Option<Scope>,
}

impl Walker<'_> {
    /// One simple command after expansion: wrappers peeled, payloads followed.
    pub(super) fn simple(
        &mut self,
        words: &[Text],
        redirs: &[String],
        here: &[String],
        scope: &mut Scope,
        at: At,
    ) -> Option<String> {
        let pending = self.files.pending_mark();
        let mut peeled = Peeled::default();
        let w = match self.peel(words, redirs, scope, at, &mut peeled) {
            ControlFlow::Continue(w) => w,
            ControlFlow::Break(view) => return view,
        };
        let Peeled {
            mut own,
            via,
            mut local,
        } = peeled;
        let sc: &mut Scope = match local.as_mut() {
            Some(l) => l,
            None => scope,
        };
        let Some(first) = w.first() else {
            let v = redirs.join(" ");
            self.push(v.clone());
            return (!v.is_empty()).then_some(v);
        };
        let name = self.program_name(first);
        let args = &w[1..];
        self.runs_program(first, &name);
        // Where relative paths point for this command (before a `cd` moves it).
        let resolved = self.resolved_views(&name, args, redirs, sc);
        if SHELLS.contains(&name.as_str()) {
            self.shell(&name, args, redirs, here, sc, at, via);
        } else if !self.builtin(&name, w, sc, at) {
            self.program(&name, args, sc, at);
        }
        // A function or alias the line defined may change any variable.
        if self.functions.contains(&name) {
            sc.poison();
        }
        let view = self.render(&name, args, redirs);
        self.push(view.clone());
        own.push(view.clone());
        if self.captured && view.contains(".sock") {
            self.push(format!("¦ {view}"));
        }
        for view in resolved {
            self.push(view.clone());
            own.push(view);
        }
        self.files.settle(pending, own);
        Some(view)
    }

    /// Peel keywords and wrappers off the front of `words`: the command
    /// they run (`Continue`), or the whole command's view when a wrapper
    /// ended it (`Break`: a nested line took the rest, `command -v`, too
    /// many wrappers).
    fn peel<'w>(
        &mut self,
        words: &'w [Text],
        redirs: &[String],
        scope: &mut Scope,
        at: At,
        p: &mut Peeled,
    ) -> ControlFlow<Option<String>, &'w [Text]> {
        let mut w = words;
        let mut peeled = 0;
        while let Some(first) = w.first() {
            let name = self.program_name(first);
            if KEYWORDS.contains(&name.as_str()) && !first.quoted && !first.expanded {
                w = past_keyword(&name, &w[1..], scope, &mut p.via);
                continue;
            }
            peeled += 1;
            if peeled > MAX_WRAPPERS {
                let v = format!("{DYNAMIC} more than {MAX_WRAPPERS} wrappers");
                self.push(v.clone());
                return ControlFlow::Break(Some(v));
            }
            let whole = self.render(&name, &w[1..], redirs);
            if name == "env" {
                self.push(whole.clone());
                p.own.push(whole.clone());
                w = &w[1..];
                let child = p.local.get_or_insert_with(|| scope.clone());
                if self.env_options(&mut w, child, at.depth) {
                    return ControlFlow::Break(Some(whole));
                }
                continue;
            }
            if let Some(rest) = self.special_wrapper(&name, &w[1..], redirs, scope, at) {
                self.push(whole.clone());
                p.own.push(whole);
                p.via.stdin_args |= name == "parallel";
                match rest {
                    Some(rest) => {
                        w = rest;
                        continue;
                    }
                    None => return ControlFlow::Break(None),
                }
            }
            let Some(wrapper) = wrapper_named(&name) else {
                break;
            };
            self.push(whole.clone());
            p.own.push(whole.clone());
            p.via.stdin_args |= name == "xargs";
            w = self.past_wrapper(wrapper, w, whole, redirs, scope, at)?;
        }
        ControlFlow::Continue(w)
    }

    /// A wrapper of the table (`WRAPPERS`) with its options and operands
    /// skipped: the command it runs, or its own view when it runs a shell
    /// payload (`-c`) or only asks where a program is (`command -v`).
    fn past_wrapper<'w>(
        &mut self,
        wrapper: &Wrapper,
        mut w: &'w [Text],
        whole: String,
        redirs: &[String],
        scope: &Scope,
        at: At,
    ) -> ControlFlow<Option<String>, &'w [Text]> {
        let name = wrapper.name;
        // `command -v sudo` only asks where sudo is.
        if name == "command" && w.get(1).is_some_and(|a| a.s == "-v" || a.s == "-V") {
            return ControlFlow::Break(Some(whole));
        }
        // `exec <FILE` with no command: the script's stdin is no longer the job's input.
        if name == "exec" && w.len() == 1 && redirs.iter().any(|r| r.starts_with('<') && !r.starts_with("<<"))
        {
            self.stdin_moved = true;
        }
        w = &w[1..];
        skip_options(&mut w, wrapper.with_value);
        w = &w[wrapper.operands.min(w.len())..];
        // `setarch ARCH -R cmd`: options may follow the operands too.
        skip_options(&mut w, wrapper.with_value);
        // `flock FILE -c STRING`, `runuser -u me -c STRING`: a shell payload.
        if w.first().is_some_and(|a| a.s == "-c" || a.s == "--command") {
            match w.get(1) {
                Some(p) if !p.dynamic => self.line(&p.s.clone(), &mut scope.clone(), at.depth + 1, true),
                _ => self.push(format!(
                    "{DYNAMIC} {name} -c with a payload the filter cannot read"
                )),
            }
            return ControlFlow::Break(Some(whole));
        }
        ControlFlow::Continue(w)
    }

    /// The program a word names, after `hash -p` renames.
    fn program_name(&self, t: &Text) -> String {
        let name = program(t);
        match self.renames.get(&name) {
            Some(to) => to.clone(),
            None => name,
        }
    }

    /// `env`'s options and assignments (for the command only, in `child`);
    /// true when `-S` handed the rest to a nested line.
    fn env_options(&mut self, w: &mut &[Text], child: &mut Scope, depth: usize) -> bool {
        while let Some(a) = w.first().map(|t| t.s.clone()) {
            // `-S STRING`, `-SSTRING`, `-iS STRING`, `--split-string[=]STRING`.
            let short_s = (a.starts_with('-') && !a.starts_with("--"))
                .then(|| a.find('S').map(|k| a[k + 1..].to_string()))
                .flatten();
            let split = a
                .strip_prefix("--split-string=")
                .map(str::to_string)
                .or(short_s)
                .or((a == "--split-string").then(String::new));
            if let Some(inline) = split {
                *w = &w[1..];
                let payload = if inline.is_empty() && !w.is_empty() {
                    let p = w[0].s.clone();
                    *w = &w[1..];
                    p
                } else {
                    inline
                };
                // `env -S` has its own quoting and `${VAR}` expansion: the
                // filter reads what it can but does not trust its reading.
                self.push(format!("{DYNAMIC} env -s {payload}"));
                let rest: Vec<String> = w.iter().map(|t| t.s.clone()).collect();
                self.line(
                    &format!("{payload} {}", rest.join(" ")),
                    &mut child.clone(),
                    depth + 1,
                    true,
                );
                return true;
            }
            if let Some((n, v)) = a.split_once('=').filter(|(n, _)| is_name(n)) {
                let value = Text::plain(v);
                self.assign(n, &value, false, true, child, depth);
            } else if a == "--" {
                *w = &w[1..];
                return false;
            } else if !a.starts_with('-') {
                return false;
            } else if ["-u", "--unset", "-C", "--chdir", "-a", "--argv0"].contains(&a.as_str()) && w.len() > 1
            {
                *w = &w[1..];
            }
            *w = &w[1..];
        }
        false
    }

    /// A shell: follow `-c PAYLOAD` (with `$0`, `$1`… bound to the operands
    /// after it) or a here-string, and decide where a shell without either
    /// reads its script: the job's own input (checked as the script), a
    /// file (the workspace's, unless this line wrote it), or anything else
    /// (a pipe, a coprocess, a process substitution, `/dev/stdin`, another
    /// descriptor), which is code the filter cannot read.
    #[allow(clippy::too_many_arguments)]
    fn shell(
        &mut self,
        name: &str,
        args: &[Text],
        redirs: &[String],
        here: &[String],
        scope: &Scope,
        at: At,
        via: Via,
    ) {
        let mut i = 0;
        let mut has_c = false;
        // `-s`: the script is stdin, the operands are its arguments.
        let mut has_s = false;
        while let Some(a) = args.get(i).map(|t| t.s.as_str()) {
            i += 1;
            if a == "--" || a == "-" {
                has_s |= a == "-";
                break;
            }
            if ["-o", "+o", "-O", "+O", "--rcfile", "--init-file"].contains(&a) {
                i += 1;
            } else if a == "--command" || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('c'))
            {
                has_c = true;
            } else if !(a.len() > 1 && (a.starts_with('-') || a.starts_with('+'))) {
                i -= 1;
                break;
            } else if a.starts_with('-') && !a.starts_with("--") && a[1..].contains('s') {
                has_s = true;
            }
        }
        if has_c {
            let Some(payload) = args.get(i) else {
                // `xargs sh -c`: the payload comes from stdin.
                if via.stdin_args {
                    self.push(format!("{DYNAMIC} {name} -c with its code from stdin"));
                }
                return;
            };
            let mut inner = scope.clone();
            let operands = &args[(i + 1).min(args.len())..];
            for (n, t) in operands.iter().enumerate() {
                inner.insert(n.to_string(), t.value());
            }
            let all: Vec<&str> = operands.iter().skip(1).map(|t| t.s.as_str()).collect();
            let rest = if via.stdin_args || operands.iter().any(|t| t.dynamic) {
                Val::Unknown
            } else {
                Val::Known(all.join(" "))
            };
            inner.insert("@".into(), rest.clone());
            inner.insert("*".into(), rest);
            if payload.dynamic {
                self.push(format!("{DYNAMIC} {name} -c {}", payload.s));
            }
            self.line(&payload.s, &mut inner, at.depth + 1, true);
        } else if let Some(file) = args.get(i).filter(|_| !has_s) {
            let unknown = file.dynamic && !file.s.starts_with("<(?)") && !via.stdin_args;
            if let Some(files) = file.loop_words.as_ref().filter(|_| file.s == DYNAMIC) {
                // `for f in tests/*.sh; do bash "$f"; done`: the loop's files.
                for f in files.iter() {
                    self.files.runs(f);
                }
            } else if unreadable_script(&file.s) || unknown {
                self.push(format!("{DYNAMIC} {name} {}", file.s));
            } else {
                self.files.runs(&file.s);
            }
        } else if !here.is_empty() {
            for h in here {
                self.line(h, &mut scope.clone(), at.depth + 1, true);
            }
        } else {
            self.stdin_script(name, redirs, at, via);
        }
    }

    /// A shell with no `-c`, script file or here-document reads its script
    /// from stdin: where does that come from?
    fn stdin_script(&mut self, name: &str, redirs: &[String], at: At, via: Via) {
        let from_file = redirs.iter().rev().find_map(|r| {
            r.strip_prefix("< ")
                .or_else(|| r.strip_prefix("<> "))
                .map(|f| Some(f.to_string()))
                .or_else(|| (r.starts_with("<&") && r != "<&0").then_some(None))
        });
        match from_file {
            Some(Some(f)) if !(unreadable_script(&f) || f.contains("<(?)") || f.contains(DYNAMIC)) => {
                self.files.runs(&f);
            }
            Some(_) => self.push(format!(
                "{DYNAMIC} {name} reads its script from a stream the filter cannot read"
            )),
            // `xargs sh`: the script's name comes from stdin (data, like a loop variable).
            None if via.stdin_args => {}
            None if at.reads_input && !via.coproc => self.stdin_is_script = true,
            // A pipe, a coprocess, a process substitution: shown as data
            // piped into a shell (the rules for downloads and decoded data
            // piped into one still name those first).
            None => self.push(format!("| {name}")),
        }
    }
}

/// The words after a keyword (`!`, `if`, `{` …): for `coproc NAME { …; }`,
/// NAME is the coprocess's name, not a command, and the command's stdin is
/// a pipe from this shell.
fn past_keyword<'w>(keyword: &str, mut w: &'w [Text], scope: &mut Scope, via: &mut Via) -> &'w [Text] {
    if keyword == "coproc" {
        via.coproc = true;
        if w.len() > 1 && w[1].s == "{" && is_name(&w[0].s) {
            scope.unknown(&w[0].s);
            w = &w[1..];
        }
    }
    w
}
