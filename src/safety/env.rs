//! Environment rules for host jobs: variables that change what a command
//! runs without changing the command line (`LD_PRELOAD`, `BASH_ENV`, a
//! `PATH` that puts a writable directory first) would make the recorded
//! command a lie, so a host job asking for them is refused like a blocked
//! command. Container jobs are not restricted: there the variables act only
//! inside the sandbox. `[safety] allow_env` lets named variables through.

use std::path::Path;

use super::filter::Hit;

/// Variables that make a program run code it was not asked to, and how.
const RISKY: &[(&str, &str)] = &[
    ("LD_PRELOAD", "loads a library into every program the job starts"),
    (
        "LD_LIBRARY_PATH",
        "makes programs load their libraries from another directory",
    ),
    (
        "LD_AUDIT",
        "loads an auditing library into every program the job starts",
    ),
    ("BASH_ENV", "runs a script before every non-interactive bash"),
    ("ENV", "runs a script whenever sh starts"),
    ("PROMPT_COMMAND", "runs a command before each bash prompt"),
    ("PS4", "runs its substitutions on every traced bash command"),
    (
        "SHELLOPTS",
        "switches bash options (e.g. xtrace) on in every bash",
    ),
];

/// Directories anyone (or the job itself) can write: a `PATH` starting
/// there lets a planted `ls` run instead of the real one.
const TMP_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm", "/run/shm"];

/// The first variable of `env` a host job may not set, with why.
pub fn check<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
    workspace: &Path,
    allow: &[String],
) -> Option<Hit> {
    for (name, value) in env {
        if allow.iter().any(|a| a == name) {
            continue;
        }
        let why = RISKY
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, why)| why.to_string())
            .or_else(|| {
                name.starts_with("BASH_FUNC_")
                    .then(|| "replaces a command with an exported bash function".to_string())
            })
            .or_else(|| {
                (name == "PATH")
                    .then(|| writable_first(value, workspace))
                    .flatten()
            });
        if let Some(why) = why {
            return Some(Hit {
                reason: format!(
                    "dangerous environment for a host job: {name} {why}, so what runs is not the command shown; run the job in a container, set the variable inside the command, or allow it with `[safety] allow_env = [\"{name}\"]`"
                ),
                pattern: format!("env:{name}"),
                matched: name.clone(),
            });
        }
    }
    None
}

/// Why a `PATH` value is refused: its first entry is relative (the working
/// directory), inside the workspace, or a temporary directory.
fn writable_first(path: &str, workspace: &Path) -> Option<String> {
    let first = path.split(':').next().unwrap_or("");
    if !first.starts_with('/') {
        return Some(format!(
            "starts with `{first}`, a directory relative to where the job runs"
        ));
    }
    let dir = Path::new(first);
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let ws_real = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    if dir.starts_with(workspace) || real.starts_with(&ws_real) {
        return Some(format!(
            "puts the workspace directory `{first}` before the system's"
        ));
    }
    let tmpdir = std::env::var("TMPDIR").ok().filter(|t| t.starts_with('/'));
    let tmp = TMP_DIRS.iter().map(|t| t.to_string()).chain(tmpdir);
    for t in tmp {
        if dir.starts_with(&t) || real.starts_with(&t) {
            return Some(format!(
                "puts the temporary directory `{first}` before the system's"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn refused(pairs: &[(&str, &str)], allow: &[&str]) -> Option<String> {
        let env: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        check(&env, Path::new("/work/ws"), &allow).map(|h| h.pattern)
    }

    #[test]
    fn risky_variables_and_writable_paths_first_are_refused() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "PROMPT_COMMAND",
            "BASH_FUNC_ls%%",
        ] {
            assert_eq!(
                refused(&[(name, "x")], &[]),
                Some(format!("env:{name}")),
                "{name}"
            );
        }
        for path in [
            ".:/usr/bin",
            ":/usr/bin",
            "bin:/usr/bin",
            "/tmp/x:/usr/bin",
            "/work/ws/bin:/usr/bin",
            "/dev/shm",
        ] {
            assert_eq!(
                refused(&[("PATH", path)], &[]).as_deref(),
                Some("env:PATH"),
                "{path}"
            );
        }
    }

    #[test]
    fn ordinary_variables_and_the_allow_list_pass() {
        assert_eq!(
            refused(
                &[("RUST_LOG", "debug"), ("PATH", "/usr/local/bin:/usr/bin:.")],
                &[]
            ),
            None
        );
        assert_eq!(
            refused(&[("LD_LIBRARY_PATH", "/opt/lib")], &["LD_LIBRARY_PATH"]),
            None
        );
        assert_eq!(refused(&[("PATH", "/work/ws/bin")], &["PATH"]), None);
    }
}
