//! Files a line writes and runs: a script, binary or source file that the
//! same line may have written is code the filter never saw, so running it
//! is a `dynamic command`, *whatever wrote it*. Writers cannot be listed
//! (`dd of=`, `sed 'w x'`, `find -fprintf`, `awk 'print > "x"'`, `python -c
//! "open(…)"`, `curl -o`, `cp`, …), so the check is the other way round: a
//! file run on the line (`./x`, `sh x`, `. x`, `python3 x.py`, `sh < x`,
//! `BASH_ENV=x`) must not be named anywhere else on the line, except by
//! commands that only look at files (`chmod`, `ls`, `cat`, `test`, …), by
//! commands that only run other commands (`sh -c`, `nohup`, `watch`: their
//! payloads are checked as commands of their own), and by a redirection
//! that only reads it. A compiler's output counts as
//! written when one of its sources does (`gcc -o x x.c && ./x` is fine; not
//! when the line wrote `x.c`). The check runs once the whole line is
//! walked, so the order of writing and running does not matter.

use std::collections::HashSet;

use super::commands::SHELLS;
use super::wrappers::WRAPPERS;
use super::{DYNAMIC, Walker};

/// Commands that read or inspect files without writing their contents.
const LOOKERS: &[&str] = &[
    // `for f in x.sh`: names the files its body may run.
    "for",
    "select",
    "chmod",
    "chown",
    "chgrp",
    "ls",
    "cat",
    "test",
    "[",
    "[[",
    "stat",
    "file",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "echo",
    "printf",
    "which",
    "type",
    "command",
    "realpath",
    "readlink",
    "dirname",
    "basename",
    "diff",
    "cmp",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "du",
    "less",
    "more",
    "bat",
    "shellcheck",
    "rm",
    "rmdir",
    "mkdir",
    "touch",
    "cd",
    "pushd",
    // git writes only what the repository holds (files already on disk).
    "git",
];

/// Commands whose arguments are commands they run (walked on their own).
const RUNNERS: &[&str] = &[
    "eval",
    "watch",
    "script",
    "trap",
    "alias",
    "sg",
    "parallel",
    "start-stop-daemon",
    "env",
];

/// Compilers: their outputs are as trustworthy as their sources.
pub(super) const COMPILERS: &[&str] = &[
    "cc", "gcc", "g++", "c++", "clang", "clang++", "tcc", "rustc", "javac", "kotlinc", "swiftc", "gfortran",
    "go",
];

/// A file run on the line, with the views of the commands that run it.
#[derive(Debug)]
struct Ran {
    path: String,
    own: Vec<String>,
}

/// One compiler run: its sources and what it writes.
#[derive(Debug)]
struct Compile {
    sources: Vec<String>,
    outputs: Vec<String>,
}

/// What the line writes and runs.
#[derive(Debug, Default)]
pub(super) struct Files {
    /// Targets of output redirections.
    written: HashSet<String>,
    ran: Vec<Ran>,
    /// Paths run by the simple command being walked, waiting for its views.
    pending: Vec<String>,
    compiles: Vec<Compile>,
}

/// Most files tracked of each kind (a line that writes or runs more is
/// checked on the first ones; each costs a scan of the views).
const MAX_FILES: usize = 256;

fn key(path: &str) -> String {
    path.strip_prefix("./").unwrap_or(path).to_lowercase()
}

/// The same file, as far as names tell: equal, or one ends in `/` + the other.
fn same_file(a: &str, b: &str) -> bool {
    a == b || a.ends_with(&format!("/{b}")) || b.ends_with(&format!("/{a}"))
}

fn name_char(c: char) -> bool {
    c.is_alphanumeric() || "._+-@%".contains(c)
}

/// `view` names `path` as a whole word of a path (`x.sh` in `of=./x.sh`,
/// not in `x.sh.bak`).
fn mentions(view: &str, path: &str) -> bool {
    view.match_indices(path).any(|(i, _)| {
        let before = view[..i].chars().next_back();
        let after = view[i + path.len()..].chars().next();
        before.is_none_or(|c| !name_char(c)) && after.is_none_or(|c| !name_char(c) && c != '/')
    })
}

impl Files {
    pub(super) fn wrote(&mut self, path: &str) {
        if !path.is_empty() && self.written.len() < MAX_FILES {
            self.written.insert(key(path));
        }
    }

    /// The command being walked runs the file `path`.
    pub(super) fn runs(&mut self, path: &str) {
        if !path.is_empty() && !path.contains(DYNAMIC) && self.pending.len() < MAX_FILES {
            self.pending.push(key(path));
        }
    }

