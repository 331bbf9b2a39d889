//! `berth exec`: a command run inside a running container job, as the
//! engine's exec. It gets no more than the job has: never privileged, the
//! container's own user, environment and working directory (the engine's
//! defaults for an exec), and the container's capabilities (all dropped),
//! `no-new-privileges`, limits and network apply to it as to the job.
//!
//! The engine has no way to stop an exec, so one that must end early (its
//! time is up, or its caller went away) is killed here with its children,
//! by the host pid the engine reports, when the engine is on this machine
//! (a remote engine's processes are out of reach: that is said instead).

use std::collections::HashMap;

use bollard::container::LogOutput;
use bollard::models::ExecConfig;
use bytes::Bytes;
use futures_util::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::client::OutputStream;
use super::{DockerClient, Engine, Place};
use crate::error::Result;
use crate::model::Stream;

/// Largest output frame read from the engine: a longer line comes in
/// pieces, so one frame never holds more than this.
pub const EXEC_FRAME_BYTES: usize = 32 * 1024;

/// A started exec: its output, and what is needed to end it.
pub struct Exec {
    docker: DockerClient,
    id: String,
    /// stdout and stderr as the engine sends them, until the command ends.
    output: OutputStream,
    /// The engine is on this machine: its pids are this machine's.
    local: bool,
}

impl Engine {
    /// Run `argv` in container `container` (which must be running).
    pub async fn exec(&self, container: &str, argv: Vec<String>) -> Result<Exec> {
        let docker = self.client().await?.clone();
        let config = ExecConfig {
            attach_stdin: Some(false),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(argv),
            // No user, environment or directory of its own: the
            // container's apply, and so do its hardened settings.
            privileged: Some(false),
            ..Default::default()
        };
        let id = docker.create_exec(container, config).await?;
        let output = docker.start_exec(&id, EXEC_FRAME_BYTES).await?;
        let local = matches!(self.endpoint.place(), Place::Local);
        Ok(Exec {
            docker,
            id,
            output,
            local,
        })
    }
}

impl Exec {
    /// The next piece of output (at most [`EXEC_FRAME_BYTES`]); `None`
    /// once the command's output ended.
    pub async fn next(&mut self) -> Option<Result<(Stream, Bytes)>> {
        loop {
            return Some(match self.output.next().await? {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                    Ok((Stream::Stdout, message))
                }
                Ok(LogOutput::StdErr { message }) => Ok((Stream::Stderr, message)),
                Ok(LogOutput::StdIn { .. }) => continue,
                Err(e) => Err(e),
            });
        }
    }

    /// The command's exit code once its output ended (the engine may take
    /// a moment to record it); `None` if it never says.
    pub async fn exit_code(&mut self) -> Result<Option<i32>> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let inspected = self.docker.inspect_exec(&self.id).await?;
            if inspected.running != Some(true) {
                return Ok(inspected.exit_code.map(|c| c as i32));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Kill the command and every process under it; false when it could
    /// not be reached (a remote engine, or not permitted).
    pub async fn kill(&mut self) -> bool {
        if !self.local {
            return false;
        }
        // Asked now, while it runs: the engine reports its host pid.
        let Ok(inspected) = self.docker.inspect_exec(&self.id).await else {
            return false;
        };
        if inspected.running != Some(true) {
            return true;
        }
        let Some(pid) = inspected
            .pid
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 1)
        else {
            return false;
        };
        let mut ok = true;
        for p in tree(pid) {
            ok &= kill(Pid::from_raw(p as i32), Signal::SIGKILL).is_ok() || p != pid;
        }
        ok
    }
}

/// `root` and its descendants, from `/proc` (parents before children).
fn tree(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(ppid) = parent_of(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut all = vec![root];
    let mut i = 0;
    while i < all.len() {
        all.extend(children.get(&all[i]).into_iter().flatten().copied());
        i += 1;
    }
    all
}

/// The parent pid of `pid` (field 4 of `/proc/PID/stat`, after the name,
/// which may hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_tree_includes_its_children() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let me = std::process::id();
        let all = super::tree(me);
        assert_eq!(all[0], me);
        assert!(all.contains(&child.id()), "{all:?}");
        assert_eq!(super::parent_of(child.id()), Some(me));
        let _ = child.kill();
        let _ = child.wait();
    }
}
