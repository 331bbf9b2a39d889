//! How the workspace reaches a task on a swarm: as configs.
//!
//! berth speaks to the swarm's manager only; the node a task lands on is
//! the scheduler's choice, made after the service exists, and berth cannot
//! reach that node's engine to upload into a volume there (as it does on a
//! remote engine). A config is the swarm's own way to put bytes into a
//! task on whatever node runs it: the workspace is packed as on a remote
//! engine (no symlink followed, `.dockerignore` honoured), cut into parts
//! that fit a config (the swarm refuses more than 1000 KiB in one), and
//! the task's first step unpacks them (`spec.rs`). Configs live in the
//! swarm's replicated store, so the whole workspace is capped at
//! [`MAX_BYTES`]; they carry the job's labels and go with its service.
//!
//! The task's files live on its node, in a tmpfs that goes with the task:
//! only a `layer` job's come back, through its log (`readback.rs`).

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::runner::docker::DockerClient;

/// Bytes of one config (the swarm takes up to 1000 KiB).
const PART_BYTES: usize = 960 * 1024;
/// Most bytes of a packed workspace on a swarm.
pub const MAX_BYTES: usize = 32 << 20;

/// The workspace as configs of the swarm.
pub struct Uploaded {
    /// (id, name) of each part, in order.
    pub configs: Vec<(String, String)>,
    /// Said on the card.
    pub note: String,
    /// The packed workspace (a `layer` job's changes are read against it).
    pub tar: bytes::Bytes,
}

/// Pack `workspace` off the async workers (entries relative to it, owned
/// by `owner`) and store it as configs named `<name>-wsN`.
pub async fn upload(
    docker: &DockerClient,
    workspace: &Path,
    owner: (u64, u64),
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<Uploaded> {
    let ws = workspace.to_path_buf();
    let started = std::time::Instant::now();
    let (tar, files, excluded) = tokio::task::spawn_blocking(move || -> Result<(Vec<u8>, usize, usize)> {
        let ctx = crate::images::context::walk_workspace(&ws)?;
        let mut tar = Vec::with_capacity(ctx.bytes as usize + 64 * 1024);
        ctx.write_tar_under(&mut tar, "", owner)
            .map_err(|e| Error::io("pack", &ws, e))?;
        Ok((tar, ctx.len(), ctx.excluded))
    })
    .await
    .map_err(|e| Error::Docker {
        action: "upload the workspace",
        job: name.to_string(),
        message: format!("packing it failed: {e}"),
    })??;
    if tar.len() > MAX_BYTES {
        return Err(Error::InvalidSpec(format!(
            "the workspace packs to {:.1} MiB, more than the {} MiB a swarm job takes (its copy travels in the swarm's own store): keep build output and dependencies out with .dockerignore",
            tar.len() as f64 / (1 << 20) as f64,
            MAX_BYTES >> 20
        )));
    }
    let mut configs = Vec::new();
    for (i, part) in tar.chunks(PART_BYTES).enumerate() {
        let part_name = format!("{name}-ws{i}");
        match docker.create_config(&part_name, labels.clone(), part).await {
            Ok(id) => configs.push((id, part_name)),
            Err(e) => {
                remove(docker, &configs).await;
                return Err(e);
            }
        }
    }
    let note = format!(
        "swarm: the workspace is a copy ({files} entries, {:.1} MiB in {} config(s), {excluded} kept out by .dockerignore, packed in {} ms) unpacked into a tmpfs on the task's node",
        tar.len() as f64 / (1 << 20) as f64,
        configs.len(),
        started.elapsed().as_millis()
    );
    Ok(Uploaded {
        configs,
        note,
        tar: tar.into(),
    })
}

/// Remove the configs of a job (gone already counts as removed).
pub async fn remove(docker: &DockerClient, configs: &[(String, String)]) {
    for (id, _) in configs {
        if let Err(e) = docker.remove_config(id).await
            && e.engine_status() != Some(404)
        {
            tracing::warn!(config = %id, error = %e, "could not remove config");
        }
    }
}
