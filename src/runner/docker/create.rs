//! Turns a [`JobSpec`] into the engine's container-create body: limits,
//! hardening, published ports, labels, environment, workspace mount and
//! command. Pure (no engine calls), so every rule here is unit-tested without
//! Docker, and the launch sequence in `launch.rs` stays about ordering.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, Mount, NetworkingConfig, PortBinding,
};

use super::ownership::LABEL_STATE;
pub use super::ownership::{clean_name, container_name};
use super::reach::Attach;
use crate::error::{Error, Result};
use crate::model::{AppliedLimits, JobId, JobSpec, Limits, Network, PortMapping, Proto};

/// The writable `/tmp` of a read-only container: small, and no setuid files.
pub const READ_ONLY_TMPFS: &str = "rw,nosuid,nodev,size=64m";

/// HOME of a container job: a private tmpfs owned by the job's user, so
/// tools that write caches and config work although the job is not root and
/// the image (or a read-only root) is not writable. `exec` because tools
/// install helpers there; setuid files still mean nothing (`nosuid`).
pub const HOME_DIR: &str = "/home/berth";
const HOME_TMPFS: &str = "rw,nosuid,nodev,exec,size=256m,mode=0700";

/// Processes a container may have when neither the spec nor the config set a
/// limit: enough for any dev server or build, low enough that a fork bomb
/// stays contained.
pub const DEFAULT_PIDS_LIMIT: i64 = crate::config::DEFAULT_PIDS;

use super::ownership::{LABEL_INSTANCE, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER};

/// How one asked-for port is published in one create attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct PortPlan {
    pub port: u16,
    pub proto: Proto,
    /// `None` lets the engine pick (no bind-then-close race on our side).
    pub host_port: Option<u16>,
    /// Why the asked host port is not used, when it is not.
    pub note: Option<String>,
}

impl PortPlan {
    /// The engine's key for this port, e.g. `3000/tcp`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.port, self.proto)
    }
}

/// The first plan for a spec. An asked host port seen taken before asking
/// the engine (`precheck`; tests turn it off to exercise the engine's own
/// refusal) is `port_in_use`: never silently another port.
pub fn plan_ports(spec: &JobSpec, precheck: bool) -> crate::error::Result<Vec<PortPlan>> {
    spec.ports
        .iter()
        .map(|p| {
            let plan = PortPlan {
                port: p.port,
                proto: p.proto,
                host_port: p.host_port,
                note: None,
            };
            // Checking first saves a create/start/remove round for the common
            // case; the engine still has the last word (see `launch`).
            if let (Some(h), true) = (p.host_port, precheck) {
                let free = match p.proto {
                    Proto::Udp => portpicker::is_free_udp(h),
                    Proto::Tcp => portpicker::is_free_tcp(h),
                };
                if !free {
                    return Err(crate::error::Error::PortInUse {
                        port: h,
                        job_port: p.port,
                    });
                }
            }
            Ok(plan)
        })
        .collect()
}

/// Everything about the container that does not come from the spec.
pub struct Context<'a> {
    pub id: &'a JobId,
    pub image: &'a str,
    pub instance: &'a str,
    pub owner: &'a str,
    /// The `berth.state` label: hash of the manager's canonical state dir.
    pub state: &'a str,
    /// `UID:GID` or `root`: who the job runs as.
    pub user: &'a str,
    /// The instance's isolated bridge network (used unless `none`).
    pub network: &'a str,
    /// The network when the spec does not say (the config's).
    pub default_network: Network,
    /// Limits for what the spec leaves unset.
    pub defaults: &'a Limits,
    pub workspace: &'a Path,
    pub cwd: &'a Path,
    /// What the job's network gives the container (`reach.rs`).
    pub attach: &'a Attach,
    /// The project asks every job for a read-only root (`read_only = true`).
    pub read_only: bool,
    /// Read-only bind mounts over project files (berth.toml, .devcontainer/ …).
    pub protected: &'a [Mount],
    /// The `-v` directories as the engine reaches them, in the spec's
    /// order: open directories, not paths (`launch/pins.rs`).
    pub pinned: &'a [std::path::PathBuf],
    /// The job's scoped engine: its socket's mount and variables.
    pub engine: Option<&'a super::scoped::Setup>,
    /// A remote engine's job: the workspace is a volume of its own (filled
    /// by the attempt before the start), ports are published on the engine
    /// host (`remote.rs`).
    pub remote: Option<&'a super::remote::RemoteJob>,
    /// `layer` mode: the volume that mounts the job's layer (`layer.rs`).
    pub layer: Option<&'a super::layer::LayerMount>,
    /// The engine runtime: `None` for its default, gVisor's (`gvisor.rs`).
    pub runtime: Option<&'a str>,
}

/// The engine's `User` and the uid/gid for HOME's tmpfs. `root` is `0:0`.
fn user_ids(user: &str) -> (String, String) {
    match user.split_once(':') {
        Some((u, g)) => (u.to_string(), g.to_string()),
        None if user == "root" => ("0".into(), "0".into()),
        None => (user.to_string(), user.to_string()),
    }
}

