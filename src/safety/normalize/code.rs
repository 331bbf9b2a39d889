//! Inline code handed to interpreters (`python -c`, `perl -e`, `ruby -e`,
//! `node -e`, `php -r`, `lua -e`, `awk`, `sed`): the commands it runs are
//! walked as command lines, and code that runs a command the filter cannot
//! read is a `dynamic command`. A call that runs a command (`os.system`,
//! `subprocess.run`, `os.exec*`, `system`/`exec`/`qx`/backticks,
//! `child_process.execSync`, awk's `system()` and pipes, sed's `e`, …) must
//! have literal arguments (a string, or a list of strings); one built at run
//! time (`'su' + 'do'`, a variable, an f-string, interpolation), a runner
//! named without being called (`f = os.system`, `getattr(os, 'system')`,
//! `send(:system)`, `$f(…)`), and `eval`/`exec` of computed code are
//! refused. Script files an interpreter runs count as files run (see
//! `written.rs`). Code that never runs a command is data to the filter:
//! file writes from inside an interpreter are not seen (SECURITY.md).

mod awk_sed;
mod strings;
mod tables;

use super::scope::Scope;
use super::words::Text;
use super::{DYNAMIC, MAX_DEPTH, Walker};
use strings::{Arg, Lang, call_args, identifiers, literal, quoted, skip_expression};
use tables::{INTERPRETERS, Kind, OPAQUE, calls};

