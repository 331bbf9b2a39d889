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
//! Nothing else is asked on the way: the manager made the image present
//! already (`Engine::prepare`), and a leftover container with the job's name
//! is looked at only when the create says the name is taken.
//!
//! How the end is observed (wait + drained output, inspect as the stand-in)
//! is `exit.rs`; the container is removed after the job was answered
//! (`cleanup.rs`, `Removals`).

use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use super::DockerClient;
use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::{AttachContainerOptions, CreateContainerOptions};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::create::{self, Context, PortPlan};
use super::exit::{OutputStream, Waited, exit_future, pump, wait_exit};
use super::{DockerControl, Engine, Project, holder, network, remove_container};
use crate::error::{Error, Result};
use crate::images::PullPolicy;
use crate::model::{AppliedLimits, JobId, JobSpec};
use crate::output::{JobOutput, Stream as OutStream};
use crate::runner::{Control, Launched};

/// A container that was created, attached and started.
struct Started {
    container_id: String,
    output: OutputStream,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    wait: JoinHandle<Waited>,
    applied: AppliedLimits,
    warnings: Vec<String>,
}

/// Why one create/start attempt failed.
enum AttemptError {
    /// An explicitly asked host port was taken after all: retry engine-chosen.
    PortTaken(Error),
    /// The job network was removed meanwhile: make it again and retry.
    NetworkGone(Error),
    /// A container already has this job's name (a leftover): clear it and retry.
    NameTaken,
    Other(Error),
}

impl From<Error> for AttemptError {
    fn from(e: Error) -> Self {
        AttemptError::Other(e)
    }
}

