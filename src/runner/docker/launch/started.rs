//! After the start: the container runs, so from here on any failure takes
//! it down again. What the launch made becomes the job's control (its
//! network, proxy, pod seat), its output is pumped and its input fed, and
//! inspect gives the job's address (berth's listeners start relaying to
//! it) and the ports the engine published.

use std::sync::Arc;

use bollard::models::ContainerInspectResponse;
use tokio::task::JoinHandle;

use super::super::DockerControl;
use super::super::attempt::{Started, feed, note_warnings};
use super::super::create::{self, PortPlan};
use super::super::exit::{OutputStream, Pumped, Waited, Writers, exit_future, pump};
use super::super::pause;
use super::super::reach::JobNet;
use super::super::remote::RemoteJob;
use super::super::slot::Pause;
use super::Job;
use super::prepare::Prepared;
use crate::error::Result;
use crate::model::{AppliedLimits, PortMapping};
use crate::net::{Proxy, Upstream, forward};
use crate::output::Stream as OutStream;
use crate::runner::{Control, Launched};

/// What the create rounds ended with: the started container, the pause
/// it joined, and the proxy on its network.
pub(super) struct Made {
    pub started: Started,
    pub joined: Option<Pause>,
    pub proxy: Option<Proxy>,
    /// A spare's claim on its container (`spare.rs`): the container keeps
    /// the spare's name and labels, so the claim goes with it.
    pub claim: Option<Arc<super::super::claims::Claim>>,
}

/// Hand the running container over to its control, output and ports;
/// `protect_warnings`: project files that could not be protected.
pub(super) async fn finish(
    job: &Job<'_>,
    output: &Arc<crate::output::JobOutput>,
    mut prepared: Prepared,
    made: Made,
    protect_warnings: Vec<String>,
) -> Result<Launched> {
    let Started {
        container_id,
        output: stream,
        input,
        wait,
        mut applied,
        warnings,
    } = made.started;
    note_network(&mut applied, &mut prepared);
    let control = control_of(job, &mut prepared, made.proxy, made.claim, &container_id);

    // From here on the container runs: any failure must take it down again.
    let pump_task = match start_output(job, output, stream, input).await {
        Ok(task) => task,
        Err(e) => {
            take_down(&wait, &control, None).await;
            return Err(e);
        }
    };
    let read = match read_back(job, &mut prepared, made.joined.as_ref(), &container_id, &control).await {
        Ok(read) => read,
        Err(e) => {
            take_down(&wait, &control, Some(pump_task)).await;
            return Err(e);
        }
    };
    note_warnings(&mut applied, &warnings);
    applied.not_enforced.extend(protect_warnings);

    let exit = Box::pin(exit_future(
        job.docker.clone(),
        control.clone(),
        wait,
        pump_task,
        job.id.clone(),
    ));
    Ok(Launched {
        pid: read.pid,
        container_id: Some(container_id),
        ports: read.ports,
        limits: applied,
        internal_ip: read.internal_ip,
        control: Control::new(control),
        exit,
        // A remote job changes only its copy of the workspace; a job that
        // does not write the checkout (`layer`, `read-only`) leaves nothing
        // there (its layer is berth's private state, out of other users' reach).
        sweep: sweep_of(job, &prepared),
        engine: None,
        node: None,
    })
}

/// The job's control over its running container: what the launch made
/// (slot, network, proxy, pod seat, spare claim, remote layer) is its own
/// from here on.
fn control_of(
    job: &Job<'_>,
    prepared: &mut Prepared,
    proxy: Option<Proxy>,
    claim: Option<Arc<super::super::claims::Claim>>,
    container_id: &str,
) -> DockerControl {
    let warm = warm_recipe(job, prepared);
    // The forwarder joins the proxy once the job's address is known.
    let net = JobNet::new(proxy);
    let mut control = DockerControl::new(
        job.engine,
        job.id,
        job.docker.clone(),
        container_id.to_string(),
        prepared.slot.take(),
        net,
    );
    control.warm = warm;
    control.spare = claim;
    control.scope = job.scope.cloned();
    control.pod = prepared.member.take().and_then(|m| m.keep());
    if let (Some(layer), Some(remote)) = (job.project.layer, &prepared.remote) {
        let workspace =
            std::fs::canonicalize(job.project.workspace).unwrap_or(job.project.workspace.to_path_buf());
        control.remote_layer = Some(Arc::new(super::super::remote_layer::RemoteLayer {
            upload: remote.upload.clone(),
            upload_top: workspace.strip_prefix("/").unwrap_or(&workspace).to_path_buf(),
            workspace,
            layer_dir: layer.dir.clone(),
            uploaded_at: remote.uploaded_at,
        }));
    }
    control
}

