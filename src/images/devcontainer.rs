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
//! The image is taken from any file (a build only from a trusted one).
//! From a file the user trusts, `containerEnv`, `forwardPorts`,
//! `remoteUser` and `postCreateCommand` apply to the project's container
//! jobs too (`settings.rs`). The other keys that would change how a job
//! runs (`postStartCommand`, `runArgs`, `privileged`, …), and those four
//! from a file not trusted,
//! are not applied, and never silently: [`read_settings`] names those the
//! file sets, in one line given with the project's jobs. Nothing here
//! loosens the sandbox but a trusted `remoteUser` (root, or another uid):
//! the job's limits, filter and network stay berth's.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::ProjectBuild;
use crate::trust::Trusted;

mod settings;
pub use settings::DevSettings;

/// Where a workspace's dev container file is looked for, in order.
const CANDIDATES: [&str; 2] = [".devcontainer/devcontainer.json", ".devcontainer.json"];

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

/// The workspace's devcontainer.json keys for its jobs: the settings they
/// get when the user trusts the file (None otherwise, or when it sets none
/// of them), and one line naming what it sets that berth does not apply
/// (None when nothing; no file, or one berth does not read: neither).
pub fn read_settings(workspace: &Path, trust: &Trusted) -> (Option<DevSettings>, Option<String>) {
    for path in CANDIDATES.map(|f| workspace.join(f)) {
        let text = match read_bounded(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            // Said on the image choice; its keys are not read either.
            Err(_) => return (None, None),
        };
        let Ok(value) = json5::from_str::<serde_json::Value>(&text) else {
            return (None, None);
        };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let applied = trust
            .allows(&real, text.as_bytes())
            .then(|| DevSettings::parse(real, &value));
        let note = note(&path, &value, applied.as_ref());
        return (applied.filter(|s| !s.is_empty()), note);
    }
    (None, None)
}

/// What `berth trust` says trusting the devcontainer file at `path` allows.
pub fn trust_allows(path: &Path) -> Vec<String> {
    let value = read_bounded(path)
        .ok()
        .flatten()
        .and_then(|t| json5::from_str::<serde_json::Value>(&t).ok());
    let Some(value) = value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if value.pointer("/build/dockerfile").is_some() {
        out.push("build.dockerfile (a dev container image build)".to_string());
    }
    out.extend(DevSettings::parse(path.to_path_buf(), &value).allows());
    out
}

/// The line naming the keys of the file at `path` (parsed: `value`) that
/// berth does not apply, given the settings it does apply (`applied`:
/// the file is trusted), and the values of those it left out.
fn note(path: &Path, value: &serde_json::Value, applied: Option<&DevSettings>) -> Option<String> {
    let set: Vec<&str> = NOT_APPLIED
        .iter()
        .copied()
        .filter(|k| applied.is_none() || !settings::APPLIED.contains(k))
        .filter(|k| value.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let mut parts = Vec::new();
    if !set.is_empty() {
        let (takes, stays) = match applied {
            Some(_) => (
                "image/build, containerEnv, forwardPorts, remoteUser, postCreateCommand",
                "the sandbox stays berth's",
            ),
            None => ("only image/build", "the job's user and sandbox stay berth's"),
        };
        parts.push(format!(
            "{} sets {}, which berth does not apply (it takes {takes}): pass variables with \
             --env, ports with -p, run setup commands as jobs; {stays}",
            path.display(),
            set.join(", ")
        ));
        if applied.is_none() && set.iter().any(|k| settings::APPLIED.contains(k)) {
            parts.push(
                "trust the file (`berth trust`) to apply its containerEnv, forwardPorts, remoteUser, postCreateCommand".into(),
            );
        }
    }
    if let Some(s) = applied.filter(|s| !s.skipped.is_empty()) {
        parts.push(format!(
            "{} values left out: {}",
            path.display(),
            s.skipped.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
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
    for path in CANDIDATES.map(|f| workspace.join(f)) {
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
        assert_eq!(read_settings(dir.path(), &Trusted::default()).1, None);
        std::fs::create_dir(dir.path().join(".devcontainer")).unwrap();
        let file = dir.path().join(".devcontainer/devcontainer.json");
        std::fs::write(&file, "{ // JSONC\n \"image\": \"python:3\", }\n").unwrap();
        assert_eq!(
            read_settings(dir.path(), &Trusted::default()).1,
            None,
            "the image alone is applied"
        );
        std::fs::write(
            &file,
            r#"{"image": "python:3", "containerEnv": {"A": "1"}, "forwardPorts": [8000],
               "postCreateCommand": "pip install -r requirements.txt", "remoteUser": "root", "privileged": true}"#,
        )
        .unwrap();
        let note = read_settings(dir.path(), &Trusted::default()).1.unwrap();
        assert!(
            note.contains("sets containerEnv, forwardPorts, postCreateCommand, remoteUser, privileged,"),
            "{note}"
        );
        assert!(!note.contains('\n'), "one line: {note}");
        // Every key berth ignores is named when set.
        let all: Vec<String> = NOT_APPLIED.iter().map(|k| format!("\"{k}\": 1")).collect();
        std::fs::write(&file, format!("{{\"image\": \"python:3\", {}}}", all.join(", "))).unwrap();
        let note = read_settings(dir.path(), &Trusted::default()).1.unwrap();
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

    #[test]
    fn a_trusted_files_keys_apply_and_an_untrusted_ones_are_only_said() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".devcontainer.json");
        let text = r#"{"image": "python:3", "containerEnv": {"A": "1"}, "forwardPorts": [8000],
                       "remoteUser": "root", "postCreateCommand": "make", "capAdd": ["SYS_ADMIN"]}"#;
        std::fs::write(&file, text).unwrap();
        let (applied, note) = read_settings(dir.path(), &Trusted::default());
        assert_eq!(applied, None, "not trusted: nothing applies");
        let note = note.unwrap();
        assert!(
            note.contains("sets containerEnv, forwardPorts, postCreateCommand, remoteUser, capAdd, which berth does not apply")
                && note.contains("berth trust"),
            "{note}"
        );
        let trust = |bytes: &[u8]| {
            let real = file.canonicalize().unwrap();
            let entry = format!(
                "[trust]\n{:?} = \"{}\"\n",
                real.display().to_string(),
                crate::trust::digest(bytes)
            );
            let mut table: toml::Table = entry.parse().unwrap();
            Trusted::take_from(&mut table, Path::new("/c")).unwrap()
        };
        let trusted = trust(text.as_bytes());
        let (applied, note) = read_settings(dir.path(), &trusted);
        let applied = applied.expect("trusted: its keys apply");
        assert_eq!(applied.user.as_deref(), Some("root"));
        assert_eq!(applied.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(applied.ports.iter().map(|p| p.port).collect::<Vec<_>>(), [8000]);
        let post = applied.post_create.expect("its setup command applies");
        assert_eq!(
            (post.argv.join(" "), post.user),
            ("/bin/sh -c make".into(), Some("root".into()))
        );
        let note = note.unwrap();
        assert!(note.contains("sets capAdd, which berth does not apply"), "{note}");
        assert!(!note.contains("berth trust"), "{note}");
        // One byte changed (by the agent, say): untrusted again.
        std::fs::write(&file, format!("{text} ")).unwrap();
        assert_eq!(read_settings(dir.path(), &trusted).0, None);
        let allows = trust_allows(&file).join(", ");
        assert!(allows.starts_with("remoteUser = \"root\""), "{allows}");
        assert!(
            allows.contains("postCreateCommand = /bin/sh -c make (run once"),
            "{allows}"
        );
    }
}
