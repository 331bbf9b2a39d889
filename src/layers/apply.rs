//! Bringing a layer to the checkout: every change replayed in path order,
//! each file written under a temporary name in its directory and renamed
//! into place (`tree.rs`), deletions and opaque directories honoured,
//! set-uid/set-gid bits dropped, symlinks made as symlinks and never
//! followed on the checkout's side: a path that lies under a symlink of the
//! checkout is a conflict, not a write through it.
//!
//! A change the checkout made since the layer's copy is a conflict
//! (`scan.rs`): skipped and named, the rest applied. An agent's apply is
//! bounded ([`Guard`]): more deletions and truncations than
//! `apply_max_deletes`, or any protected path (berth's own files, `.git/`,
//! the user's `apply_protect` patterns), refuses the whole apply with the
//! command the user runs instead.
//!
//! An `applying` file in the layer's directory marks an apply under way; one
//! left behind (a crash, a full disk) is the `half_applied` state. Running
//! the apply again finishes it: what was applied is equal now, not a change.

use std::path::{Path, PathBuf};

use super::scan::Item;
use super::tree::{Kind, Node};
use super::{APPLYING, Layer};
use crate::error::{Error, Result};
use crate::model::{Applied, ChangeKind};
use crate::store::private;

/// Paths an agent's apply never touches: berth's own project files and
/// git's directory (a name anywhere in the path).
pub const PROTECTED: [&str; 5] = [
    "berth.toml",
    ".devcontainer.json",
    ".devcontainer",
    ".berth",
    ".git",
];

/// What an agent's apply may do.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Most checkout files it may delete or truncate.
    pub max_deletes: usize,
    /// `.gitignore`-style patterns beside [`PROTECTED`].
    pub protect: Vec<String>,
}

impl Guard {
    /// Refuse `items` when they go past the guard.
    fn check(&self, layer: &Layer, items: &[&Item]) -> Result<()> {
        let refuse = |message: String| Error::ApplyRefused {
            layer: layer.meta.name.clone(),
            message,
        };
        if let Some(item) = items.iter().find(|i| self.protects(&i.path)) {
            return Err(refuse(format!(
                "an agent may not apply `{}` of layer {} (a protected path: berth.toml, .devcontainer, .berth, .git and apply_protect)",
                item.path.display(),
                layer.meta.name
            )));
        }
        let lower = Node::open(&layer.meta.workspace).ok();
        let mut n = 0usize;
        for item in items {
            n += match (item.kind, &item.lower, &item.upper) {
                (ChangeKind::Deleted, Some(low), _) if low.kind == Kind::Dir => {
                    files_under(lower.as_ref(), &item.path, self.max_deletes + 1)
                }
                (ChangeKind::Deleted, _, _) => 1,
                (ChangeKind::Changed, Some(low), Some(up)) if up.size < low.size / 2 => 1,
                _ => 0,
            };
        }
        if n > self.max_deletes {
            return Err(refuse(format!(
                "an agent's apply of layer {} would delete or truncate more than {} files of the checkout (apply_max_deletes)",
                layer.meta.name, self.max_deletes
            )));
        }
        Ok(())
    }

    fn protects(&self, path: &Path) -> bool {
        let names: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if names.iter().any(|n| PROTECTED.contains(&n.as_str())) {
            return true;
        }
        let whole = names.join("/");
        self.protect.iter().any(|p| {
            let p = p.trim_end_matches('/');
            match p.strip_prefix('/') {
                // Anchored: the path or one of its parents.
                Some(anchored) => (1..=names.len())
                    .any(|k| crate::safety::expand::glob_matches(anchored, &names[..k].join("/"))),
                None if p.contains('/') => crate::safety::expand::glob_matches(p, &whole),
                None => names.iter().any(|n| crate::safety::expand::glob_matches(p, n)),
            }
        })
    }
}

/// Files under the checkout's directory `rel`, counted up to `limit`.
fn files_under(lower: Option<&Node>, rel: &Path, limit: usize) -> usize {
    let Some(mut stack) = lower.and_then(|l| l.walk(rel).ok()).map(|d| vec![d]) else {
        return 1;
    };
    let mut n = 0;
    while let Some(dir) = stack.pop() {
        for e in dir.entries().unwrap_or_default() {
            if e.kind == Kind::Dir {
                if let Ok(sub) = dir.sub(&e.name) {
                    stack.push(sub);
                }
            } else {
                n += 1;
            }
            if n >= limit {
                return n;
            }
        }
    }
    n.max(1)
}

