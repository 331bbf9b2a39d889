//! Adopting a container that a dead manager left running (recovery mode
//! `adopt`): follow its logs again and observe its exit as if we had started
//! it. The logs endpoint replays the whole output from the start; the lines
//! the store already holds are skipped per stream, so the job's seq continues
//! from the last stored line with no gap and no duplicate.

use std::sync::Arc;

use super::DockerClient;
use bollard::query_parameters::LogsOptions;

use super::exit::{OutputStream, exit_future, pump, wait_exit};
use super::{DockerControl, Engine};
use crate::error::{Error, Result};
use crate::model::{AppliedLimits, JobId, PortMapping};
use crate::output::{JobOutput, Stream as OutStream};
use crate::runner::{Control, Launched};

/// What the record of an orphaned container job says about it.
pub struct Adoption {
    pub container_id: String,
    /// Lines already stored per stream (stdout, stderr): the replay skips them.
    pub stored: (u64, u64),
    pub ports: Vec<PortMapping>,
    pub limits: AppliedLimits,
}

/// Re-attach to the container of job `id`.
pub(super) async fn adopt(
    engine: &Engine,
    docker: DockerClient,
    id: &JobId,
    output: &Arc<JobOutput>,
    a: Adoption,
) -> Result<Launched> {
    let Adoption {
        container_id,
        stored,
        ports,
        limits,
    } = a;
    let container_id = container_id.as_str();
    let fail = |message: String| Error::Docker {
        action: "adopt container",
        job: id.to_string(),
        message,
    };
    let inspected = docker.inspect_container(container_id).await?;
    // Only a container this instance and state dir made is ever followed.
    if !engine
        .ownership
        .owns(inspected.config.as_ref().and_then(|c| c.labels.as_ref()))
    {
        return Err(fail(
            "the container's labels name another berth instance or state dir".into(),
        ));
    }
    if !inspected.state.as_ref().and_then(|s| s.running).unwrap_or(false) {
        return Err(fail("the container is no longer running".into()));
    }
    // Ask for the exit before following: a container that ends meanwhile is not missed.
    let wait = tokio::spawn(wait_exit(docker.clone(), container_id.to_string()));
    let opts = LogsOptions {
        follow: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let stream: OutputStream = docker.logs(container_id, opts);
    let mut out = output.writer(OutStream::Stdout)?;
    let mut err = output.writer(OutStream::Stderr)?;
    out.skip_lines(stored.0);
    err.skip_lines(stored.1);
    let pump_task = tokio::spawn(pump(stream, out, err, None));
    // On a pool network: hold its slot until the container is removed.
    let slot = inspected
        .network_settings
        .as_ref()
        .and_then(|n| n.networks.as_ref())
        .and_then(|n| {
            n.iter().find_map(|(name, ep)| {
                let id = ep.network_id.clone().unwrap_or_default();
                engine.pool.claim(&engine.network, name, id)
            })
        });
    if slot.is_some() {
        engine
            .used_network
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let control = DockerControl::new(engine, docker.clone(), container_id.to_string(), slot);
    // A job that joined a network holder has the holder's address.
    let joined = inspected
        .host_config
        .as_ref()
        .and_then(|h| h.network_mode.as_deref())
        .and_then(|m| m.strip_prefix("container:"));
    let internal_ip = match joined {
        Some(holder) => match docker.inspect_container(holder).await {
            Ok(h) => super::launch::container_ip(&h),
            Err(_) => None,
        },
        None => super::launch::container_ip(&inspected),
    };
    let exit = Box::pin(exit_future(docker, control.clone(), wait, pump_task, id.clone()));
    Ok(Launched {
        sweep: None,
        engine: None,
        pid: None,
        container_id: Some(container_id.to_string()),
        ports,
        limits,
        internal_ip,
        control: Control::Docker(control),
        exit,
    })
}
