//! Shell builtins and variables that run code or change what the filter
//! knows: `eval`, `source`, `trap`, `alias`, `mapfile -C`; the builtins that
//! set variables (`read`, `printf -v`, `declare`, `export`, `for`, …), whose
//! names stop being literals; `let`, `[[ … -eq … ]]` and subscripts, which
//! are arithmetic; `cd`, which moves where relative paths point; `hash -p`,
//! which renames a program; and the variables other programs run as
//! commands (`PS4`, `PROMPT_COMMAND`, `BASH_ENV`, `GIT_SSH_COMMAND`, `CC`, …).

use super::line::At;
use super::scope::{Scope, Val};
use super::words::{Text, is_name, program};
use super::wrappers::unreadable_script;
use super::{DYNAMIC, Walker};
use crate::safety::expand::clean_path;

/// Variables whose value a shell or a tool runs as a command line.
const COMMAND_VARS: &[&str] = &[
    "prompt_command",
    "git_ssh_command",
    "git_ssh",
    "git_pager",
    "git_editor",
    "git_sequence_editor",
    "git_askpass",
    "ssh_askpass",
    "sudo_askpass",
    "git_external_diff",
    "git_proxy_command",
    "pager",
    "manpager",
    "systemd_pager",
    "editor",
    "visual",
    "lessopen",
    "lessclose",
    "browser",
    "cc",
    "cxx",
    "cpp",
    "ld",
    "ar",
    "rustc",
    "rustc_wrapper",
    "rustc_workspace_wrapper",
    "rustdoc",
    "cargo",
    "make",
    "shell",
    "config_shell",
];

/// Builtins whose operands name variables they set.
const SETTERS: &[&str] = &[
    "read",
    "mapfile",
    "readarray",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "printf",
    "getopts",
    "unset",
    "wait",
    "for",
    "select",
];

