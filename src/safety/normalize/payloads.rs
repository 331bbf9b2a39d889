//! Programs that run shell commands named in their options: `git -c`
//! settings (`alias.x=!cmd`, `core.pager`, `core.sshCommand`, …) and `tar`'s
//! `--checkpoint-action=exec=`, `--to-command`, `-I`. Their payloads are
//! walked as nested command lines.

use super::Walker;
use super::words::{Scope, Text};

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
}
