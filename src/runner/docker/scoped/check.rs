//! The container-create body a job sends, checked and rewritten before the
//! engine sees it. Pure (the job's own objects come through [`Lookup`]), so
//! every rule is unit-tested without an engine.
//!
//! Refused: `Privileged`; capabilities beyond the engine's default set;
//! devices; the host's (or another container's) PID, IPC, UTS, user,
//! cgroup or network namespace (a child may share only a namespace of
//! another child of the same job); binds outside the workspace, of sockets,
//! or of the engine's socket; volume drivers and driver options; a
//! `SecurityOpt` other than `no-new-privileges`; masked or read-only paths,
//! sysctls, a cgroup parent, real-time CPU, another runtime; restart
//! policies that would outlive the job; limits beyond the job's budget; any
//! field berth does not know. Rewritten: the child goes on a network of its
//! own (one container per network, as every job; see `network.rs`), is
//! reached through berth's relay instead of published ports, gets
//! `no-new-privileges`, berth's labels (parent job, instance, state hash,
//! owner), no swap beyond its memory, and binds of the workspace become
//! read-only copies taken now (a path swapped for a symlink later is never
//! what the engine mounts).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub use super::fields::Refusal;
use super::fields::{array, canonical, int, join, object, text, unset};

/// The job's own objects, as its registry knows them.
pub trait Lookup {
    /// The full id of the job's child `r` (id, id prefix or name).
    fn child(&self, r: &str) -> Option<String>;
    /// The id of a network the job made, by name or id.
    fn network(&self, r: &str) -> Option<String>;
    /// The engine's name for the job's volume `name`.
    fn volume(&self, name: &str) -> String;
}

/// What the job's children may still take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The job's CPUs: no child gets more.
    pub cpus: f64,
    /// Memory and processes not yet given to a child (the job's own
    /// limits are the sum budget of its children).
    pub memory_left: u64,
    pub pids_left: i64,
}

/// A child's limits when it asks for none (less when the budget is lower).
pub const DEFAULT_CHILD_MEMORY: u64 = 512 << 20;
pub const DEFAULT_CHILD_PIDS: i64 = 256;
/// Least memory the engine accepts for a container.
const MIN_MEMORY: u64 = crate::model::MIN_MEMORY;

/// What a create may say, beside the body's rules.
pub struct Rules<'a> {
    /// The workspace (canonical): the only place binds may come from.
    pub workspace: &'a Path,
    pub budget: Budget,
    /// berth's labels (parent, instance, state, owner, child name).
    pub labels: &'a HashMap<String, String>,
    /// The network of the child's own (a pool network).
    pub network: &'a str,
}

/// A workspace path the caller copies; its copy becomes the source of mount `index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindCopy {
    pub index: usize,
    /// Relative to the workspace ("" for the workspace itself).
    pub rel: PathBuf,
}

/// A checked create.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub body: Value,
    pub image: String,
    pub memory: u64,
    pub pids: i64,
    pub cpus: f64,
    pub copies: Vec<BindCopy>,
    /// Job volumes the child uses (name the job gave, engine name): made
    /// first if missing.
    pub volumes: Vec<(String, String)>,
    /// Job networks (ids) to connect the child to after the create, with
    /// the endpoint settings asked (aliases).
    pub connect: Vec<(String, Value)>,
    /// The child uses its own pool network (not `none` or another child's).
    pub own_network: bool,
}

#[rustfmt::skip]
const TOP: &[&str] = &[
    "Hostname", "Domainname", "User", "AttachStdin", "AttachStdout", "AttachStderr", "ExposedPorts", "Tty",
    "OpenStdin", "StdinOnce", "Env", "Cmd", "Healthcheck", "ArgsEscaped", "Image", "Volumes", "WorkingDir",
    "Entrypoint", "NetworkDisabled", "MacAddress", "OnBuild", "Labels", "StopSignal", "StopTimeout",
    "Shell", "HostConfig", "NetworkingConfig",
];

/// HostConfig fields passed as they are: they shape the child, not its reach.
#[rustfmt::skip]
const PASS: &[&str] = &[
    "ContainerIDFile", "AutoRemove", "CapDrop", "Dns", "DnsOptions", "DnsSearch", "ExtraHosts", "GroupAdd",
    "ReadonlyRootfs", "Tmpfs", "ShmSize", "ConsoleSize", "CpuShares", "BlkioWeight", "BlkioWeightDevice",
    "BlkioDeviceReadBps", "BlkioDeviceWriteBps", "BlkioDeviceReadIOps", "BlkioDeviceWriteIOps",
    "CpusetCpus", "CpusetMems", "KernelMemory", "KernelMemoryTCP", "MemoryReservation", "MemorySwappiness",
    "Init", "Ulimits", "IOMaximumIOps", "IOMaximumBandwidth",
];

