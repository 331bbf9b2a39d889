//! Extra bind mounts of a container job (`-v HOST:CONTAINER[:ro]`): the
//! syntax, the container paths a mount may not take, and the host path
//! resolved inside the workspace.
//!
//! The agent writes the workspace, so a host path is only ever a path the
//! job could already reach: it is resolved canonically (symlinks followed,
//! `..` resolved) and must land inside the canonical workspace; a symlink
//! to `/etc` or `~/.ssh` is refused as the path it points to. The
//! container path must be absolute and clean, must not cover a system
//! directory (the image's programs, `/proc`, `/dev`, the engine's socket …)
//! nor the workspace's own mount (above, at or below it: a mount point
//! below would be made by the engine, as root, in the user's project).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::model::MountSpec;

/// Most extra mounts one job may have.
pub const MAX_MOUNTS: usize = 16;

/// Container paths a mount may neither be nor go under.
const SYSTEM: [&str; 15] = [
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/run",
    "/var/run",
    "/var/lib/docker",
];

fn bad(input: &str, message: impl Into<String>) -> Error {
    Error::InvalidValue {
        what: "mount",
        input: input.chars().take(200).collect(),
        message: message.into(),
    }
}

impl FromStr for MountSpec {
    type Err = Error;
    /// `HOST:CONTAINER` or `HOST:CONTAINER:ro` (`:rw` is the default).
    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let (source, target, read_only) = match parts[..] {
            [h, c] => (h, c, false),
            [h, c, "ro"] => (h, c, true),
            [h, c, "rw"] => (h, c, false),
            _ => {
                return Err(bad(
                    s,
                    "expected HOST:CONTAINER or HOST:CONTAINER:ro (e.g. `-v ./data:/data:ro`)",
                ));
            }
        };
        if source.is_empty() || target.is_empty() {
            return Err(bad(s, "expected HOST:CONTAINER[:ro] with both paths given"));
        }
        Ok(MountSpec {
            source: PathBuf::from(source),
            target: target.to_string(),
            read_only,
            pinned: None,
        })
    }
}

impl MountSpec {
    /// Check the container path alone (no file system access).
    pub fn check_target(&self) -> Result<()> {
        let t = Path::new(&self.target);
        let shown = format!("{}:{}", self.source.display(), self.target);
        if !t.is_absolute() {
            return Err(bad(
                &shown,
                format!(
                    "the container path `{}` must be absolute (e.g. /data)",
                    self.target
                ),
            ));
        }
        // `Path::components` drops `.` and empty parts: read the words.
        if self.target != "/"
            && self
                .target
                .split('/')
                .skip(1)
                .any(|p| matches!(p, "" | "." | ".."))
        {
            return Err(bad(
                &shown,
                "the container path must be clean (no `.`, `..` or `//`)",
            ));
        }
        if t == Path::new("/")
            || SYSTEM.iter().any(|s| t.starts_with(s))
            || t.starts_with("/var/run/docker.sock")
        {
            return Err(bad(
                &shown,
                format!(
                    "`{}` is a system directory of the container; mount somewhere of your own (e.g. /data)",
                    self.target
                ),
            ));
        }
        Ok(())
    }

    /// Resolve the host path canonically and require it inside `workspace`
    /// (canonical too), and keep the container path off the workspace's
    /// own mount. A relative host path is from the workspace root.
    pub fn resolve_in(&mut self, workspace: &Path) -> Result<()> {
        let shown = format!("{}:{}", self.source.display(), self.target);
        let root = std::fs::canonicalize(workspace)
            .map_err(|e| Error::io("resolve the workspace root", workspace, e))?;
        let asked = workspace.join(&self.source);
        let real = std::fs::canonicalize(&asked)
            .map_err(|_| bad(&shown, format!("`{}` does not exist", asked.display())))?;
        if !real.starts_with(&root) {
            return Err(bad(
                &shown,
                format!(
                    "`{}` resolves to `{}`, outside the workspace `{}`; only paths inside the workspace can be mounted",
                    self.source.display(),
                    real.display(),
                    root.display()
                ),
            ));
        }
        // The project's own config files are given to every container job
        // read-only by berth; a second mount of them (or of what holds them)
        // would only clash with that one.
        let inner = real.strip_prefix(&root).unwrap_or(Path::new(""));
        if let Some(first) = inner.components().next()
            && crate::model::PROTECTED_FILES
                .iter()
                .any(|p| first.as_os_str() == *p)
        {
            return Err(bad(
                &shown,
                format!(
                    "`{}` is a project config file berth already mounts read-only into every container job; mount another path",
                    self.source.display()
                ),
            ));
        }
        let t = Path::new(&self.target);
        if t.starts_with(&root) || root.starts_with(t) || t.starts_with(workspace) || workspace.starts_with(t)
        {
            return Err(bad(
                &shown,
                format!(
                    "the container path `{}` would cover the workspace's own mount `{}`; pick a path outside it",
                    self.target,
                    root.display()
                ),
            ));
        }
        self.source = real;
        Ok(())
    }
}

