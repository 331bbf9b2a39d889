//! `git` and `tar`, whose settings and options run commands: git settings
//! in every spelling (`-c`, `--config-env`, `git config`,
//! `GIT_CONFIG_PARAMETERS`), the git subcommands and options that take a
//! command, `ext::` remotes; tar's `--checkpoint-action=exec=`,
//! `--to-command`, `--use-compress-program`, `-I`, `-F`, also abbreviated as
//! getopt allows. Their values are walked as nested command lines.

use super::scope::Scope;
use super::words::{Text, skip_options};
use super::{DYNAMIC, Walker};

/// git settings whose values git runs as commands (keys lower case; a
/// trailing `.` means any key under it).
const GIT_RUNS: &[&str] = &[
    "core.pager",
    "core.sshcommand",
    "core.editor",
    "core.fsmonitor",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "diff.external",
    "credential.helper",
    "pager.",
    "filter.",
    "diff.",
    "merge.",
    "mergetool.",
    "difftool.",
    "gpg.",
    "uploadpack.packobjectshook",
    "remote.",
    "protocol.",
    "url.",
    "alias.",
    "include.path",
    "includeif.",
];

/// git options (any subcommand) whose value is a command; the short ones
/// only for the subcommands where they mean that (`rebase -x`, `clone -u`).
const GIT_COMMAND_OPTIONS: &[&str] = &[
    "--exec",
    "--extcmd",
    "--upload-pack",
    "--receive-pack",
    "--tree-filter",
    "--index-filter",
    "--msg-filter",
    "--env-filter",
    "--commit-filter",
    "--tag-name-filter",
    "--parent-filter",
    "--subdirectory-filter",
    "--access-hook",
    "--sendmail-cmd",
    "--smtp-server",
    "--to-cmd",
    "--cc-cmd",
    "--header-cmd",
];

/// tar's long options that take a command, and tar options that share a
/// prefix with them but are not them (getopt takes an exact name first).
const TAR_COMMANDS: &[&str] = &[
    "--checkpoint-action",
    "--to-command",
    "--use-compress-program",
    "--info-script",
    "--new-volume-script",
];
const TAR_NOT_COMMANDS: &[&str] = &[
    "--checkpoint",
    "--to-stdout",
    "--newer",
    "--newer-mtime",
    "--usage",
];

