//! A container job's extra bind mounts (`-v`, `model::MountSpec`) as the
//! engine's mounts: admitted paths inside the workspace (`job/mounts.rs`),
//! checked once more right before the create.

use std::path::Path;

use bollard::models::{Mount, MountBindOptions, MountBindOptionsPropagationEnum, MountType};

use super::Context;
use crate::error::{Error, Result};
use crate::model::JobSpec;

/// The job's extra mounts (`-v`), checked again against the workspace right
/// before the create (a symlink may have been swapped in since admission),
/// read-only when asked or when the job is, and with the protected project
/// files under a mounted directory kept read-only at their new place too.
pub(super) fn extra(spec: &JobSpec, ctx: &Context<'_>, ws: &Path) -> Result<Vec<Mount>> {
    if spec.mounts.is_empty() {
        return Ok(Vec::new());
    }
    if ctx.remote.is_some() {
        return Err(Error::InvalidSpec(
            "mounts (-v) need the engine on this machine: a remote engine's job has an uploaded copy of the workspace, not its paths".into(),
        ));
    }
    let mut out = Vec::new();
    for m in &spec.mounts {
        let real = std::fs::canonicalize(&m.source).ok();
        if real.as_deref() != Some(m.source.as_path()) || !m.source.starts_with(ws) {
            return Err(Error::InvalidValue {
                what: "mount",
                input: format!("{}:{}", m.source.display(), m.target),
                message: "its host path changed since the job was admitted (now a symlink, moved or gone); nothing was started".into(),
            });
        }
        let path = m.source.to_string_lossy().into_owned();
        out.push(Mount {
            target: Some(m.target.clone()),
            source: Some(path),
            typ: Some(MountType::BIND),
            read_only: Some(m.read_only || spec.read_only || ctx.read_only),
            bind_options: Some(MountBindOptions {
                propagation: Some(MountBindOptionsPropagationEnum::PRIVATE),
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