/// Check a spec's mounts without the file system: how many, and their
/// container paths (each one distinct).
pub fn check_all(mounts: &[MountSpec]) -> Result<()> {
    if mounts.len() > MAX_MOUNTS {
        return Err(bad(
            &format!("{} mounts", mounts.len()),
            format!("a job may have at most {MAX_MOUNTS} extra mounts"),
        ));
    }
    for (i, m) in mounts.iter().enumerate() {
        m.check_target()?;
        if mounts[..i].iter().any(|o| o.target == m.target) {
            return Err(bad(&m.target, "two mounts at one container path"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_and_container_paths() {
        let m: MountSpec = "./data:/data:ro".parse().unwrap();
        assert_eq!(
            (m.source, m.target.as_str(), m.read_only),
            ("./data".into(), "/data", true)
        );
        assert!(!"a:/b".parse::<MountSpec>().unwrap().read_only);
        for bad in ["a", "a:/b:x", ":/b", "a:", "a:/b:ro:1"] {
            assert!(bad.parse::<MountSpec>().is_err(), "{bad}");
        }
        for target in [
            "rel",
            "/",
            "/etc",
            "/etc/x",
            "/proc",
            "/usr/local",
            "/lib64",
            "/var/run/docker.sock",
            "/data/../etc",
            "/a/./b",
        ] {
            let m = MountSpec {
                source: "x".into(),
                target: target.into(),
                read_only: false,
                pinned: None,
            };
            let err = m.check_target().unwrap_err().to_string();
            assert!(!err.contains('\n'), "{err}");
        }
        let ok = MountSpec {
            source: "x".into(),
            target: "/data".into(),
            read_only: false,
            pinned: None,
        };
        ok.check_target().unwrap();
        assert!(check_all(&vec![ok.clone(); 2]).is_err());
        let many: Vec<_> = (0..=MAX_MOUNTS)
            .map(|i| MountSpec {
                target: format!("/m{i}"),
                ..ok.clone()
            })
            .collect();
        assert!(check_all(&many).is_err());
        assert!(check_all(&many[..MAX_MOUNTS]).is_ok());
    }

    #[test]
    fn host_paths_resolve_inside_the_workspace_or_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("data")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
        let mount = |source: &str, target: &str| MountSpec {
            source: source.into(),
            target: target.into(),
            read_only: false,
            pinned: None,
        };
        let mut m = mount("data", "/data");
        m.resolve_in(&ws).unwrap();
        assert_eq!(m.source, std::fs::canonicalize(ws.join("data")).unwrap());
        for (source, target) in [
            ("etc-link", "/data"),
            ("data/../..", "/data"),
            ("/etc", "/data"),
            ("missing", "/data"),
            ("data", ws.to_str().unwrap()),
            ("data", ws.join("sub").to_str().unwrap()),
        ] {
            let err = mount(source, target).resolve_in(&ws).unwrap_err();
            assert!(
                matches!(err, Error::InvalidValue { what: "mount", .. }),
                "{source}: {err}"
            );
        }
        // The project's config files are mounted by berth already: refused
        // in one line, not left to the engine's "Duplicate mount point".
        std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
        let err = mount(".devcontainer", "/dc")
            .resolve_in(&ws)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("project config file") && !err.contains('\n'),
            "{err}"
        );
    }
}