/// Apply `layer` (only the paths under `only`, when given) to its checkout.
/// `in_use`: jobs write the layer now, so its upper directory is left as
/// it is and what was applied is noted for later pruning.
pub fn apply(layer: &mut Layer, only: &[PathBuf], guard: Option<&Guard>, in_use: bool) -> Result<Applied> {
    let scan = layer.scan()?;
    let picked = |p: &Path| only.is_empty() || only.iter().any(|o| p.starts_with(o));
    for o in only {
        if !scan.items.iter().any(|i| i.path.starts_with(o)) {
            return Err(Error::InvalidValue {
                what: "path",
                input: o.display().to_string(),
                message: format!(
                    "layer {} changes nothing there (see `berth diff {}`)",
                    layer.meta.name, layer.meta.name
                ),
            });
        }
    }
    let items: Vec<&Item> = scan.items.iter().filter(|i| picked(&i.path)).collect();
    if let Some(g) = guard {
        g.check(layer, &items)?;
    }
    let mut out = Applied {
        layer: layer.meta.name.clone(),
        ..Default::default()
    };
    let journal = layer.dir.join(APPLYING);
    let listed: String = items.iter().map(|i| format!("{}\n", i.path.display())).collect();
    private::write(&journal, listed).map_err(|e| Error::io("start applying layer", &journal, e))?;
    let ws = Node::open(&layer.meta.workspace)
        .map_err(|e| Error::io("open checkout", &layer.meta.workspace, e))?;
    let upper = Node::open(&layer.upper()).map_err(|e| Error::io("read layer", layer.upper(), e))?;
    // What is applied leaves the upper directory as it goes, on a second
    // thread (unless jobs write the layer: then it is noted for later).
    let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
    let pruner_upper = Node::open(&layer.upper()).map_err(|e| Error::io("read layer", layer.upper(), e))?;
    let mut noted = Vec::new();
    let (replayed, pruned) = std::thread::scope(|s| {
        let pruner = (!in_use).then(|| s.spawn(move || prune(&pruner_upper, rx.into_iter())));
        let replayed = replay(&ws, &upper, &items, &mut out, |item| match in_use {
            true => noted.extend(
                item.upper
                    .as_ref()
                    .map(|up| (item.path.clone(), (up.ino, up.size, up.mtime))),
            ),
            false => {
                let _ = tx.send(item.path.clone());
            }
        });
        if replayed.is_ok() && only.is_empty() && !in_use {
            for p in &scan.unchanged {
                let _ = tx.send(p.clone());
            }
        }
        drop(tx);
        (replayed, pruner.map(|h| h.join()))
    });
    for (path, stamp) in noted {
        layer
            .meta
            .applied
            .insert(path.to_string_lossy().into_owned(), stamp);
    }
    replayed.map_err(|(path, e)| Error::io("apply layer to", layer.meta.workspace.join(path), e))?;
    let _ = std::fs::remove_file(&journal);
    let pruned = match pruned {
        None => Ok(()),
        Some(Ok(r)) => r,
        Some(Err(_)) => Err(std::io::Error::other("the pruning thread failed")),
    };
    pruned.map_err(|e| Error::io("prune applied files of layer", layer.upper(), e))?;
    layer.meta.used_at = chrono::Utc::now();
    layer.save()?;
    Ok(out)
}

