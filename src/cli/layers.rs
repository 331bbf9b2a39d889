//! `berth layers`, `berth diff`, `berth apply`, `berth discard`: a layer's
//! changes listed, shown, brought to the checkout, or thrown away. A layer
//! is named by its name or by the id of a job that wrote it. Through the
//! instance's daemon when one answers; else on the instance's layers
//! directly (the instance claimed meanwhile, so no manager writes them).
//! The person at the terminal is the user: an apply here has no agent's guard.

use std::path::{Path, PathBuf};

use clap::Args;

use super::Global;
use super::jobs::print_json;
use super::out::{out, outln};
use crate::api::client::Client;
use crate::api::{ApplyRequest, DiffRequest, MAX_DIFF_BYTES};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::layers::Layers;
use crate::layers::diff::Form;
use crate::model::{Applied, JobId, LayerInfo, LayerState};

#[derive(Debug, Args)]
pub struct LayersArgs {
    /// Print JSON (the API's answer) instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The layer: its name, or the id of a job that wrote it.
    #[arg(add = super::complete::job_ids())]
    pub layer: String,
    /// One line a changed path, with lines added and removed (the default).
    #[arg(long, conflicts_with = "patch")]
    pub stat: bool,
    /// A unified diff of the text files (binary files named).
    #[arg(long)]
    pub patch: bool,
    /// Only these paths (from here, or from the workspace root) and what is under them.
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The layer: its name, or the id of a job that wrote it.
    #[arg(add = super::complete::job_ids())]
    pub layer: String,
    /// Only these paths (from here, or from the workspace root) and what is under them.
    pub paths: Vec<PathBuf>,
    /// Print JSON (what was applied, what conflicted) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiscardArgs {
    /// The layer: its name, or the id of a job that wrote it.
    #[arg(add = super::complete::job_ids())]
    pub layer: String,
}

/// Where the layers are reached.
enum Place {
    Daemon(Client),
    /// The instance's layers on disk, with its store for job ids.
    Local(Box<Config>, Layers),
}

async fn place(global: &Global) -> Result<Place> {
    let config = global.config()?;
    if let Ok(c) = Client::connect(&config).await {
        return Ok(Place::Daemon(c));
    }
    let layers = Layers::new(config.instance_dir().join("layers"));
    Ok(Place::Local(Box::new(config), layers))
}

impl Place {
    /// The layer `what` names, as listed.
    async fn info(&self, what: &str) -> Result<LayerInfo> {
        match self {
            Place::Daemon(c) => c.layer(what).await,
            Place::Local(config, layers) => {
                let name = local_name(config, layers, what)?;
                Ok(layers.info(&name))
            }
        }
    }
}

/// A layer's name from `what` without a daemon: a layer's own, or the one
/// the stored record of job `what` names.
fn local_name(config: &Config, layers: &Layers, what: &str) -> Result<String> {
    if layers.exists(what) {
        return Ok(what.to_string());
    }
    let db = config.instance_dir().join("berth.db");
    let unknown = || Error::UnknownLayer(what.chars().take(80).collect());
    if !db.is_file() {
        return Err(unknown());
    }
    let store = crate::store::Store::open_read_only(&db)?;
    let id = JobId::from(what);
    let run = store.run(&id)?.ok_or_else(unknown)?;
    run.info.writes.and_then(|w| w.layer).ok_or_else(unknown)
}

/// `paths` as the layer knows them: relative to its workspace (a path
/// typed from inside the workspace is taken from here).
fn relative(paths: &[PathBuf], workspace: &Path) -> Vec<PathBuf> {
    let here = std::env::current_dir().unwrap_or_default();
    paths
        .iter()
        .map(|p| {
            let abs = std::path::absolute(here.join(p)).unwrap_or_else(|_| p.clone());
            match abs.strip_prefix(workspace) {
                Ok(rel) => rel.to_path_buf(),
                Err(_) => p.clone(),
            }
        })
        .collect()
}

