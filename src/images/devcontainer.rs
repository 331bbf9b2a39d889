//! The `.devcontainer/devcontainer.json` convention: when berth.toml names no
//! image, the image a project's dev container uses is the one its jobs run in:
//! its `image`, or the one its `build.dockerfile` (+ `build.context`,
//! `build.args`) builds. The file is JSON with comments and trailing commas
//! (JSONC), read with `json5`, which accepts both. Paths in `build` are
//! relative to the file's directory, the context defaulting to it.
//!
//! The file belongs to the project, which may be hostile: it is read only
//! when it is a regular file of at most [`MAX_DEVCONTAINER_BYTES`] (a 500 MB
//! one, sparse or not, is refused from its size without being read, and
//! the read itself stops there), and never waits on a FIFO.
//!
//! Only the image is taken. The keys that would change how a job runs
//! (`containerEnv`, `forwardPorts`, `postCreateCommand`, `remoteUser`,
//! `runArgs`, `privileged`, …) are not applied, and never silently:
//! [`ignored_note`] names those the file sets, in one line given with the
//! project's jobs. None of them may loosen the sandbox (a `remoteUser` of
//! root, `privileged`, `capAdd`): the file belongs to the project, and the
//! job's user, limits and network stay berth's.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::ProjectBuild;
use crate::trust::Trusted;

#[derive(Deserialize)]
struct DevContainer {
    image: Option<String>,
    build: Option<Build>,
}

#[derive(Deserialize)]
struct Build {
    dockerfile: Option<String>,
    context: Option<String>,
    #[serde(default)]
    args: BTreeMap<String, String>,
}

/// Keys of devcontainer.json that berth does not apply, in the order said.
const NOT_APPLIED: [&str; 21] = [
    "containerEnv",
    "remoteEnv",
    "forwardPorts",
    "appPort",
    "initializeCommand",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "remoteUser",
    "containerUser",
    "runArgs",
    "mounts",
    "workspaceMount",
    "workspaceFolder",
    "overrideCommand",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
];

/// One line naming the keys of the workspace's devcontainer.json that berth
/// does not apply, and what to use instead; None when it sets none of them
/// (or there is no file berth reads).
pub fn ignored_note(workspace: &Path) -> Option<String> {
    let (path, text) = [".devcontainer/devcontainer.json", ".devcontainer.json"]
        .iter()
        .map(|f| workspace.join(f))
        .find_map(|p| read_bounded(&p).ok().flatten().map(|t| (p, t)))?;
    let value: serde_json::Value = json5::from_str(&text).ok()?;
    let set: Vec<&str> = NOT_APPLIED
        .iter()
        .copied()
        .filter(|k| value.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "{} sets {}, which berth does not apply (it takes only image/build): pass variables with \
         --env, ports with -p, run setup commands as jobs; the job's user and sandbox stay berth's",
        path.display(),
        set.join(", ")
    ))
}

/// Largest devcontainer.json berth reads (real ones are a few KiB).
pub const MAX_DEVCONTAINER_BYTES: u64 = 1 << 20;

/// What a devcontainer.json asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum DevImage {
    Image(String),
    /// A build, and whether the user trusts the file that asks for it (a
    /// build runs the project's `RUN` steps: only from a trusted file).
    Build {
        build: ProjectBuild,
        trusted: bool,
    },
    /// The file was not read, and why (too large, not a regular file).
    Refused(String),
}

