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
    /// The workspace as uploaded: a tar whose names start with `upload_top`
    /// (the workspace's path on a remote engine, nothing on a swarm).
    pub upload: Bytes,
    pub upload_top: PathBuf,
    /// The workspace's path in the container.
    pub workspace: PathBuf,
    /// The layer's upper directory and record's directory.
    pub layer_dir: PathBuf,
    pub uploaded_at: chrono::DateTime<chrono::Utc>,
}

/// Read the ended job's workspace back from container `id` into its
/// layer; why it did not come back (logged too: the job's end is not held
/// up, its changes then lost with the container).
pub async fn collect(docker: &super::DockerClient, id: &str, rl: &RemoteLayer) -> Option<String> {
    let path = rl.workspace.to_string_lossy().into_owned();
    let lost = match docker.download_archive(id, &path, MAX_READ_BACK).await {
        Ok(download) => write_back(rl, download).await.err(),
        Err(e) => Some(format!("its workspace could not be read from the engine: {e}")),
    };
    if let Some(why) = &lost {
        tracing::warn!(container = id, %why, "a remote job's changes did not come back into its layer");
    }
    lost
}

/// Write what `download` (the job's workspace after it ended, an archive
/// starting at the workspace's own name) changed from the upload into the
/// layer, off the async workers; why it could not.
pub async fn write_back(
    rl: &RemoteLayer,
    download: impl AsRef<[u8]> + Send + 'static,
) -> Result<usize, String> {
    let rl = rl.clone();
    let done = tokio::task::spawn_blocking(move || {
        let upper = rl.layer_dir.join("upper");
        let n = read_back(
            (&rl.upload, &rl.upload_top),
            download.as_ref(),
            &rl.workspace,
            &upper,
        )?;
        crate::layers::mark_remote(&rl.layer_dir, rl.uploaded_at).map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(n)
    })
    .await;
    match done {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(e)) => Err(format!("they could not be written into the layer: {e}")),
        Err(e) => Err(format!("reading them back failed: {e}")),
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
        // A name with `..` or a root could only come from a forged archive
        // (a swarm job's is written by the job's own task): none of it is
        // taken, so no half of it lands either.
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(std::io::Error::other(format!(
                "the archive names {}, outside the workspace",
                rel.display()
            )));
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
/// from `upload` (before it, its names under `upload.1`); how many paths.
pub fn read_back(
    upload: (&[u8], &Path),
    download: &[u8],
    workspace: &Path,
    upper: &Path,
) -> std::io::Result<usize> {
    // The engine's archive of the workspace starts at its own name.
    let down_top = PathBuf::from(workspace.file_name().unwrap_or_default());
    let before = entries(upload.0, upload.1)?;
    let after = entries(download, &down_top)?;
    // An archive without the workspace itself is not one of it (an empty
    // one would read as every file deleted).
    if !tar_holds(download, &down_top)? {
        return Err(std::io::Error::other(format!(
            "the archive does not hold the workspace ({})",
            down_top.display()
        )));
    }
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

/// Whether `tar` has an entry for the directory `top` itself.
fn tar_holds(tar: &[u8], top: &Path) -> std::io::Result<bool> {
    for e in tar::Archive::new(tar).entries()? {
        let e = e?;
        if e.header().entry_type() == tar::EntryType::Directory && e.path()? == top {
            return Ok(true);
        }
    }
    Ok(false)
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
        let n = read_back((&upload, Path::new("home/u/proj")), &download, ws, &upper).unwrap();
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

    #[test]
    fn an_archive_that_is_empty_or_names_paths_outside_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let upper = tmp.path().join("upper");
        std::fs::create_dir(&upper).unwrap();
        let ws = Path::new("/home/u/proj");
        let upload = tar_of("home/u/proj", &[("a.txt", Some("one"))]);
        // Empty: every file would read as deleted.
        let empty = tar::Builder::new(Vec::new()).into_inner().unwrap();
        // A name that climbs out of the workspace, after good ones.
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        b.append_data(&mut dir, "proj", std::io::empty()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(1);
        b.append_data(&mut h.clone(), "proj/ok", &b"x"[..]).unwrap();
        // (After `ok` in name order: a check while writing would come late.)
        h.as_gnu_mut().unwrap().name[..18].copy_from_slice(b"proj/zz/../../evil");
        h.set_cksum();
        b.append(&h, &b"x"[..]).unwrap();
        let climbing = b.into_inner().unwrap();
        for (what, download) in [("empty", empty), ("climbing", climbing)] {
            assert!(
                read_back((&upload, Path::new("home/u/proj")), &download, ws, &upper).is_err(),
                "{what}"
            );
            assert_eq!(
                std::fs::read_dir(&upper).unwrap().count(),
                0,
                "{what}: written anyway"
            );
        }
    }
}
