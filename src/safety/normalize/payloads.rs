//! Programs that run shell commands named in their options: `git -c`
//! settings (`alias.x=!cmd`, `core.pager`, `core.sshCommand`, …) and `tar`'s
//! `--checkpoint-action=exec=`, `--to-command`, `-I`. Their payloads are
//! walked as nested command lines.
//!
//! Interpreters get a shallower look: the string literals passed to
//! `system(…)`, `exec`, `popen`, `subprocess.run([…])` and friends in
//! `python -c`/`perl -e`/`ruby -e`/`node -e`/`php -r` code or an `awk`
//! program, and sed's `e` command and `s///e` flag, are walked as command
//! lines. Code that computes its command (`'su' + 'do'`) is not evaluated:
//! that is a known bypass, contained by the container.

use std::sync::LazyLock;

use regex::Regex;

use super::Walker;
use super::words::{Scope, Text};

/// A call that runs a command, with its first string literal.
static RUNS_STRING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\b(?:system|exec[lv]?p?e?|popen|spawn(?:Sync)?|execSync|execFileSync|execFile|shell_exec|passthru|proc_open|check_output|check_call|getoutput|getstatusoutput|run|call|Popen|qx)\s*[\(\{]?\s*\[?\s*(?:"([^"]*)"|'([^']*)')"#,
    )
    .expect("valid regex")
});
/// awk's `"cmd" | getline` and `print | "cmd"`.
static AWK_PIPE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([^"]*)"\s*\|\s*getline|\|\s*"([^"]*)""#).expect("valid regex"));
/// sed's `e COMMAND` and the replacement of `s/…/…/e`.
static SED_E: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[;\n{}])\s*(?:\d+|\$|/[^/\n]*/)?\s*e\s+([^;\n}]+)|s/[^/\n]*/([^/\n]*)/[a-z0-9]*e")
        .expect("valid regex")
});

/// Interpreters whose code option is looked into, and that option.
const INTERPRETERS: &[(&str, &[&str])] = &[
    ("python", &["-c"]),
    ("perl", &["-e", "-E"]),
    ("ruby", &["-e"]),
    ("node", &["-e", "--eval", "-p", "--print"]),
    ("nodejs", &["-e", "--eval", "-p", "--print"]),
    ("php", &["-r"]),
];

impl Walker<'_> {
    /// `git -c alias.x='!cmd'`, `-c core.pager=cmd`, `-c core.sshCommand=cmd`
    /// …: configuration values git runs as shell commands.
    pub(super) fn git(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        const RUNS: &[&str] = &[
            "core.pager",
            "core.sshcommand",
            "core.editor",
            "core.fsmonitor",
            "core.hookspath",
            "sequence.editor",
            "diff.external",
            "credential.helper",
            "pager.",
            "filter.",
            "diff.",
            "merge.",
            "gpg.program",
            "uploadpack.packobjectshook",
        ];
        for pair in args.windows(2).filter(|p| p[0].s == "-c") {
            let Some((key, value)) = pair[1].s.split_once('=') else {
                continue;
            };
            let key = key.to_lowercase();
            if let Some(cmd) = value.strip_prefix('!') {
                self.line(cmd, &mut scope.clone(), depth + 1);
            } else if RUNS
                .iter()
                .any(|k| key == *k || (k.ends_with('.') && key.starts_with(k)))
            {
                self.line(value, &mut scope.clone(), depth + 1);
            }
        }
    }

    /// `tar --checkpoint-action=exec=CMD`, `--to-command=CMD`,
    /// `--use-compress-program=CMD` / `-I CMD`, `--info-script=CMD` / `-F`.
    pub(super) fn tar(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        for (i, a) in args.iter().enumerate() {
            let s = a.s.as_str();
            let cmd = s
                .strip_prefix("--checkpoint-action=exec=")
                .or_else(|| s.strip_prefix("--to-command="))
                .or_else(|| s.strip_prefix("--use-compress-program="))
                .or_else(|| s.strip_prefix("--info-script="))
                .or_else(|| s.strip_prefix("--new-volume-script="))
                .map(str::to_string)
                .or_else(|| {
                    [
                        "-I",
                        "-F",
                        "--to-command",
                        "--use-compress-program",
                        "--info-script",
                    ]
                    .contains(&s)
                    .then(|| args.get(i + 1).map(|n| n.s.clone()))
                    .flatten()
                });
            if let Some(cmd) = cmd {
                self.line(&cmd, &mut scope.clone(), depth + 1);
            }
        }
    }

    /// Command strings inside interpreter code (see the module comment).
    pub(super) fn interpreter(&mut self, name: &str, args: &[Text], scope: &Scope, depth: usize) {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        let code: Vec<&str> = if ["awk", "gawk", "mawk", "nawk"].contains(&base) {
            let mut rest = args;
            super::words::skip_options(&mut rest, &["-F", "-v", "-f"]);
            rest.first().map(|t| t.s.as_str()).into_iter().collect()
        } else if base == "sed" {
            let mut code: Vec<&str> = args
                .windows(2)
                .filter(|p| p[0].s == "-e" || p[0].s == "--expression")
                .map(|p| p[1].s.as_str())
                .collect();
            if code.is_empty() {
                let mut rest = args;
                super::words::skip_options(&mut rest, &["-f", "-l", "--file"]);
                code.extend(rest.first().map(|t| t.s.as_str()));
            }
            code
        } else if let Some((_, opts)) = INTERPRETERS.iter().find(|(n, _)| *n == base) {
            args.windows(2)
                .filter(|p| opts.contains(&p[0].s.as_str()))
                .map(|p| p[1].s.as_str())
                .collect()
        } else {
            return;
        };
        let mut payloads = Vec::new();
        for c in code {
            let patterns: &[&Regex] = match base {
                "sed" => &[&SED_E],
                "awk" | "gawk" | "mawk" | "nawk" => &[&RUNS_STRING, &AWK_PIPE],
                _ => &[&RUNS_STRING],
            };
            for re in patterns {
                for cap in re.captures_iter(c).take(64) {
                    if let Some(m) = cap.get(1).or_else(|| cap.get(2)) {
                        payloads.push(m.as_str().to_string());
                    }
                }
            }
        }
        for p in payloads {
            self.line(&p, &mut scope.clone(), depth + 1);
        }
    }
}
