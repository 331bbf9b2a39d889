//! Runners execute a job and report how it ended; the manager does the rest.
//!
//! A runner's `launch` returns a [`Launched`]: what came out of the start
//! (pid or container, mapped ports, which limits were applied), a [`Control`]
//! to signal the job, and an `exit` future. The contract that keeps output
//! complete: `exit` resolves only after the process has ended **and** every
//! byte of its output has gone through the job's stream writers.

pub mod docker;
pub(crate) mod drop_worker;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
pub mod host;
pub mod host_mounts;
pub mod host_ports;
mod seam;
pub mod setuid;
pub mod shim;
pub mod swarm;
pub mod tag;

use std::net::IpAddr;
use std::path::PathBuf;

use futures_util::future::BoxFuture;

use crate::model::{AppliedLimits, PortMapping};

pub use seam::{Control, JobControl, Launch, Progress, Runner};

/// Variables that make common runtimes write each line as it comes rather
/// than in 4-8 KiB blocks when their output is a pipe (Python's is block
/// buffered there): without them a server's "Serving on …" banner reaches
/// berth only when the buffer fills or the job ends, and a `--ready-log`
/// wait times out on the most common banner. Set in every job unless the
/// job's own env (or, on the host, the caller's) names the variable.
pub const LINE_BUFFERED: &[(&str, &str)] = &[("PYTHONUNBUFFERED", "1")];

/// File watchers set to poll in `layer` mode, unless the job names them:
/// inotify inside an overlay does not see edits made on the host to the
/// checkout below it, so a dev server's hot reload would miss the user's
/// edits. Each is the switch of a common watcher: chokidar (Vite, nodemon,
/// webpack-dev-server 4), webpack 5's watchpack, Python's watchfiles
/// (uvicorn, Django with watchfiles), TypeScript's `tsc --watch`.
pub const LAYER_POLLING: &[(&str, &str)] = &[
    ("CHOKIDAR_USEPOLLING", "true"),
    ("WATCHPACK_POLLING", "true"),
    ("WATCHFILES_FORCE_POLLING", "true"),
    ("TSC_WATCHFILE", "DynamicPriorityPolling"),
    ("TSC_WATCHDIRECTORY", "DynamicPriorityPolling"),
];

/// How a job's process ended, as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// The kernel's OOM killer ended it (containers).
    Oom,
    /// The runner lost track of it (its container gone, wait failed).
    Lost(String),
    /// The engine stopped answering and did not answer again within its
    /// patience: the container may still run (and still be berth's to
    /// remove once the engine answers).
    Stranded(String),
}

/// What a successful launch gives back.
pub struct Launched {
    pub pid: Option<u32>,
    pub container_id: Option<String>,
    pub ports: Vec<PortMapping>,
    pub limits: AppliedLimits,
    /// The container's own address, for readiness probes that must reach the server itself.
    pub internal_ip: Option<IpAddr>,
    pub control: Control,
    pub exit: BoxFuture<'static, Exit>,
    /// Clear set-uid/set-gid bits the job leaves in this workspace once it
    /// ended (container jobs; see `setuid.rs`).
    pub sweep: Option<setuid::Sweep>,
    /// A container job's scoped engine: its children and its refusals.
    pub engine: Option<docker::EngineHandle>,
    /// The cluster node it runs on, as the card names it (a swarm job).
    pub node: Option<String>,
}

/// Resolve a job's working directory against the workspace root.
pub fn resolve_cwd(workspace: &std::path::Path, cwd: Option<&PathBuf>) -> PathBuf {
    match cwd {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => workspace.join(p),
        None => workspace.to_path_buf(),
    }
}