/// Launch `spec` as a container; a job with a scoped engine gets its
/// socket served first (`scoped/`), closed again if the launch fails.
pub(super) async fn launch(
    engine: &Engine,
    docker: DockerClient,
    id: &JobId,
    spec: &JobSpec,
    cwd: &Path,
    output: &Arc<JobOutput>,
    project: &Project<'_>,
) -> Result<Launched> {
    if spec.engine != Some(crate::model::EngineAccess::Scoped) {
        return launch_one(engine, docker, id, spec, cwd, output, project, None).await;
    }
    let (scope, handle) =
        super::scoped::Scope::open(scoped_opening(engine, &docker, id, spec, output, project)).await?;
    match launch_one(engine, docker, id, spec, cwd, output, project, Some(&scope)).await {
        Ok(mut launched) => {
            if let Control::Docker(d) = &mut launched.control {
                d.scope = Some(scope);
            }
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
    project: &'a Project<'_>,
) -> super::scoped::Opening<'a> {
    let limits = |ask: Option<f64>, default: Option<f64>, fallback: f64| ask.or(default).unwrap_or(fallback);
    super::scoped::Opening {
        job: id,
        parent: create::container_name(&engine.instance, engine.state(), id),
        docker: docker.clone(),
        endpoint: &engine.endpoint,
        job_dir: output.dir(),
        user: &project.user,
        workspace: project.workspace,
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
        pool_prefix: &engine.network,
    }
}

#[allow(clippy::too_many_arguments)]
async fn launch_one(
    engine: &Engine,
    docker: DockerClient,
    id: &JobId,
    spec: &JobSpec,
    cwd: &Path,
    output: &Arc<JobOutput>,
    project: &Project<'_>,
    scope: Option<&super::scoped::Scope>,
) -> Result<Launched> {
    // Before the create: anything the job changes has a later change time.
    let since = std::time::SystemTime::now();
    let image = spec.image.clone().unwrap_or_else(|| project.image.to_string());
    if !project.prepared {
        // The manager makes the image present first (`Engine::prepare`, with
        // progress and the job's policy); a direct caller gets it here.
        let quiet: super::pull::ProgressFn = Arc::new(|_| {});
        super::pull::ensure(&docker, &image, PullPolicy::Missing, engine.pull_timeout, &quiet).await?;
    }
    let mut name = create::container_name(&engine.instance, engine.state(), id);

    // A pool network of its own (`isolated`, the default): one running
    // container per berth network, see network.rs.
    let isolated = spec.network.unwrap_or(project.network) == crate::model::Network::Isolated;
    let mut plan = create::plan_ports(spec, engine.precheck_ports);
    // Without published ports the job may join the network's holder
    // (holder.rs): the engine then sets up no network for it.
    let may_join = plan.is_empty();
    let mut slot = match isolated {
        true => Some(engine.acquire_network(&docker, may_join).await?),
        false => None,
    };
    // Copies of the project's config files, mounted read-only over them.
    let protect_dir = output.dir().join("protected");
    let (protected, protect_warnings) = match crate::store::private::own_dir(&protect_dir) {
        Ok(()) => {
            let extra: Vec<&Path> = project.protect.iter().map(|p| p.as_path()).collect();
            super::protect::mounts(project.workspace, &extra, &protect_dir)
        }
        Err(e) => (
            Vec::new(),
            vec![format!("project files are not protected from the job: {e}")],
        ),
    };
    let mut network_retries = 2;
    let mut cleared = false;
    let (started, joined) = loop {
        let joined = slot.as_ref().and_then(|s| s.holder.clone()).filter(|_| may_join);
        let network = match (&joined, &slot) {
            (Some(h), _) => format!("container:{}", h.id),
            (None, Some(s)) => s.id.clone(),
            (None, None) => String::new(),
        };
        // The scoped engine's socket and variables, for this attempt's network.
        let engine_setup = match (scope, &slot) {
            (Some(scope), Some(s)) => Some(scope.setup(&s.id).await?),
            (Some(_), None) => {
                return Err(Error::InvalidSpec(
                    "a scoped engine needs the job's own network (network isolated)".into(),
                ));
            }
            (None, _) => None,
        };
        let ctx = Context {
            id,
            image: &image,
            instance: &engine.instance,
            owner: &engine.owner,
            state: engine.state(),
            user: &project.user,
            network: &network,
            default_network: project.network,
            defaults: project.defaults,
            workspace: project.workspace,
            cwd,
            read_only: project.read_only,
            protected: &protected,
            engine: engine_setup.as_ref(),
        };
        match attempt(&docker, spec, &ctx, &name, &plan).await {
            Ok(s) => break (s, joined),
            // The holder went away (removed by hand, the engine restarted):
            // forget it and start the ordinary way on the same network.
            Err(AttemptError::Other(e) | AttemptError::NetworkGone(e))
                if joined
                    .as_ref()
                    .is_some_and(|h| holder::is_gone(&e.to_string(), h)) =>
            {
                tracing::debug!(job = %id, error = %e, "network holder gone; starting on the network itself");
                if let Some(s) = slot.as_mut() {
                    engine.pool.holders.forget(&docker, s.index());
                    s.holder = None;
                }
            }
            Err(AttemptError::NetworkGone(e)) if network_retries > 0 && slot.is_some() => {
                tracing::debug!(job = %id, error = %e, "job network removed meanwhile; making it again");
                network_retries -= 1;
                if let Some(gone) = slot.take() {
                    engine.pool.forget(&gone);
                }
                slot = Some(engine.acquire_network(&docker, may_join).await?);
            }
            // Out of retries: the engine's failure as it came.
            Err(AttemptError::NetworkGone(e)) => return Err(e),
            Err(AttemptError::PortTaken(e)) if plan.iter().any(|p| p.host_port.is_some()) => {
                tracing::debug!(job = %id, error = %e, "asked host port taken; letting the engine pick");
                for p in plan.iter_mut().filter(|p| p.host_port.is_some()) {
                    let asked = p.host_port.take().unwrap_or_default();
                    p.note = Some(format!("host port {asked} was taken; the engine picked another"));
                }
            }
            Err(AttemptError::PortTaken(e)) => return Err(e),
            Err(AttemptError::NameTaken) if !cleared => {
                // Ids are never reused, so this is rare (a state dir reset
                // while its containers stayed): checked only when it happens.
                cleared = true;
                if !clear_leftover(engine, &docker, &name).await? {
                    // Someone else's container squats the name (a job can
                    // guess the next id): never touch it, take another name.
                    tracing::warn!(job = %id, %name, "a container that is not berth's has this job's name; using another");
                    name = format!("{name}-{}", unique_suffix());
                }
            }
            Err(AttemptError::NameTaken) => {
                return Err(Error::Docker {
                    action: "create container",
                    job: id.to_string(),
                    message: format!("the name {name} is still taken after its leftover was removed"),
                });
            }
            Err(AttemptError::Other(e)) => return Err(e),
        }
    };
    let Started {
        container_id,
        output: stream,
        input,
        wait,
        mut applied,
        warnings,
    } = started;
    if let Some(slot) = &slot {
        // Named, not by the id the container was created with.
        applied.network = Some(slot.name.clone());
    }
    // A pool network without a holder gets one once this job exited, when
    // the job had no ports: jobs with ports never join one, and warming
    // their networks would only grow the pool by a network per such job.
    let warm = (engine.warm.load(std::sync::atomic::Ordering::SeqCst)
        && may_join
        && slot.as_ref().is_some_and(|s| s.holder.is_none()))
    .then(|| {
        let recipe = holder::Recipe {
            // The instance's own default image, never the job's: the holder
            // shares its namespace with later jobs, so its `sleep` must not
            // be code a job chose.
            image: engine.image.clone(),
            ownership: engine.ownership.clone(),
            owner: engine.owner.clone(),
        };
        Arc::new((engine.pool.holders.clone(), recipe))
    });
    let mut control = DockerControl::new(engine, docker.clone(), container_id.clone(), slot);
    control.warm = warm;

    // From here on the container runs: any failure must take it down again.
    let writers = match (output.writer(OutStream::Stdout), output.writer(OutStream::Stderr)) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            wait.abort();
            control.remove().await;
            return Err(e);
        }
    };
    let pump_task = tokio::spawn(pump(stream, writers.0, writers.1, Some(image.clone())));
    match spec.input.clone() {
        Some(text) => {
            // Under keep-alive an interactive program must see its input and
            // stay up until the timer stops it: hold stdin open that long.
            let hold = spec.keep_alive.map(std::time::Duration::from_secs_f64);
            tokio::spawn(feed(input, text, hold));
        }
        None => drop(input),
    }

    let inspected = match docker.inspect_container(&container_id).await {
        Ok(i) => i,
        Err(e) => {
            wait.abort();
            control.remove().await;
            let _ = pump_task.await;
            return Err(e);
        }
    };
    let settings = inspected.network_settings.as_ref();
    let ports = create::read_ports(&plan, settings.and_then(|s| s.ports.as_ref()));
    // A job in its holder's namespace has the holder's address.
    let internal_ip = match &joined {
        Some(h) => h.ip,
        None => container_ip(&inspected),
    };
    note_warnings(&mut applied, &warnings);
    applied.not_enforced.extend(protect_warnings);

    let exit = Box::pin(exit_future(docker, control.clone(), wait, pump_task, id.clone()));
    // The container's main process as the engine's host sees it: the `pid`
    // that seed tools (safe_shell) hand out and accept back in `kill <pid>`.
    let pid = inspected
        .state
        .as_ref()
        .and_then(|s| s.pid)
        .filter(|p| *p > 0)
        .map(|p| p as u32);
    Ok(Launched {
        pid,
        container_id: Some(container_id),
        ports,
        limits: applied,
        internal_ip,
        control: Control::Docker(control),
        exit,
        sweep: Some(crate::runner::setuid::Sweep {
            root: project.workspace.to_path_buf(),
            since,
        }),
        engine: None,
    })
}