impl Walker<'_> {
    /// A git setting (`key=value`): walk its value when git runs it.
    pub(super) fn git_setting(&mut self, key: &str, value: &str, scope: &Scope, depth: usize) {
        let key = key.to_lowercase();
        if let Some(cmd) = value.strip_prefix("ext::") {
            self.line(&cmd.replace('%', " "), &mut scope.clone(), depth + 1, true);
        } else if let Some(cmd) = value.strip_prefix('!') {
            self.line(cmd, &mut scope.clone(), depth + 1, true);
        } else if GIT_RUNS
            .iter()
            .any(|k| key == *k || (k.ends_with('.') && key.starts_with(k)))
        {
            self.line(value, &mut scope.clone(), depth + 1, true);
        }
    }

    /// `GIT_CONFIG_PARAMETERS='key'='value' …`: settings for every git run.
    pub(super) fn git_parameters(&mut self, text: &str, scope: &Scope, depth: usize) {
        for pair in text.split("' '") {
            let pair = pair.trim_matches('\'');
            if let Some((k, v)) = pair.split_once("'='").or_else(|| pair.split_once('=')) {
                self.git_setting(k, v, scope, depth);
            }
        }
    }

    /// `git -c k=v`, `--config-env=k=VAR`, `git config k v`, subcommand
    /// options that take a command, and `ext::` remotes.
    pub(super) fn git(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let has = |sub: &[&str]| args.iter().any(|a| sub.contains(&a.s.as_str()));
        let short_x = has(&["rebase", "difftool"]);
        let short_u = has(&["clone", "fetch", "pull", "ls-remote", "archive"]);
        for (i, a) in args.iter().enumerate() {
            let s = a.s.as_str();
            let next = args.get(i + 1).map(|n| n.s.as_str());
            if ((s == "-x" && short_x) || (s == "-u" && short_u))
                && let Some(v) = next
            {
                self.line(v, &mut scope.clone(), depth + 1, true);
                continue;
            }
            if s == "-c"
                && let Some((k, v)) = next.and_then(|n| n.split_once('='))
            {
                self.git_setting(k, v, scope, depth);
            } else if let Some(kv) = s.strip_prefix("--config-env=").or(s.strip_prefix("-c")) {
                if let Some((k, v)) = kv.split_once('=') {
                    if s.starts_with("--config-env=") {
                        self.push(format!("{DYNAMIC} git --config-env {k}=${v}"));
                    } else {
                        self.git_setting(k, v, scope, depth);
                    }
                }
            } else if let Some((_, v)) = s.split_once('=').filter(|(o, _)| GIT_COMMAND_OPTIONS.contains(o)) {
                self.line(v, &mut scope.clone(), depth + 1, true);
            } else if GIT_COMMAND_OPTIONS.contains(&s)
                && let Some(v) = next
            {
                self.line(v, &mut scope.clone(), depth + 1, true);
            } else if let Some(cmd) = s.strip_prefix("ext::") {
                self.line(
                    &cmd.replace("% ", " ").replace('%', " "),
                    &mut scope.clone(),
                    depth + 1,
                    true,
                );
            }
        }
        let words: Vec<&str> = args.iter().map(|a| a.s.as_str()).collect();
        // `git config [--global …] KEY VALUE`, `git config set KEY VALUE`.
        if let Some(c) = words.iter().position(|w| *w == "config") {
            let ops: Vec<&str> = words[c + 1..]
                .iter()
                .copied()
                .filter(|w| !w.starts_with('-') && *w != "set" && *w != "--add")
                .collect();
            if let [k, v, ..] = ops.as_slice() {
                self.git_setting(k, v, scope, depth);
            }
        }
        // `git submodule foreach CMD`, `git bisect run CMD`.
        for (a, b) in [("foreach", 1), ("run", 1)] {
            if let Some(p) = words.iter().position(|w| *w == a)
                && words.iter().any(|w| *w == "submodule" || *w == "bisect")
            {
                let mut rest = &args[p + b..];
                skip_options(&mut rest, &[]);
                let text = rest.iter().map(|a| a.s.as_str()).collect::<Vec<_>>().join(" ");
                self.line(&text, &mut scope.clone(), depth + 1, true);
            }
        }
    }

    /// `tar` options that run a command, as getopt reads them: long options
    /// by any unambiguous prefix (`--checkpoint-act=exec=…`), with `=` or
    /// the next word; `-I CMD`/`-ICMD`/`-F`; old-style `tar cIf CMD …`.
    pub(super) fn tar(&mut self, args: &[Text], scope: &Scope, depth: usize) {
        let mut cmds = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let s = a.s.as_str();
            let next = || args.get(i + 1).map(|n| n.s.clone());
            if let Some(long) = s.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                    None => (s.to_string(), None),
                };
                let runs = name.len() >= 4
                    && !TAR_NOT_COMMANDS.contains(&name.as_str())
                    && TAR_COMMANDS.iter().any(|c| c.starts_with(&name));
                if runs && let Some(v) = value.or_else(next) {
                    cmds.push(v.strip_prefix("exec=").map(str::to_string).unwrap_or(v));
                }
            } else if let Some(short) = s.strip_prefix('-') {
                if let Some(k) = short.find(['I', 'F']) {
                    let rest = &short[k + 1..];
                    cmds.extend(if rest.is_empty() {
                        next()
                    } else {
                        Some(rest.to_string())
                    });
                }
            } else if i == 0 && s.contains(['I', 'F']) && s.chars().all(|c| c.is_ascii_alphabetic()) {
                // Old style: every word after may be the command.
                cmds.extend(args[1..].iter().map(|a| a.s.clone()));
            }
        }
        for cmd in cmds {
            self.line(&cmd, &mut scope.clone(), depth + 1, true);
        }
    }
}
