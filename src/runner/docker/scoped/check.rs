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
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use super::fields::{array, canonical, int, join, object, text, unset};

/// Why a request was refused: the field and one line a client library prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Refusal {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

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

const TOP: &[&str] = &[
    "Hostname",
    "Domainname",
    "User",
    "AttachStdin",
    "AttachStdout",
    "AttachStderr",
    "ExposedPorts",
    "Tty",
    "OpenStdin",
    "StdinOnce",
    "Env",
    "Cmd",
    "Healthcheck",
    "ArgsEscaped",
    "Image",
    "Volumes",
    "WorkingDir",
    "Entrypoint",
    "NetworkDisabled",
    "MacAddress",
    "OnBuild",
    "Labels",
    "StopSignal",
    "StopTimeout",
    "Shell",
    "HostConfig",
    "NetworkingConfig",
];

/// HostConfig fields passed as they are: they shape the child, not its reach.
const PASS: &[&str] = &[
    "ContainerIDFile",
    "AutoRemove",
    "CapDrop",
    "Dns",
    "DnsOptions",
    "DnsSearch",
    "ExtraHosts",
    "GroupAdd",
    "ReadonlyRootfs",
    "Tmpfs",
    "ShmSize",
    "ConsoleSize",
    "CpuShares",
    "BlkioWeight",
    "BlkioWeightDevice",
    "BlkioDeviceReadBps",
    "BlkioDeviceWriteBps",
    "BlkioDeviceReadIOps",
    "BlkioDeviceWriteIOps",
    "CpusetCpus",
    "CpusetMems",
    "KernelMemory",
    "KernelMemoryTCP",
    "MemoryReservation",
    "MemorySwappiness",
    "Init",
    "Ulimits",
    "IOMaximumIOps",
    "IOMaximumBandwidth",
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
const CHECKED: &[&str] = &[
    "Binds",
    "Mounts",
    "VolumesFrom",
    "NetworkMode",
    "PortBindings",
    "PublishAllPorts",
    "RestartPolicy",
    "LogConfig",
    "CapAdd",
    "SecurityOpt",
    "PidMode",
    "IpcMode",
    "UTSMode",
    "UsernsMode",
    "CgroupnsMode",
    "Runtime",
    "Isolation",
    "Memory",
    "MemorySwap",
    "NanoCpus",
    "CpuPeriod",
    "CpuQuota",
    "PidsLimit",
    "OomScoreAdj",
    "MaskedPaths",
    "ReadonlyPaths",
];

/// The engine's default capabilities (Docker 20.10): adding one of these is a no-op.
const DEFAULT_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

const ENDPOINT: &[&str] = &[
    "IPAMConfig",
    "Links",
    "Aliases",
    "NetworkID",
    "EndpointID",
    "Gateway",
    "IPAddress",
    "IPPrefixLen",
    "IPv6Gateway",
    "GlobalIPv6Address",
    "GlobalIPv6PrefixLen",
    "MacAddress",
    "DriverOpts",
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
    let (memory, pids, cpus) = limits(&mut host, &rules.budget)?;
    let (copies, volumes) = mounts(&mut host, rules.workspace, lookup)?;
    let (own_network, connect) = network(&mut host, &mut top, rules.network, lookup)?;
    ports(&mut host, &mut top)?;
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

/// Memory, processes and CPUs within the job's budget.
fn limits(host: &mut Map<String, Value>, b: &Budget) -> Result<(u64, i64, f64), Refusal> {
    let gib = |n: u64| format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64);
    let asked = int(host, "Memory", "HostConfig")?;
    let memory = match u64::try_from(asked).ok().filter(|m| *m > 0) {
        Some(m) if m > b.memory_left => {
            return Err(Refusal::new(
                "HostConfig.Memory",
                format!(
                    "{} asked, {} of the job's memory is left for its children (the job's limit is their sum budget)",
                    gib(m),
                    gib(b.memory_left)
                ),
            ));
        }
        Some(m) => m,
        None => DEFAULT_CHILD_MEMORY.min(b.memory_left),
    };
    if memory < MIN_MEMORY {
        return Err(Refusal::new(
            "HostConfig.Memory",
            format!(
                "the job's memory budget for children is spent ({} left); remove a child first",
                gib(b.memory_left)
            ),
        ));
    }
    host.insert("Memory".into(), json!(memory));
    host.insert("MemorySwap".into(), json!(memory));
    let asked = int(host, "PidsLimit", "HostConfig")?;
    let pids = match asked {
        p if p > b.pids_left => {
            return Err(Refusal::new(
                "HostConfig.PidsLimit",
                format!(
                    "{p} asked, {} of the job's processes are left for its children",
                    b.pids_left
                ),
            ));
        }
        p if p > 0 => p,
        _ => DEFAULT_CHILD_PIDS.min(b.pids_left),
    };
    if pids < 1 {
        return Err(Refusal::new(
            "HostConfig.PidsLimit",
            "the job's process budget for children is spent; remove a child first",
        ));
    }
    host.insert("PidsLimit".into(), json!(pids));
    let nano = int(host, "NanoCpus", "HostConfig")?;
    let quota = int(host, "CpuQuota", "HostConfig")?;
    let period = int(host, "CpuPeriod", "HostConfig")?;
    let asked = if nano > 0 {
        nano as f64 / 1e9
    } else if quota > 0 {
        quota as f64 / if period > 0 { period as f64 } else { 100_000.0 }
    } else {
        b.cpus
    };
    if asked > b.cpus + 1e-9 {
        return Err(Refusal::new(
            "HostConfig.NanoCpus",
            format!("{asked} CPUs asked, a child gets at most the job's {}", b.cpus),
        ));
    }
    host.remove("CpuQuota");
    host.remove("CpuPeriod");
    host.insert("NanoCpus".into(), json!((asked * 1e9).round() as i64));
    Ok((memory, pids, asked))
}

/// What a create's mounts need done: copies to make, job volumes to make.
type MountWork = (Vec<BindCopy>, Vec<(String, String)>);

/// A workspace path as a path relative to it, or why not.
fn beneath(src: &str, workspace: &Path) -> Result<PathBuf, String> {
    let p = Path::new(src);
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("`{src}` is not an absolute path without `..`"));
    }
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.contains("docker.sock") || name.ends_with(".sock") {
        return Err(format!("`{src}`: the engine's socket is never given to a child"));
    }
    match p.strip_prefix(workspace) {
        Ok(rel) => Ok(rel.to_path_buf()),
        Err(_) => Err(format!(
            "`{src}` is outside the job's workspace `{}`",
            workspace.display()
        )),
    }
}

