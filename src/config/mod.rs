//! Configuration: built-in defaults, then the user's own config, then the
//! project's `berth.toml`, then `BERTH_*` environment variables, then
//! command-line flags, each layer overriding the one before. [`Config`]
//! remembers where every value came from so that `berth config` can say it.
//!
//! Every key is one row of the table in `keys.rs`, which generates `Layer`
//! (one layer, the shape of `berth.toml`), `Config` (the effective values,
//! flat fields: `config.max_jobs`), their defaults, the merge, the
//! `BERTH_*` reading and the `berth config` lines (the macro is in
//! `table.rs`). The constants, checks and helpers the rows use live in the
//! topic files: `instance`, `jobs`, `history`, `container`, `project`,
//! `layers`, `safety`; `loosen` says which project values need trust;
//! `reference` writes the manual's table of keys from the rows. This file
//! loads the layers in order and parses the files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::trust::Trusted;

mod container;
mod history;
mod instance;
mod jobs;
mod keys;
mod layers;
mod loosen;
mod project;
mod reference;
pub mod safety;
mod table;
#[cfg(test)]
mod tests;

pub use container::{
    DEFAULT_CPUS, DEFAULT_EGRESS_ALLOW, DEFAULT_ENGINE_PATIENCE_SECS, DEFAULT_IMAGE, DEFAULT_MAX_CHILDREN,
    DEFAULT_MEMORY, DEFAULT_PIDS, DEFAULT_PULL_TIMEOUT_SECS, NOBODY, caller_user, validate_user,
};
pub use history::{DEFAULT_KEEP_DAYS, DEFAULT_KEEP_RUNS};
pub use instance::{
    DEFAULT_DAEMON_IDLE_SECS, DEFAULT_INSTANCE, DEFAULT_MAX_JOBS, DEFAULT_MAX_QUEUED, DEFAULT_MCP_IDLE_SECS,
    Recovery, validate_instance,
};
pub use jobs::{
    DEFAULT_GRACE_SECS, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_SECS, DEFAULT_WAIT_SECS,
    MIN_MAX_OUTPUT_BYTES, SizeValue,
};
pub use keys::{Config, Layer};
pub use layers::{
    DEFAULT_AGENT_WRITE, DEFAULT_APPLY_MAX_DELETES, DEFAULT_LAYER_BYTES, DEFAULT_LAYER_DAYS, DEFAULT_WRITE,
};
pub use project::CONFIG_FILE;
pub(crate) use project::find_config_file;
pub use reference::reference_markdown;
pub use safety::{BlockedPattern, SafetyConfig, SafetyLayer};

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag => f.write_str("flag"),
        }
    }
}

impl Config {
    /// Load: defaults ← `berth.toml` (found from `start` upwards, or `$BERTH_CONFIG`)
    /// ← `BERTH_*` env ← `flags`.
    pub fn load(start: &Path, flags: Layer) -> Result<Self> {
        Self::load_with(start, flags, |name| std::env::var(name).ok())
    }

    /// [`Config::load`] with the `BERTH_*` variables read through `env`
    /// (a caller's variables, sent with its request, instead of this process's).
    ///
    /// Layers: defaults ← the user's own config (`~/.config/berth/config.toml`,
    /// always trusted) ← the project's `berth.toml` ← `BERTH_*` ← `flags`. A
    /// value of the project file that loosens the sandbox applies only when
    /// the user trusts the file (`berth trust`); otherwise the user's value
    /// stays and the key is listed in [`Config::untrusted`].
    pub fn load_with(start: &Path, flags: Layer, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        // Without a config file the caller's directory is the workspace.
        let mut config = Config {
            workspace: start.to_path_buf(),
            ..Default::default()
        };
        if let Some(path) = crate::trust::user_config_path(&env) {
            if let Some((layer, trusted)) = read_user_config(&path)? {
                config.apply(layer, |_| Source::File(path.clone()))?;
                config.trusted = trusted;
            }
            config.user_file = Some(path);
        }
        let baseline = config.clone();
        let file = match env("BERTH_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Some(start.join(p)),
            None => find_config_file(start),
        };
        // The variable is the user's say too, and is needed before the file is read.
        let symlinks = config.project_symlinks
            || env("BERTH_PROJECT_SYMLINKS").is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes"));
        let project = file.and_then(|path| config.apply_project(path, symlinks));
        config.apply(keys::env_layer(&env)?, |k| Source::Env(table::env_name(k)))?;
        config.apply(flags, |_| Source::Flag)?;
        if let Some((path, bytes, safety)) = project {
            loosen::settle(&mut config, &baseline, &path, &bytes, safety.as_ref());
            config.project_file = Some(path);
        }
        Ok(config)
    }

