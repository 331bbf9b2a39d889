//! A layer as the engine mounts it: a volume of the engine's `local` driver
//! with overlayfs options (the checkout as the lower directory, the
//! layer's upper and work directories in berth's private state,
//! `userxattr`), mounted at the workspace's path in place of the bind.
//!
//! Why the engine's driver: the engine mounts it (berth needs no
//! privilege), once per volume however many containers use it (the jobs of
//! one session share one mount, and see each other's writes at once), and
//! unmounts it when the last of them stops. Why `userxattr`: the overlay
//! then keeps its opaque marks in `user.` xattrs that berth reads as the
//! user (`layers/tree.rs`); the kernel refuses `trusted.` ones to non-root.
//!
//! Volumes are this manager's (labelled with its owner, named with its pid:
//! a crashed manager's volume is never taken for a new one), made when a
//! layer is first mounted and removed when the layer is discarded, at
//! shutdown, or by the crash sweeps.

use std::collections::HashMap;
use std::sync::Mutex;

use bollard::models::VolumeCreateRequest;

use super::ownership::{clean_name, short};
use super::{DockerClient, Engine, LABEL_OWNER};
use crate::error::{Error, Result};
use crate::layers::Layer;

/// The label naming the layer a volume mounts.
pub const LABEL_LAYER: &str = "berth.layer";

/// How a job's container mounts its layer.
#[derive(Debug, Clone)]
pub enum LayerMount {
    /// A named volume of the engine's, shared by the layer's jobs (one
    /// overlay mount: each sees the others' writes at once).
    Volume(String),
    /// A volume of the container's own, made with it and removed with it:
    /// a layer only one job writes (a CLI job's own) costs no engine call
    /// and leaves nothing to remove.
    Inline {
        options: HashMap<String, String>,
        layer: String,
    },
}

/// The layer volumes this engine made: layer name → volume name.
#[derive(Debug, Default)]
pub(super) struct LayerVolumes {
    made: Mutex<HashMap<String, String>>,
    /// Whose session each layer is (`mcp:<id>`): its volume goes at the session's end.
    owners: Mutex<HashMap<String, String>>,
}

/// The volume's mount options; a path the overlay's option syntax cannot
/// carry (`,` `:` `\` separate its options and directories) is refused.
pub(super) fn options(layer: &Layer) -> Result<HashMap<String, String>> {
    let paths = [layer.meta.workspace.clone(), layer.upper(), layer.work()];
    for p in &paths {
        let s = p.to_string_lossy();
        if s.contains([',', ':', '\\']) || s.contains(char::is_whitespace) {
            return Err(Error::InvalidSpec(format!(
                "layer mode cannot mount `{s}`: overlayfs options cannot carry a path with `,`, `:`, `\\` or spaces; use --write direct or read-only, or move it"
            )));
        }
    }
    let [lower, upper, work] = paths.map(|p| p.to_string_lossy().into_owned());
    Ok(HashMap::from([
        ("type".into(), "overlay".into()),
        ("device".into(), "overlay".into()),
        (
            "o".into(),
            format!("lowerdir={lower},upperdir={upper},workdir={work},userxattr"),
        ),
    ]))
}

impl Engine {
    /// How job `id` mounts `layer`: its own layer (named by its id) in a
    /// volume of its container's own, any other in the layer's named volume.
    pub(super) async fn layer_mount(
        &self,
        docker: &DockerClient,
        layer: &Layer,
        id: &crate::model::JobId,
    ) -> Result<LayerMount> {
        if layer.meta.name == id.as_str() {
            return Ok(LayerMount::Inline {
                options: options(layer)?,
                layer: layer.meta.name.clone(),
            });
        }
        Ok(LayerMount::Volume(self.layer_volume(docker, layer).await?))
    }

    /// The volume that mounts `layer`, made on first use.
    pub(super) async fn layer_volume(&self, docker: &DockerClient, layer: &Layer) -> Result<String> {
        let known = {
            let made = self.layer_volumes.made.lock().unwrap_or_else(|p| p.into_inner());
            made.get(&layer.meta.name).cloned()
        };
        if let Some(name) = known {
            return Ok(name);
        }
        let name = format!(
            "berth-{}-{}-layer-{}-{}",
            clean_name(&self.instance),
            short(self.state()),
            layer.meta.name,
            std::process::id()
        );
        let mut labels: HashMap<String, String> = self
            .ownership
            .filters()
            .into_iter()
            .filter_map(|f| f.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        labels.insert(LABEL_OWNER.into(), self.owner.clone());
        labels.insert(LABEL_LAYER.into(), layer.meta.name.clone());
        docker
            .create_volume(VolumeCreateRequest {
                name: Some(name.clone()),
                driver: Some("local".into()),
                driver_opts: Some(options(layer)?),
                labels: Some(labels),
                ..Default::default()
            })
            .await?;
        let mut made = self.layer_volumes.made.lock().unwrap_or_else(|p| p.into_inner());
        made.insert(layer.meta.name.clone(), name.clone());
        if let Some(owner) = &layer.meta.owner {
            let mut owners = self
                .layer_volumes
                .owners
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            owners.insert(layer.meta.name.clone(), owner.clone());
        }
        Ok(name)
    }

    /// Session `owner` ended: the volumes of its layers go once its jobs'
    /// containers are (a removal still under way leaves one for shutdown).
    pub async fn forget_owner_layers(&self, owner: &str) {
        let layers: Vec<String> = {
            let owners = self
                .layer_volumes
                .owners
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            owners
                .iter()
                .filter(|(_, o)| *o == owner)
                .map(|(l, _)| l.clone())
                .collect()
        };
        if layers.is_empty() {
            return;
        }
        self.settle_removals(std::time::Duration::from_secs(5)).await;
        for layer in layers {
            self.forget_layer(&layer).await;
            let mut owners = self
                .layer_volumes
                .owners
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            owners.remove(&layer);
        }
    }

    /// Remove the volume of layer `name` (discarded or pruned), if this
    /// engine made one; one still in use (a container being removed) goes
    /// at shutdown.
    pub async fn forget_layer(&self, name: &str) {
        let volume = {
            let made = self.layer_volumes.made.lock().unwrap_or_else(|p| p.into_inner());
            made.get(name).cloned()
        };
        let (Some(volume), Ok(docker)) = (volume, self.client().await) else {
            return;
        };
        if docker.remove_volume(&volume).await.is_ok() {
            let mut made = self.layer_volumes.made.lock().unwrap_or_else(|p| p.into_inner());
            made.remove(name);
        }
    }

    /// Remove every layer volume this engine made (at shutdown, once no
    /// container uses them).
    pub(super) async fn release_layers(&self, docker: &DockerClient) {
        let volumes: Vec<String> = {
            let mut made = self.layer_volumes.made.lock().unwrap_or_else(|p| p.into_inner());
            made.drain().map(|(_, v)| v).collect()
        };
        for v in volumes {
            if let Err(e) = docker.remove_volume(&v).await
                && !matches!(e.engine_status(), Some(404))
            {
                tracing::warn!(volume = %v, error = %e, "could not remove a layer's volume");
            }
        }
    }
}
