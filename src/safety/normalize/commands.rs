//! Simple commands: peeling wrappers (`env`, `timeout 5`, `xargs`, …) and
//! keywords off the front, and following the commands that run other
//! commands (`sh -c`, `eval`, `find -exec`, `watch`, `trap`, here-strings).

use super::words::{Scope, Text, Val, is_name, program, skip_options};
use super::wrappers::{WRAPPERS, unreadable_script};
use super::{DYNAMIC, MAX_WRAPPERS, Walker};

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "rbash", "yash", "posh", "csh", "tcsh",
];
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc",
];

impl Walker<'_> {
    /// One simple command after expansion: wrappers peeled, payloads followed.
    pub(super) fn simple(
        &mut self,
        words: &[Text],
        redirs: &[String],
        here: &[String],
        scope: &mut Scope,
        depth: usize,
        reads_input: bool,
    ) -> Option<String> {
        let mut w = words;
        let mut peeled = 0;
        while let Some(first) = w.first() {
            let name = program(first);
            if KEYWORDS.contains(&name.as_str()) {
                w = &w[1..];
                // Assignments after a keyword (`do i=$((i+1))`) were not seen as
                // such before the keyword came off: they name no program.
                while let Some(var) = w
                    .first()
                    .and_then(|t| t.s.split_once('='))
                    .map(|(n, _)| n.to_string())
                    .filter(|n| is_name(n))
                {
                    w = &w[1..];
                    scope.insert(var, Val::Unknown);
                }
                continue;
            }
            // `function NAME { BODY`: the body's first command follows.
            if name == "function" {
                w = &w[2.min(w.len())..];
                continue;
            }
            peeled += 1;
            if peeled > MAX_WRAPPERS {
                let v = format!("{DYNAMIC} more than {MAX_WRAPPERS} wrappers");
                self.push(v.clone());
                return Some(v);
            }
            if name == "env" {
                let whole = self.render(&name, &w[1..], redirs);
                self.push(whole.clone());
                w = &w[1..];
                if self.env_options(&mut w, scope, depth) {
                    return Some(whole);
                }
                continue;
            }
            let Some(wrapper) = WRAPPERS.iter().find(|x| x.name == name) else {
                break;
            };
            let whole = self.render(&name, &w[1..], redirs);
            self.push(whole.clone());
            // `command -v sudo` only asks where sudo is.
            if name == "command" && w.get(1).is_some_and(|a| a.s == "-v" || a.s == "-V") {
                return Some(whole);
            }
            w = &w[1..];
            skip_options(&mut w, wrapper.with_value);
            w = &w[wrapper.operands.min(w.len())..];
            // `flock FILE -c STRING`, `runuser -u me -c STRING`: a shell payload.
            if w.first().is_some_and(|a| a.s == "-c" || a.s == "--command") {
                let payload = w.get(1).map(|a| a.s.clone()).unwrap_or_default();
                self.line(&payload, &mut scope.clone(), depth + 1);
                return Some(whole);
            }
        }
        let Some(first) = w.first() else {
            let v = redirs.join(" ");
            self.push(v.clone());
            return (!v.is_empty()).then_some(v);
        };
        // A program this line wrote itself (`printf … > x.sh; ./x.sh`) is unreadable.
        let name = if self.was_written(&first.s) {
            DYNAMIC.to_string()
        } else {
            program(first)
        };
        let args = &w[1..];
        match name.as_str() {
            s if SHELLS.contains(&s) => self.shell(&name, args, redirs, here, scope, depth, reads_input),
            "source" | "." => {
                if let Some(f) = args
                    .first()
                    .filter(|f| unreadable_script(&f.s) || self.was_written(&f.s))
                {
                    self.push(format!("{DYNAMIC} {name} {}", f.s));
                }
            }
            "eval" => {
                let text = args.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1);
            }
            "trap" => {
                if let Some(a) = args.first() {
                    self.line(&a.s, &mut scope.clone(), depth + 1);
                }
            }
            // An alias's value is code (with `shopt -s expand_aliases` it runs).
            "alias" => {
                for a in args {
                    if let Some((_, value)) = a.s.split_once('=') {
                        self.line(value, &mut scope.clone(), depth + 1);
                    }
                }
            }
            // `sg GROUP [-c] STRING`: STRING is a shell payload.
            "sg" => {
                let rest: Vec<&str> = args
                    .iter()
                    .skip(1)
                    .map(|a| a.s.as_str())
                    .filter(|a| *a != "-c")
                    .collect();
                self.line(&rest.join(" "), &mut scope.clone(), depth + 1);
            }
            "watch" | "script" => {
                let mut rest = args;
                skip_options(&mut rest, &["-n", "--interval", "-q", "-t", "-E", "-I", "-O"]);
                let text = rest.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1);
                if let Some(i) = args.iter().position(|a| a.s == "-c" || a.s == "--command") {
                    let payload = args.get(i + 1).map(|a| a.s.clone()).unwrap_or_default();
                    self.line(&payload, &mut scope.clone(), depth + 1);
                }
            }
            "find" => {
                let mut i = 0;
                while i < args.len() {
                    if ["-exec", "-execdir", "-ok", "-okdir"].contains(&args[i].s.as_str()) {
                        let end = (i + 1..args.len())
                            .find(|&j| args[j].s == ";" || args[j].s == "+")
                            .unwrap_or(args.len());
                        self.simple(&args[i + 1..end], &[], &[], &mut scope.clone(), depth + 1, false);
                        i = end;
                    }
                    i += 1;
                }
            }
            "tee" => {
                for a in args.iter().filter(|a| !a.s.starts_with('-')) {
                    self.wrote(&a.s);
                }
            }
            "cp" | "mv" | "install" | "ln" => {
                if let Some(a) = args.last() {
                    self.wrote(&a.s);
                }
            }
            "git" => self.git(args, scope, depth),
            s if s.starts_with("python")
                || [
                    "perl", "ruby", "node", "nodejs", "php", "awk", "gawk", "mawk", "nawk", "sed",
                ]
                .contains(&s) =>
            {
                self.interpreter(s, args, scope, depth)
            }
            "tar" => self.tar(args, scope, depth),
            _ => {}
        }
        let view = self.render(&name, args, redirs);
        self.push(view.clone());
        Some(view)
    }

    /// `env`'s options and assignments; true when `-S` handed the rest to a nested line.
    fn env_options(&mut self, w: &mut &[Text], scope: &mut Scope, depth: usize) -> bool {
        while let Some(a) = w.first().map(|t| t.s.clone()) {
            let split = a.strip_prefix("--split-string=").or_else(|| a.strip_prefix("-S"));
            if let Some(inline) = split.or((a == "--split-string").then_some("")) {
                *w = &w[1..];
                let payload = if inline.is_empty() && !w.is_empty() {
                    let p = w[0].s.clone();
                    *w = &w[1..];
                    p
                } else {
                    inline.to_string()
                };
                // `env -S` has its own quoting and `${VAR}` expansion: the
                // filter reads what it can but does not trust its reading.
                self.push(format!("{DYNAMIC} env -s {payload}"));
                let rest: Vec<String> = w.iter().map(|t| t.s.clone()).collect();
                self.line(
                    &format!("{payload} {}", rest.join(" ")),
                    &mut scope.clone(),
                    depth + 1,
                );
                return true;
            }
            if let Some((n, v)) = a.split_once('=').filter(|(n, _)| is_name(n)) {
                self.push(format!("{n}={v}"));
                scope.insert(n.to_string(), Val::Known(v.to_string()));
            } else if a == "--" {
                *w = &w[1..];
                return false;
            } else if !a.starts_with('-') {
                return false;
            } else if ["-u", "--unset", "-C", "--chdir"].contains(&a.as_str()) && w.len() > 1 {
                *w = &w[1..];
            }
            *w = &w[1..];
        }
        false
    }

    /// A shell: follow `-c PAYLOAD` (with `$0`, `$1`… bound to the operands
    /// after it) or a here-string; note when it reads its script from stdin.
    /// A script file the line wrote, or `/dev/stdin`, is code the filter
    /// cannot read: the command becomes undecided.
    #[allow(clippy::too_many_arguments)]
    fn shell(
        &mut self,
        name: &str,
        args: &[Text],
        redirs: &[String],
        here: &[String],
        scope: &Scope,
        depth: usize,
        reads_input: bool,
    ) {
        let mut i = 0;
        let mut has_c = false;
        while let Some(a) = args.get(i).map(|t| t.s.as_str()) {
            i += 1;
            if a == "--" || a == "-" {
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
            }
        }
        if has_c {
            let Some(payload) = args.get(i) else { return };
            let mut inner = scope.clone();
            let operands = &args[(i + 1).min(args.len())..];
            for (n, t) in operands.iter().enumerate() {
                inner.insert(n.to_string(), t.value());
            }
            let all: Vec<&str> = operands.iter().skip(1).map(|t| t.s.as_str()).collect();
            inner.insert("@".into(), Val::Known(all.join(" ")));
            inner.insert("*".into(), Val::Known(all.join(" ")));
            self.line(&payload.s, &mut inner, depth + 1);
        } else if let Some(file) = args.get(i) {
            if unreadable_script(&file.s)
                || self.was_written(&file.s)
                || (file.dynamic && !file.s.starts_with("<(?)"))
            {
                self.push(format!("{DYNAMIC} {name} {}", file.s));
            }
        } else {
            for h in here {
                self.line(h, &mut scope.clone(), depth + 1);
            }
            let from_written = redirs
                .iter()
                .filter_map(|r| r.strip_prefix("< "))
                .any(|f| unreadable_script(f) || self.was_written(f));
            if from_written {
                self.push(format!("{DYNAMIC} {name} < (a file this line wrote)"));
            }
            self.stdin_is_script |= here.is_empty() && reads_input;
        }
    }
}
