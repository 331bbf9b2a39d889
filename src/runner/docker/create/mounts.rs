//! A container job's mounts: the workspace at its host path as its write
//! mode says (`direct`: a bind; `read-only`: a read-only bind; `layer`: the
//! layer's overlay volume, `layer.rs`; a volume of its own on a remote
//! engine), the protected project files (`direct` only: in the other modes
//! the job cannot write the checkout at all), the extra bind
//! mounts (`-v`, `model::MountSpec`: admitted paths inside the workspace,
//! `job/mounts.rs`, pinned open until the start: `launch/pins.rs`), the scoped
//! engine's socket and the job's `/etc` files; and its tmpfs mounts.

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{
    Mount, MountBindOptions, MountBindOptionsPropagationEnum, MountType, MountVolumeOptions,
    MountVolumeOptionsDriverConfig,
};

use super::super::layer::LayerMount;

use super::{Context, HOME_TMPFS, READ_ONLY_TMPFS};
use crate::error::{Error, Result};
use crate::model::{JobSpec, WriteMode};

/// Every mount of the container, the workspace first.
pub(super) fn all(spec: &JobSpec, ctx: &Context<'_>, ws: &Path) -> Result<Vec<Mount>> {
    let ws_str = ws.to_string_lossy().into_owned();
    let mode = spec.write.unwrap_or_default();
    let mut mounts = vec![match (ctx.remote, ctx.layer) {
        // Anonymous: removed with the container (`v: true`), by whoever removes it.
        (Some(_), _) => Mount {
            target: Some(ws_str),
            typ: Some(MountType::VOLUME),
            read_only: Some(false),
            ..Default::default()
        },
        (None, Some(layer)) => {
            let (source, driver_config, labels) = match layer {
                LayerMount::Volume(name) => (Some(name.clone()), None, None),
                // The container's own volume carries its labels (the sweeps
                // find it, whoever removes the container removes it).
                LayerMount::Inline { options, layer } => {
                    let mut labels = super::labels(ctx);
                    labels.insert(super::super::layer::LABEL_LAYER.into(), layer.clone());
                    (
                        None,
                        Some(MountVolumeOptionsDriverConfig {
                            name: Some("local".into()),
                            options: Some(options.clone()),
                        }),
                        Some(labels),
                    )
                }
            };
            Mount {
                target: Some(ws_str),
                source,
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                // The engine would copy the image's files at that path into
                // an empty volume: into the layer.
                volume_options: Some(MountVolumeOptions {
                    no_copy: Some(true),
                    driver_config,
                    labels,
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        (None, None) => Mount {
            target: Some(ws_str.clone()),
            source: Some(ws_str),
            typ: Some(MountType::BIND),
            read_only: Some(mode == WriteMode::ReadOnly),
            bind_options: Some(MountBindOptions {
                propagation: Some(MountBindOptionsPropagationEnum::PRIVATE),
                ..Default::default()
            }),
            ..Default::default()
        },
    }];
    mounts.extend(ctx.protected.iter().cloned());
    mounts.extend(extra(spec, ctx)?);
    mounts.extend(ctx.engine.map(|e| e.mount.clone()));
    mounts.extend(ctx.attach.mounts.iter().cloned());
    Ok(mounts)
}

/// The job's tmpfs mounts: HOME, owned by the job's user, and a writable
/// `/tmp` under a read-only root.
pub(super) fn tmpfs(
    spec: &JobSpec,
    ctx: &Context<'_>,
    ws: &Path,
    home: String,
    (uid, gid): (&str, &str),
) -> HashMap<String, String> {
    let mut tmpfs = HashMap::from([(home, format!("{HOME_TMPFS},uid={uid},gid={gid}"))]);
    // A tmpfs over the workspace (or above it) would hide it.
    if (spec.read_only || ctx.read_only) && !Path::new("/tmp").starts_with(ws) {
        tmpfs.insert("/tmp".to_string(), READ_ONLY_TMPFS.to_string());
    }
    tmpfs
}

/// The job's extra mounts (`-v`): each the directory admission pinned, as
/// an open directory the engine's local volume driver binds (never its path:
/// `launch/pins.rs`), read-only when asked, when the job is, or when it
/// does not write the checkout itself (`layer`, `read-only`: a writable
/// bind would be a way around the layer), and with the protected project
/// files under a mounted directory kept read-only at their new place too.
fn extra(spec: &JobSpec, ctx: &Context<'_>) -> Result<Vec<Mount>> {
    if spec.mounts.is_empty() {
        return Ok(Vec::new());
    }
    if ctx.remote.is_some() {
        return Err(Error::InvalidSpec(
            "mounts (-v) need the engine on this machine: a remote engine's job has an uploaded copy of the workspace, not its paths".into(),
        ));
    }
    if ctx.pinned.len() != spec.mounts.len() {
        return Err(Error::InvalidSpec(
            "the job's -v directories were not opened before the create; nothing was started".into(),
        ));
    }
    let mut out = Vec::new();
    for (m, pinned) in spec.mounts.iter().zip(ctx.pinned) {
        let read_only = m.read_only
            || spec.read_only
            || ctx.read_only
            || spec.write.unwrap_or_default() != WriteMode::Direct;
        // Anonymous, with the container's labels: removed with it (`v: true`).
        // The engine refuses `ReadOnly` on an anonymous volume: the bind
        // itself is read-only then.
        let options = HashMap::from([
            ("type".to_string(), "none".to_string()),
            (
                "o".to_string(),
                if read_only { "bind,ro" } else { "bind" }.to_string(),
            ),
            ("device".to_string(), pinned.to_string_lossy().into_owned()),
        ]);
        out.push(Mount {
            target: Some(m.target.clone()),
            typ: Some(MountType::VOLUME),
            volume_options: Some(MountVolumeOptions {
                no_copy: Some(true),
                driver_config: Some(MountVolumeOptionsDriverConfig {
                    name: Some("local".into()),
                    options: Some(options),
                }),
                labels: Some(super::labels(ctx)),
                ..Default::default()
            }),
            ..Default::default()
        });
        for p in ctx.protected {
            let Some(rel) = p
                .target
                .as_deref()
                .and_then(|t| Path::new(t).strip_prefix(&m.source).ok())
            else {
                continue;
            };
            out.push(Mount {
                target: Some(Path::new(&m.target).join(rel).to_string_lossy().into_owned()),
                ..p.clone()
            });
        }
    }
    Ok(out)
}
