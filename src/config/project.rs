//! The project's side of the configuration: its `berth.toml` (found from
//! the caller's directory upwards), the workspace it sets, `berth test` and
//! `berth build`'s commands, and the image recipe (`[image] dockerfile`)
//! whose paths are relative to the file that names it.

use std::path::{Path, PathBuf};

use super::{Config, Source};
use crate::error::Result;
use crate::model::{ImageValue, ProjectBuild};

/// Name of the project config file.
pub const CONFIG_FILE: &str = "berth.toml";

/// The nearest `berth.toml` at or above `start`.
pub(crate) fn find_config_file(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|p| p.is_file())
}

impl Config {
    pub fn with_workspace(mut self, p: impl Into<PathBuf>) -> Self {
        self.workspace = p.into();
        self
    }
}

/// `image`: a name replaces any recipe; a recipe keeps the name (the image
/// a build falls back to) and is read relative to the file that holds it.
pub(super) fn apply_image(c: &mut Config, v: ImageValue, from: &Source) -> Result<()> {
    match v {
        ImageValue::Name(name) => {
            c.image = name;
            c.image_build = None;
        }
        ImageValue::Build(table) => {
            // Only a file can hold a table; its paths are relative to it.
            let file = match from {
                Source::File(p) => p.clone(),
                _ => c.workspace.join(CONFIG_FILE),
            };
            c.image_build = Some(ProjectBuild::from_table(table, &file));
        }
    }
    Ok(())
}

/// `image` in `berth config`: the name, or the recipe that is built.
pub(super) fn describe_image(c: &Config) -> String {
    match &c.image_build {
        Some(b) => format!("(build {})", b.dockerfile.display()),
        None => c.image.clone(),
    }
}

/// A command that is detected from the project when unset.
pub(super) fn or_detect(command: &Option<String>) -> String {
    command.clone().unwrap_or_else(|| "(detect)".into())
}
