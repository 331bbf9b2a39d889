//! A layer's changes as people read them: a summary (`--stat`: one line a
//! path, `git status --short` letters, lines added and removed for text)
//! or a unified diff of the text files (`--patch`, through `similar`),
//! binary and oversized files named, never dumped.

use std::fmt::Write;
use std::path::Path;

use similar::TextDiff;

use super::Layer;
use super::scan::Item;
use super::tree::{Kind, Node};
use crate::error::{Error, Result};
use crate::model::ChangeKind;

/// Largest file shown as text (bigger ones are named only).
const TEXT_LIMIT: u64 = 1 << 20;

/// What `berth diff` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Stat,
    Patch,
}

/// `layer`'s changes under `only` (all when empty), as `form`, at most
/// `max_bytes` of text (the rest said as cut).
pub fn render(layer: &Layer, only: &[std::path::PathBuf], form: Form, max_bytes: usize) -> Result<String> {
    let scan = layer.scan()?;
    let items: Vec<&Item> = scan
        .items
        .iter()
        .filter(|i| only.is_empty() || only.iter().any(|o| i.path.starts_with(o)))
        .collect();
    if items.is_empty() {
        return Ok(format!(
            "no changes in layer {} (its jobs changed nothing{}, or it was applied)\n",
            layer.meta.name,
            if only.is_empty() { "" } else { " there" }
        ));
    }
    let ws = Node::open(&layer.meta.workspace).ok();
    let upper = Node::open(&layer.upper()).map_err(|e| Error::io("read layer", layer.upper(), e))?;
    let mut out = String::new();
    for item in &items {
        if out.len() > max_bytes {
            let _ = writeln!(out, "… (cut at {max_bytes} bytes: name paths to see the rest)");
            break;
        }
        let texts = texts(ws.as_ref(), &upper, item);
        match form {
            Form::Stat => stat_line(&mut out, item, texts.as_ref()),
            Form::Patch => patch(&mut out, item, texts.as_ref()),
        }
    }
    let counts = super::counts(&scan);
    let conflicts = items.iter().filter(|i| i.conflict.is_some()).count();
    let _ = write!(
        out,
        "{} path{} changed in layer {} ({} added, {} changed, {} deleted; {} in the layer)",
        items.len(),
        if items.len() == 1 { "" } else { "s" },
        layer.meta.name,
        counts.added,
        counts.changed,
        counts.deleted,
        crate::card::bytes(counts.bytes),
    );
    if conflicts > 0 {
        let _ = write!(
            out,
            "; {conflicts} conflict(s) (!): changed in the checkout since, `apply` skips them"
        );
    }
    out.push('\n');
    Ok(out)
}

/// The checkout's and the layer's text of a file change (`None`: not both
/// text, or too big).
fn texts(ws: Option<&Node>, upper: &Node, item: &Item) -> Option<(String, String)> {
    let read = |root: &Node, present: bool| -> Option<String> {
        if !present {
            return Some(String::new());
        }
        let dir = root.walk(item.path.parent().unwrap_or(Path::new(""))).ok()?;
        let bytes = dir.read_all(item.path.file_name()?, TEXT_LIMIT).ok()??;
        (!bytes.contains(&0))
            .then(|| String::from_utf8(bytes).ok())
            .flatten()
    };
    let file = |e: Option<&super::tree::Entry>| e.is_some_and(|e| e.kind == Kind::File);
    let old_file = file(item.lower.as_ref());
    let new_file = file(item.upper.as_ref()) && item.kind != ChangeKind::Deleted;
    if !old_file && !new_file {
        return None;
    }
    let old = match ws {
        Some(ws) => read(ws, old_file)?,
        None => String::new(),
    };
    let new = read(upper, new_file)?;
    Some((old, new))
}

fn stat_line(out: &mut String, item: &Item, texts: Option<&(String, String)>) {
    let mark = if item.conflict.is_some() { "!" } else { " " };
    let _ = write!(out, "{}{mark} {}", item.kind.letter(), item.path.display());
    match item.entry {
        Kind::Dir => out.push('/'),
        Kind::Link => out.push_str(" (symlink)"),
        Kind::Other => out.push_str(" (not a file: never applied)"),
        _ => {}
    }
    if let Some((old, new)) = texts {
        let diff = TextDiff::from_lines(old, new);
        let (mut add, mut del) = (0, 0);
        for change in diff.iter_all_changes() {
            match change.tag() {
                similar::ChangeTag::Insert => add += 1,
                similar::ChangeTag::Delete => del += 1,
                similar::ChangeTag::Equal => {}
            }
        }
        let _ = write!(out, "  +{add} -{del}");
    } else if item.entry == Kind::File && item.kind != ChangeKind::Deleted {
        let size = item.upper.as_ref().map_or(0, |u| u.size);
        let _ = write!(out, "  (binary, {})", crate::card::bytes(size));
    }
    if let Some(why) = &item.conflict {
        let _ = write!(out, "  conflict: {why}");
    }
    out.push('\n');
}

fn patch(out: &mut String, item: &Item, texts: Option<&(String, String)>) {
    let path = item.path.display();
    if let Some(why) = &item.conflict {
        let _ = writeln!(out, "# conflict: {path}: {why}");
    }
    match (item.entry, texts) {
        (_, Some((old, new))) => {
            let (a, b) = match item.kind {
                ChangeKind::Added => ("/dev/null".to_string(), format!("b/{path}")),
                ChangeKind::Deleted => (format!("a/{path}"), "/dev/null".to_string()),
                ChangeKind::Changed => (format!("a/{path}"), format!("b/{path}")),
            };
            let diff = TextDiff::from_lines(old, new);
            let _ = write!(out, "{}", diff.unified_diff().context_radius(3).header(&a, &b));
            if !new.is_empty() && !new.ends_with('\n') || !old.is_empty() && !old.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        (Kind::Dir, None) => {
            let _ = writeln!(out, "{} directory {path}/", word(item.kind));
        }
        (Kind::Link, None) => {
            let _ = writeln!(out, "{} symlink {path}", word(item.kind));
        }
        _ => {
            let _ = writeln!(out, "Binary files differ: {path} ({})", word(item.kind));
        }
    }
}

fn word(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Changed => "changed",
        ChangeKind::Deleted => "deleted",
    }
}
