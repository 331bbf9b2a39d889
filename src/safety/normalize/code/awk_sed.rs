//! awk and sed programs: awk's `system(…)`, `"cmd" | getline` and
//! `print … | "cmd"` run commands, which must be string literals; sed's
//! `e COMMAND` runs COMMAND, while a bare `e` and the `s///e` flag run the
//! pattern space, which comes from the input (a `dynamic command`). Script
//! files (`awk -f`, `sed -f`) count as files run.

use super::super::scope::Scope;
use super::super::words::{Text, skip_options};
use super::super::{DYNAMIC, Walker};
use super::strings::{Lang, literal};

impl Walker<'_> {
    pub(in super::super) fn awk(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let mut programs = Vec::new();
        for pair in args.windows(2) {
            match pair[0].s.as_str() {
                "-f" | "--file" => self.files.runs(&pair[1].s),
                "-e" | "--source" => programs.push(pair[1].s.clone()),
                _ => {}
            }
        }
        if programs.is_empty() && !args.iter().any(|a| a.s == "-f" || a.s == "--file") {
            let mut rest = args;
            skip_options(&mut rest, &["-F", "-v", "-f", "--field-separator", "--assign"]);
            programs.extend(rest.first().map(|t| t.s.clone()));
        }
        for p in programs {
            self.code(Lang::Awk, &p, scope, depth);
            self.awk_pipes(&p, scope, depth);
        }
    }

    /// awk's pipes: `"cmd" | getline` and `print … | "cmd"` (or `|&`).
    fn awk_pipes(&mut self, code: &str, scope: &Scope, depth: usize) {
        let b = code.as_bytes();
        let mut i = 0;
        let mut last_literal: Option<(String, usize)> = None;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    let (value, len) = literal(&code[i..], Lang::Awk).unwrap_or((None, 1));
                    last_literal = value.map(|v| (v, i + len));
                    i += len.max(1);
                }
                b'|' if b.get(i + 1) == Some(&b'|') => i += 2,
                b'|' => {
                    let mut j = i + 1;
                    if b.get(j) == Some(&b'&') {
                        j += 1;
                    }
                    let after = code[j..].trim_start();
                    let before_ends = code[..i].trim_end().len();
                    let cmd = if after.starts_with("getline") {
                        last_literal
                            .as_ref()
                            .filter(|(_, end)| *end == before_ends)
                            .map(|(v, _)| v.clone())
                    } else {
                        literal(after, Lang::Awk).and_then(|(v, _)| v)
                    };
                    match cmd {
                        Some(c) => self.line(&c, &mut scope.clone(), depth + 1, true),
                        None => self.push(format!("{DYNAMIC} awk pipes to a command the filter cannot read")),
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }

    pub(in super::super) fn sed(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        if args.iter().any(|a| a.s == "--sandbox") {
            return;
        }
        let mut scripts = Vec::new();
        let mut explicit = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let s = a.s.as_str();
            if let Some(v) = s.strip_prefix("--expression=") {
                scripts.push(v.to_string());
                explicit = true;
            } else if let Some(v) = s.strip_prefix("--file=") {
                self.files.runs(v);
                explicit = true;
            } else if s == "--expression" || s == "--file" {
                if let Some(v) = args.get(i) {
                    if s == "--file" {
                        self.files.runs(&v.s);
                    } else {
                        scripts.push(v.s.clone());
                    }
                }
                explicit = true;
                i += 1;
            } else if let Some(cluster) = s.strip_prefix('-').filter(|c| !c.starts_with('-')) {
                // `-e X`, `-ne X`, `-f FILE`; `-i` takes the rest as a suffix.
                for (k, c) in cluster.char_indices() {
                    if c == 'i' || c == 'l' {
                        break;
                    }
                    if c == 'e' || c == 'f' {
                        let rest = &cluster[k + 1..];
                        let v = if rest.is_empty() {
                            i += 1;
                            args.get(i - 1).map(|t| t.s.clone())
                        } else {
                            Some(rest.to_string())
                        };
                        if let Some(v) = v {
                            if c == 'f' {
                                self.files.runs(&v);
                            } else {
                                scripts.push(v);
                            }
                        }
                        explicit = true;
                        break;
                    }
                }
            } else if !explicit && scripts.is_empty() {
                scripts.push(s.to_string());
            }
        }
        for s in scripts {
            self.sed_script(&s, scope, depth);
        }
    }

    /// The `e` commands and `s///e` flags of one sed script.
    fn sed_script(&mut self, script: &str, scope: &Scope, depth: usize) {
        let mut t = SedText {
            c: script.chars().collect(),
            i: 0,
        };
        while t.i < t.c.len() {
            if !self.tick() {
                return;
            }
            t.skip_ws();
            t.addresses();
            t.skip_ws();
            let Some(&cmd) = t.c.get(t.i) else { break };
            t.i += 1;
            match cmd {
                's' | 'y' if t.i < t.c.len() => self.sed_substitute(cmd, &mut t, scope, depth),
                'e' => {
                    let command = t.until(";\n}");
                    if command.is_empty() {
                        self.push(format!("{DYNAMIC} sed e runs its input"));
                    } else {
                        self.line(&command, &mut scope.clone(), depth + 1, true);
                    }
                }
                // Commands whose argument runs to the end of the line.
                'a' | 'i' | 'c' | 'w' | 'W' | 'r' | 'R' => {
                    t.until("\n");
                }
                'b' | 't' | 'T' | ':' => {
                    t.until(";\n}");
                }
                _ => {}
            }
            t.skip_ws();
            if t.c.get(t.i) == Some(&';') {
                t.i += 1;
            }
        }
    }

    /// sed's `s` (or `y`) after its letter: `s///e` runs the pattern space.
    fn sed_substitute(&mut self, cmd: char, t: &mut SedText, scope: &Scope, depth: usize) {
        let d = t.c[t.i];
        t.i += 1;
        t.field(d);
        let replacement = t.field(d);
        let start = t.i;
        while t.i < t.c.len() && t.c[t.i].is_ascii_alphanumeric() {
            t.i += 1;
        }
        let flags: String = t.c[start..t.i].iter().collect();
        if cmd == 's' && flags.contains('e') {
            // The pattern space after the substitution runs: it
            // holds the input, which the filter never sees.
            self.line(&replacement, &mut scope.clone(), depth + 1, true);
            self.push(format!("{DYNAMIC} sed s///e runs its input"));
        }
        if cmd == 's' && flags.contains('w') {
            t.until("\n");
        }
    }
}

