//! Set-uid and set-gid bits a job left in the workspace are cleared when it
//! ends.
//!
//! The engine's API cannot mount the workspace `nosuid`, and inside the
//! container `no-new-privileges` makes such bits inert, but on the host they
//! are not: a job running as uid X that leaves `chmod 4755 x` in a workspace
//! other users can reach hands them uid X (root, when a root caller's job ran
//! as root). So when a container job ends, the workspace is walked (no
//! symlink followed, other mounts not entered) and every regular file whose
//! status changed since the job started loses those bits, just after the
//! job's end is recorded (`manager/supervise.rs`: the end does not wait for
//! the walk); the record and a `swept` event say how many. The walk is
//! bounded in entries and time and says when it stopped short. What a job leaves while it still runs is not covered: SECURITY.md
//! says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::images::beneath::{Dir, Kind};

/// Most entries one sweep looks at.
pub const MAX_ENTRIES: u64 = 1_000_000;
/// Longest one sweep runs.
pub const MAX_TIME: Duration = Duration::from_secs(10);

/// A sweep to run once the job ended: its workspace, and when it started.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub root: PathBuf,
    pub since: SystemTime,
    /// The uid the job ran as, when known: a set-uid file lends it.
    pub uid: Option<u32>,
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Files whose set-uid/set-gid bits were cleared.
    pub cleared: u64,
    /// Entries looked at.
    pub entries: u64,
    /// The walk stopped at its entry or time bound before the end.
    pub incomplete: bool,
}

impl Sweep {
    /// Whether another user could reach a file in the workspace at all: no
    /// when the workspace or one of its parents lets neither its group nor
    /// others through (mode `..0` for search), and is owned by the job's
    /// own uid or by root. Then a set-uid file there lends the job's uid to
    /// nobody who lacks it, and the walk (a whole `node_modules`) is skipped.
    pub fn needed(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let mut at = Some(self.root.as_path());
        while let Some(dir) = at {
            if let Ok(m) = std::fs::metadata(dir)
                && m.mode() & 0o011 == 0
                && (m.uid() == 0 || Some(m.uid()) == self.uid)
            {
                return false;
            }
            at = dir.parent();
        }
        true
    }

    /// Walk the workspace and clear the bits (blocking: call it on a
    /// blocking thread). Errors on single entries are skipped: a file the
    /// job removed meanwhile is nothing to clear.
    pub fn run(&self) -> Swept {
        let mut out = Swept::default();
        let Ok(root) = Dir::open_root(&self.root) else {
            return out;
        };
        // ctime is second-granular on some file systems: allow one second.
        let since = self
            .since
            .checked_sub(Duration::from_secs(1))
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        let dev = root.ident().dev;
        let started = Instant::now();
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            let Ok(items) = dir.items() else { continue };
            for item in items {
                out.entries += 1;
                if out.entries > MAX_ENTRIES || started.elapsed() > MAX_TIME {
                    out.incomplete = true;
                    return out;
                }
                match item.kind {
                    // Another mount (a tmpfs, a volume) is not the workspace.
                    Kind::Dir if item.ident.dev == dev => {
                        if let Ok(sub) = dir.subdir(&item.name, item.ident) {
                            stack.push(sub);
                        }
                    }
                    Kind::File
                        if item.mode & 0o6000 != 0
                            && item.stamp[4] >= since
                            && dir.clear_setid(&item.name, item.ident).unwrap_or(false) =>
                    {
                        out.cleared += 1;
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// Sweep `root` for a job that started at `since` (see [`Sweep::run`]).
pub fn sweep(root: &Path, since: SystemTime) -> Swept {
    Sweep {
        root: root.to_path_buf(),
        since,
        uid: None,
    }
    .run()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_setid_files_lose_their_bits_and_nothing_outside_is_touched() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "x").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let before = SystemTime::now();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        for (p, m) in [
            ("x", 0o4755),
            ("a/b/y", 0o2711),
            ("a/z", 0o6000),
            ("plain", 0o755),
        ] {
            std::fs::write(ws.join(p), "#!").unwrap();
            std::fs::set_permissions(ws.join(p), std::fs::Permissions::from_mode(m)).unwrap();
        }
        std::os::unix::fs::symlink(&victim, ws.join("link")).unwrap();
        let swept = sweep(ws, before);
        assert_eq!((swept.cleared, swept.incomplete), (3, false));
        assert_eq!(mode(&ws.join("x")), 0o755);
        assert_eq!(mode(&ws.join("a/b/y")), 0o711);
        assert_eq!(mode(&ws.join("a/z")), 0o000);
        assert_eq!(mode(&ws.join("plain")), 0o755);
        assert_eq!(mode(&victim), 0o4755, "a link is never followed");
        // Files not changed since the job started keep their bits.
        std::fs::set_permissions(ws.join("x"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        assert_eq!(sweep(ws, later).cleared, 0);
        assert_eq!(mode(&ws.join("x")), 0o4755);
    }

    #[test]
    fn a_workspace_no_other_user_can_reach_needs_no_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("a/ws");
        std::fs::create_dir_all(&ws).unwrap();
        let me = nix::unistd::getuid().as_raw();
        let s = |uid| Sweep {
            root: ws.clone(),
            since: SystemTime::now(),
            uid: Some(uid),
        };
        for d in [dir.path().to_path_buf(), dir.path().join("a"), ws.clone()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // /tmp itself lets everyone through: reachable.
        assert!(s(me).needed());
        std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(!s(me).needed(), "a parent of the job's own (or root's) at 0700");
        std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(s(me).needed(), "its group may pass");
    }
}
