//! A `layer` job on a remote engine: its workspace is the uploaded copy
//! (`remote.rs`), and what it changed there comes back into its layer once
//! it ended, before its container is removed: the engine's archive of the
//! workspace is compared with the upload, and every difference is written
//! into the layer's upper directory as the overlay would have written it
//! (files and symlinks, directories, a 0/0 whiteout for what went). `berth
//! diff` and `berth apply` then work as for a local layer, after the job.
//!
//! The layer records the upload's time as the time of its copy
//! (`Meta::lower_at`): a checkout file changed after it is a conflict.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::layers::tree::{Kind, Node};

/// Most bytes of a workspace read back (the archive is held in memory).
pub const MAX_READ_BACK: u64 = 1 << 30;

/// What a remote layer job needs to read its changes back.
#[derive(Debug, Clone)]
pub struct RemoteLayer {
    /// The workspace as uploaded (a tar under the workspace's path).
    pub upload: Bytes,
    /// The workspace's path in the container.
    pub workspace: PathBuf,
    /// The layer's upper directory and record's directory.
    pub layer_dir: PathBuf,
    pub uploaded_at: chrono::DateTime<chrono::Utc>,
}

/// Read the ended job's workspace back from container `id` into its
/// layer; a failure is logged and said on nothing else (the job's end is
/// not held up), its changes then lost with the container.
pub async fn collect(docker: &super::DockerClient, id: &str, rl: &RemoteLayer) {
    let path = rl.workspace.to_string_lossy().into_owned();
    let download = match docker.download_archive(id, &path, MAX_READ_BACK).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(container = id, error = %e, "could not read a remote job's workspace back into its layer");
            return;
        }
    };
    let rl = rl.clone();
    let done = tokio::task::spawn_blocking(move || {
        let n = read_back(&rl.upload, &download, &rl.workspace, &rl.layer_dir.join("upper"))?;
        crate::layers::mark_remote(&rl.layer_dir, rl.uploaded_at).map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(n)
    })
    .await;
    match done {
        Ok(Ok(n)) => tracing::debug!(
            container = id,
            paths = n,
            "a remote job's changes read back into its layer"
        ),
        Ok(Err(e)) => {
            tracing::warn!(container = id, error = %e, "could not write a remote job's changes into its layer")
        }
        Err(e) => tracing::warn!(container = id, error = %e, "reading a remote job's changes back failed"),
    }
}

/// One entry of a tar, by its path below the workspace.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Dir { mode: u32 },
    File { mode: u32, bytes: Vec<u8> },
    Link { target: PathBuf },
}

/// The entries of `tar` below `top` (the prefix every name starts with).
fn entries(tar: &[u8], top: &Path) -> std::io::Result<BTreeMap<PathBuf, Entry>> {
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(tar);
    for e in archive.entries()? {
        let mut e = e?;
        let path = e.path()?.into_owned();
        let Ok(rel) = path.strip_prefix(top) else { continue };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let mode = e.header().mode().unwrap_or(0o644) & 0o7777;
        let entry = match e.header().entry_type() {
            tar::EntryType::Directory => Entry::Dir { mode },
            tar::EntryType::Symlink => Entry::Link {
                target: e.link_name()?.map(|t| t.into_owned()).unwrap_or_default(),
            },
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut bytes = Vec::new();
                e.read_to_end(&mut bytes)?;
                Entry::File { mode, bytes }
            }
            // Devices, fifos, hard links: nothing a layer applies.
            _ => continue,
        };
        out.insert(rel.to_path_buf(), entry);
    }
    Ok(out)
}

