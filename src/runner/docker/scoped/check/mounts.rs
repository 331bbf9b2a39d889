//! Binds and mounts of a child's create: paths of the workspace become
//! read-only copies (made by the caller, `protect.rs`), named volumes the
//! job's own; host paths elsewhere, sockets, propagation, relabelling and
//! volume driver options are refused.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use super::super::fields::{array, canonical, object, text, unset};
use super::{BindCopy, Lookup, Refusal};

/// What a create's mounts need done: copies to make, job volumes to make.
pub type MountWork = (Vec<BindCopy>, Vec<(String, String)>);

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

/// The mounts of a create as they are read: what goes in the body, the
/// copies and job volumes that need making. One struct so that binds and
/// mounts, read apart, add to the same list in order.
struct Collected<'a> {
    out: Vec<Value>,
    copies: Vec<BindCopy>,
    volumes: Vec<(String, String)>,
    workspace: &'a Path,
    lookup: &'a dyn Lookup,
}

impl Collected<'_> {
    /// A workspace path, mounted read-only from a copy made later.
    fn bind(&mut self, src: &str, target: &str, field: &str) -> Result<(), Refusal> {
        let rel = beneath(src, self.workspace).map_err(|why| Refusal::new(field, why))?;
        self.copies.push(BindCopy {
            index: self.out.len(),
            rel,
        });
        self.out
            .push(json!({"Type": "bind", "Source": "", "Target": target, "ReadOnly": true}));
        Ok(())
    }

    /// A named volume: the job's own of that name.
    fn volume(&mut self, name: &str, target: &str, ro: bool, field: &str) -> Result<(), Refusal> {
        if !volume_name(name) {
            return Err(Refusal::new(field, format!("`{name}` is not a volume name")));
        }
        let real = self.lookup.volume(name);
        self.volumes.push((name.to_string(), real.clone()));
        self.out
            .push(json!({"Type": "volume", "Source": real, "Target": target, "ReadOnly": ro}));
        Ok(())
    }
}

/// Binds and mounts: workspace paths become copies, named volumes the job's.
pub fn mounts(
    host: &mut Map<String, Value>,
    workspace: &Path,
    lookup: &dyn Lookup,
) -> Result<MountWork, Refusal> {
    let mut c = Collected {
        out: Vec::new(),
        copies: Vec::new(),
        volumes: Vec::new(),
        workspace,
        lookup,
    };
    binds(host, &mut c)?;
    mount_list(host, &mut c)?;
    if !c.out.is_empty() {
        host.insert("Mounts".into(), Value::Array(c.out));
    }
    volumes_from(host, lookup)?;
    Ok((c.copies, c.volumes))
}

/// `HostConfig.Binds` (`SOURCE:TARGET[:OPTIONS]`): a path is a bind, a
/// name a volume; no propagation or relabelling.
fn binds(host: &mut Map<String, Value>, c: &mut Collected<'_>) -> Result<(), Refusal> {
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
            true => c.bind(src, target, "HostConfig.Binds")?,
            false => c.volume(
                src,
                target,
                opts.split(',').any(|o| o == "ro"),
                "HostConfig.Binds",
            )?,
        }
    }
    Ok(())
}

/// `HostConfig.Mounts`: binds (private propagation only), volumes (no
/// driver options) and tmpfs.
fn mount_list(host: &mut Map<String, Value>, c: &mut Collected<'_>) -> Result<(), Refusal> {
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
                c.bind(&src, &target, "HostConfig.Mounts")?;
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
                    true => c
                        .out
                        .push(json!({"Type": "volume", "Target": target, "ReadOnly": ro})),
                    false => c.volume(&src, &target, ro, "HostConfig.Mounts")?,
                }
            }
            "tmpfs" => c.out.push(Value::Object(m)),
            other => {
                return Err(Refusal::new(
                    "HostConfig.Mounts",
                    format!("mount type `{other}` is not a child's (bind, volume or tmpfs)"),
                ));
            }
        }
    }
    Ok(())
}

/// `HostConfig.VolumesFrom`: only the job's own children, by their engine id.
fn volumes_from(host: &mut Map<String, Value>, lookup: &dyn Lookup) -> Result<(), Refusal> {
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
    Ok(())
}
