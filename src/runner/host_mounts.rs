//! A host job's workspace in `layer` or `read-only` mode: the shim puts the
//! job in a mount namespace of its own (and, for a user without privilege,
//! a user namespace mapping only the user's own ids) and mounts there,
//! over the workspace's path, the layer's overlay (`userxattr`, as the
//! engine's volume does) or a read-only bind of the workspace. The job
//! sees its workspace at the same path; nothing changes outside its
//! namespace, and the mounts go with its last process.
//!
//! Where the kernel refuses (unprivileged user namespaces switched off, an
//! old kernel without unprivileged overlayfs), the mode is refused in one
//! line before the job starts (`host/mounts.rs`, one probe per manager):
//! never a silent `direct`.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use nix::mount::MsFlags;
use nix::sched::CloneFlags;

/// How the shim mounts the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceMount {
    /// The layer's overlay over `lower` (the workspace's path).
    Overlay {
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
    },
    /// The workspace bound read-only over itself.
    ReadOnly(PathBuf),
}

impl WorkspaceMount {
    /// The shim's arguments that ask for it (before `--`).
    pub fn args(&self) -> Vec<OsString> {
        match self {
            WorkspaceMount::Overlay { lower, upper, work } => {
                vec!["--overlay".into(), lower.into(), upper.into(), work.into()]
            }
            WorkspaceMount::ReadOnly(dir) => vec!["--read-only".into(), dir.into()],
        }
    }

    /// The mount `args` ask for, and the arguments after it.
    pub fn parse(args: &[OsString]) -> (Option<WorkspaceMount>, &[OsString]) {
        match args.first().and_then(|a| a.to_str()) {
            Some("--overlay") if args.len() >= 4 => (
                Some(WorkspaceMount::Overlay {
                    lower: args[1].clone().into(),
                    upper: args[2].clone().into(),
                    work: args[3].clone().into(),
                }),
                &args[4..],
            ),
            Some("--read-only") if args.len() >= 2 => {
                (Some(WorkspaceMount::ReadOnly(args[1].clone().into())), &args[2..])
            }
            _ => (None, args),
        }
    }

    /// Enter a mount namespace of this process's own and mount the
    /// workspace there; then enter the working directory again, through the
    /// new mount. The process must still be single-threaded.
    pub fn enter(&self) -> io::Result<()> {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        if uid.is_root() {
            nix::sched::unshare(CloneFlags::CLONE_NEWNS)?;
        } else {
            nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)?;
            std::fs::write("/proc/self/setgroups", "deny")?;
            std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
            std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        }
        // Nothing mounted here reaches the host's namespace.
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )?;
        match self {
            WorkspaceMount::Overlay { lower, upper, work } => {
                let data = format!(
                    "lowerdir={},upperdir={},workdir={},userxattr",
                    lower.display(),
                    upper.display(),
                    work.display()
                );
                nix::mount::mount(
                    Some("overlay"),
                    lower,
                    Some("overlay"),
                    MsFlags::empty(),
                    Some(data.as_str()),
                )?;
            }
            WorkspaceMount::ReadOnly(dir) => {
                nix::mount::mount(
                    Some(dir),
                    dir,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )?;
                // A remount keeps the flags the kernel locked on it (nosuid…).
                let locked = nix::sys::statvfs::statvfs(dir.as_path())?.flags();
                let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
                use nix::sys::statvfs::FsFlags;
                for (have, keep) in [
                    (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
                    (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
                    (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
                ] {
                    if locked.contains(have) {
                        flags |= keep;
                    }
                }
                nix::mount::mount(None::<&str>, dir, None::<&str>, flags, None::<&str>)?;
            }
        }
        let cwd = std::env::current_dir()?;
        std::env::set_current_dir(cwd)
    }
}
