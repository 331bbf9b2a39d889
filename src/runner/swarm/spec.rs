//! The service a job becomes on a swarm: one replica that is never
//! restarted, the job's limits as limits *and* reservations (so the
//! scheduler places it where they fit), berth's labels on the service and
//! its container, ports published in host mode (the kernels swarm runs on
//! here have no IPVS, so the routing mesh is not used), and a stop grace of
//! berth's own.
//!
//! The workspace reaches the task as configs (`workspace.rs`): the command
//! is wrapped in a `/bin/sh` step that unpacks them into a tmpfs at the
//! workspace's path, changes into the job's directory and `exec`s the
//! job's own argv, so the job is PID 1's only child as on one engine.
//!
//! A `layer` job's step does not `exec`: it runs the job as its child
//! (passing on the stop signal), and once the job ended it writes the
//! workspace's archive on stdout behind the job's marker (`readback.rs`)
//! and exits with the job's status.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{
    EndpointPortConfig, EndpointPortConfigProtocolEnum, EndpointPortConfigPublishModeEnum, EndpointSpec,
    Limit, Mount, MountTmpfsOptions, MountType, NetworkAttachmentConfig, ResourceObject, ServiceSpec,
    ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec, TaskSpecContainerSpec,
    TaskSpecContainerSpecConfigs, TaskSpecContainerSpecFile1, TaskSpecContainerSpecPrivileges,
    TaskSpecResources, TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum,
};

use crate::error::{Error, Result};
use crate::model::{AppliedLimits, JobSpec, Limits, Proto};

/// Where the workspace's parts are mounted in the task, one file each.
pub const PARTS_DIR: &str = "/run/berth-workspace";

/// The step that unpacks the workspace before the job: `$1` the workspace,
/// `$2` the job's directory, the rest the job's argv.
const UNPACK: &str =
    "cat /run/berth-workspace/* | tar -xf - -C \"$1\" && cd \"$2\" && shift 2 && exec \"$@\"";

/// A `layer` job's step: `$3` the marker, the rest as for [`UNPACK`]. The
/// archive is numbered base64 lines (`sed =` numbers them), tar's status
/// taken out of the pipe through fd 3, the end line written only when the
/// pipe's last step did its part; only POSIX sh, tar, base64 and sed.
pub(super) const UNPACK_AND_SEND: &str = r#"cat /run/berth-workspace/* | tar -xf - -C "$1" && cd "$2" || exit
w=$1 m=$3
shift 3
trap 'kill -TERM $p 2>/dev/null' TERM INT
"$@" &
p=$!
while :; do wait $p; rc=$?; kill -0 $p 2>/dev/null || break; done
cd /
{ t=$( { { tar -cf - -C "${w%/*}/" "${w##*/}"; echo $? >&3; } | base64 -w 8000 | sed = | sed "N;s/\\n/ /;s/^/$m/" >&4; } 3>&1 ); } 4>&1 &&
echo "${m}end $t"
exit $rc"#;

/// What the service is made of, beyond the spec.
pub struct Parts<'a> {
    pub name: String,
    pub image: &'a str,
    pub labels: HashMap<String, String>,
    /// The workspace's path in the task and the job's directory in it.
    pub workspace: String,
    pub cwd: String,
    pub user: String,
    /// The configs holding the workspace, by id and name, in order.
    pub configs: Vec<(String, String)>,
    pub defaults: &'a Limits,
    pub grace: Duration,
    /// An internal overlay network for a job with no way out (none: the
    /// node's default bridge).
    pub network: Option<String>,
    /// Most bytes the workspace's tmpfs may hold.
    pub tmpfs_bytes: i64,
    /// A `layer` job's marker: its workspace is sent back after it.
    pub marker: Option<String>,
}

