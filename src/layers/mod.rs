//! Layers: where a job's writes go when it must not write the checkout.
//!
//! # Theory of operation
//!
//! A job in `layer` mode sees its workspace as an overlay: the checkout is
//! the read-only lower directory (live: edits made on the host show
//! through), and everything the job writes, creates or deletes lands in an
//! upper directory of berth's, private to the user (`<instance>/layers/NAME/
//! upper`). Nothing reaches the checkout until someone applies the layer
//! (`apply.rs`: file by file, renamed into place, conflicts skipped) or it
//! is discarded. The overlay is mounted by the engine's local volume driver
//! for container jobs (`runner/docker/layer.rs`) and in a mount namespace of
//! the job's own for host jobs (`runner/shim.rs`); `userxattr` keeps its
//! marks in `user.` xattrs that berth reads without privilege.
//!
//! A layer is named: an MCP session's jobs share one (`mcp-<session>`),
//! a CLI job gets its own (its id) or joins a named one (`--layer NAME`).
//! It outlives its jobs until applied, discarded or pruned (`layer_days`),
//! and is found by its name or by the id of any job that wrote it.
//!
//! While a job runs in a layer its upper directory is mounted: berth does
//! not change it then (the kernel says changes under a mounted overlay are
//! undefined). An apply made meanwhile writes the checkout and notes what it
//! applied (`Meta::applied`); those upper entries are pruned once no job
//! uses the layer, and are not listed as changes before.

pub mod apply;
pub mod diff;
pub mod merge;
pub mod scan;
pub mod tree;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{JobId, LayerCounts, LayerInfo, LayerState};
use crate::store::private;
use tree::{Node, Time};

/// The layer's record, beside its directories.
const META: &str = "layer.json";
/// Present while an apply runs: one left behind means it stopped half-way.
const APPLYING: &str = "applying";
/// Most entries a size check walks (a bigger layer counts as full).
const USAGE_ENTRIES: u64 = 2_000_000;

/// A layer's record (`layer.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub name: String,
    /// The checkout it lies over.
    pub workspace: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default)]
    pub jobs: Vec<JobId>,
    pub created_at: DateTime<Utc>,
    pub used_at: DateTime<Utc>,
    /// Read back from a remote engine: its copy of the checkout was taken
    /// at `lower_at` (changes in the checkout after it are conflicts).
    #[serde(default)]
    pub remote: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_at: Option<DateTime<Utc>>,
    /// Applied while jobs still wrote the layer: path → (inode, size,
    /// mtime) of the upper entry then; pruned once the layer is idle.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub applied: BTreeMap<String, (u64, u64, Time)>,
}

/// One layer on disk.
#[derive(Debug, Clone)]
pub struct Layer {
    pub dir: PathBuf,
    pub meta: Meta,
}

fn time(t: DateTime<Utc>) -> Time {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

impl Layer {
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }
    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// Walk the layer beside its checkout.
    pub fn scan(&self) -> Result<scan::Scan> {
        let upper = Node::open(&self.upper()).map_err(|e| Error::io("read layer", self.upper(), e))?;
        let lower = Node::open(&self.meta.workspace).ok();
        let base = scan::Base {
            lower_at: self.meta.lower_at.map(time),
            created: time(self.meta.created_at),
            applied: &self.meta.applied,
        };
        scan::scan(&upper, lower.as_ref(), &base).map_err(|e| Error::io("read layer", self.upper(), e))
    }

    /// Bytes its upper directory takes (`None`: too many entries to count).
    pub fn usage(&self) -> Option<u64> {
        let upper = Node::open(&self.upper()).ok()?;
        tree::usage(&upper, USAGE_ENTRIES).ok().flatten()
    }

    fn save(&self) -> Result<()> {
        let path = self.dir.join(META);
        let tmp = self.dir.join(".layer.json.tmp");
        let bytes = serde_json::to_vec_pretty(&self.meta).unwrap_or_default();
        private::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| Error::io("write layer record", path, e))
    }

    fn load(dir: &Path) -> Result<Layer> {
        let path = dir.join(META);
        let bytes = std::fs::read(&path).map_err(|e| Error::io("read layer record", &path, e))?;
        let meta = serde_json::from_slice(&bytes)
            .map_err(|e| Error::io("read layer record", &path, std::io::Error::other(e.to_string())))?;
        Ok(Layer {
            dir: dir.to_path_buf(),
            meta,
        })
    }
}

