//! `berth exec JOB -- CMD…` (API `POST /v1/jobs/{id}/exec`): a command run
//! inside a running container job, like `docker exec`. It is not a job of
//! its own (no record, no slot): it lives as long as its caller reads it.
//!
//! The command passes the same filter as a job's (the job's project's
//! rules, refusals in the security log), runs with the container's
//! hardening (`runner/docker/exec.rs`), and is bounded: its output is
//! handed over a few frames at a time (a caller that reads slowly slows the
//! command, nothing piles up), and `timeout` kills it with its children.
//! A caller that goes away kills it too.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::Manager;
use crate::error::{Error, Result};
use crate::model::{JobId, JobSpec, JobStatus, RunnerKind, Stream};

/// Output frames in flight between the engine and the caller.
const IN_FLIGHT: usize = 8;

/// What `berth exec` asks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// Program and arguments, run directly (no shell unless it names one).
    pub argv: Vec<String>,
    /// Seconds before the command is killed; unset = no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
}

/// How an exec ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecEnd {
    /// The command's exit code; unset when it was killed or never said.
    pub exit_code: Option<i32>,
    /// Killed because `timeout` ran out.
    #[serde(default)]
    pub timed_out: bool,
    /// What went wrong on the way, if anything (the engine's stream broke,
    /// the command could not be killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One piece of an exec's answer: output, then exactly one end.
#[derive(Debug, Clone)]
pub enum ExecEvent {
    Output(Stream, Bytes),
    End(ExecEnd),
}

impl Manager {
    /// Run `req.argv` in job `id`'s container on behalf of `client`; its
    /// output and end arrive on the receiver. Refused (nothing runs) for an
    /// unknown, queued, ended or host job and for a blocked command.
    pub async fn exec(
        &self,
        id: &JobId,
        req: ExecRequest,
        client: &str,
    ) -> Result<mpsc::Receiver<ExecEvent>> {
        if req.argv.is_empty() || req.argv[0].is_empty() {
            return Err(Error::InvalidSpec(
                "no command given: `berth exec JOB -- CMD [ARGS…]`".into(),
            ));
        }
        if let Some(t) = req.timeout.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(Error::InvalidValue {
                what: "timeout",
                input: t.to_string(),
                message: "must be a positive number of seconds".into(),
            });
        }
        let info = self.info(id)?;
        let refuse = |message: String| Error::NotRunning {
            job: info.id.clone(),
            message,
        };
        let container = match (&info.status, info.runner, &info.container_id) {
            (JobStatus::Running, _, Some(c)) => c.clone(),
            (JobStatus::Queued | JobStatus::Starting, _, _) => {
                return Err(refuse(format!(
                    "has not started yet ({}): wait for it (`berth wait {id}`), then exec",
                    info.status.name()
                )));
            }
            (JobStatus::Running, Some(RunnerKind::Swarm), _) => {
                return Err(refuse(format!(
                    "runs on a swarm node ({}), whose engine berth does not reach (only the swarm's manager): `berth exec` needs a job of this engine",
                    info.node.as_deref().unwrap_or("unknown")
                )));
            }
            (_, Some(RunnerKind::Host), _) | (JobStatus::Running, _, None) => {
                let at = info
                    .spec
                    .cwd
                    .clone()
                    .or(info.workspace.clone())
                    .unwrap_or_default();
                return Err(refuse(format!(
                    "runs on the host: `berth exec` needs a container job; run the command yourself in {}",
                    at.display()
                )));
            }
            (s, _, _) => {
                return Err(refuse(format!(
                    "has ended ({}) and its container is gone: exec needs a running job (`berth resume {id}` runs its command again)",
                    s.name()
                )));
            }
        };
        // The job's project decides, as it did for the job: its rules and
        // workspace, the exec's command in place of the job's.
        let safety = {
            let reg = self.inner.registry.lock().unwrap();
            reg.get(id)
                .ok()
                .and_then(|e| e.live.as_ref().map(|l| l.safety.clone()))
        };
        let Some(safety) = safety else {
            return Err(refuse("has just ended: exec needs a running job".into()));
        };
        let cwd = info
            .spec
            .cwd
            .clone()
            .or(info.workspace.clone())
            .unwrap_or_default();
        let spec = JobSpec {
            argv: req.argv.clone(),
            shell: None,
            ..info.spec.clone()
        };
        safety.check_bounded(&spec, &cwd, client).await?;
        let exec = self.inner.engine.exec(&container, req.argv).await?;
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let timeout = req.timeout.map(std::time::Duration::from_secs_f64);
        tokio::spawn(pump(exec, tx, timeout));
        Ok(rx)
    }
}

/// Hand the exec's output to `tx` until it ends, its time is up or the
/// receiver is gone; then its end.
async fn pump(
    mut exec: crate::runner::docker::Exec,
    tx: mpsc::Sender<ExecEvent>,
    timeout: Option<std::time::Duration>,
) {
    let expiry = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expiry);
    let mut end = ExecEnd::default();
    loop {
        let item = tokio::select! {
            item = exec.next() => item,
            () = &mut expiry => {
                end.timed_out = true;
                if !exec.kill().await {
                    end.note = Some("its time ran out, and it could not be killed: it may still run in the container".into());
                }
                break;
            }
        };
        let (stream, bytes) = match item {
            None => break,
            Some(Ok(piece)) => piece,
            Some(Err(e)) => {
                end.note = Some(e.to_string());
                exec.kill().await;
                break;
            }
        };
        if tx.send(ExecEvent::Output(stream, bytes)).await.is_err() {
            // Nobody reads it any more: it does not run on unseen.
            exec.kill().await;
            return;
        }
    }
    if !end.timed_out && end.note.is_none() {
        match exec.exit_code().await {
            Ok(code) => end.exit_code = code,
            Err(e) => end.note = Some(e.to_string()),
        }
    }
    let _ = tx.send(ExecEvent::End(end)).await;
}
