//! Container jobs' defaults: the image and when it is pulled, the CPU,
//! memory and process limits, the uid:gid a job runs as, and what it may
//! reach (network, egress, published ports, a scoped engine). Which of these
//! a project file may loosen without trust is `loosen.rs`'s business.

use crate::error::{Error, Result};
use crate::model::{Limits, host_cpus};

/// Default sandbox image, built from `images/sandbox`.
pub const DEFAULT_IMAGE: &str = "berth/sandbox:latest";
/// Default limit on one image pull (seconds): large images on slow links
/// take minutes; a pull that is stuck must still end.
pub const DEFAULT_PULL_TIMEOUT_SECS: f64 = 600.0;
/// How long a running container job waits for an engine that stopped
/// answering (a restart, a blip) before it is given up as lost: long enough
/// for an engine restart, bounded so a dead engine's jobs end.
pub const DEFAULT_ENGINE_PATIENCE_SECS: f64 = 300.0;
/// Default CPU limit of a container job (capped at the host's CPUs).
pub const DEFAULT_CPUS: f64 = 2.0;
/// Default memory limit of a container job.
pub const DEFAULT_MEMORY: u64 = 2 << 30;
/// Default process limit of a container job.
pub const DEFAULT_PIDS: i64 = 512;
/// Hosts a job behind the egress proxy may reach when the config names
/// none (`defaults` in `egress_allow`): the common package registries.
pub use crate::net::DEFAULT_EGRESS_ALLOW;
/// Default most children (containers started through its scoped engine) a
/// job may have at once.
pub const DEFAULT_MAX_CHILDREN: usize = 8;
/// The uid:gid a root caller's container jobs run as when root also owns
/// the workspace (the conventional `nobody`).
pub const NOBODY: u32 = 65534;

/// For a stored `Config` without the key (it came later).
pub(super) fn default_max_children() -> usize {
    DEFAULT_MAX_CHILDREN
}

/// 2 CPUs (or all of them on a smaller machine), 2 GiB, 512 processes.
pub(super) fn default_limits() -> Limits {
    Limits {
        cpus: Some(DEFAULT_CPUS.min(host_cpus() as f64)),
        memory: Some(DEFAULT_MEMORY),
        pids: Some(DEFAULT_PIDS),
    }
}

/// The uid:gid of this process: whoever asked the manager for the job.
pub fn caller_user() -> String {
    format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid())
}

/// `root`, or numeric `UID:GID` (names would be looked up in the image,
/// which may not know them).
pub fn validate_user(user: String) -> Result<String> {
    let numeric = |s: &str| {
        !s.is_empty() && s.len() <= 10 && s.chars().all(|c| c.is_ascii_digit()) && s.parse::<u32>().is_ok()
    };
    let ok = user == "root"
        || user
            .split_once(':')
            .is_some_and(|(u, g)| numeric(u) && numeric(g));
    if ok {
        Ok(user)
    } else {
        Err(Error::InvalidValue {
            what: "user",
            input: user,
            message: "expected UID:GID (numbers, e.g. 1000:1000) or root".into(),
        })
    }
}

/// `user` in `berth config`: the value, or whom jobs run as when unset.
pub(super) fn describe_user(user: &Option<String>, workspace: &std::path::Path) -> String {
    match (user, nix::unistd::getuid().is_root()) {
        (Some(u), _) => u.clone(),
        (None, false) => format!("{} (the caller)", caller_user()),
        (None, true) => format!(
            "{} (a root caller: the workspace's owner)",
            container_user(user, workspace)
        ),
    }
}

/// `max_children`: zero children is `engine = "none"`, said as such.
pub(super) fn max_children(key: &'static str, v: usize) -> Result<usize> {
    match v {
        0 => Err(Error::InvalidValue {
            what: key,
            input: "0".into(),
            message: "must be at least 1 (set engine = \"none\" for no children)".into(),
        }),
        v => Ok(v),
    }
}

/// The `uid:gid` (or `root`) container jobs run as: `user` when set, else
/// the caller's own uid:gid. A root caller's jobs never run as root unless
/// asked (`user = "root"` in the user's config or a trusted file): they run
/// as the owner of `workspace`, whom its files are for, or as [`NOBODY`]
/// when root owns the workspace too.
pub(super) fn container_user(user: &Option<String>, workspace: &std::path::Path) -> String {
    if let Some(u) = user {
        return u.clone();
    }
    if !nix::unistd::getuid().is_root() {
        return caller_user();
    }
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(workspace) {
        Ok(m) if m.uid() != 0 => format!("{}:{}", m.uid(), owner_group(m.uid(), m.gid())),
        _ => format!("{NOBODY}:{NOBODY}"),
    }
}

/// The group a root caller's job runs with: the workspace's, unless that is
/// root's (a directory root made and gave away): then the owner's primary
/// group, or [`NOBODY`] — never gid 0, whose set-gid files would be root's.
fn owner_group(uid: u32, gid: u32) -> u32 {
    if gid != 0 {
        return gid;
    }
    nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map(|u| u.gid.as_raw())
        .filter(|g| *g != 0)
        .unwrap_or(NOBODY)
}

/// An engine runtime's name as `daemon.json` may spell it: a short word
/// (it is passed to the engine as is).
pub fn runtime_name(v: String) -> crate::error::Result<String> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    match ok {
        true => Ok(v),
        false => Err(crate::error::Error::InvalidValue {
            what: "gvisor_runtime",
            input: v.chars().take(80).collect(),
            message: "expected the name of an engine runtime (letters, digits, `-`, `_`, `.`; e.g. runsc)"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root caller's job in a directory root made and gave to a user
    /// (group still root's) never runs with gid 0.
    #[test]
    fn a_root_callers_job_never_gets_gid_0() {
        if !nix::unistd::getuid().is_root() {
            return; // only a root caller takes the workspace's owner
        }
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::chown(dir.path(), Some(4242.into()), Some(0.into())).unwrap();
        assert_eq!(container_user(&None, dir.path()), format!("4242:{NOBODY}"));
        nix::unistd::chown(dir.path(), Some(4242.into()), Some(4343.into())).unwrap();
        assert_eq!(container_user(&None, dir.path()), "4242:4343");
    }
}
