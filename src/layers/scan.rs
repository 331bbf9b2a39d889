//! What a layer changes: its upper directory walked beside the checkout.
//!
//! The overlay leaves in the upper directory every path a job wrote: new
//! and copied-up files and symlinks, directories (opaque ones hide the
//! checkout's directory of that name: the job removed and remade it) and
//! whiteouts (0/0 character devices) for what it deleted. A path counts as
//! a change only when it differs from the checkout now: a file copied up
//! and written back unchanged, or one already applied, is not one.
//!
//! **Conflicts.** A change is skipped by `apply` when the checkout changed
//! the path after the layer took its copy: the checkout entry's change time
//! is later than the upper entry's birth time (the copy-up, the job's
//! create or delete). A remote layer's copy was taken at the upload
//! (`lower_at`); where the file system keeps no birth time, the layer's
//! creation stands in (more conflicts, never fewer).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::tree::{Entry, Kind, Node, Time};
use crate::model::{Change, ChangeKind, EntryKind};

/// Longest file compared byte by byte (longer ones differ when their sizes
/// or times do).
const COMPARE_LIMIT: u64 = 64 << 20;

/// One change of a layer.
#[derive(Debug, Clone)]
pub struct Item {
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// What the layer holds (for a deletion: what the checkout holds).
    pub entry: Kind,
    /// The layer's entry (none for a deletion an opaque directory implies).
    pub upper: Option<Entry>,
    /// The checkout's entry now.
    pub lower: Option<Entry>,
    pub conflict: Option<String>,
}

impl Item {
    pub fn change(&self) -> Change {
        Change {
            path: self.path.to_string_lossy().into_owned(),
            kind: self.kind,
            entry: match self.entry {
                Kind::File => EntryKind::File,
                Kind::Dir => EntryKind::Dir,
                Kind::Link => EntryKind::Symlink,
                Kind::Whiteout | Kind::Other => EntryKind::Other,
            },
            size: match self.kind {
                ChangeKind::Deleted => 0,
                _ => self.upper.as_ref().map_or(0, |u| u.size),
            },
            conflict: self.conflict.clone(),
        }
    }
}

/// A layer walked: its changes, and the upper paths equal to the checkout
/// (an apply prunes them with the rest).
#[derive(Debug, Default)]
pub struct Scan {
    pub items: Vec<Item>,
    pub unchanged: Vec<PathBuf>,
    /// Bytes the upper directory takes.
    pub bytes: u64,
}

/// What the walk compares against.
pub struct Base<'a> {
    /// The checkout's copy was taken then (remote layers), else per entry.
    pub lower_at: Option<Time>,
    /// When the layer was made: the stand-in for a missing birth time.
    pub created: Time,
    /// Applied while in use: entries still as they were then are not changes.
    pub applied: &'a BTreeMap<String, (u64, u64, Time)>,
}

/// Walk `upper` beside `lower` (the checkout; `None` when it is gone).
pub fn scan(upper: &Node, lower: Option<&Node>, base: &Base<'_>) -> io::Result<Scan> {
    let mut out = Scan::default();
    walk(upper, lower, Path::new(""), false, base, &mut out)?;
    Ok(out)
}

