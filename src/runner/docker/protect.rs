//! Project files a container job sees but cannot change: `berth.toml`,
//! `.devcontainer.json`, `.devcontainer/` and `.berth/` at the workspace
//! root, and the project's config file wherever it sits in the workspace.
//!
//! A job that rewrites them could ask for more sandbox next time; the trust
//! check (`crate::trust`) already refuses what an untrusted file loosens,
//! and these read-only mounts keep a job from touching the user's trusted
//! files at all. Each is mounted as a *copy* made in the job's private
//! directory, read through `openat`/`O_NOFOLLOW` (`images::beneath`): a bind
//! of the original path would let a job swap it for a symlink just before
//! the create and have the engine mount whatever it points to. Only files
//! and directories that exist are covered (a mount over a missing path would
//! make the engine create it in the user's project), and a directory bigger
//! than [`MAX_FILES`] / [`MAX_BYTES`] is left as it is, with a warning.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bollard::models::{Mount, MountType};

use crate::images::beneath::{Dir, Kind};
use crate::store::private;

pub use crate::model::PROTECTED_FILES as PROTECTED;
/// Most entries copied from one protected directory.
pub const MAX_FILES: usize = 256;
/// Most bytes copied from one protected directory.
pub const MAX_BYTES: u64 = 4 << 20;

/// Read-only mounts over the protected project files under `workspace`
/// (plus `extra`, e.g. the project's config file elsewhere in it), their
/// copies made under `into`. Warnings say what could not be protected.
pub fn mounts(workspace: &Path, extra: &[&Path], into: &Path) -> (Vec<Mount>, Vec<String>) {
    let (mut mounts, mut warnings) = (Vec::new(), Vec::new());
    let Ok(root) = Dir::open_root(workspace) else {
        return (mounts, warnings);
    };
    let mut rels: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
    for e in extra {
        if let Ok(rel) = e.strip_prefix(workspace)
            && !rels.iter().any(|r| r == rel)
        {
            rels.push(rel.to_path_buf());
        }
    }
    for (n, rel) in rels.iter().enumerate() {
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p, n.to_string_lossy().into_owned()),
            _ => continue,
        };
        let Ok(dir) = root.dir(parent) else { continue };
        let Some(item) = dir
            .items()
            .ok()
            .and_then(|i| i.into_iter().find(|i| i.name == name))
        else {
            continue;
        };
        let copy = into.join(format!("{n}"));
        let made = match item.kind {
            Kind::File => copy_file(&dir, &name, item.ident, &copy),
            Kind::Dir => match dir.subdir(&name, item.ident) {
                Ok(sub) => copy_dir(&sub, &copy, &mut Budget::default()),
                Err(e) => Err(e.to_string()),
            },
            _ => continue,
        };
        match made {
            Ok(()) => mounts.push(Mount {
                target: Some(workspace.join(rel).to_string_lossy().into_owned()),
                source: Some(copy.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            }),
            Err(why) => warnings.push(format!(
                "{} is not protected from the job: {why}",
                workspace.join(rel).display()
            )),
        }
    }
    (mounts, warnings)
}

/// Copy `rel` (a file or directory under the workspace `root`, reached
/// without following a symlink) to `to`, as [`mounts`] copies protected
/// files: the scoped engine's children get workspace binds this way
/// (`scoped/check.rs`), so a path swapped for a symlink after the check is
/// never what the engine mounts.
pub(crate) fn copy_beneath(root: &Path, rel: &Path, to: &Path) -> Result<(), String> {
    let root = Dir::open_root(root).map_err(|e| e.to_string())?;
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => (p, n.to_string_lossy().into_owned()),
        // The workspace itself.
        _ => return copy_dir(&root, to, &mut Budget::default()),
    };
    let dir = root.dir(parent).map_err(|e| e.to_string())?;
    let item = dir
        .items()
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| "no such file or directory".to_string())?;
    match item.kind {
        Kind::File => copy_file(&dir, &name, item.ident, to),
        Kind::Dir => {
            let sub = dir.subdir(&name, item.ident).map_err(|e| e.to_string())?;
            copy_dir(&sub, to, &mut Budget::default())
        }
        Kind::Link => Err("a symlink (bind its target instead)".into()),
        Kind::Other => Err("not a file or directory (sockets, fifos and devices are never bound)".into()),
    }
}

#[derive(Default)]
struct Budget {
    files: usize,
    bytes: u64,
}

fn copy_file(dir: &Dir, name: &str, ident: crate::images::beneath::Ident, to: &Path) -> Result<(), String> {
    let mut bytes = Vec::new();
    dir.file(Path::new(name), Some(ident))
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("larger than {} MiB", MAX_BYTES >> 20));
    }
    private::write(to, &bytes).map_err(|e| e.to_string())?;
    // Readable by whichever uid the job runs as; the directory it lies in
    // stays private on the host.
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o444)).map_err(|e| e.to_string())
}

fn copy_dir(dir: &Dir, to: &Path, budget: &mut Budget) -> Result<(), String> {
    private::create_dir(to).map_err(|e| e.to_string())?;
    for item in dir.items().map_err(|e| e.to_string())? {
        budget.files += 1;
        budget.bytes += item.size;
        if budget.files > MAX_FILES || budget.bytes > MAX_BYTES {
            return Err(format!("more than {MAX_FILES} files or {} MiB", MAX_BYTES >> 20));
        }
        let dest = to.join(&item.name);
        match item.kind {
            Kind::File => copy_file(dir, &item.name, item.ident, &dest)?,
            Kind::Dir => {
                let sub = dir.subdir(&item.name, item.ident).map_err(|e| e.to_string())?;
                copy_dir(&sub, &dest, budget)?;
            }
            Kind::Link => {
                let target = dir.link_target(&item.name).map_err(|e| e.to_string())?;
                std::os::unix::fs::symlink(target, &dest).map_err(|e| e.to_string())?;
            }
            Kind::Other => {}
        }
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_project_files_are_copied_and_mounted_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".devcontainer/sub")).unwrap();
        std::fs::write(ws.join("berth.toml"), "image = \"x\"\n").unwrap();
        std::fs::write(ws.join(".devcontainer/devcontainer.json"), "{}").unwrap();
        std::fs::write(ws.join(".devcontainer/sub/Dockerfile"), "FROM x\n").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", ws.join(".berth")).unwrap();
        let into = dir.path().join("job/protected");
        private::create_dir(&into).unwrap();
        let (mounts, warnings) = mounts(&ws, &[], &into);
        assert!(warnings.is_empty(), "{warnings:?}");
        let targets: Vec<String> = mounts.iter().map(|m| m.target.clone().unwrap()).collect();
        // .berth is a symlink: neither followed nor mounted.
        assert_eq!(
            targets,
            [ws.join("berth.toml"), ws.join(".devcontainer")].map(|p| p.display().to_string())
        );
        assert!(mounts.iter().all(|m| m.read_only == Some(true)));
        let src = PathBuf::from(mounts[1].source.clone().unwrap());
        assert_eq!(
            std::fs::read_to_string(src.join("sub/Dockerfile")).unwrap(),
            "FROM x\n"
        );
        assert_eq!(
            std::fs::read_to_string(PathBuf::from(mounts[0].source.clone().unwrap())).unwrap(),
            "image = \"x\"\n"
        );
    }
}