/// The set-uid sweep of the checkout after the job, where one is needed: a
/// remote job changes only its copy of the workspace; a job that does not
/// write the checkout (`layer`, `read-only`) leaves nothing there (its
/// layer is berth's private state, out of other users' reach); a
/// workspace no other user reaches needs none (`setuid.rs`).
fn sweep_of(job: &Job<'_>, prepared: &Prepared) -> Option<crate::runner::setuid::Sweep> {
    let direct = job.spec.write.unwrap_or_default() == crate::model::WriteMode::Direct;
    (prepared.remote.is_none() && direct)
        .then(|| crate::runner::setuid::Sweep {
            root: job.project.workspace.to_path_buf(),
            since: job.since,
            uid: job.project.user.split(':').next().and_then(|u| u.parse().ok()),
        })
        .filter(crate::runner::setuid::Sweep::needed)
}

/// What inspect of the running container gave the launch.
struct ReadBack {
    /// The container's main process as the engine's host sees it: the `pid`
    /// that seed tools (safe_shell) hand out and accept back in `kill <pid>`.
    pid: Option<u32>,
    internal_ip: Option<std::net::IpAddr>,
    ports: Vec<PortMapping>,
}

/// Mapped ports and the container's own address exist only after the
/// start: read them back, and start berth's listeners relaying to them.
async fn read_back(
    job: &Job<'_>,
    prepared: &mut Prepared,
    joined: Option<&Pause>,
    container_id: &str,
    control: &DockerControl,
) -> Result<ReadBack> {
    let inspected = job.docker.inspect_container(container_id).await?;
    let remote = prepared.remote.as_ref();
    let internal_ip = internal_ip(joined, remote, &inspected);
    let published = || published_ports(&prepared.plan, &inspected);
    let upstream = upstream(remote, internal_ip, published);
    let ports = serve_ports(prepared.bound.take(), upstream, published, control)?;
    let pid = inspected
        .state
        .as_ref()
        .and_then(|s| s.pid)
        .filter(|p| *p > 0)
        .map(|p| p as u32);
    if remote.is_none() {
        job.pins.verify(pid, job.id.as_str())?;
    }
    Ok(ReadBack {
        pid,
        internal_ip,
        ports,
    })
}

/// The job's record says which network it got and what of its network was
/// not held (the pod, the decision's and the remote engine's notes).
fn note_network(applied: &mut AppliedLimits, prepared: &mut Prepared) {
    if let Some(slot) = &prepared.slot {
        // Named, not by the id the container was created with.
        applied.network = Some(slot.name.clone());
    }
    if let Some(pod) = &prepared.pod {
        applied.network = Some(pod.network.clone());
    }
    applied.not_enforced.extend(prepared.pod_note.take());
    applied.egress = Some(prepared.decision.egress.to_string());
    applied
        .not_enforced
        .extend(prepared.decision.notes.iter().cloned());
    if let Some(r) = &prepared.remote {
        applied.not_enforced.extend(r.notes.iter().cloned());
    }
}

