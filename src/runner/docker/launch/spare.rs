//! Spare containers (`warm_pool`): a started container kept ready per job
//! shape, which the next job of that shape takes instead of a create and
//! start (~0.1 s of the engine's, more under load).
//!
//! A spare is made by the ordinary launch (`make`) for a job spec with
//! the shape's image, limits, network, egress, workspace, write mode and
//! runtime, whose command is [`WAITER`]: POSIX `sh` reading a script from
//! stdin to its end and running it. A job that takes the spare writes its
//! script there (its environment exported, `cd` to its directory, `exec`
//! of its argv, every word single-quoted) and closes stdin; the shell then
//! *is* the job, under the same init, so its output, exit code, signals,
//! stop and removal are a cold job's. What berth runs beside the
//! container is the job's own: its port listeners are bound and its
//! egress proxy started at the take, its `/etc` files rewritten with its
//! id, its environment computed as a cold create would set it.
//!
//! What a warm job cannot keep: the container's name and labels are the
//! spare's (`warm-…`; the record has the container id), its kernel
//! hostname is the neutral word a pause-joined job has, it has no DNS alias
//! on its network, and a command that is not found exits 127 with the
//! shell's message instead of failing the start. Cold, always: a job with
//! input, `-v` mounts, a scoped engine, `layer` mode, a pod (MCP
//! sessions), a remote engine, ports the engine publishes, or a variable
//! name `sh` cannot export; and any job when no spare of its shape is
//! ready. A shape whose spare died soon after it was made (an image
//! without `sh`) is not made again. Spares are made by a long-lived manager only, after a job
//! of their shape started, and removed after `warm_idle`, at shutdown and,
//! after a crash, by the labelled sweeps (they carry the instance's labels).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bollard::models::ContainerCreateBody;
use tokio::io::AsyncWriteExt;

use super::super::create::{self, Context};
use super::super::{DockerClient, Engine, Sandbox, reach};
use super::prepare::{self, Prepared};
use super::started::{self, Made};
use super::{Job, make};
use crate::error::Result;
use crate::model::{Egress, JobId, JobSpec};
use crate::output::JobOutput;
use crate::runner::Launched;

mod pool;
mod shape;

pub use pool::Spares;
use pool::{Spare, discard};
pub(super) use shape::shape;
use shape::{fits, key, normal};

/// What a spare runs until a job takes it: its script read to the end of
/// stdin, line by line (`read -r` keeps backslashes), then evaluated.
const WAITER: &str = "s=\nwhile IFS= read -r l; do s=\"$s$l\n\"; done\neval \"$s$l\"\n";

/// Make one spare of `spec`'s shape, unless enough are ready or being made.
pub(in super::super) async fn fill(
    engine: &Engine,
    docker: DockerClient,
    spec: &JobSpec,
    cwd: &Path,
    project: &Sandbox<'_>,
) {
    let spares = &engine.spares;
    let serial = spares.serial.fetch_add(1, Ordering::Relaxed);
    let id = JobId(format!("warm-{}-{serial}", std::process::id()));
    let dir = spares.dir.join(id.as_str());
    let shaped = normal(spec);
    let job = match Job::new(engine, docker.clone(), (&id, &shaped, dir.clone()), project, None).await {
        Ok(job) if fits(&job, spec) => job,
        Ok(_) => return tracing::debug!("this job's shape starts cold"),
        Err(e) => return tracing::debug!(error = %e, "no spare container"),
    };
    let shape = key(&job);
    let Some(_making) = spares.begin(&shape) else {
        return tracing::debug!("enough spare containers of this shape");
    };
    if let Err(e) = crate::store::private::own_dir(&dir) {
        return tracing::debug!(error = %e, "no directory for a spare container");
    }
    let claim = engine.claims.claim(&id);
    match make(&job, cwd, true).await {
        Ok((prepared, mut made, protect_warnings)) => {
            made.claim = Some(claim);
            let spare = Spare {
                serial,
                made_at: std::time::Instant::now(),
                dir,
                prepared,
                made,
                protect_warnings,
            };
            spares.put(&docker, shape, spare);
        }
        Err(e) => {
            tracing::debug!(error = %e, "a spare container could not be made");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Start `job` in `spare`. `Ok(None)`: the spare had gone (removed, its
/// job starts cold); a failure of the job's own (a taken port) removes
/// the spare and is the launch's.
pub(super) async fn start(
    job: &Job<'_>,
    cwd: &Path,
    output: &Arc<JobOutput>,
    mut spare: Spare,
) -> Result<Option<Launched>> {
    match hand_over(job, cwd, &spare.dir, &mut spare.prepared, &mut spare.made).await {
        Ok(true) => {
            let Spare {
                prepared,
                made,
                protect_warnings,
                ..
            } = spare;
            let mut launched = started::finish(job, output, prepared, made, protect_warnings).await?;
            launched.limits.warm = true;
            Ok(Some(launched))
        }
        gone_or_failed => {
            discard(&job.docker, spare).await;
            gone_or_failed.map(|_| None)
        }
    }
}

/// Make the spare the job's: its listeners, its proxy, its `/etc` files,
/// and its script written. `Ok(false)`: the spare's container had gone.
async fn hand_over(
    job: &Job<'_>,
    cwd: &Path,
    dir: &Path,
    prepared: &mut Prepared,
    made: &mut Made,
) -> Result<bool> {
    let (engine, project) = (job.engine, job.project);
    let (plan, bound) = prepare::ports(job, &prepared.decision, false)?;
    (prepared.plan, prepared.bound) = (plan, bound);
    if let Some(p) = made.proxy.take() {
        p.close();
    }
    if let (Egress::Proxy, Some(slot)) = (prepared.decision.egress, &prepared.slot) {
        let proxy = reach::start_proxy(job.id.as_str(), &slot.addr, &slot.name, &project.rules, 0)?;
        made.proxy = Some(proxy);
    }
    let attach = reach::attach(
        job.id,
        &prepared.decision,
        made.joined.as_ref(),
        dir,
        made.proxy.as_ref(),
    )?;
    let ctx = Context {
        id: job.id,
        image: &job.image,
        instance: &engine.instance,
        owner: &engine.owner,
        state: engine.state(),
        user: &project.user,
        network: "",
        default_network: project.network,
        defaults: project.defaults,
        workspace: project.workspace,
        cwd,
        attach: &attach,
        read_only: project.read_only,
        protected: &[],
        pinned: &[],
        runtime: job.runtime.as_deref(),
        engine: None,
        remote: None,
        layer: None,
    };
    let (body, _) = create::body(job.spec, &ctx, &prepared.plan)?;
    let input = &mut made.started.input;
    let sent = async {
        input.write_all(script(&body).as_bytes()).await?;
        input.flush().await?;
        input.shutdown().await
    };
    Ok(sent.await.is_ok() && !made.started.wait.is_finished())
}

/// The job's script for [`WAITER`]: what a cold create would set, said in
/// `sh`, every word single-quoted.
fn script(body: &ContainerCreateBody) -> String {
    let mut s = String::new();
    for kv in body.env.iter().flatten() {
        s += &format!("export {}\n", quote(kv));
    }
    if let Some(wd) = &body.working_dir {
        s += &format!("cd {} || exit 126\n", quote(wd));
    }
    s += "exec";
    for word in body.cmd.iter().flatten() {
        s.push(' ');
        s += &quote(word);
    }
    s.push('\n');
    s
}

/// `word` as one `sh` word, whatever it holds (but NUL, refused before).
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests;