impl Walker<'_> {
    /// An interpreter (`name`) with `args`: its inline code, or its script file.
    pub(super) fn interpreter(&mut self, name: &str, args: &[Text], scope: &Scope, depth: usize) {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        match base {
            "awk" | "gawk" | "mawk" | "nawk" => return self.awk(args, scope, depth),
            "sed" | "gsed" => return self.sed(args, scope, depth),
            _ => {}
        }
        let Some(&(_, lang, letters, with_value)) = INTERPRETERS.iter().find(|i| i.0 == base) else {
            return;
        };
        let mut code = Vec::new();
        let mut script = None;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let s = a.s.as_str();
            if let Some(v) = s.strip_prefix("--eval=").or(s.strip_prefix("--print=")) {
                code.push(v.to_string());
            } else if s == "--eval" || s == "--print" {
                code.extend(args.get(i).map(|c| c.s.clone()));
                i += 1;
            } else if let Some(m) = s
                .strip_prefix("-m")
                .filter(|_| lang == Lang::Python && code.is_empty())
            {
                // `python -m NAME` runs the file NAME.py (or the package's
                // NAME/__main__.py) found in the working directory first.
                let module = if m.is_empty() {
                    args.get(i).map(|a| a.s.as_str())
                } else {
                    Some(m)
                };
                if let Some(f) = module.map(|m| m.replace('.', "/")) {
                    self.files.runs(&format!("{f}.py"));
                    self.files.runs(&format!("{f}/__main__.py"));
                }
                return;
            } else if let Some(cluster) = s
                .strip_prefix('-')
                .filter(|c| !c.is_empty() && !c.starts_with('-'))
            {
                // `-c CODE`, `-cCODE`, `-ne CODE`, `-pi.bak -e CODE` (perl's
                // `-i` takes the rest of its cluster as a suffix).
                for (k, c) in cluster.char_indices() {
                    if lang == Lang::Perl && c == 'i' {
                        break;
                    }
                    if letters.contains(c) {
                        let rest = &cluster[k + 1..];
                        if rest.is_empty() {
                            code.extend(args.get(i).map(|c| c.s.clone()));
                            i += 1;
                        } else {
                            code.push(rest.to_string());
                        }
                        break;
                    }
                }
                if with_value.contains(&s) {
                    i += 1;
                }
            } else if !s.starts_with('-') && code.is_empty() {
                script = Some(s.to_string());
                break;
            }
        }
        if code.is_empty() {
            if let Some(f) = script {
                self.files.runs(&f);
            }
            return;
        }
        for c in code {
            self.code(lang, &c, scope, depth);
        }
    }

    /// The commands `code` (in `lang`) runs.
    fn code(&mut self, lang: Lang, code: &str, scope: &Scope, depth: usize) {
        if depth > MAX_DEPTH {
            self.push(format!("{DYNAMIC} code nested more than {MAX_DEPTH} levels deep"));
            return;
        }
        if !self.budget.charge(code.len() as u64 / 16) {
            self.incomplete = true;
            return;
        }
        let reach = Reach::new(lang, code);
        let mut unreadable = Vec::new();
        for (start, end) in identifiers(code, lang) {
            if !self.tick() {
                return;
            }
            let name = &code[start..end];
            let before = code[..start].trim_end();
            // Perl's `qx{…}`, Ruby's `%x(…)`: a literal that runs.
            if (lang == Lang::Perl && name == "qx")
                || (lang == Lang::Ruby && name == "x" && before.ends_with('%'))
            {
                let at = if name == "x" { start - 1 } else { start };
                match literal(&code[at..], lang) {
                    Some((Some(cmd), _)) => self.line(&cmd, &mut scope.clone(), depth + 1, true),
                    _ => unreadable.push(name.to_string()),
                }
                continue;
            }
            if OPAQUE.contains(&(lang, name)) {
                unreadable.push(name.to_string());
                continue;
            }
            if let Some(kind) = reach.runner(name, before)
                && !self.runner_call(lang, kind, &code[end..], scope, depth)
            {
                unreadable.push(name.to_string());
            }
        }
        // Backticks run commands in Perl, Ruby and PHP.
        if matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php) {
            self.backticks(lang, code, scope, depth, &mut unreadable);
        }
        unreadable.extend(runners_named_in_strings(lang, code, reach.table));
        if lang == Lang::Php && code.contains('$') && php_variable_call(code) {
            unreadable.push("$function(…)".into());
        }
        unreadable.sort();
        unreadable.dedup();
        for name in unreadable {
            self.push(format!("{DYNAMIC} {name}(…) runs code the filter cannot read"));
        }
    }

    /// The call after a runner's name (`after`): walk what it runs; false
    /// when its arguments are computed.
    fn runner_call(&mut self, lang: Lang, kind: Kind, after: &str, scope: &Scope, depth: usize) -> bool {
        // Perl's and Ruby's block forms (`eval { … }`) are not strings.
        if kind == Kind::Eval && after.trim_start().starts_with(['{']) {
            return true;
        }
        if kind == Kind::Open {
            return self.perl_open(after, scope, depth);
        }
        match call_args(after, lang) {
            Some(args) => {
                self.run_call(lang, kind, &args, scope, depth);
                true
            }
            None => false,
        }
    }

    /// One call with literal arguments: walk what it runs.
    fn run_call(&mut self, lang: Lang, kind: Kind, args: &[Arg], scope: &Scope, depth: usize) {
        let flat: Vec<String> = args
            .iter()
            .flat_map(|a| match a {
                Arg::Str(s) => vec![s.clone()],
                Arg::List(l) => l.clone(),
            })
            .collect();
        let line = match kind {
            Kind::Eval => {
                for c in &flat {
                    self.code(lang, c, scope, depth + 1);
                }
                return;
            }
            Kind::Shell => match args {
                [Arg::Str(s), ..] if !matches!(args.get(1), Some(Arg::Str(_))) => s.clone(),
                _ => quoted(&flat),
            },
            Kind::Exec => {
                let mut argv = flat.clone();
                if argv.len() > 1 {
                    argv.remove(1);
                }
                quoted(&argv)
            }
            Kind::Spawn | Kind::Open => quoted(&flat),
        };
        self.line(&line, &mut scope.clone(), depth + 1, true);
    }

    /// Perl's `open(FH, MODE, …)` after its name: walk the command of a
    /// pipe open; false when the mode or command is computed.
    fn perl_open(&mut self, after: &str, scope: &Scope, depth: usize) -> bool {
        let t = after.trim_start();
        let paren = t.starts_with('(');
        let rest = skip_expression(if paren { &t[1..] } else { t });
        let Some(rest) = rest.strip_prefix(',') else {
            // One argument: the mode is in a variable of the same name.
            return false;
        };
        let rest = rest.trim_start();
        let Some((Some(mode), len)) = literal(rest, Lang::Perl) else {
            return false;
        };
        let mode = mode.trim();
        if mode == "-|" || mode == "|-" {
            let args = if paren {
                format!("({}", &rest[len..].trim_start().trim_start_matches(','))
            } else {
                rest[len..].trim_start().trim_start_matches(',').to_string()
            };
            return match call_args(&args, Lang::Perl) {
                Some(args) => {
                    self.run_call(Lang::Perl, Kind::Shell, &args, scope, depth);
                    true
                }
                None => false,
            };
        }
        if mode.starts_with('|') || mode.ends_with('|') {
            self.line(mode.trim_matches('|'), &mut scope.clone(), depth + 1, true);
        }
        true
    }

    /// `` `cmd` `` literals in Perl, Ruby and PHP code.
    fn backticks(
        &mut self,
        lang: Lang,
        code: &str,
        scope: &Scope,
        depth: usize,
        unreadable: &mut Vec<String>,
    ) {
        let mut rest = code;
        while let Some(k) = rest.find('`') {
            let after = &rest[k + 1..];
            let Some(end) = after.find('`') else { break };
            let cmd = &after[..end];
            let interpolates = match lang {
                Lang::Ruby => cmd.contains("#{"),
                _ => cmd.contains(['$', '@']),
            };
            if interpolates {
                unreadable.push("`…`".into());
            } else {
                self.line(cmd, &mut scope.clone(), depth + 1, true);
            }
            rest = &after[end + 1..];
        }
    }
}

