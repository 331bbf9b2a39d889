//! gVisor as a job's runtime (`isolation = "gvisor"`): a kernel of
//! gVisor's own between the job's system calls and the host's.
//!
//! berth does not install or configure gVisor: the engine must have a
//! runtime registered under `gvisor_runtime` (default `runsc`) in its
//! `daemon.json`, which berth reads from the engine's `/info` before each
//! such job. An unregistered one refuses the job in one line with the lines
//! to add: a job asked to run under gVisor never runs under runc instead.
//!
//! Registered as below, `runsc` uses the container's network namespace
//! through the host's stack (`--network=host`): berth's networks, its pause
//! containers, the egress proxy and the port forwarder work unchanged.
//! gVisor's own network stack (the default) refuses to start in a network
//! namespace it does not own on older releases, and `--platform=ptrace`
//! works where KVM is not available (slower system calls).

use super::DockerClient;
use crate::error::{Error, Result};
use crate::model::{Isolation, JobSpec};

/// What to add to the engine's `/etc/docker/daemon.json` for `name`.
pub fn daemon_json(name: &str) -> String {
    format!(
        r#""runtimes": {{"{name}": {{"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}}}}"#
    )
}

/// The engine runtime a job runs under: `None` for the engine's default;
/// the registered gVisor runtime for `isolation = "gvisor"`, or a refusal.
pub(super) async fn runtime(docker: &DockerClient, spec: &JobSpec, name: &str) -> Result<Option<String>> {
    if spec.isolation.unwrap_or_default() != Isolation::Gvisor {
        return Ok(None);
    }
    match registered(docker).await?.iter().any(|r| r == name) {
        true => Ok(Some(name.to_string())),
        false => Err(unregistered(name)),
    }
}

/// The runtimes the engine has registered (`/info` → `Runtimes`).
pub async fn registered(docker: &DockerClient) -> Result<Vec<String>> {
    let info = docker.info().await?;
    Ok(info.runtimes.map(|r| r.into_keys().collect()).unwrap_or_default())
}

fn unregistered(name: &str) -> Error {
    Error::InvalidSpec(format!(
        "isolation = \"gvisor\" needs the engine runtime `{name}`, which this engine has not registered; add {} to /etc/docker/daemon.json (Debian: apt install runsc) and send dockerd a SIGHUP (no restart), or run with --isolation container",
        daemon_json(name)
    ))
}
