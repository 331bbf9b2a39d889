//! The project's test and build commands for `run_test` / `run_build`: the
//! configured `test_command` / `build_command`, else detected from marker
//! files at the workspace root.
//!
//! A Makefile with a `test:` (or `build:`) target is the project's own word
//! on how to do that task, so it outranks the language markers (pytest's
//! `pyproject.toml`, `Cargo.toml`, …) and `berth build` runs `make build`,
//! not the default goal (often the tests).

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
    let makefile = ["GNUmakefile", "makefile", "Makefile"]
        .iter()
        .find_map(|f| std::fs::read_to_string(root.join(f)).ok());
    let target = match task {
        ProjectTask::Test => "test",
        ProjectTask::Build => "build",
    };
    if makefile.as_deref().is_some_and(|m| has_target(m, target)) {
        return Ok(format!("make {target}"));
    }
    let (test, build): (&str, Option<&str>) = if has("Cargo.toml") {
        ("cargo test", Some("cargo build"))
    } else if has("package.json") {
        ("npm test", Some("npm run build"))
    } else if has("go.mod") {
        ("go test ./...", Some("go build ./..."))
    } else if has("pytest.ini") || has("pyproject.toml") || has("setup.py") || plain_pytest(root) {
        ("pytest", None)
    } else if makefile.is_some() {
        ("make test", Some("make"))
    } else {
        return Err(Error::InvalidSpec(format!(
            "no test/build command configured and none detected in {} (looked for Cargo.toml, package.json, go.mod, pytest.ini/pyproject.toml/setup.py, conftest.py or test_*.py/*_test.py here or in tests/, Makefile); set test_command/build_command in berth.toml or use `run`",
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

/// A plain pytest layout: `conftest.py`, or `test_*.py` / `*_test.py` at
/// the root or in `tests/` (pytest's own discovery, without a config file).
fn plain_pytest(root: &Path) -> bool {
    let tests_in = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|d| {
            d.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.ends_with(".py") && (n.starts_with("test_") || n.ends_with("_test.py"))
            })
        })
    };
    root.join("conftest.py").is_file() || tests_in(root) || tests_in(&root.join("tests"))
}

/// Whether a Makefile's text defines `target` as a rule (`test:`,
/// `check test: deps`, `test::`), not a variable (`test := x`) nor only a
/// `.PHONY` line.
fn has_target(makefile: &str, target: &str) -> bool {
    makefile.lines().any(|line| {
        if line.starts_with(['\t', ' ', '#', '.']) {
            return false;
        }
        let Some(colon) = line.find(':') else {
            return false;
        };
        let (names, rest) = line.split_at(colon);
        !names.contains('=') && !rest.starts_with(":=") && names.split_whitespace().any(|n| n == target)
    })
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
    fn a_makefile_target_outranks_markers_and_the_default_goal() {
        let dir = tempfile::tempdir().unwrap();
        let make = |text: &str| std::fs::write(dir.path().join("Makefile"), text).unwrap();
        // The default goal (first rule) is the tests: build must not run it.
        make(".PHONY: test build\nall: test\ntest:\n\tpytest\nbuild: deps\n\tpython3 -m build\n");
        assert_eq!(detect(dir.path(), ProjectTask::Build).unwrap(), "make build");
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap();
        assert_eq!(detect(dir.path(), ProjectTask::Test).unwrap(), "make test");
        // No rule for the task: the markers decide; a variable is not a rule.
        make("test := 1\n.PHONY: build\nall:\n\techo\n");
        assert_eq!(detect(dir.path(), ProjectTask::Test).unwrap(), "pytest");
        std::fs::remove_file(dir.path().join("pyproject.toml")).unwrap();
        assert_eq!(detect(dir.path(), ProjectTask::Build).unwrap(), "make");
        assert!(has_target("check test:: a\n", "test"));
        assert!(!has_target("\ttest: x\n", "test"));
    }

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

    #[test]
    fn a_plain_pytest_layout_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.py"), "").unwrap();
        let err = detect(dir.path(), ProjectTask::Test).unwrap_err().to_string();
        assert!(err.contains("test_*.py"), "{err}");
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/test_app.py"), "").unwrap();
        assert_eq!(detect(dir.path(), ProjectTask::Test).unwrap(), "pytest");
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("app_test.py"), "").unwrap();
        assert_eq!(detect(root.path(), ProjectTask::Test).unwrap(), "pytest");
    }
}
