//! A copy of a path as a `layer` job sees it: the checkout's copy with the
//! layer's upper directory laid over it, as the overlay does (the layer's
//! files and symlinks win, a whiteout removes, an opaque directory hides
//! the checkout's). The scoped engine's children bind such copies of the
//! job's workspace (`runner/docker/scoped/`), so a child of a `layer` job
//! sees what the job wrote, not the checkout below it.

use std::path::Path;

use super::tree::{Kind, Node};

/// Lay `rel` of the layer's `upper` directory over `to`, a copy of the
/// checkout's `rel` (a directory or a file). Nothing there: nothing to do.
pub fn overlay_onto(upper: &Path, rel: &Path, to: &Path) -> std::io::Result<()> {
    let up = Node::open(upper)?;
    let (Some(name), parent) = (rel.file_name(), rel.parent().unwrap_or(Path::new(""))) else {
        // The workspace itself.
        return lay(&up, &Node::open(to)?);
    };
    let Ok(dir) = up.walk(parent) else { return Ok(()) };
    let Some(entry) = dir.stat(name)? else {
        return Ok(());
    };
    let to_parent = Node::open(to.parent().unwrap_or(Path::new("/")))?;
    let to_name = to.file_name().unwrap_or_default();
    match entry.kind {
        Kind::Whiteout => to_parent.remove(to_name),
        Kind::File => to_parent.write_file(to_name, &mut dir.read(name)?, entry.mode),
        Kind::Link => to_parent.symlink(to_name, &dir.link(name)?),
        Kind::Dir => {
            let sub = dir.sub(name)?;
            if sub.opaque() || to_parent.stat(to_name)?.is_some_and(|e| e.kind != Kind::Dir) {
                to_parent.remove(to_name)?;
            }
            lay(&sub, &to_parent.mkdir(to_name, entry.mode)?)
        }
        Kind::Other => Ok(()),
    }
}

/// Lay the upper directory `up` over the copy `to`, entry by entry.
fn lay(up: &Node, to: &Node) -> std::io::Result<()> {
    for e in up.entries()? {
        match e.kind {
            Kind::Whiteout => to.remove(&e.name)?,
            Kind::File => to.write_file(&e.name, &mut up.read(&e.name)?, e.mode)?,
            Kind::Link => to.symlink(&e.name, &up.link(&e.name)?)?,
            Kind::Dir => {
                let sub = up.sub(&e.name)?;
                if sub.opaque() || to.stat(&e.name)?.is_some_and(|t| t.kind != Kind::Dir) {
                    to.remove(&e.name)?;
                }
                lay(&sub, &to.mkdir(&e.name, e.mode)?)?;
            }
            Kind::Other => {}
        }
    }
    Ok(())
}
