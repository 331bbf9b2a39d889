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

use std::path::Path;
use std::sync::Arc;

use super::DockerClient;

use super::attempt::{AttemptError, Started, attempt, feed, note_warnings};
use super::create::{self, Context, PortPlan};
use super::exit::{exit_future, pump};
use super::pod::{Joined, LeaveOnDrop};
use super::reach::{self, JobNet};
use super::remote::RemoteJob;
use super::{DockerControl, Engine, Project, holder, remove_container};
use crate::error::{Error, Result};
use crate::images::PullPolicy;
use crate::model::{Egress, JobId, JobSpec, Network};
use crate::net::{Upstream, Want, forward};
use crate::output::{JobOutput, Stream as OutStream};
use crate::runner::{Control, Launched};

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
        endpoint: &engine.endpoint.host,
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
    // container per berth network, see network.rs; internal unless the
    // job's egress is `all` (reach.rs decides).
    // A remote engine's job (remote.rs): the workspace uploaded, its ports
    // published on the engine host and relayed from berth's listeners.
    let remote = match super::remote::remote_host(&engine.endpoint) {
        Some(_) => Some(RemoteJob::prepare(id, &engine.endpoint, project.workspace, &project.user).await?),
        None => None,
    };
    let decision = match &remote {
        None => project.decide(spec),
        Some(_) => super::remote::decide(spec, project.network, project.egress),
    };
    let isolated = decision.network == Network::Isolated;
    let mut plan = create::plan_ports(
        spec,
        engine.precheck_ports && decision.engine_publishes && remote.is_none(),
    )?;
    // berth's own listeners, before anything is made: released again if
    // the launch fails.
    let bound = match (decision.engine_publishes && remote.is_none()) || plan.is_empty() {
        true => None,
        false => Some(forward::bind(id.as_str(), &wants(&plan))?),
    };
    if remote.is_some() {
        // The asked host port is berth's listener here; the engine picks its own.
        plan.iter_mut().for_each(|p| p.host_port = None);
    }
    // Unless the engine publishes its ports, the job may join the
    // network's holder (holder.rs): the engine then sets up no network for
    // it. A remote engine's jobs never do (a holder's files are this machine's).
    let may_join = remote.is_none() && (!decision.engine_publishes || plan.is_empty());
    // A job of an MCP session joins its session's pod (pod/) instead of
    // taking a network of its own.
    let mut pod_note = None;
    let member = match super::pod::key_of(
        spec,
        &decision,
        project.workspace,
        (remote.is_none(), scope.is_some()),
    ) {
        Some(key) => match engine
            .pods
            .join(engine, &docker, key, &decision, (id, spec), project.image)
            .await?
        {
            Joined::In(m) => Some(m),
            Joined::Outside(why) => {
                pod_note = Some(why);
                None
            }
        },
        None => None,
    };
    let pod = member.as_ref().map(|m| m.pod.clone());
    // Given up however this launch ends (a failed one included).
    let member = member.map(LeaveOnDrop::new);
    let mut slot = match isolated && member.is_none() {
        true => Some(
            engine
                .acquire_network(&docker, decision.internal, may_join)
                .await?,
        ),
        false => None,
    };
    let job_dir = output
        .paths()
        .stdout
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut proxy: Option<crate::net::Proxy> = None;
    // Copies of the project's config files, mounted read-only over them.
    let protect_dir = output.dir().join("protected");
    let (protected, protect_warnings) = match crate::store::private::own_dir(&protect_dir) {
        // The job's copy of the workspace is read back by nothing of the caller's.
        Ok(()) if remote.is_some() => (Vec::new(), Vec::new()),
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
        let joined = match &pod {
            Some(pod) => Some(pod.holder.clone()),
            None => slot.as_ref().and_then(|s| s.holder.clone()).filter(|_| may_join),
        };
        // Where the job's network is: its slot's, or its pod's.
        let net = match (&pod, &slot) {
            (Some(pod), _) => Some((pod.addr, pod.network.as_str())),
            (None, Some(s)) => Some((s.addr, s.name.as_str())),
            (None, None) => None,
        };
        // The egress proxy on this network's gateway (made again when a
        // retry moved the job to another network).
        if let (Egress::Proxy, Some((addr, net_name))) = (decision.egress, net)
            && proxy.as_ref().map(|p| p.addr().ip()) != addr.gateway
        {
            match reach::start_proxy(id, &addr, net_name, &project.rules, 0) {
                Ok(p) => proxy = Some(p),
                // A network known from before was removed meanwhile (its
                // gateway address went with it): make it again.
                Err(e) if address_gone(&e) && network_retries > 0 && pod.is_none() => {
                    tracing::debug!(job = %id, error = %e, "job network removed meanwhile; making it again");
                    network_retries -= 1;
                    if let Some(gone) = slot.take() {
                        engine.pool_of(decision.internal).forget(&gone);
                    }
                    slot = Some(
                        engine
                            .acquire_network(&docker, decision.internal, may_join)
                            .await?,
                    );
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let mut attach = reach::attach(id, &decision, joined.as_ref(), &job_dir, proxy.as_ref())?;
        if let Some(m) = member.as_ref().and_then(LeaveOnDrop::member) {
            // The pod's hosts file, which names every member, for its own.
            reach::in_pod(&mut attach, m.pod.hosts_file(), &m.names);
        }
        if remote.is_some() {
            // Files of this machine's: the engine's own /etc files instead.
            attach.mounts.clear();
        }
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
            attach: &attach,
            read_only: project.read_only,
            protected: &protected,
            engine: engine_setup.as_ref(),
            remote: remote.as_ref(),
        };
        match attempt(&docker, spec, &ctx, &name, &plan).await {
            Ok(s) => break (s, joined),
            // The pod's holder went away: the pod is forgotten (the
            // session's next job makes another) and this start fails.
            Err(AttemptError::Other(e) | AttemptError::NetworkGone(e))
                if member.is_some() && joined.as_ref().is_some_and(|h| holder::is_gone(&e, h)) =>
            {
                if let Some(m) = member.as_ref().and_then(LeaveOnDrop::member) {
                    m.broken();
                }
                return Err(e);
            }
            // The holder went away (removed by hand, the engine restarted):
            // forget it and start the ordinary way on the same network.
            Err(AttemptError::Other(e) | AttemptError::NetworkGone(e))
                if joined.as_ref().is_some_and(|h| holder::is_gone(&e, h)) =>
            {
                tracing::debug!(job = %id, error = %e, "network holder gone; starting on the network itself");
                if let Some(s) = slot.as_mut() {
                    engine
                        .pool_of(decision.internal)
                        .holders
                        .forget(&docker, s.index());
                    s.holder = None;
                }
            }
            Err(AttemptError::NetworkGone(e)) if network_retries > 0 && slot.is_some() => {
                tracing::debug!(job = %id, error = %e, "job network removed meanwhile; making it again");
                network_retries -= 1;
                if let Some(gone) = slot.take() {
                    engine.pool_of(decision.internal).forget(&gone);
                }
                slot = Some(
                    engine
                        .acquire_network(&docker, decision.internal, may_join)
                        .await?,
                );
            }
            // Out of retries: the engine's failure as it came.
            Err(AttemptError::NetworkGone(e)) => return Err(e),
            // An asked host port the engine found taken: the caller's
            // choice, so refused rather than another port picked.
            Err(AttemptError::PortTaken(e)) if plan.iter().any(|p| p.host_port.is_some()) => {
                tracing::debug!(job = %id, error = %e, "asked host port taken");
                let asked = plan
                    .iter()
                    .find(|p| p.host_port.is_some())
                    .expect("checked by the guard");
                return Err(Error::PortInUse {
                    port: asked.host_port.unwrap_or_default(),
                    job_port: asked.port,
                });
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
    if let Some(pod) = &pod {
        applied.network = Some(pod.network.clone());
    }
    applied.not_enforced.extend(pod_note);
    applied.egress = Some(decision.egress.to_string());
    applied.not_enforced.extend(decision.notes.iter().cloned());
    if let Some(r) = &remote {
        applied.not_enforced.extend(r.notes.iter().cloned());
    }
    // A pool network without a holder gets one once this job exited, when
    // the job could join one: jobs whose ports the engine publishes never
    // do, and warming their networks would only grow the pool by a network
    // per such job.
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
            pod: None,
        };
        Arc::new((engine.pool_of(decision.internal).holders.clone(), recipe))
    });
    // The proxy belongs to the job from here on; the forwarder joins it
    // once the job's address is known.
    let net = JobNet::new(proxy.take());
    let mut control = DockerControl::new(engine, docker.clone(), container_id.clone(), slot, net);
    control.warm = warm;
    control.pod = member.and_then(|m| m.keep());

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
    // A job in its holder's namespace has the holder's address.
    // A remote engine's container address is on its host: not for probes here.
    let internal_ip = match (&joined, &remote) {
        (_, Some(_)) => None,
        (Some(h), None) => h.ip,
        (None, None) => super::client::container_ip(&inspected),
    };
    let published = || create::read_ports(&plan, settings.and_then(|s| s.ports.as_ref()));
    // Where berth's listeners relay to: the job's address, or where a
    // remote engine published its ports; `None` when the job ended already
    // (its address went with its network endpoint): the ports as bound.
    let upstream = match (&remote, internal_ip) {
        (Some(r), _) => Some(Upstream::Published {
            ip: r.reach,
            ports: published().iter().map(|m| (m.port, m.host_port)).collect(),
        }),
        (None, Some(ip)) => Some(Upstream::Address(ip)),
        (None, None) => None,
    };
    let ports = match (bound, upstream) {
        (None, _) => published(),
        (Some(bound), None) => bound.mappings().to_vec(),
        (Some(bound), Some(upstream)) => match bound.serve(upstream) {
            Ok(forwarder) => {
                let ports = forwarder.mappings().to_vec();
                control.set_forwarder(forwarder);
                ports
            }
            Err(e) => {
                wait.abort();
                control.remove().await;
                let _ = pump_task.await;
                return Err(e);
            }
        },
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
        // A remote job changes only its copy of the workspace.
        sweep: remote.is_none().then(|| crate::runner::setuid::Sweep {
            root: project.workspace.to_path_buf(),
            since,
        }),
        engine: None,
    })
}

/// True when a listen failed because its address is not on this machine
/// (any more): the network whose gateway it was is gone.
fn address_gone(e: &Error) -> bool {
    matches!(e, Error::Listen { source, .. } if source.kind() == std::io::ErrorKind::AddrNotAvailable)
}

/// What berth's forwarder listens for: the plan's ports, asked host ports
/// included (a taken one is replaced, with a note).
fn wants(plan: &[PortPlan]) -> Vec<Want> {
    plan.iter()
        .map(|p| Want {
            port: p.port,
            proto: p.proto,
            host_port: p.host_port,
            note: p.note.clone(),
            // At start, an asked host port is the caller's own choice.
            strict: true,
        })
        .collect()
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