    /// A compiler run on the line.
    pub(super) fn compiles(&mut self, sources: Vec<String>, outputs: Vec<String>) {
        if self.compiles.len() < MAX_FILES {
            self.compiles.push(Compile {
                sources: sources.iter().map(|s| key(s)).collect(),
                outputs: outputs.iter().map(|s| key(s)).collect(),
            });
        }
    }

    pub(super) fn pending_mark(&self) -> usize {
        self.pending.len()
    }

    /// The simple command that began at `mark` is walked: the files it runs
    /// get its views (which may name them).
    pub(super) fn settle(&mut self, mark: usize, own: Vec<String>) {
        let own: Vec<String> = own.into_iter().map(|v| v.trim().to_lowercase()).collect();
        for path in self
            .pending
            .drain(mark.min(self.pending.len())..)
            .collect::<Vec<_>>()
        {
            if self.ran.len() < MAX_FILES {
                self.ran.push(Ran {
                    path,
                    own: own.clone(),
                });
            }
        }
    }
}

impl Walker<'_> {
    /// The program word of a command: a path (`./x`, `bin/x`) is a file it
    /// runs, and so is a bare name once the line changed `PATH`.
    pub(super) fn runs_program(&mut self, first: &super::words::Text, name: &str) {
        if first.dynamic {
            return;
        }
        if first.s.contains('/') {
            self.files.runs(&first.s);
        } else if self.path_changed {
            self.files.runs(name);
        }
    }

    /// After the whole line: refuse running what the line may have written.
    pub(super) fn files_run_that_the_line_wrote(&mut self) {
        if self.files.ran.is_empty() {
            return;
        }
        let views: Vec<&String> = self
            .out
            .iter()
            .filter(|v| !v.contains(" | ") && !v.starts_with("function() "))
            .collect();
        // Views of commands that only run other commands (`sh -c`, `eval`,
        // `watch`, `nohup`, …) name what their payload names; the payload's
        // own commands are views of their own and are checked.
        let looks = |v: &str| {
            let program = v.split_whitespace().next().unwrap_or("");
            LOOKERS.contains(&program)
                || COMPILERS.contains(&program)
                || RUNNERS.contains(&program)
                || SHELLS.contains(&program)
                || WRAPPERS.iter().any(|w| w.name == program)
                // `find -exec CMD`, unless find writes a file itself.
                || (program == "find" && !v.contains(" -fprint") && !v.contains(" -fls"))
        };
        // Every view of a command that runs a path is exempt for that path.
        let own_of = |path: &str| -> HashSet<&String> {
            self.files
                .ran
                .iter()
                .filter(|r| same_file(&r.path, path))
                .flat_map(|r| r.own.iter())
                .collect()
        };
        let named_elsewhere = |path: &str, own: &HashSet<&String>| {
            views
                .iter()
                .any(|v| !own.contains(v) && !looks(v) && mentions(v, path))
        };
        let mut written: Vec<String> = self.files.written.iter().cloned().collect();
        // A compiler's outputs are written when one of its sources is.
        for c in &self.files.compiles {
            let tainted = c.sources.iter().any(|s| {
                s == "-"
                    || s.starts_with("/dev/")
                    || written.iter().any(|w| same_file(w, s))
                    || named_elsewhere(s, &HashSet::new())
            });
            if tainted {
                written.extend(c.outputs.iter().cloned());
            }
        }
        let mut found = Vec::new();
        for r in &self.files.ran {
            let own = own_of(&r.path);
            if written.iter().any(|w| same_file(w, &r.path)) || named_elsewhere(&r.path, &own) {
                found.push(r.path.clone());
            }
        }
        for path in found {
            self.push(format!("{DYNAMIC} runs {path}, which this line may write"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_whole_path_words() {
        assert!(mentions("dd if=x of=./x.sh", "x.sh"));
        assert!(mentions("sed w x.sh", "x.sh"));
        assert!(mentions("awk {print > \"x.sh\"}", "x.sh"));
        assert!(mentions("cp /bin/sh ./x", "x"));
        assert!(!mentions("cp x.sh.bak y", "x.sh"));
        assert!(!mentions("tar xzf a.tgz", "x"));
        assert!(!mentions("ls -x", "x"));
        assert!(
            !mentions("cp a x/y", "x"),
            "a directory of that name is another file"
        );
    }

    #[test]
    fn same_file_by_name() {
        assert!(same_file("sub/x.sh", "x.sh"));
        assert!(same_file("x.sh", "x.sh"));
        assert!(!same_file("ax.sh", "x.sh"));
    }
}