/// What `code` says about how its runners are reached, read once before
/// its identifiers are: a name in the table is a runner only when called
/// on the object that has it.
struct Reach {
    lang: Lang,
    table: &'static [(&'static str, Kind)],
    /// Node runs commands only through child_process (or a binding to it).
    node_spawns: bool,
    /// Python imports from `subprocess` or `pty`: a bare `run(…)` may be theirs.
    python_bare_run: bool,
    /// Python's local names of runner modules (`import subprocess as sp`).
    modules: Vec<String>,
    /// Python's runners imported under another name.
    renamed: Vec<String>,
}

impl Reach {
    fn new(lang: Lang, code: &str) -> Reach {
        let (modules, renamed) = if lang == Lang::Python {
            python_imports(code)
        } else {
            Default::default()
        };
        Reach {
            lang,
            table: calls(lang),
            node_spawns: lang != Lang::Node || code.contains("child_process") || code.contains("binding"),
            python_bare_run: code.contains("from subprocess import") || code.contains("from pty import"),
            modules,
            renamed,
        }
    }

    /// The kind of runner the identifier `name` (after the code `before`
    /// it) is, if it is one.
    fn runner(&self, name: &str, before: &str) -> Option<Kind> {
        let kind = match self.table.iter().find(|(n, _)| *n == name) {
            Some(&(_, kind)) => kind,
            // `from os import system as s`: `s` is that runner.
            None if self.renamed.iter().any(|r| r == name) => Kind::Shell,
            None => return None,
        };
        let qualifier = before.strip_suffix('.').map(|q| {
            q.trim_end()
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or(")")
        });
        // A method of that name on some other object (`app.run()`,
        // `regex.exec(s)`) is not a runner.
        let runner = match (self.lang, name, qualifier) {
            (Lang::Python, "run" | "call" | "spawn", Some(q)) => {
                ["subprocess", "pty", ")"].contains(&q) || self.modules.iter().any(|m| m == q)
            }
            (Lang::Python, "run" | "call" | "spawn", None) => self.python_bare_run,
            (Lang::Python, "exec" | "eval" | "compile", Some(_)) => false,
            (Lang::Node, _, _) if kind != Kind::Eval => self.node_spawns,
            (Lang::Lua, "execute" | "popen", q) => q.is_some(),
            _ => true,
        };
        runner.then_some(kind)
    }
}

/// A runner's name as a string is a call by name (`array_map('system', …)`).
fn runners_named_in_strings(lang: Lang, code: &str, table: &[(&str, Kind)]) -> Vec<String> {
    code.match_indices(['\'', '"'])
        .filter_map(|(start, _)| match literal(&code[start..], lang) {
            Some((Some(v), _)) if table.iter().any(|(n, k)| *n == v && *k != Kind::Eval) && v.len() > 3 => {
                Some(v)
            }
            _ => None,
        })
        .collect()
}

/// Python's imports of the modules that run commands: their local names
/// (`import subprocess as sp`), and runners imported under another name
/// (`from os import system as s`).
fn python_imports(code: &str) -> (Vec<String>, Vec<String>) {
    const MODULES: &[&str] = &["subprocess", "os", "pty", "commands", "posix", "platform"];
    let mut modules = Vec::new();
    let mut renamed = Vec::new();
    for stmt in code.split([';', '\n']) {
        let words: Vec<&str> = stmt
            .split([' ', ',', '\t', '(', ')'])
            .filter(|w| !w.is_empty())
            .collect();
        match words.as_slice() {
            ["import", rest @ ..] => {
                for (k, w) in rest.iter().enumerate() {
                    if MODULES.contains(w) && rest.get(k + 1) == Some(&"as") {
                        modules.extend(rest.get(k + 2).map(|a| a.to_string()));
                    }
                }
            }
            ["from", m, "import", rest @ ..] if MODULES.contains(m) => {
                for (k, w) in rest.iter().enumerate() {
                    if *w == "as" {
                        renamed.extend(rest.get(k + 1).map(|a| a.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    (modules, renamed)
}

/// PHP calls a function by a variable's value: `$f('id')`.
fn php_variable_call(code: &str) -> bool {
    let b = code.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'$' && {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            j > i + 1 && code[j..].trim_start().starts_with('(')
        }
    })
}