/// Where the workspace is mounted and which directory the job starts in.
/// The workspace appears at its host path, so paths printed by the job (and
/// paths the agent passes in) mean the same thing on both sides.
fn mount_plan(workspace: &Path, cwd: &Path) -> Result<(PathBuf, PathBuf)> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (ws, cwd) = (real(workspace), real(cwd));
    if !cwd.starts_with(&ws) {
        return Err(Error::InvalidSpec(format!(
            "working directory `{}` is outside the workspace `{}`; a container job only sees the workspace",
            cwd.display(),
            ws.display()
        )));
    }
    if ws == Path::new("/") {
        return Err(Error::InvalidSpec(
            "the workspace is `/`; refusing to mount the whole host into a container (set BERTH_WORKSPACE)"
                .into(),
        ));
    }
    Ok((ws, cwd))
}

/// HOME for a job whose workspace is `ws`: [`HOME_DIR`], unless the
/// workspace contains it (`workspace = "/home"`), where the engine would make
/// the mount point inside the workspace, on the host, as root.
fn home_dir(ws: &Path) -> String {
    [HOME_DIR, "/run/berth-home", "/var/lib/berth-home"]
        .into_iter()
        .find(|h| !Path::new(h).starts_with(ws))
        .unwrap_or(HOME_DIR)
        .to_string()
}

/// The create body and the limits it applies.
pub fn body(
    spec: &JobSpec,
    ctx: &Context<'_>,
    ports: &[PortPlan],
) -> Result<(ContainerCreateBody, AppliedLimits)> {
    let argv = spec.effective_argv();
    if argv.is_empty() {
        return Err(Error::InvalidSpec("no command given".into()));
    }
    let (ws, cwd) = mount_plan(ctx.workspace, ctx.cwd)?;

    let mut applied = AppliedLimits::default();
    let resources = resources(spec, ctx.defaults, &mut applied)?;
    let (uid, gid) = user_ids(ctx.user);
    applied.user = Some(if uid == "0" {
        "root".into()
    } else {
        format!("{uid}:{gid}")
    });
    let network_mode = network_mode(spec, ctx);
    applied.network = Some(network_mode.clone());
    applied.isolation = Some(match ctx.runtime {
        Some(r) => format!("gvisor ({r})"),
        None => "container".into(),
    });
    let (bindings, exposed) = port_bindings(ctx, ports);
    let home = home_dir(&ws);
    let env = env::environment(spec, ctx, ports, &home);
    let tmpfs = mounts::tmpfs(spec, ctx, &ws, home, (&uid, &gid));
    let mounts = mounts::all(spec, ctx, &ws)?;
    let networking_config = networking_config(ctx, &network_mode);
    let host_config = host_config(spec, ctx, resources, bindings, mounts, tmpfs, network_mode);

    let has_input = spec.input.is_some();
    let body = ContainerCreateBody {
        image: Some(ctx.image.to_string()),
        // The caller's uid:gid by default: files the job writes in the
        // workspace are the caller's, and a setuid copy is not root's.
        user: Some(format!("{uid}:{gid}")),
        cmd: Some(argv),
        // The image's entrypoint would change what `argv` means.
        entrypoint: Some(Vec::new()),
        env: Some(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()),
        working_dir: Some(cwd.to_string_lossy().into_owned()),
        labels: Some(labels(ctx)),
        exposed_ports: (!exposed.is_empty()).then_some(exposed),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        // Stdin only to deliver `input`; StdinOnce closes it after our write
        // side closes, so a job never waits on an open stdin.
        attach_stdin: Some(has_input),
        open_stdin: Some(has_input),
        stdin_once: Some(has_input),
        tty: Some(false),
        hostname: ctx.attach.hostname.clone(),
        host_config: Some(host_config),
        networking_config,
        ..Default::default()
    };
    Ok((body, applied))
}

/// The engine's limits of a job: the spec's, else the project's defaults.
pub struct Resources {
    pub nano_cpus: Option<i64>,
    pub memory: Option<i64>,
    pub pids: i64,
}

/// The job's CPU, memory and process limits in the engine's units, noted
/// in `applied` as they are set.
pub fn resources(
    spec: &JobSpec,
    defaults: &crate::model::Limits,
    applied: &mut AppliedLimits,
) -> Result<Resources> {
    let nano_cpus = spec.limits.cpus.or(defaults.cpus).map(|c| {
        applied.cpus = Some(c);
        (c * 1e9).round() as i64
    });
    let memory = match spec.limits.memory.or(defaults.memory) {
        Some(m) => {
            let m = i64::try_from(m).map_err(|_| Error::InvalidValue {
                what: "memory",
                input: m.to_string(),
                message: "too large".into(),
            })?;
            applied.memory = Some(m as u64);
            Some(m)
        }
        None => None,
    };
    let pids = spec.limits.pids.or(defaults.pids).unwrap_or(DEFAULT_PIDS_LIMIT);
    applied.pids = Some(pids);
    Ok(Resources {
        nano_cpus,
        memory,
        pids,
    })
}

