//! `berth cp JOB:PATH DEST`: files out of a running container job (the
//! only way home for what a job on a remote engine writes). The engine's
//! tar is unpacked the way `docker cp` does: into DEST when it is an
//! existing directory, else as DEST itself. Entries never land outside
//! DEST (the tar crate refuses `..` and absolute names), and set-uid,
//! set-gid and sticky bits are dropped: the files are the job's.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use clap::Args;

use super::Global;
use super::jobs::client;
use super::out::outln;
use crate::model::JobId;

#[derive(Debug, Args)]
pub struct CpArgs {
    /// JOB:PATH in the job's container (a relative PATH is from its workspace).
    #[arg(add = super::complete::job_paths())]
    pub source: String,
    /// An existing directory (the file or directory goes inside it), or a new name.
    pub dest: PathBuf,
    /// Print JSON (what was copied) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn cp(global: &Global, a: CpArgs) -> anyhow::Result<i32> {
    let Some((job, path)) = a
        .source
        .split_once(':')
        .filter(|(j, p)| !j.is_empty() && !p.is_empty())
    else {
        anyhow::bail!(
            "`{}` names no file of a job: give JOB:PATH, e.g. `berth cp job-3:report.xml .`",
            a.source
        );
    };
    let archive = client(global).await?.copy_out(&JobId::from(job), path).await?;
    let tar = base64::engine::general_purpose::STANDARD
        .decode(archive.tar.as_bytes())
        .context("the manager's archive was not base64")?;
    let dest = a.dest.clone();
    let (written, links) = tokio::task::spawn_blocking(move || unpack(&tar, &dest)).await??;
    if a.json {
        let v = serde_json::json!({"job": archive.job, "path": archive.path, "bytes": archive.bytes, "dest": a.dest, "entries": written, "links_left_out": links});
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!(
            "{}:{} → {} ({written} entries, {} bytes)",
            archive.job,
            archive.path,
            a.dest.display(),
            archive.bytes
        );
        if links > 0 {
            eprintln!(
                "berth: {links} link(s) in the archive were not copied (berth cp copies files and directories, never links)"
            );
        }
    }
    Ok(0)
}

/// Unpack `tar` as `docker cp` does, links left out; returns how many
/// entries were written and how many links were not.
/// The archive is unpacked into a private directory beside its place first
/// and moved in by rename, so a refused or broken archive leaves nothing.
fn unpack(tar: &[u8], dest: &Path) -> anyhow::Result<(usize, usize)> {
    let into_dir = dest.is_dir();
    let parent = match into_dir {
        true => dest.to_path_buf(),
        false => match dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(p) => p.to_path_buf(),
            None => PathBuf::from("."),
        },
    };
    anyhow::ensure!(parent.is_dir(), "`{}` is not a directory", parent.display());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let staging = parent.join(format!(".berth-cp-{}-{stamp}", std::process::id()));
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let result = unpack_staged(tar, &staging, dest, into_dir);
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn unpack_staged(tar: &[u8], staging: &Path, dest: &Path, into_dir: bool) -> anyhow::Result<(usize, usize)> {
    let mut archive = tar::Archive::new(tar);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    let (mut n, mut links) = (0, 0);
    for entry in archive.entries().context("reading the archive")? {
        let mut entry = entry.context("reading the archive")?;
        // Links are never made: one left in DEST (`-> /`) would carry a
        // later copy outside it. The copy says how many it left out.
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            links += 1;
            continue;
        }
        // Refuses `..` and absolute names, and writes through no symlink.
        let written = entry.unpack_in(staging).context("unpacking the archive")?;
        anyhow::ensure!(written, "the archive names a path outside its directory");
        n += 1;
    }
    let tops: Vec<_> = std::fs::read_dir(staging)?.collect::<Result<_, _>>()?;
    anyhow::ensure!(
        !tops.is_empty(),
        "the archive held no file or directory (links are not copied)"
    );
    for top in &tops {
        let to = match into_dir {
            true => dest.join(top.file_name()),
            false if tops.len() == 1 => dest.to_path_buf(),
            false => anyhow::bail!(
                "the archive has {} top entries: copy into a directory",
                tops.len()
            ),
        };
        anyhow::ensure!(
            std::fs::symlink_metadata(&to).is_err(),
            "`{}` exists: remove it or copy elsewhere",
            to.display()
        );
        std::fs::rename(top.path(), &to).with_context(|| format!("moving into {}", to.display()))?;
    }
    Ok((n, links))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tar_of(entries: &[(&str, u32, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, mode, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(*mode);
            // `set_path` refuses `..`; a hostile archive is written raw.
            let raw = &mut h.as_old_mut().name;
            raw[..name.len()].copy_from_slice(name.as_bytes());
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn set_uid_bits_are_dropped_and_nothing_lands_outside() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        std::fs::create_dir(&dest).unwrap();
        let (n, _) = unpack(&tar_of(&[("tool", 0o4755, b"#!/bin/sh\n")]), &dest).unwrap();
        assert_eq!(n, 1);
        let mode = std::fs::metadata(dest.join("tool")).unwrap().permissions().mode();
        assert_eq!(mode & 0o7000, 0, "{mode:o}");
        // As a new name: the single top entry becomes DEST.
        unpack(
            &tar_of(&[("r.xml", 0o644, b"<ok/>")]),
            &dir.path().join("report.xml"),
        )
        .unwrap();
        assert_eq!(std::fs::read(dir.path().join("report.xml")).unwrap(), b"<ok/>");
        // `..` is refused and leaves nothing, not even the staging directory.
        let err = unpack(&tar_of(&[("../escaped", 0o644, b"x")]), &dest).unwrap_err();
        assert!(!dir.path().join("escaped").exists(), "{err}");
        let left: Vec<_> = std::fs::read_dir(&dest)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["tool"], "{err}");
        // An existing file is never overwritten.
        let err = unpack(&tar_of(&[("tool", 0o644, b"new")]), &dest).unwrap_err();
        assert!(err.to_string().contains("exists"), "{err}");
        assert_eq!(std::fs::read(dest.join("tool")).unwrap(), b"#!/bin/sh\n");
    }

    #[test]
    fn links_in_the_archive_are_never_made() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        std::fs::create_dir(&dest).unwrap();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, "d/root", "/").unwrap();
        let mut f = tar::Header::new_gnu();
        f.set_size(2);
        f.set_mode(0o644);
        f.set_cksum();
        b.append_data(&mut f, "d/file", &b"ok"[..]).unwrap();
        let (n, links) = unpack(&b.into_inner().unwrap(), &dest).unwrap();
        assert_eq!((n, links), (1, 1));
        assert!(std::fs::symlink_metadata(dest.join("d/root")).is_err());
        assert_eq!(std::fs::read(dest.join("d/file")).unwrap(), b"ok");
    }
}
