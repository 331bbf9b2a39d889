//! The `.devcontainer/devcontainer.json` convention: when berth.toml names no
//! image, the image a project's dev container uses is the one its jobs run in.
//! The file is JSON with comments and trailing commas (JSONC), read with
//! `json5`, which accepts both.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Deserialize)]
struct DevContainer {
    image: Option<String>,
}

/// The `image` of the workspace's devcontainer.json and the file's path;
/// `None` when there is no file, it does not parse, or it names no image
/// (a `build.dockerfile` one is not built by berth).
pub fn read_devcontainer(workspace: &Path) -> Option<(String, PathBuf)> {
    let candidates = [
        workspace.join(".devcontainer/devcontainer.json"),
        workspace.join(".devcontainer.json"),
    ];
    for path in candidates {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        match json5::from_str::<DevContainer>(&text) {
            Ok(DevContainer { image: Some(image) }) if !image.trim().is_empty() => {
                return Some((image.trim().to_string(), path));
            }
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "devcontainer.json does not parse; ignored");
                return None;
            }
        }
    }
    None
}