fn walk(
    upper: &Node,
    lower: Option<&Node>,
    rel: &Path,
    opaque: bool,
    base: &Base<'_>,
    out: &mut Scan,
) -> io::Result<()> {
    let lower_entries: BTreeMap<OsString, Entry> = match lower {
        Some(l) => l.entries()?.into_iter().map(|e| (e.name.clone(), e)).collect(),
        None => BTreeMap::new(),
    };
    let uppers = upper.entries()?;
    for up in &uppers {
        out.bytes += up.blocks;
        let path = rel.join(&up.name);
        let low = lower_entries.get(&up.name).cloned();
        if applied_already(base, &path, up) {
            continue;
        }
        let item = |kind, entry| Item {
            path: path.clone(),
            kind,
            entry,
            upper: Some(up.clone()),
            lower: low.clone(),
            conflict: None,
        };
        match (up.kind, low.as_ref().map(|l| l.kind)) {
            (Kind::Whiteout, None) => out.unchanged.push(path.clone()),
            (Kind::Whiteout, Some(k)) => push(out, base, item(ChangeKind::Deleted, k)),
            (Kind::Dir, low_kind) => {
                let sub = upper.sub(&up.name)?;
                let sub_opaque = sub.opaque();
                let sub_lower = match (low_kind, lower) {
                    (Some(Kind::Dir), Some(l)) => Some(l.sub(&up.name)?),
                    _ => None,
                };
                match low_kind {
                    None if sub.entries()?.is_empty() => push(out, base, item(ChangeKind::Added, Kind::Dir)),
                    Some(k) if k != Kind::Dir => push(out, base, item(ChangeKind::Changed, Kind::Dir)),
                    _ => {}
                }
                walk(&sub, sub_lower.as_ref(), &path, sub_opaque, base, out)?;
            }
            (k, None) => push(out, base, item(ChangeKind::Added, k)),
            (k, Some(lk)) => {
                if k == lk && same(upper, lower, up, low.as_ref())? {
                    out.unchanged.push(path.clone());
                } else {
                    push(out, base, item(ChangeKind::Changed, k));
                }
            }
        }
    }
    // An opaque directory hides every checkout entry it does not hold.
    if opaque {
        for (name, low) in &lower_entries {
            if !uppers.iter().any(|u| &u.name == name) {
                out.items.push(Item {
                    path: rel.join(name),
                    kind: ChangeKind::Deleted,
                    entry: low.kind,
                    upper: None,
                    lower: Some(low.clone()),
                    // The opaque directory's own time is when the checkout's went.
                    conflict: conflict_of(base, upper.itself().ok().as_ref(), Some(low)),
                });
            }
        }
    }
    Ok(())
}

fn applied_already(base: &Base<'_>, path: &Path, up: &Entry) -> bool {
    base.applied
        .get(path.to_string_lossy().as_ref())
        .is_some_and(|&(ino, size, mtime)| ino == up.ino && size == up.size && mtime == up.mtime)
}

fn push(out: &mut Scan, base: &Base<'_>, mut item: Item) {
    item.conflict = conflict_of(base, item.upper.as_ref(), item.lower.as_ref());
    out.items.push(item);
}

/// Why the checkout's `low` conflicts with the layer's `up`: it changed
/// after the layer's copy was taken.
fn conflict_of(base: &Base<'_>, up: Option<&Entry>, low: Option<&Entry>) -> Option<String> {
    let low = low?;
    let taken = base
        .lower_at
        .or_else(|| up.and_then(|u| u.btime))
        .unwrap_or(base.created);
    (low.ctime > taken).then(|| {
        format!(
            "changed in the checkout at {}, after the layer's copy of {}",
            stamp(low.ctime),
            stamp(taken)
        )
    })
}

fn stamp((secs, nanos): Time) -> String {
    chrono::DateTime::from_timestamp(secs, nanos)
        .map(|t| t.format("%H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| secs.to_string())
}

/// Whether the layer's `up` holds what the checkout's `low` holds: the same
/// bytes (or link target) and permission bits.
fn same(upper: &Node, lower: Option<&Node>, up: &Entry, low: Option<&Entry>) -> io::Result<bool> {
    let (Some(lower), Some(low)) = (lower, low) else {
        return Ok(false);
    };
    match up.kind {
        Kind::Link => Ok(upper.link(&up.name)? == lower.link(&low.name)?),
        Kind::File => {
            if up.size != low.size || up.mode != low.mode {
                return Ok(false);
            }
            if up.size > COMPARE_LIMIT {
                return Ok(up.mtime == low.mtime);
            }
            same_bytes(upper.read(&up.name)?, lower.read(&low.name)?)
        }
        _ => Ok(false),
    }
}

fn same_bytes(mut a: std::fs::File, mut b: std::fs::File) -> io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut a, &mut x)?;
        let m = read_full(&mut b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