/// The engine's network mode for the job's network.
fn network_mode(spec: &JobSpec, ctx: &Context<'_>) -> String {
    match spec.network.unwrap_or(ctx.default_network) {
        Network::None => "none".to_string(),
        Network::Isolated | Network::Project => ctx.network.to_string(),
        Network::Bridge => "bridge".to_string(),
    }
}

/// Port bindings by port key.
type Bindings = HashMap<String, Option<Vec<PortBinding>>>;

/// The ports the engine publishes (none when berth forwards them), and
/// their keys as exposed ports.
fn port_bindings(ctx: &Context<'_>, ports: &[PortPlan]) -> (Bindings, Vec<String>) {
    let mut bindings: Bindings = HashMap::new();
    let mut exposed = Vec::new();
    // Ports berth forwards are none of the engine's business.
    let published = if ctx.attach.berth_forwards { &[][..] } else { ports };
    for p in published {
        exposed.push(p.key());
        bindings.insert(
            p.key(),
            Some(vec![PortBinding {
                // Never on all interfaces: a job's server is for this machine
                // only (a remote engine's: for the address berth relays from).
                host_ip: Some(ctx.remote.map_or("127.0.0.1", |r| r.publish_ip.as_str()).into()),
                host_port: Some(p.host_port.map(|h| h.to_string()).unwrap_or_default()),
            }]),
        );
    }
    (bindings, exposed)
}

/// The labels `remove_labelled` and crash recovery find the container by.
pub(super) fn labels(ctx: &Context<'_>) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_MANAGED.to_string(), "true".to_string()),
        (LABEL_INSTANCE.to_string(), ctx.instance.to_string()),
        (LABEL_OWNER.to_string(), ctx.owner.to_string()),
        (LABEL_JOB.to_string(), ctx.id.to_string()),
        (LABEL_STATE.to_string(), ctx.state.to_string()),
    ])
}

/// The job's own name on its own endpoint (a joined job has none).
fn networking_config(ctx: &Context<'_>, network_mode: &str) -> Option<NetworkingConfig> {
    match (&ctx.attach.alias, network_mode.starts_with("container:")) {
        (Some(alias), false) if !matches!(network_mode, "none" | "bridge") => Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                network_mode.to_string(),
                EndpointSettings {
                    aliases: Some(vec![alias.clone()]),
                    ..Default::default()
                },
            )])),
        }),
        _ => None,
    }
}

/// The hardening and limits of the container, with its ports, mounts and
/// network.
fn host_config(
    spec: &JobSpec,
    ctx: &Context<'_>,
    resources: Resources,
    bindings: Bindings,
    mounts: Vec<Mount>,
    tmpfs: HashMap<String, String>,
    network_mode: String,
) -> HostConfig {
    HostConfig {
        // A real PID 1 that forwards signals and reaps: a stop takes ~0.1 s
        // instead of the whole grace, and zombies do not pile up.
        init: Some(true),
        nano_cpus: resources.nano_cpus,
        memory: resources.memory,
        // Equal to memory: no swap on top, so the limit means what it says.
        memory_swap: resources.memory,
        pids_limit: Some(resources.pids),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        privileged: Some(false),
        // Never auto-remove: the output is drained first, then we remove.
        auto_remove: Some(false),
        port_bindings: (!bindings.is_empty()).then_some(bindings),
        // Private propagation: nothing mounted later on either side shows up
        // on the other. (The engine's API has no nosuid/nodev for binds; the
        // job's files are the caller's, and no-new-privileges makes setuid
        // bits inert inside, so a setuid copy grants nobody more than the caller.)
        mounts: Some(mounts),
        // Opt-in: the image cannot be changed, only the workspace and /tmp.
        readonly_rootfs: Some(spec.read_only || ctx.read_only),
        tmpfs: Some(tmpfs),
        network_mode: Some(network_mode),
        runtime: ctx.runtime.map(String::from),
        ..Default::default()
    }
}

/// The mappings the engine actually made, read back from inspect. A port the
/// engine did not report keeps `host_port` 0 rather than inventing one.
pub fn read_ports(
    plan: &[PortPlan],
    ports: Option<&HashMap<String, Option<Vec<PortBinding>>>>,
) -> Vec<PortMapping> {
    plan.iter()
        .map(|p| {
            let host_port = ports
                .and_then(|m| m.get(&p.key()))
                .and_then(|b| b.as_ref())
                .and_then(|bs| {
                    bs.iter()
                        .find(|b| b.host_ip.as_deref() == Some("127.0.0.1"))
                        .or_else(|| bs.first())
                })
                .and_then(|b| b.host_port.as_deref())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            PortMapping {
                port: p.port,
                proto: p.proto,
                host_ip: "127.0.0.1".into(),
                host_port,
                note: p.note.clone(),
                listen: None,
            }
        })
        .collect()
}

mod env;
mod mounts;
#[cfg(test)]
mod tests;
