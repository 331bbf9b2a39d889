//! Adopting a container that a dead manager left running (recovery mode
//! `adopt`): follow its logs again and observe its exit as if we had started
//! it. The logs endpoint replays the whole output from the start; the lines
//! the store already holds are skipped per stream, so the job's seq continues
//! from the last stored line with no gap and no duplicate.
//!
//! What berth ran for the job died with the old manager: its forwarded
//! ports are listened on again (the recorded host ports; one taken
//! meanwhile is replaced, with a note) and its egress proxy is started
//! again on the address in the job's environment.

use std::sync::Arc;

use super::DockerClient;
use bollard::query_parameters::LogsOptions;

use super::exit::{OutputStream, Writers, exit_future, pump, wait_exit};
use super::pool::{NetAddr, Slot};
use super::reach::{self, JobNet};
use super::{DockerControl, Engine};
use crate::error::{Error, Result};
use crate::model::{AppliedLimits, JobId, PortMapping};
use crate::net::{Allowlist, DenialFn, Upstream, Want, forward};
use crate::output::{JobOutput, Stream as OutStream};
use crate::runner::{Control, Launched};

/// What the record of an orphaned container job says about it.
pub struct Adoption {
    pub container_id: String,
    /// Lines already stored per stream (stdout, stderr): the replay skips them.
    pub stored: (u64, u64),
    pub ports: Vec<PortMapping>,
    pub limits: AppliedLimits,
    /// The job's project's egress allowlist, and who hears of its denials.
    pub allow: Allowlist,
    pub on_denial: DenialFn,
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
        allow,
        on_denial,
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
    let pump_task = follow_logs(&docker, container_id, output, stored)?;
    // A job that joined a pause container has the pause's address and network.
    let pause = pause_of(&docker, &inspected).await;
    let on_network = pause.as_ref().unwrap_or(&inspected);
    let internal_ip = super::client::container_ip(on_network);
    // On a pool network: hold its slot until the container is removed.
    let slot = claim(engine, on_network);
    if slot.is_some() {
        engine
            .used_network
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let rules = engine.rules(allow, on_denial);
    let proxy = restart_proxy(id, &inspected, slot.as_ref(), &rules);
    let control = DockerControl::new(
        engine,
        id,
        docker.clone(),
        container_id.to_string(),
        slot,
        JobNet::new(proxy),
    );
    let ports = forward_again(id, &control, &inspected, ports, internal_ip);
    let exit = Box::pin(exit_future(docker, control.clone(), wait, pump_task, id.clone()));
    Ok(Launched {
        sweep: None,
        engine: None,
        node: None,
        pid: None,
        container_id: Some(container_id.to_string()),
        ports,
        limits,
        internal_ip,
        control: Control::new(control),
        exit,
    })
}

/// Follow the container's whole log again into the job's output, skipping
/// the lines per stream (`stored`) the store already holds.
fn follow_logs(
    docker: &DockerClient,
    container_id: &str,
    output: &Arc<JobOutput>,
    stored: (u64, u64),
) -> Result<tokio::task::JoinHandle<super::exit::Pumped>> {
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
    Ok(tokio::spawn(pump(stream, Writers { out, err }, None)))
}

/// The pause container a job joined (`container:` network mode), inspected.
async fn pause_of(
    docker: &DockerClient,
    inspected: &bollard::models::ContainerInspectResponse,
) -> Option<bollard::models::ContainerInspectResponse> {
    let joined = inspected
        .host_config
        .as_ref()
        .and_then(|h| h.network_mode.as_deref())
        .and_then(|m| m.strip_prefix("container:"));
    match joined {
        Some(pause) => docker.inspect_container(pause).await.ok(),
        None => None,
    }
}

/// The job's egress proxy, started again on the port its `HTTP_PROXY`
/// names, on its pool network's slot; none (with a warning) if it fails.
fn restart_proxy(
    id: &JobId,
    inspected: &bollard::models::ContainerInspectResponse,
    slot: Option<&Slot>,
    rules: &reach::EgressRules,
) -> Option<crate::net::Proxy> {
    match (proxy_port(inspected), slot) {
        (Some(port), Some(slot)) => {
            match reach::start_proxy(id.as_str(), &slot.addr, &slot.name, rules, port) {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "could not start the adopted job's egress proxy again");
                    None
                }
            }
        }
        _ => None,
    }
}

/// The job's ports after adoption: forwarded again by berth (the recorded
/// host ports where free) when the engine did not publish them.
fn forward_again(
    id: &JobId,
    control: &DockerControl,
    inspected: &bollard::models::ContainerInspectResponse,
    ports: Vec<PortMapping>,
    internal_ip: Option<std::net::IpAddr>,
) -> Vec<PortMapping> {
    // Ports the engine did not publish were berth's: listen again.
    let engine_published = inspected
        .host_config
        .as_ref()
        .and_then(|h| h.port_bindings.as_ref())
        .is_some_and(|b| !b.is_empty());
    match (engine_published || ports.is_empty(), internal_ip) {
        (false, Some(ip)) => {
            let wants: Vec<Want> = ports
                .iter()
                .map(|p| Want {
                    port: p.port,
                    proto: p.proto,
                    host_port: Some(p.host_port).filter(|h| *h != 0),
                    note: None,
                    // The port the job had before the crash: another if taken since.
                    strict: false,
                })
                .collect();
            match forward::bind(id.as_str(), &wants).and_then(|b| b.serve(Upstream::Address(ip))) {
                Ok(f) => {
                    let ports = f.mappings().to_vec();
                    control.set_forwarder(f);
                    ports
                }
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "could not forward the adopted job's ports again");
                    ports
                }
            }
        }
        _ => ports,
    }
}

/// The pool slot of the network `container` is on, if it is one of ours.
fn claim(engine: &Engine, container: &bollard::models::ContainerInspectResponse) -> Option<Slot> {
    let networks = container.network_settings.as_ref()?.networks.as_ref()?;
    networks.iter().find_map(|(name, ep)| {
        let id = ep.network_id.clone().unwrap_or_default();
        let gateway = ep.gateway.as_deref().and_then(|g| g.parse().ok());
        let ip = ep.ip_address.as_deref().and_then(|i| i.parse().ok());
        let subnet = ip.zip(ep.ip_prefix_len).map(|(ip, len)| {
            let len = len.clamp(0, 128) as u8;
            (crate::net::proxy::dest::network(ip, len), len)
        });
        let addr = NetAddr { gateway, subnet };
        engine
            .pool
            .claim(name, id.clone(), addr)
            .or_else(|| engine.nat_pool.claim(name, id, addr))
    })
}

/// The port of the egress proxy named in the job's `HTTP_PROXY`.
fn proxy_port(container: &bollard::models::ContainerInspectResponse) -> Option<u16> {
    let env = container.config.as_ref()?.env.as_ref()?;
    let url = env.iter().find_map(|e| e.strip_prefix("HTTP_PROXY="))?;
    url.strip_prefix("http://")?
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.port())
}
