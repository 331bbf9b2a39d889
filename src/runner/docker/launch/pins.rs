//! `-v` mounts pinned from admission to the running container.
//!
//! A path checked and then handed to the engine is a race: the job's
//! workspace is the agent's, and a background job exchanging `data/` with a
//! symlink to `/` (`renameat2(RENAME_EXCHANGE)`) between the check and the
//! engine's mount won a few tries in forty. So the engine never gets the
//! path. Admission opened the directory beneath the workspace root without
//! following a symlink and kept its device and inode (`job/mounts.rs`); the
//! launch opens it the same way again, requires the same directory, and
//! hands the engine `/proc/<berth>/fd/<N>`: a name for that open directory,
//! wherever it is moved and whatever takes its old name. The engine's local
//! volume driver binds it in the engine's own mount namespace (the one this
//! process shares; runc, in the container's new namespace, could not), and
//! the container gets that volume.
//!
//! After the start, what the container got is checked once more from the
//! host while its process runs: the mount at each target, in the
//! container's own mount table (`/proc/PID/mountinfo`), must be the pinned
//! directory; a mismatch, or a table berth may not read, takes the job
//! down. The pin is the guarantee (a job that ended before the look ran
//! with what it gave); the look is a second line of its own (each was
//! planted alone against the race test). Both need berth in the PID
//! namespace of the engine: elsewhere `-v` is refused.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::images::beneath::{Dir, Ident};
use crate::model::JobSpec;

/// The initial PID namespace as `/proc/self/ns/pid` names it
/// (`PROC_PID_INIT_INO`, a constant of the kernel).
const INITIAL_PID_NS: &str = "pid:[4026531836]";

/// The open directories of a job's `-v` mounts, in the spec's order; held
/// until the container runs (the engine binds them at the start).
pub(in crate::runner::docker) struct Pins(Vec<(Dir, String)>);

fn refused(source: &Path, target: &str, message: String) -> Error {
    Error::InvalidValue {
        what: "mount",
        input: format!("{}:{target}", source.display()),
        message,
    }
}

impl Pins {
    /// No mounts: nothing pinned.
    pub fn none() -> Pins {
        Pins(Vec::new())
    }

    /// Open each mount's directory beneath the workspace again (no symlink
    /// followed at any element) and require the one admission saw.
    pub fn open(spec: &JobSpec, workspace: &Path) -> Result<Pins> {
        if spec.mounts.is_empty() {
            return Ok(Pins::none());
        }
        // `/proc/<berth>/fd/N` names this process only in the PID namespace
        // berth runs in: an engine outside it (berth in a container of its
        // own) would read another process's descriptor there. The engine of
        // this machine runs in the initial one, whose inode is fixed.
        if std::fs::read_link("/proc/self/ns/pid").ok() != Some(PathBuf::from(INITIAL_PID_NS)) {
            return Err(refused(
                &spec.mounts[0].source,
                &spec.mounts[0].target,
                "-v needs berth in this machine's own PID namespace (it runs in a container of its own here); run berth on the host, or copy the files into the workspace".into(),
            ));
        }
        let root = std::fs::canonicalize(workspace)
            .map_err(|e| Error::io("resolve the workspace root", workspace, e))?;
        let changed = |source: &Path, target: &str| {
            refused(
                source,
                target,
                "its host path changed since the job was admitted (now a symlink, moved or another directory); nothing was started".into(),
            )
        };
        let mut pins = Vec::new();
        for m in &spec.mounts {
            let rel = m
                .source
                .strip_prefix(&root)
                .map_err(|_| changed(&m.source, &m.target))?;
            let dir = Dir::open_root(&root)
                .and_then(|r| r.dir(rel))
                .map_err(|_| changed(&m.source, &m.target))?;
            let Ident { dev, ino } = dir.ident();
            if m.pinned.is_some_and(|p| p != (dev, ino)) {
                return Err(changed(&m.source, &m.target));
            }
            pins.push((dir, m.target.clone()));
        }
        Ok(Pins(pins))
    }

    /// What the engine mounts for each `-v`, in the spec's order.
    pub fn sources(&self) -> Vec<PathBuf> {
        self.0.iter().map(|(dir, _)| dir.proc_path()).collect()
    }

    /// The running container `pid` (as this machine sees it) has the pinned
    /// directory at every target.
    pub fn verify(&self, pid: Option<u32>, job: &str) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let fail = |why: String| Error::Docker {
            action: "confirm the -v mounts",
            job: job.to_string(),
            message: format!("{why}; berth took the container down"),
        };
        // A job that ended already (no process, or its table gone) ran with
        // what the pin gave it: there is nothing left to look at.
        let Some(pid) = pid else { return Ok(()) };
        let table = match std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) {
            Ok(table) => table,
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) => return Ok(()),
            // Exiting: its mount namespace is already torn down (CI saw a
            // job that echoed and ended before the check read its table).
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EINVAL as i32) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(fail(format!("reading /proc/{pid}/mountinfo: {e}"))),
        };
        for (dir, target) in &self.0 {
            let now = std::fs::read_link(dir.proc_path())
                .map_err(|e| fail(format!("reading the pinned {target}: {e}")))?;
            match mounted_root(&table, target) {
                Some(root) if now.ends_with(&root) => {}
                Some(root) => {
                    return Err(fail(format!(
                        "{target} shows `{}`, not the directory admitted (`{}`)",
                        root.display(),
                        now.display()
                    )));
                }
                None => return Err(fail(format!("nothing is mounted at {target}"))),
            }
        }
        Ok(())
    }
}

/// The path, within its file system, of what is mounted at `target` in a
/// mount table (`mountinfo`: the last mount there is the one seen).
fn mounted_root(table: &str, target: &str) -> Option<PathBuf> {
    table.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        (unescape(point) == target).then(|| PathBuf::from(unescape(root)))
    })
}

/// `mountinfo` writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_mount_at_a_target_is_read_with_its_escapes() {
        let table = "\
22 1 254:0 / / rw - ext4 /dev/vda rw
96 79 254:0 /tmp/ws/data /data rw master:3 - ext4 /dev/vda rw
97 79 254:0 /tmp/a\\040b /data rw - ext4 /dev/vda rw
98 79 0:5 /x /my\\040dir rw - tmpfs tmpfs rw";
        assert_eq!(mounted_root(table, "/data"), Some(PathBuf::from("/tmp/a b")));
        assert_eq!(mounted_root(table, "/my dir"), Some(PathBuf::from("/x")));
        assert_eq!(mounted_root(table, "/other"), None);
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }
}