/// A container with this job's name is a leftover of this instance and
/// state dir (ids are never reused) and is cleared; one whose labels say
/// otherwise is never touched: the launch fails naming it.
/// `Ok(false)`: the container with the name is someone else's (left alone).
async fn clear_leftover(engine: &Engine, docker: &DockerClient, name: &str) -> Result<bool> {
    match docker.inspect_container(name).await {
        Ok(c)
            if engine
                .ownership
                .owns(c.config.as_ref().and_then(|c| c.labels.as_ref())) =>
        {
            remove_container(docker, name).await;
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) if e.engine_status() == Some(404) => Ok(true),
        Err(e) => Err(e),
    }
}

/// A suffix no one can have guessed: time and process, in hex.
fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs());
    format!("{:x}", nanos ^ ((std::process::id() as u64) << 32))
}

/// One create → wait → attach → start round. Whatever it created is removed
/// again when it fails.
async fn attempt(
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
    let created = docker.create_container(name, opts, body).await.map_err(|e| {
        let msg = e.engine_reason();
        if e.engine_status() == Some(404) && msg.contains("No such image") {
            AttemptError::Other(Error::ImageMissing {
                image: ctx.image.into(),
                hint: "it went away between the pull and the start; start again".into(),
            })
        } else if network::is_missing(&msg) {
            AttemptError::NetworkGone(e)
        } else if e.engine_status() == Some(409) {
            AttemptError::NameTaken
        } else {
            AttemptError::Other(e)
        }
    })?;
    let cid = created.id;

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
        let msg = e.engine_reason();
        if msg.contains("port is already allocated") || msg.contains("address already in use") {
            return Err(AttemptError::PortTaken(e));
        }
        if network::is_missing(&msg) {
            return Err(AttemptError::NetworkGone(e));
        }
        if msg.contains("executable file not found") {
            return Err(AttemptError::Other(Error::NotInImage {
                program: spec.effective_argv().first().cloned().unwrap_or_default(),
                image: ctx.image.into(),
            }));
        }
        return Err(AttemptError::Other(e));
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
async fn feed(mut input: Pin<Box<dyn AsyncWrite + Send>>, text: String, hold: Option<std::time::Duration>) {
    // A job that exits without reading its input is not an error.
    let _ = input.write_all(text.as_bytes()).await;
    let _ = input.flush().await;
    if let Some(hold) = hold {
        tokio::time::sleep(hold + std::time::Duration::from_secs(1)).await;
    }
    let _ = input.shutdown().await;
}

/// The container's address on its network, for probes that must reach the
/// server itself (a published port is answered by the userland proxy even
/// when nothing listens inside).
pub(super) fn container_ip(inspected: &ContainerInspectResponse) -> Option<IpAddr> {
    let networks = inspected.network_settings.as_ref()?.networks.as_ref()?;
    // A job is on one network (its berth bridge): any address it has will do.
    networks
        .values()
        .filter_map(|ep| ep.ip_address.as_deref())
        .find_map(|ip| ip.parse().ok())
}

/// Engine warnings that mean a limit was not (fully) applied.
fn note_warnings(applied: &mut AppliedLimits, warnings: &[String]) {
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