/// Write into `upper` what `download` (the workspace after the job) changed
/// from `upload` (before it); how many paths.
pub fn read_back(upload: &[u8], download: &[u8], workspace: &Path, upper: &Path) -> std::io::Result<usize> {
    // The upload carries the workspace's whole path; the engine's archive
    // of it starts at the workspace's own name.
    let up_top: PathBuf = workspace.strip_prefix("/").unwrap_or(workspace).to_path_buf();
    let down_top = PathBuf::from(workspace.file_name().unwrap_or_default());
    let before = entries(upload, &up_top)?;
    let after = entries(download, &down_top)?;
    let root = Node::open(upper)?;
    let mut n = 0;
    for (rel, entry) in &after {
        if before.get(rel) == Some(entry) {
            continue;
        }
        let dir = parents(&root, rel, &after)?;
        let name = rel.file_name().unwrap_or_default();
        match entry {
            Entry::Dir { mode } => {
                dir.mkdir(name, *mode)?;
            }
            Entry::File { mode, bytes } => dir.write_file(name, &mut bytes.as_slice(), *mode)?,
            Entry::Link { target } => dir.symlink(name, target.as_os_str())?,
        }
        n += 1;
    }
    // What went: a whiteout for the topmost missing path only.
    for rel in before.keys() {
        let gone = !after.contains_key(rel);
        let parent_gone = rel
            .parent()
            .is_some_and(|p| !p.as_os_str().is_empty() && !after.contains_key(p));
        if gone && !parent_gone {
            let dir = parents(&root, rel, &after)?;
            dir.whiteout(rel.file_name().unwrap_or(OsStr::new("")))?;
            n += 1;
        }
    }
    Ok(n)
}

/// The upper directory of `rel`'s parent, made with the modes the job's
/// workspace has.
fn parents(root: &Node, rel: &Path, after: &BTreeMap<PathBuf, Entry>) -> std::io::Result<Node> {
    let mut at = root.walk(Path::new(""))?;
    let mut so_far = PathBuf::new();
    for name in crate::layers::tree::elements(rel.parent().unwrap_or(Path::new("")))? {
        so_far.push(name);
        let mode = match after.get(&so_far) {
            Some(Entry::Dir { mode }) => *mode,
            _ => 0o755,
        };
        at = match at.stat(name)? {
            Some(e) if e.kind == Kind::Dir => at.sub(name)?,
            _ => at.mkdir(name, mode)?,
        };
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(top: &str, files: &[(&str, Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        b.append_data(&mut dir.clone(), top, std::io::empty()).unwrap();
        for (path, text) in files {
            match text {
                Some(t) => {
                    let mut h = tar::Header::new_gnu();
                    h.set_mode(0o644);
                    h.set_size(t.len() as u64);
                    b.append_data(&mut h, format!("{top}/{path}"), t.as_bytes())
                        .unwrap();
                }
                None => b
                    .append_data(&mut dir.clone(), format!("{top}/{path}"), std::io::empty())
                    .unwrap(),
            }
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn what_the_remote_job_changed_lands_in_the_upper_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let upper = tmp.path().join("upper");
        std::fs::create_dir(&upper).unwrap();
        let ws = Path::new("/home/u/proj");
        let upload = tar_of(
            "home/u/proj",
            &[
                ("a.txt", Some("one")),
                ("old", None),
                ("old/x", Some("x")),
                ("same", Some("s")),
            ],
        );
        let download = tar_of(
            "proj",
            &[
                ("a.txt", Some("two")),
                ("same", Some("s")),
                ("out", None),
                ("out/report.xml", Some("<ok/>")),
            ],
        );
        let n = read_back(&upload, &download, ws, &upper).unwrap();
        assert_eq!(n, 4, "a.txt, out, out/report.xml, the whiteout of old");
        assert_eq!(std::fs::read_to_string(upper.join("a.txt")).unwrap(), "two");
        assert_eq!(
            std::fs::read_to_string(upper.join("out/report.xml")).unwrap(),
            "<ok/>"
        );
        assert!(!upper.join("same").exists());
        let old = Node::open(&upper)
            .unwrap()
            .stat(OsStr::new("old"))
            .unwrap()
            .unwrap();
        assert_eq!(old.kind, Kind::Whiteout);
    }
}
