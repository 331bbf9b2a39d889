//! Simple commands: peeling wrappers (`env`, `timeout 5`, `xargs`, …) and
//! keywords off the front, and following the commands that run other
//! commands (`sh -c`, `eval`, `find -exec`, `watch`, `trap`, here-strings).

use super::Walker;
use super::words::{Scope, Text, Val, is_name, program, skip_options};

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "rbash", "yash", "posh", "csh", "tcsh",
];
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc",
];

/// A command that runs the rest of its arguments as a command: which of its
/// options take a value, and how many operands come before that command.
struct Wrapper {
    name: &'static str,
    with_value: &'static [&'static str],
    operands: usize,
}

const fn wrapper(name: &'static str, with_value: &'static [&'static str], operands: usize) -> Wrapper {
    Wrapper {
        name,
        with_value,
        operands,
    }
}

const WRAPPERS: &[Wrapper] = &[
    wrapper("command", &[], 0),
    wrapper("builtin", &[], 0),
    wrapper("exec", &["-a"], 0),
    wrapper("nohup", &[], 0),
    wrapper("nice", &["-n", "--adjustment"], 0),
    wrapper(
        "ionice",
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        0,
    ),
    wrapper("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    wrapper("stdbuf", &["-i", "-o", "-e", "--input", "--output", "--error"], 0),
    wrapper(
        "xargs",
        &[
            "-a",
            "-d",
            "-E",
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--replace",
        ],
        0,
    ),
    wrapper("setsid", &[], 0),
    wrapper("busybox", &[], 0),
    wrapper("time", &["-f", "-o", "--format", "--output"], 0),
    wrapper("unbuffer", &[], 0),
];

impl Walker<'_> {
    /// One simple command after expansion: wrappers peeled, payloads followed.
    pub(super) fn simple(
        &mut self,
        mut w: Vec<Text>,
        redirs: &[String],
        here: &[String],
        scope: &mut Scope,
        depth: usize,
        reads_input: bool,
    ) -> Option<String> {
        while let Some(first) = w.first() {
            let name = program(first);
            if KEYWORDS.contains(&name.as_str()) {
                w.remove(0);
                // Assignments after a keyword (`do i=$((i+1))`) were not seen as
                // such before the keyword came off: they name no program.
                while let Some(var) = w
                    .first()
                    .and_then(|t| t.s.split_once('='))
                    .map(|(n, _)| n.to_string())
                    .filter(|n| is_name(n))
                {
                    w.remove(0);
                    scope.insert(var, Val::Unknown);
                }
                continue;
            }
            if name == "env" {
                let whole = self.render(&name, &w[1..], redirs);
                self.push(whole.clone());
                w.remove(0);
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
            w.remove(0);
            skip_options(&mut w, wrapper.with_value);
            for _ in 0..wrapper.operands.min(w.len()) {
                w.remove(0);
            }
        }
        let Some(first) = w.first() else {
            let v = redirs.join(" ");
            self.push(v.clone());
            return (!v.is_empty()).then_some(v);
        };
        let name = program(first);
        let args = &w[1..];
        match name.as_str() {
            s if SHELLS.contains(&s) => self.shell(args, here, scope, depth, reads_input),
            "eval" => {
                let text = args.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1);
            }
            "trap" => {
                if let Some(a) = args.first() {
                    self.line(&a.s, &mut scope.clone(), depth + 1);
                }
            }
            "watch" | "script" => {
                let mut rest = args.to_vec();
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
                        let sub = args[i + 1..end].to_vec();
                        self.simple(sub, &[], &[], &mut scope.clone(), depth + 1, false);
                        i = end;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        let view = self.render(&name, args, redirs);
        self.push(view.clone());
        Some(view)
    }

    /// `env`'s options and assignments; true when `-S` handed the rest to a nested line.
    fn env_options(&mut self, w: &mut Vec<Text>, scope: &mut Scope, depth: usize) -> bool {
        while let Some(a) = w.first().map(|t| t.s.clone()) {
            let split = a.strip_prefix("--split-string=").or_else(|| a.strip_prefix("-S"));
            if let Some(inline) = split.or((a == "--split-string").then_some("")) {
                w.remove(0);
                let payload = if inline.is_empty() && !w.is_empty() {
                    w.remove(0).s
                } else {
                    inline.to_string()
                };
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
                w.remove(0);
                return false;
            } else if !a.starts_with('-') {
                return false;
            } else if ["-u", "--unset", "-C", "--chdir"].contains(&a.as_str()) && w.len() > 1 {
                w.remove(0);
            }
            w.remove(0);
        }
        false
    }

    /// A shell: follow `-c PAYLOAD` (with `$0`, `$1`… bound to the operands
    /// after it) or a here-string; note when it reads its script from stdin.
    fn shell(&mut self, args: &[Text], here: &[String], scope: &Scope, depth: usize, reads_input: bool) {
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
        } else if i >= args.len() {
            for h in here {
                self.line(h, &mut scope.clone(), depth + 1);
            }
            self.stdin_is_script |= here.is_empty() && reads_input;
        }
    }
}