pub async fn list(global: &Global, a: LayersArgs) -> anyhow::Result<i32> {
    let layers = match place(global).await? {
        Place::Daemon(c) => c.layers().await?,
        Place::Local(_, layers) => {
            tokio::task::spawn_blocking(move || layers.names().iter().map(|n| layers.info(n)).collect())
                .await?
        }
    };
    if a.json {
        print_json(&layers)?;
        return Ok(0);
    }
    if layers.is_empty() {
        outln!("no layers (a job run with --write layer, or by an agent, writes one)");
        return Ok(0);
    }
    outln!(
        "{:<16} {:<12} {:>6} {:>6} {:>6} {:>9}  {:<14} WORKSPACE",
        "LAYER",
        "STATE",
        "ADDED",
        "CHANGED",
        "DELETED",
        "SIZE",
        "JOBS"
    );
    for l in &layers {
        let state = match &l.state {
            LayerState::Idle => "idle".to_string(),
            LayerState::InUse { .. } => "in use".to_string(),
            LayerState::HalfApplied => "half-applied".to_string(),
            LayerState::Damaged { .. } => "damaged".to_string(),
        };
        let jobs: Vec<String> = l.jobs.iter().map(|j| j.to_string()).collect();
        outln!(
            "{:<16} {:<12} {:>6} {:>6} {:>6} {:>9}  {:<14} {}",
            l.name,
            state,
            l.counts.added,
            l.counts.changed,
            l.counts.deleted,
            crate::card::bytes(l.counts.bytes),
            jobs.join(","),
            l.workspace.display()
        );
        if let LayerState::Damaged { reason } = &l.state {
            outln!("  damaged: {reason}");
        }
    }
    Ok(0)
}

pub async fn diff(global: &Global, a: DiffArgs) -> anyhow::Result<i32> {
    let place = place(global).await?;
    let info = place.info(&a.layer).await?;
    let paths = relative(&a.paths, &info.workspace);
    let text = match place {
        Place::Daemon(c) => {
            let req = DiffRequest {
                patch: a.patch,
                paths,
            };
            c.layer_diff(&info.name, &req).await?.text
        }
        Place::Local(_, layers) => {
            let form = if a.patch { Form::Patch } else { Form::Stat };
            let name = info.name.clone();
            tokio::task::spawn_blocking(move || {
                crate::layers::diff::render(&layers.get(&name)?, &paths, form, MAX_DIFF_BYTES)
            })
            .await??
        }
    };
    out!("{}", crate::inert::visible_lines(&text));
    Ok(0)
}

pub async fn apply(global: &Global, a: ApplyArgs) -> anyhow::Result<i32> {
    let place = place(global).await?;
    let info = place.info(&a.layer).await?;
    let paths = relative(&a.paths, &info.workspace);
    let done: Applied = match place {
        Place::Daemon(c) => c.layer_apply(&info.name, &ApplyRequest { paths }).await?,
        Place::Local(config, layers) => {
            // No manager may write the layer meanwhile.
            let _claim = crate::claim::Claim::take(&config)?;
            let name = info.name.clone();
            tokio::task::spawn_blocking(move || {
                let mut layer = layers.get(&name)?;
                crate::layers::apply::apply(&mut layer, &paths, None, false)
            })
            .await??
        }
    };
    if a.json {
        print_json(&done)?;
    } else {
        outln!("{}", crate::inert::visible_lines(&done.summary()));
        for c in &done.conflicts {
            outln!(
                "  conflict: {}: {}",
                crate::inert::visible_lines(&c.path),
                c.conflict.as_deref().unwrap_or("")
            );
        }
    }
    // Something was left behind: the caller's script should know.
    Ok(i32::from(!done.conflicts.is_empty()))
}

pub async fn discard(global: &Global, a: DiscardArgs) -> anyhow::Result<i32> {
    let name = match place(global).await? {
        Place::Daemon(c) => c.layer_discard(&a.layer).await?,
        Place::Local(config, layers) => {
            let _claim = crate::claim::Claim::take(&config)?;
            let name = local_name(&config, &layers, &a.layer)?;
            let gone = name.clone();
            tokio::task::spawn_blocking(move || layers.discard(&gone)).await??;
            name
        }
    };
    outln!("discarded layer {name}: its changes are gone; the checkout is as it was");
    Ok(0)
}
