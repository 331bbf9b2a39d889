//! The project's test and build commands for `run_test` / `run_build`: the
//! configured `test_command` / `build_command`, else detected from marker
//! files at the workspace root.

use std::path::Path;

use crate::error::{Error, Result};

/// Test or build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectTask {
    Test,
    Build,
}

/// The project's test/build command: configured, else detected from the workspace root.
pub fn project_command(config: &crate::Config, task: ProjectTask) -> Result<String> {
    let configured = match task {
        ProjectTask::Test => &config.test_command,
        ProjectTask::Build => &config.build_command,
    };
    if let Some(c) = configured {
        return Ok(c.clone());
    }
    detect(&config.workspace, task)
}

fn detect(root: &Path, task: ProjectTask) -> Result<String> {
    let has = |f: &str| root.join(f).is_file();
    let (test, build): (&str, Option<&str>) = if has("Cargo.toml") {
        ("cargo test", Some("cargo build"))
    } else if has("package.json") {
        ("npm test", Some("npm run build"))
    } else if has("go.mod") {
        ("go test ./...", Some("go build ./..."))
    } else if has("pytest.ini") || has("pyproject.toml") || has("setup.py") {
        ("pytest", None)
    } else if has("Makefile") {
        ("make test", Some("make"))
    } else {
        return Err(Error::InvalidSpec(format!(
            "no test/build command configured and none detected in {} (looked for Cargo.toml, package.json, go.mod, pytest.ini/pyproject.toml/setup.py, Makefile); set test_command/build_command in berth.toml or use `run`",
            root.display()
        )));
    };
    match task {
        ProjectTask::Test => Ok(test.into()),
        ProjectTask::Build => build.map(Into::into).ok_or_else(|| {
            Error::InvalidSpec(
                "this Python project has no standard build command; set build_command in berth.toml or use `run`".into(),
            )
        }),
    }
}

/// Quote `args` for `sh -c` and append them to `cmd`.
pub fn append_args(cmd: &str, args: &[String]) -> String {
    let mut out = cmd.to_string();
    for a in args {
        out.push(' ');
        if !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
        {
            out += a;
        } else {
            out += &format!("'{}'", a.replace('\'', r"'\''"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_follows_the_marker_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(detect(dir.path(), ProjectTask::Test).is_err());
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap();
        assert_eq!(detect(dir.path(), ProjectTask::Test).unwrap(), "pytest");
        assert!(detect(dir.path(), ProjectTask::Build).is_err());
        std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
        assert_eq!(detect(dir.path(), ProjectTask::Build).unwrap(), "cargo build");
        assert_eq!(
            append_args("cargo test", &["a b".into(), "--x".into()]),
            "cargo test 'a b' --x"
        );
    }
}