/// HostConfig fields that must be left to the engine's default, and why.
const UNSET: &[(&str, &str)] = &[
    ("Privileged", "a privileged child is root on the engine's host"),
    ("Devices", "a child gets no host devices"),
    ("DeviceCgroupRules", "a child gets no host devices"),
    ("DeviceRequests", "a child gets no host devices"),
    (
        "Links",
        "links are not kept; reach other children by the job's networks",
    ),
    ("VolumeDriver", "volume drivers run with the engine's privileges"),
    ("StorageOpt", "storage options are the engine's"),
    ("Sysctls", "kernel settings are the host's"),
    ("Cgroup", "a child's cgroup is its own"),
    ("CgroupParent", "a child's cgroup is berth's choice (its limits)"),
    ("CpuRealtimePeriod", "real-time scheduling is the host's"),
    ("CpuRealtimeRuntime", "real-time scheduling is the host's"),
    ("OomKillDisable", "a child's memory limit must hold"),
    ("CpuCount", "Windows only"),
    ("CpuPercent", "Windows only"),
    ("Annotations", "runtime annotations are the engine's"),
];

/// HostConfig fields checked or rewritten below.
#[rustfmt::skip]
const CHECKED: &[&str] = &[
    "Binds", "Mounts", "VolumesFrom", "NetworkMode", "PortBindings", "PublishAllPorts", "RestartPolicy",
    "LogConfig", "CapAdd", "SecurityOpt", "PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode",
    "Runtime", "Isolation", "Memory", "MemorySwap", "NanoCpus", "CpuPeriod", "CpuQuota", "PidsLimit",
    "OomScoreAdj", "MaskedPaths", "ReadonlyPaths",
];

/// The engine's default capabilities (Docker 20.10): adding one of these is a no-op.
#[rustfmt::skip]
const DEFAULT_CAPS: &[&str] = &[
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
];

#[rustfmt::skip]
const ENDPOINT: &[&str] = &[
    "IPAMConfig", "Links", "Aliases", "NetworkID", "EndpointID", "Gateway", "IPAddress", "IPPrefixLen",
    "IPv6Gateway", "GlobalIPv6Address", "GlobalIPv6PrefixLen", "MacAddress", "DriverOpts",
];

/// Check and rewrite a container-create `body`.
pub fn create(body: Value, rules: &Rules<'_>, lookup: &dyn Lookup) -> Result<Plan, Refusal> {
    let Value::Object(body) = body else {
        return Err(Refusal::new("body", "must be a JSON object"));
    };
    let mut top = canonical(body, TOP, "")?;
    let image = text(&top, "Image").to_string();
    if image.is_empty() {
        return Err(Refusal::new("Image", "name the image to run"));
    }
    let all: Vec<&str> = PASS
        .iter()
        .chain(CHECKED)
        .copied()
        .chain(UNSET.iter().map(|(k, _)| *k))
        .collect();
    let mut host = canonical(
        object(top.remove("HostConfig"), "HostConfig")?,
        &all,
        "HostConfig",
    )?;
    for (key, why) in UNSET {
        if !unset(host.get(*key)) {
            return Err(Refusal::new(join("HostConfig", key), *why));
        }
        host.remove(*key);
    }
    // Present at all (even empty) they replace the engine's masked /proc paths.
    for key in ["MaskedPaths", "ReadonlyPaths"] {
        match host.remove(key) {
            None | Some(Value::Null) => {}
            Some(_) => {
                return Err(Refusal::new(
                    join("HostConfig", key),
                    "a child keeps the engine's masked and read-only paths",
                ));
            }
        }
    }
    namespaces(&mut host, lookup)?;
    capabilities(&mut host)?;
    security(&mut host)?;
    restart_and_logs(&mut host)?;
    let (memory, pids, cpus) = limits::limits(&mut host, &rules.budget)?;
    let (copies, volumes) = mounts::mounts(&mut host, rules.workspace, lookup)?;
    let (own_network, connect) = network::network(&mut host, &mut top, rules.network, lookup)?;
    network::ports(&mut host, &mut top)?;
    let mut labels = match top.remove("Labels") {
        Some(Value::Object(l)) => l,
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(Refusal::new("Labels", "must be an object")),
    };
    // A child cannot pass for another berth's object, or for a job.
    labels.retain(|k, _| !k.to_ascii_lowercase().starts_with("berth."));
    for (k, v) in rules.labels {
        labels.insert(k.clone(), json!(v));
    }
    top.insert("Labels".into(), Value::Object(labels));
    top.insert("HostConfig".into(), Value::Object(host));
    Ok(Plan {
        body: Value::Object(top),
        image,
        memory,
        pids,
        cpus,
        copies,
        volumes,
        connect,
        own_network,
    })
}