impl Walker<'_> {
    /// An assignment `name=value` (`append` for `+=`) in `scope`. The value
    /// is a literal for later commands only when it was assigned
    /// straight-line, whole and decided; variables that make programs run
    /// commands have their values walked as commands.
    pub(super) fn assign(
        &mut self,
        name: &str,
        value: &Text,
        append: bool,
        straight: bool,
        scope: &mut Scope,
        depth: usize,
    ) {
        self.push(format!("{name}={}", value.s));
        let lower = name.to_lowercase();
        let v = value.s.as_str();
        // To an integer variable the value is arithmetic: its subscripts'
        // substitutions run, even from a quoted value.
        if scope.integers && v.contains('[') {
            self.prompt_text(v, scope, depth);
            self.arith(v, scope, depth);
        }
        match lower.as_str() {
            "ps0" | "ps1" | "ps2" | "ps3" | "ps4" => self.prompt_text(v, scope, depth),
            n if COMMAND_VARS.contains(&n) || n.starts_with("git_config_value_") => {
                let cmd = v.trim_start_matches(['|', '-']);
                self.line(cmd, &mut scope.clone(), depth + 1, false);
            }
            "git_config_parameters" => self.git_parameters(v, scope, depth),
            // The file the next non-interactive shell sources first.
            "bash_env" | "env" if !v.is_empty() => {
                if unreadable_script(v) || value.dynamic {
                    self.push(format!("{DYNAMIC} {lower}={v}"));
                } else {
                    // Run by the assignment itself, whose view names it.
                    let mark = self.files.pending_mark();
                    self.files.runs(v);
                    self.files.settle(mark, vec![format!("{name}={v}")]);
                }
            }
            "path" => self.path_changed = true,
            "ifs" => scope.ifs = true,
            _ => {}
        }
        if value.dynamic && COMMAND_VARS.contains(&lower.as_str()) {
            self.push(format!("{DYNAMIC} {lower} is computed at run time"));
        }
        let val = if straight && !append && !value.dynamic {
            Val::Known(value.s.clone())
        } else {
            Val::Unknown
        };
        scope.insert(name.to_string(), val);
    }

    /// The builtins this module knows (`w[0]` is `name`); false for any other command.
    pub(super) fn builtin(&mut self, name: &str, w: &[Text], scope: &mut Scope, at: At) -> bool {
        let args = &w[1..];
        match name {
            "source" | "." => self.source(name, args, scope),
            "eval" => self.eval(args, scope, at),
            "trap" => self.trap(args, scope, at),
            // An alias's value is code (with `shopt -s expand_aliases` it runs).
            "alias" => {
                for a in args {
                    if let Some((n, value)) = a.s.split_once('=') {
                        self.functions.insert(n.to_lowercase());
                        self.line(value, &mut scope.clone(), at.depth + 1, false);
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
                self.line(&rest.join(" "), &mut scope.clone(), at.depth + 1, true);
            }
            // `((…))` was lexed with its substitutions live; `let`'s
            // arguments are expanded again as expressions.
            "((" => self.arith(&w[0].s, scope, at.depth),
            "let" => {
                for a in args {
                    self.prompt_text(&a.s, scope, at.depth);
                    self.arith(&a.s, scope, at.depth);
                }
            }
            "[[" | "test" | "[" => self.test(name, args, scope, at),
            "cd" | "pushd" | "popd" => self.cd(name, args, scope, at),
            "hash" => {
                if let [p, path, names @ ..] = args
                    && p.s == "-p"
                {
                    self.files.runs(&path.s);
                    for n in names {
                        self.renames.insert(n.s.to_lowercase(), program(path));
                    }
                }
            }
            "enable" if args.iter().any(|a| a.s.starts_with("-f")) => {
                self.push(format!("{DYNAMIC} enable loads a builtin from a file"));
            }
            n if SETTERS.contains(&n) => self.setter(name, args, scope, at),
            _ => return false,
        }
        true
    }

    /// `source FILE` (or `. FILE`): FILE is noted as run (`written.rs`);
    /// one the filter cannot name is [`DYNAMIC`].
    fn source(&mut self, name: &str, args: &[Text], scope: &mut Scope) {
        if let Some(f) = args.first() {
            if unreadable_script(&f.s) || (f.dynamic && !f.s.starts_with("<(?)")) {
                self.push(format!("{DYNAMIC} {name} {}", f.s));
            } else {
                self.files.runs(&f.s);
            }
        }
        // A sourced file may set any variable.
        scope.poison();
    }

    /// `eval [--] ARGS…`: the arguments joined by spaces are a command line,
    /// walked in this scope (eval runs in the current shell).
    fn eval(&mut self, args: &[Text], scope: &mut Scope, at: At) {
        let args = match args.first() {
            Some(a) if a.s == "--" => &args[1..],
            _ => args,
        };
        let text = args.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
        if args.iter().any(|a| a.dynamic) {
            scope.poison();
        }
        self.line(&text, scope, at.depth + 1, at.straight);
    }

    /// `trap [-p|-l|-P|--] ACTION SIGNAL…`: ACTION is a command line that
    /// runs later, so it is walked and no variable is known after it.
    fn trap(&mut self, args: &[Text], scope: &mut Scope, at: At) {
        let mut rest = args;
        while rest
            .first()
            .is_some_and(|a| ["--", "-p", "-l", "-P"].contains(&a.s.as_str()))
        {
            rest = &rest[1..];
        }
        if let Some(a) = rest.first() {
            if a.dynamic {
                self.push(format!("{DYNAMIC} trap {}", a.s));
            }
            self.line(&a.s.clone(), scope, at.depth + 1, false);
        }
        // It runs later (at exit, before commands, on signals).
        scope.poison();
    }

    /// A builtin that sets the variables its operands name: they are no
    /// longer literals; a subscript in one is arithmetic (its substitutions
    /// run); `declare -n` makes a name stand for another, so after it no
    /// name is known.
    fn setter(&mut self, name: &str, args: &[Text], scope: &mut Scope, at: At) {
        let declares = ["declare", "typeset", "local", "export", "readonly"].contains(&name);
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let s = a.s.as_str();
            if s.starts_with('-') || s.starts_with('+') {
                if declares && s[1..].contains('n') {
                    scope.poison();
                }
                scope.integers |= declares && s.starts_with('-') && s[1..].contains('i');
                // Options whose value is a name or code.
                match (name, s) {
                    ("mapfile" | "readarray", "-C") => {
                        if let Some(cb) = args.get(i) {
                            self.line(&cb.s.clone(), &mut scope.clone(), at.depth + 1, false);
                            scope.poison();
                        }
                        i += 1;
                    }
                    // `read -a NAME` sets NAME: its value is left to be read as a name.
                    ("read", "-d" | "-n" | "-N" | "-t" | "-u" | "-i" | "-p")
                    | ("mapfile" | "readarray", "-d" | "-n" | "-u" | "-c" | "-O" | "-s") => i += 1,
                    _ => {}
                }
                continue;
            }
            if s.contains(['$', '`', '[']) {
                self.prompt_text(s, scope, at.depth);
                if s.contains('[') {
                    self.arith(s, scope, at.depth);
                }
            }
            match s.split_once('=') {
                Some((n, v)) if declares => {
                    let n = n.split('[').next().unwrap_or(n).trim_end_matches('+');
                    if is_name(n) {
                        let mut value = Text::plain(v);
                        value.dynamic = a.dynamic;
                        self.assign(n, &value, true, false, scope, at.depth);
                    }
                }
                _ => {
                    let n = s.split('[').next().unwrap_or(s);
                    if is_name(n) {
                        scope.unknown(n);
                    }
                }
            }
            // `for NAME in …`: only NAME is set; over literal words (a
            // `tests/*.sh`), which of them is remembered.
            if name == "for" || name == "select" {
                if s.starts_with("((") {
                    self.arith(s, scope, at.depth);
                }
                let words = args.get(i + 1..).unwrap_or_default();
                if is_name(s) && args.get(i).is_some_and(|a| a.s == "in") && words.iter().all(|w| !w.dynamic)
                {
                    scope.loop_over(s, words.iter().map(|w| w.s.clone()).collect());
                }
                break;
            }
        }
    }

    /// `[[ A -eq B ]]` evaluates A and B as arithmetic; `-v NAME[SUB]` (in
    /// `test` and `[` too) evaluates the subscript.
    fn test(&mut self, name: &str, args: &[Text], scope: &mut Scope, at: At) {
        const ARITH: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];
        for (i, a) in args.iter().enumerate() {
            let next_to_arith = name == "[["
                && (args.get(i + 1).is_some_and(|n| ARITH.contains(&n.s.as_str()))
                    || (i > 0 && ARITH.contains(&args[i - 1].s.as_str())));
            let after_v = i > 0 && args[i - 1].s == "-v";
            if next_to_arith || after_v {
                self.prompt_text(&a.s, scope, at.depth);
                self.arith(&a.s, scope, at.depth);
            }
        }
    }

    /// `cd DIR`: relative paths now point under DIR (one of several after a
    /// `cd` in a branch; unknown after `cd "$X"` or `cd -`).
    fn cd(&mut self, name: &str, args: &[Text], scope: &mut Scope, at: At) {
        let target = args.iter().find(|a| !a.s.starts_with('-') || a.s == "-");
        let dirs = match (name, target) {
            // `cd` alone goes home: `~`, or where a `HOME=` on the line says.
            ("cd", None) => match scope.get("HOME") {
                None => Some(vec!["~".to_string()]),
                Some(Val::Known(h)) => Some(vec![clean_path(h, self.home)]),
                Some(Val::Unknown) => None,
            },
            ("popd", _) | (_, None) => None,
            (_, Some(t)) if t.dynamic || t.glob || t.s == "-" => None,
            (_, Some(t)) => {
                let p = clean_path(&t.s, self.home);
                let mut dirs = self.resolve(&p, scope, true);
                // `CDPATH=/ cd etc` may go to `/etc` instead.
                if !p.starts_with(['/', '~', '.'])
                    && let Some(cdpath) = scope.get("CDPATH")
                {
                    match cdpath {
                        Val::Known(v) => dirs.extend(
                            v.split(':')
                                .filter(|d| d.starts_with('/'))
                                .map(|d| clean_path(&format!("{d}/{p}"), self.home)),
                        ),
                        Val::Unknown => dirs.push(p.clone()),
                    }
                }
                dirs.iter()
                    .all(|d| d.starts_with('/') || d.starts_with('~'))
                    .then_some(dirs)
            }
        };
        scope.cd(dirs, at.straight);
    }
}