/// A job volume's name as the job says it (letters, digits, `_.-`).
fn volume_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// Binds and mounts: workspace paths become copies, named volumes the job's.
fn mounts(
    host: &mut Map<String, Value>,
    workspace: &Path,
    lookup: &dyn Lookup,
) -> Result<MountWork, Refusal> {
    let mut out: Vec<Value> = Vec::new();
    let (mut copies, mut volumes) = (Vec::new(), Vec::new());
    let mut add_bind = |out: &mut Vec<Value>, src: &str, target: &str, field: &str| -> Result<(), Refusal> {
        let rel = beneath(src, workspace).map_err(|why| Refusal::new(field, why))?;
        copies.push(BindCopy {
            index: out.len(),
            rel,
        });
        out.push(json!({"Type": "bind", "Source": "", "Target": target, "ReadOnly": true}));
        Ok(())
    };
    let mut add_volume =
        |out: &mut Vec<Value>, name: &str, target: &str, ro: bool, field: &str| -> Result<(), Refusal> {
            if !volume_name(name) {
                return Err(Refusal::new(field, format!("`{name}` is not a volume name")));
            }
            let real = lookup.volume(name);
            volumes.push((name.to_string(), real.clone()));
            out.push(json!({"Type": "volume", "Source": real, "Target": target, "ReadOnly": ro}));
            Ok(())
        };
    for b in array(host.remove("Binds").as_ref(), "HostConfig.Binds")? {
        let b = b.as_str().unwrap_or_default();
        let parts: Vec<&str> = b.split(':').collect();
        let (src, target, opts) = match parts.as_slice() {
            [s, t] => (*s, *t, ""),
            [s, t, o] => (*s, *t, *o),
            _ => {
                return Err(Refusal::new(
                    "HostConfig.Binds",
                    format!("`{b}` is not SOURCE:TARGET[:OPTIONS]"),
                ));
            }
        };
        for o in opts.split(',').filter(|o| !o.is_empty()) {
            if !matches!(o, "ro" | "rw" | "nocopy" | "private" | "rprivate") {
                return Err(Refusal::new(
                    "HostConfig.Binds",
                    format!("`{o}`: propagation and relabelling of host paths are not a child's"),
                ));
            }
        }
        match src.starts_with('/') {
            true => add_bind(&mut out, src, target, "HostConfig.Binds")?,
            false => add_volume(
                &mut out,
                src,
                target,
                opts.split(',').any(|o| o == "ro"),
                "HostConfig.Binds",
            )?,
        }
    }
    let known = [
        "Target",
        "Source",
        "Type",
        "ReadOnly",
        "Consistency",
        "BindOptions",
        "VolumeOptions",
        "TmpfsOptions",
    ];
    for m in array(host.remove("Mounts").as_ref(), "HostConfig.Mounts")? {
        let m = canonical(object(Some(m), "HostConfig.Mounts")?, &known, "HostConfig.Mounts")?;
        let (src, target) = (text(&m, "Source").to_string(), text(&m, "Target").to_string());
        match text(&m, "Type") {
            "bind" => {
                let opts = canonical(
                    object(m.get("BindOptions").cloned(), "HostConfig.Mounts.BindOptions")?,
                    &["Propagation", "NonRecursive"],
                    "HostConfig.Mounts.BindOptions",
                )?;
                if !matches!(text(&opts, "Propagation"), "" | "private" | "rprivate") {
                    return Err(Refusal::new(
                        "HostConfig.Mounts.BindOptions",
                        "mount propagation to or from the host is not a child's",
                    ));
                }
                add_bind(&mut out, &src, &target, "HostConfig.Mounts")?;
            }
            "volume" => {
                let opts = canonical(
                    object(m.get("VolumeOptions").cloned(), "HostConfig.Mounts.VolumeOptions")?,
                    &["NoCopy", "Labels", "DriverConfig"],
                    "HostConfig.Mounts.VolumeOptions",
                )?;
                if !unset(opts.get("DriverConfig")) {
                    return Err(Refusal::new(
                        "HostConfig.Mounts.VolumeOptions.DriverConfig",
                        "volume driver options can mount host paths",
                    ));
                }
                let ro = m.get("ReadOnly").and_then(Value::as_bool).unwrap_or(false);
                match src.is_empty() {
                    true => out.push(json!({"Type": "volume", "Target": target, "ReadOnly": ro})),
                    false => add_volume(&mut out, &src, &target, ro, "HostConfig.Mounts")?,
                }
            }
            "tmpfs" => out.push(Value::Object(m)),
            other => {
                return Err(Refusal::new(
                    "HostConfig.Mounts",
                    format!("mount type `{other}` is not a child's (bind, volume or tmpfs)"),
                ));
            }
        }
    }
    if !out.is_empty() {
        host.insert("Mounts".into(), Value::Array(out));
    }
    let mut from = Vec::new();
    for v in array(host.remove("VolumesFrom").as_ref(), "HostConfig.VolumesFrom")? {
        let v = v.as_str().unwrap_or_default();
        let (r, mode) = v.split_once(':').unwrap_or((v, ""));
        let Some(id) = lookup.child(r) else {
            return Err(Refusal::new(
                "HostConfig.VolumesFrom",
                format!("`{r}` is not a child of this job"),
            ));
        };
        from.push(json!(if mode.is_empty() {
            id
        } else {
            format!("{id}:{mode}")
        }));
    }
    if !from.is_empty() {
        host.insert("VolumesFrom".into(), Value::Array(from));
    }
    Ok((copies, volumes))
}