/// The service spec for `spec`, and the limits it applies.
pub fn service(spec: &JobSpec, parts: Parts<'_>) -> Result<(ServiceSpec, AppliedLimits)> {
    let argv = spec.effective_argv();
    if argv.is_empty() {
        return Err(Error::InvalidSpec("no command given".into()));
    }
    let mut applied = AppliedLimits::default();
    let resources = resources(spec, parts.defaults, &mut applied)?;
    applied.user = Some(parts.user.clone());
    applied.isolation = Some("container".into());
    let command = task_command(&parts, argv);
    let configs = config_files(&parts.configs, &parts.user);
    let container = TaskSpecContainerSpec {
        image: Some(parts.image.to_string()),
        labels: Some(parts.labels.clone()),
        command: Some(command),
        env: Some(environment(spec)),
        user: Some(parts.user),
        // The job's own PID 1 forwards the stop signal and reaps.
        init: Some(true),
        capability_drop: Some(vec!["ALL".into()]),
        // Newer engines honour it; 20.10 (API 1.41) ignores it (measured:
        // `NoNewPrivs: 0` in the task), said in SECURITY.md.
        privileges: Some(TaskSpecContainerSpecPrivileges {
            no_new_privileges: Some(true),
            ..Default::default()
        }),
        read_only: Some(spec.read_only),
        stop_grace_period: Some(parts.grace.as_nanos() as i64),
        mounts: Some(vec![Mount {
            target: Some(parts.workspace),
            typ: Some(MountType::TMPFS),
            tmpfs_options: Some(MountTmpfsOptions {
                size_bytes: Some(parts.tmpfs_bytes),
                mode: Some(0o1777),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        configs: Some(configs),
        ..Default::default()
    };
    let task = TaskSpec {
        container_spec: Some(container),
        resources: Some(resources),
        restart_policy: Some(TaskSpecRestartPolicy {
            condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
            ..Default::default()
        }),
        networks: parts.network.map(|target| {
            vec![NetworkAttachmentConfig {
                target: Some(target),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    let service = ServiceSpec {
        name: Some(parts.name),
        labels: Some(parts.labels),
        task_template: Some(task),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
            ..Default::default()
        }),
        endpoint_spec: Some(endpoint(spec)),
        ..Default::default()
    };
    Ok((service, applied))
}

/// The task's command: the step that unpacks the workspace (and, for a
/// `layer` job, sends it back after), then the job's own argv.
fn task_command(parts: &Parts<'_>, argv: Vec<String>) -> Vec<String> {
    let step = if parts.marker.is_some() {
        UNPACK_AND_SEND
    } else {
        UNPACK
    };
    let mut command = vec![
        "/bin/sh".into(),
        "-c".into(),
        step.into(),
        "berth-workspace".into(),
    ];
    command.extend([parts.workspace.clone(), parts.cwd.clone()]);
    command.extend(parts.marker.clone());
    command.extend(argv);
    command
}

/// The configs holding the workspace as files in [`PARTS_DIR`], in order,
/// readable only by the job's user.
fn config_files(configs: &[(String, String)], user: &str) -> Vec<TaskSpecContainerSpecConfigs> {
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    configs
        .iter()
        .enumerate()
        .map(|(i, (id, name))| TaskSpecContainerSpecConfigs {
            file: Some(TaskSpecContainerSpecFile1 {
                name: Some(format!("{PARTS_DIR}/{i:04}")),
                uid: Some(uid.to_string()),
                gid: Some(gid.to_string()),
                mode: Some(0o400),
            }),
            config_id: Some(id.clone()),
            config_name: Some(name.clone()),
            ..Default::default()
        })
        .collect()
}

/// The job's environment: line-buffered output, its ports' numbers, then
/// its own (which win).
fn environment(spec: &JobSpec) -> Vec<String> {
    let mut env: Vec<(String, String)> = vec![("HOME".into(), "/tmp".into())];
    env.extend(
        crate::runner::LINE_BUFFERED
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    if let Some(first) = spec.ports.first() {
        env.push(("PORT".into(), first.port.to_string()));
    }
    for p in &spec.ports {
        env.push((format!("BERTH_PORT_{}", p.port), p.port.to_string()));
    }
    env.retain(|(k, _)| !spec.env.contains_key(k));
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Each port published on the node the task runs on (host mode), on a
/// port the node picks: berth's 127.0.0.1 listener is the one the caller
/// asked for.
fn endpoint(spec: &JobSpec) -> EndpointSpec {
    let ports = spec
        .ports
        .iter()
        .map(|p| EndpointPortConfig {
            protocol: Some(match p.proto {
                Proto::Tcp => EndpointPortConfigProtocolEnum::TCP,
                Proto::Udp => EndpointPortConfigProtocolEnum::UDP,
            }),
            target_port: Some(i64::from(p.port)),
            publish_mode: Some(EndpointPortConfigPublishModeEnum::HOST),
            ..Default::default()
        })
        .collect();
    EndpointSpec {
        ports: Some(ports),
        ..Default::default()
    }
}

/// The job's CPU, memory and process limits (as on one engine), reserved
/// as well: a node the scheduler picks has room for them (each node
/// advertises its whole host, so on one machine reservations are bookkeeping).
fn resources(spec: &JobSpec, defaults: &Limits, applied: &mut AppliedLimits) -> Result<TaskSpecResources> {
    let r = crate::runner::docker::resources(spec, defaults, applied)?;
    Ok(TaskSpecResources {
        limits: Some(Limit {
            nano_cpus: r.nano_cpus,
            memory_bytes: r.memory,
            pids: Some(r.pids),
        }),
        reservations: Some(ResourceObject {
            nano_cpus: r.nano_cpus,
            memory_bytes: r.memory,
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(defaults: &Limits) -> Parts<'_> {
        Parts {
            name: "berth-x-job-1".into(),
            image: "berth/sandbox",
            labels: HashMap::from([("berth.job".into(), "job-1".into())]),
            workspace: "/w".into(),
            cwd: "/w/sub".into(),
            user: "1000:1000".into(),
            configs: vec![("c0".into(), "n0".into()), ("c1".into(), "n1".into())],
            defaults,
            grace: Duration::from_secs(2),
            network: None,
            tmpfs_bytes: 1 << 30,
            marker: None,
        }
    }

    #[test]
    fn a_job_is_one_replica_never_restarted_with_its_limits_reserved_and_ports_in_host_mode() {
        let mut spec = JobSpec::argv(["echo", "hi there"]);
        spec.limits.cpus = Some(0.5);
        spec.limits.memory = Some(64 << 20);
        spec.ports = vec![crate::model::PortSpec {
            port: 8080,
            host_port: None,
            proto: Proto::Tcp,
        }];
        let defaults = Limits::default();
        let (svc, applied) = service(&spec, parts(&defaults)).unwrap();
        let task = svc.task_template.unwrap();
        let res = task.resources.unwrap();
        assert_eq!(res.limits.as_ref().unwrap().nano_cpus, Some(500_000_000));
        assert_eq!(res.reservations.as_ref().unwrap().memory_bytes, Some(64 << 20));
        assert_eq!(applied.memory, Some(64 << 20));
        assert_eq!(
            task.restart_policy.unwrap().condition,
            Some(TaskSpecRestartPolicyConditionEnum::NONE)
        );
        assert_eq!(svc.mode.unwrap().replicated.unwrap().replicas, Some(1));
        let port = &svc.endpoint_spec.unwrap().ports.unwrap()[0];
        assert_eq!(port.publish_mode, Some(EndpointPortConfigPublishModeEnum::HOST));
        assert_eq!(port.published_port, None);
        let c = task.container_spec.unwrap();
        let cmd = c.command.unwrap();
        // The job's argv is passed through untouched, after the unpack step's.
        assert_eq!(&cmd[4..], ["/w", "/w/sub", "echo", "hi there"]);
        let files: Vec<_> = c
            .configs
            .unwrap()
            .into_iter()
            .map(|c| c.file.unwrap().name.unwrap())
            .collect();
        assert_eq!(files, [format!("{PARTS_DIR}/0000"), format!("{PARTS_DIR}/0001")]);
        assert_eq!(c.labels.unwrap()["berth.job"], "job-1");
        assert_eq!(c.stop_grace_period, Some(2_000_000_000));
    }
}