/// A sed script read a character at a time: `i` is where reading is.
struct SedText {
    c: Vec<char>,
    i: usize,
}

impl SedText {
    /// Past any whitespace.
    fn skip_ws(&mut self) {
        while self.i < self.c.len() && self.c[self.i].is_whitespace() {
            self.i += 1;
        }
    }

    /// The text of a delimited field (`/re/`), escapes kept; reading goes
    /// on past its closing delimiter.
    fn field(&mut self, d: char) -> String {
        let mut out = String::new();
        while self.i < self.c.len() && self.c[self.i] != d {
            if self.c[self.i] == '\\' && self.i + 1 < self.c.len() {
                out.push(self.c[self.i]);
                self.i += 1;
            }
            out.push(self.c[self.i]);
            self.i += 1;
        }
        // Past the closing delimiter; an unfinished field ends the script.
        self.i = (self.i + 1).min(self.c.len());
        out
    }

    /// The text up to the first of `stops` (left to read), trimmed.
    fn until(&mut self, stops: &str) -> String {
        let start = self.i;
        while self.i < self.c.len() && !stops.contains(self.c[self.i]) {
            self.i += 1;
        }
        self.c[start..self.i]
            .iter()
            .collect::<String>()
            .trim()
            .to_string()
    }

    /// Addresses: numbers, `$`, `/re/`, `\%re%`, ranges, `!`.
    fn addresses(&mut self) {
        loop {
            match self.c.get(self.i) {
                Some(d) if d.is_ascii_digit() || *d == '$' || *d == ',' || *d == '!' || *d == '~' => {
                    self.i += 1
                }
                Some('/') => {
                    self.i += 1;
                    self.field('/');
                }
                Some('\\') if self.i + 1 < self.c.len() => {
                    let d = self.c[self.i + 1];
                    self.i += 2;
                    self.field(d);
                }
                _ => break,
            }
        }
    }
}