/// Mark the layer in `dir` as read back from a remote engine whose copy
/// of the checkout was taken at `at`.
pub fn mark_remote(dir: &Path, at: DateTime<Utc>) -> Result<()> {
    let mut layer = Layer::load(dir)?;
    layer.meta.remote = true;
    layer.meta.lower_at = Some(layer.meta.lower_at.map_or(at, |t| t.max(at)));
    layer.save()
}

pub use crate::job::check_layer_name as check_name;

/// The instance's layers and which of this manager's jobs use each.
#[derive(Debug)]
pub struct Layers {
    root: PathBuf,
    users: Mutex<HashMap<String, Vec<JobId>>>,
}

impl Layers {
    /// The layers under `root` (`<instance dir>/layers`).
    pub fn new(root: PathBuf) -> Layers {
        Layers {
            root,
            users: Mutex::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The layer `name`.
    pub fn get(&self, name: &str) -> Result<Layer> {
        check_name(name).map_err(|_| Error::UnknownLayer(name.chars().take(80).collect()))?;
        let dir = self.root.join(name);
        if !dir.join(META).exists() {
            return Err(Error::UnknownLayer(name.into()));
        }
        Layer::load(&dir)
    }

    /// Whether a layer `name` exists (a damaged one, its record unreadable, too).
    pub fn exists(&self, name: &str) -> bool {
        check_name(name).is_ok() && self.root.join(name).is_dir()
    }

    /// Job `job` starts writing layer `name` over `workspace`: the layer is
    /// made when new (its upper root takes the checkout root's mode and
    /// owner, which the overlay shows as the workspace's), and what was
    /// applied while it was in use is pruned first when nothing uses it.
    pub fn take(&self, name: &str, workspace: &Path, owner: Option<&str>, job: &JobId) -> Result<Layer> {
        check_name(name)?;
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.root.join(name);
        let mut layer = match Layer::load(&dir) {
            Ok(l) => l,
            Err(_) if !dir.join(META).exists() => self.make(name, workspace, owner)?,
            Err(e) => return Err(e),
        };
        if layer.meta.workspace != workspace {
            return Err(Error::InvalidValue {
                what: "layer",
                input: name.into(),
                message: format!(
                    "it lies over `{}`, not this job's workspace `{}`; name another layer",
                    layer.meta.workspace.display(),
                    workspace.display()
                ),
            });
        }
        let using = users.entry(name.to_string()).or_default();
        if using.is_empty() && !layer.meta.applied.is_empty() {
            apply::prune_applied(&mut layer)?;
        }
        using.push(job.clone());
        if !layer.meta.jobs.contains(job) {
            layer.meta.jobs.push(job.clone());
        }
        layer.meta.used_at = Utc::now();
        layer.save()?;
        Ok(layer)
    }

    fn make(&self, name: &str, workspace: &Path, owner: Option<&str>) -> Result<Layer> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = self.root.join(name);
        let ws = std::fs::metadata(workspace).map_err(|e| Error::io("read workspace", workspace, e))?;
        private::own_dir(&self.root).map_err(|e| Error::io("create layers directory", &self.root, e))?;
        private::own_dir(&dir.join("work")).map_err(|e| Error::io("create layer", &dir, e))?;
        let upper = dir.join("upper");
        private::create_dir(&upper).map_err(|e| Error::io("create layer", &upper, e))?;
        std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(ws.mode() & 0o7777))
            .map_err(|e| Error::io("create layer", &upper, e))?;
        if nix::unistd::geteuid().is_root() {
            let _ = std::os::unix::fs::chown(&upper, Some(ws.uid()), Some(ws.gid()));
        }
        let now = Utc::now();
        let layer = Layer {
            dir,
            meta: Meta {
                name: name.into(),
                workspace: workspace.to_path_buf(),
                owner: owner.map(str::to_string),
                jobs: Vec::new(),
                created_at: now,
                used_at: now,
                remote: false,
                lower_at: None,
                applied: BTreeMap::new(),
            },
        };
        layer.save()?;
        Ok(layer)
    }