/// The file's text: `Ok(None)` when there is none, `Err(why)` when it is
/// not read (not a regular file, or over [`MAX_DEVCONTAINER_BYTES`]).
fn read_bounded(path: &Path) -> Result<Option<String>, String> {
    // Non-blocking: a FIFO planted at the path must not hold the manager.
    // Not through a symlink: trust is keyed by where berth read the file,
    // and a link would lend another project's trusted file to this one.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW).bits())
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) if crate::trust::symlinked(path).is_some() => {
            return Err("it is a symlink; berth reads project files only where they are (replace it with a regular file)".into());
        }
        Err(e) => return Err(format!("cannot be opened ({e})")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be inspected ({e})"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let too_big = |size: u64| {
        format!(
            "it is {size} bytes, over the {MAX_DEVCONTAINER_BYTES} berth reads; name the image in berth.toml instead"
        )
    };
    if meta.len() > MAX_DEVCONTAINER_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut text = String::new();
    let read = file
        .take(MAX_DEVCONTAINER_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot be read ({e})"))?;
    if read as u64 > MAX_DEVCONTAINER_BYTES {
        // It grew between the look and the read.
        return Err(too_big(read as u64));
    }
    Ok(Some(text))
}

/// The image (or build) of the workspace's devcontainer.json and the file's
/// path; `None` when there is no file, it does not parse, or it names
/// neither; [`DevImage::Refused`] when it is not read (see the module doc).
pub fn read_devcontainer(workspace: &Path, trust: &Trusted) -> Option<(DevImage, PathBuf)> {
    let candidates = [
        workspace.join(".devcontainer/devcontainer.json"),
        workspace.join(".devcontainer.json"),
    ];
    for path in candidates {
        let text = match read_bounded(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(why) => {
                tracing::warn!(path = %path.display(), %why, "devcontainer.json not read");
                return Some((DevImage::Refused(why), path));
            }
        };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let trusted = trust.allows(&real, text.as_bytes());
        let dc = match json5::from_str::<DevContainer>(&text) {
            Ok(dc) => dc,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "devcontainer.json does not parse; ignored");
                return None;
            }
        };
        if let Some(image) = dc.image.filter(|i| !i.trim().is_empty()) {
            return Some((DevImage::Image(image.trim().to_string()), path));
        }
        let build = dc.build?;
        let dockerfile = build.dockerfile.filter(|d| !d.trim().is_empty())?;
        let base = path.parent().unwrap_or(workspace);
        let project = ProjectBuild {
            dockerfile: base.join(dockerfile.trim()),
            context: base.join(build.context.as_deref().unwrap_or(".")),
            args: build.args,
            declared_in: path.clone(),
        };
        return Some((
            DevImage::Build {
                build: project,
                trusted,
            },
            real,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_not_applied_are_named_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ignored_note(dir.path()), None);
        std::fs::create_dir(dir.path().join(".devcontainer")).unwrap();
        let file = dir.path().join(".devcontainer/devcontainer.json");
        std::fs::write(&file, "{ // JSONC\n \"image\": \"python:3\", }\n").unwrap();
        assert_eq!(ignored_note(dir.path()), None, "the image alone is applied");
        std::fs::write(
            &file,
            r#"{"image": "python:3", "containerEnv": {"A": "1"}, "forwardPorts": [8000],
               "postCreateCommand": "pip install -r requirements.txt", "remoteUser": "root", "privileged": true}"#,
        )
        .unwrap();
        let note = ignored_note(dir.path()).unwrap();
        assert!(
            note.contains("sets containerEnv, forwardPorts, postCreateCommand, remoteUser, privileged,"),
            "{note}"
        );
        assert!(!note.contains('\n'), "one line: {note}");
        // Every key berth ignores is named when set.
        let all: Vec<String> = NOT_APPLIED.iter().map(|k| format!("\"{k}\": 1")).collect();
        std::fs::write(&file, format!("{{\"image\": \"python:3\", {}}}", all.join(", "))).unwrap();
        let note = ignored_note(dir.path()).unwrap();
        for key in [
            "initializeCommand",
            "onCreateCommand",
            "updateContentCommand",
            "postAttachCommand",
            "securityOpt",
            "workspaceMount",
            "workspaceFolder",
            "overrideCommand",
            "init",
        ] {
            assert!(
                note.contains(&format!(" {key},")) || note.contains(&format!(" {key} ")),
                "{key}: {note}"
            );
        }
    }
}
