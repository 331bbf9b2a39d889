//! The manager's side of layers (`crate::layers`): which way a job writes
//! its workspace (decided once, at admission), the layer taken when it
//! launches and let go when it ends, what it left there, and the verbs the
//! faces call: list, diff, apply, discard.
//!
//! The write mode: what the caller asked (`--write`, an MCP argument), else
//! the face's default — `agent_write` (default `layer`) for an MCP
//! session's jobs, `write` (default `direct`) for everyone else — each from
//! the job's project config (a project file may only tighten them without
//! trust: `config/loosen.rs`). An agent may ask for a tighter mode than its
//! default, never a looser one. The record says which mode and why.
//!
//! The layer: a named one (`--layer NAME`, the CLI's), else the session's
//! (`mcp-` and a hash of the session, this manager and the workspace: one
//! per session and project, never another session's), else the job's own,
//! named after its id.

use std::path::PathBuf;
use std::sync::Arc;

use sha2::Digest;

use super::{Inner, Manager};
use crate::config::{Config, Source};
use crate::error::{Error, Result};
use crate::layers::{Layer, apply::Guard, diff::Form};
use crate::model::{Applied, JobId, JobSpec, LayerInfo, StopCause, WriteMode, Writes};

/// How often a running job's layer is measured against `layer_size`.
pub(super) const SIZE_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Decide how `spec` writes its workspace, for `client` (`mcp` for an
/// agent's session); the spec's `write` and `layer` say it afterwards (a
/// job's own layer is named once it has an id: [`own_layer`]).
pub(super) fn decide(spec: &mut JobSpec, config: &Config, client: &str, manager: &str) -> Result<Writes> {
    let agent = client == "mcp";
    let (default, key) = match agent {
        true => (config.agent_write, "agent_write"),
        false => (config.write, "write"),
    };
    let (mode, why) = match spec.write {
        Some(asked) if agent && asked > default => {
            return Err(Error::AgentLoosening {
                key: "write",
                value: format!("\"{asked}\""),
                switch: match asked {
                    WriteMode::Direct => "agent_write = \"direct\"",
                    _ => "agent_write = \"layer\"",
                },
                env: match asked {
                    WriteMode::Direct => "BERTH_AGENT_WRITE=direct",
                    _ => "BERTH_AGENT_WRITE=layer",
                },
            });
        }
        Some(asked) => (
            asked,
            format!("asked ({})", if agent { "by the agent" } else { "--write" }),
        ),
        None => (default, default_words(config, key, agent)),
    };
    spec.write = Some(mode);
    if mode != WriteMode::Layer {
        if spec.layer.is_some() {
            return Err(Error::InvalidSpec(format!(
                "a layer is named (--layer) but the job writes `{mode}`: add --write layer"
            )));
        }
        return Ok(Writes {
            mode,
            why,
            layer: None,
            changed: None,
            lost: None,
        });
    }
    let workspace = std::fs::canonicalize(&config.workspace).unwrap_or(config.workspace.clone());
    let layer = match (&spec.layer, spec.owner.as_deref()) {
        (Some(_), _) if agent => {
            return Err(Error::InvalidSpec(
                "an agent's jobs write their session's layer: `layer` cannot be named".into(),
            ));
        }
        (Some(name), _) => {
            crate::layers::check_name(name)?;
            Some(name.clone())
        }
        (None, Some(owner)) if owner.starts_with("mcp:") => Some(session_layer(owner, manager, &workspace)),
        (None, _) => None,
    };
    spec.layer = layer.clone();
    Ok(Writes {
        mode,
        why,
        layer,
        changed: None,
        lost: None,
    })
}

/// Why a job got its face's default mode: the key and where it was set.
fn default_words(config: &Config, key: &'static str, agent: bool) -> String {
    let whose = if agent { "agents' default" } else { "default" };
    match config.sources.get(key) {
        Some(Source::File(f)) => format!("{whose}: {key} in {}", f.display()),
        Some(Source::Env(v)) => format!("{whose}: {v}"),
        Some(Source::Flag) => format!("{whose}: --{key}"),
        _ => format!("{whose} ({key})"),
    }
}

/// The layer of MCP session `owner` over `workspace`, on this manager.
fn session_layer(owner: &str, manager: &str, workspace: &std::path::Path) -> String {
    let mut h = sha2::Sha256::new();
    for part in [
        owner.as_bytes(),
        manager.as_bytes(),
        workspace.as_os_str().as_encoded_bytes(),
    ] {
        h.update(part);
        h.update([0]);
    }
    let hex: String = h.finalize().iter().take(5).map(|b| format!("{b:02x}")).collect();
    format!("mcp-{hex}")
}

/// A `layer` job that named none writes one of its own, named by its id.
pub(super) fn own_layer(spec: &mut JobSpec, writes: &mut Writes, id: &JobId) {
    if writes.mode == WriteMode::Layer && writes.layer.is_none() {
        writes.layer = Some(id.to_string());
        spec.layer = writes.layer.clone();
    }
}

/// Take job `id`'s layer for its launch (blocking work off the workers).
pub(super) async fn take(
    inner: &Arc<Inner>,
    id: &JobId,
    spec: &JobSpec,
    workspace: &std::path::Path,
) -> Result<Option<Layer>> {
    let (Some(WriteMode::Layer), Some(name)) = (spec.write, spec.layer.clone()) else {
        return Ok(None);
    };
    let (inner, id, owner, ws) = (
        inner.clone(),
        id.clone(),
        spec.owner.clone(),
        workspace.to_path_buf(),
    );
    let ws = std::fs::canonicalize(&ws).unwrap_or(ws);
    tokio::task::spawn_blocking(move || inner.layers.take(&name, &ws, owner.as_deref(), &id).map(Some))
        .await
        .map_err(|e| Error::InvalidSpec(format!("the layer could not be made: {e}")))?
}

/// What job `id` left in its layer, on its record; the layer let go.
pub(super) async fn settle(inner: &Arc<Inner>, id: &JobId, lost: Option<String>) {
    let name = {
        let reg = inner.registry.lock().unwrap();
        reg.get(id)
            .ok()
            .and_then(|e| e.info.writes.as_ref()?.layer.clone())
    };
    let Some(name) = name else { return };
    let layers = inner.clone();
    let counts = tokio::task::spawn_blocking(move || {
        let layer = layers.layers.get(&name).ok()?;
        layer.scan().ok().map(|s| crate::layers::counts(&s))
    })
    .await
    .ok()
    .flatten();
    if let Ok(e) = inner.registry.lock().unwrap().get_mut(id)
        && let Some(w) = e.info.writes.as_mut()
    {
        w.changed = counts;
        w.lost = lost;
    }
}

/// The cause that stops job `id` when its layer outgrew `layer_size`.
pub(super) async fn over_size(inner: &Arc<Inner>, layer: &str, limit: u64) -> Option<StopCause> {
    let (inner, name) = (inner.clone(), layer.to_string());
    let used = tokio::task::spawn_blocking(move || inner.layers.get(&name).ok().map(|l| l.usage()))
        .await
        .ok()
        .flatten()?;
    // Too many entries to count is over any sensible size too.
    (used.is_none_or(|b| b > limit)).then_some(StopCause::LayerFull { limit })
}

impl Manager {
    /// The layer `what` names: a layer's name, or the id of a job that wrote one.
    pub fn layer_name(&self, what: &str) -> Result<String> {
        if self.inner.layers.exists(what) {
            return Ok(what.to_string());
        }
        let id = JobId::from(what);
        let info = self
            .info(&id)
            .map_err(|_| Error::UnknownLayer(what.chars().take(80).collect()))?;
        info.writes
            .and_then(|w| w.layer)
            .ok_or_else(|| Error::InvalidValue {
                what: "layer",
                input: what.into(),
                message: format!(
                    "{id} wrote no layer (it wrote its workspace `{}`)",
                    info.spec.write.unwrap_or_default()
                ),
            })
    }

    /// Every layer, as `berth layers` lists them.
    pub async fn layer_list(&self) -> Vec<LayerInfo> {
        let inner = self.inner.clone();
        super::off_worker(move || {
            inner
                .layers
                .names()
                .iter()
                .map(|n| inner.layers.info(n))
                .collect()
        })
        .await
    }

    /// One layer as listed.
    pub async fn layer_info(&self, what: &str) -> Result<LayerInfo> {
        let name = self.layer_name(what)?;
        let inner = self.inner.clone();
        Ok(super::off_worker(move || inner.layers.info(&name)).await)
    }

    /// Layer `what`'s changes under `paths` as text (`--stat` or `--patch`).
    pub async fn layer_diff(
        &self,
        what: &str,
        paths: Vec<PathBuf>,
        form: Form,
        max_bytes: usize,
    ) -> Result<String> {
        let name = self.layer_name(what)?;
        let inner = self.inner.clone();
        super::off_worker(move || {
            crate::layers::diff::render(&inner.layers.get(&name)?, &paths, form, max_bytes)
        })
        .await
    }

    /// Apply layer `what` (the paths under `paths`, all when empty) to its
    /// checkout; `guard` bounds an agent's apply.
    pub async fn layer_apply(
        &self,
        what: &str,
        paths: Vec<PathBuf>,
        guard: Option<Guard>,
    ) -> Result<Applied> {
        let name = self.layer_name(what)?;
        let inner = self.inner.clone();
        super::off_worker(move || {
            let mut layer = inner.layers.get(&name)?;
            let in_use = !inner.layers.users(&name).is_empty();
            crate::layers::apply::apply(&mut layer, &paths, guard.as_ref(), in_use)
        })
        .await
    }

    /// Remove layer `what` and its files (refused while jobs write it).
    pub async fn layer_discard(&self, what: &str) -> Result<String> {
        let name = self.layer_name(what)?;
        let inner = self.inner.clone();
        let gone = name.clone();
        super::off_worker(move || inner.layers.discard(&gone)).await?;
        self.inner.engine.forget_layer(&name).await;
        Ok(name)
    }

    /// The layer of the MCP session that `probe` (its owner and caller
    /// context) belongs to, over its project's workspace.
    pub fn session_layer(&self, probe: &JobSpec) -> Result<String> {
        let owner = probe
            .owner
            .as_deref()
            .ok_or_else(|| Error::InvalidSpec("only a session has a session's layer".into()))?;
        let project = self.project_for(probe)?;
        let ws = std::fs::canonicalize(&project.config.workspace).unwrap_or(project.config.workspace.clone());
        Ok(session_layer(owner, &self.inner.owner, &ws))
    }

    /// The guard of an agent's apply, from the project `spec` runs under.
    pub fn apply_guard(&self, spec: &JobSpec) -> Result<Guard> {
        let project = self.project_for(spec)?;
        Ok(Guard {
            max_deletes: project.config.apply_max_deletes,
            protect: project.config.apply_protect.clone(),
        })
    }
}