/// Apply `items` in order into `out`; `applied` hears of each one written.
/// An error stops it: the path and why (the `applying` mark stays).
fn replay<'a>(
    ws: &Node,
    upper: &Node,
    items: &[&'a Item],
    out: &mut Applied,
    mut applied: impl FnMut(&'a Item),
) -> std::result::Result<(), (PathBuf, std::io::Error)> {
    let mut here = None;
    for item in items {
        if item.conflict.is_some() {
            out.conflicts.push(item.change());
            continue;
        }
        if item.entry == Kind::Other && item.kind != ChangeKind::Deleted {
            out.skipped.push(item.path.display().to_string());
            continue;
        }
        match one(ws, upper, item, &mut here) {
            Ok(()) => {
                out.applied.push(item.path.display().to_string());
                applied(item);
            }
            Err(Step::Conflict(why)) => {
                let mut c = item.change();
                c.conflict = Some(why);
                out.conflicts.push(c);
            }
            Err(Step::Failed(e)) => return Err((item.path.clone(), e)),
        }
    }
    Ok(())
}

/// How applying one change went wrong.
enum Step {
    /// The checkout is in the way (a symlink or file where the layer has a directory).
    Conflict(String),
    Failed(std::io::Error),
}

impl From<std::io::Error> for Step {
    fn from(e: std::io::Error) -> Step {
        Step::Failed(e)
    }
}

/// The directories of the change applied last: changes come in path order,
/// so the next one mostly lies in the same directory, and walking there
/// from the root for each costs more than its write.
struct Here {
    rel: PathBuf,
    ws: Node,
    up: Option<Node>,
}

/// Apply one change.
fn one(ws: &Node, upper: &Node, item: &Item, here: &mut Option<Here>) -> std::result::Result<(), Step> {
    let name = item.path.file_name().unwrap_or_default();
    let parent_rel = item.path.parent().unwrap_or(Path::new(""));
    let h = match here.take() {
        Some(h) if h.rel == parent_rel => here.insert(h),
        _ => here.insert(Here {
            rel: parent_rel.to_path_buf(),
            ws: parents(ws, upper, parent_rel)?,
            up: upper.walk(parent_rel).ok(),
        }),
    };
    let (ws_parent, up) = (&h.ws, h.up.as_ref());
    let up = || up.ok_or_else(|| Step::Failed(std::io::Error::other("the layer's directory is gone")));
    match (item.kind, item.entry) {
        (ChangeKind::Deleted, _) => ws_parent.remove(name)?,
        (_, Kind::File) => {
            let mode = item.upper.as_ref().map_or(0o644, |u| u.mode);
            ws_parent.write_file(name, &mut up()?.read(name)?, mode)?;
        }
        (_, Kind::Link) => ws_parent.symlink(name, &up()?.link(name)?)?,
        (_, Kind::Dir) => {
            if ws_parent.stat(name)?.is_some_and(|e| e.kind != Kind::Dir) {
                ws_parent.remove(name)?;
            }
            ws_parent.mkdir(name, item.upper.as_ref().map_or(0o755, |u| u.mode))?;
        }
        _ => {}
    }
    Ok(())
}

/// The checkout's directory `rel`, made where missing (with the layer's
/// modes); a symlink or file on the way is a conflict.
fn parents(ws: &Node, upper: &Node, rel: &Path) -> std::result::Result<Node, Step> {
    let mut at = ws.walk(Path::new(""))?;
    let mut up = Some(upper.walk(Path::new(""))?);
    for name in super::tree::elements(rel)? {
        let mode = up
            .as_ref()
            .and_then(|u| u.stat(name).ok().flatten())
            .map_or(0o755, |e| e.mode);
        up = up.and_then(|u| u.sub(name).ok());
        at = match at.stat(name)? {
            None => at.mkdir(name, mode)?,
            Some(e) if e.kind == Kind::Dir => at.sub(name)?,
            Some(e) => {
                return Err(Step::Conflict(format!(
                    "`{}` in the checkout is a {}, not a directory: nothing is written through it",
                    name.to_string_lossy(),
                    if e.kind == Kind::Link { "symlink" } else { "file" }
                )));
            }
        };
    }
    Ok(at)
}

/// Remove `paths` from the upper directory, then the directories they
/// leave empty.
fn prune(upper: &Node, paths: impl Iterator<Item = PathBuf>) -> std::io::Result<()> {
    let mut dirs: std::collections::BTreeSet<PathBuf> = Default::default();
    let mut at: Option<(PathBuf, Node)> = None;
    for path in paths {
        let name = path.file_name().unwrap_or_default();
        let parent = path.parent().unwrap_or(Path::new(""));
        if at.as_ref().is_none_or(|(rel, _)| rel != parent) {
            at = upper.walk(parent).ok().map(|d| (parent.to_path_buf(), d));
        }
        let Some((_, dir)) = &at else { continue };
        // A directory with entries left: tried again once they went.
        if !dir.unlink(name)? {
            dirs.insert(path.clone());
        }
        let mut p = parent;
        while p != Path::new("") {
            dirs.insert(p.to_path_buf());
            p = p.parent().unwrap_or(Path::new(""));
        }
    }
    let mut dirs: Vec<PathBuf> = dirs.into_iter().collect();
    dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for d in dirs {
        if let (Ok(parent), Some(name)) = (upper.walk(d.parent().unwrap_or(Path::new(""))), d.file_name()) {
            parent.rmdir_empty(name)?;
        }
    }
    Ok(())
}

/// Prune what was applied while the layer was in use, now that it is not:
/// each upper entry still as it was when applied.
pub(super) fn prune_applied(layer: &mut Layer) -> Result<()> {
    let upper = Node::open(&layer.upper()).map_err(|e| Error::io("read layer", layer.upper(), e))?;
    let mut gone: Vec<PathBuf> = Vec::new();
    for (path, &(ino, size, mtime)) in &layer.meta.applied {
        let p = Path::new(path);
        let (Some(name), Ok(dir)) = (p.file_name(), upper.walk(p.parent().unwrap_or(Path::new("")))) else {
            continue;
        };
        if let Ok(Some(e)) = dir.stat(name)
            && e.ino == ino
            && e.size == size
            && e.mtime == mtime
        {
            gone.push(p.to_path_buf());
        }
    }
    prune(&upper, gone.into_iter()).map_err(|e| Error::io("prune layer", layer.upper(), e))?;
    layer.meta.applied.clear();
    Ok(())
}