    /// Apply the project file at `path`: its path, bytes and `[safety]` for
    /// the trust check. A file berth cannot use (malformed, a symlink, a bad
    /// value) is left out whole and named in `project_refusal`: jobs are
    /// refused with that line, every other command works on.
    fn apply_project(
        &mut self,
        path: PathBuf,
        symlinks: bool,
    ) -> Option<(PathBuf, Vec<u8>, Option<SafetyLayer>)> {
        if !symlinks && let Some(to) = crate::trust::symlinked(&path) {
            self.project_refusal = Some(format!(
                "`{}` is a symlink (to {}); berth reads project files only where they are: replace it with a regular file, or set project_symlinks = true in your own config",
                path.display(),
                to.display()
            ));
            self.project_file = Some(path);
            return None;
        }
        let before = self.clone();
        let applied = read_project(&path).and_then(|(bytes, mut layer)| {
            // A config file's directory is the default workspace root, and a
            // relative workspace in it is relative to it.
            if let Some(dir) = path.parent() {
                self.workspace = dir.to_path_buf();
                self.sources.insert("workspace", Source::File(path.clone()));
                layer.workspace = layer.workspace.map(|w| dir.join(w));
            }
            let safety = layer.safety.clone();
            self.apply(layer, |_| Source::File(path.clone()))?;
            Ok((bytes, safety))
        });
        match applied {
            Ok((bytes, safety)) => Some((path, bytes, safety)),
            Err(e) => {
                *self = before;
                self.project_refusal = Some(format!("{e}; fix the file (`berth config` shows what applies)"));
                self.project_file = Some(path);
                None
            }
        }
    }

    /// The `uid:gid` (or `root`) container jobs run as (`container.rs`).
    pub fn container_user(&self) -> String {
        container::container_user(&self.user, &self.workspace)
    }

    /// Whether `runner = "auto"` may fall back to the host when no engine
    /// answers, for an agent (`agent`) or the user. Only the user's own say
    /// (their config, `BERTH_FALLBACK`, a flag) turns it on for agents; the
    /// default is on for the user and off for agents, and a project file
    /// may only turn it off (the job writing it must not gain a host job).
    pub fn fallback_allowed(&self, agent: bool) -> bool {
        match self.sources.get("fallback") {
            None | Some(Source::Default) => !agent,
            Some(Source::File(p)) if self.user_file.as_ref() != Some(p) => self.fallback && !agent,
            Some(_) => self.fallback,
        }
    }

    /// `key = value  (source)` lines for `berth config`.
    pub fn describe(&self) -> Vec<(String, String, String)> {
        self.describe_rows()
            .into_iter()
            .map(|(name, key, v)| {
                let src = self.sources.get(key).cloned().unwrap_or(Source::Default);
                (name.to_string(), v, src.to_string())
            })
            .collect()
    }
}

/// A project file's bytes and layer.
fn read_project(path: &Path) -> Result<(Vec<u8>, Layer)> {
    let bytes = crate::trust::read_capped(path)?;
    let layer = parse_toml(path, &bytes)?;
    Ok((bytes, layer))
}

/// The user's own config: its settings and its `[trust]` table; `None` when
/// there is no such file.
fn read_user_config(path: &Path) -> Result<Option<(Layer, Trusted)>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = crate::trust::read_capped(path)?;
    let mut table: toml::Table = parse_toml(path, &bytes)?;
    let trusted = Trusted::take_from(&mut table, path)?;
    let layer = Layer::deserialize(toml::Value::Table(table)).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: quiet(e.message()),
    })?;
    Ok(Some((layer, trusted)))
}

/// Parse a config file's bytes. The error names the file and the place
/// (line, column) but never quotes the file: a caller may point
/// `BERTH_CONFIG` at a file it cannot read itself (`/etc/shadow`), and the
/// manager must not hand its first line back.
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T> {
    let fail = |message: String| Error::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| fail("not a UTF-8 text file".into()))?;
    toml::from_str(text).map_err(|e| {
        let place = e.span().map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {col}: ")
        });
        fail(format!("{}{}", place.unwrap_or_default(), quiet(e.message())))
    })
}

/// A parser's message with every quoted piece of the file dropped, except
/// names that look like config keys (`unknown field `max_jobz``).
fn quiet(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let mut out = String::new();
    for (i, part) in first.split('`').enumerate() {
        let keyish = !part.is_empty()
            && part.len() <= 40
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
        if i % 2 == 0 {
            out.push_str(part);
        } else if keyish {
            out.push('`');
            out.push_str(part);
            out.push('`');
        } else {
            out.push_str("`…`");
        }
    }
    out.chars().take(300).collect()
}
