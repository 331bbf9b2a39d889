//! The `.devcontainer/devcontainer.json` convention: when berth.toml names no
//! image, the image a project's dev container uses is the one its jobs run in:
//! its `image`, or the one its `build.dockerfile` (+ `build.context`,
//! `build.args`) builds. The file is JSON with comments and trailing commas
//! (JSONC), read with `json5`, which accepts both. Paths in `build` are
//! relative to the file's directory, the context defaulting to it.

use std::collections::BTreeMap;
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
}

/// The image (or build) of the workspace's devcontainer.json and the file's
/// path; `None` when there is no file, it does not parse, or it names neither.
/// A file over the config size cap is not read (a warning says so).
pub fn read_devcontainer(workspace: &Path, trust: &Trusted) -> Option<(DevImage, PathBuf)> {
    let candidates = [
        workspace.join(".devcontainer/devcontainer.json"),
        workspace.join(".devcontainer.json"),
    ];
    for path in candidates {
        if !path.is_file() {
            continue;
        }
        let bytes = match crate::trust::read_capped(&path) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "devcontainer.json not read; ignored");
                return None;
            }
        };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let trusted = trust.allows(&real, &bytes);
        let text = String::from_utf8_lossy(&bytes);
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
