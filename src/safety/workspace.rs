//! The workspace guard: a job's working directory must lie inside the
//! workspace root once both are canonicalised (symlinks followed, `..`
//! resolved). A lexical `starts_with` on the paths as given would let
//! `ws/../etc` and `ws/link-to-etc` through; comparing real paths does not.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Holds the configured workspace root; resolved at each check, so a root
/// created (or re-pointed) after the manager started is seen as it is now.
#[derive(Debug, Clone)]
pub struct WorkspaceGuard {
    root: PathBuf,
}

impl WorkspaceGuard {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        WorkspaceGuard { root: root.into() }
    }

    /// The real path of `cwd` if it is inside the workspace.
    pub fn check(&self, cwd: &Path) -> Result<PathBuf> {
        let root = std::fs::canonicalize(&self.root)
            .map_err(|e| Error::io("resolve the workspace root", &self.root, e))?;
        let real = std::fs::canonicalize(cwd).map_err(|_| Error::BadCwd {
            path: cwd.to_path_buf(),
        })?;
        if real.starts_with(&root) {
            Ok(real)
        } else {
            Err(Error::OutsideWorkspace { path: real, root })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn inside_passes_and_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        symlink(ws.join("sub/deeper"), ws.join("inner-link")).unwrap();
        symlink(dir.path().join("outside"), ws.join("outer-link")).unwrap();
        let guard = WorkspaceGuard::new(&ws);
        let real_ws = std::fs::canonicalize(&ws).unwrap();

        for ok in [
            ws.clone(),
            ws.join("sub"),
            ws.join("sub/deeper/.."),
            ws.join("inner-link"),
        ] {
            let real = guard.check(&ok).unwrap();
            assert!(real.starts_with(&real_ws), "{}", ok.display());
        }
        for bad in [
            ws.join(".."),
            ws.join("sub/../../outside"),
            ws.join("outer-link"),
            "/".into(),
        ] {
            match guard.check(&bad) {
                Err(Error::OutsideWorkspace { path, root }) => {
                    assert_eq!(root, real_ws);
                    assert!(!path.starts_with(&real_ws), "{}", path.display());
                }
                other => panic!("{}: {other:?}", bad.display()),
            }
        }
        let err = guard.check(&ws.join("outer-link")).unwrap_err().to_string();
        assert!(
            err.contains("outside") && err.contains(&*real_ws.to_string_lossy()) && !err.contains('\n'),
            "{err}"
        );
        assert!(matches!(guard.check(&ws.join("nope")), Err(Error::BadCwd { .. })));
    }

    #[test]
    fn a_symlinked_root_is_resolved_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("real/sub")).unwrap();
        symlink(dir.path().join("real"), dir.path().join("ws")).unwrap();
        let guard = WorkspaceGuard::new(dir.path().join("ws"));
        assert!(guard.check(&dir.path().join("ws/sub")).is_ok());
        assert!(guard.check(&dir.path().join("real/sub")).is_ok());
    }
}
