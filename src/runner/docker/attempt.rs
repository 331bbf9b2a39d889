//! One create → wait(next-exit) → attach → start round of a container
//! job (see `launch.rs` for why in this order), what a failed round means
//! for the next one ([`AttemptError`]), and the small pieces the launch
//! uses after it: feeding the job's input and reading the engine's
//! warnings into the applied limits.

use std::pin::Pin;

use bollard::query_parameters::{AttachContainerOptions, CreateContainerOptions};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::create::{self, Context, PortPlan};
use super::exit::{OutputStream, Waited, wait_exit};
use super::{DockerClient, remove_container};
use crate::error::{EngineFailure, Error};
use crate::model::{AppliedLimits, JobSpec};

/// A container that was created, attached and started.
pub(super) struct Started {
    pub container_id: String,
    pub output: OutputStream,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    pub wait: JoinHandle<Waited>,
    pub applied: AppliedLimits,
    pub warnings: Vec<String>,
}

/// Why one create/start attempt failed.
pub(super) enum AttemptError {
    /// An explicitly asked host port was taken after all: retry engine-chosen.
    PortTaken(Error),
    /// The job network was removed meanwhile: make it again and retry.
    NetworkGone(Error),
    /// A container already has this job's name (a leftover): clear it and retry.
    NameTaken,
    /// The engine has no such image (removed since it was seen): make it
    /// present again and retry.
    ImageGone(Error),
    Other(Error),
}

impl From<Error> for AttemptError {
    fn from(e: Error) -> Self {
        AttemptError::Other(e)
    }
}

/// One create → wait → attach → start round. Whatever it created is removed
/// again when it fails.
pub(super) async fn attempt(
    docker: &DockerClient,
    spec: &JobSpec,
    ctx: &Context<'_>,
    name: &str,
    plan: &[PortPlan],
) -> std::result::Result<Started, AttemptError> {
    let (body, applied) = create::body(spec, ctx, plan)?;
    let opts = CreateContainerOptions {
        name: Some(name.into()),
        ..Default::default()
    };
    let created = docker
        .create_container(name, opts, body)
        .await
        .map_err(|e| match e.engine_failure() {
            EngineFailure::ImageMissing => AttemptError::ImageGone(Error::ImageMissing {
                image: ctx.image.into(),
                hint: "it went away between the pull and the start; start again".into(),
            }),
            EngineFailure::NetworkMissing => AttemptError::NetworkGone(e),
            EngineFailure::Conflict => AttemptError::NameTaken,
            _ => AttemptError::Other(e),
        })?;
    let cid = created.id;
    if let Some(remote) = ctx.remote {
        // Into the workspace volume of the created container, before it runs.
        if let Err(e) = docker.upload_archive(&cid, "/", remote.upload.clone()).await {
            remove_container(docker, &cid).await;
            return Err(AttemptError::Other(e));
        }
    }

    // Asked before start (see the file docs); polled by its own task so the
    // request is on the wire while we attach.
    let wait = tokio::spawn(wait_exit(docker.clone(), cid.clone()));
    let attach_opts = AttachContainerOptions {
        stream: true,
        logs: false,
        stdout: true,
        stderr: true,
        stdin: spec.input.is_some(),
        detach_keys: None,
    };
    // Attach and start by name: what a failure says names the job's container.
    let (output, input) = match docker.attach_container(name, attach_opts).await {
        Ok(a) => a,
        Err(e) => {
            wait.abort();
            remove_container(docker, &cid).await;
            return Err(AttemptError::Other(e));
        }
    };
    if let Err(e) = docker.start_container(name).await {
        wait.abort();
        drop((output, input));
        remove_container(docker, &cid).await;
        return Err(match e.engine_failure() {
            EngineFailure::PortTaken => AttemptError::PortTaken(e),
            EngineFailure::NetworkMissing => AttemptError::NetworkGone(e),
            EngineFailure::NotInImage => AttemptError::Other(Error::NotInImage {
                program: spec.effective_argv().first().cloned().unwrap_or_default(),
                image: ctx.image.into(),
            }),
            _ => AttemptError::Other(e),
        });
    }
    Ok(Started {
        container_id: cid,
        output,
        input,
        wait,
        applied,
        warnings: created.warnings,
    })
}

/// Write the job's input, then close our side: with `StdinOnce` the engine
/// then closes the job's stdin, so it sees EOF and never waits on a terminal.
pub(super) async fn feed(
    mut input: Pin<Box<dyn AsyncWrite + Send>>,
    text: String,
    hold: Option<std::time::Duration>,
) {
    // A job that exits without reading its input is not an error.
    let _ = input.write_all(text.as_bytes()).await;
    let _ = input.flush().await;
    if let Some(hold) = hold {
        tokio::time::sleep(hold + std::time::Duration::from_secs(1)).await;
    }
    let _ = input.shutdown().await;
}

/// Engine warnings that mean a limit was not (fully) applied.
pub(super) fn note_warnings(applied: &mut AppliedLimits, warnings: &[String]) {
    for w in warnings {
        let lower = w.to_ascii_lowercase();
        if lower.contains("memory limit") && lower.contains("discarded") {
            applied.memory = None;
        }
        if lower.contains("cpu") && lower.contains("discarded") {
            applied.cpus = None;
        }
        if lower.contains("pids") && lower.contains("discarded") {
            applied.pids = None;
        }
        if lower.contains("does not support") || lower.contains("discarded") {
            applied.not_enforced.push(format!("engine: {w}"));
        }
    }
}
