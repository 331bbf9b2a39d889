//! The launch sequence of a container job: image check, create, attach,
//! start, and reading back what the engine made of it.
//!
//! Order matters on this engine: **create → wait(next-exit) → attach → start
//! → inspect**. `wait` is asked before start so a job that exits at once is
//! not missed (a `next-exit` wait registered after the exit never answers);
//! attach (stream) is made before start because a follow-logs request made
//! before the container runs ends at once with nothing, and attach is also
//! the faster of the two. Mapped ports and the container's own IP exist only
//! after start, so they are read back from inspect.
//!
//! Around it, the job's network (`reach.rs`): berth's 127.0.0.1 listeners
//! are bound before the create (so a taken host port is known at once),
//! the egress proxy is started on the network's gateway before the create
//! (its address is in the job's environment), the job's `/etc` files are
//! written for each attempt, and the forwarder starts relaying once inspect
//! gave the job's address.
//!
//! Nothing else is asked on the way: the manager made the image present
//! already (`Engine::prepare`), and a leftover container with the job's name
//! is looked at only when the create says the name is taken.
//!
//! How the end is observed (wait + drained output, inspect as the stand-in)
//! is `exit.rs`; the container is removed after the job was answered
//! (`cleanup.rs`, `Removals`).
//!
//! The steps are files of `launch/`: what is made before the first create
//! (`prepare.rs`), the create rounds and how a failed one is mended
//! (`attempts.rs`), and the hand-over of the running container
//! (`started.rs`).

use std::path::Path;
use std::sync::Arc;

use super::DockerClient;

use super::create;
use super::{Engine, Sandbox};
use crate::error::Result;
use crate::images::PullPolicy;
use crate::model::{JobId, JobSpec};
use crate::output::JobOutput;
use crate::runner::Launched;

mod attempts;
mod pins;
mod prepare;
pub(super) mod spare;
mod started;

use attempts::Attempts;
use prepare::Prepared;
use started::Made;

/// Launch `spec` as a container; a job with a scoped engine gets its
/// socket served first (`scoped/`), closed again if the launch fails.
pub(super) async fn launch(
    engine: &Engine,
    docker: DockerClient,
    id: &JobId,
    spec: &JobSpec,
    cwd: &Path,
    output: &Arc<JobOutput>,
    project: &Sandbox<'_>,
) -> Result<Launched> {
    if spec.engine != Some(crate::model::EngineAccess::Scoped) {
        return launch_one(engine, docker, id, spec, cwd, output, project, None).await;
    }
    let (scope, handle) =
        super::scoped::Scope::open(scoped_opening(engine, &docker, id, spec, output, project)).await?;
    match launch_one(engine, docker, id, spec, cwd, output, project, Some(&scope)).await {
        Ok(mut launched) => {
            launched.engine = Some(handle);
            Ok(launched)
        }
        Err(e) => {
            scope.close().await;
            Err(e)
        }
    }
}

/// What a job's scoped engine is opened with: its socket in the job's
/// directory, for its user; its limits as its children's budget.
fn scoped_opening<'a>(
    engine: &'a Engine,
    docker: &DockerClient,
    id: &'a JobId,
    spec: &JobSpec,
    output: &'a Arc<JobOutput>,
    project: &'a Sandbox<'_>,
) -> super::scoped::Opening<'a> {
    let limits = |ask: Option<f64>, default: Option<f64>, fallback: f64| ask.or(default).unwrap_or(fallback);
    super::scoped::Opening {
        job: id,
        parent: create::container_name(&engine.instance, engine.state(), id),
        docker: docker.clone(),
        endpoint: &engine.endpoint.host,
        job_dir: output.dir(),
        user: &project.user,
        workspace: project.workspace,
        layer_upper: project.layer.map(|l| l.upper()),
        cpus: limits(
            spec.limits.cpus,
            project.defaults.cpus,
            crate::model::host_cpus() as f64,
        ),
        memory: spec
            .limits
            .memory
            .or(project.defaults.memory)
            .unwrap_or(crate::config::DEFAULT_MEMORY),
        pids: spec
            .limits
            .pids
            .or(project.defaults.pids)
            .unwrap_or(crate::config::DEFAULT_PIDS),
        max_children: project.max_children,
        ownership: engine.ownership.clone(),
        owner: &engine.owner,
        pool: engine.pool.clone(),
    }
}

/// One launch's fixed inputs, handed to each of its steps.
struct Job<'a> {
    engine: &'a Engine,
    docker: DockerClient,
    id: &'a JobId,
    spec: &'a JobSpec,
    /// The job's private directory: its `/etc` files, its protected copies.
    dir: std::path::PathBuf,
    project: &'a Sandbox<'a>,
    /// The job's scoped engine, opened already (`scoped/`).
    /// Its control closes the scope when the job ends.
    scope: Option<&'a Arc<super::scoped::Scope>>,
    image: String,
    /// Before the create: anything the job changes has a later change time.
    since: std::time::SystemTime,
    /// The `-v` directories, open (`pins.rs`).
    pins: pins::Pins,
    /// The engine runtime (`gvisor.rs`); `None`: its default.
    runtime: Option<String>,
}

