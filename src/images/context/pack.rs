//! A walked context written as a tar: for the engine's build endpoint
//! (owned by root, as `docker build` sends it) or as a remote engine job's
//! workspace (under the workspace's path, owned by the job's user). Files
//! are read through the context's directory handle with the inode the walk
//! saw (`beneath.rs`), and exactly the size hashed.

use std::io::{Read, Write};
use std::path::Path;

use super::{Context, ContextFile, Kind, OUTSIDE_DOCKERFILE};

impl Context {
    /// Write the context as a tar (owned by root, as `docker build` sends it).
    pub fn write_tar<W: Write>(&self, out: W) -> std::io::Result<()> {
        let mut tar = tar::Builder::new(out);
        self.append_entries(&mut tar, "", (0, 0))?;
        if self.dockerfile_in_tar == OUTSIDE_DOCKERFILE {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(self.dockerfile_text.len() as u64);
            tar.append_data(&mut h, OUTSIDE_DOCKERFILE, self.dockerfile_text.as_slice())?;
        }
        tar.into_inner()?.flush()
    }

    /// Write the files as a tar under `prefix` (e.g. the workspace's path
    /// without its leading `/`), owned by `owner` (uid, gid): the upload of
    /// a remote engine's job, whose files must be the job user's.
    pub fn write_tar_under<W: Write>(&self, out: W, prefix: &str, owner: (u64, u64)) -> std::io::Result<()> {
        let mut tar = tar::Builder::new(out);
        if !prefix.is_empty() {
            // The workspace itself (and its parents, made by the engine as root).
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_uid(owner.0);
            h.set_gid(owner.1);
            h.set_size(0);
            tar.append_data(&mut h, prefix, std::io::empty())?;
        }
        self.append_entries(&mut tar, prefix, owner)?;
        tar.into_inner()?.flush()
    }

    fn append_entries<W: Write>(
        &self,
        tar: &mut tar::Builder<W>,
        prefix: &str,
        owner: (u64, u64),
    ) -> std::io::Result<()> {
        tar.follow_symlinks(false);
        let header = |e: &ContextFile, kind: tar::EntryType, size: u64| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(e.mode);
            h.set_mtime(e.mtime);
            h.set_uid(owner.0);
            h.set_gid(owner.1);
            h.set_size(size);
            h
        };
        for e in &self.entries {
            match &e.kind {
                Kind::Dir => {
                    let mut h = header(e, tar::EntryType::Directory, 0);
                    tar.append_data(&mut h, under(prefix, &e.rel), std::io::empty())?;
                }
                Kind::Link { target } => {
                    let mut h = header(e, tar::EntryType::Symlink, 0);
                    tar.append_link(&mut h, under(prefix, &e.rel), target)?;
                }
                Kind::File { size, ident, .. } => {
                    // Swapped, removed or replaced since the walk: berth's words, not an errno.
                    let changed = || super::super::beneath::changed(&self.dir.join(&e.rel));
                    let f = self
                        .root
                        .file(Path::new(&e.rel), Some(*ident))
                        .map_err(|_| changed())?;
                    // Exactly the size hashed: a file that grew meanwhile is
                    // cut, one that shrank is refused (its tar entry would be short).
                    let mut h = header(e, tar::EntryType::Regular, *size);
                    let exact = Exact {
                        inner: f.take(*size),
                        left: *size,
                        changed: &changed,
                    };
                    tar.append_data(&mut h, under(prefix, &e.rel), exact)?;
                }
            }
        }
        Ok(())
    }
}

/// A file read for exactly the size the walk saw: ending early is an error.
struct Exact<'a, R> {
    inner: R,
    left: u64,
    changed: &'a dyn Fn() -> std::io::Error,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err((self.changed)());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// `rel` under `prefix` in a tar.
fn under(prefix: &str, rel: &str) -> String {
    match prefix {
        "" => rel.to_string(),
        p => format!("{p}/{rel}"),
    }
}