/// Namespaces: a child's own, or another child's of the same job.
fn namespaces(host: &mut Map<String, Value>, lookup: &dyn Lookup) -> Result<(), Refusal> {
    for (key, allowed) in [
        ("PidMode", &[""][..]),
        ("IpcMode", &["", "private", "shareable", "none"][..]),
        ("UTSMode", &[""][..]),
        ("UsernsMode", &[""][..]),
        ("CgroupnsMode", &["", "private"][..]),
        ("Runtime", &["", "runc"][..]),
        ("Isolation", &["", "default"][..]),
    ] {
        let v = text(host, key).to_string();
        if allowed.contains(&v.as_str()) {
            continue;
        }
        let field = join("HostConfig", key);
        match v.strip_prefix("container:") {
            Some(r) if matches!(key, "PidMode" | "IpcMode") => match lookup.child(r) {
                Some(id) => {
                    host.insert(key.into(), json!(format!("container:{id}")));
                }
                None => {
                    return Err(Refusal::new(
                        field,
                        "a child may share only the namespace of another child of the same job",
                    ));
                }
            },
            _ if v == "host" => {
                return Err(Refusal::new(field, "the host's namespaces are not a child's"));
            }
            _ => return Err(Refusal::new(field, format!("`{v}` is not allowed for a child"))),
        }
    }
    Ok(())
}

fn capabilities(host: &mut Map<String, Value>) -> Result<(), Refusal> {
    for cap in array(host.get("CapAdd"), "HostConfig.CapAdd")? {
        let name = cap.as_str().unwrap_or_default().to_ascii_uppercase();
        let bare = name.strip_prefix("CAP_").unwrap_or(&name);
        if !DEFAULT_CAPS.contains(&bare) {
            return Err(Refusal::new(
                "HostConfig.CapAdd",
                format!("{bare}: a child gets at most the engine's default capabilities"),
            ));
        }
    }
    Ok(())
}

fn security(host: &mut Map<String, Value>) -> Result<(), Refusal> {
    for opt in array(host.get("SecurityOpt"), "HostConfig.SecurityOpt")? {
        let opt = opt.as_str().unwrap_or_default();
        if !matches!(
            opt,
            "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
        ) {
            return Err(Refusal::new(
                "HostConfig.SecurityOpt",
                format!("`{opt}`: a child keeps the engine's seccomp, AppArmor and SELinux profiles"),
            ));
        }
    }
    // Set-uid files in an image grant nothing more than the child's user has.
    host.insert("SecurityOpt".into(), json!(["no-new-privileges"]));
    let adj = int(host, "OomScoreAdj", "HostConfig")?;
    if adj < 0 {
        return Err(Refusal::new(
            "HostConfig.OomScoreAdj",
            "a child may not shield itself from the OOM killer",
        ));
    }
    Ok(())
}

fn restart_and_logs(host: &mut Map<String, Value>) -> Result<(), Refusal> {
    let policy = object(host.remove("RestartPolicy"), "HostConfig.RestartPolicy")?;
    let policy = canonical(policy, &["Name", "MaximumRetryCount"], "HostConfig.RestartPolicy")?;
    let name = text(&policy, "Name");
    if !matches!(name, "" | "no" | "on-failure") {
        return Err(Refusal::new(
            "HostConfig.RestartPolicy",
            format!("`{name}`: a child ends with its job (the engine would start it again after a restart)"),
        ));
    }
    if !policy.is_empty() {
        host.insert("RestartPolicy".into(), Value::Object(policy));
    }
    let log = canonical(
        object(host.remove("LogConfig"), "HostConfig.LogConfig")?,
        &["Type", "Config"],
        "HostConfig.LogConfig",
    )?;
    if !matches!(text(&log, "Type"), "" | "json-file" | "local") {
        return Err(Refusal::new(
            "HostConfig.LogConfig",
            "a child logs to the engine's own files (json-file or local), where berth reads them",
        ));
    }
    if !log.is_empty() {
        host.insert("LogConfig".into(), Value::Object(log));
    }
    Ok(())
}

mod limits;
mod mounts;
mod network;
#[cfg(test)]
mod tests;