impl<'a> Job<'a> {
    /// The job's fixed inputs: its image present (a direct caller's is
    /// pulled here), its `-v` directories open, its runtime chosen.
    async fn new(
        engine: &'a Engine,
        docker: DockerClient,
        (id, spec, dir): (&'a JobId, &'a JobSpec, std::path::PathBuf),
        project: &'a Sandbox<'a>,
        scope: Option<&'a Arc<super::scoped::Scope>>,
    ) -> Result<Job<'a>> {
        let since = std::time::SystemTime::now();
        let image = spec.image.clone().unwrap_or_else(|| project.image.to_string());
        if !project.prepared {
            // The manager makes the image present first (`Engine::prepare`, with
            // progress and the job's policy); a direct caller gets it here.
            let quiet: super::pull::ProgressFn = Arc::new(|_| {});
            let seen = engine.present.knows(&image);
            super::pull::ensure(
                &docker,
                &image,
                seen,
                PullPolicy::Missing,
                engine.pull_timeout,
                &quiet,
            )
            .await?;
            engine.present.saw(&image);
        }
        let pins = pins::Pins::open(spec, project.workspace)?;
        let runtime = super::gvisor::runtime(&docker, spec, project.gvisor_runtime).await?;
        Ok(Job {
            engine,
            docker,
            id,
            spec,
            dir,
            project,
            scope,
            image,
            since,
            pins,
            runtime,
        })
    }
}

/// The launch in its steps: the image, a spare container when one fits
/// (`spare.rs`), else what is made before the create (`prepare.rs`) and
/// the create rounds (`attempts.rs`); then the hand-over of the running
/// container (`started.rs`).
#[allow(clippy::too_many_arguments)]
async fn launch_one(
    engine: &Engine,
    docker: DockerClient,
    id: &JobId,
    spec: &JobSpec,
    cwd: &Path,
    output: &Arc<JobOutput>,
    project: &Sandbox<'_>,
    scope: Option<&Arc<super::scoped::Scope>>,
) -> Result<Launched> {
    let dir = output.dir().to_path_buf();
    let job = Job::new(engine, docker, (id, spec, dir), project, scope).await?;
    if let Some(spare) = spare::shape(&job).and_then(|shape| engine.spares.take(&job.docker, &shape)) {
        match spare::start(&job, cwd, output, spare).await? {
            Some(launched) => return Ok(launched),
            None => tracing::debug!(job = %id, "the spare container had gone; starting cold"),
        }
    }
    let (prepared, made, protect_warnings) = make(&job, cwd, false).await?;
    started::finish(&job, output, prepared, made, protect_warnings).await
}

/// What a cold start makes: the job's network and ports, its layer's
/// volume, its protected files, and the started container. `spare`: a
/// container made ahead for a later job (`spare.rs`).
async fn make(job: &Job<'_>, cwd: &Path, spare: bool) -> Result<(Prepared, Made, Vec<String>)> {
    let (engine, id, spec, project) = (job.engine, job.id, job.spec, job.project);
    let mut prepared = Prepared::make(job).await?;
    // The workspace as the mode says (`create/mounts.rs`): a layer's volume
    // made first; the copies of protected files only where the job writes
    // the checkout itself.
    let layer_mount = match (project.layer, &prepared.remote) {
        (Some(layer), None) => Some(engine.layer_mount(&job.docker, layer, id).await?),
        _ => None,
    };
    let direct = spec.write.unwrap_or_default() == crate::model::WriteMode::Direct;
    let (protected, protect_warnings) = match direct {
        true => prepare::protected_files(job, prepared.remote.is_some()),
        false => (Vec::new(), Vec::new()),
    };
    let mut attempts = Attempts {
        engine,
        docker: &job.docker,
        id,
        spec,
        cwd,
        project,
        scope: job.scope.map(|s| &**s),
        image: &job.image,
        decision: &prepared.decision,
        remote: prepared.remote.as_ref(),
        plan: &prepared.plan,
        may_join: prepared.may_join,
        pod: prepared.pod.as_ref(),
        member: prepared.member.as_ref(),
        job_dir: &job.dir,
        protected: &protected,
        pinned: &job.pins.sources(),
        runtime: job.runtime.as_deref(),
        layer: layer_mount.as_ref(),
        name: create::container_name(&engine.instance, engine.state(), id),
        proxy: None,
        slot: prepared.slot.take(),
        network_retries: 2,
        cleared: false,
        image_again: false,
        spare,
    };
    let (started, joined) = attempts.run().await?;
    let Attempts { proxy, slot, .. } = attempts;
    prepared.slot = slot;
    let made = Made {
        started,
        joined,
        proxy,
        claim: None,
    };
    Ok((prepared, made, protect_warnings))
}