    /// Job `job` stopped writing layer `name`.
    pub fn release(&self, name: &str, job: &JobId) {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(using) = users.get_mut(name) {
            using.retain(|j| j != job);
            if using.is_empty() {
                users.remove(name);
            }
        }
    }

    /// This manager's jobs writing layer `name` now.
    pub fn users(&self, name: &str) -> Vec<JobId> {
        let users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users.get(name).cloned().unwrap_or_default()
    }

    /// Refuse when jobs write layer `name` now.
    pub fn idle(&self, name: &str) -> Result<()> {
        let users = self.users(name);
        if users.is_empty() {
            return Ok(());
        }
        Err(Error::LayerBusy {
            layer: name.into(),
            jobs: users.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Every layer's name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| check_name(n).is_ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Layer `name` as `berth layers` lists it (blocking: it walks the layer).
    pub fn info(&self, name: &str) -> LayerInfo {
        let dir = self.root.join(name);
        let users = self.users(name);
        match Layer::load(&dir) {
            Ok(layer) => {
                let (state, counts) = match layer.scan() {
                    Ok(scan) => (
                        if dir.join(APPLYING).exists() {
                            LayerState::HalfApplied
                        } else if users.is_empty() {
                            LayerState::Idle
                        } else {
                            LayerState::InUse { jobs: users }
                        },
                        counts(&scan),
                    ),
                    Err(e) => (
                        LayerState::Damaged {
                            reason: e.to_string(),
                        },
                        LayerCounts::default(),
                    ),
                };
                LayerInfo {
                    name: layer.meta.name,
                    workspace: layer.meta.workspace,
                    owner: layer.meta.owner,
                    jobs: layer.meta.jobs,
                    created_at: layer.meta.created_at,
                    used_at: layer.meta.used_at,
                    state,
                    counts,
                    remote: layer.meta.remote,
                }
            }
            Err(e) => LayerInfo {
                name: name.into(),
                workspace: PathBuf::new(),
                owner: None,
                jobs: Vec::new(),
                created_at: DateTime::<Utc>::UNIX_EPOCH,
                used_at: DateTime::<Utc>::UNIX_EPOCH,
                state: LayerState::Damaged {
                    reason: e.to_string(),
                },
                counts: LayerCounts::default(),
                remote: false,
            },
        }
    }

    /// Remove layer `name` and its files (refused while jobs write it).
    pub fn discard(&self, name: &str) -> Result<()> {
        check_name(name).map_err(|_| Error::UnknownLayer(name.into()))?;
        self.idle(name)?;
        let dir = self.root.join(name);
        if !dir.exists() {
            return Err(Error::UnknownLayer(name.into()));
        }
        remove_layer_dir(&dir)
    }

    /// Remove idle layers last used more than `days` ago; their names.
    pub fn prune(&self, days: f64) -> Vec<String> {
        let Some(age) = chrono::Duration::try_milliseconds((days * 86_400_000.0) as i64) else {
            return Vec::new();
        };
        let cutoff = Utc::now() - age;
        let mut gone = Vec::new();
        for name in self.names() {
            if !self.users(&name).is_empty() {
                continue;
            }
            let dir = self.root.join(&name);
            let old = Layer::load(&dir).map_or(true, |l| l.meta.used_at < cutoff);
            if old && remove_layer_dir(&dir).is_ok() {
                gone.push(name);
            }
        }
        gone
    }
}

/// Remove a layer's directory and everything in it (no symlink followed).
fn remove_layer_dir(dir: &Path) -> Result<()> {
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir.file_name().unwrap_or_default();
    Node::open(parent)
        .and_then(|p| p.remove(name))
        .map_err(|e| Error::io("remove layer", dir, e))
}

/// What a walk found, as counts.
pub fn counts(scan: &scan::Scan) -> LayerCounts {
    use crate::model::ChangeKind;
    let mut c = LayerCounts {
        bytes: scan.bytes,
        ..Default::default()
    };
    for item in &scan.items {
        match item.kind {
            ChangeKind::Added => c.added += 1,
            ChangeKind::Changed => c.changed += 1,
            ChangeKind::Deleted => c.deleted += 1,
        }
    }
    c
}

#[cfg(test)]
mod tests;