/// The child's network: its own pool network, `none`, or another child's
/// namespace; networks the job made are joined after the create.
fn network(
    host: &mut Map<String, Value>,
    top: &mut Map<String, Value>,
    own: &str,
    lookup: &dyn Lookup,
) -> Result<(bool, Vec<(String, Value)>), Refusal> {
    let mode = text(host, "NetworkMode").to_string();
    let field = "HostConfig.NetworkMode";
    let mut connect = Vec::new();
    let (own_network, mode_out, asked_net) = match mode.as_str() {
        "" | "default" | "bridge" => (true, own.to_string(), None),
        "none" => (false, "none".to_string(), None),
        "host" => return Err(Refusal::new(field, "the host's network is not a child's")),
        m if m.starts_with("container:") => match lookup.child(&m["container:".len()..]) {
            Some(id) => (false, format!("container:{id}"), None),
            None => {
                return Err(Refusal::new(
                    field,
                    "a child may share only the network of another child of the same job",
                ));
            }
        },
        m => match lookup.network(m) {
            Some(id) => (true, own.to_string(), Some((m.to_string(), id))),
            None => return Err(Refusal::new(field, format!("`{m}` is not a network of this job"))),
        },
    };
    host.insert("NetworkMode".into(), json!(mode_out));
    let net = object(top.remove("NetworkingConfig"), "NetworkingConfig")?;
    let net = canonical(net, &["EndpointsConfig"], "NetworkingConfig")?;
    let mut endpoints = object(
        net.get("EndpointsConfig").cloned(),
        "NetworkingConfig.EndpointsConfig",
    )?;
    if let Some((name, id)) = &asked_net {
        let settings = endpoints.remove(name).unwrap_or(Value::Null);
        connect.push((id.clone(), settings));
    }
    for (name, settings) in endpoints {
        if matches!(name.as_str(), "bridge" | "default") || name == mode {
            continue;
        }
        let Some(id) = lookup.network(&name) else {
            return Err(Refusal::new(
                "NetworkingConfig.EndpointsConfig",
                format!("`{name}` is not a network of this job"),
            ));
        };
        connect.push((id, settings));
    }
    for (_, settings) in connect.iter_mut() {
        let s = canonical(
            object(Some(settings.take()), "NetworkingConfig.EndpointsConfig")?,
            ENDPOINT,
            "NetworkingConfig.EndpointsConfig",
        )?;
        for key in ["Links", "DriverOpts"] {
            if !unset(s.get(key)) {
                return Err(Refusal::new(
                    join("NetworkingConfig.EndpointsConfig", key),
                    "not a child's (links and driver options are the engine's)",
                ));
            }
        }
        *settings = Value::Object(s);
    }
    if !own_network && !connect.is_empty() {
        return Err(Refusal::new(
            "NetworkingConfig.EndpointsConfig",
            "a child without a network of its own joins no other",
        ));
    }
    Ok((own_network, connect))
}

/// No published ports: berth relays each exposed port from the job's
/// gateway (the engine publishes nothing on a job's network, and never on
/// a public address).
fn ports(host: &mut Map<String, Value>, top: &mut Map<String, Value>) -> Result<(), Refusal> {
    let bindings = object(host.remove("PortBindings"), "HostConfig.PortBindings")?;
    host.remove("PublishAllPorts");
    let mut exposed = object(top.remove("ExposedPorts"), "ExposedPorts")?;
    for key in bindings.keys() {
        exposed.entry(key.clone()).or_insert(json!({}));
    }
    if !exposed.is_empty() {
        top.insert("ExposedPorts".into(), Value::Object(exposed));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
