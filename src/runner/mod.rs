//! Runners execute a job and report how it ended; the manager does the rest.
//!
//! A runner's `launch` returns a [`Launched`]: what came out of the start
//! (pid or container, mapped ports, which limits were applied), a [`Control`]
//! to signal the job, and an `exit` future. The contract that keeps output
//! complete: `exit` resolves only after the process has ended **and** every
//! byte of its output has gone through the job's stream writers.

pub mod docker;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
pub mod host;
pub mod host_ports;
pub mod setuid;
pub mod shim;
pub mod tag;

use std::net::IpAddr;
use std::path::PathBuf;

use futures_util::future::BoxFuture;

use crate::model::{AppliedLimits, PortMapping};

/// Variables that make common runtimes write each line as it comes rather
/// than in 4-8 KiB blocks when their output is a pipe (Python's is block
/// buffered there): without them a server's "Serving on …" banner reaches
/// berth only when the buffer fills or the job ends, and a `--ready-log`
/// wait times out on the most common banner. Set in every job unless the
/// job's own env (or, on the host, the caller's) names the variable.
pub const LINE_BUFFERED: &[(&str, &str)] = &[("PYTHONUNBUFFERED", "1")];

/// How a job's process ended, as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// The kernel's OOM killer ended it (containers).
    Oom,
    /// The runner lost track of it (engine gone, wait failed).
    Lost(String),
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
}

/// How to signal a running job.
#[derive(Clone)]
pub enum Control {
    Host(host::HostControl),
    Docker(docker::DockerControl),
    /// A scripted job of the fake runner (tests).
    #[cfg(any(test, feature = "test-util"))]
    Fake(fake::FakeControl),
}

impl Control {
    /// Send `signal` (SIGTERM for a polite stop) to the whole job.
    pub async fn signal(&self, signal: i32) {
        match self {
            Control::Host(h) => host_signal(h, signal).await,
            Control::Docker(d) => d.signal(signal).await,
            #[cfg(any(test, feature = "test-util"))]
            Control::Fake(f) => f.signal(signal),
        }
    }

    /// Kill the job outright.
    pub async fn kill(&self) {
        match self {
            Control::Host(h) => host_signal(h, libc_sigkill()).await,
            Control::Docker(d) => d.signal(libc_sigkill()).await,
            #[cfg(any(test, feature = "test-util"))]
            Control::Fake(f) => f.signal(libc_sigkill()),
        }
    }

    /// Remove what the job started through its scoped engine (children,
    /// networks, volumes): before the job counts as ended.
    pub async fn end_children(&self) {
        if let Control::Docker(d) = self {
            d.end_children().await;
        }
    }

    /// Clean up after the job ended and its output was read: the container
    /// is removed in the background (the job can be answered meanwhile);
    /// the engine's teardown finishes a removal still under way.
    pub fn cleanup(&self) {
        if let Control::Docker(d) = self {
            d.remove_later();
        }
    }

    /// Synchronous last-resort kill, for `Drop` paths that cannot await.
    pub fn kill_now(&self) {
        match self {
            Control::Host(h) => h.signal(libc_sigkill()),
            Control::Docker(d) => d.remove_blocking(),
            #[cfg(any(test, feature = "test-util"))]
            Control::Fake(f) => f.kill_now(),
        }
    }
}

/// Signal a host job off the async workers: a KILL walks `/proc` for the
/// job's descendants and may retry for up to `shim::KILL_LIMIT`.
async fn host_signal(h: &host::HostControl, signal: i32) {
    let h = h.clone();
    if tokio::task::spawn_blocking(move || h.signal(signal))
        .await
        .is_err()
    {
        tracing::warn!(signal, "signalling a host job failed (its thread panicked)");
    }
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}

/// Resolve a job's working directory against the workspace root.
pub fn resolve_cwd(workspace: &std::path::Path, cwd: Option<&PathBuf>) -> PathBuf {
    match cwd {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => workspace.join(p),
        None => workspace.to_path_buf(),
    }
}