/// A pool network without a pause gets one once this job exited, when
/// the job could join one: jobs whose ports the engine publishes never
/// do, and warming their networks would only grow the pool by a network
/// per such job.
fn warm_recipe(job: &Job<'_>, prepared: &Prepared) -> Option<Arc<(Arc<pause::Pauses>, pause::Recipe)>> {
    let engine = job.engine;
    (engine.warm.load(std::sync::atomic::Ordering::SeqCst)
        && prepared.may_join
        && prepared.slot.as_ref().is_some_and(|s| s.pause.is_none()))
    .then(|| {
        let recipe = pause::Recipe {
            // The instance's own default image, never the job's: the pause
            // shares its namespace with later jobs, so its `sleep` must not
            // be code a job chose.
            image: engine.image.clone(),
            ownership: engine.ownership.clone(),
            owner: engine.owner.clone(),
            pod: None,
        };
        Arc::new((engine.pool_of(prepared.decision.internal).pauses.clone(), recipe))
    })
}

/// The job's output pumped into its streams, and its input fed in.
async fn start_output(
    job: &Job<'_>,
    output: &Arc<crate::output::JobOutput>,
    stream: OutputStream,
    input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
) -> Result<JoinHandle<Pumped>> {
    let writers = match (output.writer(OutStream::Stdout), output.writer(OutStream::Stderr)) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let writers = Writers {
        out: writers.0,
        err: writers.1,
    };
    let pump_task = tokio::spawn(pump(stream, writers, Some(job.image.clone())));
    match job.spec.input.clone() {
        Some(text) => {
            // Under keep-alive an interactive program must see its input and
            // stay up until the timer stops it: hold stdin open that long.
            let hold = job.spec.keep_alive.map(std::time::Duration::from_secs_f64);
            tokio::spawn(feed(input, text, hold));
        }
        None => drop(input),
    }
    Ok(pump_task)
}

/// A launch that failed after the start: the container goes again, and
/// its output is drained to the end.
async fn take_down(
    wait: &JoinHandle<Waited>,
    control: &DockerControl,
    pump_task: Option<JoinHandle<Pumped>>,
) {
    wait.abort();
    control.remove().await;
    if let Some(task) = pump_task {
        let _ = task.await;
    }
}

/// A job in its pause's namespace has the pause's address.
/// A remote engine's container address is on its host: not for probes here.
fn internal_ip(
    joined: Option<&Pause>,
    remote: Option<&RemoteJob>,
    inspected: &ContainerInspectResponse,
) -> Option<std::net::IpAddr> {
    match (joined, remote) {
        (_, Some(_)) => None,
        (Some(h), None) => h.ip,
        (None, None) => super::super::client::container_ip(inspected),
    }
}

/// The ports the engine published, as inspect reports them.
fn published_ports(plan: &[PortPlan], inspected: &ContainerInspectResponse) -> Vec<PortMapping> {
    let settings = inspected.network_settings.as_ref();
    create::read_ports(plan, settings.and_then(|s| s.ports.as_ref()))
}

/// Where berth's listeners relay to: the job's address, or where a
/// remote engine published its ports; `None` when the job ended already
/// (its address went with its network endpoint).
fn upstream(
    remote: Option<&RemoteJob>,
    internal_ip: Option<std::net::IpAddr>,
    published: impl Fn() -> Vec<PortMapping>,
) -> Option<Upstream> {
    match (remote, internal_ip) {
        (Some(r), _) => Some(Upstream::Published {
            ip: r.reach,
            ports: published().iter().map(|m| (m.port, m.host_port)).collect(),
        }),
        (None, Some(ip)) => Some(Upstream::Address(ip)),
        (None, None) => None,
    }
}

/// The job's ports: the engine's, or berth's listeners relaying to
/// `upstream` (the ports as bound when there is none).
fn serve_ports(
    bound: Option<forward::BoundPorts>,
    upstream: Option<Upstream>,
    published: impl Fn() -> Vec<PortMapping>,
    control: &DockerControl,
) -> Result<Vec<PortMapping>> {
    Ok(match (bound, upstream) {
        (None, _) => published(),
        (Some(bound), None) => bound.mappings().to_vec(),
        (Some(bound), Some(upstream)) => {
            let forwarder = bound.serve(upstream)?;
            let ports = forwarder.mappings().to_vec();
            control.set_forwarder(forwarder);
            ports
        }
    })
}
